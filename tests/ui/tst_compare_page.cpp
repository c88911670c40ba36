// Compare page, offscreen: the table equals core::compareRuns' figures on a fixture database (values,
// best per row, deltas, and again after choosing another baseline); the bar charts; the note for
// fewer than two runs; CSV copy; an empty database, a missing run and a cancelled comparison.
#include <QAbstractItemModelTester>
#include <QApplication>
#include <QClipboard>
#include <QComboBox>
#include <QTableView>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>

#include "core/analysis/comparison.h"
#include "tests/common/test_support.h"
#include "tests/ui/ui_fixture.h"
#include "ui/charts/stacked_bar_chart.h"
#include "ui/charts/bar_chart.h"
#include "ui/models/comparison_model.h"
#include "ui/pages/compare_page.h"

using namespace shardscope;
using ui::ComparisonModel;

namespace {

struct Db {
  QTemporaryDir dir;
  std::string path;
  std::vector<core::RunId> runs;
};

void makeDb(Db& db) {
  db.path = test::pathIn(db.dir, "runs.db");
  core::TraceStore store(db.path);
  test::RunSpec s;
  s.name = "ddp";
  s.tokensPerS = 1710;
  s.initS = 0.8;
  db.runs.push_back(test::writeRun(store, s));
  s.name = "fsdp";
  s.strategy = "fsdp";
  s.stepNs = 9'000'000;
  s.commNs = 4'500'000;
  s.peakBytes = 80ll << 20;
  s.tokensPerS = 1900;
  s.initS = 0.36;
  db.runs.push_back(test::writeRun(store, s));
  s.name = "zero3";
  s.strategy = "zero3";
  s.stepNs = 8'000'000;
  s.commStartNs = 3'000'000;
  s.commNs = 2'000'000;
  s.peakBytes = 110ll << 20;
  s.tokensPerS = 2066;
  s.initS = 0.31;
  db.runs.push_back(test::writeRun(store, s));
}

QList<core::RunId> qlist(const std::vector<core::RunId>& v) { return QList<core::RunId>(v.begin(), v.end()); }

// Every figure of `c` that some run has appears in the model with the same value, delta and best.
void compareWithCore(const ui::ComparePage& page, const core::Comparison& c) {
  const ComparisonModel* m = page.model();
  QCOMPARE(m->columnCount(), 1 + static_cast<int>(c.runs.size()));
  int shown = 0;
  for (const auto& row : c.rows) {
    bool any = false;
    for (const auto& v : row.values) any = any || v.has_value();
    const int r = m->rowOfKey(QString::fromStdString(row.key));
    if (!any) {
      QCOMPARE(r, -1);
      continue;
    }
    ++shown;
    QVERIFY2(r >= 0, row.key.c_str());
    for (std::size_t i = 0; i < c.runs.size(); ++i) {
      const QModelIndex idx = m->index(r, static_cast<int>(i) + 1);
      const QVariant exact = m->data(idx, ComparisonModel::ExactValueRole);
      QCOMPARE(exact.isValid(), row.values[i].has_value());
      if (row.values[i]) {
        QCOMPARE(exact.toDouble(), *row.values[i]);  // the same double, not a rounded one
        QVERIFY(m->data(idx).toString().startsWith(ComparisonModel::formatValue(row.key, *row.values[i])));
      }
      const QVariant delta = m->data(idx, ComparisonModel::DeltaPctRole);
      const bool expectDelta = i != c.baseline && row.deltaPct[i].has_value();
      QCOMPARE(delta.isValid(), expectDelta);
      if (expectDelta) {
        QCOMPARE(delta.toDouble(), *row.deltaPct[i]);
        // Shares change in percentage points (core's deltaPp), the rest in percent.
        const QString expected =
            row.deltaPp[i] ? ComparisonModel::formatDeltaPp(*row.deltaPp[i]) : ComparisonModel::formatDelta(*row.deltaPct[i]);
        QVERIFY2(m->data(idx).toString().endsWith(expected), qPrintable(m->data(idx).toString()));
        // Coloured as a change only beyond the runs' step-to-step spread.
        if (row.withinNoise[i])
          QCOMPARE(m->data(idx, ComparisonModel::DeltaStateRole).toInt(), int(ComparisonModel::DeltaState::Same));
      }
      QCOMPARE(m->data(idx, ComparisonModel::IsBestRole).toBool(), row.best && *row.best == i);
    }
  }
  QCOMPARE(m->rowCount(), shown);
}

}  // namespace

class TestComparePage : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void tableEqualsCoreFigures() {
    Db db;
    makeDb(db);
    ui::ComparePage page;
    QCOMPARE(page.pageId(), QString("compare"));
    QAbstractItemModelTester tester(page.model(), QAbstractItemModelTester::FailureReportingMode::QtTest);
    page.resize(1100, 800);
    page.show();
    QSignalSpy busy(&page, &ui::Page::busyChanged);
    page.setContext(QString::fromStdString(db.path), qlist(db.runs));
    QVERIFY(page.busy());
    QTRY_VERIFY_WITH_TIMEOUT(!page.busy(), 20000);
    QVERIFY(page.errorText().isEmpty());
    QVERIFY(busy.size() >= 2);
    QVERIFY(page.noteText().isEmpty());  // three runs: no note

    core::TraceStore store(db.path, core::Database::Mode::ReadOnly);
    const core::Comparison c0 = core::compareRuns(store, db.runs, 0);
    compareWithCore(page, c0);
    // The stacked step of each run: compute + exposed + other + idle is its mean step time.
    const auto* stack = page.breakdownChart();
    QCOMPARE(stack->groupCount(), static_cast<int>(db.runs.size()));
    for (int g = 0; g < stack->groupCount(); ++g) {
      const auto& m = c0.figures.at(static_cast<std::size_t>(g)).means;
      QVERIFY2(std::abs(static_cast<double>(stack->totalBytes(g)) - m.stepNs) <= 4.0,
               qPrintable(QString::number(stack->totalBytes(g)) + " vs " + QString::number(m.stepNs)));
    }
    // What differs in the runs' configurations is shown, key by key, as core finds it.
    for (std::size_t k = 0; k < std::min<std::size_t>(c0.configDiff.size(), 12); ++k)
      QVERIFY2(page.configDiffText().contains(QString::fromStdString(c0.configDiff[k].key)), qPrintable(page.configDiffText()));
    if (c0.configDiff.empty()) QVERIFY(page.configDiffText().isEmpty());
    // How the step time was measured is said under the table, as core describes it.
    QVERIFY2(page.measuredText().contains(QString::fromStdString(core::describeStepTime(c0.figures.at(0)))),
             qPrintable(page.measuredText()));
    // The fixture makes rows differ: zero3 is the fastest, fsdp the smallest.
    const int step = page.model()->rowOfKey("step_time_ms");
    QVERIFY(page.model()->data(page.model()->index(step, 3), ComparisonModel::IsBestRole).toBool());
    const int mem = page.model()->rowOfKey("peak_allocated_gib");
    QVERIFY(page.model()->data(page.model()->index(mem, 2), ComparisonModel::IsBestRole).toBool());
    QCOMPARE(page.baselineCombo()->count(), 3);
    QVERIFY(page.baselineCombo()->itemText(0).contains("ddp"));

    // Another baseline: deltas as core computes them for that baseline; best unchanged.
    page.setBaselineIndex(2);
    QCOMPARE(page.model()->baseline(), std::size_t(2));
    const core::Comparison c2 = core::compareRuns(store, db.runs, 2);
    compareWithCore(page, c2);
    QVERIFY(page.model()->headerData(3, Qt::Horizontal).toString().contains("baseline"));
    page.baselineCombo()->setCurrentIndex(1);  // the combo itself
    compareWithCore(page, core::compareRuns(store, db.runs, 1));

    // Charts: one per figure, values as in the table, the best bar highlighted.
    QCOMPARE(page.charts().size(), std::size_t(4));
    const auto* stepChart = page.charts()[0];
    const auto& stepRow = c0.rows[0];
    QCOMPARE(stepRow.key, std::string("step_time_ms"));
    QCOMPARE(stepChart->barCount(), std::size_t(3));
    for (std::size_t i = 0; i < 3; ++i) QCOMPARE(*stepChart->plottedValue(i), *stepRow.values[i]);
    QCOMPARE(stepChart->highlighted(), stepRow.best);
    QCOMPARE(stepChart->valueLabel(0), ComparisonModel::formatValue("step_time_ms", *stepRow.values[0]));
    const auto* tpsChart = page.charts()[1];
    QCOMPARE(*tpsChart->highlighted(), std::size_t(2));
    QCOMPARE(*tpsChart->plottedValue(2), 2066.0);
    const auto* memChart = page.charts()[2];
    for (const auto& row : c0.rows)
      if (row.key == "peak_allocated_gib") {
        QCOMPARE(memChart->highlighted(), row.best);
        // Plotted in MiB (the values are below 1 GiB).
        QVERIFY(std::abs(*memChart->plottedValue(1) - *row.values[1] * 1024.0) < 1e-9);
      }

    // CSV: a header and a row per shown figure, exact values.
    const QStringList lines = page.csv().trimmed().split('\n');
    QCOMPARE(lines.size(), 1 + page.model()->rowCount());
    QVERIFY(lines[1].startsWith(
        QString("\"step time (ms, mean of counted steps)\",step_time_ms,%1,").arg(QString::number(*stepRow.values[0], 'g', 17))));
    QApplication::clipboard()->clear();
    page.copyCsv();
    QCOMPARE(QApplication::clipboard()->text(), page.csv());
    // Ctrl+C in the table does the same.
    QApplication::clipboard()->clear();
    page.activateWindow();
    page.table()->setFocus();
    QVERIFY(QTest::qWaitForWindowActive(&page));
    QTest::keySequence(page.table(), QKeySequence::Copy);
    QCOMPARE(QApplication::clipboard()->text(), page.csv());
  }

  void noteWithFewerThanTwoRuns() {
    Db db;
    makeDb(db);
    ui::ComparePage page;
    page.setContext(QString::fromStdString(db.path), {});
    QVERIFY(!page.busy());
    QVERIFY(page.noteText().contains("two or more"));
    QCOMPARE(page.model()->rowCount(), 0);
    page.setContext(QString::fromStdString(db.path), {db.runs[1]});
    QTRY_VERIFY_WITH_TIMEOUT(!page.busy(), 20000);
    QVERIFY(page.noteText().contains("one run"));
    QCOMPARE(page.model()->columnCount(), 2);  // still shows the run's figures
    QVERIFY(!page.baselineCombo()->isEnabled());
    page.setContext(QString(), {});
    QVERIFY(!page.noteText().isEmpty());
  }

  void emptyDatabaseAndMissingRun() {
    QTemporaryDir dir;
    const std::string path = test::pathIn(dir, "empty.db");
    { core::TraceStore store(path); }
    ui::ComparePage page;
    page.setContext(QString::fromStdString(path), {});
    QVERIFY(!page.busy());
    QSignalSpy errors(&page, &ui::Page::errorMessage);
    page.setContext(QString::fromStdString(path), {core::RunId{41}, core::RunId{42}});
    QTRY_VERIFY_WITH_TIMEOUT(!page.busy(), 20000);
    QVERIFY2(page.errorText().contains("no run with id 41"), qPrintable(page.errorText()));
    QCOMPARE(errors.size(), 1);
    QCOMPARE(page.model()->rowCount(), 0);
    // A file that is not a database: an error, not a crash.
    const std::string bad = test::writeFile(dir, "bad.db", std::string(4096, 'x'));
    page.setContext(QString::fromStdString(bad), {core::RunId{1}, core::RunId{2}});
    QTRY_VERIFY_WITH_TIMEOUT(!page.busy(), 20000);
    QVERIFY(!page.errorText().isEmpty());
  }

  void cancelledComparison() {
    Db db;
    makeDb(db);
    ui::ComparePage page;
    QSignalSpy status(&page, &ui::Page::statusMessage);
    page.setContext(QString::fromStdString(db.path), qlist(db.runs));
    QVERIFY(page.busy());
    page.cancelLoad();
    QVERIFY(!page.busy());
    QTest::qWait(300);  // the worker ends; its result must not be shown
    QCOMPARE(page.model()->rowCount(), 0);
    QVERIFY(page.errorText().isEmpty());
    QVERIFY(status.last().at(0).toString().contains("cancelled"));
    // A new context after a cancel loads normally; switching contexts mid-load drops the old result.
    page.setContext(QString::fromStdString(db.path), {db.runs[0], db.runs[1]});
    page.setContext(QString::fromStdString(db.path), {db.runs[2], db.runs[0]});
    QTRY_VERIFY_WITH_TIMEOUT(!page.busy(), 20000);
    QCOMPARE(page.model()->comparison().runs, (std::vector<core::RunId>{db.runs[2], db.runs[0]}));
    // Destroyed while loading: no crash, no late delivery.
    auto* p = new ui::ComparePage;
    p->setContext(QString::fromStdString(db.path), qlist(db.runs));
    delete p;
    QTest::qWait(200);
  }
};

QTEST_MAIN(TestComparePage)
#include "tst_compare_page.moc"
