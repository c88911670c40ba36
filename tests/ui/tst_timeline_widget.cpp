// The timeline widget and page on a real store: a hand-made 2-rank GPU trace imported with the real
// importer, the index built by core, the widget rendered into an image whose pixels are checked at
// the positions the events must occupy; navigation, search, hit testing by mouse, selection details,
// range statistics against core's step breakdown, the palette (the page: tst_timeline_page.cpp).
#include <QSignalSpy>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>

#include "core/analysis/step_breakdown.h"
#include "core/import/kineto_importer.h"
#include "core/timeline/range_stats.h"
#include "core/timeline/timeline_index.h"
#include "tests/common/test_support.h"
#include "tests/ui/timeline_fixture.h"
#include "ui/pages/timeline_page.h"
#include "ui/timeline/timeline_widget.h"

using namespace shardscope;
using namespace shardscope::core;
using namespace shardscope::ui;
namespace tl = shardscope::core::timeline;
using shardscope::test::pathIn;
using shardscope::test::writeFile;

namespace {

using shardscope::test::timeline::Found;
using shardscope::test::timeline::findNamed;
using shardscope::test::timeline::trace;

bool near(QColor a, QColor b) {
  return std::abs(a.red() - b.red()) <= 2 && std::abs(a.green() - b.green()) <= 2 && std::abs(a.blue() - b.blue()) <= 2;
}

}  // namespace

class TestTimelineWidget : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    db_ = pathIn(dir_, "tl.db");
    TraceStore store(db_);
    KinetoImportOptions o;
    o.runName = "two ranks";
    run_ = importKineto(store, {writeFile(dir_, "r0.json", trace(0)), writeFile(dir_, "r1.json", trace(1))}, o).runIds.at(0);
    index_ = tl::TimelineIndex::build(store, run_);
    QCOMPARE(index_->ranks().size(), std::size_t(2));
    t0_ = index_->ranks()[0].minStart;  // ProfilerStep#1 of rank 0 starts at 0 µs
  }

  void pixelsAtKnownPositions() {
    TimelineWidget w;
    w.resize(1200, 700);
    w.setIndex(index_);
    w.setViewRange(t0_, t0_ + 200'000);
    w.renderNow();
    QVERIFY(w.drawListCurrent());
    const QImage img = w.grab().toImage();
    const Found gemm = findNamed(*index_, 0, "gemm", 0);
    const Found ar = findNamed(*index_, 0, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 0);
    const auto gy = w.laneY(gemm.lane);
    const auto ay = w.laneY(ar.lane);
    QVERIFY(gy && ay);
    const int bottom = w.rowHeight() - 3;
    // The gemm [20, 60) µs in its compute colour (its right end: the label is elided before it).
    const int gx = static_cast<int>(w.xOf(t0_ + 58'000));
    QVERIFY2(near(img.pixelColor(gx, *gy + bottom), timelineColor(tl::makeKey(Category::Computation, CollectiveOp::None))),
             qPrintable(img.pixelColor(gx, *gy + bottom).name()));
    // Nothing on the gemm's stream at 90 µs: background.
    QCOMPARE(img.pixelColor(static_cast<int>(w.xOf(t0_ + 90'000)), *gy + bottom), QColor(Qt::white));
    // Before 20 µs, nothing either.
    QCOMPARE(img.pixelColor(static_cast<int>(w.xOf(t0_ + 12'000)), *gy + bottom), QColor(Qt::white));
    // The all-reduce [40, 80) in the all-reduce colour, flagged exposed (a red strip on its top edge).
    const int ax = static_cast<int>(w.xOf(t0_ + 78'000));
    QVERIFY(near(img.pixelColor(ax, *ay + bottom), timelineColor(tl::makeKey(Category::Communication, CollectiveOp::AllReduce))));
    QVERIFY2(near(img.pixelColor(ax, *ay), QColor(0xd6, 0x27, 0x28)), qPrintable(img.pixelColor(ax, *ay).name()));
    // Zoomed out so far that the events are sub-pixel: still drawn (widened or folded), not lost.
    w.setViewRange(t0_ - 100'000'000, t0_ + 100'000'000);
    w.renderNow();
    const QImage far = w.grab().toImage();
    QVERIFY(far.pixelColor(static_cast<int>(w.xOf(t0_ + 40'000)), *w.laneY(gemm.lane) + bottom) != QColor(Qt::white));
    QVERIFY(w.drawList()->eventsInView >= 4);
  }

  // A run opens on its training steps, not on 10 s of initialisation before them (a 1.49B model's
  // 45 s of init left the steps a sliver at the right edge); Home shows the whole run.
  void opensOnTheTrainingSteps() {
    QTemporaryDir dir;
    const std::string db = pathIn(dir, "init.db");
    TraceStore store(db);
    const std::string json = R"J({"traceEvents": [
{"ph": "X", "cat": "cpu_op", "name": "model init", "pid": 1, "tid": 1, "ts": 0, "dur": 10000000},
{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 10000000, "dur": 100},
{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10000010, "dur": 1, "args": {"correlation": 1}},
{"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 10000020, "dur": 40, "args": {"stream": 7, "correlation": 1}},
{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "pid": 1, "tid": 1, "ts": 10000100, "dur": 100}
]})J";
    const Id run = importKineto(store, {writeFile(dir, "init.json", json)}).runIds.at(0);
    const auto index = tl::TimelineIndex::build(store, run);
    const TimeNs stepStart = index->minStart() + 10'000'000'000LL, stepEnd = stepStart + 200'000;
    QCOMPARE(index->stepsExtent()->first, stepStart);
    QCOMPARE(index->stepsExtent()->second, stepEnd);
    TimelineWidget w;
    w.resize(1200, 700);
    w.setIndex(index);
    QVERIFY(w.viewStart() >= stepStart - 10'000 && w.viewStart() < stepStart);
    QVERIFY(w.viewEnd() > stepEnd && w.viewEnd() <= stepEnd + 10'000);
    QTest::keyClick(&w, Qt::Key_Home);
    QVERIFY(w.viewStart() <= index->minStart() && w.viewEnd() >= index->maxEnd());
    QTest::keyClick(&w, Qt::Key_F);
    QVERIFY(w.viewStart() >= stepStart - 10'000 && w.viewEnd() <= stepEnd + 10'000);
  }

  // Per-operation streams (a handful of events each) fold into one "other streams" row per device;
  // opening it shows them; the busy stream stays a lane of its own.
  void sparseStreamsFold() {
    QTemporaryDir dir;
    const std::string db = pathIn(dir, "streams.db");
    TraceStore store(db);
    std::string json = R"J({"traceEvents": [
{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100000})J";
    for (int i = 0; i < 300; ++i)  // the compute stream
      json += ",\n{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"gemm\", \"pid\": 0, \"tid\": 7, \"ts\": " +
              std::to_string(10 + 100 * i) + ", \"dur\": 50, \"args\": {\"stream\": 7, \"device\": 0}}";
    for (int st = 20; st < 25; ++st)  // five copy streams, two events each
      for (int i = 0; i < 2; ++i)
        json += ",\n{\"ph\": \"X\", \"cat\": \"gpu_memcpy\", \"name\": \"Memcpy DtoD\", \"pid\": 0, \"tid\": " +
                std::to_string(st) + ", \"ts\": " + std::to_string(1000 * st + 10 * i) + ", \"dur\": 5, \"args\": {\"stream\": " +
                std::to_string(st) + ", \"device\": 0}}";
    json += "]}";
    const Id run = importKineto(store, {writeFile(dir, "streams.json", json)}).runIds.at(0);
    const auto index = tl::TimelineIndex::build(store, run);
    TimelineWidget w;
    w.resize(1200, 900);
    w.setIndex(index);
    QCOMPARE(w.foldedLaneCount(), std::size_t(5));
    const Found gemm = findNamed(*index, 0, "gemm", 0);
    const Found copy = findNamed(*index, 0, "Memcpy DtoD", 0);
    QVERIFY(!w.laneFolded(gemm.lane) && w.laneY(gemm.lane));
    QVERIFY(w.laneFolded(copy.lane) && !w.laneY(copy.lane));
    QVERIFY(!w.streamGroupOpen(0, 0));
    w.setStreamGroupOpen(0, 0, true);
    QVERIFY(w.laneY(copy.lane));
    w.setStreamGroupOpen(0, 0, false);
    QVERIFY(!w.laneY(copy.lane));
    w.renderNow();  // paints the group row without trouble
    QVERIFY(w.drawListCurrent());
  }

  void collapsedRankHidesItsLanes() {
    TimelineWidget w;
    w.resize(1200, 700);
    w.setIndex(index_);
    const Found gemm1 = findNamed(*index_, 1, "gemm", 0);
    QVERIFY(w.laneY(gemm1.lane));
    w.setRankCollapsed(0, true);
    QVERIFY(!w.laneY(findNamed(*index_, 0, "gemm", 0).lane));
    QVERIFY(w.laneY(gemm1.lane));
    w.setLaneHidden(gemm1.lane, true);
    QVERIFY(!w.laneY(gemm1.lane));
    w.showAllLanes();
    QVERIFY(w.laneY(gemm1.lane) && w.laneY(findNamed(*index_, 0, "gemm", 0).lane));
  }

  void zoomKeepsTheTimeUnderTheCursorAndHistoryWalks() {
    TimelineWidget w;
    w.resize(1200, 700);
    w.setIndex(index_);
    const auto fitted = std::make_pair(w.viewStart(), w.viewEnd());
    w.setViewRange(t0_, t0_ + 200'000);
    const double x = 700;
    const TimeNs under = w.timeAt(x);
    w.zoomAt(0.25, x);
    const double nsPerPx = static_cast<double>(w.viewEnd() - w.viewStart()) / (w.width() - w.labelWidth());
    QVERIFY(std::abs(static_cast<double>(w.timeAt(x) - under)) <= nsPerPx + 1);
    QCOMPARE(w.viewEnd() - w.viewStart(), TimeNs(50'000));
    QTest::qWait(700);  // a pause ends a continuous zoom: the next zoom is a new history entry
    w.zoomAt(0.5, x);
    const auto zoomed = std::make_pair(w.viewStart(), w.viewEnd());
    QVERIFY(w.zoomBack());
    QCOMPARE(w.viewEnd() - w.viewStart(), TimeNs(50'000));
    QVERIFY(w.zoomBack());
    QCOMPARE(std::make_pair(w.viewStart(), w.viewEnd()), std::make_pair(t0_, t0_ + 200'000));
    QVERIFY(w.zoomBack());
    QCOMPARE(std::make_pair(w.viewStart(), w.viewEnd()), fitted);
    QVERIFY(!w.zoomBack());
    QVERIFY(w.zoomForward() && w.zoomForward() && w.zoomForward());
    QCOMPARE(std::make_pair(w.viewStart(), w.viewEnd()), zoomed);
    // Keys: F fits, W zooms in, A/D pan.
    QTest::keyClick(&w, Qt::Key_F);
    QCOMPARE(std::make_pair(w.viewStart(), w.viewEnd()), fitted);
    const TimeNs span = w.viewEnd() - w.viewStart();
    QTest::keyClick(&w, Qt::Key_W);
    QVERIFY(w.viewEnd() - w.viewStart() < span);
    const TimeNs before = w.viewStart();
    QTest::keyClick(&w, Qt::Key_D);
    QVERIFY(w.viewStart() > before);
  }

  void searchWalksMatchesInTimeOrder() {
    TimelineWidget w;
    w.resize(1200, 700);
    w.setIndex(index_);
    QVERIFY(!w.findNext("no such kernel"));
    QVERIFY(w.findNext("GEMM"));  // case-insensitive
    QCOMPARE(w.matchCount(), 4);  // two per rank
    auto startOf = [&] { return index_->lane(w.selectedEvent()->first).start[w.selectedEvent()->second]; };
    w.clearSelection();
    w.setViewRange(t0_, t0_ + 1000);
    QVERIFY(w.findNext("gemm"));
    const TimeNs a = startOf();
    QCOMPARE(a, t0_ + 20'000);
    QVERIFY(w.findNext("gemm"));  // the other rank's first gemm (same start), then the second ones
    QVERIFY(w.findNext("gemm"));
    QCOMPARE(startOf(), t0_ + 120'000);
    QVERIFY(w.findNext("gemm", false));
    QVERIFY(w.findNext("gemm", false));
    QCOMPARE(startOf(), a);
  }

  void searchOnAThreadForBigRuns() {
    TimelineWidget w;
    w.resize(1200, 700);
    w.setIndex(index_);
    w.setSyncSearchLimit(0);  // every run is "big": the matches are gathered on a pool thread
    w.setViewRange(t0_, t0_ + 1000);
    QSignalSpy done(&w, &TimelineWidget::searchFinished);
    QVERIFY(w.findNext("nccldevkernel_allreduce"));
    QVERIFY(w.searching());
    QVERIFY(!w.selectedEvent());
    // A newer search replaces it: only the latest one selects.
    QVERIFY(w.findNext("GEMM"));
    QTRY_VERIFY(!w.searching());
    QCOMPARE(done.count(), 1);
    QCOMPARE(done.at(0).at(0).toBool(), true);
    QCOMPARE(done.at(0).at(1).toInt(), 4);
    QVERIFY(w.selectedEvent());
    QVERIFY(index_->name(index_->lane(w.selectedEvent()->first).nameIdx[w.selectedEvent()->second]) == "gemm");
    QCOMPARE(index_->lane(w.selectedEvent()->first).start[w.selectedEvent()->second], t0_ + 20'000);
    // The same text again steps through the gathered matches at once.
    QVERIFY(w.findNext("gemm"));
    QVERIFY(!w.searching());
    QCOMPARE(done.count(), 2);
    // Nothing matches: reported as not found once the thread is done.
    QVERIFY(w.findNext("no such kernel"));
    QTRY_COMPARE(done.count(), 3);
    QCOMPARE(done.at(2).at(0).toBool(), false);
  }

  void lanesHiddenByKindAndRanksCollapsed() {
    TimelineWidget w;
    w.resize(1200, 700);
    w.setIndex(index_);
    std::vector<std::uint32_t> streams, others;
    for (std::uint32_t li = 0; li < index_->lanes().size(); ++li)
      (index_->lane(li).kind == tl::LaneKind::GpuStream ? streams : others).push_back(li);
    QVERIFY(!streams.empty() && !others.empty());
    QVERIFY(!w.laneKindHidden(tl::LaneKind::GpuStream));
    w.setLaneKindHidden(tl::LaneKind::GpuStream, true);
    QVERIFY(w.laneKindHidden(tl::LaneKind::GpuStream));
    for (auto li : streams) QVERIFY(!w.laneY(li));
    for (auto li : others) QVERIFY(w.laneY(li));
    w.setLaneHidden(streams.front(), false);  // one back: the kind is no longer all hidden
    QVERIFY(!w.laneKindHidden(tl::LaneKind::GpuStream));
    QVERIFY(w.laneY(streams.front()));
    w.setAllRanksCollapsed(true);
    QVERIFY(w.rankCollapsed(0) && w.rankCollapsed(1));
    for (std::uint32_t li = 0; li < index_->lanes().size(); ++li) QVERIFY(!w.laneY(li));
    w.setAllRanksCollapsed(false);
    QVERIFY(w.laneY(streams.front()));
  }

  void clickSelectsWhatIsDrawnThere() {
    TimelineWidget w;
    w.resize(1200, 700);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    w.setIndex(index_);
    w.setViewRange(t0_, t0_ + 200'000);
    w.renderNow();
    const Found ar = findNamed(*index_, 0, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 0);
    QSignalSpy spy(&w, &TimelineWidget::eventSelected);
    QTest::mouseClick(&w, Qt::LeftButton, {}, QPoint(static_cast<int>(w.xOf(t0_ + 60'000)), *w.laneY(ar.lane) + 5));
    QCOMPARE(spy.count(), 1);
    QCOMPARE(*w.selectedEvent(), std::make_pair(ar.lane, ar.index));
    const QString text = w.describeEvent(ar.lane, ar.index);
    QVERIFY2(text.contains("ncclDevKernel_AllReduce"), qPrintable(text));
    QVERIFY2(text.contains(QString::fromUtf8("40.0 µs")), qPrintable(text));
    QVERIFY2(text.contains("step 1"), qPrintable(text));
    QVERIFY2(text.contains("exposed"), qPrintable(text));
    // A click on empty time clears the selection.
    QTest::mouseClick(&w, Qt::LeftButton, {}, QPoint(static_cast<int>(w.xOf(t0_ + 95'000)), *w.laneY(ar.lane) + 5));
    QVERIFY(!w.selectedEvent());
  }

  void sameCollectiveOnTheOtherRank() {
    const Found ar = findNamed(*index_, 0, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 1);
    const auto peers = sameCollectiveOnOtherRanks(*index_, ar.lane, ar.index);
    QCOMPARE(peers.size(), std::size_t(1));
    QCOMPARE(peers[0].rank, 1);
    const TimeNs t1 = index_->ranks()[1].minStart;
    QCOMPARE(peers[0].startNs - t1, TimeNs(155'000));  // rank 1's second all-reduce, 5 µs later
    QCOMPARE(peers[0].endNs - peers[0].startNs, TimeNs(20'000));
  }

  void correlatedLaunchFromTheStore() {
    TraceStore store(db_, Database::Mode::ReadOnly);
    const Found gemm = findNamed(*index_, 0, "gemm", 0);
    const EventExtras x = loadEventExtras(store, run_, index_->lane(gemm.lane).eventId[gemm.index]);
    QCOMPARE(x.correlation, std::int64_t(1));
    QCOMPARE(x.launchName, std::string("cudaLaunchKernel"));
    QCOMPARE(x.launchLeadNs, TimeNs(10'000));  // launched at 10 µs, ran at 20 µs
    // A CPU event has no launch of its own.
    const Found launch = findNamed(*index_, 0, "cudaLaunchKernel", 0);
    QVERIFY(loadEventExtras(store, run_, index_->lane(launch.lane).eventId[launch.index]).launchName.empty());
  }

  void rangeStatisticsMatchTheStepBreakdown() {
    TraceStore store(db_, Database::Mode::ReadOnly);
    const auto steps = computeStepBreakdown(store, run_);
    const auto s1 = std::find_if(steps.begin(), steps.end(), [](const StepBreakdown& b) { return b.rank == 0 && b.step == 1; });
    QVERIFY(s1 != steps.end());
    const tl::RangeStats r = tl::rangeStatistics(*index_, 0, s1->startNs, s1->endNs);
    QCOMPARE(r.computeNs, s1->computeNs);
    QCOMPARE(r.commNs, s1->commNs);
    QCOMPARE(r.overlappedCommNs, s1->overlappedCommNs);
    QCOMPARE(r.exposedCommNs, s1->exposedCommNs);
    QCOMPARE(r.exposedCommNs, TimeNs(20'000));
    QCOMPARE(r.collectives, std::int64_t(1));
    // The page shows these figures for a range selected in the widget.
    TimelinePage page;
    page.resize(1400, 900);
    page.setContext(QString::fromStdString(db_), {run_});
    QTRY_VERIFY_WITH_TIMEOUT(!page.busy(), 20000);
    page.timeline()->selectRange(s1->startNs, s1->endNs);
    QTableWidget* t = page.rangeTable();
    QCOMPARE(t->rowCount(), 2);
    QCOMPARE(t->item(0, 0)->text(), QString("0"));
    QCOMPARE(t->item(0, 2)->text(), QString("0.040 ms"));  // compute 40 µs
    QCOMPARE(t->item(0, 5)->text(), QString("0.020 ms"));  // exposed communication 20 µs
    QCOMPARE(t->item(0, 8)->text(), QString("1"));
  }

  void paletteIsConsistentAndDistinct() {
    // Every communication op its own colour, distinct from computation, memory and folded mixed blocks.
    const CollectiveOp ops[] = {CollectiveOp::AllReduce, CollectiveOp::AllGather, CollectiveOp::ReduceScatter,
                                CollectiveOp::Broadcast, CollectiveOp::AllToAll, CollectiveOp::SendRecv,
                                CollectiveOp::Barrier};
    std::vector<QRgb> seen = {timelineColor(tl::makeKey(Category::Computation, CollectiveOp::None)).rgb(),
                              timelineColor(tl::makeKey(Category::Memory, CollectiveOp::None)).rgb(),
                              timelineColor(tl::kMixedKey).rgb(), timeline_palette::background().rgb()};
    for (CollectiveOp op : ops) seen.push_back(timelineColor(tl::makeKey(Category::Communication, op)).rgb());
    for (std::size_t i = 0; i < seen.size(); ++i)
      for (std::size_t j = i + 1; j < seen.size(); ++j) QVERIFY2(seen[i] != seen[j], qPrintable(QString("%1 %2").arg(i).arg(j)));
    // The same key always gets the same colour; send and recv share theirs.
    QCOMPARE(timelineColor(tl::makeKey(Category::Communication, CollectiveOp::Send)),
             timelineColor(tl::makeKey(Category::Communication, CollectiveOp::Recv)));
  }

 private:
  QTemporaryDir dir_;
  std::string db_;
  Id run_ = 0;
  std::shared_ptr<const tl::TimelineIndex> index_;
  TimeNs t0_ = 0;
};

QTEST_MAIN(TestTimelineWidget)
#include "tst_timeline_widget.moc"
