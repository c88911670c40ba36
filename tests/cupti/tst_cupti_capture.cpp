// CUPTI records into the store: GpuCapture feeds a real Recorder writing a real SQLite file, and the
// analyses read the result as they read an imported GPU trace (GPU stream lanes as device lanes,
// NCCL kernels as communication). The records are what ActivityDecoder delivers (tst_cupti_decode).
#include <QTemporaryDir>
#include <QtTest/QtTest>

#include <algorithm>
#include <string>

#include "core/storage/store_access.h"
#include "core/analysis/step_breakdown.h"
#include "core/storage/trace_store.h"
#include "core/timeline/timeline_index.h"
#include "profiler/capture/recorder.h"
#include "profiler/cupti/gpu_activity.h"
#include "profiler/gpu/gpu_capture.h"
#include "tests/common/test_support.h"

using shardscope::core::TimeNs;
namespace core = shardscope::core;
namespace cupti = shardscope::cupti;

namespace {

constexpr TimeNs kBase = 1'700'000'000'000'000'000LL;

cupti::GpuActivity kernel(const std::string& name, TimeNs s, TimeNs e, std::uint32_t stream, std::uint32_t corr,
                          core::Category cat, core::CollectiveOp op = core::CollectiveOp::None) {
  cupti::GpuActivity a;
  a.kind = cupti::ActivityKind::Kernel;
  a.name = name;
  a.startNs = kBase + s;
  a.endNs = kBase + e;
  a.device = 0;
  a.stream = stream;
  a.correlation = corr;
  a.category = cat;
  a.op = op;
  return a;
}

}  // namespace

class TestCuptiCapture : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void recordsLandInTheSchema();
};

void TestCuptiCapture::recordsLandInTheSchema() {
  QTemporaryDir dir;
  const std::string db = shardscope::test::pathIn(dir, "gpu.db");
  core::RunId runId;
  {
    core::TraceStore store(db);
    core::Run run;
    run.name = "gpu capture";
    run.source = core::RunSource::Runtime;
    run.strategy = "fsdp";
    run.worldSize = 2;  // rank 0 of two: its NCCL kernel is communication (one rank's collectives are local)
    run.status = core::RunStatus::Running;
    core::Transaction tx(shardscope::core::storeDb(store));
    runId = store.createRun(run);
    tx.commit();
  }
  {
    shardscope::capture::Recorder::Options o;
    o.dbPath = db;
    o.runId = runId;
    o.rank = 0;
    o.host = "test";
    o.device = "cuda:0";
    o.flushIntervalS = 60;  // everything in the final flush
    shardscope::capture::Recorder rec(o);
    shardscope::gpu::GpuCapture gc(rec);
    gc.beginStep(1, kBase);
    rec.step(1, kBase, kBase + 10'000);
    // Compute on stream 7: [1000, 4000) and [5000, 6000); an all-gather on stream 13 over
    // [3000, 5500): 1500 ns hidden behind compute, 1000 ns exposed; a copy [7000, 7500).
    auto api = cupti::GpuActivity{};
    api.kind = cupti::ActivityKind::RuntimeApi;
    api.name = "cudaLaunchKernel";
    api.startNs = kBase + 900;
    api.endNs = kBase + 950;
    api.correlation = 11;
    api.externalId = 77;
    api.threadId = 4321;
    gc.onActivity(std::move(api));
    auto gemm = kernel("sm90_xmma_gemm_f32f32", 1000, 4000, 7, 11, core::Category::Computation);
    gemm.externalId = 77;
    gc.onActivity(std::move(gemm));
    gc.onActivity(kernel("ncclDevKernel_AllGather_RING_LL", 3000, 5500, 13, 12, core::Category::Communication,
                         core::CollectiveOp::AllGather));
    gc.onActivity(kernel("void at::native::elementwise_kernel<128, 4>", 5000, 6000, 7, 13, core::Category::Computation));
    cupti::GpuActivity copy;
    copy.kind = cupti::ActivityKind::Memcpy;
    copy.name = "Memcpy DtoH (Device -> Pinned)";
    copy.startNs = kBase + 7000;
    copy.endNs = kBase + 7500;
    copy.device = 0;
    copy.stream = 7;
    copy.bytes = 8192;
    copy.category = core::Category::Memory;
    gc.onActivity(std::move(copy));
    cupti::GpuActivity alloc;
    alloc.kind = cupti::ActivityKind::MemoryAlloc;
    alloc.startNs = alloc.endNs = kBase + 500;
    alloc.device = 0;
    alloc.bytes = 20 << 20;
    gc.onActivity(cupti::GpuActivity(alloc));
    alloc.startNs = alloc.endNs = kBase + 600;
    alloc.bytes = 2 << 20;
    gc.onActivity(cupti::GpuActivity(alloc));
    alloc.kind = cupti::ActivityKind::MemoryFree;
    alloc.startNs = alloc.endNs = kBase + 9000;
    alloc.bytes = 20 << 20;
    gc.onActivity(cupti::GpuActivity(alloc));
    QCOMPARE(gc.segmentBytes(0), std::int64_t(2 << 20));
    cupti::CaptureStats st;
    st.records = 8;
    st.kernels = 3;
    st.ncclKernels = 1;
    st.droppedByCupti = 5;
    st.zeroTimestamp = 2;
    gc.finish(st, 40, -120);
    rec.close();
  }

  core::TraceStore store(db, core::Database::Mode::ReadOnly);
  const auto tracks = store.tracks(runId);
  int gpuLanes = 0;
  core::TrackId ncclTrack, computeTrack, apiTrack;
  for (const auto& t : tracks) {
    if (t.kind == core::TrackKind::GpuStream) {
      ++gpuLanes;
      QVERIFY(t.device && *t.device == 0);
      QVERIFY(t.stream.has_value());
      if (*t.stream == 13) ncclTrack = t.id;
      if (*t.stream == 7) computeTrack = t.id;
    }
    if (t.name.find("CUDA API") != std::string::npos) apiTrack = t.id;
  }
  QCOMPARE(gpuLanes, 2);
  QVERIFY(ncclTrack && computeTrack && apiTrack);

  auto events = store.eventsInWindow(ncclTrack, kBase, kBase + 20'000, true);
  QCOMPARE(events.size(), std::size_t(1));
  QVERIFY(events[0].category == core::Category::Communication);
  QVERIFY(events[0].collOp == core::CollectiveOp::AllGather);
  QCOMPARE(events[0].cat, std::string_view("kernel"));
  QVERIFY(events[0].flags & core::EventFlags::HtaGpuRow);
  events = store.eventsInWindow(computeTrack, kBase, kBase + 20'000, true);
  QCOMPARE(events.size(), std::size_t(3));
  QCOMPARE(events[0].name, std::string_view("sm90_xmma_gemm_f32f32"));
  QVERIFY(events[0].correlation && *events[0].correlation == 11);
  QVERIFY(events[0].externalId && *events[0].externalId == 77);  // the span that launched it
  QVERIFY(events[2].bytes && *events[2].bytes == 8192);
  QCOMPARE(events[2].cat, std::string_view("gpu_memcpy"));
  events = store.eventsInWindow(apiTrack, kBase, kBase + 20'000, true);
  QCOMPARE(events.size(), std::size_t(1));
  QCOMPARE(events[0].name, std::string_view("cudaLaunchKernel"));
  QVERIFY(events[0].correlation && *events[0].correlation == 11);

  // cudaMalloc segments as a counter lane of their own, not as the device's memory records (those are
  // the caching allocator's statistics: the two sources never mix in one peak).
  const auto ranks = store.ranks(runId);
  QCOMPARE(ranks.size(), std::size_t(1));
  QVERIFY(store.memoryEvents(ranks[0].id).empty());
  std::optional<core::TrackId> segTrack;
  for (const auto& t : store.summary(runId).tracks)
    if (t.track.kind == core::TrackKind::Counter && t.track.name == "cudaMalloc total, cuda:0 (CUPTI)") segTrack = t.track.id;
  QVERIFY(segTrack);
  const auto seg = store.counterSamples(*segTrack);
  QCOMPARE(seg.size(), std::size_t(3));
  QCOMPARE(seg[1].value, double(22 << 20));
  QCOMPARE(seg[2].value, double(2 << 20));

  // Capture statistics on the rank.
  QCOMPARE(store.metric(runId, ranks[0].id, "cupti.lost_records").value_or(-1), 7.0);
  QCOMPARE(store.metric(runId, ranks[0].id, "cupti.nccl_kernels").value_or(-1), 1.0);
  QCOMPARE(store.metric(runId, ranks[0].id, "cupti.clock_drift_ns").value_or(0), -120.0);

  // The analyses see a GPU rank: GPU streams are its device lanes, the NCCL kernel its communication.
  const auto steps = core::computeStepBreakdown(store, runId);
  auto it = std::find_if(steps.begin(), steps.end(), [](const core::StepBreakdown& s) { return s.step == 1; });
  QVERIFY(it != steps.end());
  QCOMPARE(it->computeNs, TimeNs(4000));
  QCOMPARE(it->commNs, TimeNs(2500));
  QCOMPARE(it->overlappedCommNs, TimeNs(1500));
  QCOMPARE(it->exposedCommNs, TimeNs(1000));
  QCOMPARE(it->otherBusyNs, TimeNs(500));
  const auto index = core::timeline::TimelineIndex::build(store, runId);
  QCOMPARE(index->ranks().size(), std::size_t(1));
  QVERIFY(index->ranks()[0].hasGpu);
  // Records launched before the first step belong to none; after it, to the step of their launch.
  events = store.eventsInWindow(computeTrack, kBase, kBase + 20'000, false);
  for (const auto& e : events) QVERIFY(e.step && *e.step == 1);
}

QTEST_GUILESS_MAIN(TestCuptiCapture)
#include "tst_cupti_capture.moc"
