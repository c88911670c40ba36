// The stacked-allocation layout of memory snapshots (core/analysis/snapshot_bands.h): bands in order
// of allocation that slide down when one below is freed, whose top is the active curve at every point;
// the level of detail whose drawn top is the curve's maximum per bucket at every zoom; the hit test;
// the categories; and compareSnapshots on generated snapshots with known answers.
#include <QElapsedTimer>
#include <QtTest>

#include <filesystem>
#include <map>
#include <set>

#include "core/analysis/memory_snapshot_analysis.h"
#include "core/analysis/snapshot_bands.h"
#include "core/import/memsnap_reader.h"
#include "core/util/input_source.h"
#include "tests/common/snapshot_oracle.h"
#include "tests/common/test_support.h"
#include "tests/tools/snapshot_generator.h"

using namespace shardscope::core;

namespace {

MemTraceEvent ev(std::int64_t seq, MemAction a, std::uint64_t addr, std::int64_t size, StackId stack = -1) {
  return {0, seq, 1000 + seq * 10, a, addr, size, 0, stack};
}

// Prior P (64, alive throughout); then A 100, B 200, C 50; free A (B, C slide down by 100); D 10;
// free C (D slides down by 50); free B.
MemorySnapshot tiny() {
  MemorySnapshot s;
  s.prior = {{0, 0x1, 64, -1, false}};
  s.events = {ev(0, MemAction::Alloc, 0xA, 100),         ev(1, MemAction::Alloc, 0xB, 200),
              ev(2, MemAction::Alloc, 0xC, 50),          ev(3, MemAction::FreeRequested, 0xA, 100),
              ev(4, MemAction::FreeCompleted, 0xA, 100), ev(5, MemAction::Alloc, 0xD, 10),
              ev(6, MemAction::FreeCompleted, 0xC, 50),  ev(7, MemAction::FreeCompleted, 0xB, 200)};
  return s;
}

std::optional<MemorySnapshot> fixture() {
  const auto dir = shardscope::test::sharedTracesDir();
  if (!dir) return std::nullopt;
  const std::string path = *dir + "/gpu/torch211_fsdp2_bf16_h100.memsnap.pickle.gz";
  if (!std::filesystem::exists(path)) return std::nullopt;
  auto in = openInput(path);
  return parseMemorySnapshot(readAll(*in, 64u << 20), path);
}

// At every point: the live bands tile [0, level) in stack order (checked fully at every `fullEvery`-th
// point, else the top band only), and their top is the active curve.
void checkLayout(const SnapshotTimeline& t, const SnapshotBandLayout& l, int fullEvery) {
  QCOMPARE(l.points(), static_cast<std::int32_t>(t.active.size()));
  QCOMPARE(l.stepBegin.size(), t.allocations.size() + 1);
  std::set<std::int32_t> alive;
  for (std::size_t a = 0; a < t.allocations.size(); ++a)
    if (l.allocPoint[a] == 0) alive.insert(static_cast<std::int32_t>(a));
  for (std::int32_t p = 0; p < l.points(); ++p) {
    if (p > 0) {
      const std::int32_t a = l.pointAllocation[static_cast<std::size_t>(p)];
      QVERIFY(a >= 0);
      if (l.allocPoint[static_cast<std::size_t>(a)] == p)
        alive.insert(a);
      else
        QCOMPARE(alive.erase(a), std::size_t(1));
    }
    const std::int64_t level = t.active[static_cast<std::size_t>(p)].bytes;
    if (alive.empty()) {
      QCOMPARE(level, std::int64_t(0));
      continue;
    }
    const auto topBand = static_cast<std::size_t>(*alive.rbegin());
    if (l.offsetAt(topBand, p) + t.allocations[topBand].size != level)
      QFAIL(qPrintable(
          QString("point %1: top %2, active %3").arg(p).arg(l.offsetAt(topBand, p) + t.allocations[topBand].size).arg(level)));
    if (p % fullEvery != 0 && p + 1 != l.points()) continue;
    std::int64_t sum = 0;
    for (const std::int32_t a : alive) {
      if (l.offsetAt(static_cast<std::size_t>(a), p) != sum)
        QFAIL(qPrintable(QString("point %1: band %2 not on the one below").arg(p).arg(a)));
      sum += t.allocations[static_cast<std::size_t>(a)].size;
    }
    QCOMPARE(sum, level);
  }
}

// The pieces of each bucket tile [0, the curve's maximum there); a piece of its own is an allocation
// of at least minBytes at its place in the layout.
void checkDetail(const SnapshotTimeline& t, const SnapshotBandLayout& l, TimeNs t0, TimeNs t1, int buckets,
                 std::int64_t minBytes) {
  const SnapshotBandDetail d = snapshotBandDetail(t, l, t0, t1, buckets, minBytes);
  QCOMPARE(d.buckets, buckets);
  std::vector<std::vector<const SnapshotBandPiece*>> by(static_cast<std::size_t>(buckets));
  for (const auto& p : d.pieces) {
    QVERIFY(p.bucket0 >= 0 && p.bucket0 < p.bucket1 && p.bucket1 <= buckets);
    QVERIFY(p.top > p.bottom);
    if (p.allocation >= 0) {
      const auto a = static_cast<std::size_t>(p.allocation);
      QVERIFY(t.allocations[a].size >= minBytes);
      QCOMPARE(p.top - p.bottom, t.allocations[a].size);
    }
    for (int b = p.bucket0; b < p.bucket1; ++b) by[static_cast<std::size_t>(b)].push_back(&p);
  }
  int drawn = 0;
  int mergedChecked = 0;  // the hit test scans every allocation: a sample of the merged pieces
  for (int b = 0; b < buckets; ++b) {
    const std::int64_t want = shardscope::test::activeMaxByDefinition(t, d.bucketStart(b), d.bucketStart(b + 1));
    auto& ps = by[static_cast<std::size_t>(b)];
    std::sort(ps.begin(), ps.end(), [](const auto* x, const auto* y) { return x->bottom < y->bottom; });
    const std::int32_t point = d.bucketPoint[static_cast<std::size_t>(b)];
    if (want < 0) {
      QCOMPARE(point, -1);
      QVERIFY(ps.empty());
      continue;
    }
    QCOMPARE(d.bucketTop[static_cast<std::size_t>(b)], want);
    QCOMPARE(t.active[static_cast<std::size_t>(point)].bytes, want);
    std::int64_t below = 0;
    for (const auto* p : ps) {
      QCOMPARE(p->bottom, below);
      if (p->allocation >= 0) {
        QVERIFY(l.aliveAt(static_cast<std::size_t>(p->allocation), point));
        QCOMPARE(p->bottom, l.offsetAt(static_cast<std::size_t>(p->allocation), point));
      } else if (++mergedChecked <= 300) {
        // A merged piece holds only allocations under minBytes.
        const std::int64_t mid = p->bottom + (p->top - p->bottom) / 2;
        const std::int64_t a = snapshotAllocationAt(t, l, point, mid);
        QVERIFY(a >= 0);
        QVERIFY(t.allocations[static_cast<std::size_t>(a)].size < minBytes);
      }
      below = p->top;
    }
    QCOMPARE(below, want);  // the drawn top is the curve's maximum in the bucket
    ++drawn;
    // At most one piece per minBytes of height plus the gaps between them.
    QVERIFY(static_cast<std::int64_t>(ps.size()) <= 2 * (want / minBytes) + 1);
  }
  QVERIFY(drawn > 0);
}

SnapshotFigures figuresOf(const MemorySnapshot& s) { return snapshotFigures(s, buildSnapshotTimeline(s, 0)); }

// One snapshot for compareSnapshots: `prior` bytes alive before recording (no stack), then per owner
// stack an allocation of the given size, all alive at the peak; segments of `reserved` bytes at the dump.
MemorySnapshot compared(std::int64_t prior, const std::vector<std::int64_t>& sizes, std::int64_t reserved) {
  MemorySnapshot s;
  s.frames = {{"forward", "/home/me/model.py", 10},
              {"forward", "/home/me/model.py", 20},
              {"forward", "/home/me/model.py", 30},
              {"step", "/home/me/train.py", 40},
              {"malloc", "CUDACachingAllocator.cpp", 0}};
  s.stacks = {{4, 0}, {4, 1}, {4, 2}, {4, 3}};
  s.prior = {{0, 0x10, prior, -1, false}};
  std::int64_t seq = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i)
    if (sizes[i] > 0) s.events.push_back(ev(seq++, MemAction::Alloc, 0x1000 * (i + 1), sizes[i], static_cast<StackId>(i)));
  s.segments = {{0, 0x7f00, reserved, 0, 0, 0, 0, "large", false, -1}};
  return s;
}

}  // namespace

class TestSnapshotBands : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void tinyLayoutByHand() {
    const MemorySnapshot s = tiny();
    const SnapshotTimeline t = buildSnapshotTimeline(s, 0);
    // allocations: P (prior), A, B, C, D; points: 0 prior, 1 +A, 2 +B, 3 +C, 4 -A, 5 +D, 6 -C, 7 -B.
    QCOMPARE(t.allocations.size(), std::size_t(5));
    const SnapshotBandLayout l = layoutSnapshotBands(t);
    QCOMPARE(l.points(), 8);
    QCOMPARE(l.allocPoint, (std::vector<std::int32_t>{0, 1, 2, 3, 5}));
    QCOMPARE(l.freePoint, (std::vector<std::int32_t>{8, 4, 7, 6, 8}));
    QCOMPARE(l.pointAllocation, (std::vector<std::int32_t>{-1, 1, 2, 3, 1, 4, 3, 2}));
    const auto steps = [&](std::size_t a) {
      std::vector<std::pair<std::int32_t, std::int64_t>> out;
      for (auto i = l.stepBegin[a]; i < l.stepBegin[a + 1]; ++i)
        out.emplace_back(l.steps[static_cast<std::size_t>(i)].point, l.steps[static_cast<std::size_t>(i)].offset);
      return out;
    };
    using S = std::vector<std::pair<std::int32_t, std::int64_t>>;
    QCOMPARE(steps(0), (S{{0, 0}}));
    QCOMPARE(steps(1), (S{{1, 64}}));
    QCOMPARE(steps(2), (S{{2, 164}, {4, 64}}));            // A freed below it
    QCOMPARE(steps(3), (S{{3, 364}, {4, 264}}));           // A freed below it
    QCOMPARE(steps(4), (S{{5, 314}, {6, 264}, {7, 64}}));  // D on top of C; C, then B freed below it
    QCOMPARE(l.offsetAt(3, 5), std::int64_t(264));
    checkLayout(t, l, 1);

    // The hit test: bytes [64, 264) at point 5 are B's, [264, 314) C's, [314, 324) D's, above: none.
    QCOMPARE(snapshotAllocationAt(t, l, 5, 0), std::int64_t(0));
    QCOMPARE(snapshotAllocationAt(t, l, 5, 64), std::int64_t(2));
    QCOMPARE(snapshotAllocationAt(t, l, 5, 263), std::int64_t(2));
    QCOMPARE(snapshotAllocationAt(t, l, 5, 264), std::int64_t(3));
    QCOMPARE(snapshotAllocationAt(t, l, 5, 323), std::int64_t(4));
    QCOMPARE(snapshotAllocationAt(t, l, 5, 324), std::int64_t(-1));
    QCOMPARE(snapshotAllocationAt(t, l, 5, -1), std::int64_t(-1));
    QCOMPARE(snapshotAllocationAt(t, l, 8, 0), std::int64_t(-1));
    QCOMPARE(snapshotPointAt(t, 999), -1);
    QCOMPARE(snapshotPointAt(t, 1050), 5);  // D's alloc (event 5, at 1050) made point 5
    QCOMPARE(snapshotPointAt(t, 1055), 5);

    // Details: minBytes 60 draws P, A, B (100, 200, 64) as bands; C and D are under it.
    const SnapshotBandDetail d = snapshotBandDetail(t, l, 1000, 1080, 8, 60);
    // Bucket 0 holds points 0 and 1; bucket 3 none: the level in force (point 3) is its maximum.
    QCOMPARE(d.bucketPoint, (std::vector<std::int32_t>{1, 2, 3, 3, 4, 5, 6, 7}));
    QCOMPARE(d.bucketTop, (std::vector<std::int64_t>{164, 364, 414, 414, 314, 324, 274, 74}));
    checkDetail(t, l, 1000, 1080, 8, 60);
    checkDetail(t, l, 990, 1100, 3, 1);
    checkDetail(t, l, 1000, 1080, 8, 1000);  // everything merged
  }

  void generatedLayoutIsTheActiveCurve() {
    const MemorySnapshot s = shardscope::test::generatedMemorySnapshot(30000);
    const SnapshotTimeline t = buildSnapshotTimeline(s, 0);
    QVERIFY(t.allocations.size() > 5000);
    const SnapshotBandLayout l = layoutSnapshotBands(t);
    QVERIFY(l.steps.size() > t.allocations.size());  // bands slide
    checkLayout(t, l, 1);
    const TimeNs t0 = t.active.front().tsNs, t1 = t.active.back().tsNs + 1;
    const std::int64_t peak = figuresOf(s).peakActiveBytes;
    for (const auto& [frac, buckets] : std::vector<std::pair<double, int>>{{1.0, 800}, {0.25, 600}, {0.01, 400}, {0.0005, 300}}) {
      const TimeNs mid = t0 + (t1 - t0) / 3;
      const auto half = static_cast<TimeNs>(static_cast<double>(t1 - t0) * frac / 2) + 1;
      checkDetail(t, l, mid - half, mid + half, buckets, peak / 400);
    }
    checkDetail(t, l, t0 - 1000, t1 + 1000, 100, peak / 50);

    // Over the step budget the steps are not kept: the same offsets (summed) and the same pieces.
    const SnapshotBandLayout lean = layoutSnapshotBands(t, l.stepCount - 1);
    QVERIFY(!lean.hasSteps() && lean.steps.empty());
    QCOMPARE(lean.stepCount, static_cast<std::int64_t>(l.steps.size()));
    QVERIFY(lean.memoryBytes() < l.memoryBytes() / 4);
    for (std::int32_t p = 0; p < l.points(); p += 499)
      for (std::size_t a = 0; a < t.allocations.size(); a += 7)
        if (l.aliveAt(a, p)) QCOMPARE(lean.offsetAt(a, p), l.offsetAt(a, p));
    const auto same = [](const SnapshotBandDetail& x, const SnapshotBandDetail& y) {
      if (x.pieces.size() != y.pieces.size() || x.bucketTop != y.bucketTop) return false;
      for (std::size_t i = 0; i < x.pieces.size(); ++i) {
        const auto &p = x.pieces[i], &q = y.pieces[i];
        if (p.allocation != q.allocation || p.bucket0 != q.bucket0 || p.bucket1 != q.bucket1 || p.bottom != q.bottom ||
            p.top != q.top)
          return false;
      }
      return true;
    };
    QVERIFY(same(snapshotBandDetail(t, l, t0, t1, 700, peak / 300), snapshotBandDetail(t, lean, t0, t1, 700, peak / 300)));
    QVERIFY(same(snapshotBandDetail(t, l, t0 + (t1 - t0) / 2, t1, 500, peak / 900),
                 snapshotBandDetail(t, lean, t0 + (t1 - t0) / 2, t1, 500, peak / 900)));
  }

  void fixtureLayoutIsTheActiveCurve() {
    const auto s = fixture();
    if (!s) QSKIP("the H100 memory snapshot is not there");
    const SnapshotTimeline t = buildSnapshotTimeline(*s, 0);
    QElapsedTimer timer;
    timer.start();
    const SnapshotBandLayout l = layoutSnapshotBands(t);
    qInfo("fixture: %zu events, %zu allocations, %zu band steps, layout %lld ms, %.1f MiB", s->events.size(),
          t.allocations.size(), l.steps.size(), static_cast<long long>(timer.elapsed()),
          static_cast<double>(l.memoryBytes()) / (1 << 20));
    checkLayout(t, l, 101);
    const SnapshotFigures f = snapshotFigures(*s, t);
    const TimeNs t0 = t.active.front().tsNs, t1 = t.active.back().tsNs + 1;
    checkDetail(t, l, t0, t1, 1200, f.peakActiveBytes / 500);
    checkDetail(t, l, f.peakActiveNs - (t1 - t0) / 40, f.peakActiveNs + (t1 - t0) / 40, 900, f.peakActiveBytes / 500);
    checkDetail(t, l, f.peakActiveNs - 20'000, f.peakActiveNs + 20'000, 500, f.peakActiveBytes / 300);
    // The band on top at the peak ends at the peak.
    const SnapshotBandDetail d = snapshotBandDetail(t, l, t0, t1, 1200, f.peakActiveBytes / 500);
    QCOMPARE(*std::max_element(d.bucketTop.begin(), d.bucketTop.end()), f.peakActiveBytes);
  }

  // A deep stack freed oldest first: every free slides every band above it. Over the budget the
  // layout keeps no steps (and does not walk them), and the level of detail is still exact.
  void deepStackFreedOldestFirst() {
    constexpr int kDepth = 3000;
    MemorySnapshot s;
    std::int64_t seq = 0;
    for (int i = 0; i < kDepth; ++i)
      s.events.push_back(ev(seq++, MemAction::Alloc, 0x1000u + static_cast<std::uint64_t>(i), 1000 + i));
    for (int i = 0; i < kDepth; ++i)
      s.events.push_back(ev(seq++, MemAction::FreeCompleted, 0x1000u + static_cast<std::uint64_t>(i), 1000 + i));
    const SnapshotTimeline t = buildSnapshotTimeline(s, 0);
    const std::int64_t want = kDepth + std::int64_t(kDepth) * (kDepth - 1) / 2;  // one each + the bands above each free
    const SnapshotBandLayout lean = layoutSnapshotBands(t, 1'000'000);
    QCOMPARE(lean.stepCount, want);
    QVERIFY(!lean.hasSteps());
    const SnapshotBandLayout full = layoutSnapshotBands(t);
    QCOMPARE(static_cast<std::int64_t>(full.steps.size()), want);
    checkLayout(t, full, 50);
    const TimeNs t0 = t.active.front().tsNs, t1 = t.active.back().tsNs + 1;
    checkDetail(t, lean, t0, t1, 400, 2000);
    checkDetail(t, lean, t0 + (t1 - t0) / 2, t1, 300, 1);
    // The bottom band, freed first: every other slides down by its 1000 bytes there.
    QCOMPARE(lean.offsetAt(1, kDepth), std::int64_t(1000));
    QCOMPARE(lean.offsetAt(1, kDepth + 1), std::int64_t(0));
    QCOMPARE(full.offsetAt(1, kDepth + 1), std::int64_t(0));
  }

  void categoriesFollowTheStacks() {
    const MemorySnapshot s = shardscope::test::generatedMemorySnapshot(3000);
    const SnapshotTimeline t = buildSnapshotTimeline(s, 0);
    const auto cats = snapshotAllocationCategories(s, t);
    QCOMPARE(cats.size(), t.allocations.size());
    const auto& names = snapshotCategoryNames();
    std::map<StackId, std::string_view> seen;
    for (std::size_t i = 0; i < cats.size(); ++i) {
      const std::string_view c = names[cats[i]];
      QCOMPARE(c, std::string_view(snapshotCategory(s, t.allocations[i].stack, {})));  // no annotations here
      seen[t.allocations[i].stack] = c;
    }
    QCOMPARE(seen[0], std::string_view("activations"));
    QCOMPARE(seen[2], std::string_view("gradients"));
    QCOMPARE(seen[3], std::string_view("optimizer_state"));
    QCOMPARE(seen[4], std::string_view("parameters"));
    QCOMPARE(seen[-1], std::string_view("unknown"));
    // An annotation open at the alloc makes it optimizer state, as snapshotCategory says.
    MemorySnapshot a = tiny();
    a.annotations = {{0, 1015, true, "Optimizer.step#AdamW.step"}, {0, 1045, false, "Optimizer.step#AdamW.step"}};
    const SnapshotTimeline ta = buildSnapshotTimeline(a, 0);
    const auto ca = snapshotAllocationCategories(a, ta);
    QCOMPARE(names[ca[0]], std::string_view("unknown"));          // prior
    QCOMPARE(names[ca[1]], std::string_view("unknown"));          // A at 1000
    QCOMPARE(names[ca[2]], std::string_view("unknown"));          // B at 1010
    QCOMPARE(names[ca[3]], std::string_view("optimizer_state"));  // C at 1020
    QCOMPARE(names[ca[4]], std::string_view("unknown"));          // D at 1050
  }

  // compareSnapshots on two generated snapshots with known answers.
  void compareKnownAnswers() {
    // a: prior 1000, owners 10/20/30 with 100/200/300, reserved 4096. Peak 1600, fragmentation 2496.
    // b: prior 1000, owners 10/20/30/train with 100/900/250/500, reserved 8192. Peak 2750, fragmentation 5442.
    const SnapshotFigures a = figuresOf(compared(1000, {100, 200, 300, 0}, 4096));
    const SnapshotFigures b = figuresOf(compared(1000, {100, 900, 250, 500}, 8192));
    QCOMPARE(a.peakActiveBytes, std::int64_t(1600));
    QCOMPARE(b.peakActiveBytes, std::int64_t(2750));
    QCOMPARE(a.fragmentationBytes, std::int64_t(4096 - 1600));
    QCOMPARE(b.fragmentationBytes, std::int64_t(8192 - 2750));
    const SnapshotComparison c = compareSnapshots(a, b);
    QCOMPARE(c.peakActiveDelta, std::int64_t(1150));
    QCOMPARE(c.peakReservedDelta, std::int64_t(4096));
    QCOMPARE(c.fragmentationDelta, std::int64_t((8192 - 2750) - (4096 - 1600)));
    // Grown, largest growth first: model.py:20 (+700), train.py:40 (+500, new in b); :30 shrank, :10 and the prior block did not
    // change.
    QCOMPARE(c.grew.size(), std::size_t(2));
    QCOMPARE(c.grew[0].owner, std::string("/home/me/model.py:20:forward"));
    QCOMPARE(c.grew[0].bytesA, std::int64_t(200));
    QCOMPARE(c.grew[0].bytesB, std::int64_t(900));
    QCOMPARE(c.grew[1].owner, std::string("/home/me/train.py:40:step"));
    QCOMPARE(c.grew[1].bytesA, std::int64_t(0));
    QCOMPARE(c.grew[1].bytesB, std::int64_t(500));
    QCOMPARE(c.grew[1].category, std::string("unknown"));
    // topN cuts the list; the reverse comparison: what grew from b to a.
    QCOMPARE(compareSnapshots(a, b, 1).grew.size(), std::size_t(1));
    const SnapshotComparison r = compareSnapshots(b, a);
    QCOMPARE(r.peakActiveDelta, std::int64_t(-1150));
    QCOMPARE(r.grew.size(), std::size_t(1));
    QCOMPARE(r.grew[0].owner, std::string("/home/me/model.py:30:forward"));
    QCOMPARE(r.grew[0].bytesB, std::int64_t(300));
    // The JSON carries the same numbers.
    const std::string json = c.toJson().dump();
    QVERIFY2(json.find("\"peak_active_delta\":1150") != std::string::npos, json.c_str());
  }
};

QTEST_MAIN(TestSnapshotBands)
#include "tst_snapshot_bands.moc"
