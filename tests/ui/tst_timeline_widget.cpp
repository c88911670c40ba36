// The timeline widget and page on a real store: a hand-made 2-rank GPU trace imported with the real
// importer, the index built by core, the widget rendered into an image whose pixels are checked at
// the positions the events must occupy; navigation, search, hit testing by mouse, selection details,
// range statistics against core's step breakdown, the palette (the page: tst_timeline_page.cpp).
#include <QSignalSpy>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>

#include "core/storage/store_access.h"
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

using shardscope::test::timeline::findNamed;
using shardscope::test::timeline::Found;
using shardscope::test::timeline::trace;
using shardscope::test::timeline::traceMany;

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
    const RunId run = importKineto(store, {writeFile(dir, "init.json", json)}).runIds.at(0);
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
        json +=
            ",\n{\"ph\": \"X\", \"cat\": \"gpu_memcpy\", \"name\": \"Memcpy DtoD\", \"pid\": 0, \"tid\": " + std::to_string(st) +
            ", \"ts\": " + std::to_string(1000 * st + 10 * i) + ", \"dur\": 5, \"args\": {\"stream\": " + std::to_string(st) +
            ", \"device\": 0}}";
    json += "]}";
    const RunId run = importKineto(store, {writeFile(dir, "streams.json", json)}).runIds.at(0);
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

  // An 8-rank trace (ten lanes a rank, as the real ones) opens with every rank on screen in a
  // 1000 px high widget: compact ranks (summary track, compute lane, communication lane), the
  // lanes in the same order on every rank, no duplicated communication lane; a rank expands.
  void eightRanksFitAtOpen() {
    const auto idx = eightRanks();
    QCOMPARE(idx->ranks().size(), std::size_t(8));
    // Same lanes, same order, on every rank; stream 84 (collectives without a group) is not repeated.
    std::vector<std::string> first;
    for (std::uint32_t li : idx->ranks()[0].lanes) first.push_back(idx->lane(li).name);
    for (const auto& rk : idx->ranks()) {
      std::vector<std::string> names;
      for (std::uint32_t li : rk.lanes) names.push_back(idx->lane(li).name);
      QCOMPARE(names, first);
      for (std::uint32_t li : rk.lanes) QVERIFY(idx->lane(li).kind != tl::LaneKind::CommGroup);
    }
    const std::vector<std::string> order{"thread 1", "thread 2", "stream 7", "stream 13", "stream 22", "stream 24", "stream 84"};
    QCOMPARE(first, order);

    TimelineWidget w;
    w.resize(1400, 1000);
    w.setIndex(idx);
    QVERIFY(w.autoLayout());
    for (int r = 0; r < 8; ++r) {
      QCOMPARE(int(w.rankMode(r)), int(TimelineWidget::RankMode::Compact));
      const auto y = w.rankY(r);
      QVERIFY2(y && *y + w.rankHeaderHeight(r) <= w.height(), qPrintable(QString("rank %1").arg(r)));
      // Its compute lane (stream 7) and communication lane (stream 84), and nothing else.
      const auto lanes = w.compactLanes(r);
      QCOMPARE(lanes.size(), std::size_t(2));
      QCOMPARE(idx->lane(lanes[0]).name, std::string("stream 7"));
      QCOMPARE(idx->lane(lanes[1]).name, std::string("stream 84"));
      for (std::uint32_t li : idx->ranks()[static_cast<std::size_t>(r)].lanes) {
        const bool shown = std::find(lanes.begin(), lanes.end(), li) != lanes.end();
        const auto ly = w.laneY(li);
        QCOMPARE(bool(ly), shown);
        if (ly) QVERIFY(*ly + w.rowHeight() <= w.height());
      }
    }
    w.renderNow();
    QCOMPARE(w.drawList()->summaries.size(), std::size_t(8));
    // A click on a rank's label expands it (every lane); the layout is the user's from then on.
    const auto y3 = *w.rankY(3);
    QTest::mouseClick(&w, Qt::LeftButton, {}, QPoint(20, y3 + 4));
    QCOMPARE(int(w.rankMode(3)), int(TimelineWidget::RankMode::Expanded));
    QVERIFY(!w.autoLayout());
    QVERIFY(w.laneY(idx->ranks()[3].lanes[0]));  // thread 1 of rank 3
    QCOMPARE(int(w.rankMode(2)), int(TimelineWidget::RankMode::Compact));
    // Expand all, collapse all (the Lanes menu).
    w.setAllRanksCollapsed(false);
    for (int r = 0; r < 8; ++r) QCOMPARE(int(w.rankMode(r)), int(TimelineWidget::RankMode::Expanded));
    w.setAllRanksCollapsed(true);
    for (int r = 0; r < 8; ++r) QVERIFY(w.rankCollapsed(r) && w.rankY(r));

    // Too low for even the compact layout: collapsed summary tracks, all on screen; taller again
    // (the user has not touched the layout): compact.
    TimelineWidget low;
    low.resize(1400, 200);
    low.setIndex(idx);
    for (int r = 0; r < 8; ++r) {
      QVERIFY(low.rankCollapsed(r));
      QVERIFY(low.rankY(r) && *low.rankY(r) + low.rankHeaderHeight(r) <= low.height());
    }
    low.show();  // a hidden widget gets its resize events when shown
    QVERIFY(QTest::qWaitForWindowExposed(&low));
    low.resize(1400, 1000);
    QCOMPARE(int(low.rankMode(0)), int(TimelineWidget::RankMode::Compact));
    // Room for everything: expanded.
    low.resize(1400, 3000);
    QCOMPARE(int(low.rankMode(7)), int(TimelineWidget::RankMode::Expanded));
    // Lower still: the collapsed rows shrink (to 6 px at the least) so that every rank fits.
    TimelineWidget tiny;
    tiny.resize(1400, 160);
    tiny.setIndex(idx);
    QCOMPARE(tiny.rankHeaderHeight(0), (tiny.height() - tiny.axisHeight()) / 8);
    QVERIFY(tiny.rankHeaderHeight(0) < 18 && tiny.rankHeaderHeight(0) >= 6);
    for (int r = 0; r < 8; ++r) QVERIFY(tiny.rankY(r) && *tiny.rankY(r) + tiny.rankHeaderHeight(r) <= tiny.height());
  }

  // A collapsed rank is its summary track: per pixel, computation from the bottom, exposed
  // communication above it, idle above that; the pixels and the list's shares at known times.
  void collapsedRankDrawsItsSummary() {
    TimelineWidget w;
    w.resize(1200, 700);
    w.setIndex(index_);
    w.setRankCollapsed(0, true);
    w.setViewRange(t0_, t0_ + 200'000);
    w.renderNow();
    QVERIFY(w.drawListCurrent());
    const tl::DrawList* L = w.drawList();
    QCOMPARE(L->summaries.size(), std::size_t(1));
    QCOMPARE(L->summaries[0].rankIndex, 0);
    auto col = [&](TimeNs t) { return L->summaries[0].columns[static_cast<std::size_t>(w.xOf(t0_ + t) - w.labelWidth())]; };
    // Rank 0: gemm [20, 60) µs, all-reduce [40, 80) (exposed from 60), gemm [120, 150), all-reduce [150, 170).
    QCOMPARE(int(col(30'000).compute), 255);
    QCOMPARE(int(col(70'000).exposed), 255);
    QCOMPARE(int(col(70'000).compute), 0);
    QCOMPARE(int(col(90'000).compute + col(90'000).exposed + col(90'000).other), 0);
    QCOMPARE(int(col(160'000).exposed), 255);
    const QImage img = w.grab().toImage();
    const int y = *w.rankY(0), h = w.rankHeaderHeight(0);
    auto px = [&](TimeNs t, int dy) { return img.pixelColor(static_cast<int>(w.xOf(t0_ + t)) + 1, y + dy); };
    QVERIFY2(near(px(30'000, h - 3), timeline_palette::summaryCompute()), qPrintable(px(30'000, h - 3).name()));
    QVERIFY2(near(px(30'000, 3), timeline_palette::summaryCompute()), qPrintable(px(30'000, 3).name()));
    QVERIFY2(near(px(70'000, h - 3), timeline_palette::exposed()), qPrintable(px(70'000, h - 3).name()));
    QVERIFY2(near(px(90'000, h - 3), timeline_palette::summaryIdle()), qPrintable(px(90'000, h - 3).name()));
    // Its lanes are not drawn; rank 1 stays expanded, with no summary.
    QVERIFY(!w.laneY(findNamed(*index_, 0, "gemm", 0).lane));
    QVERIFY(w.laneY(findNamed(*index_, 1, "gemm", 0).lane));
    QVERIFY(!w.rankHasSummary(1));
    // Hover text over the track.
    const QString tip = w.describeSummaryAt(QPoint(static_cast<int>(w.xOf(t0_ + 70'000)) + 1, y + h / 2));
    QVERIFY2(tip.contains("exposed communication 100 %"), qPrintable(tip));
  }

  // Zoomed out, a stream of many tiny kernels folds; the block takes the colour of the operation
  // covering the most time (all-gather here, though compute kernels are more numerous), paler by
  // how little of its span its events cover — never the grey of "mixed".
  void foldedBlockKeepsTheDominantColour() {
    QTemporaryDir dir;
    TraceStore store(pathIn(dir, "fold.db"));
    std::string json = R"J({"traceEvents": [
{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 10000})J";
    double t = 1;
    for (int i = 0; i < 2000; ++i) {
      const bool ag = i % 5 >= 3;  // 3 gemms of 1 µs for 2 all-gathers of 2 µs
      json += std::string(",\n{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"") +
              (ag ? "ncclDevKernel_AllGather_RING_LL" : "gemm") + "\", \"pid\": 0, \"tid\": 7, \"ts\": " + std::to_string(t) +
              ", \"dur\": " + (ag ? "2" : "1") + ", \"args\": {\"stream\": 7, \"device\": 0}}";
      t += (ag ? 2 : 1) + 3;
    }
    json += "]}";
    const RunId run = importKineto(store, {writeFile(dir, "fold.json", json)}).runIds.at(0);
    const auto idx = tl::TimelineIndex::build(store, run);
    TimelineWidget w;
    w.resize(1200, 400);
    w.setIndex(idx);
    w.setViewRange(idx->minStart(), idx->minStart() + 9'000'000);
    w.renderNow();
    const Found g = findNamed(*idx, 0, "gemm", 0);
    const tl::DrawList* L = w.drawList();
    const tl::DrawRect* block = nullptr;
    for (const auto& r : L->rects)  // the stream's block (the derived lane of its all-gathers holds only them)
      if ((r.flags & tl::DrawFlags::Folded) && (r.flags & tl::DrawFlags::Mixed) && r.count > 100) block = &r;
    QVERIFY(block);
    const std::uint8_t ag = tl::makeKey(Category::Communication, CollectiveOp::AllGather);
    QCOMPARE(block->key, ag);
    QVERIFY(block->flags & tl::DrawFlags::Mixed);
    // 7 µs of every 22 µs covered (gemm 3 x 1, all-gather 2 x 2; 3 µs gaps): density 32 %.
    QVERIFY2(std::abs(block->density - 7.0 / 22.0 * 255) <= 3, qPrintable(QString::number(block->density)));
    const QImage img = w.grab().toImage();
    const int x = static_cast<int>(w.xOf(idx->minStart() + 4'000'000));
    const QColor got = img.pixelColor(x, *w.laneY(g.lane) + w.rowHeight() - 3);
    const QColor c = timelineColor(ag), bg = timeline_palette::background();
    const int a = 77 + block->density * 178 / 255;
    const QColor want((c.red() * a + bg.red() * (255 - a)) / 255, (c.green() * a + bg.green() * (255 - a)) / 255,
                      (c.blue() * a + bg.blue() * (255 - a)) / 255);
    QVERIFY2(near(got, want), qPrintable(got.name() + " " + want.name()));
    QVERIFY(!near(got, timelineColor(tl::kMixedKey)));
  }

  // The flow arrow: from the CPU launch's end to the kernel's start, on their rows; from the
  // rank's header when the launch's lane is not shown; gone with the selection.
  void flowArrowFromLaunchToKernel() {
    TimelineWidget w;
    w.resize(1200, 700);
    w.setIndex(index_);
    w.setViewRange(t0_, t0_ + 200'000);
    const Found gemm = findNamed(*index_, 0, "gemm", 0);
    const Found launch = findNamed(*index_, 0, "cudaLaunchKernel", 0);
    const auto& ll = index_->lane(launch.lane);
    QCOMPARE(w.findEventOnTrack(ll.trackId, ll.eventId[launch.index], ll.start[launch.index]),
             std::make_optional(std::make_pair(launch.lane, launch.index)));
    w.selectEvent(gemm.lane, gemm.index);
    w.setFlow({launch.lane, launch.index, gemm.lane, gemm.index});
    w.renderNow();
    const auto line = w.flowLine();
    QVERIFY(line);
    QVERIFY(std::abs(line->p1().x() - w.xOf(t0_ + 11'000)) <= 1.0);  // the launch [10, 11) µs ends
    QVERIFY(std::abs(line->p2().x() - w.xOf(t0_ + 20'000)) <= 1.0);  // the gemm starts
    QVERIFY(std::abs(line->p1().y() -
                     (*w.laneY(launch.lane, index_->lane(launch.lane).depthOf(launch.index)) + w.rowHeight() / 2.0)) <= 1.0);
    QVERIFY(std::abs(line->p2().y() - (*w.laneY(gemm.lane) + w.rowHeight() / 2.0)) <= 1.0);
    // Drawn: dark pixels along the curve, just before the arrow head.
    const QImage img = w.grab().toImage();
    QVERIFY(img.pixelColor(static_cast<int>(line->p2().x()) - 3, static_cast<int>(line->p2().y())).lightness() < 120);
    // The launch's lane hidden: from the rank's header at the launch's time.
    w.setLaneHidden(launch.lane, true);
    const auto fromHeader = w.flowLine();
    QVERIFY(fromHeader);
    QVERIFY(std::abs(fromHeader->p1().y() - (*w.rankY(0) + w.rankHeaderHeight(0) / 2.0)) <= 1.0);
    w.clearSelection();
    QVERIFY(!w.flow());
  }

  // Counter lanes carry their scale: the largest value at the top of the label column, 0 at the bottom.
  void counterLanesHaveAScale() {
    QTemporaryDir dir;
    TraceStore store(pathIn(dir, "mem.db"));
    Run run;
    run.name = "mem";
    run.source = RunSource::Runtime;
    const RunId runId = store.createRun(run);
    Rank rk;
    rk.runId = runId;
    const RankId rankId = store.addRank(rk);
    Track cpu;
    cpu.rankId = rankId;
    cpu.kind = TrackKind::CpuThread;
    cpu.name = "main";
    const TrackId cpuId = store.addTrack(cpu);
    Track mem;
    mem.rankId = rankId;
    mem.kind = TrackKind::Counter;
    mem.name = "memory allocated";
    const TrackId memId = store.addTrack(mem);
    {
      Transaction tx(shardscope::core::storeDb(store));
      BulkWriter bw(store);
      EventRecord e;
      e.trackId = cpuId;
      e.startNs = 0;
      e.endNs = 1000;
      e.nameId = store.intern("step");
      bw.addEvent(e);
      bw.addCounter(memId, 0, 0);
      bw.addCounter(memId, 500, 2.0 * 1024 * 1024 * 1024);
      bw.addCounter(memId, 900, 1.0 * 1024 * 1024 * 1024);
      bw.finish();
      tx.commit();
    }
    const auto idx = tl::TimelineIndex::build(store, runId);
    std::uint32_t lane = 0;
    for (std::uint32_t li = 0; li < idx->lanes().size(); ++li)
      if (idx->lane(li).isCounter()) lane = li;
    TimelineWidget w;
    w.resize(1000, 400);
    w.setIndex(idx);
    w.renderNow();
    const auto y = w.laneY(lane);
    QVERIFY(y);
    const QImage img = w.grab().toImage();
    // Text in the right part of the label column at the top of the counter row (the "2.0 GiB"), none
    // where the lane name would not reach without it.
    auto inkIn = [&](int x0, int x1, int y0, int y1) {
      int n = 0;
      for (int yy = y0; yy < y1; ++yy)
        for (int xx = x0; xx < x1; ++xx)
          if (img.pixelColor(xx, yy).lightness() < 160) ++n;
      return n;
    };
    QVERIFY(inkIn(w.labelWidth() - 50, w.labelWidth() - 6, *y, *y + 10) > 5);
    QVERIFY(inkIn(w.labelWidth() - 20, w.labelWidth() - 6, *y + 20, *y + 34) > 2);  // the "0"
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
                                CollectiveOp::Broadcast, CollectiveOp::AllToAll,  CollectiveOp::SendRecv,
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
  std::shared_ptr<const tl::TimelineIndex> eightRanks() {
    if (eight_) return eight_;
    TraceStore store(pathIn(dir_, "eight.db"));
    std::vector<std::string> files;
    for (int r = 0; r < 8; ++r) files.push_back(writeFile(dir_, "e" + std::to_string(r) + ".json", traceMany(r, 8)));
    const RunId run = importKineto(store, files).runIds.at(0);
    eight_ = tl::TimelineIndex::build(store, run);
    return eight_;
  }

  std::shared_ptr<const tl::TimelineIndex> eight_;
  QTemporaryDir dir_;
  std::string db_;
  RunId run_;
  std::shared_ptr<const tl::TimelineIndex> index_;
  TimeNs t0_ = 0;
};

QTEST_MAIN(TestTimelineWidget)
#include "tst_timeline_widget.moc"
