// Collectives table: counts, sizes, times, algorithm/bus bandwidth and exposed time on a hand-made
// trace whose answers are known.
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>

#include "core/analysis/collectives.h"
#include "core/import/kineto_importer.h"
#include "tests/common/test_support.h"

using namespace shardscope::core;
using shardscope::test::pathIn;
using shardscope::test::writeFile;

class TestCollectives : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void ncclTestsFactors() {
    QCOMPARE(*busBandwidthFactor(CollectiveOp::AllReduce, 8), 2.0 * 7 / 8);
    QCOMPARE(*busBandwidthFactor(CollectiveOp::AllGather, 4), 0.75);
    QCOMPARE(*busBandwidthFactor(CollectiveOp::ReduceScatter, 2), 0.5);
    QCOMPARE(*busBandwidthFactor(CollectiveOp::Broadcast, 8), 1.0);
    QVERIFY(!busBandwidthFactor(CollectiveOp::AllReduce, 0));
  }

  // NCCL runs an all-to-all as SendRecv kernels and older traces give its kernel no args: the
  // nccl:all_to_all annotation around its launch names it and its record_shapes input sizes it; the
  // default group is the world. File order varies: the kernel first, or the annotation after the launch.
  void allToAllFromItsAnnotation_data() {
    QTest::addColumn<QString>("order");
    QTest::newRow("annotation, kernel, launch") << "akl";
    QTest::newRow("kernel, launch, annotation") << "kla";
    QTest::newRow("launch, annotation, kernel") << "lak";
  }
  void allToAllFromItsAnnotation() {
    QFETCH(QString, order);
    const std::string anno =
        R"J({"ph": "X", "cat": "user_annotation", "name": "nccl:all_to_all", "pid": 1, "tid": 1, "ts": 10, "dur": 50, "args": {"Input Dims": [[8, 1024], [8]], "Input type": ["float", "int"]}})J";
    const std::string kernel =
        R"J({"ph": "X", "cat": "kernel", "name": "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)", "pid": 0, "tid": 7, "ts": 100, "dur": 40, "args": {"stream": 7, "correlation": 5}})J";
    const std::string launch =
        R"J({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 20, "dur": 5, "args": {"correlation": 5}})J";
    std::string events =
        R"J({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 1000})J";
    for (QChar c : order) events += ",\n" + (c == 'a' ? anno : c == 'k' ? kernel : launch);
    const std::string s = R"J({"distributedInfo": {"rank": 0, "world_size": 4}, "traceEvents": [)J" + events + "]}";
    QTemporaryDir dir;
    TraceStore store(pathIn(dir, "t.db"));
    const auto res = importKineto(store, {writeFile(dir, "t.json", s)});
    const auto table = computeCollectives(store, res.runIds.at(0));
    QCOMPARE(table.size(), std::size_t(1));
    QVERIFY(table[0].op == CollectiveOp::AllToAll);
    QCOMPARE(table[0].count, std::int64_t(1));
    QCOMPARE(table[0].bytes, std::int64_t(8 * 1024 * 4));  // the first input, floats
    QCOMPARE(table[0].groupSize, 4);                       // the world: no group named
    QVERIFY(table[0].algBwGBps && std::abs(*table[0].algBwGBps - 32768.0 / 40e-6 / 1e9) < 1e-9);
    QVERIFY(table[0].busBwGBps && std::abs(*table[0].busBwGBps - *table[0].algBwGBps * 3.0 / 4.0) < 1e-9);
  }

  void tableOfATrace() {
    QTemporaryDir dir;
    // Two all-reduces of 1,000,000 floats (4 MB) in a group of 2: 40 µs (half hidden behind a gemm)
    // and 20 µs (fully exposed); one all-gather without size information.
    const std::string s =
        R"J({"distributedInfo": {"rank": 0, "world_size": 2, "pg_config": [{"pg_name": "0", "pg_size": 2, "ranks": [0, 1]}]},
"traceEvents": [
{"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 20, "dur": 40, "args": {"stream": 7}},
{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "pid": 0, "tid": 21, "ts": 40, "dur": 40, "args": {"stream": 21, "Collective name": "allreduce", "In msg nelems": 1000000, "Out msg nelems": 1000000, "Group size": 2, "dtype": "Float", "Process Group Name": "0"}},
{"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 120, "dur": 30, "args": {"stream": 7}},
{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "pid": 0, "tid": 21, "ts": 150, "dur": 20, "args": {"stream": 21, "Collective name": "allreduce", "In msg nelems": 1000000, "Out msg nelems": 1000000, "Group size": 2, "dtype": "Float", "Process Group Name": "0"}},
{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllGather_RING_LL", "pid": 0, "tid": 21, "ts": 200, "dur": 10, "args": {"stream": 21}}
]})J";
    TraceStore store(pathIn(dir, "t.db"));
    const auto res = importKineto(store, {writeFile(dir, "t.json", s)});
    const auto table = computeCollectives(store, res.runIds.at(0));
    QCOMPARE(table.size(), std::size_t(2));
    const auto& ar = table[0];  // sorted by total time
    QVERIFY(ar.op == CollectiveOp::AllReduce);
    QCOMPARE(QString::fromStdString(ar.processGroup), QString("0"));
    QCOMPARE(ar.groupSize, 2);
    QCOMPARE(ar.count, std::int64_t(2));
    QCOMPARE(ar.bytes, std::int64_t(8'000'000));
    QCOMPARE(ar.totalNs, TimeNs(60'000));
    QCOMPARE(ar.meanNs, TimeNs(30'000));
    QCOMPARE(ar.exposedNs, TimeNs(40'000));  // 20 of the first, all 20 of the second
    QVERIFY(std::abs(*ar.algBwGBps - 8e6 / 60e3) < 1e-9);
    QVERIFY(std::abs(*ar.busBwGBps - 8e6 / 60e3 * 1.0) < 1e-9);  // 2(n-1)/n = 1 for n = 2
    const auto& ag = table[1];
    QVERIFY(ag.op == CollectiveOp::AllGather);
    QCOMPARE(ag.count, std::int64_t(1));
    QCOMPARE(ag.exposedNs, TimeNs(10'000));
    QVERIFY(!ag.algBwGBps.has_value());  // no size: no bandwidth rather than a wrong one
  }
};

QTEST_GUILESS_MAIN(TestCollectives)
#include "tst_collectives.moc"
