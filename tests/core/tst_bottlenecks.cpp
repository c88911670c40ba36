// All-gather bottlenecks: ranking by exposed time, the unit that issued them, and the rules that fire.
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <tuple>

#include "core/analysis/bottlenecks.h"
#include "core/analysis/stragglers.h"
#include "core/storage/store_access.h"
#include "core/import/kineto_importer.h"
#include "tests/common/test_support.h"
#include "tests/ui/ui_fixture.h"

using namespace shardscope::core;
using shardscope::test::pathIn;
using shardscope::test::writeFile;

namespace {

// One rank of a 2-rank job: ProfilerStep#1 from `stepStart`, a gemm from the step start until
// `arrival`, then a large all-gather (64M bf16 elements: no small-message rule) launched early (no
// issued-late rule) that starts at `arrival` and ends at 400 µs with every rank's. All times in µs on
// this rank's clock, which runs `clock` µs ahead.
std::string skewRank(int rank, long clock, long stepStart, long arrival) {
  auto t = [&](long us) { return std::to_string(clock + us); };
  return "{\"distributedInfo\": {\"rank\": " + std::to_string(rank) +
         ", \"world_size\": 2, \"pg_config\": [{\"pg_name\": \"0\", \"pg_size\": 2, \"ranks\": [0, 1]}]}, "
         "\"traceEvents\": [\n"
         "{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#1\", \"pid\": 1, \"tid\": 1, \"ts\": " +
         t(stepStart) +
         ", \"dur\": 1000},\n"
         "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": 1, \"tid\": 1, \"ts\": " +
         t(stepStart + 1) +
         ", \"dur\": 1, \"args\": {\"correlation\": 10}},\n"
         "{\"ph\": \"X\", \"cat\": \"cuda_driver\", \"name\": \"cuLaunchKernelEx\", \"pid\": 1, \"tid\": 1, \"ts\": " +
         t(stepStart + 5) +
         ", \"dur\": 1, \"args\": {\"correlation\": 11}},\n"
         "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"gemm\", \"pid\": 0, \"tid\": 7, \"ts\": " +
         t(stepStart + 2) + ", \"dur\": " + std::to_string(arrival - stepStart - 2) +
         ", \"args\": {\"stream\": 7, \"correlation\": 10}},\n"
         "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"ncclDevKernel_AllGather_RING_LL\", \"pid\": 0, \"tid\": 21, \"ts\": " +
         t(arrival) + ", \"dur\": " + std::to_string(400 - arrival) +
         ", \"args\": {\"stream\": 21, \"correlation\": 11, \"Collective name\": \"_allgather_base\", \"In msg nelems\": "
         "33554432, \"Out msg nelems\": 67108864, \"Group size\": 2, \"dtype\": \"BFloat16\", \"Process Group Name\": \"0\"}}\n"
         "]}";
}

// One rank of an 8-rank job: a gemm, a reduce-scatter half hidden behind it, then an all-gather
// queued behind the reduce-scatter on the same stream.
std::string queuedAllGatherTrace() {
  return R"J({"distributedInfo": {"rank": 1, "world_size": 8, "pg_config": [{"pg_name": "0", "pg_size": 8, "ranks": [0,1,2,3,4,5,6,7]}]}, "traceEvents": [
{"ph": "X", "cat": "user_annotation", "name": "FSDP unit layers.3", "pid": 1, "tid": 1, "ts": 0, "dur": 200},
{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10, "dur": 1, "args": {"correlation": 10}},
{"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernelEx", "pid": 1, "tid": 1, "ts": 12, "dur": 1, "args": {"correlation": 11}},
{"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernelEx", "pid": 1, "tid": 1, "ts": 14, "dur": 1, "args": {"correlation": 12}},
{"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 0, "dur": 40, "args": {"stream": 7, "correlation": 10}},
{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL", "pid": 0, "tid": 21, "ts": 20, "dur": 40, "args": {"stream": 21, "correlation": 11, "Collective name": "_reduce_scatter_base", "In msg nelems": 1000000, "Out msg nelems": 125000, "Group size": 8, "dtype": "BFloat16", "Process Group Name": "0"}},
{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllGather_RING_LL", "pid": 0, "tid": 21, "ts": 61, "dur": 40, "args": {"stream": 21, "correlation": 12, "Collective name": "_allgather_base", "In msg nelems": 250000, "Out msg nelems": 2000000, "Group size": 8, "dtype": "BFloat16", "Process Group Name": "0"}}
]})J";
}

bool mentions(const std::vector<std::string>& list, const char* what) {
  for (const auto& s : list)
    if (s.find(what) != std::string::npos) return true;
  return false;
}

// Three steps of one rank of an 8-rank job, each: a gemm, then two all-gathers of the same size
// (the first exposed 30/20/10 µs by step, the second 5 µs) and a reduce-scatter exposed 40 µs in
// step 2 only. `groupSize` 1 makes every collective local.
std::string threeSteps(int groupSize) {
  std::string s = R"J({"distributedInfo": {"rank": 0, "world_size": 8}, "traceEvents": [)J";
  int corr = 1;
  const long exposedFirst[] = {30, 20, 10};
  for (int k = 0; k < 3; ++k) {
    const long t0 = 1000L * k;
    auto ev = [&](const std::string& cat, const std::string& name, long ts, long dur, int tid, const std::string& args) {
      s += "{\"ph\": \"X\", \"cat\": \"" + cat + "\", \"name\": \"" + name + "\", \"pid\": " + (cat == "kernel" ? "0" : "1") +
           ", \"tid\": " + std::to_string(tid) + ", \"ts\": " + std::to_string(ts) + ", \"dur\": " + std::to_string(dur) +
           ", \"args\": {" + args + "}},\n";
    };
    auto coll = [&](const std::string& kernel, const std::string& name, long ts, long dur) {
      const int c = corr++;
      ev("cuda_driver", "cuLaunchKernelEx", t0 + 1, 1, 1, "\"correlation\": " + std::to_string(c));
      ev("kernel", kernel, ts, dur, 21,
         "\"stream\": 21, \"correlation\": " + std::to_string(c) + ", \"Collective name\": \"" + name +
             "\", \"In msg nelems\": 1000, \"Out msg nelems\": 8000, \"Group size\": " + std::to_string(groupSize) +
             ", \"dtype\": \"Float\", \"Process Group Name\": \"0\"");
    };
    ev("user_annotation", "ProfilerStep#" + std::to_string(k + 1), t0, 900, 1, "");
    const int g = corr++;
    ev("cuda_runtime", "cudaLaunchKernel", t0 + 1, 1, 1, "\"correlation\": " + std::to_string(g));
    ev("kernel", "gemm", t0 + 2, 100, 7, "\"stream\": 7, \"correlation\": " + std::to_string(g));
    coll("ncclDevKernel_AllGather_RING_LL", "_allgather_base", t0 + 102, exposedFirst[k]);
    coll("ncclDevKernel_AllGather_RING_LL", "_allgather_base", t0 + 300, 5);
    if (k == 1) coll("ncclDevKernel_ReduceScatter_Sum_f32_RING_LL", "_reduce_scatter_base", t0 + 400, 40);
  }
  s.resize(s.size() - 2);  // the last ",\n"
  return s + "]}";
}

}  // namespace

class TestBottlenecks : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  // The same collective in every step is one row: its instances, total and mean exposed time, and
  // its worst step; rows rank by the total.
  void groupedAcrossSteps() {
    QTemporaryDir dir;
    TraceStore store(pathIn(dir, "t.db"));
    const auto res = importKineto(store, {writeFile(dir, "g.json", threeSteps(8))});
    const auto list = findCollectiveBottlenecks(store, res.runIds.at(0));
    // Nothing names these NCCL kernels: grouped by operation, size and process group. The two
    // all-gathers of every step (same size) are one group of 6 instances, 75 µs, the costliest.
    QCOMPARE(list.size(), std::size_t(2));
    QVERIFY(list[0].op == CollectiveOp::AllGather);
    QCOMPARE(list[0].targetFrom, std::string("size"));
    QCOMPARE(list[0].instances, std::int64_t(6));
    QCOMPARE(list[0].stepsSeen, std::int64_t(3));
    QCOMPARE(list[0].ranks, 1);
    QCOMPARE(list[0].totalExposedNs, TimeNs(75'000));
    QCOMPARE(list[0].meanExposedNs, TimeNs(12'500));
    QCOMPARE(list[0].exposedNs, TimeNs(30'000));           // the worst instance...
    QCOMPARE(list[0].step.value_or(-1), std::int64_t(1));  // ...in step 1
    QVERIFY(list[0].cause == ExposedCause::NothingToOverlap);
    QVERIFY(mentions(list[0].suggestions, "prefetch"));
    QVERIFY(list[1].op == CollectiveOp::ReduceScatter);
    QCOMPARE(list[1].instances, std::int64_t(1));
    QCOMPARE(list[1].totalExposedNs, TimeNs(40'000));
    // The small-message note names the operation it is about.
    QVERIFY2(mentions(list[1].reasons, "where reduce_scatter reaches"), list[1].reasons.back().c_str());
    QVERIFY(!mentions(list[1].reasons, "where all_gather reaches"));
  }

  // What the user can change: the annotation open at each collective's launch (a module, an FSDP
  // unit); instances of every rank and step are summed per target, the costliest first.
  void groupedByTargetAcrossRanks() {
    QTemporaryDir dir;
    auto rankTrace = [](int rank) {
      std::string s =
          "{\"distributedInfo\": {\"rank\": " + std::to_string(rank) +
          ", \"world_size\": 2, \"pg_config\": [{\"pg_name\": \"0\", \"pg_size\": 2, \"ranks\": [0, 1]}]}, \"traceEvents\": [";
      int corr = 1;
      for (int k = 0; k < 2; ++k) {
        const long t0 = 1000L * k;
        auto ev = [&](const std::string& cat, const std::string& name, long ts, long dur, int tid, const std::string& args) {
          s += "{\"ph\": \"X\", \"cat\": \"" + cat + "\", \"name\": \"" + name + "\", \"pid\": " + (cat == "kernel" ? "0" : "1") +
               ", \"tid\": " + std::to_string(tid) + ", \"ts\": " + std::to_string(ts) + ", \"dur\": " + std::to_string(dur) +
               ", \"args\": {" + args + "}},";
        };
        ev("user_annotation", "ProfilerStep#" + std::to_string(k + 1), t0, 900, 1, "");
        // Unit A launches an all-gather exposed 30 µs, unit B one exposed 10 µs (same size).
        for (auto [unit, at, exposed] : {std::tuple{"FSDP::layers.0", 10L, 30L}, std::tuple{"FSDP::layers.1", 300L, 10L}}) {
          ev("user_annotation", unit, t0 + at, 100, 1, "");
          const int c = corr++;
          ev("cuda_driver", "cuLaunchKernelEx", t0 + at + 5, 1, 1, "\"correlation\": " + std::to_string(c));
          ev("kernel", "ncclDevKernel_AllGather_RING_LL", t0 + at + 10, exposed, 21,
             "\"stream\": 21, \"correlation\": " + std::to_string(c) +
                 ", \"Collective name\": \"_allgather_base\", \"In msg nelems\": 1000, \"Out msg nelems\": 2000, \"Group size\": "
                 "2, "
                 "\"dtype\": \"Float\", \"Process Group Name\": \"0\"");
        }
      }
      s.pop_back();
      return s + "]}";
    };
    TraceStore store(pathIn(dir, "t.db"));
    const auto res = importKineto(store, {writeFile(dir, "r0.json", rankTrace(0)), writeFile(dir, "r1.json", rankTrace(1))});
    const auto list = findCollectiveBottlenecks(store, res.runIds.at(0));
    QCOMPARE(list.size(), std::size_t(2));
    QCOMPARE(list[0].target, std::string("FSDP::layers.0"));
    QCOMPARE(list[0].targetFrom, std::string("annotation"));
    QCOMPARE(list[0].instances, std::int64_t(4));  // 2 ranks x 2 steps
    QCOMPARE(list[0].ranks, 2);
    QCOMPARE(list[0].stepsSeen, std::int64_t(2));
    QCOMPARE(list[0].totalExposedNs, TimeNs(120'000));
    QCOMPARE(list[1].target, std::string("FSDP::layers.1"));
    QCOMPARE(list[1].totalExposedNs, TimeNs(40'000));
  }

  // A runtime names the parameter or bucket in the collective itself ("all_reduce grad bucket 0"):
  // that name is the target, summed over both ranks and every counted step; and an operation other than
  // all-gather / reduce-scatter (here an all-to-all of an NCCL trace) is a bottleneck too.
  void namedTargetsAndEveryOperation() {
    {
      QTemporaryDir dir;
      TraceStore store(pathIn(dir, "n.db"));
      shardscope::test::RunSpec spec;
      spec.commName = "all_reduce grad bucket 0";
      spec.memorySamples = 0;
      const RunId run = shardscope::test::writeRun(store, spec);
      const auto list = findCollectiveBottlenecks(store, run);
      QCOMPARE(list.size(), std::size_t(1));
      QVERIFY(list[0].op == CollectiveOp::AllReduce);
      QCOMPARE(list[0].target, std::string("grad bucket 0"));
      QCOMPARE(list[0].targetFrom, std::string("name"));
      QCOMPARE(list[0].ranks, 2);
      // Every counted step of both ranks: the runtime run's warm-up step is left out (CountedSteps),
      // as Compare and the step figures leave it out.
      QCOMPARE(list[0].instances, std::int64_t(2 * (spec.steps - 1)));
      QVERIFY(list[0].step.value_or(0) >= 1);
      QVERIFY(mentions(list[0].suggestions, "bucket_cap_mb"));
    }
    QTemporaryDir dir;
    const std::string s =
        R"J({"distributedInfo": {"rank": 0, "world_size": 2, "pg_config": [{"pg_name": "0", "pg_size": 2, "ranks": [0,1]}]}, "traceEvents": [
{"ph": "X", "cat": "user_annotation", "name": "## sparse_data_dist ##", "pid": 1, "tid": 1, "ts": 0, "dur": 300},
{"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernelEx", "pid": 1, "tid": 1, "ts": 5, "dur": 1, "args": {"correlation": 1}},
{"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernelEx", "pid": 1, "tid": 1, "ts": 150, "dur": 1, "args": {"correlation": 2}},
{"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 0, "dur": 10, "args": {"stream": 7}},
{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_SendRecv", "pid": 0, "tid": 21, "ts": 20, "dur": 80, "args": {"stream": 21, "correlation": 1, "Collective name": "all_to_all", "In msg nelems": 1000, "Out msg nelems": 1000, "Group size": 2, "dtype": "Float", "Process Group Name": "0"}},
{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_SendRecv", "pid": 0, "tid": 21, "ts": 200, "dur": 70, "args": {"stream": 21, "correlation": 2, "Collective name": "all_to_all", "In msg nelems": 1000, "Out msg nelems": 1000, "Group size": 2, "dtype": "Float", "Process Group Name": "0"}}
]})J";
    TraceStore store(pathIn(dir, "t.db"));
    const auto res = importKineto(store, {writeFile(dir, "a.json", s)});
    const auto list = findCollectiveBottlenecks(store, res.runIds.at(0));
    QCOMPARE(list.size(), std::size_t(1));
    QVERIFY(list[0].op == CollectiveOp::AllToAll);
    QCOMPARE(list[0].target, std::string("## sparse_data_dist ##"));
    QCOMPARE(list[0].totalExposedNs, TimeNs(150'000));
    QVERIFY(mentions(list[0].suggestions, "pipeline it with the dense"));
  }

  // Collectives among one rank move nothing: no bottleneck, no suggestion.
  void localCollectivesAreNoBottleneck() {
    QTemporaryDir dir;
    TraceStore store(pathIn(dir, "t.db"));
    const auto res = importKineto(store, {writeFile(dir, "l.json", threeSteps(1))});
    QVERIFY(findCollectiveBottlenecks(store, res.runIds.at(0)).empty());
  }

  void allGatherQueuedBehindReduceScatter() {
    QTemporaryDir dir;
    const std::string s = queuedAllGatherTrace();
    TraceStore store(pathIn(dir, "t.db"));
    const auto res = importKineto(store, {writeFile(dir, "b.json", s)});
    const auto list = findCollectiveBottlenecks(store, res.runIds.at(0));
    QCOMPARE(list.size(), std::size_t(2));
    const auto& ag = list[0];
    QVERIFY(ag.op == CollectiveOp::AllGather);
    QCOMPARE(ag.rank, 1);
    QCOMPARE(ag.exposedNs, TimeNs(40'000));
    QCOMPARE(*ag.bytes, std::int64_t(4'000'000));
    QCOMPARE(*ag.elements, std::int64_t(2'000'000));
    QCOMPARE(QString::fromStdString(ag.processGroup), QString("0"));
    QCOMPARE(QString::fromStdString(ag.unit), QString("FSDP unit layers.3"));
    QCOMPARE(ag.target, std::string("FSDP unit layers.3"));
    QVERIFY(ag.cause == ExposedCause::Queued);
    QCOMPARE(ag.reasons.size(), std::size_t(2));  // queued (100 %), and the small-message note
    QVERIFY(QString::fromStdString(ag.reasons[0]).startsWith("100 %"));
    QVERIFY(QString::fromStdString(ag.reasons[1]).contains("below the ~33M elements"));
    QVERIFY(QString::fromStdString(ag.suggestions[0]).contains("BACKWARD_PRE"));
    const auto& rs = list[1];
    QVERIFY(rs.op == CollectiveOp::ReduceScatter);
    QCOMPARE(rs.exposedNs, TimeNs(20'000));  // half hidden behind the gemm
    QVERIFY(rs.cause == ExposedCause::NothingToOverlap);
    QVERIFY(mentions(rs.reasons, "nothing was computing"));
  }

  // Advice from the run's own configuration (issue 46): the queued all-gather and the reduce-scatter
  // above, on runs whose configuration already sets the knob the generic advice names.
  void adviceNeverNamesWhatIsSet_data() {
    QTest::addColumn<QString>("strategy");
    QTest::addColumn<QString>("config");
    QTest::addColumn<QString>("allGatherHas");
    QTest::addColumn<QString>("allGatherLacks");
    QTest::addColumn<QString>("reduceScatterHas");
    QTest::addColumn<QString>("reduceScatterLacks");
    // The first suggestion as the change "try it" launches ("" none).
    QTest::addColumn<QString>("allGatherTry");
    QTest::addColumn<QString>("reduceScatterTry");
    QTest::newRow("fsdp, backward_prefetch=pre") << "fsdp"
                                                 << R"({"strategy":"fsdp","backward_prefetch":"pre","forward_prefetch":false})"
                                                 << "forward_prefetch=true"
                                                 << "backward_prefetch"
                                                 << "finer wrapping"
                                                 << "reduce_bucket_size"
                                                 << "forward_prefetch=true"
                                                 << "";
    QTest::newRow("fsdp, both prefetches") << "fsdp"
                                           << R"({"strategy":"fsdp","backward_prefetch":"pre","forward_prefetch":true})"
                                           << "both prefetches are already on"
                                           << "=BACKWARD_PRE"
                                           << "finer wrapping"
                                           << "overlap_comm"
                                           << ""
                                           << "";
    // The reduce-scatter carries 1M elements in one bucket of 500M: a quarter of its messages.
    QTest::newRow("zero3, overlap_comm=auto (on), one bucket holds it all")
        << "zero3"
        << R"({"strategy":"zero3","overlap_comm":null,"reduce_bucket_size":"500000000","prefetch_bucket_size":"50000000"})"
        << "stage3_prefetch_bucket_size (now 50.0M elements"
        << "overlap_comm"
        << "a smaller reduce_bucket_size"
        << "overlap_comm=true"
        << "prefetch_bucket_size=100000000"
        << "reduce_bucket_size=250000";
    QTest::newRow("zero3, overlap_comm=false") << "zero3"
                                               << R"({"strategy":"zero3","overlap_comm":false,"reduce_bucket_size":"500000000"})"
                                               << "overlap_comm=true"
                                               << "BACKWARD_PRE"
                                               << "overlap_comm=true"
                                               << "larger"
                                               << "overlap_comm=true"
                                               << "overlap_comm=true";
    QTest::newRow("imported trace: every strategy's knob") << ""
                                                           << "{}"
                                                           << "BACKWARD_PRE"
                                                           << "forward_prefetch=true"
                                                           << "reduce_bucket_size"
                                                           << "now "
                                                           << ""
                                                           << "";
  }

  void adviceNeverNamesWhatIsSet() {
    QFETCH(QString, strategy);
    QFETCH(QString, config);
    QFETCH(QString, allGatherHas);
    QFETCH(QString, allGatherLacks);
    QFETCH(QString, reduceScatterHas);
    QFETCH(QString, reduceScatterLacks);
    QTemporaryDir dir;
    const std::string s = queuedAllGatherTrace();
    TraceStore store(pathIn(dir, "t.db"));
    const RunId run = importKineto(store, {writeFile(dir, "b.json", s)}).runIds.at(0);
    Statement up(storeDb(store), "UPDATE runs SET strategy = ?1, config_json = ?2 WHERE id = ?3");
    up.bind(1, strategy.toStdString()).bind(2, config.toStdString()).bind(3, static_cast<std::int64_t>(run.value())).exec();
    const auto list = findCollectiveBottlenecks(store, run);
    QCOMPARE(list.size(), std::size_t(2));
    const std::string ag = list[0].suggestions.at(0), rs = list[1].suggestions.at(0);
    QVERIFY2(QString::fromStdString(ag).contains(allGatherHas), ag.c_str());
    QVERIFY2(!QString::fromStdString(ag).contains(allGatherLacks), ag.c_str());
    QVERIFY2(QString::fromStdString(rs).contains(reduceScatterHas), rs.c_str());
    QVERIFY2(!QString::fromStdString(rs).contains(reduceScatterLacks), rs.c_str());
    QFETCH(QString, allGatherTry);
    QFETCH(QString, reduceScatterTry);
    QCOMPARE(QString::fromStdString(list[0].tryIt ? list[0].tryIt->text() : ""), allGatherTry);
    QCOMPARE(QString::fromStdString(list[1].tryIt ? list[1].tryIt->text() : ""), reduceScatterTry);
    // Each change is one the suggestion names, and not what the run has.
    for (const Bottleneck* b : {&list[0], &list[1]}) {
      if (!b->tryIt) continue;
      for (const auto& [key, value] : b->tryIt->set) {
        QVERIFY2(b->suggestions[0].find(key) != std::string::npos || key == "prefetch_bucket_size", b->suggestions[0].c_str());
        QVERIFY2(config.toStdString().find("\"" + key + "\":\"" + value + "\"") == std::string::npos, key.c_str());
      }
    }
  }

  // The link's knee (n½) of an alpha-beta link: 20 µs latency, 10 GB/s: half the bandwidth at
  // alpha x B = 200 kB, found within a bin's interpolation; none without a size under half or with
  // fewer than two bins.
  void linkKneeOfAnAlphaBetaLink() {
    std::vector<std::pair<std::int64_t, double>> samples;
    const double alpha = 20e-6, bw = 10e9;
    for (int i = 10; i <= 26; ++i)
      for (int k = 0; k < 3; ++k) {
        const double n = std::ldexp(1.0, i);
        samples.emplace_back(static_cast<std::int64_t>(n), n / (alpha + n / bw) / 1e9 * (1.0 + 0.01 * k));
      }
    const auto knee = linkKnee(samples);
    QVERIFY(knee.has_value());
    QVERIFY2(*knee > 150'000 && *knee < 260'000, std::to_string(*knee).c_str());
    // Only sizes past the knee: nothing under half.
    std::vector<std::pair<std::int64_t, double>> large;
    for (const auto& x : samples)
      if (x.first >= (1 << 22)) large.push_back(x);
    QVERIFY(!linkKnee(large).has_value());
    // Too few samples per bin.
    std::vector<std::pair<std::int64_t, double>> sparse;
    for (std::size_t i = 0; i < samples.size(); i += 3) sparse.push_back(samples[i]);
    QVERIFY(!linkKnee(sparse).has_value());
  }

  // Rank 0 reaches the all-gather at 100 µs, rank 1 only at 350 µs: rank 0's 300 µs of exposed
  // all-gather are 250 µs of waiting for rank 1 (>= 50 %), so the rule names rank 1 and says why it
  // is late: it began the step later, or its work before the collective took longer.
  void rankSkewNamesTheLateRank_data() {
    QTest::addColumn<long>("clock1");      // rank 1's clock offset, µs
    QTest::addColumn<long>("stepStart1");  // rank 1's step start, µs on the common clock
    QTest::addColumn<QString>("why");
    QTest::newRow("longer compute") << 0L << 0L << "took 0.250 ms longer than rank 0";
    QTest::newRow("longer compute, rank 1's clock 5 ms ahead") << 5000L << 0L << "took 0.250 ms longer than rank 0";
    QTest::newRow("later step start") << 0L << 250L << "started step 1 0.250 ms later than rank 0";
    QTest::newRow("later step start, rank 1's clock 3 ms behind") << -3000L << 250L << "started step 1 0.250 ms later";
  }

  void rankSkewNamesTheLateRank() {
    QFETCH(long, clock1);
    QFETCH(long, stepStart1);
    QFETCH(QString, why);
    QTemporaryDir dir;
    TraceStore store(pathIn(dir, "t.db"));
    const auto res = importKineto(store, {writeFile(dir, "rank0.json", skewRank(0, 10'000, 0, 100)),
                                          writeFile(dir, "rank1.json", skewRank(1, 10'000 + clock1, stepStart1, 350))});
    const auto list = findCollectiveBottlenecks(store, res.runIds.at(0));
    // One group (the same all-gather on both ranks): rank 0's 300 µs exposed, of which 250 waiting for
    // rank 1; rank 1, last to arrive, has 50 µs exposed with nothing to overlap.
    QCOMPARE(list.size(), std::size_t(1));
    const Bottleneck& g = list[0];
    QCOMPARE(g.instances, std::int64_t(2));
    QCOMPARE(g.ranks, 2);
    QCOMPARE(g.totalExposedNs, TimeNs(350'000));
    QCOMPARE(g.rank, 0);  // the worst instance
    QCOMPARE(g.exposedNs, TimeNs(300'000));
    QCOMPARE(g.step.value_or(-1), std::int64_t(1));
    QVERIFY(g.cause == ExposedCause::LateRank);
    QCOMPARE(g.causes.size(), std::size_t(2));
    QCOMPARE(g.causes[0].exposedNs, TimeNs(300'000));
    QVERIFY(g.causes[1].cause == ExposedCause::NothingToOverlap);
    QCOMPARE(g.causes[1].exposedNs, TimeNs(50'000));
    QCOMPARE(g.lateRank.value_or(-1), 1);
    QCOMPARE(g.waitForLateRankNs, TimeNs(250'000));
    QVERIFY2(g.reasons[0].find("rank 1 arrived last, the others waited 0.250 ms") != std::string::npos, g.reasons[0].c_str());
    QCOMPARE(g.suggestions.size(), std::size_t(1));
    QVERIFY2(QString::fromStdString(g.suggestions[0]).contains(why), g.suggestions[0].c_str());
    // One matched collective is no evidence of a straggler (stragglers.h): the advice says a late
    // rank, and never "fix the straggler" beside a verdict of no straggler.
    QVERIFY(!detectStragglers(store, res.runIds.at(0)).straggler);
    QVERIFY2(QString::fromStdString(g.suggestions[0]).contains("no rank is last much more often than chance"),
             g.suggestions[0].c_str());
    QVERIFY(!QString::fromStdString(g.suggestions[0]).contains("fix the straggler"));
  }

  // A 20 µs arrival difference explains too little of rank 0's 300 µs exposed all-gather (< 50 %):
  // no rank-skew claim, for either rank.
  void smallSkewIsNotBlamedOnAPeer() {
    QTemporaryDir dir;
    TraceStore store(pathIn(dir, "t.db"));
    const auto res = importKineto(store, {writeFile(dir, "rank0.json", skewRank(0, 10'000, 0, 100)),
                                          writeFile(dir, "rank1.json", skewRank(1, 10'000, 0, 120))});
    const auto list = findCollectiveBottlenecks(store, res.runIds.at(0));
    QCOMPARE(list.size(), std::size_t(1));
    for (const Bottleneck& b : list) {
      QVERIFY(!b.lateRank);
      QVERIFY(b.cause != ExposedCause::LateRank);
      QVERIFY(!mentions(b.suggestions, "straggler"));
    }
    QCOMPARE(list[0].rank, 0);
    QCOMPARE(list[0].exposedNs, TimeNs(300'000));
  }

  // The same instance seen from a single rank (no peers to match): the rule cannot apply.
  void singleRankHasNoSkew() {
    QTemporaryDir dir;
    TraceStore store(pathIn(dir, "t.db"));
    const auto res = importKineto(store, {writeFile(dir, "rank0.json", skewRank(0, 10'000, 0, 100))});
    const auto list = findCollectiveBottlenecks(store, res.runIds.at(0));
    QCOMPARE(list.size(), std::size_t(1));
    QVERIFY(!list[0].lateRank);
    QVERIFY(list[0].cause != ExposedCause::LateRank);
  }

  void hiddenCollectivesAreNotBottlenecks() {
    QTemporaryDir dir;
    const std::string s = R"J({"traceEvents": [
{"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 0, "dur": 100, "args": {"stream": 7}},
{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllGather_RING_LL", "pid": 0, "tid": 21, "ts": 10, "dur": 50, "args": {"stream": 21}}
]})J";
    TraceStore store(pathIn(dir, "t.db"));
    const auto res = importKineto(store, {writeFile(dir, "h.json", s)});
    QVERIFY(findCollectiveBottlenecks(store, res.runIds.at(0)).empty());
  }
};

QTEST_GUILESS_MAIN(TestBottlenecks)
#include "tst_bottlenecks.moc"
