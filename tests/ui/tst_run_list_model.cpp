// The run browser's model under QAbstractItemModelTester: grouping by source/strategy/status/none,
// in-place refreshes (new runs, status changes that move a run between groups, deletions) keeping
// persistent indexes, and edits (rename, tags, delete) that reach the database.
#include <QAbstractItemModelTester>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include <memory>

#include "core/storage/store_access.h"
#include "core/storage/trace_store.h"
#include "tests/common/test_support.h"
#include "tests/ui/ui_fixture.h"
#include "ui/models/run_list_model.h"

using namespace shardscope;
using ui::RunListModel;

namespace {

core::RunId addRun(core::TraceStore& store, const std::string& name, core::RunSource source, const std::string& strategy,
                   core::RunStatus status) {
  core::Run r;
  r.name = name;
  r.source = source;
  r.strategy = strategy;
  r.status = status;
  r.worldSize = 4;
  return store.createRun(r);
}

QStringList topLabels(const RunListModel& m) {
  QStringList out;
  for (int i = 0; i < m.rowCount(); ++i) out << m.index(i, 0).data().toString();
  return out;
}

}  // namespace

class TestRunListModel : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;
  std::unique_ptr<core::TraceStore> store_;
  core::RunId ddp_, fsdp_, trace_, failed_;

 private Q_SLOTS:
  void init() {
    store_.reset();
    QFile::remove(QString::fromStdString(test::pathIn(dir_, "runs.db")));
    store_ = std::make_unique<core::TraceStore>(test::pathIn(dir_, "runs.db"));
    test::RunSpec spec;
    spec.name = "ddp";
    spec.strategy = "ddp";
    spec.memorySamples = 0;
    ddp_ = test::writeRun(*store_, spec);  // 2 ranks x 4 steps x 3 events
    fsdp_ = addRun(*store_, "fsdp", core::RunSource::Runtime, "fsdp", core::RunStatus::Running);
    trace_ = addRun(*store_, "job42", core::RunSource::Kineto, "", core::RunStatus::Completed);
    failed_ = addRun(*store_, "zero3 oom", core::RunSource::Runtime, "zero3", core::RunStatus::Failed);
  }

  void cleanup() { store_.reset(); }

  void loadsRowsWithCounts() {
    const auto rows = ui::loadRunRows(*store_);
    QCOMPARE(rows.size(), std::size_t(4));
    QCOMPARE(rows[0].run.id, ddp_);
    QCOMPARE(rows[0].ranks, 2);
    QCOMPARE(rows[0].events, std::int64_t(24));
    QCOMPARE(rows[1].events, std::int64_t(0));
  }

  void groupingUnderTester() {
    RunListModel m;
    QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::QtTest);
    m.setRuns(ui::loadRunRows(*store_));
    QVERIFY(m.grouping() == RunListModel::Grouping::Source);
    QCOMPARE(topLabels(m), (QStringList{"Runtime runs (3)", "Imported traces (1)"}));
    QCOMPARE(m.rowCount(m.index(0, 0)), 3);
    QVERIFY(m.isGroup(m.index(0, 0)));
    QCOMPARE(m.flags(m.index(0, 0)) & Qt::ItemIsSelectable, Qt::ItemFlags());
    const QModelIndex ddp = m.indexOfRun(ddp_);
    QCOMPARE(ddp.parent(), m.index(0, 0));
    QCOMPARE(m.data(ddp).toString(), QString("ddp"));
    QCOMPARE(m.data(m.index(ddp.row(), RunListModel::EventsColumn, ddp.parent())).toString(), QString("24"));
    QCOMPARE(m.data(m.index(ddp.row(), RunListModel::WorldSizeColumn, ddp.parent())).toInt(), 2);
    QCOMPARE(m.data(m.indexOfRun(trace_, RunListModel::StrategyColumn)).toString(), QString("—"));
    QVERIFY(m.data(m.indexOfRun(failed_), Qt::ToolTipRole).toString().contains("zero3 oom"));

    m.setGrouping(RunListModel::Grouping::Strategy);
    QCOMPARE(topLabels(m), (QStringList{"ddp (1)", "zero3 (1)", "fsdp (1)", "No strategy (imported) (1)"}));
    m.setGrouping(RunListModel::Grouping::Status);
    QCOMPARE(topLabels(m), (QStringList{"Running (1)", "Completed (2)", "Failed (1)"}));
    QCOMPARE(m.indexOfRun(fsdp_).parent(), m.indexOfGroup("running"));
    m.setGrouping(RunListModel::Grouping::None);
    QCOMPARE(m.rowCount(), 4);
    QVERIFY(!m.isGroup(m.index(0, 0)));
    QCOMPARE(m.runId(m.index(3, 0)), failed_);
    QVERIFY(!m.indexOfRun(ddp_).parent().isValid());
    QCOMPARE(m.rowCount(m.index(0, 0)), 0);
    QVERIFY(RunListModel::groupingFromName(RunListModel::groupingName(RunListModel::Grouping::Status)) ==
            RunListModel::Grouping::Status);
  }

  void refreshUpdatesInPlace_data() {
    QTest::addColumn<int>("grouping");
    QTest::newRow("source") << static_cast<int>(RunListModel::Grouping::Source);
    QTest::newRow("strategy") << static_cast<int>(RunListModel::Grouping::Strategy);
    QTest::newRow("status") << static_cast<int>(RunListModel::Grouping::Status);
    QTest::newRow("none") << static_cast<int>(RunListModel::Grouping::None);
  }

  void refreshUpdatesInPlace() {
    QFETCH(int, grouping);
    RunListModel m;
    QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::QtTest);
    m.setGrouping(static_cast<RunListModel::Grouping>(grouping));
    m.setRuns(ui::loadRunRows(*store_));
    QPersistentModelIndex ddp(m.indexOfRun(ddp_));
    QPersistentModelIndex trace(m.indexOfRun(trace_));
    QSignalSpy resets(&m, &QAbstractItemModel::modelReset);

    // Same content: nothing moves.
    m.setRuns(ui::loadRunRows(*store_));
    QCOMPARE(m.runId(ddp), ddp_);

    // A new run of a new kind (simulated, hsdp, pending) and a status change of a running run.
    const core::RunId sim = addRun(*store_, "estimate", core::RunSource::Simulated, "hsdp", core::RunStatus::Pending);
    store_->setRunStatus(fsdp_, core::RunStatus::Completed);
    m.setRuns(ui::loadRunRows(*store_));
    QCOMPARE(m.runCount(), 5);
    QVERIFY(m.indexOfRun(sim).isValid());
    QCOMPARE(m.data(m.indexOfRun(fsdp_, RunListModel::StatusColumn)).toString(), QString("completed"));
    QVERIFY(ddp.isValid());
    QCOMPARE(m.runId(ddp), ddp_);
    QCOMPARE(m.runId(trace), trace_);

    // A deletion elsewhere (the CLI): the row goes, the others stay.
    store_->deleteRun(failed_);
    m.setRuns(ui::loadRunRows(*store_));
    QCOMPARE(m.runCount(), 4);
    QVERIFY(!m.indexOfRun(failed_).isValid());
    QCOMPARE(m.runId(ddp), ddp_);
    QCOMPARE(m.runId(trace), trace_);
    QCOMPARE(resets.count(), 0);

    m.clear();
    QCOMPARE(m.runCount(), 0);
    QVERIFY(!ddp.isValid());
  }

  void editsReachTheDatabase() {
    RunListModel m;
    QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::QtTest);
    m.setRuns(ui::loadRunRows(*store_));
    QVERIFY(!(m.flags(m.indexOfRun(ddp_)) & Qt::ItemIsEditable));  // no store: read-only
    QVERIFY(!m.setData(m.indexOfRun(ddp_), "x"));
    m.setStore(store_.get());
    QVERIFY(m.flags(m.indexOfRun(ddp_)) & Qt::ItemIsEditable);
    QVERIFY(m.flags(m.indexOfRun(ddp_, RunListModel::TagsColumn)) & Qt::ItemIsEditable);
    QVERIFY(!(m.flags(m.indexOfRun(ddp_, RunListModel::StatusColumn)) & Qt::ItemIsEditable));

    // The run's status changed meanwhile (a job finished it): a rename must not undo that.
    core::TraceStore other(test::pathIn(dir_, "runs.db"));
    other.setRunStatus(fsdp_, core::RunStatus::Failed, "rank 1: killed");
    QVERIFY(m.setData(m.indexOfRun(fsdp_), "  fsdp full shard "));
    auto r = other.run(fsdp_);
    QCOMPARE(r->name, std::string("fsdp full shard"));
    QVERIFY(r->status == core::RunStatus::Failed);
    QCOMPARE(r->failureReason, std::string("rank 1: killed"));
    QCOMPARE(m.data(m.indexOfRun(fsdp_)).toString(), QString("fsdp full shard"));

    QSignalSpy errors(&m, &RunListModel::errorOccurred);
    QVERIFY(!m.setData(m.indexOfRun(fsdp_), "   "));
    QCOMPARE(errors.count(), 1);
    QVERIFY(m.lastError().contains("empty"));
    QCOMPARE(other.run(fsdp_)->name, std::string("fsdp full shard"));

    QVERIFY(m.setData(m.indexOfRun(ddp_, RunListModel::TagsColumn), " baseline, bs8 ,, baseline,a100 "));
    QCOMPARE(other.run(ddp_)->tags, std::string("baseline,bs8,a100"));
    QCOMPARE(m.data(m.indexOfRun(ddp_, RunListModel::TagsColumn)).toString(), QString("baseline,bs8,a100"));

    QVERIFY(m.deleteRuns({ddp_, trace_}));
    QVERIFY(!other.run(ddp_));
    QVERIFY(!other.run(trace_));
    QCOMPARE(m.runCount(), 2);
    QCOMPARE(m.rowCount(), 1);  // the imported group went with its only run
    // Its ranks and events went too (ON DELETE CASCADE).
    core::Statement st(shardscope::core::storeDb(other), "SELECT COUNT(*) FROM ranks");
    QVERIFY(st.step());
    QCOMPARE(st.int64(0), std::int64_t(0));

    QVERIFY(!m.renameRun(core::RunId{9999}, "x"));
    QVERIFY(m.lastError().contains("9999"));
  }

  void fingerprintSeesChanges() {
    const auto a = ui::runsFingerprint(*store_);
    QCOMPARE(a.count, std::int64_t(4));
    QCOMPARE(a.active, std::int64_t(1));  // fsdp is running
    QCOMPARE(ui::runsFingerprint(*store_), a);
    store_->setRunStatus(fsdp_, core::RunStatus::Completed);
    const auto b = ui::runsFingerprint(*store_);
    QVERIFY(!(b == a));
    QCOMPARE(b.active, std::int64_t(0));
    auto run = *store_->run(ddp_);
    run.tags = "x";
    store_->updateRun(run);
    QVERIFY(!(ui::runsFingerprint(*store_) == b));
  }
};

QTEST_MAIN(TestRunListModel)
#include "tst_run_list_model.moc"
