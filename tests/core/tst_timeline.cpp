// The timeline's core maths (core/timeline): the index (depths, visible-window search), level of
// detail (folding, clipping, minimum widths), hit testing, counter curves, exposed communication and
// range statistics against core's analyses on the same range. No GUI.
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <set>

#include "core/storage/store_access.h"
#include "core/analysis/collectives.h"
#include "core/analysis/rank_scan.h"
#include "core/analysis/step_breakdown.h"
#include "core/import/kineto_importer.h"
#include "core/storage/trace_store.h"
#include "core/timeline/draw_list.h"
#include "core/timeline/range_stats.h"
#include "core/timeline/timeline_index.h"
#include "tests/common/test_support.h"
#include "tests/tools/kineto_generator.h"

using namespace shardscope::core;
using namespace shardscope::core::timeline;
using shardscope::test::pathIn;

namespace {

// A run written straight into a store with the bulk writer.
struct Fixture {
  QTemporaryDir dir;
  std::unique_ptr<TraceStore> store;
  RunId run;
  std::vector<EventRecord> pending;
  std::vector<std::tuple<TrackId, TimeNs, double>> samples;

  Fixture() {
    store = std::make_unique<TraceStore>(pathIn(dir, "t.db"));
    Run r;
    r.name = "fixture";
    r.source = RunSource::Runtime;
    r.worldSize = 2;  // the groups below have two ranks (a run of one rank has only local collectives)
    run = store->createRun(r);
  }
  RankId rank(int n) {
    Rank rk;
    rk.runId = run;
    rk.rank = n;
    rk.device = "cuda:" + std::to_string(n);
    return store->addRank(rk);
  }
  TrackId track(RankId rankId, TrackKind kind, const std::string& name, int sortIndex = 0) {
    Track t;
    t.rankId = rankId;
    t.kind = kind;
    t.name = name;
    t.sortIndex = sortIndex;
    return store->addTrack(t);
  }
  Id group(const std::string& name, int size) {
    ProcessGroup pg;
    pg.runId = run;
    pg.name = name;
    pg.size = size;
    return store->addProcessGroup(pg);
  }
  EventRecord& ev(TrackId trackId, TimeNs s, TimeNs e, const std::string& name = "k", Category category = Category::Computation,
                  const std::string& cat = "kernel") {
    EventRecord r;
    r.trackId = trackId;
    r.startNs = s;
    r.endNs = e;
    r.nameId = store->intern(name);
    r.catId = cat.empty() ? 0 : store->intern(cat);
    r.category = category;
    if (s == e && cat == "instant") r.flags = EventFlags::Instant;
    pending.push_back(r);
    return pending.back();
  }
  EventRecord& coll(TrackId trackId, TimeNs s, TimeNs e, CollectiveOp op, std::int64_t bytes, Id pg = 0) {
    EventRecord& r = ev(trackId, s, e, "ncclDevKernel", Category::Communication);
    r.collOp = op;
    r.bytes = bytes;
    if (pg) r.processGroupId = pg;
    return r;
  }
  void sample(TrackId trackId, TimeNs ts, double v) { samples.emplace_back(trackId, ts, v); }
  void write() {
    Transaction tx(shardscope::core::storeDb(*store));
    BulkWriter w(*store);
    for (const auto& e : pending) w.addEvent(e);
    for (const auto& [t, ts, v] : samples) w.addCounter(t, ts, v);
    w.finish();
    tx.commit();
    pending.clear();
    samples.clear();
  }
  std::shared_ptr<const TimelineIndex> index(const BuildOptions& o = {}) {
    write();
    return TimelineIndex::build(*store, run, o);
  }
};

std::uint32_t laneOf(const TimelineIndex& idx, TrackId trackId) {
  for (std::uint32_t i = 0; i < idx.lanes().size(); ++i)
    if (idx.lane(i).trackId == trackId) return i;
  return TimelineIndex::kNoEvent;
}

// Every event of every depth of a lane overlapping [t0, t1), as store event ids.
std::set<Id> windowIds(const TimelineIndex& idx, std::uint32_t lane, TimeNs t0, TimeNs t1) {
  std::set<Id> out;
  const Lane& l = idx.lane(lane);
  for (std::uint32_t d = 0; d < l.depthCount(); ++d) {
    const IndexRange r = idx.window(lane, d, t0, t1);
    for (std::uint32_t i = r.begin; i < r.end; ++i) out.insert(l.eventId[i]);
  }
  return out;
}

Viewport viewOf(const TimelineIndex& idx, TimeNs t0, TimeNs t1, int width, float rowHeight = 10) {
  Viewport v;
  v.t0 = t0;
  v.t1 = t1;
  v.widthPx = width;
  float y = 0;
  for (std::uint32_t i = 0; i < idx.lanes().size(); ++i) {
    const Lane& l = idx.lane(i);
    v.lanes.push_back(ViewLane{i, y, rowHeight});
    y += rowHeight * static_cast<float>(l.isCounter() ? 1 : std::max<std::uint32_t>(1, l.depthCount()));
  }
  return v;
}

// Tracy's folding rule applied event by event: the reference for the galloping implementation.
struct RefRect {
  std::uint32_t first, count;
  TimeNs s, e;
};
std::vector<RefRect> naiveRow(const Lane& l, IndexRange w, TimeNs G) {
  std::vector<RefRect> out;
  for (std::uint32_t i = w.begin; i < w.end;) {
    if (l.end[i] - l.start[i] >= G) {
      out.push_back({i, 1, l.start[i], l.end[i]});
      ++i;
      continue;
    }
    std::uint32_t j = i + 1;
    while (j < w.end && l.end[j] - l.start[j] < G && l.start[j] - l.end[j - 1] < G) ++j;
    out.push_back({i, j - i, l.start[i], l.end[j - 1]});
    i = j;
  }
  return out;
}

// Core's analyses on a range: the events of each track overlapping [t0, t1) (the store's window
// query), clipped to it, fed to the step-breakdown and collectives accumulators as one step.
struct Reference {
  TimeNs compute = 0, comm = 0, overlapped = 0, exposed = 0, otherBusy = 0;
  std::int64_t collectives = 0, bytes = 0;
};
Reference analyseRange(TraceStore& store, RunId runId, int rankNumber, TimeNs t0, TimeNs t1) {
  ScanContext ctx(store, runId);
  StepBreakdownAccumulator steps(ctx);
  CollectivesAccumulator colls(ctx);
  const Rank* rank = nullptr;
  for (const auto& r : ctx.summary.ranks)
    if (r.rank == rankNumber) rank = &r;
  Reference ref;
  if (!rank) return ref;
  steps.beginRank(*rank);
  colls.beginRank(*rank);
  for (const TrackSummary& t : ctx.summary.tracks) {
    if (t.track.rankId != rank->id) continue;
    const bool ws = steps.beginTrack(t), wc = colls.beginTrack(t);
    if (!ws && !wc) continue;
    EventChunk c;
    for (const Event& e : store.eventsInWindow(t.track.id, t0, t1)) {
      EventRecord r;
      r.trackId = t.track.id;
      r.startNs = std::max(e.startNs, t0);
      r.endNs = std::min(e.endNs, t1);
      r.nameId = store.intern(e.name);
      r.catId = e.cat.empty() ? 0 : store.intern(e.cat);
      r.category = e.category;
      r.flags = e.flags;
      r.collOp = e.collOp;
      r.processGroupId = e.processGroupId;
      r.bytes = e.bytes;
      r.groupSize = e.groupSize;
      c.push(r);
    }
    if (ws) steps.onEvents(c, 0, c.size(), 1);
    if (wc) colls.onEvents(c, 0, c.size(), 1);
  }
  steps.endRank(*rank);
  colls.endRank(*rank);
  for (const auto& b : steps.finish()) {
    ref.compute += b.computeNs;
    ref.comm += b.commNs;
    ref.overlapped += b.overlappedCommNs;
    ref.exposed += b.exposedCommNs;
    ref.otherBusy += b.otherBusyNs;
  }
  for (const auto& c : colls.finish()) {
    ref.collectives += c.count;
    ref.bytes += c.bytes;
  }
  return ref;
}

void compareRange(const TimelineIndex& idx, TraceStore& store, int rankIndex, TimeNs t0, TimeNs t1) {
  const RangeStats s = rangeStatistics(idx, rankIndex, t0, t1);
  const Reference ref = analyseRange(store, idx.runId(), idx.ranks()[static_cast<std::size_t>(rankIndex)].rank, t0, t1);
  const QByteArray where = QByteArray("rank ") + QByteArray::number(rankIndex) + " [" + QByteArray::number(qint64(t0)) + ", " +
                           QByteArray::number(qint64(t1)) + ")";
  QVERIFY2(s.computeNs == ref.compute, where);
  QVERIFY2(s.commNs == ref.comm, where);
  QVERIFY2(s.overlappedCommNs == ref.overlapped, where);
  QVERIFY2(s.exposedCommNs == ref.exposed, where);
  QVERIFY2(s.otherBusyNs == ref.otherBusy, where);
  QVERIFY2(s.collectives == ref.collectives, where);
  QVERIFY2(s.bytes == ref.bytes, where);
}

}  // namespace

class TestTimeline : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void depthsAndWindow() {
    Fixture f;
    const RankId r = f.rank(0);
    const TrackId t = f.track(r, TrackKind::CpuThread, "main");
    f.ev(t, 0, 100, "A");
    f.ev(t, 10, 50, "B");
    f.ev(t, 20, 30, "C");
    f.ev(t, 60, 90, "D");
    f.ev(t, 100, 100, "E");  // zero-length, right where A ends
    f.ev(t, 150, 400, "F");  // wider than the windows below
    f.ev(t, 420, 420, "G");  // zero-length, alone
    const auto idx = f.index();
    const std::uint32_t L = laneOf(*idx, t);
    const Lane& l = idx->lane(L);
    QCOMPARE(l.depthCount(), 3u);
    auto nameAt = [&](std::uint32_t i) { return std::string(idx->name(l.nameIdx[i])); };
    auto names = [&](std::uint32_t d, TimeNs t0, TimeNs t1) {
      std::string s;
      const IndexRange w = idx->window(L, d, t0, t1);
      for (std::uint32_t i = w.begin; i < w.end; ++i) s += nameAt(i);
      return s;
    };
    QCOMPARE(names(0, 0, 1000), std::string("AEFG"));
    QCOMPARE(names(1, 0, 1000), std::string("BD"));
    QCOMPARE(names(2, 0, 1000), std::string("C"));
    QCOMPARE(l.depthOf(l.depthBegin[2]), 2u);
    // Started before the window, overlapping it.
    QCOMPARE(names(0, 25, 26), std::string("A"));
    QCOMPARE(names(1, 25, 26), std::string("B"));
    QCOMPARE(names(2, 25, 26), std::string("C"));
    QCOMPARE(names(0, 95, 99), std::string("A"));
    QCOMPARE(names(1, 95, 99), std::string(""));
    // Ending exactly at t0 is outside; a zero-length event at t0 is inside.
    QCOMPARE(names(0, 100, 101), std::string("E"));
    QCOMPARE(names(0, 90, 100), std::string("A"));  // E at 100 is not before 100
    // Wider than the window on both sides.
    QCOMPARE(names(0, 200, 300), std::string("F"));
    QCOMPARE(names(0, 420, 421), std::string("G"));
    QCOMPARE(names(0, 419, 420), std::string(""));
    // Point lookups.
    QCOMPARE(nameAt(idx->innermostAt(L, 25)), std::string("C"));
    QCOMPARE(nameAt(idx->innermostAt(L, 55)), std::string("A"));
    QCOMPARE(nameAt(idx->innermostAt(L, 100)), std::string("E"));
    QCOMPARE(nameAt(idx->eventAt(L, 0, 420)), std::string("G"));
    QCOMPARE(idx->innermostAt(L, 120), TimelineIndex::kNoEvent);
    // Ids lead back to the store.
    const auto ev = f.store->event(l.eventId[idx->innermostAt(L, 25)], false);
    QVERIFY(ev.has_value());
    QCOMPARE(std::string(ev->name), std::string("C"));
    QCOMPARE(idx->eventCount(), std::uint64_t(7));
  }

  void windowMatchesStoreOnRandomSpans() {
    // Nesting, partial overlaps, zero-length events and long spans: the union of the per-depth
    // windows is exactly the store's eventsInWindow, for any window.
    Fixture f;
    const RankId r = f.rank(0);
    const TrackId t = f.track(r, TrackKind::CpuThread, "main");
    std::mt19937_64 rng(42);
    for (int i = 0; i < 5000; ++i) {
      const TimeNs s = static_cast<TimeNs>(rng() % 100000);
      const int kind = static_cast<int>(rng() % 10);
      const TimeNs d = kind == 0 ? 0 : kind == 1 ? static_cast<TimeNs>(rng() % 50000) : static_cast<TimeNs>(rng() % 300);
      f.ev(t, s, s + d);
    }
    const auto idx = f.index();
    const std::uint32_t L = laneOf(*idx, t);
    const Lane& l = idx->lane(L);
    // Within a depth, spans do not overlap and are sorted (what the binary search relies on).
    for (std::uint32_t d = 0; d < l.depthCount(); ++d)
      for (std::uint32_t i = l.depthBegin[d] + 1; i < l.depthBegin[d + 1]; ++i) QVERIFY(l.start[i] >= l.end[i - 1]);
    for (int k = 0; k < 300; ++k) {
      TimeNs t0 = static_cast<TimeNs>(rng() % 110000) - 5000;
      TimeNs t1 = t0 + static_cast<TimeNs>(rng() % (k % 3 == 0 ? 50 : 20000));
      if (k % 7 == 0) {  // windows on event boundaries
        const std::uint32_t i = static_cast<std::uint32_t>(rng() % l.eventCount());
        t0 = l.start[i];
        t1 = l.end[i] + (k % 2);
      }
      std::set<Id> expected;
      for (const Event& e : f.store->eventsInWindow(t, t0, t1)) expected.insert(e.id);
      QCOMPARE(windowIds(*idx, L, t0, t1), expected);
    }
  }

  void deepNesting() {
    Fixture f;
    const RankId r = f.rank(0);
    const TrackId t = f.track(r, TrackKind::CpuThread, "main");
    constexpr int kDepth = 40;
    for (int i = 0; i < kDepth; ++i) f.ev(t, i * 10, 10'000 - i * 10, "level" + std::to_string(i));
    const auto idx = f.index();
    const std::uint32_t L = laneOf(*idx, t);
    const Lane& l = idx->lane(L);
    QCOMPARE(l.depthCount(), std::uint32_t(kDepth));
    for (std::uint32_t d = 0; d < kDepth; ++d) {
      const IndexRange w = idx->window(L, d, 5000, 5001);
      QCOMPARE(w.size(), 1u);
      QCOMPARE(std::string(idx->name(l.nameIdx[w.begin])), "level" + std::to_string(d));
    }
    QCOMPARE(std::string(idx->name(l.nameIdx[idx->innermostAt(L, 5000)])), std::string("level39"));
    QCOMPARE(std::string(idx->name(l.nameIdx[idx->innermostAt(L, 395)])), std::string("level39"));
    QCOMPARE(std::string(idx->name(l.nameIdx[idx->innermostAt(L, 385)])), std::string("level38"));
    // Every level drawn, one row each; the hit at the deepest row is the innermost event.
    Viewport v = viewOf(*idx, 0, 10'000, 1000, 10);
    const DrawList dl = buildDrawList(*idx, v);
    QCOMPARE(dl.rowBegin[1] - dl.rowBegin[0], std::uint32_t(kDepth));
    QCOMPARE(dl.rects.size(), std::size_t(kDepth));
    const Hit h = hitTest(dl, v, 500, 39 * 10 + 5);
    QCOMPARE(int(h.kind), int(Hit::Kind::Event));
    QCOMPARE(h.depth, 39u);
    QCOMPARE(std::string(idx->name(l.nameIdx[h.index])), std::string("level39"));
    // Collapsed to 4 rows: nothing deeper is drawn or hit.
    v.lanes[0].maxDepth = 4;
    const DrawList collapsed = buildDrawList(*idx, v);
    QCOMPARE(collapsed.rects.size(), std::size_t(4));
    QCOMPARE(int(hitTest(collapsed, v, 500, 39 * 10 + 5).kind), int(Hit::Kind::None));
  }

  void foldingCountsAndExtents() {
    Fixture f;
    const RankId r = f.rank(0);
    const TrackId t = f.track(r, TrackKind::GpuStream, "stream 7");
    // Window [0, 10000) ns at 1000 px: 10 ns a pixel, events under 3 px (30 ns) fold.
    for (int i = 0; i < 100; ++i) f.ev(t, i * 10, i * 10 + 1, "tiny");                // 0 .. 991: one block
    f.ev(t, 2000, 3000, "wide");                                                      // 100 px
    for (int i = 0; i < 50; ++i) f.ev(t, 5000 + i * 10, 5000 + i * 10 + 1, "tiny2");  // 5000 .. 5491
    f.ev(t, 6000, 6010, "pairA");                                                     // gap of exactly 30 ns:
    f.ev(t, 6040, 6050, "pairB");                                                     // not folded together
    f.ev(t, 8000, 8001, "lonely");                                                    // narrow, alone: 1 px
    f.ev(t, 9000, 9000, "zero");                                                      // zero-length: 1 px
    f.ev(t, 9500, 12'000, "past the end");                                            // clipped right
    const auto idx = f.index();
    const Viewport v = viewOf(*idx, 0, 10'000, 1000);
    const DrawList dl = buildDrawList(*idx, v);
    const Lane& l = idx->lane(laneOf(*idx, t));
    QCOMPARE(dl.rects.size(), std::size_t(8));
    const auto& R = dl.rects;
    QCOMPARE(R[0].count, 100u);
    QVERIFY(R[0].flags & DrawFlags::Folded);
    QCOMPARE(R[0].x0, 0.0f);
    QCOMPARE(R[0].x1, 99.1f);
    QVERIFY(R[0].flags & DrawFlags::TextFull);  // "100 events" in 99 px
    QCOMPARE(R[1].count, 1u);
    QCOMPARE(R[1].x0, 200.0f);
    QCOMPARE(R[1].x1, 300.0f);
    QVERIFY(R[1].flags & DrawFlags::TextFull);
    QCOMPARE(std::string(idx->name(l.nameIdx[R[1].first])), std::string("wide"));
    QCOMPARE(R[2].count, 50u);
    QCOMPARE(R[2].first, 101u);
    QCOMPARE(R[2].x0, 500.0f);
    QCOMPARE(R[2].x1, 549.1f);
    QCOMPARE(R[3].count, 1u);  // pairA: 1 px wide but the gap to pairB is a full 3 px
    QCOMPARE(R[4].count, 1u);
    QCOMPARE(std::string(idx->name(l.nameIdx[R[4].first])), std::string("pairB"));
    QCOMPARE(R[5].count, 1u);
    QVERIFY(!(R[5].flags & DrawFlags::Folded));
    QVERIFY(R[5].flags & DrawFlags::Widened);
    QCOMPARE(R[5].x1 - R[5].x0, 1.0f);
    QCOMPARE(R[6].x0, 900.0f);
    QCOMPARE(R[6].x1, 901.0f);
    QVERIFY(R[6].flags & DrawFlags::Widened);
    QCOMPARE(R[7].x0, 950.0f);
    QCOMPARE(R[7].x1, 1000.0f);
    QVERIFY(R[7].flags & DrawFlags::ClippedRight);
    QCOMPARE(dl.eventsInView, std::uint64_t(156));
    // Zoomed in on the first block: no folding, every event its own rectangle (widened to 1 px).
    const DrawList in = buildDrawList(*idx, viewOf(*idx, 0, 100, 1000));
    QCOMPARE(in.rects.size(), std::size_t(10));
    QCOMPARE(in.rects[3].x0, 300.0f);
    QCOMPARE(in.rects[3].x1, 310.0f);
    // Zoomed out further, the first groups merge: 30 px gaps vanish at 100 ns a pixel.
    const DrawList out = buildDrawList(*idx, viewOf(*idx, 0, 100'000, 1000));
    QVERIFY(out.rects.size() < dl.rects.size());
    std::uint64_t covered = 0;
    for (const auto& rc : out.rects) covered += rc.count;
    QCOMPARE(covered, std::uint64_t(156));
  }

  void foldingMatchesNaiveRule() {
    // The galloping fold equals the event-by-event rule, at many zoom levels, on rows with nesting,
    // clusters, gaps and zero-length events.
    Fixture f;
    const RankId r = f.rank(0);
    const TrackId t = f.track(r, TrackKind::CpuThread, "main");
    std::mt19937_64 rng(7);
    TimeNs now = 0;
    for (int i = 0; i < 20000; ++i) {
      const int mode = static_cast<int>(rng() % 100);
      now += mode < 5 ? static_cast<TimeNs>(rng() % 100000) : static_cast<TimeNs>(rng() % 200);
      const TimeNs d = mode < 10 ? 0 : mode < 15 ? static_cast<TimeNs>(rng() % 40000) : static_cast<TimeNs>(rng() % 500);
      f.ev(t, now, now + d);
      if (mode > 90) f.ev(t, now, now + d / 2);  // a child
    }
    const auto idx = f.index();
    const std::uint32_t L = laneOf(*idx, t);
    const Lane& l = idx->lane(L);
    for (int k = 0; k < 60; ++k) {
      const TimeNs span = std::max<TimeNs>(100, static_cast<TimeNs>(idx->maxEnd() >> (k % 20)));
      const TimeNs t0 =
          idx->minStart() +
          static_cast<TimeNs>(rng() % static_cast<std::uint64_t>(std::max<TimeNs>(1, idx->maxEnd() - idx->minStart()))) -
          span / 2;
      Viewport v = viewOf(*idx, t0, t0 + span, 800 + k * 17);
      const DrawList dl = buildDrawList(*idx, v);
      for (std::uint32_t d = 0; d < l.depthCount(); ++d) {
        const DrawRow& row = dl.rows[dl.rowBegin[0] + d];
        const auto ref =
            naiveRow(l, idx->window(L, d, v.t0, v.t1), std::max<TimeNs>(1, static_cast<TimeNs>(std::ceil(3.0 * dl.nsPerPx))));
        QCOMPARE(std::size_t(row.end - row.begin), ref.size());
        for (std::size_t q = 0; q < ref.size(); ++q) {
          const DrawRect& rc = dl.rects[row.begin + q];
          QCOMPARE(rc.first, ref[q].first);
          QCOMPARE(rc.count, ref[q].count);
          QVERIFY(rc.x0 >= 0 && rc.x1 <= static_cast<float>(v.widthPx) && rc.x1 - rc.x0 >= 1.0f - 1e-4f);
          QVERIFY(std::abs(rc.x0 - dl.px(std::max(ref[q].s, v.t0))) < 1.01f);
        }
      }
    }
  }

  void longFoldsUseSummaries() {
    // Folds of tens of thousands of events are found through the per-64 and per-4096 summaries; a
    // wide event or a gap deep inside a summary block still ends the fold exactly there.
    Fixture f;
    const RankId r = f.rank(0);
    const TrackId t = f.track(r, TrackKind::GpuStream, "stream 7");
    TimeNs now = 0;
    for (int i = 0; i < 50'000; ++i) {
      if (i == 30'001) now += 20'000;                // a gap of 20 µs
      const TimeNs d = i == 10'007 ? 1'000'000 : 1;  // one wide event
      f.ev(t, now, now + d, i == 20'000 ? "other" : "k", i == 20'000 ? Category::Memory : Category::Computation);
      now += d + 9;
    }
    const auto idx = f.index();
    const std::uint32_t L = laneOf(*idx, t);
    const Lane& l = idx->lane(L);
    // 1.52 ms at 1000 px: 1.5 µs a pixel, G = 4.6 µs: the 1 ns events fold, the wide one and the gap cut.
    const DrawList dl = buildDrawList(*idx, viewOf(*idx, 0, idx->maxEnd(), 1000));
    QCOMPARE(dl.rects.size(), std::size_t(4));
    QCOMPARE(dl.rects[0].count, 10'007u);
    QCOMPARE(dl.rects[0].key, makeKey(Category::Computation, CollectiveOp::None));
    QCOMPARE(dl.rects[1].count, 1u);
    QCOMPARE(dl.rects[1].first, 10'007u);
    QCOMPARE(dl.rects[2].first, 10'008u);
    QCOMPARE(dl.rects[2].count, 30'001u - 10'008u);
    // Holds the one memory event: coloured by the key covering the most time (computation), flagged mixed.
    QCOMPARE(dl.rects[2].key, makeKey(Category::Computation, CollectiveOp::None));
    QVERIFY(dl.rects[2].flags & DrawFlags::Mixed);
    QVERIFY(!(dl.rects[0].flags & DrawFlags::Mixed));
    QCOMPARE(dl.rects[3].first, 30'001u);
    QCOMPARE(dl.rects[3].count, 50'000u - 30'001u);
    for (int k = 0; k < 20; ++k) {
      const TimeNs t0 = static_cast<TimeNs>(k) * 40'000;
      const Viewport v = viewOf(*idx, t0, t0 + 1'500'000 - k * 70'000, 700 + k);
      const DrawList d = buildDrawList(*idx, v);
      const auto ref =
          naiveRow(l, idx->window(L, 0, v.t0, v.t1), std::max<TimeNs>(1, static_cast<TimeNs>(std::ceil(3.0 * d.nsPerPx))));
      QCOMPARE(d.rects.size(), ref.size());
      for (std::size_t q = 0; q < ref.size(); ++q) QCOMPARE(d.rects[q].count, ref[q].count);
    }
  }

  void foldKeysAndExposure() {
    Fixture f;
    const RankId r = f.rank(0);
    const TrackId compute = f.track(r, TrackKind::GpuStream, "stream 7");
    const TrackId nccl = f.track(r, TrackKind::GpuStream, "stream 21");
    // Computation [0, 50) and [200, 300); an all-gather [20, 100) (exposed 50..100), an all-reduce
    // [210, 260) (hidden), a reduce-scatter [400, 500) (all exposed).
    f.ev(compute, 0, 50, "gemm");
    f.ev(compute, 200, 300, "gemm");
    f.coll(nccl, 20, 100, CollectiveOp::AllGather, 1000);
    f.coll(nccl, 210, 260, CollectiveOp::AllReduce, 2000);
    f.coll(nccl, 400, 500, CollectiveOp::ReduceScatter, 3000);
    const auto idx = f.index();
    const RankInfo& rk = idx->ranks().at(0);
    QVERIFY(rk.hasGpu);
    QCOMPARE(rk.exposed.size(), std::size_t(2));
    QCOMPARE(rk.exposed[0].s, TimeNs(50));
    QCOMPARE(rk.exposed[0].e, TimeNs(100));
    QCOMPARE(rk.exposed[1].s, TimeNs(400));
    QCOMPARE(rk.exposed[1].e, TimeNs(500));
    const std::uint32_t N = laneOf(*idx, nccl);
    const Lane& l = idx->lane(N);
    QVERIFY(l.bits[0] & EventBits::Exposed);
    QVERIFY(!(l.bits[1] & EventBits::Exposed));
    QVERIFY(l.bits[2] & EventBits::Exposed);
    QVERIFY(l.bits[0] & EventBits::Collective);
    QCOMPARE(int(keyOp(l.key[0])), int(CollectiveOp::AllGather));
    QCOMPARE(int(keyCategory(l.key[0])), int(Category::Communication));
    QCOMPARE(*idx->bytes(N, 2), std::int64_t(3000));
    // Fully zoomed in: one rectangle each, exposure flagged per event, exposed spans in pixels.
    const DrawList dl = buildDrawList(*idx, viewOf(*idx, 0, 1000, 1000));
    QCOMPARE(dl.exposed.size(), std::size_t(2));
    QCOMPARE(dl.exposed[0].x0, 50.0f);
    QCOMPARE(dl.exposed[0].x1, 100.0f);
    // Zoomed out so far that the three collectives fold: one block, mixed key, exposed.
    const DrawList far = buildDrawList(*idx, viewOf(*idx, 0, 1'000'000, 1000));
    const DrawRow& row = far.rows[far.rowBegin[N]];
    QCOMPARE(row.end - row.begin, 1u);
    const DrawRect& block = far.rects[row.begin];
    QCOMPARE(block.count, 3u);
    // The reduce-scatter covers the most time (100 ns of 80, 50, 100... ties go to the smaller key:
    // here none): the block's colour; its events cover 230 of its 480 ns.
    QCOMPARE(block.key, makeKey(Category::Communication, CollectiveOp::ReduceScatter));
    QVERIFY(block.flags & DrawFlags::Mixed);
    QCOMPARE(int(block.density), int((230 * 255 + 240) / 480));
    QVERIFY(block.bits & EventBits::Exposed);
    // Compute-only block: one key, nothing exposed.
    const DrawRow& crow = far.rows[far.rowBegin[laneOf(*idx, compute)]];
    QCOMPARE(far.rects[crow.begin].key, makeKey(Category::Computation, CollectiveOp::None));
    QVERIFY(!(far.rects[crow.begin].bits & EventBits::Exposed));
    // Exposed spans merge when under a pixel apart.
    QCOMPARE(far.exposed.size(), std::size_t(1));
    QCOMPARE(far.exposed[0].x1 - far.exposed[0].x0, 1.0f);
  }

  void foldedBlockTakesTheDominantKeyByTime() {
    // 12 800 events on one stream, 3 compute kernels of 1 ns for every 2 all-gathers of 2 ns: more
    // compute events, more all-gather time (all-gather 4 ns of every 7 covered). Every block of 64
    // is dominated by the all-gathers, and so is the fold; a grey "mixed" block would lose that.
    Fixture f;
    const RankId r = f.rank(0);
    const TrackId t = f.track(r, TrackKind::GpuStream, "stream 7");
    TimeNs now = 0;
    TimeNs covered = 0;
    for (int i = 0; i < 12'800; ++i) {
      const bool ag = i % 5 >= 3;
      const TimeNs d = ag ? 2 : 1;
      if (ag)
        f.coll(t, now, now + d, CollectiveOp::AllGather, 8);
      else
        f.ev(t, now, now + d, "gemm");
      covered += d;
      now += d + 3;  // 3 ns gaps
    }
    const auto idx = f.index();
    const std::uint32_t L = laneOf(*idx, t);
    const Lane& l = idx->lane(L);
    for (std::size_t b = 0; b < l.blockTopKey.size(); ++b)
      QCOMPARE(l.blockTopKey[b], makeKey(Category::Communication, CollectiveOp::AllGather));
    // The stream's row (the derived lane of its collectives is drawn too).
    auto rowOf = [](const DrawList& d, std::uint32_t viewLane) { return d.rows[d.rowBegin[viewLane]]; };
    const DrawList dl = buildDrawList(*idx, viewOf(*idx, 0, now, 100));
    QCOMPARE(rowOf(dl, L).end - rowOf(dl, L).begin, 1u);
    const DrawRect& block = dl.rects[rowOf(dl, L).begin];
    QCOMPARE(block.count, 12'800u);
    QCOMPARE(block.key, makeKey(Category::Communication, CollectiveOp::AllGather));
    QVERIFY(block.flags & DrawFlags::Mixed);
    const TimeNs span = l.end[l.eventCount() - 1] - l.start[0];
    QCOMPARE(int(block.density), int((covered * 255 + span / 2) / span));
    // A fold that starts and ends inside blocks (its edges are walked event by event): the same.
    const TimeNs a = l.start[1000] + 1, e = l.start[9000] + 1;
    const DrawList part = buildDrawList(*idx, viewOf(*idx, a, e, 50));
    QCOMPARE(rowOf(part, L).end - rowOf(part, L).begin, 1u);
    QCOMPARE(part.rects[rowOf(part, L).begin].key, makeKey(Category::Communication, CollectiveOp::AllGather));
    // Compute dominating by time instead (the same counts, 4 ns compute kernels): computation's colour.
    Fixture g;
    const RankId r2 = g.rank(0);
    const TrackId t2 = g.track(r2, TrackKind::GpuStream, "stream 7");
    now = 0;
    for (int i = 0; i < 1000; ++i) {
      const bool ag = i % 5 >= 3;
      const TimeNs d = ag ? 2 : 4;
      if (ag)
        g.coll(t2, now, now + d, CollectiveOp::AllGather, 8);
      else
        g.ev(t2, now, now + d, "gemm");
      now += d + 3;
    }
    const auto idx2 = g.index();
    const std::uint32_t L2 = laneOf(*idx2, t2);
    const DrawList dl2 = buildDrawList(*idx2, viewOf(*idx2, 0, now, 10));
    QCOMPARE(rowOf(dl2, L2).end - rowOf(dl2, L2).begin, 1u);
    QCOMPARE(dl2.rects[rowOf(dl2, L2).begin].key, makeKey(Category::Computation, CollectiveOp::None));
  }

  void summaryTrackShares() {
    // One rank: compute [0, 100), an all-reduce [50, 150) (exposed 100..150), a copy [200, 250)
    // (work that is neither), idle elsewhere, over [0, 300).
    Fixture f;
    const RankId r = f.rank(0);
    const TrackId s7 = f.track(r, TrackKind::GpuStream, "stream 7");
    const TrackId s21 = f.track(r, TrackKind::GpuStream, "stream 21");
    f.ev(s7, 0, 100, "gemm");
    f.coll(s21, 50, 150, CollectiveOp::AllReduce, 64);
    f.ev(s7, 200, 250, "Memcpy DtoD", Category::Memory, "gpu_memcpy");
    const auto idx = f.index();
    const RankInfo& rk = idx->ranks().at(0);
    QCOMPARE(rk.computeCover.total(), TimeNs(100));
    QCOMPARE(rk.workCover.total(), TimeNs(200));
    QCOMPARE(rk.exposedCover.total(), TimeNs(50));
    QCOMPARE(rk.workCover.covered(120, 220), TimeNs(30 + 20));
    // 50 ns a column: whole states.
    const RankSummary s6 = buildRankSummary(*idx, 0, 0, 300, 6);
    QCOMPARE(s6.columns.size(), std::size_t(6));
    const int expect6[6][3] = {{255, 0, 0}, {255, 0, 0}, {0, 255, 0}, {0, 0, 0}, {0, 0, 255}, {0, 0, 0}};
    for (int c = 0; c < 6; ++c) {
      QCOMPARE(int(s6.columns[c].compute), expect6[c][0]);
      QCOMPARE(int(s6.columns[c].exposed), expect6[c][1]);
      QCOMPARE(int(s6.columns[c].other), expect6[c][2]);
    }
    // 100 ns a column: halves (the overlapped half of the all-reduce counts as computing).
    const RankSummary s3 = buildRankSummary(*idx, 0, 0, 300, 3);
    QCOMPARE(int(s3.columns[0].compute), 255);
    QCOMPARE(int(s3.columns[1].compute), 0);
    QCOMPARE(int(s3.columns[1].exposed), 128);
    QCOMPARE(int(s3.columns[2].other), 128);
    QCOMPARE(int(s3.columns[2].compute + s3.columns[2].exposed), 0);
    // Through the draw list: one strip per requested rank, no lanes needed.
    Viewport v;
    v.t0 = 0;
    v.t1 = 300;
    v.widthPx = 6;
    v.summaryRanks = {0};
    const DrawList dl = buildDrawList(*idx, v);
    QCOMPARE(dl.summaries.size(), std::size_t(1));
    QCOMPARE(dl.summaries[0].rankIndex, 0);
    QCOMPARE(int(dl.summaries[0].columns[2].exposed), 255);
    QVERIFY(dl.rects.empty());
  }

  void summaryTrackMatchesRangeStatistics() {
    // A generated 2-rank trace: every column's shares are range_stats' figures for that column.
    QTemporaryDir dir;
    TraceStore store(pathIn(dir, "s.db"));
    std::vector<std::string> files;
    for (int rank = 0; rank < 2; ++rank) {
      shardscope::test::KinetoGenOptions o;
      o.events = 6000;
      o.rank = rank;
      o.worldSize = 2;
      o.seed = 11 + static_cast<std::uint64_t>(rank);
      const std::string path = pathIn(dir, "r" + std::to_string(rank) + ".json");
      shardscope::test::generateKinetoTrace(path, o);
      files.push_back(path);
    }
    const RunId run = importKineto(store, files).runIds.at(0);
    const auto idx = TimelineIndex::build(store, run);
    for (int rank = 0; rank < 2; ++rank) {
      const RankInfo& rk = idx->ranks()[static_cast<std::size_t>(rank)];
      QVERIFY(rk.workCover.size() > 10);
      for (int width : {37, 400}) {
        const TimeNs t0 = rk.minStart, t1 = rk.maxEnd;
        const RankSummary s = buildRankSummary(*idx, rank, t0, t1, width);
        const double npp = static_cast<double>(t1 - t0) / width;
        for (int c = 0; c < width; ++c) {
          const TimeNs a = t0 + static_cast<TimeNs>(c * npp), b = c + 1 == width ? t1 : t0 + static_cast<TimeNs>((c + 1) * npp);
          const RangeStats r = rangeStatistics(*idx, rank, a, b);
          auto share = [&](TimeNs t) { return static_cast<double>(t) * 255.0 / static_cast<double>(b - a); };
          QVERIFY2(std::abs(s.columns[c].compute - share(r.computeNs)) <= 1.0, qPrintable(QString("col %1").arg(c)));
          QVERIFY2(std::abs(s.columns[c].exposed - share(r.exposedCommNs)) <= 1.0, qPrintable(QString("col %1").arg(c)));
          QVERIFY2(std::abs(s.columns[c].other - share(r.otherBusyNs)) <= 2.0, qPrintable(QString("col %1").arg(c)));
        }
      }
    }
  }

  void laneOrderIsTheSameOnEveryRankAndNoDuplicatedCommLane() {
    // Streams first seen in a different order on each rank (what a file's event order gives);
    // collectives without a process group alone on stream 84 on ranks 0 and 1, mixed with compute
    // on rank 2's stream 84.
    Fixture f;
    const std::vector<std::vector<int>> seen{{22, 7, 84, 24}, {7, 22, 24, 84}, {84, 24, 22, 7}};
    for (int rank = 0; rank < 3; ++rank) {
      const RankId r = f.rank(rank);
      std::map<int, TrackId> stream;
      const TrackId cpu = f.track(r, TrackKind::CpuThread, "thread 1");
      for (int s : seen[static_cast<std::size_t>(rank)]) {
        Track t;
        t.rankId = RankId{r};
        t.kind = TrackKind::GpuStream;
        t.name = "stream " + std::to_string(s);
        t.device = 0;
        t.stream = s;
        stream[s] = f.store->addTrack(t);
      }
      f.ev(cpu, 0, 1000, "ProfilerStep#1", Category::Other, "user_annotation");
      f.ev(stream[7], 0, 100, "gemm");
      f.ev(stream[22], 10, 20, "Memcpy", Category::Memory, "gpu_memcpy");
      f.ev(stream[24], 30, 40, "gemm");
      f.coll(stream[84], 50, 150, CollectiveOp::AllReduce, 64);
      f.coll(stream[84], 200, 250, CollectiveOp::AllGather, 64);
      if (rank == 2) f.ev(stream[84], 300, 310, "gemm");
    }
    const auto idx = f.index();
    std::vector<std::vector<std::string>> names;
    for (const RankInfo& rk : idx->ranks()) {
      names.emplace_back();
      for (std::uint32_t li : rk.lanes) names.back().push_back(idx->lane(li).name);
    }
    const std::vector<std::string> plain{"thread 1", "stream 7", "stream 22", "stream 24", "stream 84"};
    QCOMPARE(names[0], plain);
    QCOMPARE(names[1], plain);
    // Rank 2's stream 84 is not only its collectives: the derived lane shows something of its own.
    std::vector<std::string> withComm = plain;
    withComm.push_back("comm (no process group)");
    QCOMPARE(names[2], withComm);
    const Lane& derived = idx->lane(idx->ranks()[2].lanes.back());
    QCOMPARE(int(derived.kind), int(LaneKind::CommGroup));
    QCOMPARE(derived.eventCount(), 2u);
    // The lane totals the compact layout picks its lanes by.
    const Lane& s7 = idx->lane(idx->ranks()[0].lanes[1]);
    const Lane& s84 = idx->lane(idx->ranks()[0].lanes[4]);
    QCOMPARE(s7.computeNs, TimeNs(100));
    QCOMPARE(s84.commNs, TimeNs(150));
    QCOMPARE(s84.computeNs, TimeNs(0));
    QVERIFY(s84.keyMask & (std::uint64_t{1} << makeKey(Category::Communication, CollectiveOp::AllGather)));
    QVERIFY(!(s84.keyMask & (std::uint64_t{1} << makeKey(Category::Communication, CollectiveOp::Broadcast))));
  }

  void hitTesting() {
    Fixture f;
    const RankId r = f.rank(0);
    const TrackId a = f.track(r, TrackKind::CpuThread, "main", 0);
    const TrackId b = f.track(r, TrackKind::GpuStream, "stream 7", 1);
    f.ev(a, 0, 5000, "outer");
    f.ev(a, 1000, 2000, "inner");
    for (int i = 0; i < 20; ++i) f.ev(b, 6000 + i * 10, 6000 + i * 10 + 2, "tiny");
    f.ev(b, 9000, 9000, "zero");
    const auto idx = f.index();
    // Lane a at y 0..20 (two rows of 10 px), lane b at y 20..30; 10 ns a pixel.
    const Viewport v = viewOf(*idx, 0, 10'000, 1000);
    QCOMPARE(v.lanes[1].y, 20.0f);
    const DrawList dl = buildDrawList(*idx, v);
    const Lane& la = idx->lane(0);
    Hit h = hitTest(dl, v, 150, 15);  // row 1 of lane a at 1500 ns
    QCOMPARE(int(h.kind), int(Hit::Kind::Event));
    QCOMPARE(std::string(idx->name(la.nameIdx[h.index])), std::string("inner"));
    h = hitTest(dl, v, 150, 5);  // row 0 at the same x
    QCOMPARE(std::string(idx->name(la.nameIdx[h.index])), std::string("outer"));
    h = hitTest(dl, v, 300, 15);  // row 1, no inner event there
    QCOMPARE(int(h.kind), int(Hit::Kind::None));
    h = hitTest(dl, v, 610, 25);  // the folded block of lane b
    QCOMPARE(int(h.kind), int(Hit::Kind::Folded));
    QCOMPARE(h.count, 20u);
    QCOMPARE(h.lane, 1u);
    h = hitTest(dl, v, 900.5f, 25);  // the zero-length event, widened to a pixel
    QCOMPARE(int(h.kind), int(Hit::Kind::Event));
    QCOMPARE(std::string(idx->name(idx->lane(1).nameIdx[h.index])), std::string("zero"));
    h = hitTest(dl, v, 901.6f, 25);  // within the 1 px slack
    QCOMPARE(int(h.kind), int(Hit::Kind::Event));
    h = hitTest(dl, v, 904, 25);
    QCOMPARE(int(h.kind), int(Hit::Kind::None));
    h = hitTest(dl, v, 500, 45);  // below every lane
    QCOMPARE(int(h.kind), int(Hit::Kind::None));
  }

  void counterCurveKeepsPeaks() {
    Fixture f;
    const RankId r = f.rank(0);
    const TrackId c = f.track(r, TrackKind::Counter, "memory allocated (device 0)");
    for (int i = 0; i < 10'000; ++i) f.sample(c, i * 100, i == 4321 ? 1e9 : 1000.0 + (i % 7));
    const auto idx = f.index();
    const std::uint32_t L = laneOf(*idx, c);
    QVERIFY(idx->lane(L).isCounter());
    QCOMPARE(idx->sampleCount(), std::uint64_t(10'000));
    // 1,000,000 ns at 100 px: 100 samples a column; the spike is in column 43.
    const Viewport v = viewOf(*idx, 0, 1'000'000, 100);
    const DrawList dl = buildDrawList(*idx, v);
    QCOMPARE(dl.counters.size(), std::size_t(1));
    const CounterLine& line = dl.counters[0];
    QCOMPARE(line.windowMax, 1e9);
    QCOMPARE(line.xEnd, 100.0f);
    std::map<int, double> col;
    for (std::size_t i = 0; i < line.points.size(); ++i) {
      const int to = i + 1 < line.points.size() ? static_cast<int>(line.points[i + 1].x) : static_cast<int>(line.xEnd);
      for (int x = static_cast<int>(line.points[i].x); x < to; ++x) col[x] = line.points[i].value;
    }
    QCOMPARE(col.size(), std::size_t(100));
    QCOMPARE(col[43], 1e9);
    QCOMPARE(col[42], 1006.0);
    QCOMPARE(col[44], 1006.0);
    // Zoomed between two samples: the earlier value holds across the window.
    const DrawList between = buildDrawList(*idx, viewOf(*idx, 432'110, 432'150, 40));
    QCOMPARE(between.counters[0].points.size(), std::size_t(1));
    QCOMPARE(between.counters[0].points[0].value, 1e9);
    QCOMPARE(between.counters[0].xEnd, 40.0f);
    // Hit test on the curve.
    const Hit h = hitTest(dl, v, 43.5f, 5);
    QCOMPARE(int(h.kind), int(Hit::Kind::Counter));
    QCOMPARE(h.value, 1e9);
    // After the data: nothing.
    QVERIFY(buildDrawList(*idx, viewOf(*idx, 2'000'000, 3'000'000, 100)).counters[0].points.empty());
  }

  void lanesRanksAndCommGroups() {
    Fixture f;
    const Id pg0 = f.group("0", 2), pg1 = f.group("1", 2);
    for (int rank = 0; rank < 2; ++rank) {
      const RankId r = f.rank(rank);
      const TrackId cpu = f.track(r, TrackKind::CpuThread, "main", 0);
      const TrackId gpu = f.track(r, TrackKind::GpuStream, "stream 7", 1);
      const TrackId nccl = f.track(r, TrackKind::GpuStream, "stream 21", 2);
      f.track(r, TrackKind::Python, "python 1", 3);
      f.ev(cpu, 0, 1000, "ProfilerStep#1", Category::Other, "user_annotation");
      f.ev(gpu, 100, 200, "gemm");
      f.coll(nccl, 150, 250, CollectiveOp::AllGather, 64, pg0);
      f.coll(nccl, 300, 350, CollectiveOp::AllReduce, 32, pg1);
      f.coll(nccl, 400, 450, CollectiveOp::AllGather, 64, pg0);
      f.store->addStep(Step{r, 1, 0, 1000});
    }
    const auto idx = f.index();
    QCOMPARE(idx->ranks().size(), std::size_t(2));
    for (const RankInfo& rk : idx->ranks()) {
      QCOMPARE(rk.steps.size(), std::size_t(1));
      std::vector<std::string> names;
      for (std::uint32_t li : rk.lanes) names.push_back(idx->lane(li).name);
      const std::vector<std::string> expected{"main", "stream 7", "stream 21", "comm pg 0", "comm pg 1", "python 1"};
      QCOMPARE(names, expected);
      const Lane& g0 = idx->lane(rk.lanes[3]);
      QCOMPARE(int(g0.kind), int(LaneKind::CommGroup));
      QVERIFY(!g0.deviceLane);
      QCOMPARE(g0.eventCount(), 2u);
      QVERIFY(!idx->lane(rk.lanes[5]).loaded);
      QVERIFY(idx->lane(rk.lanes[1]).deviceLane);
      QVERIFY(!idx->lane(rk.lanes[0]).deviceLane);
    }
    QCOMPARE(idx->eventCount(), std::uint64_t(10));  // copies not counted
    // The copies do not count twice in the range statistics.
    const RangeStats s = rangeStatistics(*idx, 0, 0, 1000);
    QCOMPARE(s.collectives, std::int64_t(3));
    QCOMPARE(s.bytes, std::int64_t(160));
    QCOMPARE(s.commNs, TimeNs(100 + 50 + 50));
    QCOMPARE(s.overlappedCommNs, TimeNs(50));
    QCOMPARE(s.exposedCommNs, TimeNs(150));
    QCOMPARE(s.byOp.size(), std::size_t(2));
    compareRange(*idx, *f.store, 0, 0, 1000);
    // Steps in the draw list, per rank with a visible lane.
    const DrawList dl = buildDrawList(*idx, viewOf(*idx, 500, 1500, 100));
    QCOMPARE(dl.steps.size(), std::size_t(2));
    QVERIFY(dl.steps[0].clippedLeft);
    QCOMPARE(dl.steps[0].x1, 50.0f);
  }

  void rangeStatisticsCpuRun() {
    // A CPU run of our runtime: the device lanes are the CPU threads and the comm lanes.
    Fixture f;
    const Id pg = f.group("0", 2);
    const RankId r = f.rank(0);
    const TrackId main = f.track(r, TrackKind::CpuThread, "main", 0);
    const TrackId comm = f.track(r, TrackKind::Comm, "comm 0 (gloo)", 10);
    std::mt19937_64 rng(3);
    TimeNs now = 0;
    for (int i = 0; i < 400; ++i) {
      const TimeNs d = 100 + static_cast<TimeNs>(rng() % 900);
      f.ev(main, now, now + d, "forward", i % 5 == 0 ? Category::Other : Category::Computation, "cpu_op");
      if (i % 3 == 0) f.ev(main, now + 10, now + d / 2, "aten::mm", Category::Computation, "cpu_op");
      if (i % 4 == 0) f.ev(main, now + 5, now + 5, "mark", Category::Other, "instant");
      if (i % 6 == 0) f.ev(main, now, now + d + 40, "annotation", Category::Other, "user_annotation");  // not work
      if (i % 2 == 0) {
        EventRecord& c =
            f.ev(comm, now + d / 3, now + d + static_cast<TimeNs>(rng() % 700), "all_reduce", Category::Communication, "");
        c.collOp = CollectiveOp::AllReduce;
        c.processGroupId = pg;
        if (i % 8) c.bytes = 4096 * (i + 1);
      }
      now += d + static_cast<TimeNs>(rng() % 200);
    }
    const auto idx = f.index();
    QVERIFY(!idx->ranks()[0].hasGpu);
    QVERIFY(idx->lane(laneOf(*idx, main)).deviceLane);
    QVERIFY(idx->lane(laneOf(*idx, comm)).deviceLane);
    compareRange(*idx, *f.store, 0, idx->minStart(), idx->maxEnd());
    compareRange(*idx, *f.store, 0, idx->minStart() - 1000, idx->maxEnd() + 1000);
    for (int k = 0; k < 100; ++k) {
      const TimeNs t0 = static_cast<TimeNs>(rng() % static_cast<std::uint64_t>(now));
      compareRange(*idx, *f.store, 0, t0, t0 + static_cast<TimeNs>(rng() % 20000));
    }
    // The whole trace equals the step breakdown of a trace without steps (one step -1).
    const auto whole = rangeStatistics(*idx, 0, idx->minStart(), idx->maxEnd());
    const auto steps = computeStepBreakdown(*f.store, f.run);
    QCOMPARE(steps.size(), std::size_t(1));
    QCOMPARE(whole.computeNs, steps[0].computeNs);
    QCOMPARE(whole.commNs, steps[0].commNs);
    QCOMPARE(whole.exposedCommNs, steps[0].exposedCommNs);
    QCOMPARE(whole.idleNs, steps[0].idleNs);
    std::int64_t count = 0, bytes = 0;
    for (const auto& c : computeCollectives(*f.store, f.run)) {
      count += c.count;
      bytes += c.bytes;
    }
    QCOMPARE(whole.collectives, count);
    QCOMPARE(whole.bytes, bytes);
  }

  void rangeStatisticsImportedTrace() {
    // A generated two-rank FSDP-style trace, imported: random ranges equal core's analyses.
    QTemporaryDir dir;
    std::vector<std::string> files;
    for (int rank = 0; rank < 2; ++rank) {
      shardscope::test::KinetoGenOptions g;
      g.events = 6000;
      g.rank = rank;
      g.worldSize = 2;
      g.steps = 3;
      g.seed = 11;
      files.push_back(pathIn(dir, "rank" + std::to_string(rank) + ".json"));
      shardscope::test::generateKinetoTrace(files.back(), g);
    }
    TraceStore store(pathIn(dir, "t.db"));
    const auto res = importKineto(store, files);
    const RunId run = res.runIds.at(0);
    std::uint64_t progressDone = 0, progressTotal = 0;
    const auto idx = TimelineIndex::build(store, run, {}, nullptr, [&](const Progress& p) {
      progressDone = p.done;
      progressTotal = p.total;
    });
    QVERIFY(progressTotal > 0);
    QCOMPARE(progressDone, progressTotal);
    QCOMPARE(idx->ranks().size(), std::size_t(2));
    QVERIFY(idx->ranks()[0].hasGpu);
    QVERIFY(!idx->ranks()[0].exposed.empty());
    QVERIFY(!idx->ranks()[0].steps.empty());
    std::mt19937_64 rng(5);
    for (int rank = 0; rank < 2; ++rank) {
      compareRange(*idx, store, rank, idx->minStart(), idx->maxEnd());
      const TimeNs span = idx->maxEnd() - idx->minStart();
      for (int k = 0; k < 25; ++k) {
        const TimeNs t0 = idx->minStart() + static_cast<TimeNs>(rng() % static_cast<std::uint64_t>(span));
        compareRange(*idx, store, rank, t0, t0 + static_cast<TimeNs>(rng() % static_cast<std::uint64_t>(span / 4)));
      }
      for (const Step& s : idx->ranks()[static_cast<std::size_t>(rank)].steps)
        compareRange(*idx, store, rank, s.startNs, s.endNs);
    }
    // Comm-group lanes were derived from the NCCL kernels; the whole index stays compact.
    bool commGroup = false;
    for (const auto& l : idx->lanes()) commGroup = commGroup || l.kind == LaneKind::CommGroup;
    QVERIFY(commGroup);
    QVERIFY(idx->eventCount() > 5000);
    QVERIFY2(idx->memoryBytes() < 64 * idx->eventCount() + 64 * 1024,
             QByteArray::number(qulonglong(idx->memoryBytes())) + " bytes for " +
                 QByteArray::number(qulonglong(idx->eventCount())) + " events");
    // The full zoom-out draws every event once: the rectangles' counts add up to the events in view.
    const Viewport v = viewOf(*idx, idx->minStart(), idx->maxEnd(), 1920);
    const DrawList dl = buildDrawList(*idx, v);
    std::uint64_t drawn = 0;
    for (const auto& rc : dl.rects) drawn += rc.count;
    QCOMPARE(drawn, dl.eventsInView);
    // The same list from four threads.
    Viewport v4 = v;
    v4.threads = 4;
    const DrawList dl4 = buildDrawList(*idx, v4);
    QCOMPARE(dl4.rects.size(), dl.rects.size());
    QCOMPARE(dl4.rowBegin, dl.rowBegin);
    for (std::size_t i = 0; i < dl.rects.size(); ++i) {
      QCOMPARE(dl4.rects[i].first, dl.rects[i].first);
      QCOMPARE(dl4.rects[i].count, dl.rects[i].count);
      QCOMPARE(dl4.rects[i].viewLane, dl.rects[i].viewLane);
    }
  }

  void cancelAndEmptyRun() {
    Fixture f;
    const RankId r = f.rank(0);
    const TrackId t = f.track(r, TrackKind::CpuThread, "main");
    for (int i = 0; i < 100; ++i) f.ev(t, i * 10, i * 10 + 5);
    f.write();
    CancelToken cancel;
    cancel.cancel();
    QVERIFY_THROWS_EXCEPTION(Cancelled, TimelineIndex::build(*f.store, f.run, {}, &cancel));
    // A run without events: an empty, valid index and draw list.
    Run empty;
    empty.name = "empty";
    const RunId e = f.store->createRun(empty);
    const auto idx = TimelineIndex::build(*f.store, e);
    QCOMPARE(idx->lanes().size(), std::size_t(0));
    const DrawList dl = buildDrawList(*idx, Viewport{});
    QVERIFY(dl.rects.empty());
    QCOMPARE(int(hitTest(dl, Viewport{}, 0, 0).kind), int(Hit::Kind::None));
  }
};

QTEST_GUILESS_MAIN(TestTimeline)
#include "tst_timeline.moc"
