// CUPTI record decoding on synthetic activity buffers, walked by the real libcupti
// (cuptiActivityGetNextRecord needs no GPU), and the clock alignment maths. Runs on any machine
// with the CUDA toolkit; the tracer itself is exercised on a GPU by packaging/gpu-check.sh.
#include <QtTest/QtTest>

#include <cstring>
#include <string>
#include <vector>

#include "profiler/cupti/clock_alignment.h"
#include "profiler/cupti/cupti_decoder.h"
#include "profiler/cupti/cupti_tracer.h"

using namespace shardscope;
using namespace shardscope::cupti;

namespace {

KernelRecord kernel(const char* name, std::uint64_t start, std::uint64_t end, std::uint32_t corr, std::uint32_t stream = 7) {
  KernelRecord k;
  std::memset(&k, 0, sizeof k);
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.name = name;
  k.start = start;
  k.end = end;
  k.correlationId = corr;
  k.deviceId = 0;
  k.contextId = 1;
  k.streamId = stream;
  k.gridX = 128, k.gridY = 2, k.gridZ = 1;
  k.blockX = 256, k.blockY = 1, k.blockZ = 1;
  k.registersPerThread = 64;
  k.staticSharedMemory = 1024;
  k.dynamicSharedMemory = 3072;
  return k;
}

CUpti_ActivityAPI api(CUpti_ActivityKind kind, std::uint32_t cbid, std::uint64_t start, std::uint64_t end, std::uint32_t corr) {
  CUpti_ActivityAPI a;
  std::memset(&a, 0, sizeof a);
  a.kind = kind;
  a.cbid = cbid;
  a.start = start;
  a.end = end;
  a.correlationId = corr;
  a.processId = 4242;
  a.threadId = 17;
  return a;
}

CUpti_ActivityExternalCorrelation ext(std::uint32_t corr, std::uint64_t id,
                                      CUpti_ExternalCorrelationKind kind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2) {
  CUpti_ActivityExternalCorrelation e;
  std::memset(&e, 0, sizeof e);
  e.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
  e.externalKind = kind;
  e.externalId = id;
  e.correlationId = corr;
  return e;
}

// Appends a record (copied) to a byte buffer, 8-byte aligned as CUPTI does.
template <typename T>
void append(std::vector<std::uint8_t>& buf, const T& rec) {
  const std::size_t at = buf.size();
  buf.resize(at + ((sizeof(T) + 7) / 8) * 8, 0);
  std::memcpy(buf.data() + at, &rec, sizeof(T));
}

}  // namespace

class TestCuptiDecode : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void decodesEveryKindThroughCupti();
  void correlationSpansBuffers();
  void kernelBeforeLaunchIsFlagged();
  void windowAndZeroTimestamps();
  void emptyAndTruncatedBuffers();
  void namesFollowKineto();
  void clockAlignmentIgnoresPreemptedSamples();
  void tracerWithoutGpuFailsCleanly();
};

void TestCuptiDecode::decodesEveryKindThroughCupti() {
  std::vector<std::uint8_t> buf;
  append(buf, ext(7, 42));
  append(buf, api(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 1000, 1100, 7));
  append(buf, kernel("ampere_sgemm_128x64_tn", 1200, 1700, 7));
  append(buf, api(CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, 1800, 1850, 8));
  append(buf, kernel("ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", 2000, 5000, 8, 13));
  MemcpyRecord m;
  std::memset(&m, 0, sizeof m);
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  m.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
  m.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  m.bytes = 4096;
  m.start = 5100;
  m.end = 5300;
  m.streamId = 7;
  m.correlationId = 9;
  append(buf, m);
  MemsetRecord ms;
  std::memset(&ms, 0, sizeof ms);
  ms.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  ms.bytes = 1 << 20;
  ms.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  ms.start = 5400;
  ms.end = 5450;
  ms.streamId = 7;
  append(buf, ms);
  MemoryRecord mem;
  std::memset(&mem, 0, sizeof mem);
  mem.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
  mem.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
  mem.address = 0x7f0000000000ull;
  mem.bytes = 2u << 20;
  mem.timestamp = 5500;
  mem.deviceId = 0;
  append(buf, mem);
  mem.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
  mem.timestamp = 5600;
  append(buf, mem);
  SyncRecord sync;
  std::memset(&sync, 0, sizeof sync);
  sync.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  sync.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
  sync.start = 5700;
  sync.end = 5900;
  sync.streamId = 7;
  append(buf, sync);
  OverheadRecord ov;
  std::memset(&ov, 0, sizeof ov);
  ov.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
  ov.overheadKind = CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH;
  ov.start = 6000;
  ov.end = 6100;
  append(buf, ov);
  // Noise: filtered like Kineto.
  append(buf, api(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020, 900, 910, 6));
  append(buf, api(CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent, 920, 930, 5));

  std::vector<GpuActivity> out;
  ActivityDecoder d([&](GpuActivity&& a) { out.push_back(std::move(a)); });
  ClockAlignment clock;
  clock.addSample(1'000'000, 0, 1'000'000);  // host = cupti + 1 ms
  d.setClock(clock);
  QCOMPARE(d.decodeBuffer(buf.data(), buf.size()), std::size_t(13));  // every record walked by libcupti
  QCOMPARE(out.size(), std::size_t(10));
  const auto& s = d.stats();
  QCOMPARE(s.records, std::uint64_t(10));
  QCOMPARE(s.kernels, std::uint64_t(2));
  QCOMPARE(s.ncclKernels, std::uint64_t(1));
  QCOMPARE(s.apiCalls, std::uint64_t(2));
  QCOMPARE(s.filteredApi, std::uint64_t(2));
  QCOMPARE(s.memcpys, std::uint64_t(1));
  QCOMPARE(s.memsets, std::uint64_t(1));
  QCOMPARE(s.memoryRecords, std::uint64_t(2));
  QCOMPARE(s.syncs, std::uint64_t(1));
  QCOMPARE(s.overheads, std::uint64_t(1));
  QCOMPARE(s.unknownKinds, std::uint64_t(0));

  const GpuActivity& launch = out[0];
  QVERIFY(launch.kind == ActivityKind::RuntimeApi);
  QCOMPARE(launch.name, std::string("cudaLaunchKernel"));
  QCOMPARE(launch.startNs, core::TimeNs(1'001'000));
  QCOMPARE(launch.endNs, core::TimeNs(1'001'100));
  QVERIFY(launch.externalId.has_value());
  QCOMPARE(*launch.externalId, std::uint64_t(42));
  QCOMPARE(launch.processId, 4242u);
  QCOMPARE(launch.threadId, 17u);

  const GpuActivity& gemm = out[1];
  QVERIFY(gemm.kind == ActivityKind::Kernel);
  QCOMPARE(gemm.name, std::string("ampere_sgemm_128x64_tn"));
  QVERIFY(gemm.category == core::Category::Computation);
  QVERIFY(gemm.op == core::CollectiveOp::None);
  QCOMPARE(gemm.startNs, core::TimeNs(1'001'200));
  QCOMPARE(gemm.endNs, core::TimeNs(1'001'700));
  QCOMPARE(gemm.stream, 7u);
  QCOMPARE(gemm.correlation, 7u);
  QVERIFY(gemm.externalId && *gemm.externalId == 42);  // the span that launched it
  QCOMPARE(gemm.grid[0], 128);
  QCOMPARE(gemm.block[0], 256);
  QCOMPARE(gemm.registersPerThread, 64);
  QCOMPARE(gemm.sharedMemoryBytes, 4096);

  const GpuActivity& driver = out[2];
  QVERIFY(driver.kind == ActivityKind::DriverApi);
  QCOMPARE(driver.name, std::string("cuLaunchKernelEx"));
  QVERIFY(!driver.externalId);

  const GpuActivity& nccl = out[3];
  QVERIFY(nccl.category == core::Category::Communication);
  QVERIFY(nccl.op == core::CollectiveOp::AllGather);
  QCOMPARE(nccl.stream, 13u);
  QCOMPARE(nccl.endNs - nccl.startNs, core::TimeNs(3000));

  QVERIFY(out[4].kind == ActivityKind::Memcpy);
  QCOMPARE(out[4].name, std::string("Memcpy HtoD (Pinned -> Device)"));
  QCOMPARE(out[4].bytes, std::int64_t(4096));
  QVERIFY(out[4].category == core::Category::Memory);
  QCOMPARE(out[5].name, std::string("Memset (Device)"));
  QCOMPARE(out[5].bytes, std::int64_t(1 << 20));
  QVERIFY(out[6].kind == ActivityKind::MemoryAlloc);
  QCOMPARE(out[6].bytes, std::int64_t(2 << 20));
  QCOMPARE(out[6].address, std::uint64_t(0x7f0000000000ull));
  QCOMPARE(out[6].startNs, core::TimeNs(1'005'500));
  QVERIFY(out[7].kind == ActivityKind::MemoryFree);
  QCOMPARE(out[8].name, std::string("Stream Sync"));
  QCOMPARE(out[9].name, std::string("CUPTI buffer flush"));

  // Args carry the launch configuration and the correlation, as Kineto's kernel args do.
  const std::string args = gemm.argsJson();
  QVERIFY2(args.find("\"grid\":[128,2,1]") != std::string::npos, args.c_str());
  QVERIFY2(args.find("\"External id\":42") != std::string::npos, args.c_str());
  QVERIFY2(args.find("\"correlation\":7") != std::string::npos, args.c_str());
}

void TestCuptiDecode::correlationSpansBuffers() {
  // CUPTI may complete the external-correlation record in one buffer and the kernel in the next.
  std::vector<std::uint8_t> b1, b2;
  append(b1, ext(21, 99));
  append(b1, ext(22, 5, CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0));  // someone else's kind: ignored
  append(b2, kernel("void at::native::vectorized_elementwise_kernel<4>", 100, 200, 21));
  append(b2, kernel("void at::native::reduce_kernel<512>", 300, 400, 22));
  std::vector<GpuActivity> out;
  ActivityDecoder d([&](GpuActivity&& a) { out.push_back(std::move(a)); });
  QCOMPARE(d.decodeBuffer(b1.data(), b1.size()), std::size_t(2));
  QCOMPARE(out.size(), std::size_t(0));  // correlation records are state, not activities
  QCOMPARE(d.decodeBuffer(b2.data(), b2.size()), std::size_t(2));
  QCOMPARE(out.size(), std::size_t(2));
  QVERIFY(out[0].externalId && *out[0].externalId == 99);
  QVERIFY(!out[1].externalId);
}

void TestCuptiDecode::kernelBeforeLaunchIsFlagged() {
  std::vector<std::uint8_t> buf;
  append(buf, api(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 5000, 5100, 3));
  append(buf, kernel("sm90_xmma_gemm", 4000, 4500, 3));  // starts before its launch: clock trouble
  append(buf, api(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 6000, 6100, 4));
  append(buf, kernel("sm90_xmma_gemm", 6200, 6500, 4));
  ActivityDecoder d([](GpuActivity&&) {});
  d.decodeBuffer(buf.data(), buf.size());
  QCOMPARE(d.stats().beforeLaunch, std::uint64_t(1));
  QCOMPARE(d.stats().kernels, std::uint64_t(2));  // still delivered: the warning is a count
}

void TestCuptiDecode::windowAndZeroTimestamps() {
  std::vector<std::uint8_t> buf;
  append(buf, kernel("early", 100, 900, 1));       // ended before the window opened
  append(buf, kernel("straddles", 900, 1100, 2));  // overlaps the window: kept whole
  append(buf, kernel("lost", 0, 0, 3));            // device timestamp buffer overflowed
  append(buf, kernel("inside", 1500, 1600, 4));
  append(buf, kernel("late", 2500, 2600, 5));  // after the window closed
  std::vector<std::string> names;
  ActivityDecoder d([&](GpuActivity&& a) { names.push_back(a.name); });
  d.setWindow(1000, 2000);
  d.decodeBuffer(buf.data(), buf.size());
  QCOMPARE(names, (std::vector<std::string>{"straddles", "inside"}));
  QCOMPARE(d.stats().zeroTimestamp, std::uint64_t(1));
  QCOMPARE(d.stats().outsideWindow, std::uint64_t(2));
  d.stats().droppedByCupti = 4;
  QCOMPARE(d.stats().lost(), std::uint64_t(5));
}

void TestCuptiDecode::emptyAndTruncatedBuffers() {
  ActivityDecoder d([](GpuActivity&&) { QFAIL("no record expected"); });
  QCOMPARE(d.decodeBuffer(nullptr, 0), std::size_t(0));
  std::vector<std::uint8_t> buf;
  append(buf, kernel("k", 10, 20, 1));
  QCOMPARE(d.decodeBuffer(buf.data(), 0), std::size_t(0));  // validSize 0: CUPTI returned an empty buffer
  // A valid size shorter than the record: libcupti stops rather than reading past it.
  std::vector<GpuActivity> out;
  ActivityDecoder d2([&](GpuActivity&& a) { out.push_back(std::move(a)); });
  QCOMPARE(d2.decodeBuffer(buf.data(), 16), std::size_t(0));
  QCOMPARE(out.size(), std::size_t(0));
}

void TestCuptiDecode::namesFollowKineto() {
  QCOMPARE(memcpyName(CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE),
           std::string("Memcpy DtoH (Device -> Pageable)"));
  QCOMPARE(memcpyName(CUPTI_ACTIVITY_MEMCPY_KIND_DTOD, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE),
           std::string("Memcpy DtoD (Device -> Device)"));
  QCOMPARE(apiName(true, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020), std::string("cudaMemcpyAsync"));
  QCOMPARE(apiName(false, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel), std::string("cuLaunchKernel"));
  QVERIFY(keepRuntimeApi(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000));
  QVERIFY(!keepRuntimeApi(CUPTI_RUNTIME_TRACE_CBID_cudaEventDestroy_v3020));
  QVERIFY(keepDriverApi(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx));
  QVERIFY(!keepDriverApi(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2));
}

void TestCuptiDecode::clockAlignmentIgnoresPreemptedSamples() {
  ClockAlignment c;
  QCOMPARE(c.offset(), core::TimeNs(0));
  // True offset 5,000,000 ns; honest samples have 40-60 ns round trips centred on the CUPTI read.
  const core::TimeNs offset = 5'000'000;
  for (int i = 0; i < 20; ++i) {
    const core::TimeNs cuptiT = 1'000'000'000 + i * 1000;
    const core::TimeNs half = 20 + (i % 3) * 5;
    c.addSample(cuptiT + offset - half, cuptiT, cuptiT + offset + half);
  }
  // Preempted samples: the thread slept after the CUPTI read (huge round trip, midpoint far off).
  for (int i = 0; i < 8; ++i) {
    const core::TimeNs cuptiT = 2'000'000'000 + i * 1000;
    c.addSample(cuptiT + offset - 30, cuptiT, cuptiT + offset + 200'000);
  }
  QCOMPARE(c.samples(), std::size_t(28));
  QCOMPARE(c.offset(), offset);
  QVERIFY(c.uncertainty() >= 20 && c.uncertainty() <= 30);
  QCOMPARE(c.toHost(123), core::TimeNs(123) + offset);
  // Reversed readings are tolerated (a clock stepping backwards between the reads).
  ClockAlignment r;
  r.addSample(1100, 100, 900);
  QCOMPARE(r.offset(), core::TimeNs(900));
}

void TestCuptiDecode::tracerWithoutGpuFailsCleanly() {
  // Where no CUDA driver is loaded the tracer must refuse with CUPTI's reason, never crash or hang.
  auto& t = CuptiTracer::instance();
  try {
    TracerOptions o;
    o.flushPeriodMs = 10;
    t.initialize(o);
    t.start([](GpuActivity&&) {});
  } catch (const std::runtime_error& e) {
    QVERIFY2(std::string(e.what()).rfind("CUPTI: ", 0) == 0, e.what());
    qInfo("no GPU here: %s", e.what());
    QVERIFY(!t.running());
    return;
  }
  // A machine with a GPU: the window opens and closes cleanly with nothing launched.
  QVERIFY(t.running());
  const CaptureStats s = t.stop();
  QVERIFY(!t.running());
  QCOMPARE(s.kernels, std::uint64_t(0));
  QSKIP("a CUDA driver is present: the tracer started; the GPU check (packaging/gpu-check.sh) covers capture");
}

QTEST_GUILESS_MAIN(TestCuptiDecode)
#include "tst_cupti_decode.moc"
