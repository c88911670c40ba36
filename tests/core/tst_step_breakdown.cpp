// Shardscope's per-step breakdown: exact figures on a small hand-made trace, and defined results
// for the edge cases (no steps, no communication).
#include <QTemporaryDir>
#include <QtTest>

#include "core/analysis/step_breakdown.h"
#include "core/import/kineto_importer.h"
#include "tests/common/test_support.h"

using namespace shardscope::core;
using shardscope::test::pathIn;
using shardscope::test::writeFile;

namespace {

std::vector<StepBreakdown> breakdownOf(const std::string& json, QTemporaryDir& dir) {
  TraceStore store(pathIn(dir, "t.db"));
  const auto res = importKineto(store, {writeFile(dir, "t.json", json)});
  return computeStepBreakdown(store, res.runIds.at(0));
}

}  // namespace

class TestStepBreakdown : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void twoSteps() {
    QTemporaryDir dir;
    const std::string s = R"J({"distributedInfo": {"rank": 0, "world_size": 1}, "traceEvents": [
{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10, "dur": 1, "args": {"correlation": 1}},
{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 15, "dur": 1, "args": {"correlation": 2}},
{"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": 1, "tid": 1, "ts": 16, "dur": 1, "args": {"correlation": 3}},
{"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 20, "dur": 40, "args": {"stream": 7, "correlation": 1}},
{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "pid": 0, "tid": 21, "ts": 40, "dur": 40, "args": {"stream": 21, "correlation": 2}},
{"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "pid": 0, "tid": 7, "ts": 85, "dur": 5, "args": {"stream": 7, "correlation": 3}},
{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "pid": 1, "tid": 1, "ts": 100, "dur": 100},
{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 110, "dur": 1, "args": {"correlation": 4}},
{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 112, "dur": 1, "args": {"correlation": 5}},
{"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 120, "dur": 30, "args": {"stream": 7, "correlation": 4}},
{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "pid": 0, "tid": 21, "ts": 150, "dur": 20, "args": {"stream": 21, "correlation": 5}}
]})J";
    const auto b = breakdownOf(s, dir);
    QCOMPARE(b.size(), std::size_t(2));
    const auto& s1 = b[0];
    QCOMPARE(s1.step, std::int64_t(1));
    QCOMPARE(s1.stepNs, TimeNs(100'000));
    QCOMPARE(s1.computeNs, TimeNs(40'000));
    QCOMPARE(s1.commNs, TimeNs(40'000));
    QCOMPARE(s1.overlappedCommNs, TimeNs(20'000));
    QCOMPARE(s1.exposedCommNs, TimeNs(20'000));
    QCOMPARE(s1.otherBusyNs, TimeNs(5'000));  // the memcpy
    QCOMPARE(s1.idleNs, TimeNs(35'000));
    QCOMPARE(*s1.overlap, 0.5);
    QCOMPARE(s1.exposedShare, 0.2);
    // The windows follow the GPU work: step 1 from its first kernel (20 µs) to step 2's (120 µs),
    // the last step to its last kernel's end (170 µs), not to the end of its CPU step span.
    QCOMPARE(s1.window, StepWindow::DevicePeriod);
    QCOMPARE(s1.startNs, TimeNs(20'000));
    const auto& s2 = b[1];
    QCOMPARE(s2.step, std::int64_t(2));
    QCOMPARE(s2.startNs, TimeNs(120'000));
    QCOMPARE(s2.stepNs, TimeNs(50'000));
    QCOMPARE(s2.computeNs, TimeNs(30'000));
    QCOMPARE(s2.commNs, TimeNs(20'000));
    QCOMPARE(s2.overlappedCommNs, TimeNs(0));  // touching at 150 µs is not overlap
    QCOMPARE(s2.exposedCommNs, TimeNs(20'000));
    QCOMPARE(s2.idleNs, TimeNs(0));
    QCOMPARE(*s2.overlap, 0.0);
  }

  void noStepsNoCommunication() {
    QTemporaryDir dir;
    const std::string s = R"J({"traceEvents": [
{"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 0, "dur": 10, "args": {"stream": 7}},
{"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 20, "dur": 0, "args": {"stream": 7}}
]})J";
    const auto b = breakdownOf(s, dir);
    QCOMPARE(b.size(), std::size_t(1));
    QCOMPARE(b[0].step, std::int64_t(-1));  // the whole trace
    QCOMPARE(b[0].stepNs, TimeNs(20'000));
    QCOMPARE(b[0].computeNs, TimeNs(10'000));
    QCOMPARE(b[0].idleNs, TimeNs(10'000));
    QVERIFY(!b[0].overlap.has_value());  // no communication: undefined, not 0 and not NaN
    QCOMPARE(b[0].commShare, 0.0);
  }
};

QTEST_GUILESS_MAIN(TestStepBreakdown)
#include "tst_step_breakdown.moc"
