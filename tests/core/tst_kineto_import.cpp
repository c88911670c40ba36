// Kineto importer: real development traces (when ../shared/traces exists) compared with the figures
// in shared/traces/README.md, and small hand-written traces for each format rule of traces.md §1.
#include <QTemporaryDir>
#include <QtTest>

#include <fstream>
#include <map>
#include <set>

#include "core/storage/store_access.h"
#include "core/import/kineto_importer.h"
#include "core/storage/trace_store.h"
#include "core/util/error.h"
#include "core/util/json.h"
#include "tests/common/test_support.h"

using namespace shardscope::core;
using shardscope::test::pathIn;
using shardscope::test::writeFile;
using shardscope::test::writeGzip;

namespace {

std::int64_t scalar(TraceStore& s, const std::string& sql, std::int64_t bind = -1) {
  Statement st(shardscope::core::storeDb(s), sql);
  if (bind >= 0) st.bind(1, bind);
  if (!st.step()) return -1;
  return st.int64(0);
}

struct Row {
  Track track;
  Event event;
};

std::vector<Row> allEvents(TraceStore& store, RunId run, bool withArgs = false) {
  std::vector<Row> out;
  for (const auto& t : store.summary(run).tracks)
    store.forEachEvent(
        t.track.id,
        [&](const Event& e) {
          out.push_back(Row{t.track, e});
        },
        withArgs);
  return out;
}

template <typename Pred>
std::int64_t countIf(const std::vector<Row>& rows, Pred p) {
  return std::count_if(rows.begin(), rows.end(), p);
}

const Event& named(const std::vector<Row>& rows, const std::string& name) {
  for (const auto& r : rows)
    if (r.event.name == name || (name.back() == '%' && r.event.name.rfind(name.substr(0, name.size() - 1), 0) == 0))
      return r.event;
  throw std::runtime_error("no event named " + name);
}

// A two-step trace in the current format (relative float ts), rank 1 of 2.
std::string modernTrace(int rank, bool baseLast = false) {
  const std::string base = R"J("baseTimeNanoseconds": 1767189312000000000)J";
  std::string s = R"J({"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100", "totalGlobalMem": 85000000000}],
"distributedInfo": {"backend": "nccl", "rank": )J" +
                  std::to_string(rank) + R"J(, "world_size": 2, "pg_count": 2,
  "pg_config": [{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl", "pg_size": 2, "ranks": [0, 1]}],
  "nccl_version": "2.27.5"},
)J";
  if (!baseLast) s += base + ",\n";
  s += R"J("traceEvents": [
{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#7", "pid": 10, "tid": 10, "ts": 1000.000, "dur": 1000.000, "args": {"External id": 1}},
{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 10, "tid": 10, "ts": 1010.500, "dur": 20.250, "args": {"External id": 2, "Input Dims": [[4, 4], [4, 4]]}},
{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 10, "tid": 10, "ts": 1015.000, "dur": 5.000, "args": {"cbid": 211, "correlation": 100, "External id": 2}},
{"ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm", "pid": 0, "tid": 7, "ts": 1030.001, "dur": 50.002, "args": {"External id": 2, "device": 0, "stream": 7, "correlation": 100, "grid": [1, 2, 3]}},
{"ph": "s", "id": 100, "pid": 10, "tid": 10, "ts": 1015.000, "cat": "ac2g", "name": "ac2g"},
{"ph": "f", "id": 100, "pid": 0, "tid": 7, "ts": 1030.001, "cat": "ac2g", "name": "ac2g", "bp": "e"},
{"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 10, "tid": 10, "ts": 1100.000, "dur": 10.000, "args": {"External id": 3, "Collective name": "_allgather_base", "In msg nelems": 1000, "Out msg nelems": 2000, "Group size": 2, "dtype": "BFloat16", "Process Group Name": "0", "Process Group Description": "default_pg", "Process Group Ranks": "[0, 1]"}},
{"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernelEx", "pid": 10, "tid": 10, "ts": 1105.000, "dur": 3.000, "args": {"cbid": 307, "correlation": 101, "External id": 3}},
{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "pid": 0, "tid": 21, "ts": 1120.000, "dur": 30.000, "args": {"External id": 3, "device": 0, "stream": 21, "correlation": 101, "Collective name": "_allgather_base", "In msg nelems": 1000, "Out msg nelems": 2000, "Group size": 2, "dtype": "BFloat16", "Process Group Name": "0"}},
{"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "pid": 0, "tid": 7, "ts": 1200.000, "dur": 4.000, "args": {"device": 0, "stream": 7, "correlation": 102, "bytes": 4096}},
{"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 10, "tid": 10, "ts": 1300.000, "args": {"Total Reserved": 2097152, "Total Allocated": 1024, "Bytes": 1024, "Addr": 140000, "Device Id": 0, "Device Type": 1}},
{"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 10, "tid": 10, "ts": 1400.000, "args": {"Total Reserved": 2097152, "Total Allocated": 0, "Bytes": -1024, "Addr": 140000, "Device Id": 0, "Device Type": 1}},
{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#8", "pid": 10, "tid": 10, "ts": 2000.000, "dur": 900.000},
{"ph": "X", "cat": "python_function", "name": "train.py(12): step", "pid": 10, "tid": 10, "ts": 2001.000, "dur": 5.000, "args": {"Python id": 1}},
{"ph": "X", "cat": "cpu_op", "name": "aten::add_", "pid": 10, "tid": 10, "ts": 2010.000, "dur": 1.000, "args": {"External id": 9}},
{"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler", "ts": 900.000, "dur": 2500.000},
{"ph": "M", "name": "thread_name", "pid": 10, "tid": 10, "args": {"name": "thread 10 (python3)"}},
{"ph": "M", "name": "process_labels", "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}}
])J";
  if (baseLast) s += ",\n" + base;
  s += ",\n\"traceName\": \"rank.json\"}";
  return s;
}

}  // namespace

class TestKinetoImport : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  // The gzip inflater (ISA-L where the build has it, zlib otherwise or with SHARDSCOPE_INFLATE=zlib)
  // changes nothing stored: a gzip of two concatenated members imports the same either way, and
  // the same as the plain file.
  void gzipInflatersAgree() {
    QTemporaryDir dir;
    std::string json = "{\"traceEvents\": [";
    for (int i = 0; i < 3000; ++i)
      json += std::string(i ? "," : "") + "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::op" + std::to_string(i % 17) +
              "\",\"pid\":1,\"tid\":1,\"ts\":" + std::to_string(1000 + i * 10) +
              ",\"dur\":5,\"args\":{\"External id\":" + std::to_string(i) + "}}";
    json += "]}";
    const std::string plain = writeFile(dir, "t.json", json);
    const std::size_t half = json.size() / 2;
    const std::string gz = shardscope::test::writeGzip(dir, "a.json.gz", json.substr(0, half));
    const std::string gz2 = shardscope::test::writeGzip(dir, "b.json.gz", json.substr(half));
    // Two members in one file (legal gzip: what `cat a.gz b.gz` makes).
    const std::string both = pathIn(dir, "both.json.gz");
    {
      std::ofstream out(both, std::ios::binary);
      for (const auto& f : {gz, gz2}) {
        std::ifstream in(f, std::ios::binary);
        out << in.rdbuf();
      }
    }
    auto digest = [&](const std::string& file, const char* inflater) {
      if (inflater)
        qputenv("SHARDSCOPE_INFLATE", inflater);
      else
        qunsetenv("SHARDSCOPE_INFLATE");
      TraceStore store(pathIn(dir, std::string("d") + (inflater ? inflater : "default") + std::to_string(file.size()) + ".db"));
      const auto res = importKineto(store, {file});
      qunsetenv("SHARDSCOPE_INFLATE");
      std::string out = std::to_string(res.events) + ":";
      for (const auto& t : store.tracks(res.runIds.at(0)))
        store.forEachEvent(t.id, [&](const Event& e) {
          out += std::to_string(e.startNs);
          out += e.name;
          out += e.argsJson;
          out += ";";
        });
      return out;
    };
    const std::string ref = digest(plain, nullptr);
    QVERIFY(ref.rfind("3000:", 0) == 0);
    QCOMPARE(digest(both, nullptr), ref);
    QCOMPARE(digest(both, "zlib"), ref);
  }

  void parsesMicrosExactly() {
    std::int64_t ns = 0;
    bool f = false;
    QVERIFY(parseMicrosToNs("1365627862757.064", ns, f));
    QCOMPARE(ns, std::int64_t(1365627862757064));
    QVERIFY(f);
    QVERIFY(parseMicrosToNs("1661203462584767", ns, f));
    QCOMPARE(ns, std::int64_t(1661203462584767000));
    QVERIFY(!f);
    QVERIFY(parseMicrosToNs("21.953", ns, f));
    QCOMPARE(ns, std::int64_t(21953));
    QVERIFY(parseMicrosToNs("0.0005", ns, f));
    QCOMPARE(ns, std::int64_t(1));  // half away from zero
    QVERIFY(parseMicrosToNs("-2.5", ns, f));
    QCOMPARE(ns, std::int64_t(-2500));
    QVERIFY(parseMicrosToNs("1.5e3", ns, f));
    QCOMPARE(ns, std::int64_t(1500000));
    QVERIFY(!parseMicrosToNs("1e300", ns, f));
    QVERIFY(!parseMicrosToNs("99999999999999999999", ns, f));
  }

  void modernTraceFields() {
    QTemporaryDir dir;
    const auto file = writeFile(dir, "rank1.json", modernTrace(1));
    TraceStore store(pathIn(dir, "t.db"));
    const auto res = importKineto(store, {file});
    QCOMPARE(res.runIds.size(), std::size_t(1));
    const RunId run = res.runIds[0];
    const auto ranks = store.ranks(run);
    QCOMPARE(ranks.size(), std::size_t(1));
    QCOMPARE(ranks[0].rank, 1);
    QVERIFY(ranks[0].tsFloat);
    QCOMPARE(ranks[0].timeBaseNs, std::int64_t(1767189312000000000));
    QCOMPARE(QString::fromStdString(ranks[0].device), QString("cuda:0"));
    QCOMPARE(store.run(run)->worldSize, 2);
    // 12 X (incl. the Trace span); [memory] go to memory_events; ac2g flows are launch links.
    QCOMPARE(res.files[0].events, std::uint64_t(12));
    QCOMPARE(res.files[0].launchFlows, std::uint64_t(2));
    QCOMPARE(res.files[0].memoryEvents, std::uint64_t(2));
    QCOMPARE(res.files[0].kernels, std::uint64_t(2));
    QCOMPARE(res.files[0].ncclKernels, std::uint64_t(1));
    // Absolute ns = base + round(ts * 1000).
    const std::int64_t base = 1767189312000000000;
    const auto rows = allEvents(store, run, true);
    QCOMPARE(rows.size(), std::size_t(12));
    QCOMPARE(named(rows, "sm90_xmma_gemm").startNs, base + 1030001);
    QCOMPARE(named(rows, "sm90_xmma_gemm").endNs, base + 1080003);
    // Collective fields on the NCCL kernel: all-gather of 2000 bf16 elements = 4000 bytes.
    auto pgs = store.processGroups(run);
    const Event& nccl = named(rows, "ncclDevKernel%");
    QVERIFY(nccl.collOp == CollectiveOp::AllGather);
    QCOMPARE(*nccl.bytes, std::int64_t(4000));
    QCOMPARE(QString::fromStdString(std::string(nccl.dtype)), QString("BFloat16"));
    QCOMPARE(*nccl.groupSize, 2);
    QCOMPARE(pgs.size(), std::size_t(1));
    QCOMPARE(*nccl.processGroupId, pgs[0].id);
    QVERIFY(nccl.category == Category::Communication);
    QCOMPARE(*nccl.step, std::int64_t(7));  // step via its launch's correlation
    QCOMPARE(*nccl.correlation, std::int64_t(101));
    QVERIFY(nccl.flags & EventFlags::CollectiveMeta);
    // The record_param_comms op carries the same collective fields.
    QVERIFY(named(rows, "record_param_comms").collOp == CollectiveOp::AllGather);
    // Process group from distributedInfo.pg_config.
    QCOMPARE(pgs.size(), std::size_t(1));
    QCOMPARE(QString::fromStdString(pgs[0].description), QString("default_pg"));
    QCOMPARE(QString::fromStdString(pgs[0].ranksJson), QString("[0,1]"));
    QCOMPARE(pgs[0].size, 2);
    // Steps and per-event step tags.
    auto steps = store.steps(run);
    QCOMPARE(steps.size(), std::size_t(2));
    QCOMPARE(steps[0].step, std::int64_t(7));
    QCOMPARE(steps[0].endNs - steps[0].startNs, std::int64_t(1000000));
    QCOMPARE(*named(rows, "aten::mm").step, std::int64_t(7));
    QCOMPARE(*named(rows, "sm90_xmma_gemm").step, std::int64_t(7));
    QCOMPARE(*named(rows, "aten::add_").step, std::int64_t(8));
    QVERIFY(!named(rows, "Memcpy%").step.has_value());  // its launch (correlation 102) is not in the trace
    // Categories (HTA rules).
    QVERIFY(named(rows, "Memcpy%").category == Category::Memory);
    QVERIFY(named(rows, "cudaLaunchKernel").category == Category::Other);
    QVERIFY(named(rows, "aten::mm").category == Category::Computation);
    // Memory: counters per device and allocation records.
    auto ranksMem = store.memoryEvents(ranks[0].id);
    QCOMPARE(ranksMem.size(), std::size_t(2));
    QCOMPARE(ranksMem[1].bytes, std::int64_t(-1024));
    QCOMPARE(ranksMem[0].addr, std::int64_t(140000));
    const auto sum = store.summary(run);
    int counters = 0, gpu = 0, python = 0;
    for (const auto& t : sum.tracks) {
      if (t.track.kind == TrackKind::Counter) {
        ++counters;
        QCOMPARE(t.eventCount, std::int64_t(2));
      }
      if (t.track.kind == TrackKind::GpuStream) ++gpu;
      if (t.track.kind == TrackKind::Python) ++python;
      if (t.track.kind == TrackKind::CpuThread && t.track.tid == 10)
        QCOMPARE(QString::fromStdString(std::string(t.track.name)), QString("thread 10 (python3)"));
    }
    QCOMPARE(counters, 2);  // allocated + reserved
    QCOMPARE(gpu, 2);       // streams 7 and 21
    QCOMPARE(python, 1);
    // Args are kept (whitespace removed, nested arrays included), also through a window query.
    QCOMPARE(QString::fromStdString(named(rows, "aten::mm").argsJson),
             QString(R"J({"External id":2,"Input Dims":[[4,4],[4,4]]})J"));
    const auto evs = store.eventsInWindow(named(rows, "aten::mm").trackId, base + 1010500, base + 1010501, true);
    QCOMPARE(evs.size(), std::size_t(2));  // ProfilerStep#7 (the parent first) and aten::mm
    QCOMPARE(QString::fromStdString(std::string(evs[0].name)), QString("ProfilerStep#7"));
    QCOMPARE(QString::fromStdString(evs[1].argsJson), QString(R"J({"External id":2,"Input Dims":[[4,4],[4,4]]})J"));
    QCOMPARE(QString::fromStdString(std::string(store.event(evs[1].id)->name)), QString("aten::mm"));
    QCOMPARE(scalar(store, "SELECT COUNT(*) FROM pragma_foreign_key_check"), std::int64_t(0));
  }

  void baseTimeAfterEventsIsApplied() {
    QTemporaryDir dir;
    const auto file = writeGzip(dir, "late.json.gz", modernTrace(0, true));
    TraceStore store(pathIn(dir, "t.db"));
    const auto res = importKineto(store, {file});
    const std::int64_t base = 1767189312000000000;
    const auto rows = allEvents(store, res.runIds[0]);
    QCOMPARE(named(rows, "sm90_xmma_gemm").startNs, base + 1030001);
    QCOMPARE(*named(rows, "sm90_xmma_gemm").step, std::int64_t(7));
    QCOMPARE(store.steps(res.runIds[0]).at(0).startNs, base + 1000000);
    QCOMPARE(store.memoryEvents(store.ranks(res.runIds[0]).at(0).id).at(0).tsNs, base + 1300000);
    QCOMPARE(*store.summary(res.runIds[0]).startNs, base + 900000);
  }

  void severalRanksLandAsOneRun() {
    QTemporaryDir dir;
    QDir().mkpath(dir.path() + "/job");
    writeFile(dir, "job/rank0.pt.trace.json", modernTrace(0));
    writeGzip(dir, "job/rank1.pt.trace.json.gz", modernTrace(1));
    writeFile(dir, "job/notes.txt", "not a trace");
    TraceStore store(pathIn(dir, "t.db"));
    const auto files = collectTraceFiles({pathIn(dir, "job")});
    QCOMPARE(files.size(), std::size_t(2));
    const auto res = importKineto(store, files);
    QCOMPARE(res.runIds.size(), std::size_t(1));
    const auto ranks = store.ranks(res.runIds[0]);
    QCOMPARE(ranks.size(), std::size_t(2));
    QCOMPARE(ranks[0].rank, 0);
    QCOMPARE(ranks[1].rank, 1);
    QCOMPARE(QString::fromStdString(std::string(store.run(res.runIds[0])->name)), QString("job"));
    QCOMPARE(store.processGroups(res.runIds[0]).size(), std::size_t(1));
    QCOMPARE(store.summary(res.runIds[0]).eventCount, std::int64_t(24));
  }

  void differentJobsAreRefusedUnlessSeparate() {
    QTemporaryDir dir;
    std::string other = modernTrace(0);
    const std::string from = "\"world_size\": 2";
    other.replace(other.find(from), from.size(), "\"world_size\": 8");
    const auto a = writeFile(dir, "a.json", modernTrace(1));
    const auto b = writeFile(dir, "b.json", other);
    TraceStore store(pathIn(dir, "t.db"));
    try {
      importKineto(store, {a, b});
      QFAIL("different world sizes must be refused");
    } catch (const Error& e) {
      QVERIFY2(QString(e.what()).contains("world size"), e.what());
    }
    QCOMPARE(store.runs().size(), std::size_t(0));
    KinetoImportOptions opt;
    opt.separateRuns = true;
    const auto res = importKineto(store, {a, b}, opt);
    QCOMPARE(res.runIds.size(), std::size_t(2));
    QCOMPARE(store.run(res.runIds[1])->worldSize, 8);
  }

  void oldFormatStringStreamsAndAbsoluteMicros() {
    QTemporaryDir dir;
    const std::string s = R"J({"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 8},
"traceEvents": [
{"ph": "X", "cat": "Operator", "name": "aten::conv2d", "pid": 31, "tid": 31, "ts": 1661203462584767, "dur": 100},
{"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 31, "tid": 31, "ts": 1661203462584770, "dur": 5, "args": {"correlation": 9, "External id": 9}},
{"ph": "X", "cat": "Kernel", "name": "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "pid": 3, "tid": "stream 21 ", "ts": 1661203462584800, "dur": 50, "args": {"stream": 21, "correlation": 9, "External id": 9, "device": 3}},
{"ph": "f", "id": 9, "pid": 3, "tid": "stream 21 ", "ts": 1661203462584800, "cat": "async_cpu_to_gpu", "name": "async_gpu", "bp": "e"},
{"ph": "i", "s": "g", "name": "Iteration Start: PyTorch Profiler", "pid": "Traces", "tid": "Trace PyTorch Profiler", "ts": 1661203462584700}
]})J";
    const auto file = writeFile(dir, "control.json", s);
    TraceStore store(pathIn(dir, "t.db"));
    const auto res = importKineto(store, {file});
    const auto ranks = store.ranks(res.runIds[0]);
    QCOMPARE(ranks[0].rank, 3);
    QVERIFY(!ranks[0].tsFloat);
    QCOMPARE(ranks[0].timeBaseNs, std::int64_t(0));
    QCOMPARE(QString::fromStdString(ranks[0].device), QString("cuda:3"));
    QCOMPARE(res.files[0].launchFlows, std::uint64_t(1));
    QCOMPARE(res.files[0].events, std::uint64_t(4));  // 3 X + 1 global instant
    const auto rows = allEvents(store, res.runIds[0]);
    const auto gpu = std::find_if(rows.begin(), rows.end(), [](const Row& r) { return r.track.kind == TrackKind::GpuStream; });
    QVERIFY(gpu != rows.end());
    QCOMPARE(*gpu->track.stream, std::int64_t(21));
    QCOMPARE(QString::fromStdString(std::string(gpu->track.name)), QString("stream 21"));
    QCOMPARE(gpu->event.startNs, std::int64_t(1661203462584800000));
    QVERIFY(gpu->event.collOp == CollectiveOp::AllReduce);  // from the kernel name (no args)
    QVERIFY(gpu->event.category == Category::Communication);
  }

  void htaGpuRowFlagForCpuOpWithStream() {
    QTemporaryDir dir;
    const std::string s = R"J({"traceEvents": [
{"ph": "X", "cat": "cpu_op", "name": "triton_poi_fused_0", "pid": 1, "tid": 1, "ts": 1.5, "dur": 2, "args": {"stream": 0, "kernel_backend": "triton"}},
{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 5, "dur": 2, "args": {"stream": -1}}
]})J";
    TraceStore store(pathIn(dir, "t.db"));
    importKineto(store, {writeFile(dir, "x.json", s)});
    const auto res = store.runs();
    const auto rows = allEvents(store, res.at(0).id);
    QVERIFY(named(rows, "triton_poi_fused_0").flags & EventFlags::HtaGpuRow);
    QVERIFY(!(named(rows, "aten::mm").flags & EventFlags::HtaGpuRow));
  }

  void bracketsAndQuotesInsideStrings() {
    // The event splitter skips strings by their quotes (64 bytes at a time when no backslash is
    // near): brackets and escaped quotes inside strings must not end an event early.
    QTemporaryDir dir;
    const std::string longName = std::string(70, 'x') + "} ] { [ weird" + std::string(70, 'y');
    // (Plain literals: moc cannot read raw strings that contain escaped quotes.)
    std::string s = "{\"traceEvents\": [";
    for (int i = 0; i < 50; ++i) {
      s += "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"" + longName + std::to_string(i) +
           "\", \"pid\": 1, \"tid\": 1, \"ts\": " + std::to_string(10 * i) +
           ", \"dur\": 5, \"args\": {\"q\": \"a \\\"quoted\\\" ]] {{ value \\\\\", "
           "\"arr\": [[1, 2], {\"k\": \"[}\"}], \"n\": " +
           std::to_string(i) + "}},\n";
    }
    s += "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"last\", \"pid\": 1, \"tid\": 1, \"ts\": 1000, \"dur\": 1}]}";
    TraceStore store(pathIn(dir, "t.db"));
    const auto res = importKineto(store, {writeFile(dir, "brackets.json", s)});
    const auto rows = allEvents(store, res.runIds[0], true);
    QCOMPARE(rows.size(), std::size_t(51));
    QCOMPARE(QString::fromStdString(std::string(rows[7].event.name)), QString::fromStdString(longName + "7"));
    QCOMPARE(QString::fromStdString(rows[7].event.argsJson),
             QString("{\"q\":\"a \\\"quoted\\\" ]] {{ value \\\\\",\"arr\":[[1,2],{\"k\":\"[}\"}],\"n\":7}"));
    QCOMPARE(QString::fromStdString(std::string(rows[50].event.name)), QString("last"));
  }

  void realTraceB200() {
    const auto dir = shardscope::test::sharedTracesDir();
    if (!dir) QSKIP("../shared/traces not present");
    QTemporaryDir tmp;
    TraceStore store(pathIn(tmp, "t.db"));
    const auto res = importKineto(store, {*dir + "/kineto/tracelens_b200_eager_rank0.json.gz"});
    const auto& f = res.files.at(0);
    QCOMPARE(f.rank, 0);
    QCOMPARE(f.worldSize, 8);
    QCOMPARE(f.traceEvents, std::uint64_t(24656));
    QCOMPARE(f.events, std::uint64_t(22355));  // every X event
    QCOMPARE(f.launchFlows, std::uint64_t(931 + 1370));
    QCOMPARE(f.kernels, std::uint64_t(768));
    QCOMPARE(f.ncclKernels, std::uint64_t(1));
    QCOMPARE(f.steps, std::uint64_t(0));
    const RunId run = res.runIds[0];
    QCOMPARE(store.processGroups(run).size(), std::size_t(15));
    QCOMPARE(store.ranks(run).at(0).timeBaseNs, std::int64_t(1767189312000000000));
    const auto rows = allEvents(store, run);
    QCOMPARE(rows.size(), std::size_t(22355));
    QCOMPARE(countIf(rows, [](const Row& r) { return r.event.cat == "python_function"; }), 15230);
    QCOMPARE(countIf(rows, [](const Row& r) { return r.track.kind == TrackKind::Python; }), 15230);
    QCOMPARE(countIf(rows, [](const Row& r) { return r.event.cat == "gpu_memcpy"; }), 161);
    // The NCCL all-gather: 201088 bf16 elements out, group "3" of 8 ranks.
    const Event& ag = named(rows, "ncclDevKernel%");
    QVERIFY(ag.collOp == CollectiveOp::AllGather);
    QCOMPARE(*ag.bytes, std::int64_t(201088 * 2));
    QCOMPARE(*ag.groupSize, 8);
    for (const auto& pg : store.processGroups(run))
      if (pg.id == *ag.processGroupId) QCOMPARE(QString::fromStdString(std::string(pg.name)), QString("3"));
    QCOMPARE(ag.endNs - ag.startNs, std::int64_t(21953));
    QCOMPARE(store.summary(run).collectiveCount, std::int64_t(1));
    // All 768 kernels and 161 memcpys on stream 7 of device 0 (+ 3 gpu_user_annotation rows).
    QCOMPARE(countIf(rows, [](const Row& r) { return r.track.kind == TrackKind::GpuStream && r.track.stream == 7; }),
             768 + 161 + 3);
    QCOMPARE(countIf(rows, [](const Row& r) { return (r.event.flags & EventFlags::HtaGpuRow) != 0; }),
             768 + 161 + 1);  // + the triton cpu_op with stream 0
  }

  void realTracesHtaPair_data() {
    QTest::addColumn<QString>("file");
    QTest::addColumn<int>("rank");
    QTest::addColumn<int>("world");
    QTest::addColumn<int>("xEvents");
    QTest::addColumn<int>("kernels");
    QTest::addColumn<int>("memcpy");
    QTest::addColumn<int>("memset");
    QTest::addColumn<int>("nccl");
    QTest::addColumn<int>("ncclStream");
    QTest::addColumn<QList<qint64>>("stepDurUs");
    QTest::newRow("control") << "control_a100_rank3.json.gz" << 3 << 8 << 74937 << 8568 << 228 << 654 << 60 << 21
                             << QList<qint64>{75473, 76940, 76212, 76727, 78473, 81120};
    QTest::newRow("test") << "test_v100_rank1_compiled.json.gz" << 1 << 2 << 68324 << 9876 << 4856 << 900 << 64 << 15
                          << QList<qint64>{100298, 122149, 166403, 81971, 107230, 166350};
  }

  void realTracesHtaPair() {
    const auto dir = shardscope::test::sharedTracesDir();
    if (!dir) QSKIP("../shared/traces not present");
    QFETCH(QString, file);
    QFETCH(int, rank);
    QFETCH(int, world);
    QFETCH(int, xEvents);
    QFETCH(int, kernels);
    QFETCH(int, memcpy);
    QFETCH(int, memset);
    QFETCH(int, nccl);
    QFETCH(int, ncclStream);
    QFETCH(QList<qint64>, stepDurUs);
    QTemporaryDir tmp;
    TraceStore store(pathIn(tmp, "t.db"));
    const auto res = importKineto(store, {*dir + "/kineto/hta_trace_diff/" + file.toStdString()});
    const auto& f = res.files.at(0);
    QCOMPARE(f.rank, rank);
    QCOMPARE(f.worldSize, world);
    QCOMPARE(f.events, std::uint64_t(xEvents + 2));  // + the two global instants
    QCOMPARE(f.kernels, std::uint64_t(kernels));
    QCOMPARE(f.ncclKernels, std::uint64_t(nccl));
    const RunId run = res.runIds[0];
    QVERIFY(!store.ranks(run).at(0).tsFloat);
    const auto rows = allEvents(store, run);
    QCOMPARE(countIf(rows, [](const Row& r) { return r.event.cat == "gpu_memcpy"; }), memcpy);
    QCOMPARE(countIf(rows, [](const Row& r) { return r.event.cat == "gpu_memset"; }), memset);
    QCOMPARE(countIf(rows, [&](const Row& r) { return r.track.stream == ncclStream && r.event.name.rfind("nccl", 0) == 0; }),
             nccl);
    const auto steps = store.steps(run);
    QCOMPARE(steps.size(), std::size_t(stepDurUs.size()));
    for (int i = 0; i < stepDurUs.size(); ++i) {
      QCOMPARE(steps[static_cast<std::size_t>(i)].step, std::int64_t(1009 + i));
      QCOMPARE(steps[static_cast<std::size_t>(i)].endNs - steps[static_cast<std::size_t>(i)].startNs, stepDurUs[i] * 1000);
    }
    // Every NCCL kernel has a collective op (old traces have no collective args): all-reduce from its
    // name; the SendRecv kernels are the all-to-alls their nccl:all_to_all annotations name, with the
    // size of the annotation's input (DLRM's embedding exchange).
    QCOMPARE(countIf(rows,
                     [](const Row& r) {
                       return r.track.kind == TrackKind::GpuStream && r.event.name.rfind("nccl", 0) == 0 &&
                              (r.event.collOp == CollectiveOp::AllReduce || r.event.collOp == CollectiveOp::AllToAll ||
                               r.event.collOp == CollectiveOp::SendRecv);
                     }),
             nccl);
    // Both traces have 42 nccl:all_to_all annotations; "test" has one more SendRecv kernel, launched
    // outside any annotation, which stays a send/recv.
    QCOMPARE(countIf(rows,
                     [](const Row& r) {
                       return r.track.kind == TrackKind::GpuStream && r.event.collOp == CollectiveOp::AllToAll && r.event.bytes &&
                              *r.event.bytes > 0;
                     }),
             42);
    QCOMPARE(store.summary(run).collectiveCount, std::int64_t(nccl));
    // Kernels get the step of their launch: every step window has kernels, and kernels inside a
    // window's time on the CPU side are tagged with a step.
    const auto tagged = countIf(rows, [](const Row& r) { return r.event.cat == "kernel" && r.event.step; });
    QVERIFY2(tagged > kernels / 2, qPrintable(QString::number(tagged)));
    for (std::int64_t step = 1009; step <= 1014; ++step)
      QVERIFY(countIf(rows, [&](const Row& r) { return r.event.cat == "kernel" && r.event.step == step; }) > 0);
  }
};

QTEST_GUILESS_MAIN(TestKinetoImport)
#include "tst_kineto_import.moc"
