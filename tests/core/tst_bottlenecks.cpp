// All-gather bottlenecks: ranking by exposed time, the unit that issued them, and the rules that fire.
#include <QTemporaryDir>
#include <QtTest>

#include "core/analysis/bottlenecks.h"
#include "core/import/kineto_importer.h"
#include "tests/common/test_support.h"

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
         t(stepStart) + ", \"dur\": 1000},\n"
         "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": 1, \"tid\": 1, \"ts\": " +
         t(stepStart + 1) + ", \"dur\": 1, \"args\": {\"correlation\": 10}},\n"
         "{\"ph\": \"X\", \"cat\": \"cuda_driver\", \"name\": \"cuLaunchKernelEx\", \"pid\": 1, \"tid\": 1, \"ts\": " +
         t(stepStart + 5) + ", \"dur\": 1, \"args\": {\"correlation\": 11}},\n"
         "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"gemm\", \"pid\": 0, \"tid\": 7, \"ts\": " + t(stepStart + 2) +
         ", \"dur\": " + std::to_string(arrival - stepStart - 2) + ", \"args\": {\"stream\": 7, \"correlation\": 10}},\n"
         "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"ncclDevKernel_AllGather_RING_LL\", \"pid\": 0, \"tid\": 21, \"ts\": " +
         t(arrival) + ", \"dur\": " + std::to_string(400 - arrival) +
         ", \"args\": {\"stream\": 21, \"correlation\": 11, \"Collective name\": \"_allgather_base\", \"In msg nelems\": "
         "33554432, \"Out msg nelems\": 67108864, \"Group size\": 2, \"dtype\": \"BFloat16\", \"Process Group Name\": \"0\"}}\n"
         "]}";
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
    QCOMPARE(list.size(), std::size_t(3));
    QVERIFY(list[0].op == CollectiveOp::AllGather);  // 60 µs in total beats the reduce-scatter's 40
    QCOMPARE(list[0].instances, std::int64_t(3));
    QCOMPARE(list[0].stepsSeen, std::int64_t(3));
    QCOMPARE(list[0].totalExposedNs, TimeNs(60'000));
    QCOMPARE(list[0].meanExposedNs, TimeNs(20'000));
    QCOMPARE(list[0].exposedNs, TimeNs(30'000));  // the worst instance...
    QCOMPARE(list[0].step.value_or(-1), std::int64_t(1));  // ...in step 1
    QVERIFY(list[1].op == CollectiveOp::ReduceScatter);
    QCOMPARE(list[1].instances, std::int64_t(1));
    QCOMPARE(list[1].totalExposedNs, TimeNs(40'000));
    // The small-message rule names the operation it is about.
    QVERIFY2(mentions(list[1].reasons, "a reduce-scatter needs"), list[1].reasons.front().c_str());
    QVERIFY(!mentions(list[1].reasons, "an all-gather needs"));
    QVERIFY(list[2].op == CollectiveOp::AllGather);  // the second all-gather of every step
    QCOMPARE(list[2].instances, std::int64_t(3));
    QCOMPARE(list[2].totalExposedNs, TimeNs(15'000));
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
    const std::string s = R"J({"distributedInfo": {"rank": 1, "world_size": 8, "pg_config": [{"pg_name": "0", "pg_size": 8, "ranks": [0,1,2,3,4,5,6,7]}]}, "traceEvents": [
{"ph": "X", "cat": "user_annotation", "name": "FSDP unit layers.3", "pid": 1, "tid": 1, "ts": 0, "dur": 200},
{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10, "dur": 1, "args": {"correlation": 10}},
{"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernelEx", "pid": 1, "tid": 1, "ts": 12, "dur": 1, "args": {"correlation": 11}},
{"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernelEx", "pid": 1, "tid": 1, "ts": 14, "dur": 1, "args": {"correlation": 12}},
{"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 0, "dur": 40, "args": {"stream": 7, "correlation": 10}},
{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL", "pid": 0, "tid": 21, "ts": 20, "dur": 40, "args": {"stream": 21, "correlation": 11, "Collective name": "_reduce_scatter_base", "In msg nelems": 1000000, "Out msg nelems": 125000, "Group size": 8, "dtype": "BFloat16", "Process Group Name": "0"}},
{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllGather_RING_LL", "pid": 0, "tid": 21, "ts": 61, "dur": 40, "args": {"stream": 21, "correlation": 12, "Collective name": "_allgather_base", "In msg nelems": 250000, "Out msg nelems": 2000000, "Group size": 8, "dtype": "BFloat16", "Process Group Name": "0"}}
]})J";
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
    QCOMPARE(ag.reasons.size(), std::size_t(2));
    QVERIFY(QString::fromStdString(ag.suggestions[0]).contains("coarser FSDP wrapping"));
    QVERIFY(QString::fromStdString(ag.suggestions[1]).contains("BACKWARD_PRE"));
    const auto& rs = list[1];
    QVERIFY(rs.op == CollectiveOp::ReduceScatter);
    QCOMPARE(rs.exposedNs, TimeNs(20'000));  // half hidden behind the gemm
    bool late = false;
    for (const auto& r : rs.reasons) late = late || r.find("launched just before") != std::string::npos;
    QVERIFY(late);
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
    QCOMPARE(list.size(), std::size_t(2));
    const Bottleneck& waiting = list[0];
    QCOMPARE(waiting.rank, 0);
    QCOMPARE(waiting.exposedNs, TimeNs(300'000));
    QCOMPARE(waiting.step.value_or(-1), std::int64_t(1));
    QCOMPARE(waiting.lateRank.value_or(-1), 1);
    QCOMPARE(waiting.waitForLateRankNs, TimeNs(250'000));
    // No other rule applies: the skew is the one reason, with its suggestion.
    QCOMPARE(waiting.reasons.size(), std::size_t(1));
    QCOMPARE(waiting.suggestions.size(), std::size_t(1));
    QVERIFY2(waiting.reasons[0].find("waited 0.250 ms for rank 1") != std::string::npos, waiting.reasons[0].c_str());
    QVERIFY2(QString::fromStdString(waiting.suggestions[0]).contains(why), waiting.suggestions[0].c_str());
    QVERIFY(QString::fromStdString(waiting.suggestions[0]).contains("straggler"));

    // Rank 1 arrived last: nobody kept it waiting, its exposed 50 µs are not skew.
    const Bottleneck& late = list[1];
    QCOMPARE(late.rank, 1);
    QCOMPARE(late.exposedNs, TimeNs(50'000));
    QVERIFY(!late.lateRank);
    QVERIFY(!mentions(late.reasons, "rank skew"));
    QCOMPARE(late.reasons, std::vector<std::string>{"not overlapped with computation"});
  }

  // A 20 µs arrival difference explains too little of rank 0's 300 µs exposed all-gather (< 50 %):
  // no rank-skew claim, for either rank.
  void smallSkewIsNotBlamedOnAPeer() {
    QTemporaryDir dir;
    TraceStore store(pathIn(dir, "t.db"));
    const auto res = importKineto(store, {writeFile(dir, "rank0.json", skewRank(0, 10'000, 0, 100)),
                                          writeFile(dir, "rank1.json", skewRank(1, 10'000, 0, 120))});
    const auto list = findCollectiveBottlenecks(store, res.runIds.at(0));
    QCOMPARE(list.size(), std::size_t(2));
    for (const Bottleneck& b : list) {
      QVERIFY(!b.lateRank);
      QVERIFY(!mentions(b.reasons, "rank skew"));
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
    QVERIFY(!mentions(list[0].reasons, "rank skew"));
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
