// All-gather bottlenecks: ranking by exposed time, the unit that issued them, and the rules that fire.
#include <QTemporaryDir>
#include <QtTest>

#include "core/analysis/bottlenecks.h"
#include "core/import/kineto_importer.h"
#include "tests/common/test_support.h"

using namespace shardscope::core;
using shardscope::test::pathIn;
using shardscope::test::writeFile;

class TestBottlenecks : public QObject {
  Q_OBJECT

 private Q_SLOTS:
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
