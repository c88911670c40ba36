// HTA-compatible figures reproduce HTA's reference numbers on the development traces
// (shared/traces/README.md §3), and behave on edge cases.
#include <QTemporaryDir>
#include <QtTest>

#include "core/analysis/hta_metrics.h"
#include "core/import/kineto_importer.h"
#include "tests/common/test_support.h"

using namespace shardscope::core;
using shardscope::test::pathIn;
using shardscope::test::writeFile;

namespace {

HtaFigures figuresOf(const std::string& file, QTemporaryDir& dir) {
  TraceStore store(pathIn(dir, "t.db"));
  const auto res = importKineto(store, {file});
  return computeHtaFigures(store, res.runIds.at(0));
}

std::int64_t label(const HtaFigures& f, const std::string& l) {
  for (const auto& k : f.kernelTypes)
    if (k.label == l) return k.sumUs;
  return -1;
}

// A rank with one ProfilerStep#step window [20, 120) µs: a kernel launched before it ([0, 10) µs)
// and one launched inside it ([40, 60) µs).
std::string oneStepRank(int rank, int step) {
  return "{\"distributedInfo\": {\"rank\": " + std::to_string(rank) +
         ", \"world_size\": 2}, \"traceEvents\": [\n"
         "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": 1, \"tid\": 1, \"ts\": 0, \"dur\": "
         "2, \"args\": {\"correlation\": 1}},\n"
         "{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#" +
         std::to_string(step) +
         "\", \"pid\": 1, \"tid\": 1, \"ts\": 20, \"dur\": 100},\n"
         "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": 1, \"tid\": 1, \"ts\": 30, "
         "\"dur\": 2, \"args\": {\"correlation\": 2}},\n"
         "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"gemm\", \"pid\": 0, \"tid\": 7, \"ts\": 0, \"dur\": 10, \"args\": "
         "{\"stream\": 7, \"correlation\": 1}},\n"
         "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"gemm\", \"pid\": 0, \"tid\": 7, \"ts\": 40, \"dur\": 20, \"args\": "
         "{\"stream\": 7, \"correlation\": 2}}\n"
         "]}";
}

}  // namespace

class TestHtaMetrics : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void roundingIsNumpys() {
    QCOMPARE(roundHalfEven(47.025, 2), 47.02);  // 4702.5 -> 4702 (half to even)
    QCOMPARE(roundHalfEven(0.125, 2), 0.12);
    QCOMPARE(roundHalfEven(22.35, 1), 22.4);
    QCOMPARE(roundHalfEven(16.2049, 2), 16.2);
  }

  void htaPair_data() {
    QTest::addColumn<QString>("file");
    QTest::addColumn<double>("overlap");
    QTest::addColumn<qint64>("idle");
    QTest::addColumn<qint64>("compute");
    QTest::addColumn<qint64>("nonCompute");
    QTest::addColumn<qint64>("kernelTime");
    QTest::addColumn<double>("idlePct");
    QTest::addColumn<double>("computePct");
    QTest::addColumn<double>("nonComputePct");
    QTest::addColumn<qint64>("rows");
    QTest::addColumn<QList<qint64>>("types");  // COMPUTATION, COMMUNICATION, COMP+COMM, COMP+MEM, MEMORY, ALL3, COMM+MEM
    QTest::newRow("control") << "hta_trace_diff/control_a100_rank3.json.gz" << 47.03 << qint64(62119) << qint64(234760)
                             << qint64(86525) << qint64(383404) << 16.20 << 61.23 << 22.57 << qint64(62255)
                             << QList<qint64>{151685, 69110, 55152, 20762, 16328, 7161, 1087};
    QTest::newRow("test") << "hta_trace_diff/test_v100_rank1_compiled.json.gz" << 68.80 << qint64(46910) << qint64(429216)
                          << qint64(152245) << qint64(628371) << 7.47 << 68.31 << 24.23 << qint64(56116)
                          << QList<qint64>{267839, 53846, 129148, 30501, 92887, 1728, 5512};
  }

  void htaPair() {
    const auto shared = shardscope::test::sharedTracesDir();
    if (!shared) QSKIP("../shared/traces not present");
    QFETCH(QString, file);
    QFETCH(double, overlap);
    QFETCH(qint64, idle);
    QFETCH(qint64, compute);
    QFETCH(qint64, nonCompute);
    QFETCH(qint64, kernelTime);
    QFETCH(double, idlePct);
    QFETCH(double, computePct);
    QFETCH(double, nonComputePct);
    QFETCH(qint64, rows);
    QFETCH(QList<qint64>, types);
    QTemporaryDir dir;
    const auto f = figuresOf(*shared + "/kineto/" + file.toStdString(), dir);
    QCOMPARE(f.ranks.size(), std::size_t(1));
    const auto& r = f.ranks[0];
    QVERIFY(r.overlapPct.has_value());
    QCOMPARE(*r.overlapPct, overlap);
    QCOMPARE(r.idleUs, idle);
    QCOMPARE(r.computeUs, compute);
    QCOMPARE(r.nonComputeUs, nonCompute);
    QCOMPARE(r.kernelTimeUs, kernelTime);
    QCOMPARE(r.idlePct, idlePct);
    QCOMPARE(r.computePct, computePct);
    QCOMPARE(r.nonComputePct, nonComputePct);
    QCOMPARE(r.rowsKept, rows);  // the last ProfilerStep (1014) is dropped
    QCOMPARE(r.iterations, (std::vector<std::int64_t>{1009, 1010, 1011, 1012, 1013}));
    QCOMPARE(label(f, "COMPUTATION"), types[0]);
    QCOMPARE(label(f, "COMMUNICATION"), types[1]);
    QCOMPARE(label(f, "COMPUTATION overlapping COMMUNICATION"), types[2]);
    QCOMPARE(label(f, "COMPUTATION overlapping MEMORY"), types[3]);
    QCOMPARE(label(f, "MEMORY"), types[4]);
    QCOMPARE(label(f, "COMPUTATION overlapping COMMUNICATION overlapping MEMORY"), types[5]);
    QCOMPARE(label(f, "COMMUNICATION overlapping MEMORY"), types[6]);
  }

  void b200NoStepsFloatTimestamps() {
    const auto shared = shardscope::test::sharedTracesDir();
    if (!shared) QSKIP("../shared/traces not present");
    QTemporaryDir dir;
    const auto f = figuresOf(*shared + "/kineto/tracelens_b200_eager_rank0.json.gz", dir);
    const auto& r = f.ranks.at(0);
    QCOMPARE(*r.overlapPct, 0.0);  // one comm kernel, never concurrent with compute: 0, not NaN
    QCOMPARE(r.idleUs, qint64(73669));
    QCOMPARE(r.computeUs, qint64(10153));
    QCOMPARE(r.nonComputeUs, qint64(664));
    QCOMPARE(r.kernelTimeUs, qint64(84486));
    QCOMPARE(r.idlePct, 87.20);
    QCOMPARE(r.computePct, 12.02);
    QCOMPARE(r.nonComputePct, 0.79);
    QCOMPARE(r.rowsKept, qint64(22355));  // no ProfilerStep: nothing filtered
    QCOMPARE(label(f, "COMPUTATION"), qint64(10153));
    QCOMPARE(label(f, "MEMORY"), qint64(643));
    QCOMPARE(label(f, "COMMUNICATION"), qint64(21));
    QCOMPARE(f.kernelTypes.at(0).pct, 93.9);
  }

  // Rule 7 counts the distinct step numbers of the whole run: one step per rank, but two different
  // numbers over the ranks, drops each rank's last step (figures are computed rank by rank, so the
  // first rank's must follow what a later rank shows).
  void lastStepDropDependsOnAllRanks_data() {
    QTest::addColumn<int>("step1");  // rank 1's only step number (0: no rank 1)
    QTest::addColumn<qint64>("kernelUs");
    QTest::addColumn<qint64>("rows");
    QTest::newRow("one rank, one step: nothing dropped") << 0 << qint64(60) << qint64(5);
    QTest::newRow("two ranks, same step: nothing dropped") << 1 << qint64(60) << qint64(5);
    QTest::newRow("two ranks, steps 1 and 2: last step dropped on both") << 2 << qint64(10) << qint64(2);
  }

  void lastStepDropDependsOnAllRanks() {
    QFETCH(int, step1);
    QFETCH(qint64, kernelUs);
    QFETCH(qint64, rows);
    QTemporaryDir dir;
    TraceStore store(pathIn(dir, "t.db"));
    std::vector<std::string> files{writeFile(dir, "rank0.json", oneStepRank(0, 1))};
    if (step1) files.push_back(writeFile(dir, "rank1.json", oneStepRank(1, step1)));
    const auto f = computeHtaFigures(store, importKineto(store, files).runIds.at(0));
    QCOMPARE(f.ranks.size(), files.size());
    for (const auto& r : f.ranks) {
      QCOMPARE(r.kernelTimeUs, kernelUs);
      QCOMPARE(r.computeUs, kernelUs == 10 ? qint64(10) : qint64(30));
      QCOMPARE(r.rowsKept, rows);
    }
    QCOMPARE(label(f, "COMPUTATION"), (kernelUs == 10 ? qint64(10) : qint64(30)) * static_cast<qint64>(files.size()));
  }

  void noCommunicationIsNotANumber() {
    QTemporaryDir dir;
    const std::string s = R"J({"traceEvents": [
{"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 10, "dur": 5, "args": {"stream": 7, "correlation": 1}},
{"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 20, "dur": 10, "args": {"stream": 7, "correlation": 2}}
]})J";
    const auto f = figuresOf(writeFile(dir, "a.json", s), dir);
    const auto& r = f.ranks.at(0);
    QVERIFY(!r.overlapPct.has_value());
    QCOMPARE(r.kernelTimeUs, qint64(20));
    QCOMPARE(r.computeUs, qint64(15));
    QCOMPARE(r.idleUs, qint64(5));
    QCOMPARE(r.nonComputeUs, qint64(0));
  }

  void overlapOfPartlyHiddenCommunication() {
    // comm [0,10) and [20,30); compute [5,25): 5 + 5 of 20 µs hidden = 50 %.
    QTemporaryDir dir;
    const std::string s = R"J({"traceEvents": [
{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllGather_RING_LL", "pid": 0, "tid": 21, "ts": 0, "dur": 10, "args": {"stream": 21}},
{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllGather_RING_LL", "pid": 0, "tid": 21, "ts": 20, "dur": 10, "args": {"stream": 21}},
{"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 5, "dur": 20, "args": {"stream": 7}},
{"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "pid": 0, "tid": 7, "ts": 40, "dur": 2, "args": {"stream": 7}}
]})J";
    const auto f = figuresOf(writeFile(dir, "b.json", s), dir);
    const auto& r = f.ranks.at(0);
    QCOMPARE(*r.overlapPct, 50.0);
    QCOMPARE(r.kernelTimeUs, qint64(42));
    QCOMPARE(r.idleUs, qint64(10));
    QCOMPARE(r.computeUs, qint64(20));
    QCOMPARE(r.nonComputeUs, qint64(12));
    QCOMPARE(label(f, "COMPUTATION overlapping COMMUNICATION"), qint64(10));
    QCOMPARE(label(f, "COMMUNICATION"), qint64(10));
    QCOMPARE(label(f, "COMPUTATION"), qint64(10));
    QCOMPARE(label(f, "MEMORY"), qint64(2));
  }
};

QTEST_GUILESS_MAIN(TestHtaMetrics)
#include "tst_hta_metrics.moc"
