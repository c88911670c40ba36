// The Communication page, offscreen, on a run built in the test with TraceStore/BulkWriter (two
// ranks of a runtime-like CPU run: a compute lane and a communication lane): its collectives table,
// per-step chart and bottleneck list show exactly core's figures; filters and sorting work; the
// models pass QAbstractItemModelTester; a double-click asks for the right event in the timeline.
#include <QAbstractItemModelTester>
#include <QComboBox>
#include <QLineEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QTableView>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <map>

#include "core/storage/store_access.h"
#include "core/analysis/bottlenecks.h"
#include "core/analysis/collectives.h"
#include "core/analysis/step_breakdown.h"
#include "core/storage/trace_store.h"
#include "tests/common/test_support.h"
#include "ui/charts/qcp.h"
#include "ui/models/bottleneck_model.h"
#include "ui/models/collectives_model.h"
#include "ui/pages/communication_page.h"

using namespace shardscope;
using core::CollectiveOp;
using core::TimeNs;

namespace {

constexpr TimeNs kUs = 1000;

// One run: `ranks` ranks, `steps` steps of 1 ms; per step on each rank compute [0, 400) and
// [600, 800) µs, an all-gather [100, 200) (hidden), a reduce-scatter [350, 500) (100 µs exposed),
// an all-reduce [850, 850 + 50·scale) (exposed), and on rank 1 an extra exposed all-gather at
// [900 + 10·step, 960 + 10·step) µs in a second group. Times shift by rank so ranks differ.
core::RunId makeRun(core::TraceStore& store, const std::string& name, int ranks, int steps, int scale,
                    const std::string& configJson = "{}") {
  core::Run run;
  run.name = name;
  run.configJson = configJson;
  run.source = core::RunSource::Runtime;
  run.strategy = "fsdp";
  run.status = core::RunStatus::Completed;
  run.worldSize = ranks;
  const core::RunId runId = store.createRun(run);
  core::ProcessGroup world;
  world.runId = runId;
  world.name = "world";
  world.backend = "gloo";
  world.size = ranks;
  const core::Id pgWorld = store.addProcessGroup(world);
  core::ProcessGroup sub = world;
  sub.name = "shard";
  sub.size = 2;
  const core::Id pgSub = store.addProcessGroup(sub);
  const TimeNs t0 = 1'700'000'000'000'000'000;
  for (int r = 0; r < ranks; ++r) {
    core::Rank rk;
    rk.runId = runId;
    rk.rank = r;
    rk.sourceFile = "runtime";
    const core::RankId rankId = store.addRank(rk);
    core::Track compute;
    compute.rankId = rankId;
    compute.kind = core::TrackKind::CpuThread;
    compute.name = "compute (main thread)";
    const core::TrackId computeId = store.addTrack(compute);
    core::Track comm;
    comm.rankId = rankId;
    comm.kind = core::TrackKind::Comm;
    comm.name = "comm world (gloo)";
    comm.sortIndex = 10;
    const core::TrackId commId = store.addTrack(comm);
    core::Transaction tx(shardscope::core::storeDb(store));
    core::BulkWriter w(store);
    for (int s = 1; s <= steps; ++s) {
      const TimeNs base = t0 + static_cast<TimeNs>(s) * 1000 * kUs + r * 7 * kUs;
      auto span = [&](core::TrackId track, const std::string& n, const char* cat, core::Category c, TimeNs a, TimeNs b,
                      CollectiveOp op = CollectiveOp::None, std::int64_t bytes = 0, core::Id pg = 0, int size = 0) {
        core::EventRecord e;
        e.trackId = track;
        e.startNs = base + a;
        e.endNs = base + b;
        e.nameId = store.intern(n);
        e.catId = store.intern(cat);
        e.category = c;
        e.step = s;
        if (op != CollectiveOp::None) {
          e.collOp = op;
          e.flags = core::EventFlags::CollectiveMeta;
          e.bytes = bytes;
          e.processGroupId = pg;
          e.groupSize = size;
          e.dtypeId = store.intern("float");
        }
        w.addEvent(e);
      };
      span(computeId, "ProfilerStep#" + std::to_string(s), "user_annotation", core::Category::Other, 0, 1000 * kUs);
      span(computeId, "forward", "cpu_op", core::Category::Computation, 0, 400 * kUs);
      span(computeId, "backward", "cpu_op", core::Category::Computation, 600 * kUs, 800 * kUs);
      span(commId, "all_gather layers.0", "collective", core::Category::Communication, 100 * kUs, 200 * kUs,
           CollectiveOp::AllGather, 4'000'000, pgWorld, ranks);
      span(commId, "reduce_scatter layers.0", "collective", core::Category::Communication, 350 * kUs, 500 * kUs,
           CollectiveOp::ReduceScatter, 8'000'000, pgWorld, ranks);
      span(commId, "all_reduce grads", "collective", core::Category::Communication, 850 * kUs, (850 + 50 * scale) * kUs,
           CollectiveOp::AllReduce, 1'000'000, pgWorld, ranks);
      if (r == 1)
        span(commId, "all_gather extra", "collective", core::Category::Communication, (900 + 10 * s) * kUs, (960 + 10 * s) * kUs,
             CollectiveOp::AllGather, 2'000'000, pgSub, 2);
    }
    w.finish();
    for (int s = 1; s <= steps; ++s) {
      const TimeNs base = t0 + static_cast<TimeNs>(s) * 1000 * kUs + r * 7 * kUs;
      store.addStep(core::Step{rankId, s, base, base + 1000 * kUs});
    }
    tx.commit();
  }
  return runId;
}

bool waitIdle(ui::CommunicationPage& p, int ms = 20000) {
  QElapsedTimer t;
  t.start();
  while (p.busy() && t.elapsed() < ms) QTest::qWait(10);
  return !p.busy();
}

}  // namespace

class TestCommunicationPage : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    db_ = test::pathIn(dir_, "comm.db");
    core::TraceStore store(db_);
    run1_ = makeRun(store, "fsdp a", 2, 4, 1);
    run2_ = makeRun(store, "fsdp b", 2, 3, 3);
  }

  void tableEqualsCore() {
    ui::CommunicationPage page;
    page.resize(1200, 900);
    page.show();
    QCOMPARE(page.pageId(), QString("communication"));
    QSignalSpy busy(&page, &ui::Page::busyChanged);
    page.setContext(QString::fromStdString(db_), {run1_, run2_});
    QVERIFY(page.busy());
    QVERIFY(waitIdle(page));
    QVERIFY(page.lastError().isEmpty());
    QVERIFY(!busy.isEmpty());
    QCOMPARE(busy.last().at(0).toBool(), false);
    QCOMPARE(page.currentRun(), run1_);  // the baseline

    core::TraceStore store(db_, core::Database::Mode::ReadOnly);
    const auto expected = core::computeCollectives(store, run1_);
    QCOMPARE(expected.size(), std::size_t(4));  // all_gather world, all_gather shard, reduce_scatter, all_reduce
    ui::CollectivesModel* m = page.collectivesModel();
    QCOMPARE(m->rowCount(), static_cast<int>(expected.size()));
    using C = ui::CollectivesModel;
    for (int i = 0; i < m->rowCount(); ++i) {
      const auto& e = expected[static_cast<std::size_t>(i)];
      auto cell = [&](int col, int role = Qt::DisplayRole) { return m->data(m->index(i, col), role); };
      QCOMPARE(cell(C::Op).toString(), QString::fromUtf8(core::toString(e.op).data()));
      QCOMPARE(cell(C::Group).toString(), QString::fromStdString(e.processGroup));
      QCOMPARE(cell(C::Ranks).toString(), QString::number(e.groupSize));
      QCOMPARE(cell(C::Count, C::SortRole).toLongLong(), e.count);
      QCOMPARE(cell(C::Bytes, C::SortRole).toLongLong(), e.bytes);
      QCOMPARE(cell(C::Total, C::SortRole).toLongLong(), e.totalNs);
      QCOMPARE(cell(C::Mean, C::SortRole).toLongLong(), e.meanNs);
      QCOMPARE(cell(C::Exposed, C::SortRole).toLongLong(), e.exposedNs);
      QVERIFY(e.algBwGBps && e.busBwGBps);
      QCOMPARE(cell(C::AlgBw, C::SortRole).toDouble(), *e.algBwGBps);
      QCOMPARE(cell(C::BusBw, C::SortRole).toDouble(), *e.busBwGBps);
      // Units as displayed.
      QCOMPARE(cell(C::Total).toString(), ui::units::ms(e.totalNs));
      QCOMPARE(cell(C::Exposed).toString(), ui::units::ms(e.exposedNs));
      QCOMPARE(cell(C::Bytes).toString(), ui::units::bytes(e.bytes));
      QCOMPARE(cell(C::AlgBw).toString(), ui::units::gbps(*e.algBwGBps));
    }
    // Known values of the fixture: reduce-scatters 150 µs each, 100 µs exposed, 4 steps x 2 ranks.
    const auto rs =
        std::find_if(expected.begin(), expected.end(), [](const auto& s) { return s.op == CollectiveOp::ReduceScatter; });
    QCOMPARE(rs->count, std::int64_t(8));
    QCOMPARE(rs->totalNs, 8 * 150 * kUs);
    QCOMPARE(rs->exposedNs, 8 * 100 * kUs);
    QCOMPARE(ui::units::ms(rs->totalNs), QString("1.200"));
    QCOMPARE(ui::units::bytes(rs->bytes), QString("61.04 MiB"));  // 8 x 8 MB: binary units (core/util/units.h)
    QCOMPARE(ui::units::bytes(64 << 20), QString("64.00 MiB"));

    // The view shows them through the proxy, sorted by total time (descending) to begin with.
    QTableView* view = page.collectivesView();
    QCOMPARE(view->model()->rowCount(), 4);
    QCOMPARE(view->model()->index(0, C::Op).data().toString(), QString("reduce_scatter"));
  }

  void filtersAndSorting() {
    ui::CommunicationPage page;
    page.setContext(QString::fromStdString(db_), {run1_});
    QVERIFY(waitIdle(page));
    using C = ui::CollectivesModel;
    QAbstractItemModel* shown = page.collectivesView()->model();
    QCOMPARE(shown->rowCount(), 4);
    // Operation combo.
    QComboBox* op = page.operationCombo();
    QCOMPARE(op->count(), 4);  // All + three operations
    op->setCurrentIndex(op->findData(QString("all_gather")));
    QCOMPARE(shown->rowCount(), 2);
    // Group combo on top of it.
    QComboBox* group = page.groupCombo();
    group->setCurrentIndex(group->findData(QString("shard")));
    QCOMPARE(shown->rowCount(), 1);
    QCOMPARE(shown->index(0, C::Group).data().toString(), QString("shard"));
    op->setCurrentIndex(0);
    group->setCurrentIndex(0);
    QCOMPARE(shown->rowCount(), 4);
    // Free text: "allreduce" finds all_reduce; "shard" finds the group.
    page.filterEdit()->setText("allreduce");
    QCOMPARE(shown->rowCount(), 1);
    QCOMPARE(shown->index(0, C::Op).data().toString(), QString("all_reduce"));
    page.filterEdit()->setText("SHARD");
    QCOMPARE(shown->rowCount(), 1);
    page.filterEdit()->clear();
    QCOMPARE(shown->rowCount(), 4);
    // Sorting is numeric: by count ascending, the shard all-gather (4) before the others (8).
    page.collectivesView()->sortByColumn(C::Count, Qt::AscendingOrder);
    QCOMPARE(shown->index(0, C::Count).data(C::SortRole).toLongLong(), 4LL);
    page.collectivesView()->sortByColumn(C::Bytes, Qt::DescendingOrder);
    QCOMPARE(shown->index(0, C::Bytes).data(C::SortRole).toLongLong(), 64'000'000LL);
  }

  void chartEqualsStepBreakdown() {
    ui::CommunicationPage page;
    page.setContext(QString::fromStdString(db_), {run1_});
    QVERIFY(waitIdle(page));
    core::TraceStore store(db_, core::Database::Mode::ReadOnly);
    const auto rows = core::computeStepBreakdown(store, run1_);
    QCOMPARE(page.stepRows().size(), rows.size());
    // Rank 1 alone.
    page.setChartRank(1);
    std::vector<core::StepBreakdown> r1;
    for (const auto& r : rows)
      if (r.rank == 1 && r.step >= 0) r1.push_back(r);
    const auto& s1 = page.chartSeries();
    QCOMPARE(s1.size(), r1.size());
    QCOMPARE(s1.size(), std::size_t(4));
    for (std::size_t i = 0; i < r1.size(); ++i) {
      QCOMPARE(s1[i].step, r1[i].step);
      QCOMPARE(s1[i].exposedMs, static_cast<double>(r1[i].exposedCommNs) / 1e6);
      QCOMPARE(s1[i].overlappedMs, static_cast<double>(r1[i].overlappedCommNs) / 1e6);
      QVERIFY(r1[i].overlap.has_value());
      QVERIFY(std::abs(*s1[i].overlapPct - *r1[i].overlap * 100.0) < 1e-9);
    }
    // The chart's bars are those numbers.
    auto* bars = qobject_cast<QCPBars*>(page.stepChart()->plottable(0));
    QVERIFY(bars);
    QCOMPARE(bars->data()->size(), 4);
    QCOMPARE(bars->data()->at(0)->value, s1[0].exposedMs);
    QCOMPARE(bars->data()->at(0)->key, 1.0);
    // The mean over ranks: exposed averaged, overlap time-weighted.
    page.setChartRank(-1);
    QCOMPARE(page.rankCombo()->currentData().toInt(), -1);
    std::map<std::int64_t, std::vector<core::StepBreakdown>> byStep;
    for (const auto& r : rows) byStep[r.step].push_back(r);
    const auto& mean = page.chartSeries();
    QCOMPARE(mean.size(), std::size_t(4));
    for (const auto& p : mean) {
      const auto& v = byStep.at(p.step);
      QCOMPARE(v.size(), std::size_t(2));
      const double ex = (static_cast<double>(v[0].exposedCommNs) + static_cast<double>(v[1].exposedCommNs)) / 2 / 1e6;
      QVERIFY(std::abs(p.exposedMs - ex) < 1e-12);
      const double ov = static_cast<double>(v[0].overlappedCommNs + v[1].overlappedCommNs) /
                        static_cast<double>(v[0].commNs + v[1].commNs) * 100.0;
      QVERIFY(std::abs(*p.overlapPct - ov) < 1e-9);
    }
    // Rank 1 has the extra exposed all-gather: more exposed than rank 0 in every step.
    page.setChartRank(0);
    const auto s0 = page.chartSeries();
    page.setChartRank(1);
    for (std::size_t i = 0; i < s0.size(); ++i) QVERIFY(page.chartSeries()[i].exposedMs > s0[i].exposedMs);
  }

  void bottlenecksAndJump() {
    ui::CommunicationPage page;
    page.setContext(QString::fromStdString(db_), {run1_});
    QVERIFY(waitIdle(page));
    core::TraceStore store(db_, core::Database::Mode::ReadOnly);
    const auto expected = core::findCollectiveBottlenecks(store, run1_, 50);
    QVERIFY(!expected.empty());
    ui::BottleneckModel* m = page.bottleneckModel();
    QCOMPARE(m->rowCount(), static_cast<int>(expected.size()));
    for (int i = 0; i < m->rowCount(); ++i) {
      const auto& got = m->rowAt(i);
      const auto& e = expected[static_cast<std::size_t>(i)];
      QCOMPARE(got.b.rank, e.rank);
      QVERIFY(got.b.op == e.op);
      QCOMPARE(got.b.startNs, e.startNs);
      QCOMPARE(got.b.exposedNs, e.exposedNs);
      QCOMPARE(got.b.reasons, e.reasons);
      QCOMPARE(got.b.suggestions, e.suggestions);
      QVERIFY(got.eventId != 0);  // found in the store
      const auto ev = store.event(got.eventId, false);
      QVERIFY(ev.has_value());
      QCOMPARE(ev->startNs, e.startNs);
      QCOMPARE(ev->endNs - ev->startNs, e.durNs);
      QVERIFY(ev->collOp == e.op);
      QCOMPARE(m->data(m->index(i, ui::BottleneckModel::Total)).toString(), ui::units::ms(e.totalExposedNs));
      const QString worst = m->data(m->index(i, ui::BottleneckModel::Worst)).toString();
      QVERIFY(worst.startsWith(ui::units::ms(e.exposedNs)));
      // Said as exposed time of the instance's time, never "X of X" (issue 46).
      QVERIFY2(e.exposedNs >= e.durNs ? worst.contains("all of it") : worst.contains(" exposed of " + ui::units::ms(e.durNs)),
               qPrintable(worst));
    }
    // The costliest first in the view, selected, its details shown with reasons and suggestions.
    QTableView* view = page.bottleneckView();
    QCOMPARE(view->currentIndex().row(), 0);
    const QString details = page.detailsView()->toPlainText();
    QVERIFY(details.contains("Why it is exposed"));
    QVERIFY(details.contains(QString::fromStdString(expected[0].reasons[0]).left(30)));

    // Double-click -> jumpToEvent(run, event, start, end).
    QSignalSpy jump(&page, &ui::Page::jumpToEvent);
    const QModelIndex idx = view->model()->index(0, ui::BottleneckModel::Op);
    view->scrollTo(idx);
    const QRect rect = view->visualRect(idx);
    QTest::mouseClick(view->viewport(), Qt::LeftButton, {}, rect.center());
    QTest::mouseDClick(view->viewport(), Qt::LeftButton, {}, rect.center());
    QCOMPARE(jump.count(), 1);
    const auto args = jump.takeFirst();
    auto* proxy = qobject_cast<QSortFilterProxyModel*>(view->model());
    QVERIFY(proxy);
    const auto& clicked = m->rowAt(proxy->mapToSource(idx).row());
    QCOMPARE(clicked.b.exposedNs, expected[0].exposedNs);  // the costliest
    QCOMPARE(args.at(0).value<core::RunId>(), run1_);
    QCOMPARE(args.at(1).value<core::Id>(), clicked.eventId);
    QCOMPARE(args.at(2).value<qint64>(), clicked.b.startNs);
    QCOMPARE(args.at(3).value<qint64>(), clicked.b.startNs + clicked.b.durNs);
  }

  // Issue 46: a suggestion the runtime can test is one click away. The run's configuration has
  // backward_prefetch=post: its exposed all-gather's first suggestion is backward_prefetch=pre, which
  // the page offers as "Try it" (tryChange with core's change); a row without one hides the button.
  void tryItOffersTheChange() {
    QTemporaryDir dir;
    const std::string path = test::pathIn(dir, "try.db");
    core::RunId run;
    {
      core::TraceStore store(path);
      run = makeRun(store, "fsdp post", 2, 4, 1, R"({"strategy":"fsdp","backward_prefetch":"post","forward_prefetch":false})");
    }
    ui::CommunicationPage page;
    page.resize(1200, 800);
    page.show();
    page.setContext(QString::fromStdString(path), {run});
    QVERIFY(waitIdle(page));
    core::TraceStore store(path, core::Database::Mode::ReadOnly);
    const auto expected = core::findCollectiveBottlenecks(store, run, 50);
    ui::BottleneckModel* m = page.bottleneckModel();
    QTableView* view = page.bottleneckView();
    auto* proxy = qobject_cast<QSortFilterProxyModel*>(view->model());
    int withTry = -1, without = -1;
    for (int i = 0; i < proxy->rowCount(); ++i) {
      const auto& b = m->rowAt(proxy->mapToSource(proxy->index(i, 0)).row()).b;
      if (b.tryIt && withTry < 0) withTry = i;
      if (!b.tryIt && without < 0) without = i;
    }
    QVERIFY(withTry >= 0);
    QVERIFY(without >= 0);
    view->setCurrentIndex(proxy->index(withTry, 0));
    const core::Bottleneck& b = m->rowAt(proxy->mapToSource(proxy->index(withTry, 0)).row()).b;
    QVERIFY(b.op == CollectiveOp::AllGather);
    QCOMPARE(b.tryIt->text(), std::string("backward_prefetch=pre"));
    QVERIFY(!page.tryButton()->isHidden());
    QCOMPARE(page.tryButton()->text(), QString("Try it: backward_prefetch=pre"));
    std::vector<std::pair<core::RunId, core::KnobChange>> asked;
    connect(&page, &ui::Page::tryChange, this, [&](core::RunId id, const core::KnobChange& c) { asked.emplace_back(id, c); });
    QTest::mouseClick(page.tryButton(), Qt::LeftButton);
    QCOMPARE(asked.size(), std::size_t(1));
    QCOMPARE(asked[0].first, run);
    QCOMPARE(asked[0].second.text(), std::string("backward_prefetch=pre"));
    view->setCurrentIndex(proxy->index(without, 0));
    QVERIFY(page.tryButton()->isHidden());
  }

  void modelsPassTheTester() {
    ui::CommunicationPage page;
    auto* t1 =
        new QAbstractItemModelTester(page.collectivesModel(), QAbstractItemModelTester::FailureReportingMode::QtTest, &page);
    auto* t2 =
        new QAbstractItemModelTester(page.collectivesProxy(), QAbstractItemModelTester::FailureReportingMode::QtTest, &page);
    auto* t3 =
        new QAbstractItemModelTester(page.bottleneckModel(), QAbstractItemModelTester::FailureReportingMode::QtTest, &page);
    Q_UNUSED(t1);
    Q_UNUSED(t2);
    Q_UNUSED(t3);
    page.setContext(QString::fromStdString(db_), {run1_, run2_});
    QVERIFY(waitIdle(page));
    page.filterEdit()->setText("gather");
    page.collectivesView()->sortByColumn(ui::CollectivesModel::Exposed, Qt::AscendingOrder);
    page.filterEdit()->clear();
    page.showRun(run2_);
    QVERIFY(waitIdle(page));
    page.setContext(QString(), {});
    QCOMPARE(page.collectivesModel()->rowCount(), 0);
    // Standalone models, filled and emptied.
    ui::CollectivesModel cm;
    QAbstractItemModelTester tc(&cm, QAbstractItemModelTester::FailureReportingMode::QtTest);
    core::CollectiveStats s;
    s.op = CollectiveOp::AllReduce;
    s.count = 3;
    cm.setRows({s, s});
    QCOMPARE(cm.data(cm.index(0, ui::CollectivesModel::Bytes)).toString(), QString("—"));  // no size known
    QCOMPARE(cm.data(cm.index(0, ui::CollectivesModel::Group)).toString(), QString("unknown"));
    cm.clear();
    ui::BottleneckModel bm;
    QAbstractItemModelTester tb(&bm, QAbstractItemModelTester::FailureReportingMode::QtTest);
    ui::BottleneckRow row;
    row.b.op = CollectiveOp::AllGather;
    row.b.cause = core::ExposedCause::LateRank;
    row.b.lateRank = 3;
    row.b.totalExposedNs = 100;
    row.b.causes = {{core::ExposedCause::LateRank, 80, 4}, {core::ExposedCause::NothingToOverlap, 20, 1}};
    bm.setRows({row});
    QCOMPARE(bm.data(bm.index(0, ui::BottleneckModel::Cause)).toString(), QString("waiting for a late rank (rank 3), 80.0 %"));
    QCOMPARE(bm.data(bm.index(0, ui::BottleneckModel::Op), ui::CollectivesModel::OpRole).toString(), QString("all_gather"));
    bm.clear();
  }

  void otherRunOfTheSelection() {
    ui::CommunicationPage page;
    page.setContext(QString::fromStdString(db_), {run1_, run2_});
    QVERIFY(waitIdle(page));
    QCOMPARE(page.runCombo()->count(), 2);
    QVERIFY(page.runCombo()->itemText(0).contains("fsdp a"));
    QVERIFY(page.runCombo()->itemText(1).contains("fsdp b"));
    page.runCombo()->setCurrentIndex(1);
    Q_EMIT page.runCombo()->activated(1);
    QCOMPARE(page.currentRun(), run2_);
    QVERIFY(waitIdle(page));
    core::TraceStore store(db_, core::Database::Mode::ReadOnly);
    const auto expected = core::computeCollectives(store, run2_);
    QCOMPARE(page.collectivesModel()->rowCount(), static_cast<int>(expected.size()));
    for (std::size_t i = 0; i < expected.size(); ++i)
      QCOMPARE(page.collectivesModel()->rowAt(static_cast<int>(i)).totalNs, expected[i].totalNs);
    QCOMPARE(page.chartSeries().size(), std::size_t(3));
    // A new selection that still holds the shown run keeps it.
    page.setContext(QString::fromStdString(db_), {run1_, run2_});
    QCOMPARE(page.currentRun(), run2_);
    QVERIFY(waitIdle(page));
  }

  void missingRunIsAnErrorInThePage() {
    ui::CommunicationPage page;
    QSignalSpy errors(&page, &ui::Page::errorMessage);
    page.setContext(QString::fromStdString(db_), {core::RunId{9999}});
    QVERIFY(waitIdle(page));
    QCOMPARE(errors.count(), 1);
    QVERIFY(page.lastError().contains("9999"));
    // And a file that is not a database.
    const std::string bad = test::writeFile(dir_, "bad.db", std::string(4096, 'x'));
    page.setContext(QString::fromStdString(bad), {core::RunId{1}});
    QVERIFY(waitIdle(page));
    QCOMPARE(errors.count(), 2);
    QVERIFY(!page.lastError().isEmpty());
  }

  void changingContextWhileBusyCancels() {
    ui::CommunicationPage page;
    page.setContext(QString::fromStdString(db_), {run1_});
    page.setContext(QString::fromStdString(db_), {run2_});  // the first analysis is dropped
    QVERIFY(waitIdle(page));
    QCOMPARE(page.currentRun(), run2_);
    core::TraceStore store(db_, core::Database::Mode::ReadOnly);
    QCOMPARE(page.chartSeries().size(), std::size_t(3));  // run 2 has 3 steps
  }

 private:
  QTemporaryDir dir_;
  std::string db_;
  core::RunId run1_, run2_;
};

QTEST_MAIN(TestCommunicationPage)
#include "tst_communication_page.moc"
