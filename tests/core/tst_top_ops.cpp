// Top kernels and top operators (core/analysis/top_ops): counts, totals, self time of nested
// operators, the device lanes per kind of run, ranking, the "other" row (shares add up to 1) and the
// time per rank, on runs written in the test (TraceStore directly, or small Kineto JSON imported).
#include <QTemporaryDir>
#include <QtTest>

#include <map>
#include <numeric>

#include "core/storage/store_access.h"
#include "core/analysis/top_ops.h"
#include "core/import/kineto_importer.h"
#include "core/storage/trace_store.h"
#include "tests/common/test_support.h"

using namespace shardscope::core;
using shardscope::test::pathIn;
using shardscope::test::writeFile;

namespace {

const TopOpRow* find(const TopOpsTable& t, const std::string& name) {
  for (const auto& r : t.rows)
    if (!r.other && r.name == name) return &r;
  return nullptr;
}

double shareSum(const TopOpsTable& t) {
  double s = 0;
  for (const auto& r : t.rows) s += r.share;
  return s;
}

// A run of our runtime on CPU, `ranks` ranks, 3 steps. Rank r, per step, on its compute lane:
// ProfilerStep annotation (not work), "forward" (cpu_op, computation) 100+10r µs, "backward" 200 µs,
// a "wait all_reduce" span (cat wait, Other: waiting, not work), an instant; on its comm lane an
// "all_reduce grads" collective of 50 µs. Rank 1 also runs "optimizer step" 30 µs in step 2.
RunId runtimeRun(TraceStore& store, int ranks) {
  Run run;
  run.name = "cpu";
  run.source = RunSource::Runtime;
  run.strategy = "ddp";
  run.status = RunStatus::Completed;
  run.worldSize = ranks;
  const RunId runId = store.createRun(run);
  const TimeNs us = 1000, t0 = 1'700'000'000'000'000'000;
  for (int r = 0; r < ranks; ++r) {
    Rank rk;
    rk.runId = runId;
    rk.rank = r;
    const RankId rankId = store.addRank(rk);
    Track cpu;
    cpu.rankId = rankId;
    cpu.kind = TrackKind::CpuThread;
    cpu.name = "compute (main thread)";
    const TrackId cpuId = store.addTrack(cpu);
    Track comm;
    comm.rankId = rankId;
    comm.kind = TrackKind::Comm;
    comm.name = "comm world (gloo)";
    comm.sortIndex = 10;
    const TrackId commId = store.addTrack(comm);
    Transaction tx(shardscope::core::storeDb(store));
    BulkWriter w(store);
    auto span = [&](TrackId track, const std::string& name, const char* cat, Category c, TimeNs a, TimeNs b, int step,
                    CollectiveOp op = CollectiveOp::None, int flags = 0) {
      EventRecord e;
      e.trackId = track;
      e.startNs = a;
      e.endNs = b;
      e.nameId = store.intern(name);
      e.catId = store.intern(cat);
      e.category = c;
      e.step = step;
      e.collOp = op;
      e.flags = flags;
      if (op != CollectiveOp::None) e.groupSize = ranks;
      w.addEvent(e);
    };
    for (int s = 0; s < 3; ++s) {
      const TimeNs b = t0 + s * 1000 * us;
      span(cpuId, "ProfilerStep#" + std::to_string(s), "user_annotation", Category::Other, b, b + 1000 * us, s);
      span(cpuId, "forward", "cpu_op", Category::Computation, b, b + (100 + 10 * r) * us, s);
      span(cpuId, "wait all_reduce grads", "wait", Category::Other, b + 400 * us, b + 450 * us, s);
      span(cpuId, "backward", "cpu_op", Category::Computation, b + 450 * us, b + 650 * us, s);
      span(cpuId, "mark", "cpu_instant_event", Category::Other, b + 700 * us, b + 700 * us, s, CollectiveOp::None,
           EventFlags::Instant);
      span(commId, "all_reduce grads", "collective", Category::Communication, b + 700 * us, b + 750 * us, s,
           CollectiveOp::AllReduce);
      if (r == 1 && s == 2) span(cpuId, "optimizer step", "cpu_op", Category::Computation, b + 800 * us, b + 830 * us, s);
    }
    w.finish();
    tx.commit();
  }
  return runId;
}

// One rank of a GPU job as Kineto JSON (µs). CPU thread: an annotation around
//   aten::linear [0, 100) > aten::t [5, 10), aten::addmm [10, 70) > aten::copy_ [20, 30)
//   aten::linear [120, 160) > aten::addmm [125, 155)
// so the self times are linear 35 + 10, addmm 50 + 30, t 5, copy_ 10 (Σ 140 = the top-level ops).
// GPU: gemm 30 and 20 on stream 7, an NCCL all-reduce 50 on stream 21, a memcpy 5, and a
// gpu_user_annotation of 80 on stream 7 (not work).
std::string gpuRank() {
  auto x = [](const char* cat, const char* name, int pid, int tid, long ts, long dur, const std::string& args = "") {
    return std::string("{\"ph\": \"X\", \"cat\": \"") + cat + "\", \"name\": \"" + name + "\", \"pid\": " + std::to_string(pid) +
           ", \"tid\": " + std::to_string(tid) + ", \"ts\": " + std::to_string(1000 + ts) + ", \"dur\": " + std::to_string(dur) +
           ", \"args\": {" + args + "}}";
  };
  const std::vector<std::string> ev = {
      x("user_annotation", "## forward ##", 1, 1, 0, 200),
      x("cpu_op", "aten::linear", 1, 1, 0, 100),
      x("cpu_op", "aten::t", 1, 1, 5, 5),
      x("cpu_op", "aten::addmm", 1, 1, 10, 60),
      x("cuda_runtime", "cudaLaunchKernel", 1, 1, 12, 2, "\"correlation\": 1"),
      x("cpu_op", "aten::copy_", 1, 1, 20, 10),
      x("cpu_op", "aten::linear", 1, 1, 120, 40),
      x("cpu_op", "aten::addmm", 1, 1, 125, 30),
      x("cuda_runtime", "cudaLaunchKernel", 1, 1, 126, 2, "\"correlation\": 2"),
      x("gpu_user_annotation", "## forward ##", 0, 7, 10, 80, "\"stream\": 7"),
      x("kernel", "gemm", 0, 7, 20, 30, "\"stream\": 7, \"correlation\": 1"),
      x("kernel", "gemm", 0, 7, 130, 20, "\"stream\": 7, \"correlation\": 2"),
      x("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 0, 7, 60, 5, "\"stream\": 7"),
      x("kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 0, 21, 160, 50,
        "\"stream\": 21, \"Collective name\": \"allreduce\", \"In msg nelems\": 1000, \"Out msg nelems\": 1000, "
        "\"Group size\": 2, \"dtype\": \"Float\", \"Process Group Name\": \"0\""),
  };
  std::string s = R"({"distributedInfo": {"rank": 0, "world_size": 2}, "traceEvents": [)";
  for (std::size_t i = 0; i < ev.size(); ++i) s += (i ? ",\n" : "\n") + ev[i];
  return s + "]}";
}

// A CPU-only Kineto trace: operators, no device lanes.
std::string cpuOnlyTrace() {
  return R"({"traceEvents": [
{"ph": "X", "cat": "cpu_op", "name": "aten::conv2d", "pid": 1, "tid": 1, "ts": 100, "dur": 80},
{"ph": "X", "cat": "cpu_op", "name": "aten::convolution", "pid": 1, "tid": 1, "ts": 105, "dur": 70},
{"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 1, "tid": 2, "ts": 150, "dur": 20}
]})";
}

// Five kernel names with distinct totals on two ranks (a GPU stream each) and a known order:
// k5 50 (rank 0) + 5 (rank 1), k4 40, k3 30 x2, k2 20, k1 10 (µs), every one launched once per rank
// except k3 (twice on rank 0).
RunId fiveKernels(TraceStore& store) {
  Run run;
  run.name = "gpu";
  run.source = RunSource::Kineto;
  run.status = RunStatus::Completed;
  run.worldSize = 2;
  const RunId runId = store.createRun(run);
  for (int r = 0; r < 2; ++r) {
    Rank rk;
    rk.runId = runId;
    rk.rank = r;
    const RankId rankId = store.addRank(rk);
    Track s;
    s.rankId = rankId;
    s.kind = TrackKind::GpuStream;
    s.name = "stream 7";
    s.stream = 7;
    const TrackId sid = store.addTrack(s);
    Transaction tx(shardscope::core::storeDb(store));
    BulkWriter w(store);
    TimeNs t = 0;
    auto k = [&](const std::string& name, TimeNs dur) {
      EventRecord e;
      e.trackId = sid;
      e.startNs = t;
      e.endNs = t + dur;
      t += dur + 1000;
      e.nameId = store.intern(name);
      e.catId = store.intern("kernel");
      e.category = Category::Computation;
      w.addEvent(e);
    };
    k("k5", r == 0 ? 50'000 : 5'000);
    k("k4", 20'000);
    k("k3", 15'000);
    if (r == 0) k("k3", 15'000);
    k("k2", 10'000);
    k("k1", 5'000);
    w.finish();
    tx.commit();
  }
  return runId;
}

}  // namespace

class TestTopOps : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  // A CPU run of our runtime: kernels are the compute spans of the CPU thread and the collectives of
  // the communication lane; waits, annotations and instants are not work. The compute spans are
  // cpu_op events too: the operators table.
  void runtimeCpuRun() {
    QTemporaryDir dir;
    TraceStore store(pathIn(dir, "t.db"));
    const RunId runId = runtimeRun(store, 2);
    const TopOps t = computeTopOps(store, runId);
    QCOMPARE(t.runId, runId);
    QCOMPARE(t.ranks, (std::vector<int>{0, 1}));
    QCOMPARE(t.deviceLanes, std::string("CPU compute and communication lanes (no GPU)"));
    const TimeNs us = 1000;
    // backward 6 x 200 = 1200, forward 3 x 100 + 3 x 110 = 630, all_reduce 6 x 50 = 300, optimizer 30.
    QCOMPARE(t.kernels.rows.size(), std::size_t(4));
    QCOMPARE(t.kernels.rows[0].name, std::string("backward"));
    QCOMPARE(t.kernels.rows[1].name, std::string("forward"));
    QCOMPARE(t.kernels.rows[2].name, std::string("all_reduce grads"));
    QCOMPARE(t.kernels.rows[3].name, std::string("optimizer step"));
    const TopOpRow& fwd = t.kernels.rows[1];
    QCOMPARE(fwd.count, std::int64_t(6));
    QCOMPARE(fwd.timeNs, 630 * us);
    QCOMPARE(fwd.totalNs, 630 * us);
    QCOMPARE(fwd.meanNs, 105 * us);
    QCOMPARE(fwd.maxNs, 110 * us);
    QCOMPARE(fwd.perRankNs, (std::vector<TimeNs>{300 * us, 330 * us}));
    QVERIFY(fwd.category == Category::Computation);
    QVERIFY(t.kernels.rows[2].category == Category::Communication);
    QCOMPARE(t.kernels.rows[3].perRankNs, (std::vector<TimeNs>{0, 30 * us}));
    QCOMPARE(t.kernels.timeNs, (1200 + 630 + 300 + 30) * us);
    QCOMPARE(t.kernels.perRankNs, (std::vector<TimeNs>{(600 + 300 + 150) * us, (600 + 330 + 150 + 30) * us}));
    QCOMPARE(t.kernels.count, std::int64_t(6 + 6 + 6 + 1));
    QCOMPARE(t.kernels.distinctNames, std::int64_t(4));
    QVERIFY(!find(t.kernels, "wait all_reduce grads"));
    QVERIFY(!find(t.kernels, "ProfilerStep#0"));
    QVERIFY(!find(t.kernels, "mark"));
    QVERIFY(qAbs(t.kernels.rows[0].share - 1200.0 / 2160.0) < 1e-12);
    QVERIFY(qAbs(shareSum(t.kernels) - 1.0) < 1e-12);
    // Operators: the cpu_op spans (not nested here: self = duration); no collective, no wait.
    QCOMPARE(t.operators.rows.size(), std::size_t(3));
    QCOMPARE(t.operators.rows[0].name, std::string("backward"));
    QCOMPARE(t.operators.timeNs, (1200 + 630 + 30) * us);
    QVERIFY(!find(t.operators, "all_reduce grads"));
    QVERIFY(qAbs(shareSum(t.operators) - 1.0) < 1e-12);
  }

  // An imported GPU trace: kernels are the GPU streams' work (NCCL and memcpy included, the
  // gpu_user_annotation not); operators rank by self time, nested operators subtracted once.
  void gpuTraceAndSelfTime() {
    QTemporaryDir dir;
    TraceStore store(pathIn(dir, "t.db"));
    const auto res = importKineto(store, {writeFile(dir, "rank0.json", gpuRank())});
    const TopOps t = computeTopOps(store, res.runIds.at(0));
    const TimeNs us = 1000;
    QCOMPARE(t.deviceLanes, std::string("GPU streams"));
    QCOMPARE(t.kernels.rows.size(), std::size_t(3));
    QCOMPARE(t.kernels.rows[0].name, std::string("gemm"));
    QCOMPARE(t.kernels.rows[0].count, std::int64_t(2));
    QCOMPARE(t.kernels.rows[0].timeNs, 50 * us);
    QCOMPARE(t.kernels.rows[0].maxNs, 30 * us);
    QCOMPARE(t.kernels.rows[0].meanNs, 25 * us);
    QCOMPARE(t.kernels.rows[1].name, std::string("ncclDevKernel_AllReduce_Sum_f32_RING_LL"));
    QVERIFY(t.kernels.rows[1].category == Category::Communication);
    QCOMPARE(t.kernels.rows[2].name, std::string("Memcpy HtoD (Pageable -> Device)"));
    QVERIFY(t.kernels.rows[2].category == Category::Memory);
    QCOMPARE(t.kernels.timeNs, 105 * us);
    QVERIFY(!find(t.kernels, "## forward ##"));
    QVERIFY(!find(t.kernels, "aten::addmm"));  // a CPU op is not device work when the rank has a GPU
    QVERIFY(qAbs(t.kernels.rows[0].share - 50.0 / 105.0) < 1e-12);
    QVERIFY(qAbs(shareSum(t.kernels) - 1.0) < 1e-12);

    const TopOpsTable& ops = t.operators;
    QCOMPARE(ops.rows.size(), std::size_t(4));
    QCOMPARE(ops.rows[0].name, std::string("aten::addmm"));
    QCOMPARE(ops.rows[0].timeNs, 80 * us);  // (60 - 10) + 30
    QCOMPARE(ops.rows[0].totalNs, 90 * us);
    QCOMPARE(ops.rows[0].maxNs, 50 * us);
    QCOMPARE(ops.rows[0].meanNs, 40 * us);
    QCOMPARE(ops.rows[1].name, std::string("aten::linear"));
    QCOMPARE(ops.rows[1].timeNs, 45 * us);  // (100 - 5 - 60) + (40 - 30): the grandchild is not subtracted
    QCOMPARE(ops.rows[1].totalNs, 140 * us);
    QCOMPARE(ops.rows[1].count, std::int64_t(2));
    QCOMPARE(ops.rows[2].name, std::string("aten::copy_"));
    QCOMPARE(ops.rows[2].timeNs, 10 * us);
    QCOMPARE(ops.rows[3].name, std::string("aten::t"));
    QCOMPARE(ops.rows[3].timeNs, 5 * us);
    // Self times add up to the time the top-level operators span; the annotation is not an operator.
    QCOMPARE(ops.timeNs, 140 * us);
    QVERIFY(!find(ops, "## forward ##"));
    QVERIFY(!find(ops, "cudaLaunchKernel"));
    QVERIFY(qAbs(shareSum(ops) - 1.0) < 1e-12);
  }

  // A CPU-only imported trace has no device lanes (its ops are operators, not kernels).
  void cpuOnlyTraceHasNoKernels() {
    QTemporaryDir dir;
    TraceStore store(pathIn(dir, "t.db"));
    const auto res = importKineto(store, {writeFile(dir, "cpu.json", cpuOnlyTrace())});
    const TopOps t = computeTopOps(store, res.runIds.at(0));
    QCOMPARE(t.deviceLanes, std::string("none"));
    QVERIFY(t.kernels.rows.empty());
    QCOMPARE(t.kernels.timeNs, TimeNs(0));
    QCOMPARE(t.operators.rows.size(), std::size_t(3));
    // conv2d 80 - 70 = 10 self; convolution 70; relu 20 on another thread (not nested in conv2d).
    QCOMPARE(find(t.operators, "aten::convolution")->timeNs, TimeNs(70'000));
    QCOMPARE(find(t.operators, "aten::conv2d")->timeNs, TimeNs(10'000));
    QCOMPARE(find(t.operators, "aten::relu")->timeNs, TimeNs(20'000));
    QCOMPARE(t.operators.rows[0].name, std::string("aten::convolution"));
    QCOMPARE(t.operators.timeNs, TimeNs(100'000));
  }

  // Ranking, the limit and the "other" row; per-rank totals show the imbalance.
  void limitAndOther() {
    QTemporaryDir dir;
    TraceStore store(pathIn(dir, "t.db"));
    const RunId runId = fiveKernels(store);
    const TopOps all = computeTopOps(store, runId, 0);
    QCOMPARE(all.kernels.rows.size(), std::size_t(5));
    std::vector<std::string> order;
    for (const auto& r : all.kernels.rows) order.push_back(r.name);
    // k5 55, k3 45, k4 40, k2 20, k1 10.
    QCOMPARE(order, (std::vector<std::string>{"k5", "k3", "k4", "k2", "k1"}));
    QCOMPARE(all.kernels.rows[0].perRankNs, (std::vector<TimeNs>{50'000, 5'000}));
    QCOMPARE(all.kernels.rows[1].count, std::int64_t(3));
    QCOMPARE(all.kernels.perRankNs,
             (std::vector<TimeNs>{50'000 + 20'000 + 30'000 + 10'000 + 5'000, 5'000 + 20'000 + 15'000 + 10'000 + 5'000}));
    QVERIFY(all.operators.rows.empty());

    const TopOps two = computeTopOps(store, runId, 2);
    QCOMPARE(two.limit, std::size_t(2));
    QCOMPARE(two.kernels.rows.size(), std::size_t(3));
    const TopOpRow& other = two.kernels.rows[2];
    QVERIFY(other.other);
    QCOMPARE(other.name, std::string("other"));
    QCOMPARE(other.names, std::int64_t(3));
    QCOMPARE(other.count, std::int64_t(6));  // k4, k2, k1 on both ranks
    QCOMPARE(other.timeNs, TimeNs(70'000));  // 40 + 20 + 10
    QCOMPARE(other.maxNs, TimeNs(20'000));
    QCOMPARE(other.meanNs, TimeNs(70'000 / 6));
    QCOMPARE(other.perRankNs, (std::vector<TimeNs>{35'000, 35'000}));
    QCOMPARE(two.kernels.timeNs, TimeNs(170'000));
    QCOMPARE(two.kernels.distinctNames, std::int64_t(5));
    QVERIFY(qAbs(other.share - 70.0 / 170.0) < 1e-12);
    QVERIFY(qAbs(shareSum(two.kernels) - 1.0) < 1e-12);
    // Limit at the number of names: no other row.
    QCOMPARE(computeTopOps(store, runId, 5).kernels.rows.size(), std::size_t(5));
    QVERIFY(!computeTopOps(store, runId, 5).kernels.rows.back().other);
  }

  // The JSON document: integer ns, shares as fractions, both tables.
  void json() {
    QTemporaryDir dir;
    TraceStore store(pathIn(dir, "t.db"));
    const RunId runId = fiveKernels(store);
    const JsonValue j = toJson(computeTopOps(store, runId, 2));
    QCOMPARE(*j.find("run")->asInt(), runId.value());
    QCOMPARE(*j.find("device_time_ns")->asInt(), std::int64_t(170'000));
    QCOMPARE(j.find("device_time_per_rank_ns")->items().size(), std::size_t(2));
    const auto& k = j.find("kernels")->items();
    QCOMPARE(k.size(), std::size_t(3));
    QCOMPARE(k[0].find("name")->asString(), std::string("k5"));
    QCOMPARE(*k[0].find("time_ns")->asInt(), std::int64_t(55'000));
    QCOMPARE(*k[0].find("per_rank_ns")->items()[1].asInt(), std::int64_t(5'000));
    QVERIFY(qAbs(k[0].find("share")->asDouble() - 55.0 / 170.0) < 1e-12);
    QVERIFY(k[2].find("other")->asBool());
    QVERIFY(j.find("operators")->isArray());
  }
};

QTEST_GUILESS_MAIN(TestTopOps)
#include "tst_top_ops.moc"
