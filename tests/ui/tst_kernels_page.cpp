// The Kernels page, offscreen: on a two-rank GPU job (generated Kineto traces, imported) and a CPU run
// of our runtime (written straight into the store), its tables show exactly core::computeTopOps, its
// charts HTA's figures of analyzeRun; the models pass QAbstractItemModelTester; the filter applies to
// both tables; the per-rank columns follow the chooser; describe() lists the rows shown; the product
// is computed once per run and shared through the session's cache.
#include <QAbstractItemModelTester>
#include <QComboBox>
#include <QElapsedTimer>
#include <QJsonArray>
#include <QLabel>
#include <QLineEdit>
#include <QSignalSpy>
#include <QTableView>
#include <QTemporaryDir>
#include <QtTest>

#include "core/analysis/hta_metrics.h"
#include "core/analysis/top_ops.h"
#include "core/import/kineto_importer.h"
#include "core/storage/trace_store.h"
#include "tests/common/test_support.h"
#include "tests/tools/kineto_generator.h"
#include "tests/ui/ui_fixture.h"
#include "ui/charts/bar_chart.h"
#include "ui/charts/stacked_bar_chart.h"
#include "ui/models/collectives_model.h"
#include "ui/models/top_ops_model.h"
#include "ui/pages/kernels_page.h"
#include "ui/pages/page_factory.h"

using namespace shardscope;
using core::TimeNs;

namespace {

bool waitIdle(ui::KernelsPage& p, int ms = 30000) {
  QElapsedTimer t;
  t.start();
  while (p.busy() && t.elapsed() < ms) QTest::qWait(10);
  return !p.busy();
}

// The model's cells against core's rows, in the model's order.
void compareModel(const ui::TopOpsModel* m, const core::TopOpsTable& t, const std::vector<int>& ranks) {
  using C = ui::TopOpsModel::Column;
  QCOMPARE(m->rowCount(), static_cast<int>(t.rows.size()));
  QCOMPARE(m->columnCount(), m->firstRankColumn() + static_cast<int>(ranks.size()));
  for (int i = 0; i < m->rowCount(); ++i) {
    const core::TopOpRow& e = t.rows[static_cast<std::size_t>(i)];
    auto cell = [&](C c, int role = ui::TopOpsModel::SortRole) { return m->data(m->index(i, m->columnOf(c)), role); };
    QCOMPARE(cell(C::Name, ui::TopOpsModel::NameRole).toString(), e.other ? QString() : QString::fromStdString(e.name));
    QCOMPARE(cell(C::Count).toLongLong(), e.count);
    QCOMPARE(cell(C::Time).toLongLong(), e.timeNs);
    QCOMPARE(cell(C::Mean).toLongLong(), e.meanNs);
    QCOMPARE(cell(C::Max).toLongLong(), e.maxNs);
    QCOMPARE(cell(C::Share).toDouble(), e.share);
    QCOMPARE(cell(C::Time, Qt::DisplayRole).toString(), ui::units::ms(e.timeNs));
    QCOMPARE(cell(C::Share, Qt::DisplayRole).toString(), ui::units::percent(e.share));
    for (std::size_t r = 0; r < ranks.size(); ++r)
      QCOMPARE(m->data(m->index(i, m->firstRankColumn() + static_cast<int>(r)), ui::TopOpsModel::SortRole).toLongLong(),
               e.perRankNs[r]);
  }
}

QStringList shownNames(const QAbstractItemModel* proxy) {
  QStringList out;
  for (int i = 0; i < proxy->rowCount(); ++i) out << proxy->index(i, 0).data(ui::TopOpsModel::NameRole).toString();
  return out;
}

}  // namespace

class TestKernelsPage : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    db_ = test::pathIn(dir_, "k.db");
    for (int r = 0; r < 2; ++r) {
      test::KinetoGenOptions o;
      o.events = 6000;
      o.worldSize = 2;
      o.rank = r;
      o.steps = 3;
      o.seed = static_cast<std::uint64_t>(40 + r);
      files_.push_back(test::pathIn(dir_, "rank" + std::to_string(r) + ".json"));
      test::generateKinetoTrace(files_.back(), o);
    }
    core::TraceStore store(db_);
    gpuRun_ = core::importKineto(store, files_).runIds.at(0);
    test::RunSpec spec;
    spec.name = "cpu ddp";
    spec.memorySamples = 0;
    cpuRun_ = test::writeRun(store, spec);
  }

  void registeredAfterCommunication() {
    const auto& ids = ui::pageIds();
    const auto comm = std::find(ids.begin(), ids.end(), QStringLiteral("communication"));
    QVERIFY(comm != ids.end() && comm + 1 != ids.end());
    QCOMPARE(*(comm + 1), QStringLiteral("kernels"));
    QCOMPARE(*(comm + 2), QStringLiteral("estimator"));
    QWidget parent;
    const auto pages = ui::createPages(&parent);
    QCOMPARE(pages.size(), ids.size());
    QCOMPARE(pages[static_cast<std::size_t>(comm + 1 - ids.begin())]->pageId(), QStringLiteral("kernels"));
  }

  // The GPU job: both tables equal computeTopOps, the charts HTA's figures.
  void gpuTablesAndCharts() {
    ui::KernelsPage page;
    page.resize(1400, 1000);
    page.show();
    QSignalSpy busy(&page, &ui::Page::busyChanged);
    page.setContext(QString::fromStdString(db_), {gpuRun_, cpuRun_});
    QVERIFY(page.busy());
    QVERIFY(waitIdle(page));
    QVERIFY2(page.lastError().isEmpty(), qPrintable(page.lastError()));
    QCOMPARE(busy.last().at(0).toBool(), false);
    QCOMPARE(page.currentRun(), gpuRun_);
    QVERIFY(page.runCombo()->isEnabled());

    core::TraceStore store(db_, core::Database::Mode::ReadOnly);
    const core::TopOps expected = core::computeTopOps(store, gpuRun_);
    QCOMPARE(expected.deviceLanes, std::string("GPU streams"));
    QCOMPARE(expected.ranks, (std::vector<int>{0, 1}));
    QVERIFY(expected.kernels.rows.size() >= 3);
    QVERIFY(expected.operators.rows.size() >= 3);
    // Nested operators: aten::linear's self time is less than its inclusive time.
    const auto linear = std::find_if(expected.operators.rows.begin(), expected.operators.rows.end(),
                                     [](const core::TopOpRow& r) { return r.name == "aten::linear"; });
    QVERIFY(linear != expected.operators.rows.end());
    QVERIFY(linear->timeNs < linear->totalNs);
    compareModel(page.kernelsModel(), expected.kernels, expected.ranks);
    compareModel(page.operatorsModel(), expected.operators, expected.ranks);
    QVERIFY(page.kernelsNote().contains("GPU streams"));
    QVERIFY(page.kernelsNote().contains(ui::units::msWithUnit(expected.kernels.timeNs)));
    QVERIFY(page.kernelsNote().contains(ui::units::msWithUnit(expected.kernels.perRankNs[1])));

    // The views list them by time, descending.
    QTableView* kv = page.kernelsView();
    QCOMPARE(kv->model()->rowCount(), static_cast<int>(expected.kernels.rows.size()));
    for (int i = 0; i < kv->model()->rowCount(); ++i)
      QCOMPARE(kv->model()->index(i, 0).data(ui::TopOpsModel::NameRole).toString(),
               QString::fromStdString(expected.kernels.rows[static_cast<std::size_t>(i)].name));

    // HTA: one stacked bar per rank (compute, non-compute, idle), one bar per kernel type.
    const core::HtaFigures hta = core::computeHtaFigures(store, gpuRun_);
    QCOMPARE(page.hta().ranks.size(), hta.ranks.size());
    QCOMPARE(page.temporalChart()->groupCount(), static_cast<int>(hta.ranks.size()));
    QCOMPARE(page.temporalChart()->categoryCount(), 3);
    for (std::size_t r = 0; r < hta.ranks.size(); ++r) {
      QVERIFY(hta.ranks[r].kernelTimeUs > 0);
      QCOMPARE(page.temporalChart()->totalBytes(static_cast<int>(r)),
               (hta.ranks[r].computeUs + hta.ranks[r].nonComputeUs + hta.ranks[r].idleUs) * 1000);
    }
    QCOMPARE(page.kernelTypeChart()->barCount(), hta.kernelTypes.size());
    for (std::size_t k = 0; k < hta.kernelTypes.size(); ++k)
      QCOMPARE(*page.kernelTypeChart()->plottedValue(k), static_cast<double>(hta.kernelTypes[k].sumUs) / 1000.0);

    // describe(): the rows shown, the figures and the chart series.
    const QJsonObject d = page.describe();
    QCOMPARE(d["page"].toString(), QString("kernels"));
    QCOMPARE(d["run"].toDouble(), static_cast<double>(gpuRun_.value()));
    const QJsonArray kr = d["kernels"].toArray();
    QCOMPARE(kr.size(), static_cast<qsizetype>(expected.kernels.rows.size()));
    QCOMPARE(kr[0].toObject()["name"].toString(), QString::fromStdString(expected.kernels.rows[0].name));
    QCOMPARE(kr[0].toObject()["time_ns"].toDouble(), static_cast<double>(expected.kernels.rows[0].timeNs));
    QCOMPARE(kr[0].toObject()["per_rank_ns"].toArray().size(), 2);
    QCOMPARE(d["operators"].toArray().size(), static_cast<qsizetype>(expected.operators.rows.size()));
    QCOMPARE(d["temporal_breakdown"].toArray().size(), static_cast<qsizetype>(hta.ranks.size()));
    QCOMPARE(d["kernel_types"].toArray().size(), static_cast<qsizetype>(hta.kernelTypes.size()));
    QCOMPARE(d["figures"].toArray()[0].toObject()["value"].toDouble(), static_cast<double>(expected.kernels.timeNs));

    // Another run of the selection through the run combo.
    page.showRun(cpuRun_);
    QVERIFY(waitIdle(page));
    QCOMPARE(page.currentRun(), cpuRun_);
    QCOMPARE(page.describe()["run"].toDouble(), static_cast<double>(cpuRun_.value()));
  }

  // One filter over both tables (case-insensitive substring); the other row hides while filtering.
  void filter() {
    ui::KernelsPage page;
    page.setContext(QString::fromStdString(db_), {gpuRun_});
    QVERIFY(waitIdle(page));
    const int kAll = page.kernelsProxy()->rowCount(), oAll = page.operatorsProxy()->rowCount();
    page.filterEdit()->setText(QStringLiteral("NCCL"));
    QVERIFY(page.kernelsProxy()->rowCount() > 0);
    QVERIFY(page.kernelsProxy()->rowCount() < kAll);
    for (const QString& n : shownNames(page.kernelsProxy())) QVERIFY2(n.contains("nccl", Qt::CaseInsensitive), qPrintable(n));
    QCOMPARE(page.operatorsProxy()->rowCount(), 0);  // no operator is called nccl...
    page.filterEdit()->setText(QStringLiteral("aten::add"));
    QVERIFY(page.operatorsProxy()->rowCount() > 0);
    for (const QString& n : shownNames(page.operatorsProxy())) QVERIFY(n.startsWith("aten::add"));
    QCOMPARE(page.kernelsProxy()->rowCount(), 0);
    // describe() lists what is shown.
    const QJsonObject d = page.describe();
    QCOMPARE(d["filter"].toString(), QString("aten::add"));
    QCOMPARE(d["operators"].toArray().size(), static_cast<qsizetype>(page.operatorsProxy()->rowCount()));
    QCOMPARE(d["kernels"].toArray().size(), 0);
    page.filterEdit()->clear();
    QCOMPARE(page.kernelsProxy()->rowCount(), kAll);
    QCOMPARE(page.operatorsProxy()->rowCount(), oAll);
  }

  // The CPU run of our runtime: kernels are the compute spans and the collectives; per-rank columns
  // follow the chooser; HTA's GPU figures are said to be absent.
  void cpuRunAndRankColumns() {
    ui::KernelsPage page;
    page.resize(1200, 900);
    page.show();
    page.setContext(QString::fromStdString(db_), {cpuRun_});
    QVERIFY(waitIdle(page));
    QVERIFY(!page.runCombo()->isEnabled());
    core::TraceStore store(db_, core::Database::Mode::ReadOnly);
    const core::TopOps expected = core::computeTopOps(store, cpuRun_);
    // ui_fixture: per step and rank aten::mm 6 ms (cpu_op, computation) and an all-reduce 3 ms, over
    // the 3 counted steps of 4 (the warm-up step left out, as every per-step figure; issue 46).
    QCOMPARE(expected.kernels.rows.size(), std::size_t(2));
    QCOMPARE(expected.kernels.rows[0].name, std::string("aten::mm"));
    QCOMPARE(expected.kernels.rows[0].timeNs, TimeNs(2 * 3 * 6'000'000));
    QCOMPARE(expected.kernels.rows[1].name, std::string("allreduce"));
    QCOMPARE(expected.kernels.rows[1].perRankNs, (std::vector<TimeNs>{3 * 3'000'000, 3 * 3'000'000}));
    QVERIFY(QString::fromStdString(expected.measuredOver).contains("warm-up"));
    QVERIFY(page.findChild<QLabel*>("kernelsNote") == nullptr ||
            page.findChild<QLabel*>("kernelsNote")->text().contains("warm-up"));
    QCOMPARE(expected.operators.rows.size(), std::size_t(1));
    compareModel(page.kernelsModel(), expected.kernels, expected.ranks);
    compareModel(page.operatorsModel(), expected.operators, expected.ranks);
    QVERIFY(page.findChild<QLabel*>("htaNote")->text().contains("none"));
    QCOMPARE(page.temporalChart()->groupCount(), 0);

    ui::TopOpsModel* m = page.kernelsModel();
    QTableView* v = page.kernelsView();
    const int first = m->firstRankColumn();
    QCOMPARE(m->headerData(first + 1, Qt::Horizontal).toString(), QString("Rank 1 (ms)"));
    QCOMPARE(page.rankColumns(), -1);  // two ranks: every rank shown
    QVERIFY(!v->isColumnHidden(first) && !v->isColumnHidden(first + 1));
    page.setRankColumns(1);
    QVERIFY(v->isColumnHidden(first) && !v->isColumnHidden(first + 1));
    QVERIFY(page.operatorsView()->isColumnHidden(page.operatorsModel()->firstRankColumn()));
    page.setRankColumns(-2);
    QVERIFY(v->isColumnHidden(first) && v->isColumnHidden(first + 1));
    QCOMPARE(page.rankCombo()->count(), 4);  // all, none, rank 0, rank 1
  }

  // Both models (and the filter proxies over them) keep Qt's model contract, the other row included;
  // the other row stays last whichever way a column sorts.
  void modelTester() {
    core::TraceStore store(db_, core::Database::Mode::ReadOnly);
    const core::TopOps small = core::computeTopOps(store, gpuRun_, 3);
    QVERIFY(small.kernels.rows.back().other);
    for (auto kind : {ui::TopOpsModel::Kind::Kernels, ui::TopOpsModel::Kind::Operators}) {
      ui::TopOpsModel model(kind);
      ui::TopOpsFilterProxy proxy;
      proxy.setSourceModel(&model);
      QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
      QAbstractItemModelTester ptester(&proxy, QAbstractItemModelTester::FailureReportingMode::QtTest);
      const core::TopOpsTable& t = kind == ui::TopOpsModel::Kind::Kernels ? small.kernels : small.operators;
      model.setTable(t, small.ranks);
      compareModel(&model, t, small.ranks);
      QCOMPARE(model.columnOf(ui::TopOpsModel::Column::Class) >= 0, kind == ui::TopOpsModel::Kind::Kernels);
      QCOMPARE(model.columnOf(ui::TopOpsModel::Column::Inclusive) >= 0, kind == ui::TopOpsModel::Kind::Operators);
      const int last = model.rowCount() - 1;
      QVERIFY(model.data(model.index(last, 0), ui::TopOpsModel::OtherRole).toBool());
      QVERIFY(model.data(model.index(last, 0)).toString().startsWith("other ("));
      for (auto order : {Qt::AscendingOrder, Qt::DescendingOrder}) {
        proxy.sort(model.columnOf(ui::TopOpsModel::Column::Time), order);
        QVERIFY(proxy.index(proxy.rowCount() - 1, 0).data(ui::TopOpsModel::OtherRole).toBool());
        const qlonglong a =
            proxy.index(0, model.columnOf(ui::TopOpsModel::Column::Time)).data(ui::TopOpsModel::SortRole).toLongLong();
        const qlonglong b =
            proxy.index(1, model.columnOf(ui::TopOpsModel::Column::Time)).data(ui::TopOpsModel::SortRole).toLongLong();
        QVERIFY(order == Qt::AscendingOrder ? a <= b : a >= b);
      }
      proxy.setText(QStringLiteral("zzz-no-such-name"));
      QCOMPARE(proxy.rowCount(), 0);
      proxy.setText(QString());
      QCOMPARE(proxy.rowCount(), model.rowCount());
      model.clear();
      QCOMPARE(model.rowCount(), 0);
    }
  }

  // The top tables are a session product: computed once per run, shared by a reload.
  void cachedOncePerRun() {
    ui::KernelsPage page;
    page.setContext(QString::fromStdString(db_), {gpuRun_});
    QVERIFY(waitIdle(page));
    page.reload();
    QVERIFY(waitIdle(page));
    QCOMPARE(page.session()->cache()->computedCount(ui::KernelsPage::kTopOpsProduct, gpuRun_), 1);
    QCOMPARE(page.session()->cache()->computedCount(ui::RunSession::kAnalysis, gpuRun_), 1);
    // No run selected: the placeholder, nothing described.
    page.setContext(QString::fromStdString(db_), {});
    QCOMPARE(page.currentRun(), core::RunId{});
    QVERIFY(!page.describe().contains("kernels"));
  }

 private:
  QTemporaryDir dir_;
  std::string db_;
  std::vector<std::string> files_;
  core::RunId gpuRun_, cpuRun_;
};

QTEST_MAIN(TestKernelsPage)
#include "tst_kernels_page.moc"
