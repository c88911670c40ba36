// The strategy table on the Compare page: StrategyTableModel under QAbstractItemModelTester with the
// three fine-tuning runs (tests/common/fine_tuning_runs.h): core's cells, "n/a" with a tooltip that
// says why, and the page showing it above the comparison with describe() carrying core's JSON.
#include <QAbstractItemModelTester>
#include <QHeaderView>
#include <QJsonArray>
#include <QJsonObject>
#include <QTableView>
#include <QTemporaryDir>
#include <QtTest>

#include "core/analysis/comparison.h"
#include "tests/common/fine_tuning_runs.h"
#include "tests/common/test_support.h"
#include "ui/models/strategy_table_model.h"
#include "ui/pages/compare_page.h"

using namespace shardscope;
using core::StrategyColumn;
using ui::StrategyTableModel;

class TestStrategyTableModel : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;
  std::string db_;
  test::FineTuningRuns runs_;
  std::vector<core::RunId> ids_;

 private Q_SLOTS:
  void initTestCase() {
    db_ = test::pathIn(dir_, "ft.db");
    core::TraceStore store(db_);
    runs_ = test::writeFineTuningRuns(store);
    ids_ = {runs_.lora, runs_.full, runs_.imported};
  }

  void modelShowsCoreCells() {
    core::TraceStore store(db_, core::Database::Mode::ReadOnly);
    const core::Comparison c = core::compareRuns(store, ids_, 0);
    StrategyTableModel m;
    QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::QtTest);
    QCOMPARE(m.rowCount(), 0);
    QCOMPARE(m.columnCount(), 0);
    m.setTable(c.strategies);
    QCOMPARE(m.rowCount(), 3);
    QCOMPARE(m.columnCount(), 1 + static_cast<int>(core::strategyColumns().size()));
    QCOMPARE(m.headerData(0, Qt::Horizontal).toString(), QString("run"));
    QCOMPARE(m.data(m.index(0, 0)).toString(), QStringLiteral("fsdp lora #%1").arg(runs_.lora.value()));

    auto cell = [&](int row, StrategyColumn col, int role = Qt::DisplayRole) {
      return m.data(m.index(row, m.columnOf(col)), role);
    };
    QCOMPARE(m.headerData(m.columnOf(StrategyColumn::PeakMemoryGib), Qt::Horizontal).toString(),
             QString("peak GiB/rank"));  // CPU runs (host memory)
    QCOMPARE(cell(0, StrategyColumn::Strategy).toString(), QString("fsdp"));
    QCOMPARE(cell(0, StrategyColumn::Tuning).toString(), QString("LoRA r=8"));
    QCOMPARE(cell(0, StrategyColumn::TokensPerSecond).toString(), QString("102,400"));
    QCOMPARE(cell(0, StrategyColumn::TokensPerSecond, StrategyTableModel::ExactValueRole).toDouble(), 102400.0);
    QCOMPARE(cell(0, StrategyColumn::PeakMemoryGib, StrategyTableModel::ExactValueRole).toDouble(), 97.0 / 1024.0);
    QCOMPARE(cell(0, StrategyColumn::TrainableParams).toString(), QString("1,234,567"));
    QCOMPARE(cell(0, StrategyColumn::SkippedSteps).toString(), QString("3"));
    QCOMPARE(cell(1, StrategyColumn::TrainableParams).toString(), QString("125,248"));
    QCOMPARE(cell(1, StrategyColumn::CheckpointSaveSeconds).toString(), QString("1.25"));
    QCOMPARE(cell(1, StrategyColumn::CommPct).toString(), QString("40.0"));
    // n/a cells: the text, no exact value, and a tooltip saying why.
    QCOMPARE(cell(0, StrategyColumn::CheckpointSaveSeconds).toString(), QString("n/a"));
    QVERIFY(!cell(0, StrategyColumn::CheckpointSaveSeconds, StrategyTableModel::ExactValueRole).isValid());
    QVERIFY(!cell(0, StrategyColumn::CheckpointSaveSeconds, StrategyTableModel::KnownRole).toBool());
    QVERIFY2(cell(0, StrategyColumn::CheckpointSaveSeconds, Qt::ToolTipRole).toString().contains("save_checkpoint off"),
             qPrintable(cell(0, StrategyColumn::CheckpointSaveSeconds, Qt::ToolTipRole).toString()));
    for (StrategyColumn col : {StrategyColumn::InitSeconds, StrategyColumn::TrainableParams, StrategyColumn::SkippedSteps}) {
      QCOMPARE(cell(2, col).toString(), QString("n/a"));
      const QString tip = cell(2, col, Qt::ToolTipRole).toString();
      QVERIFY2(tip.contains("n/a") && tip.contains("imported trace"), qPrintable(tip));
    }
    QCOMPARE(cell(2, StrategyColumn::CommPct).toString(), QString("37.5"));
    QVERIFY(cell(2, StrategyColumn::CommPct, StrategyTableModel::KnownRole).toBool());
    m.clear();
    QCOMPARE(m.rowCount(), 0);
  }

  void comparePageShowsIt() {
    ui::ComparePage page;
    page.resize(1200, 800);
    page.show();
    page.setContext(QString::fromStdString(db_), QList<core::RunId>(ids_.begin(), ids_.end()));
    QTRY_VERIFY_WITH_TIMEOUT(!page.busy(), 20000);
    QVERIFY(page.errorText().isEmpty());
    QVERIFY(page.strategyTable()->isVisible());
    QCOMPARE(page.strategyTable()->model(), page.strategyModel());
    const StrategyTableModel* m = page.strategyModel();
    QCOMPARE(m->rowCount(), 3);
    QCOMPARE(m->data(m->index(1, m->columnOf(StrategyColumn::Strategy))).toString(), QString("zero3"));
    // Every row visible without scrolling.
    QVERIFY(page.strategyTable()->height() >= page.strategyTable()->verticalHeader()->length());
    const QJsonObject d = page.describe();
    const QJsonArray t = d.value("strategy_table").toArray();
    QCOMPARE(t.size(), 3);
    QCOMPARE(t[1].toObject().value("trainable_params").toDouble(), 125248.0);
    QVERIFY(t[2].toObject().value("init_time_s").isNull());
    QVERIFY(t[2].toObject().value("not_known").toObject().value("init_time_s").toString().contains("imported"));
  }
};

QTEST_MAIN(TestStrategyTableModel)
#include "tst_strategy_table_model.moc"
