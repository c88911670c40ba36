// Exporters: Kineto JSON per rank must re-import to the same rows (events, steps, memory, counters,
// flows, ranks, groups); the merged Perfetto JSON must follow the pid/clock/flow/nesting rules of
// traces.md §2.2; failures and cancels leave no file behind.
#include <QTemporaryDir>
#include <QtTest>

#include <chrono>
#include <csignal>
#include <functional>
#include <cstdio>
#include <filesystem>
#include <map>
#include <regex>
#include <set>

#include "core/storage/store_access.h"
#include "core/export/kineto_exporter.h"
#include "core/export/perfetto_exporter.h"
#include "core/util/input_source.h"
#include "core/import/kineto_importer.h"
#include "core/storage/trace_store.h"
#include "core/util/error.h"
#include "core/util/json.h"
#include "tests/common/test_support.h"

#if defined(__linux__)
#include <sys/resource.h>
#endif

using namespace shardscope::core;
using shardscope::test::pathIn;
using shardscope::test::writeFile;
using shardscope::test::writeGzip;

namespace {

namespace fs = std::filesystem;

constexpr std::int64_t kBase = 1767189312000000000;

// "123.456" from integer ns, so the fixture itself never depends on double formatting.
std::string us(std::int64_t ns) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%lld.%03lld", static_cast<long long>(ns / 1000), static_cast<long long>(ns % 1000));
  return buf;
}

// One trace event. cat/name are JSON-escaped here; args and extra are JSON text.
std::string ev(const std::string& ph, const std::string& cat, const std::string& name, std::int64_t pid,
               std::optional<std::int64_t> tid, std::optional<std::int64_t> ts, std::optional<std::int64_t> dur,
               const std::string& args, const std::string& extra = {}) {
  std::string e = "{\"ph\": \"" + ph + "\"";
  if (!cat.empty()) {
    e += ", \"cat\": ";
    appendJsonString(e, cat);
  }
  e += ", \"name\": ";
  appendJsonString(e, name);
  e += ", \"pid\": " + std::to_string(pid);
  if (tid) e += ", \"tid\": " + std::to_string(*tid);
  if (ts) e += ", \"ts\": " + us(*ts);
  if (dur) e += ", \"dur\": " + us(*dur);
  e += extra;
  if (!args.empty()) e += ", \"args\": " + args;
  return e + "}";
}

// One rank of a 2-rank job in the current Kineto format. Times in ns relative to kBase; rank 1 is
// shifted by 3.5 us, uses pid 1001 and device 1.
std::string rankTrace(int r) {
  const std::int64_t o = r * 3500;
  const std::int64_t P = 1000 + r, P2 = 1011 + r, D = r;
  const std::string R = std::to_string(r);
  auto t = [&](std::int64_t ns) { return std::optional<std::int64_t>(ns + o); };
  const std::optional<std::int64_t> none;
  auto flow = [&](const char* ph, int id, std::int64_t pid, std::int64_t tid, std::int64_t ts, const char* cat) {
    return ev(ph, cat, cat, pid, tid, t(ts), none, {},
              ", \"id\": " + std::to_string(id) + (ph[0] == 'f' ? std::string(", \"bp\": \"e\"") : std::string()));
  };
  const std::string coll =
      "\"Collective name\": \"_allgather_base\", \"In msg nelems\": 1024, \"Out msg nelems\": 2048, \"Group size\": 2, "
      "\"dtype\": \"BFloat16\", \"Process Group Name\": \"0\", \"Process Group Description\": \"default_pg\", "
      "\"Process Group Ranks\": \"[0, 1]\"";
  const std::string mem = ", \"Device Id\": " + R + ", \"Device Type\": 1";
  std::vector<std::string> events = {
      ev("M", "", "process_name", P, 0, none, none, "{\"name\": \"python3\"}"),
      ev("M", "", "process_labels", P, 0, none, none, "{\"labels\": \"CPU\"}"),
      ev("M", "", "thread_name", P, P, none, none, "{\"name\": \"thread " + std::to_string(P) + " (python3)\"}"),
      ev("M", "", "thread_name", P, P2, none, none, "{\"name\": \"thread " + std::to_string(P2) + " (pt_autograd_0)\"}"),
      ev("M", "", "process_name", D, 0, none, none, "{\"name\": \"python3\"}"),
      ev("M", "", "process_labels", D, 0, none, none, "{\"labels\": \"GPU " + R + "\"}"),
      ev("M", "", "thread_name", D, 7, none, none, "{\"name\": \"stream 7 \"}"),
      ev("M", "", "thread_name", D, 20, none, none, "{\"name\": \"stream 20 \"}"),
      ev("X", "python_function", "train.py(10): <module>", P, P, t(99500), 1000000,
         "{\"Python id\": 1, \"Python parent id\": 0}"),
      ev("X", "user_annotation", "ProfilerStep#1", P, P, t(100000), 500250, "{\"External id\": 1}"),
      ev("X", "cpu_op", "aten::mm", P, P, t(110125), 50500,
         "{\"External id\": 11, \"Record function id\": 0, \"Input Dims\": [[4, 4], [4, 4]], \"Input type\": [\"c10::BFloat16\", "
         "\"c10::BFloat16\"]}"),
      ev("X", "cuda_runtime", "cudaLaunchKernel", P, P, t(120001), 5002,
         "{\"cbid\": 211, \"correlation\": 101, \"External id\": 11}"),
      ev("X", "kernel", "sm90_xmma_gemm_bf16bf16_bf16f32", D, 7, t(130333), 40667,
         "{\"External id\": 11, \"queued\": 0, \"device\": " + R +
             ", \"context\": 1, \"stream\": 7, \"correlation\": 101, "
             "\"registers per thread\": 128, \"shared memory\": 0, \"grid\": [1, 2, 3], \"block\": [128, 1, 1]}"),
      // Kineto's GPU twin of an annotation: no stream arg (HTA must keep ignoring it after a round trip).
      ev("X", "gpu_user_annotation", "nccl:_all_gather_base", D, 7, t(130332), 40669, "{\"External id\": 11}"),
      flow("s", 101, P, P, 120001, "ac2g"),
      flow("f", 101, D, 7, 130333, "ac2g"),
      flow("s", 7, P, P, 110125, "fwdbwd"),
      ev("i", "cpu_instant_event", "[memory]", P, P, t(150000), none,
         "{\"Total Reserved\": 2097152, \"Total Allocated\": 1048576, \"Bytes\": 1048576, \"Addr\": 140000000" + mem +
             ", \"Ev Idx\": 5}",
         ", \"s\": \"t\""),
      ev("X", "cpu_op", "record_param_comms", P, P, t(200000), 30000, "{\"External id\": 12, " + coll + "}"),
      ev("X", "cuda_driver", "cuLaunchKernelEx", P, P, t(210500), 3250,
         "{\"cbid\": 652, \"correlation\": 102, \"External id\": 12}"),
      ev("X", "kernel", "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", D, 20, t(220000), 60125,
         "{\"External id\": 12, \"device\": " + R + ", \"stream\": 20, \"correlation\": 102, \"In split size\": \"[]\", " + coll +
             "}"),
      flow("s", 102, P, P, 210500, "ac2g"),
      flow("f", 102, D, 20, 220000, "ac2g"),
      ev("C", "", "gpu_util", D, none, t(300000), none, "{\"value\": 87.5}"),
      ev("i", "cpu_instant_event", "[memory]", P, P, t(450000), none,
         "{\"Total Reserved\": 2097152, \"Total Allocated\": 0, \"Bytes\": -1048576, \"Addr\": 140000000" + mem +
             ", \"Ev Idx\": 6}",
         ", \"s\": \"t\""),
      ev("X", "user_annotation", "ProfilerStep#2", P, P, t(600500), 400000, "{\"External id\": 20}"),
      ev("X", "cpu_op", "autograd::engine::evaluate_function: MmBackward0", P, P2, t(650000), 20000,
         "{\"External id\": 13, \"Sequence number\": 5}"),
      flow("f", 7, P, P2, 650000, "fwdbwd"),
      ev("X", "cpu_op", "aten::add_", P, P, t(700000), 30000, "{\"External id\": 21}"),
      ev("X", "cuda_runtime", "cudaLaunchKernel", P, P, t(705000), 4000,
         "{\"cbid\": 211, \"correlation\": 103, \"External id\": 21}"),
      ev("X", "kernel", "void at::native::vectorized_elementwise_kernel<4>", D, 7, t(720000), 10001,
         "{\"External id\": 21, \"device\": " + R + ", \"stream\": 7, \"correlation\": 103}"),
      flow("s", 103, P, P, 705000, "ac2g"),
      flow("f", 103, D, 7, 720000, "ac2g"),
      ev("C", "", "gpu_util", D, none, t(700000), none, "{\"value\": 12.25}"),
      // overlap_b starts inside overlap_a and ends after it: not nested.
      ev("X", "cpu_op", "overlap_a", P, P, t(800000), 50000, "{\"External id\": 30}"),
      ev("X", "cpu_op", "overlap_b", P, P, t(820000), 50000, "{\"External id\": 31}"),
      ev("i", "cpu_instant_event", "marker \"quoted\"", P, P, t(900000), none, "{\"note\": \"x\"}", ", \"s\": \"t\""),
      ev("X", "gpu_memcpy", "Memcpy DtoH (Device -> Pinned)", D, 7, t(900000), 4000,
         "{\"device\": " + R +
             ", \"context\": 1, \"stream\": 7, \"correlation\": 104, \"bytes\": 4096, \"memory bandwidth (GB/s)\": 1.024}"),
      ev("X", "cpu_op", "no_args_op", P, P, t(950000), 1000, {}),
  };
  std::string s =
      "{\"schemaVersion\": 1, \"deviceProperties\": [{\"id\": 0, \"name\": \"NVIDIA H100\", \"totalGlobalMem\": 85000000000, "
      "\"numSms\": 132}, {\"id\": 1, \"name\": \"NVIDIA H100\", \"totalGlobalMem\": 85000000000, \"numSms\": 132}],\n"
      "\"cupti_version\": 24, \"record_shapes\": 1,\n"
      "\"distributedInfo\": {\"backend\": \"nccl\", \"rank\": " +
      R +
      ", \"world_size\": 2, \"pg_count\": 3, \"pg_config\": ["
      "{\"pg_name\": \"0\", \"pg_desc\": \"default_pg\", \"backend_config\": \"cuda:nccl\", \"pg_size\": 2, \"ranks\": [0, 1]}, "
      "{\"pg_name\": \"1\", \"pg_desc\": \"undefined\", \"backend_config\": \"cpu:gloo,cuda:gloo\", \"pg_size\": 2, \"ranks\": "
      "[0, 1]}], "
      "\"nccl_version\": \"2.21.5\"},\n"
      "\"displayTimeUnit\": \"ms\",\n"
      "\"baseTimeNanoseconds\": " +
      std::to_string(kBase) + ",\n\"traceEvents\": [\n";
  for (std::size_t i = 0; i < events.size(); ++i) s += (i ? ",\n" : "") + events[i];
  return s + "\n],\n\"traceName\": \"rank" + R + ".json\"}";
}

std::vector<std::string> writeFixture(const QTemporaryDir& dir) {
  return {writeFile(dir, "in_rank0.json", rankTrace(0)), writeGzip(dir, "in_rank1.json.gz", rankTrace(1))};
}

RunId importRun(TraceStore& store, const std::vector<std::string>& files, bool keepArgs = true) {
  KinetoImportOptions opt;
  opt.keepArgs = keepArgs;
  const auto res = importKineto(store, files, opt);
  if (res.runIds.size() != 1) throw Error("expected one run");
  return res.runIds[0];
}

std::string opt(const std::optional<std::int64_t>& v) { return v ? std::to_string(*v) : std::string("-"); }

// Everything a round trip must keep, one line per row, sorted: a mismatch shows the first differing row.
struct Snapshot {
  QStringList events, tracks, steps, memory, counters, flows, ranks, groups;
  QString run;
};

Snapshot snapshot(TraceStore& store, RunId runId) {
  Snapshot s;
  const RunSummary sum = store.summary(runId);
  std::map<RankId, int> rankOf;
  for (const auto& r : sum.ranks) {
    rankOf[r.id] = r.rank;
    s.ranks << QString("rank %1").arg(r.rank);
  }
  s.run = QString("world %1 ranks %2").arg(sum.run.worldSize).arg(sum.ranks.size());
  std::map<Id, std::string> pgName;
  for (const auto& pg : store.processGroups(runId)) {
    pgName[pg.id] = pg.name;
    s.groups << QString::fromStdString(pg.name + " | " + pg.description + " | " + pg.backend + " | " + std::to_string(pg.size) +
                                       " | " + pg.ranksJson);
  }
  for (const auto& ts : sum.tracks) {
    const Track& t = ts.track;
    const int r = rankOf[t.rankId];
    s.tracks << QString::fromStdString("r" + std::to_string(r) + " " + std::string(toString(t.kind)) + " '" + t.name + "' pid " +
                                       opt(t.pid) + " tid " + opt(t.tid) + " dev " +
                                       (t.device ? std::to_string(*t.device) : "-") + " stream " + opt(t.stream));
    if (t.kind == TrackKind::Counter) {
      for (const auto& c : store.counterSamples(t.id))
        s.counters << QString::fromStdString("r" + std::to_string(r) + " '" + t.name + "' " + std::to_string(c.tsNs) + " " +
                                             formatDouble(c.value));
      continue;
    }
    const std::string lane = t.kind == TrackKind::GpuStream ? "s" + opt(t.stream) : "t" + opt(t.tid);
    store.forEachEvent(
        t.id,
        [&](const Event& e) {
          s.events << QString::fromStdString(
              "r" + std::to_string(r) + " " + std::string(toString(t.kind)) + " " + lane + " " + std::to_string(e.startNs) + " " +
              std::to_string(e.endNs) + " '" + std::string(e.name) + "' cat=" + std::string(e.cat) +
              " op=" + std::to_string(static_cast<int>(e.collOp)) + " bytes=" + opt(e.bytes) + " dtype=" + std::string(e.dtype) +
              " gs=" + (e.groupSize ? std::to_string(*e.groupSize) : "-") +
              " pg=" + (e.processGroupId ? pgName[*e.processGroupId] : "-") + " corr=" + opt(e.correlation) +
              " ext=" + opt(e.externalId) + " flags=" + std::to_string(e.flags) + " step=" + opt(e.step) +
              " category=" + std::to_string(static_cast<int>(e.category)));
        },
        false);
  }
  std::map<TrackId, const Track*> trackById;
  for (const auto& ts : sum.tracks) trackById[ts.track.id] = &ts.track;
  for (const auto& r : sum.ranks) {
    for (const auto& m : store.memoryEvents(r.id))
      s.memory << QString("r%1 %2 type %3 dev %4 addr %5 bytes %6 alloc %7 res %8 oom %9")
                      .arg(r.rank)
                      .arg(m.tsNs)
                      .arg(m.deviceType)
                      .arg(m.deviceId)
                      .arg(m.addr)
                      .arg(m.bytes)
                      .arg(m.totalAllocated)
                      .arg(m.totalReserved)
                      .arg(m.outOfMemory);
    for (const auto& f : store.flows(r.id)) {
      const Track* t = trackById[f.trackId];
      s.flows << QString::fromStdString("r" + std::to_string(r.rank) + " id " + std::to_string(f.flowId) + " " +
                                        std::string(1, f.phase) + " " + std::to_string(f.tsNs) + " " + store.string(f.catId) +
                                        "/" + store.string(f.nameId) + (f.bindEnclosing ? " bp=e" : "") + " on " +
                                        (t ? t->name : "?") + " tid " + (t ? opt(t->tid) : "?"));
    }
  }
  for (const auto& st : store.steps(runId))
    s.steps << QString("r%1 step %2 %3 %4").arg(rankOf[st.rankId]).arg(st.step).arg(st.startNs).arg(st.endNs);
  for (QStringList* l : {&s.events, &s.tracks, &s.steps, &s.memory, &s.counters, &s.flows, &s.ranks, &s.groups}) l->sort();
  return s;
}

void compareSnapshots(const Snapshot& a, const Snapshot& b) {
  QCOMPARE(b.run, a.run);
  QCOMPARE(b.ranks, a.ranks);
  QCOMPARE(b.groups, a.groups);
  QCOMPARE(b.tracks, a.tracks);
  QCOMPARE(b.events, a.events);
  QCOMPARE(b.steps, a.steps);
  QCOMPARE(b.memory, a.memory);
  QCOMPARE(b.counters, a.counters);
  QCOMPARE(b.flows, a.flows);
}

std::string readText(const std::string& path) {
  auto in = openInput(path);
  return readAll(*in, std::size_t(1) << 31);
}

std::vector<std::string> listDir(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::int64_t ns(const JsonValue& v) {
  std::int64_t n = 0;
  bool f = false;
  if (!v.isNumber() || !parseMicrosToNs(v.asString(), n, f)) throw Error("bad time " + v.asString());
  return n;
}

bool isThreeDecimals(const std::string& raw) {
  static const std::regex re(R"(^-?\d+\.\d{3}$)");
  return std::regex_match(raw, re);
}

// X slices per (pid, tid) must nest strictly: sorted by start then longest first, each slice ends no
// later than the innermost slice still open. Returns the first violation, empty when all nest.
QString nestingViolation(const JsonValue& events) {
  std::map<std::pair<std::int64_t, std::int64_t>, std::vector<std::pair<std::int64_t, std::int64_t>>> threads;
  for (const auto& e : events.items()) {
    const JsonValue* ph = e.find("ph");
    if (!ph || ph->asString() != "X") continue;
    const std::int64_t start = ns(*e.find("ts"));
    threads[{*e.find("pid")->asInt(), *e.find("tid")->asInt()}].emplace_back(start, start + ns(*e.find("dur")));
  }
  for (auto& [key, v] : threads) {
    std::sort(v.begin(), v.end(),
              [](const auto& a, const auto& b) { return a.first != b.first ? a.first < b.first : a.second > b.second; });
    std::vector<std::int64_t> open;
    for (const auto& [s, e] : v) {
      while (!open.empty() && open.back() <= s) open.pop_back();
      if (!open.empty() && open.back() < e)
        return QString("pid %1 tid %2: [%3, %4] overlaps a slice ending at %5")
            .arg(key.first)
            .arg(key.second)
            .arg(s)
            .arg(e)
            .arg(open.back());
      open.push_back(e);
    }
  }
  return {};
}

// Every event of a run with its track, through the store API (the storage layout is not ours to know).
void forAllEvents(TraceStore& s, RunId runId, const std::function<void(const Track&, const Event&)>& fn, bool withArgs = false) {
  for (const auto& ts : s.summary(runId).tracks)
    if (ts.track.kind != TrackKind::Counter)
      s.forEachEvent(
          ts.track.id, [&](const Event& e) { fn(ts.track, e); }, withArgs);
}

}  // namespace

class TestExport : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void kinetoRoundTripKeepsEveryRow() {
    QTemporaryDir dir;
    TraceStore store(pathIn(dir, "a.db"));
    const RunId run = importRun(store, writeFixture(dir));
    const RunSummary sum = store.summary(run);
    QCOMPARE(sum.ranks.size(), std::size_t(2));

    std::vector<Progress> progress;
    ExportOptions opt;
    opt.progress = [&](const Progress& p) { progress.push_back(p); };
    const std::string out = pathIn(dir, "out");
    const ExportResult res = exportKineto(store, run, out, opt);
    QCOMPARE(res.files.size(), std::size_t(2));
    QCOMPARE(QString::fromStdString(fs::path(res.files[0]).filename().string()), QString("rank0.pt.trace.json.gz"));
    QCOMPARE(QString::fromStdString(fs::path(res.files[1]).filename().string()), QString("rank1.pt.trace.json.gz"));
    QCOMPARE(res.events, static_cast<std::uint64_t>(sum.eventCount));
    QCOMPARE(res.bytes, static_cast<std::uint64_t>(fs::file_size(res.files[0]) + fs::file_size(res.files[1])));
    // Only the two traces: no temporary file left next to them.
    QCOMPARE(listDir(out), (std::vector<std::string>{"rank0.pt.trace.json.gz", "rank1.pt.trace.json.gz"}));
    QVERIFY(!progress.empty());
    QCOMPARE(progress.back().done, static_cast<std::uint64_t>(sum.eventCount));
    QCOMPARE(progress.back().total, static_cast<std::uint64_t>(sum.eventCount));
    QCOMPARE(QString::fromStdString(progress.back().unit), QString("events"));

    TraceStore again(pathIn(dir, "b.db"));
    const RunId run2 = importRun(again, res.files);
    const Snapshot a = snapshot(store, run);
    const Snapshot b = snapshot(again, run2);
    // Guard against a vacuous comparison: the fixture's rows are all there.
    QCOMPARE(a.events.size(), 2 * 19);
    QCOMPARE(a.steps.size(), 4);
    QCOMPARE(a.memory.size(), 4);
    QCOMPARE(a.flows.size(), 4);
    QVERIFY(a.counters.size() >= 2 * 2 + 2 * 4);
    QCOMPARE(a.groups.size(), 2);
    compareSnapshots(a, b);
    QCOMPARE(again.ranks(run2).at(0).timeBaseNs, kBase);
    // Exported as .json when gzip is off, and readable the same way.
    ExportOptions plain;
    plain.gzip = false;
    const auto res2 = exportKineto(store, run, pathIn(dir, "plain"), plain);
    QVERIFY(QString::fromStdString(res2.files[0]).endsWith("rank0.pt.trace.json"));
    QCOMPARE(readText(res2.files[0]).substr(0, 1), std::string("{"));
    TraceStore third(pathIn(dir, "c.db"));
    compareSnapshots(a, snapshot(third, importRun(third, res2.files)));
  }

  void kinetoRoundTripFromColumnsOnly() {
    // Imported without args: the exporter must rebuild correlation, External id, stream/device and the
    // collective fields from the columns, and the re-import must find the same values.
    QTemporaryDir dir;
    TraceStore store(pathIn(dir, "a.db"));
    const RunId run = importRun(store, writeFixture(dir), false);
    int withArgs = 0;
    forAllEvents(
        store, run, [&](const Track&, const Event& e) { withArgs += !e.argsJson.empty(); }, true);
    QCOMPARE(withArgs, 0);
    const auto res = exportKineto(store, run, pathIn(dir, "out"));
    TraceStore again(pathIn(dir, "b.db"));
    const RunId run2 = importRun(again, res.files);
    compareSnapshots(snapshot(store, run), snapshot(again, run2));

    const JsonValue doc = parseJsonFile(res.files[1]);
    int kernels = 0, cpuWithStream = 0, nccl = 0, annotations = 0;
    for (const auto& e : doc.find("traceEvents")->items()) {
      const JsonValue* cat = e.find("cat");
      const JsonValue* args = e.find("args");
      if (!cat) continue;
      if (cat->asString() == "kernel") {
        ++kernels;
        QVERIFY(args);
        QCOMPARE(args->find("stream")->asInt().value_or(-1) == 7 || args->find("stream")->asInt().value_or(-1) == 20, true);
        QCOMPARE(args->find("device")->asInt().value_or(-1), std::int64_t(1));
        QVERIFY(args->find("correlation"));
        if (e.find("name")->asString().rfind("nccl", 0) == 0) {
          ++nccl;
          QCOMPARE(QString::fromStdString(args->find("Collective name")->asString()), QString("_allgather_base"));
          QCOMPARE(args->find("Out msg nelems")->asInt().value_or(-1), std::int64_t(2048));
          QCOMPARE(args->find("In msg nelems")->asInt().value_or(-1), std::int64_t(1024));
          QCOMPARE(args->find("Group size")->asInt().value_or(-1), std::int64_t(2));
          QCOMPARE(QString::fromStdString(args->find("dtype")->asString()), QString("BFloat16"));
          QCOMPARE(QString::fromStdString(args->find("Process Group Name")->asString()), QString("0"));
        }
      } else if (cat->asString() == "gpu_user_annotation") {
        ++annotations;
        QVERIFY(args && args->find("device") && !args->find("stream"));
        QCOMPARE(args->find("External id")->asInt().value_or(-1), std::int64_t(11));
      } else if (cat->asString() == "cpu_op" || cat->asString() == "cuda_runtime" || cat->asString() == "cuda_driver" ||
                 cat->asString() == "user_annotation") {
        if (args && args->find("stream")) ++cpuWithStream;
      }
    }
    QCOMPARE(kernels, 3);
    QCOMPARE(nccl, 1);
    QCOMPARE(annotations, 1);
    QCOMPARE(cpuWithStream, 0);
  }

  void kinetoFileLayout() {
    QTemporaryDir dir;
    TraceStore store(pathIn(dir, "a.db"));
    const RunId run = importRun(store, writeFixture(dir));
    const auto res = exportKineto(store, run, pathIn(dir, "out"));
    for (int r = 0; r < 2; ++r) {
      const std::string text = readText(res.files[static_cast<std::size_t>(r)]);
      // HTA: the first match of "rank":\s+(\d+) in the file is the rank; without the space it is 0.
      std::smatch m;
      QVERIFY(std::regex_search(text, m, std::regex(R"("rank":\s+(\d+))")));
      QCOMPARE(QString::fromStdString(m[1].str()), QString::number(r));
      QVERIFY(text.find("\"rank\": " + std::to_string(r)) != std::string::npos);
      QVERIFY(text.find("\"rank\":" + std::to_string(r)) == std::string::npos);

      const JsonValue doc = parseJson(text, "export");
      QStringList keys;
      for (const auto& [k, v] : doc.members()) keys << QString::fromStdString(k);
      QCOMPARE(keys.first(), QString("schemaVersion"));
      QCOMPARE(keys.last(), QString("traceName"));
      for (const char* k : {"deviceProperties", "distributedInfo", "displayTimeUnit", "baseTimeNanoseconds", "traceEvents",
                            "cupti_version", "record_shapes"})
        QVERIFY2(keys.contains(k), k);
      QVERIFY(keys.indexOf("baseTimeNanoseconds") < keys.indexOf("traceEvents"));
      QCOMPARE(doc.find("schemaVersion")->asInt().value_or(0), std::int64_t(1));
      QCOMPARE(doc.find("deviceProperties")->items().size(), std::size_t(2));
      QCOMPARE(QString::fromStdString(doc.find("displayTimeUnit")->asString()), QString("ms"));
      QCOMPARE(doc.find("baseTimeNanoseconds")->asInt().value_or(0), kBase);
      const JsonValue* di = doc.find("distributedInfo");
      QCOMPARE(di->find("rank")->asInt().value_or(-1), std::int64_t(r));
      QCOMPARE(di->find("world_size")->asInt().value_or(-1), std::int64_t(2));
      QCOMPARE(di->find("pg_count")->asInt().value_or(-1), std::int64_t(3));  // as the source said
      QCOMPARE(QString::fromStdString(di->find("backend")->asString()), QString("nccl"));
      QCOMPARE(QString::fromStdString(di->find("nccl_version")->asString()), QString("2.21.5"));
      const auto& pgs = di->find("pg_config")->items();
      QCOMPARE(pgs.size(), std::size_t(2));
      QCOMPARE(QString::fromStdString(pgs[0].find("pg_name")->asString()), QString("0"));
      QCOMPARE(QString::fromStdString(pgs[0].find("pg_desc")->asString()), QString("default_pg"));
      QCOMPARE(QString::fromStdString(pgs[0].find("backend_config")->asString()), QString("cuda:nccl"));
      QCOMPARE(pgs[0].find("pg_size")->asInt().value_or(0), std::int64_t(2));
      QCOMPARE(QString::fromStdString(pgs[0].find("ranks")->dump()), QString("[0,1]"));

      const std::int64_t hostPid = 1000 + r;
      std::map<std::string, int> byPh;
      std::set<std::int64_t> sIds, fIds;
      int memory = 0, counters = 0, threadNames = 0;
      for (const auto& e : doc.find("traceEvents")->items()) {
        const std::string ph = e.find("ph")->asString();
        ++byPh[ph];
        QVERIFY(e.find("pid")->isNumber());
        if (const JsonValue* tid = e.find("tid")) QVERIFY(tid->isNumber());
        if (const JsonValue* ts = e.find("ts")) QVERIFY2(isThreeDecimals(ts->asString()), ts->asString().c_str());
        if (const JsonValue* dur = e.find("dur")) QVERIFY2(isThreeDecimals(dur->asString()), dur->asString().c_str());
        const std::string name = e.find("name") ? e.find("name")->asString() : "";
        const std::string cat = e.find("cat") ? e.find("cat")->asString() : "";
        if (ph == "X" && e.find("pid")->asInt() == hostPid) {
          // No numeric stream arg on CPU rows (HTA would count them as GPU work).
          if (const JsonValue* args = e.find("args")) QVERIFY(!args->find("stream"));
        }
        if (ph == "X" && cat == "kernel") QCOMPARE(e.find("pid")->asInt().value_or(-1), std::int64_t(r));
        if (cat == "ac2g" && ph == "s") {
          sIds.insert(*e.find("id")->asInt());
          QCOMPARE(e.find("pid")->asInt().value_or(-1), hostPid);
        }
        if (cat == "ac2g" && ph == "f") {
          fIds.insert(*e.find("id")->asInt());
          QCOMPARE(QString::fromStdString(e.find("bp")->asString()), QString("e"));
          QCOMPARE(e.find("pid")->asInt().value_or(-1), std::int64_t(r));
        }
        if (name == "[memory]") {
          ++memory;
          QCOMPARE(QString::fromStdString(e.find("s")->asString()), QString("t"));
          QCOMPARE(QString::fromStdString(cat), QString("cpu_instant_event"));
          const JsonValue* args = e.find("args");
          for (const char* k : {"Total Reserved", "Total Allocated", "Bytes", "Addr", "Device Id", "Device Type"})
            QVERIFY2(args->find(k), k);
          QCOMPARE(args->find("Device Id")->asInt().value_or(-1), std::int64_t(r));
        }
        if (ph == "C") {
          ++counters;
          QCOMPARE(QString::fromStdString(name), QString("gpu_util"));  // memory counters come back via [memory]
        }
        if (ph == "M" && name == "thread_name") ++threadNames;
        if (ph == "X" && name == "aten::mm")
          QCOMPARE(ns(*e.find("ts")), std::int64_t(110125 + r * 3500));  // relative to the same base
      }
      QCOMPARE(sIds, (std::set<std::int64_t>{101, 102, 103}));
      QCOMPARE(fIds, sIds);
      QCOMPARE(memory, 2);
      QCOMPARE(counters, 2);
      QCOMPARE(threadNames, 4);  // main thread (shared with python), autograd thread, streams 7 and 20
      QCOMPARE(byPh["X"], 18);
      QCOMPARE(byPh["i"], 3);
      QCOMPARE(byPh["s"], 4);  // 3 ac2g + fwdbwd
      QCOMPARE(byPh["f"], 4);
    }
  }

  void perfettoMergedTrace() {
    QTemporaryDir dir;
    TraceStore store(pathIn(dir, "a.db"));
    const RunId run = importRun(store, writeFixture(dir));
    const std::string out = pathIn(dir, "merged.json.gz");
    const auto res = exportPerfetto(store, run, out);
    QCOMPARE(res.files, std::vector<std::string>{out});
    QCOMPARE(res.events, static_cast<std::uint64_t>(store.summary(run).eventCount));
    QVERIFY(fs::exists(out));
    for (const auto& name : listDir(dir.path().toStdString())) QVERIFY2(name.find(".tmp") == std::string::npos, name.c_str());
    {
      // gzip magic: the .gz name means compressed.
      std::FILE* f = std::fopen(out.c_str(), "rb");
      unsigned char magic[2] = {0, 0};
      QCOMPARE(std::fread(magic, 1, 2, f), std::size_t(2));
      std::fclose(f);
      QCOMPARE(int(magic[0]), 0x1f);
      QCOMPARE(int(magic[1]), 0x8b);
    }
    const JsonValue doc = parseJsonFile(out);
    QCOMPARE(QString::fromStdString(doc.find("displayTimeUnit")->asString()), QString("ms"));
    const JsonValue& events = *doc.find("traceEvents");

    std::map<std::int64_t, std::string> processNames;
    std::map<std::int64_t, std::int64_t> sortIndex;
    std::map<std::pair<std::int64_t, std::int64_t>, std::string> threadNames;
    std::map<int, std::set<std::int64_t>> flowIdsByRank;
    std::int64_t minTs = std::numeric_limits<std::int64_t>::max();
    bool zeroText = false;
    int x = 0, inst = 0;
    for (const auto& e : events.items()) {
      const std::string ph = e.find("ph")->asString();
      const JsonValue* pid = e.find("pid");
      QVERIFY(pid && pid->isNumber() && pid->asInt());
      const std::int64_t p = *pid->asInt();
      const int r = static_cast<int>(p / 100);
      QVERIFY(r == 0 || r == 1);
      QVERIFY2(p % 100 == 0 || p % 100 == 1 + r, std::to_string(p).c_str());  // host r*100, GPU r*100+1+d (d = r)
      if (const JsonValue* tid = e.find("tid")) QVERIFY(tid->isNumber() && tid->asInt());
      const std::string name = e.find("name") ? e.find("name")->asString() : "";
      const std::string cat = e.find("cat") ? e.find("cat")->asString() : "";
      if (const JsonValue* ts = e.find("ts")) {
        QVERIFY2(isThreeDecimals(ts->asString()), ts->asString().c_str());
        minTs = std::min(minTs, ns(*ts));
        zeroText |= ts->asString() == "0.000";
      }
      if (ph == "M" && name == "process_name") processNames[p] = e.find("args")->find("name")->asString();
      if (ph == "M" && name == "process_sort_index") sortIndex[p] = *e.find("args")->find("sort_index")->asInt();
      if (ph == "M" && name == "thread_name")
        threadNames[{p, *e.find("tid")->asInt()}] = e.find("args")->find("name")->asString();
      if (ph == "s" || ph == "f") flowIdsByRank[r].insert(*e.find("id")->asInt());
      if (ph == "X") ++x;
      if (ph == "i") ++inst;
      if (ph == "X" && cat == "kernel") QCOMPARE(p, std::int64_t(r * 100 + 1 + r));
      if (ph == "X" && (cat == "cpu_op" || cat == "cuda_runtime")) QCOMPARE(p, std::int64_t(r * 100));
      if (ph == "X" && name == "overlap_b") {
        QCOMPARE(p, std::int64_t(r * 100));
        QVERIFY(*e.find("tid")->asInt() >= 1000000);
        QVERIFY(QString::fromStdString(threadNames[{p, *e.find("tid")->asInt()}]).endsWith("(overlap 1)"));
      }
      if (ph == "X" && name == "overlap_a") QCOMPARE(e.find("tid")->asInt().value_or(-1), std::int64_t(1000 + r));
    }
    QCOMPARE(x + inst, static_cast<int>(store.summary(run).eventCount));
    QCOMPARE(minTs, std::int64_t(0));
    QVERIFY(zeroText);
    QCOMPARE(processNames, (std::map<std::int64_t, std::string>{
                               {0, "rank 0 host"}, {1, "rank 0 GPU 0"}, {100, "rank 1 host"}, {102, "rank 1 GPU 1"}}));
    for (const auto& [p, idx] : sortIndex) QCOMPARE(idx, p);
    QCOMPARE(sortIndex.size(), std::size_t(4));
    QCOMPARE(QString::fromStdString(threadNames[{1, 7}]), QString("stream 7"));
    QCOMPARE(QString::fromStdString(threadNames[{102, 20}]), QString("stream 20"));
    QCOMPARE(QString::fromStdString(threadNames[{100, 1001}]), QString("thread 1001 (python3)"));
    // Flow ids: disjoint across ranks, rank 1's launch 101 is (1 << 40) | 101.
    QCOMPARE(flowIdsByRank.size(), std::size_t(2));
    for (std::int64_t id : flowIdsByRank[0]) QVERIFY(!flowIdsByRank[1].count(id));
    QVERIFY(flowIdsByRank[1].count((std::int64_t{1} << 40) | 101));
    QVERIFY(flowIdsByRank[0].count(101));
    QCOMPARE(nestingViolation(events), QString());
    // The checker does catch what the exporter fixed: the same slices with overlap_b kept on its thread.
    JsonValue bad = JsonValue::array();
    for (const auto& e : events.items()) {
      JsonValue c = e;
      if (e.find("name") && e.find("name")->asString() == "overlap_b") c.set("tid", JsonValue::number(std::int64_t(1000)));
      bad.push(std::move(c));
    }
    QVERIFY(!nestingViolation(bad).isEmpty());
    // Relative times agree with the source: rank 1 runs 3.5 µs behind rank 0.
    std::map<std::pair<std::int64_t, std::string>, std::int64_t> startOf;
    for (const auto& e : events.items())
      if (e.find("ph")->asString() == "X") startOf[{*e.find("pid")->asInt(), e.find("name")->asString()}] = ns(*e.find("ts"));
    const std::int64_t mm0 = startOf[{0, "aten::mm"}], mm1 = startOf[{100, "aten::mm"}];
    const std::int64_t gemm1 = startOf[{102, "sm90_xmma_gemm_bf16bf16_bf16f32"}];
    QCOMPARE(mm0, std::int64_t(110125 - 99500));
    QCOMPARE(mm1, std::int64_t(110125 + 3500 - 99500));
    QCOMPARE(gemm1, std::int64_t(130333 + 3500 - 99500));

    // Uncompressed when the name does not end in .gz.
    const std::string plain = pathIn(dir, "merged.json");
    exportPerfetto(store, run, plain);
    QCOMPARE(readText(plain).substr(0, 1), std::string("{"));
    QCOMPARE(parseJsonFile(plain).find("traceEvents")->items().size(), events.items().size());
  }

  void runtimeRunGetsStepsAndIds() {
    // A run recorded by our runtime: no ProfilerStep slices and no args, tracks without pid/tid.
    QTemporaryDir dir;
    TraceStore store(pathIn(dir, "a.db"));
    Run run;
    run.name = "runtime";
    run.source = RunSource::Runtime;
    run.status = RunStatus::Completed;
    run.worldSize = 1;
    const RunId runId = store.createRun(run);
    Rank rk;
    rk.runId = runId;
    rk.rank = 0;
    const RankId rankId = store.addRank(rk);
    ProcessGroup pg;
    pg.runId = runId;
    pg.name = "0";
    pg.backend = "cuda:nccl";
    pg.size = 1;
    pg.ranksJson = "[0]";
    const Id pgId = store.addProcessGroup(pg);
    Track cpu;
    cpu.rankId = rankId;
    cpu.kind = TrackKind::CpuThread;
    cpu.name = "main";
    const TrackId cpuId = store.addTrack(cpu);
    Track gpu;
    gpu.rankId = rankId;
    gpu.kind = TrackKind::GpuStream;
    gpu.name = "stream 3";
    gpu.device = 0;
    gpu.stream = 3;
    const TrackId gpuId = store.addTrack(gpu);
    Track comm;
    comm.rankId = rankId;
    comm.kind = TrackKind::Comm;
    comm.name = "comm world";
    const TrackId commId = store.addTrack(comm);
    const TimeNs t0 = 1'700'000'000'123'456'789;
    {
      Transaction tx(shardscope::core::storeDb(store));
      BulkWriter w(store);
      EventRecord e;
      e.trackId = cpuId;
      e.startNs = t0;
      e.endNs = t0 + 5000;
      e.nameId = store.intern("cudaLaunchKernel");
      e.catId = store.intern("cuda_runtime");
      e.correlation = 9;
      e.externalId = 4;
      w.addEvent(e);
      EventRecord k;
      k.trackId = gpuId;
      k.startNs = t0 + 7001;
      k.endNs = t0 + 9001;
      k.nameId = store.intern("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL");
      k.correlation = 9;
      k.collOp = CollectiveOp::ReduceScatter;
      k.flags = EventFlags::CollectiveMeta | EventFlags::HtaGpuRow;
      k.bytes = 4096;
      k.dtypeId = store.intern("BFloat16");
      k.groupSize = 1;
      k.processGroupId = pgId;
      k.category = Category::Communication;
      w.addEvent(k);
      // Our runtime's collective span: its own timing args, the collective fields in the columns.
      EventRecord c;
      c.trackId = commId;
      c.startNs = t0 + 10000;
      c.endNs = t0 + 12000;
      c.nameId = store.intern("all_gather param layers.0");
      c.catId = store.intern("collective");
      c.collOp = CollectiveOp::AllGather;
      c.bytes = 8192;
      c.dtypeId = store.intern("Float");
      c.groupSize = 2;
      c.processGroupId = pgId;
      c.category = Category::Communication;
      w.addEvent(c, R"({"issue_ns":11,"queue_ns":22,"wait_ns":33})");
      w.finish();
      tx.commit();
    }
    store.addStep(Step{rankId, 5, t0 - 1000, t0 + 20000});

    const auto res = exportKineto(store, runId, pathIn(dir, "out"));
    const std::string text = readText(res.files.at(0));
    std::smatch m;
    QVERIFY(std::regex_search(text, m, std::regex(R"("baseTimeNanoseconds": (\d+))")));
    const std::int64_t base = std::stoll(m[1].str());
    // No base stored: floored to Kineto's 7,889,238 s period.
    QCOMPARE(base % (std::int64_t(7889238) * 1000000000), std::int64_t(0));
    QVERIFY(base <= t0 - 1000 && t0 - 1000 - base < std::int64_t(7889238) * 1000000000);

    {
      // The runtime collective keeps its own args and gains Kineto's collective fields.
      const JsonValue doc = parseJsonFile(res.files.at(0));
      int collectives = 0;
      for (const auto& e : doc.find("traceEvents")->items()) {
        const JsonValue* name = e.find("name");
        if (!name || name->asString() != "all_gather param layers.0") continue;
        ++collectives;
        const JsonValue* args = e.find("args");
        QVERIFY(args);
        QCOMPARE(args->find("wait_ns")->asInt().value_or(-1), std::int64_t(33));
        for (const char* k : {"Collective name", "In msg nelems", "Out msg nelems", "Group size", "dtype"})
          QVERIFY2(args->find(k), k);
        QCOMPARE(QString::fromStdString(args->find("Collective name")->asString()), QString("_allgather_base"));
        QCOMPARE(args->find("In msg nelems")->asInt().value_or(-1), std::int64_t(1024));
        QCOMPARE(args->find("Out msg nelems")->asInt().value_or(-1), std::int64_t(2048));
        QCOMPARE(args->find("Group size")->asInt().value_or(-1), std::int64_t(2));
        QCOMPARE(QString::fromStdString(args->find("dtype")->asString()), QString("Float"));
      }
      QCOMPARE(collectives, 1);
    }
    TraceStore again(pathIn(dir, "b.db"));
    const RunId run2 = importRun(again, res.files);
    const auto steps = again.steps(run2);
    QCOMPARE(steps.size(), std::size_t(1));
    QCOMPARE(steps[0].step, std::int64_t(5));
    QCOMPARE(steps[0].startNs, t0 - 1000);
    QCOMPARE(steps[0].endNs, t0 + 20000);
    std::map<Id, std::string> pgName;
    for (const auto& g : again.processGroups(run2)) pgName[g.id] = g.name;
    int kernels = 0, launches = 0, annotations = 0;
    forAllEvents(again, run2, [&](const Track& t, const Event& e) {
      if (e.name == "cudaLaunchKernel") {
        ++launches;
        QCOMPARE(QString::fromStdString(std::string(e.cat)), QString("cuda_runtime"));
        QVERIFY(t.kind == TrackKind::CpuThread);
        QCOMPARE(e.externalId.value_or(-1), std::int64_t(4));
        QCOMPARE(e.correlation.value_or(-1), std::int64_t(9));
        QCOMPARE(e.step.value_or(-1), std::int64_t(5));
        QCOMPARE(e.startNs, t0);
        QCOMPARE(e.endNs, t0 + 5000);
        return;
      }
      if (e.name == "ProfilerStep#5") {
        // Written by the exporter from the steps table, on the main thread.
        ++annotations;
        QCOMPARE(QString::fromStdString(std::string(e.cat)), QString("user_annotation"));
        QVERIFY(t.kind == TrackKind::CpuThread);
        QCOMPARE(e.startNs, t0 - 1000);
        QCOMPARE(e.endNs, t0 + 20000);
        return;
      }
      if (e.name == "all_gather param layers.0") {
        // Re-imported from the merged args: the same collective columns.
        QVERIFY(e.collOp == CollectiveOp::AllGather);
        QCOMPARE(e.bytes.value_or(-1), std::int64_t(8192));
        QCOMPARE(e.groupSize.value_or(-1), 2);
        return;
      }
      ++kernels;
      QVERIFY(t.kind == TrackKind::GpuStream);
      QCOMPARE(t.stream.value_or(-1), std::int64_t(3));
      QCOMPARE(t.device.value_or(-1), 0);
      QCOMPARE(QString::fromStdString(std::string(e.cat)), QString("kernel"));  // derived for an empty cat
      QCOMPARE(e.startNs, t0 + 7001);
      QCOMPARE(e.endNs, t0 + 9001);
      QCOMPARE(e.correlation.value_or(-1), std::int64_t(9));
      QVERIFY(e.collOp == CollectiveOp::ReduceScatter);
      QCOMPARE(e.bytes.value_or(-1), std::int64_t(4096));
      QCOMPARE(e.groupSize.value_or(-1), 1);
      QCOMPARE(QString::fromStdString(std::string(e.dtype)), QString("BFloat16"));
      QCOMPARE(QString::fromStdString(pgName[e.processGroupId.value_or(-1)]), QString("0"));
      QCOMPARE(e.step.value_or(-1), std::int64_t(5));  // via its launch's correlation
      QCOMPARE(e.flags & (EventFlags::CollectiveMeta | EventFlags::HtaGpuRow),
               EventFlags::CollectiveMeta | EventFlags::HtaGpuRow);
    });
    QCOMPARE(kernels, 1);
    QCOMPARE(launches, 1);
    QCOMPARE(annotations, 1);
  }

  void controlTraceRoundTrip() {
    const auto shared = shardscope::test::sharedTracesDir();
    if (!shared) QSKIP("../shared/traces not present");
    const std::string src = *shared + "/kineto/hta_trace_diff/control_a100_rank3.json.gz";
    if (!fs::exists(src)) QSKIP("control_a100_rank3.json.gz not present");
    QTemporaryDir dir;
    TraceStore store(pathIn(dir, "a.db"));
    const RunId run = importRun(store, {src});
    const RunSummary sum = store.summary(run);

    const auto t0 = std::chrono::steady_clock::now();
    const auto res = exportKineto(store, run, pathIn(dir, "out"));
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    QCOMPARE(res.events, static_cast<std::uint64_t>(sum.eventCount));
    qInfo("exportKineto: %lld events, %.1f MB gz in %.3f s = %.0f events/s", static_cast<long long>(sum.eventCount),
          double(res.bytes) / 1e6, secs, double(sum.eventCount) / secs);
    const auto t1 = std::chrono::steady_clock::now();
    const auto pres = exportPerfetto(store, run, pathIn(dir, "merged.json.gz"));
    const double psecs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    qInfo("exportPerfetto: %.1f MB gz in %.3f s = %.0f events/s", double(pres.bytes) / 1e6, psecs,
          double(sum.eventCount) / psecs);

    const std::string head = readText(res.files.at(0)).substr(0, 4096);
    QVERIFY(head.find("\"rank\": 3") != std::string::npos);
    std::smatch m;
    QVERIFY(std::regex_search(head, m, std::regex(R"("baseTimeNanoseconds": (\d+))")));
    QCOMPARE(std::stoll(m[1].str()) % (std::int64_t(7889238) * 1000000000), std::int64_t(0));

    TraceStore again(pathIn(dir, "b.db"));
    const RunId run2 = importRun(again, res.files);
    const RunSummary sum2 = again.summary(run2);
    QCOMPARE(sum2.eventCount, sum.eventCount);
    QCOMPARE(sum2.ranks.at(0).rank, 3);
    QCOMPARE(sum2.run.worldSize, 8);
    auto kernels = [](TraceStore& s, RunId r) {
      std::int64_t n = 0;
      forAllEvents(s, r, [&](const Track& t, const Event& e) { n += t.kind == TrackKind::GpuStream && e.cat == "kernel"; });
      return n;
    };
    QCOMPARE(kernels(again, run2), kernels(store, run));
    QCOMPARE(kernels(store, run), std::int64_t(8568));
    auto steps = [](TraceStore& s, RunId r) {
      QStringList l;
      for (const auto& st : s.steps(r)) l << QString("%1 %2 %3").arg(st.step).arg(st.startNs).arg(st.endNs);
      return l;
    };
    QCOMPARE(steps(again, run2), steps(store, run));
    QCOMPARE(steps(store, run).size(), 6);
    auto tuples = [](TraceStore& s, RunId r) {
      std::vector<std::tuple<std::int64_t, std::int64_t, std::string>> v;
      for (const auto& ts : s.summary(r).tracks)
        s.forEachEvent(
            ts.track.id, [&](const Event& e) { v.emplace_back(e.startNs, e.endNs, e.name); }, false);
      std::sort(v.begin(), v.end());
      return v;
    };
    const auto a = tuples(store, run);
    const auto b = tuples(again, run2);
    QCOMPARE(a.size(), b.size());
    QVERIFY(a == b);
    // Category, correlation, step, collective and External id columns come back the same as well.
    auto columns = [](TraceStore& s, RunId r) {
      std::vector<std::int64_t> sums(5, 0);
      forAllEvents(s, r, [&](const Track&, const Event& e) {
        sums[0] += static_cast<int>(e.category);
        sums[1] += e.correlation.value_or(0) % 1000003;
        sums[2] += e.step.value_or(0);
        sums[3] += static_cast<int>(e.collOp);
        sums[4] += e.externalId.has_value();
      });
      return sums;
    };
    QCOMPARE(columns(again, run2), columns(store, run));
  }

  void unwritablePathFailsCleanly() {
    QTemporaryDir dir;
    TraceStore store(pathIn(dir, "a.db"));
    const RunId run = importRun(store, writeFixture(dir));
    const std::string blocker = writeFile(dir, "plainfile", "x");
    const auto before = listDir(dir.path().toStdString());

    const std::string outDir = blocker + "/traces";
    try {
      exportKineto(store, run, outDir);
      QFAIL("exportKineto into a path under a regular file succeeded");
    } catch (const Error& e) {
      QVERIFY2(std::string(e.what()).find(outDir) != std::string::npos, e.what());
    }
    const std::string outFile = blocker + "/merged.json";
    try {
      exportPerfetto(store, run, outFile);
      QFAIL("exportPerfetto into a path under a regular file succeeded");
    } catch (const Error& e) {
      QVERIFY2(std::string(e.what()).rfind(outFile + ": ", 0) == 0, e.what());
    }
    QVERIFY(!fs::exists(outFile));
    QCOMPARE(readText(blocker), std::string("x"));
    QCOMPARE(listDir(dir.path().toStdString()), before);
    // A missing run is an error too, not an empty file.
    QVERIFY_THROWS_EXCEPTION(Error, exportPerfetto(store, RunId{run.value() + 100}, pathIn(dir, "none.json")));
    QVERIFY(!fs::exists(pathIn(dir, "none.json")));
  }

  void writeErrorLeavesNoFile() {
#if defined(__linux__)
    // A file-size limit makes write() fail the way a full disk does (EFBIG instead of ENOSPC).
    QTemporaryDir dir;
    TraceStore store(pathIn(dir, "a.db"));
    const RunId run = importRun(store, writeFixture(dir));
    const std::string out = pathIn(dir, "out");
    fs::create_directories(out);
    struct rlimit old {};
    QCOMPARE(getrlimit(RLIMIT_FSIZE, &old), 0);
    auto oldHandler = std::signal(SIGXFSZ, SIG_IGN);
    struct rlimit small = old;
    small.rlim_cur = 4096;
    QCOMPARE(setrlimit(RLIMIT_FSIZE, &small), 0);
    std::string kinetoError, perfettoError;
    ExportOptions plain;
    plain.gzip = false;
    try {
      exportKineto(store, run, out, plain);
    } catch (const Error& e) {
      kinetoError = e.what();
    }
    try {
      exportPerfetto(store, run, out + "/merged.json");
    } catch (const Error& e) {
      perfettoError = e.what();
    }
    setrlimit(RLIMIT_FSIZE, &old);
    std::signal(SIGXFSZ, oldHandler);
    QVERIFY2(kinetoError.rfind(out + "/rank0.pt.trace.json: write failed", 0) == 0, kinetoError.c_str());
    QVERIFY2(perfettoError.rfind(out + "/merged.json: write failed", 0) == 0, perfettoError.c_str());
    QVERIFY(listDir(out).empty());
#else
    QSKIP("needs RLIMIT_FSIZE");
#endif
  }

  void cancelLeavesNoFiles() {
    QTemporaryDir dir;
    TraceStore store(pathIn(dir, "a.db"));
    const RunId run = importRun(store, writeFixture(dir));
    CancelToken cancel;
    cancel.cancel();
    ExportOptions opt;
    opt.cancel = &cancel;
    const std::string out = pathIn(dir, "out");
    QVERIFY_THROWS_EXCEPTION(Cancelled, exportKineto(store, run, out, opt));
    QVERIFY(listDir(out).empty());
    QVERIFY_THROWS_EXCEPTION(Cancelled, exportPerfetto(store, run, pathIn(dir, "m.json.gz"), opt));
    QVERIFY(!fs::exists(pathIn(dir, "m.json.gz")));
    // Cancelled from the progress callback after rank 0 was written: its temporary file goes too.
    CancelToken late;
    int calls = 0;
    ExportOptions lateOpt;
    lateOpt.cancel = &late;
    lateOpt.progress = [&](const Progress& p) {
      ++calls;
      if (p.done > 0) late.cancel();
    };
    QVERIFY_THROWS_EXCEPTION(Cancelled, exportKineto(store, run, out, lateOpt));
    QVERIFY(calls >= 1);
    QVERIFY(listDir(out).empty());
    QVERIFY_THROWS_EXCEPTION(Cancelled, exportPerfetto(store, run, pathIn(dir, "m.json"), lateOpt));
    QVERIFY(!fs::exists(pathIn(dir, "m.json")));
    // Nothing hidden either.
    for (const auto& name : listDir(dir.path().toStdString())) QVERIFY2(name.find(".tmp") == std::string::npos, name.c_str());
  }
};

QTEST_GUILESS_MAIN(TestExport)
#include "tst_export.moc"
