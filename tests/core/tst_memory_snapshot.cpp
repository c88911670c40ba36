// PyTorch memory snapshots: the reader, the import into the store (own run, --attach-to, all or
// nothing), and the figures by memory_viz's definition (peak active = blocks alive before recording
// + the running sum of alloc and free_completed), on generated snapshots and the real H100 fixture.
#include <QtTest>

#include <filesystem>
#include <unordered_map>

#include "core/analysis/memory_peaks.h"
#include "core/analysis/memory_snapshot_analysis.h"
#include "core/import/memsnap_reader.h"
#include "core/import/trace_reader.h"
#include "core/storage/memsnap_store.h"
#include "core/storage/schema.h"
#include "core/storage/store_access.h"
#include "core/util/error.h"
#include "core/util/input_source.h"
#include "tests/common/test_support.h"
#include "tests/tools/snapshot_pickle.h"

using namespace shardscope::core;
using shardscope::test::GenSnapshot;

namespace {

constexpr std::uint64_t kSeg = 0x7f0000000000;

// Prior blocks: A (100 requested, alive at the dump, never in the trace) and X (freed in the trace
// without its alloc, 50). Actions: free X -> 100, alloc B 200 -> 300, alloc C 300 -> 600, free B ->
// 400, alloc D 1000 -> 1400 (the peak), free D -> 400. Segments: 4096 at the dump; one of 2048
// allocated and freed in the trace.
GenSnapshot smallSnapshot() {
  GenSnapshot s;
  s.stacks = {
      {{"c10::cuda::CUDACachingAllocator::malloc", "CUDACachingAllocator.cpp", 0},
       {"forward", "/venv/lib/python3.12/site-packages/torch/nn/modules/linear.py", 134},
       {"forward", "/home/me/model.py", 42},
       {"<module>", "/home/me/train.py", 7}},
      {{"step", "/venv/lib/python3.12/site-packages/torch/optim/adamw.py", 200}, {"<module>", "/home/me/train.py", 9}},
  };
  s.segments = {
      {0, kSeg, 4096, {{512, 100, "active_allocated", -1}, {512, 300, "active_allocated", 0}, {3072, 3072, "inactive", -1}}}};
  s.traces = {{
      {"free_requested", 0x9000, 50, 1000, -1},
      {"free_completed", 0x9000, 50, 1001, -1},
      {"alloc", 0xA000, 200, 1002, 0},
      {"alloc", kSeg + 512, 300, 1003, 0},
      {"segment_alloc", 0xB0000, 2048, 1004, 1},
      {"free_requested", 0xA000, 200, 1005, 0},
      {"free_completed", 0xA000, 200, 1006, 0},
      {"alloc", 0xC000, 1000, 1007, 1},
      {"free_completed", 0xC000, 1000, 1008, 1},
      {"segment_free", 0xB0000, 2048, 1009, 1},
  }};
  s.annotations = {{"START Optimizer.step#AdamW.step", 1006}, {"END Optimizer.step#AdamW.step", 1008}};
  return s;
}

// The definition, written out independently of core: prior blocks (memory_viz's per-address rule)
// plus the running sum of alloc and free_completed; the maximum after each action.
std::int64_t peakByDefinition(const MemorySnapshot& s, int device) {
  std::unordered_map<std::uint64_t, std::int64_t> live;
  std::int64_t priorFreed = 0;
  std::vector<std::int64_t> deltas;
  for (const auto& e : s.events) {
    if (e.device != device) continue;
    if (e.action == MemAction::Alloc) {
      live[e.addr] = e.size;
      deltas.push_back(e.size);
    } else if (e.action == MemAction::FreeCompleted) {
      if (auto it = live.find(e.addr); it != live.end()) {
        deltas.push_back(-it->second);
        live.erase(it);
      } else {
        priorFreed += e.size;
        deltas.push_back(-e.size);
      }
    }
  }
  std::int64_t level = priorFreed;
  for (const auto& b : s.blocks)
    if (s.segments[static_cast<std::size_t>(b.segment)].device == device && b.state == "active_allocated" &&
        !live.contains(b.address))
      level += b.requestedSize;
  if (deltas.empty()) return level;
  std::int64_t peak = INT64_MIN;
  for (std::int64_t d : deltas) peak = std::max(peak, level += d);
  return peak;
}

}  // namespace

class TestMemorySnapshot : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void parsesAndReconstructs() {
    const MemorySnapshot s = parseMemorySnapshot(shardscope::test::snapshotPickle(smallSnapshot()), "small.pickle");
    QCOMPARE(s.events.size(), std::size_t(10));
    QCOMPARE(s.stacks.size(), std::size_t(2));  // interned once, however many events name them
    QCOMPARE(s.frames.size(), std::size_t(6));
    QCOMPARE(s.blocks.size(), std::size_t(3));
    QCOMPARE(s.blocks[1].address, kSeg + 512);
    QCOMPARE(s.events[1].tsNs, TimeNs(1001000));
    // Prior: X from its free, A from the dump (C was allocated in the trace, so it is not prior).
    QCOMPARE(s.prior.size(), std::size_t(2));
    QVERIFY(s.prior[0].fromFree && s.prior[0].size == 50);
    QVERIFY(!s.prior[1].fromFree && s.prior[1].size == 100 && s.prior[1].addr == kSeg);
  }

  void figuresFollowTheDefinition() {
    const MemorySnapshot s = parseMemorySnapshot(shardscope::test::snapshotPickle(smallSnapshot()), "small.pickle");
    const SnapshotTimeline t = buildSnapshotTimeline(s, 0);
    QCOMPARE(t.priorActiveBytes, std::int64_t(150));
    QCOMPARE(t.active.front().bytes, std::int64_t(150));
    QCOMPARE(t.active.back().bytes, std::int64_t(400));  // what is alive at the dump: A + C
    const SnapshotFigures f = snapshotFigures(s, t);
    QCOMPARE(f.peakActiveBytes, std::int64_t(1400));
    QCOMPARE(f.peakActiveBytes, peakByDefinition(s, 0));
    QCOMPARE(f.peakActiveSeq, std::int64_t(7));
    QCOMPARE(f.peakActiveNs, TimeNs(1007000));
    QCOMPARE(t.priorReservedBytes, std::int64_t(4096));
    QCOMPARE(f.peakReservedBytes, std::int64_t(6144));
    QCOMPARE(f.reservedAtPeakBytes, std::int64_t(6144));
    QCOMPARE(f.fragmentationBytes, std::int64_t(6144 - 1400));
    // Alive at the peak: A (prior), C, D; their sum is the peak.
    QCOMPARE(f.allocationsAtPeak, std::int64_t(3));
    std::int64_t sum = 0;
    for (const auto& g : f.topAtPeak) sum += g.bytes;
    QCOMPARE(sum, f.peakActiveBytes);
    QCOMPARE(QString::fromStdString(f.topAtPeak[0].owner), QString("/home/me/train.py:9:<module>"));
    QCOMPARE(QString::fromStdString(f.topAtPeak[0].site),
             QString("/venv/lib/python3.12/site-packages/torch/optim/adamw.py:200:step"));
    QCOMPARE(QString::fromStdString(f.topAtPeak[0].category), QString("optimizer_state"));
    QCOMPARE(QString::fromStdString(f.topAtPeak[1].owner),
             QString("/home/me/model.py:42:forward"));  // user code, not torch's linear
    QCOMPARE(QString::fromStdString(f.topAtPeak[1].category), QString("activations"));
    QVERIFY(f.topAtPeak[2].prior);
    // Level of detail keeps the peak however few buckets.
    const auto lod = curveLevelOfDetail(t.active, t.active.front().tsNs, t.active.back().tsNs + 1, 1);
    QCOMPARE(lod.size(), std::size_t(1));
    QCOMPARE(lod[0].bytes, std::int64_t(1400));
  }

  void importsByContentAndAttaches() {
    QTemporaryDir dir;
    const std::string file = shardscope::test::writeGzip(dir, "snapshot.bin", shardscope::test::snapshotPickle(smallSnapshot()));
    TraceStore store(shardscope::test::pathIn(dir, "s.db"));
    const TraceReader& reader = chooseReader({file}, store.path());
    QCOMPARE(QString::fromUtf8(reader.name().data(), static_cast<int>(reader.name().size())), QString("memsnap"));
    const ImportResult r = reader.import(store, {file}, {});
    QCOMPARE(r.runIds.size(), std::size_t(1));
    const auto ranks = memorySnapshotRanks(store, r.runIds[0]);
    QCOMPARE(ranks.size(), std::size_t(1));
    const auto loaded = loadMemorySnapshot(store, ranks[0].id);
    QVERIFY(loaded);
    const MemorySnapshot parsed = parseMemorySnapshot(shardscope::test::snapshotPickle(smallSnapshot()), "x");
    QCOMPARE(loaded->events.size(), parsed.events.size());
    QCOMPARE(loaded->events[7].addr, parsed.events[7].addr);
    QCOMPARE(loaded->events[7].stack, parsed.events[7].stack);
    QVERIFY(loaded->frames == parsed.frames);
    QVERIFY(loaded->prior == parsed.prior);
    const auto peaks = computeMemoryPeaks(store, r.runIds[0]);
    QCOMPARE(peaks.size(), std::size_t(1));
    QVERIFY(peaks[0].fromSnapshot);
    QCOMPARE(peaks[0].peakAllocatedBytes, std::int64_t(1400));
    QCOMPARE(peaks[0].peakReservedBytes, std::int64_t(6144));

    // Attached as rank 1 of that run; a second snapshot of the same rank is refused, keeping nothing.
    ImportOptions attach;
    attach.attachTo = r.runIds[0];
    attach.attachRank = 1;
    reader.import(store, {file}, attach);
    QCOMPARE(memorySnapshotRanks(store, r.runIds[0]).size(), std::size_t(2));
    QCOMPARE(computeSnapshotFigures(store, r.runIds[0]).size(), std::size_t(2));
    const auto runsBefore = store.runs().size();
    QVERIFY_THROWS_EXCEPTION(Error, reader.import(store, {file}, attach));
    QCOMPARE(store.runs().size(), runsBefore);
    QCOMPARE(memorySnapshotRanks(store, r.runIds[0]).size(), std::size_t(2));
  }

  void failedImportKeepsNothing() {
    QTemporaryDir dir;
    const std::string full = shardscope::test::snapshotPickle(smallSnapshot());
    const std::string good = shardscope::test::writeFile(dir, "a.pickle", full);
    const std::string cut = shardscope::test::writeFile(dir, "b.pickle", full.substr(0, full.size() - 7));
    TraceStore store(shardscope::test::pathIn(dir, "s.db"));
    const TraceReader& reader = *traceReader("memsnap");
    try {
      reader.import(store, {good, cut}, {});
      QFAIL("a truncated snapshot was imported");
    } catch (const Error& e) {
      QVERIFY2(std::string(e.what()).find("/b.pickle: byte ") != std::string::npos, e.what());
    }
    QVERIFY(store.runs().empty());
    CancelToken cancel;
    cancel.cancel();
    ImportOptions opt;
    opt.cancel = &cancel;
    QVERIFY_THROWS_EXCEPTION(Cancelled, reader.import(store, {good}, opt));
    QVERIFY(store.runs().empty());
    // Not a snapshot: a pickle of something else is named as such.
    const std::string other = shardscope::test::writeFile(dir, "c.pickle", std::string("\x80\x04]\x94.", 5));
    try {
      reader.import(store, {other}, {});
      QFAIL("a list pickle was imported");
    } catch (const Error& e) {
      QVERIFY2(std::string(e.what()).find("not a PyTorch memory snapshot") != std::string::npos, e.what());
    }
  }

  void migratesFromVersion4() {
    QTemporaryDir dir;
    const std::string path = shardscope::test::pathIn(dir, "v4.db");
    {
      Database db(path, Database::Mode::ReadWrite);
      schema::migrate(db, 4);
    }
    TraceStore store(path);
    QCOMPARE(schema::version(storeDb(store)), 5);
    Statement st(storeDb(store), "SELECT count(*) FROM sqlite_master WHERE name LIKE 'memsnap%'");
    QVERIFY(st.step());
    QCOMPARE(st.int64(0), std::int64_t(8));
  }

  void realH100Fixture() {
    const auto dir = shardscope::test::sharedTracesDir();
    if (!dir) QSKIP("no shared traces");
    const std::string path = *dir + "/gpu/torch211_fsdp2_bf16_h100.memsnap.pickle.gz";
    if (!std::filesystem::exists(path)) QSKIP("the H100 memory snapshot is not there");
    auto in = openInput(path);
    const MemorySnapshot s = parseMemorySnapshot(readAll(*in, 64u << 20), path);
    QCOMPARE(s.devices(), std::vector<int>{0});
    const SnapshotTimeline t = buildSnapshotTimeline(s, 0);
    const SnapshotFigures f = snapshotFigures(s, t);
    QCOMPARE(f.peakActiveBytes, peakByDefinition(s, 0));
    // README: "peak allocated 14.8 GiB" for this FSDP2 bf16 job.
    QVERIFY(std::abs(static_cast<double>(f.peakActiveBytes) / (1ull << 30) - 14.8) < 0.05);
    std::int64_t reserved = 0;
    for (const auto& g : s.segments) reserved += g.totalSize;
    QCOMPARE(f.peakReservedBytes, reserved);  // no segment event in these 2 steps: the dump's segments
    QCOMPARE(f.fragmentationBytes, f.reservedAtPeakBytes - f.peakActiveBytes);
    QVERIFY(f.topAtPeak.size() <= 20);
    QVERIFY(f.priorActiveBytes > 0);
    // The FSDP2 unsharded parameters (all-gather output storage) are named by their site and category.
    bool fsdp = false;
    for (const auto& g : f.topAtPeak)
      if (g.site.find("_fsdp_param.py") != std::string::npos && g.category == "parameters") fsdp = true;
    QVERIFY(fsdp);
    // The stored copy reads back to the same figures.
    QTemporaryDir tmp;
    TraceStore store(shardscope::test::pathIn(tmp, "f.db"));
    const ImportResult r = traceReader("memsnap")->import(store, {path}, {});
    const auto figs = computeSnapshotFigures(store, r.runIds[0]);
    QCOMPARE(figs.size(), std::size_t(1));
    QCOMPARE(figs[0].peakActiveBytes, f.peakActiveBytes);
    QCOMPARE(figs[0].events, std::int64_t(s.events.size()));
  }
};

QTEST_GUILESS_MAIN(TestMemorySnapshot)
#include "tst_memory_snapshot.moc"
