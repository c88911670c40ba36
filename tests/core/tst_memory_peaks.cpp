// Memory peaks: the value, the moment, the step and what ran then; max-keeping downsampling.
#include <QTemporaryDir>
#include <QtTest>
#include <algorithm>
#include <string>
#include <vector>

#include "core/analysis/memory_peaks.h"
#include "core/model/memory_category.h"
#include "core/import/kineto_importer.h"
#include "tests/common/test_support.h"

using namespace shardscope::core;
using shardscope::test::pathIn;

namespace {

MemoryPeak peakWith(std::vector<std::pair<std::string, std::int64_t>> parts) {
  MemoryPeak p;
  p.breakdown = std::move(parts);
  for (const auto& [k, v] : p.breakdown) p.peakAllocatedBytes += v;
  return p;
}

ConfigKnobs knobsOf(const std::string& json) {
  Run r;
  r.configJson = json;
  return configKnobs(r);
}

}  // namespace
using shardscope::test::writeFile;

namespace {

// Kineto trace events on pid 1 (times in microseconds): a complete event on thread 1, and a
// [memory] record of a CUDA device.
std::string op(const std::string& cat, const std::string& name, double ts, double dur) {
  return R"({"ph": "X", "cat": ")" + cat + R"(", "name": ")" + name + R"(", "pid": 1, "tid": 1, "ts": )" + std::to_string(ts) +
         R"(, "dur": )" + std::to_string(dur) + "}";
}
std::string memory(double ts, int tid, long reserved, long allocated, long bytes, int addr, int device) {
  return R"({"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": )" + std::to_string(tid) +
         R"(, "ts": )" + std::to_string(ts) + R"(, "args": {"Total Reserved": )" + std::to_string(reserved) +
         R"(, "Total Allocated": )" + std::to_string(allocated) + R"(, "Bytes": )" + std::to_string(bytes) + R"(, "Addr": )" +
         std::to_string(addr) + R"(, "Device Id": )" + std::to_string(device) + R"(, "Device Type": 1}})";
}

// The memory peaks of rank 0 of a one-rank trace made of `events`, by device id.
std::vector<MemoryPeak> peaksByDevice(const std::vector<std::string>& events) {
  QTemporaryDir dir;
  std::string s = R"({"distributedInfo": {"rank": 0, "world_size": 2}, "traceEvents": [)";
  for (std::size_t i = 0; i < events.size(); ++i) s += (i ? ",\n" : "\n") + events[i];
  s += "\n]}";
  TraceStore store(pathIn(dir, "t.db"));
  const auto res = importKineto(store, {writeFile(dir, "m.json", s)});
  auto peaks = computeMemoryPeaks(store, res.runIds.at(0));
  std::sort(peaks.begin(), peaks.end(), [](const MemoryPeak& a, const MemoryPeak& b) { return a.deviceId < b.deviceId; });
  return peaks;
}

}  // namespace

class TestMemoryPeaks : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  // Issue 46: what holds the most at a peak and the knob of the run's own configuration that sizes
  // it; against another run, the category that grew. ZeRO-3 with one 500M-element reduce bucket
  // (overlap_comm on: two) peaks above DDP by its communication buffers; advice never names a knob at
  // the value the run already has.
  void explanationsNameTheKnob() {
    const MemoryPeak ddp = peakWith({{"parameters", 64 << 20},
                                     {"gradients", 64 << 20},
                                     {"optimizer_state", 128 << 20},
                                     {"activations", 32 << 20},
                                     {"comm_buffers", 8 << 20}});
    const MemoryPeak zero3 = peakWith({{"parameters", 32 << 20},
                                       {"gathered_parameters", 16 << 20},
                                       {"gradients", 32 << 20},
                                       {"optimizer_state", 64 << 20},
                                       {"activations", 32 << 20},
                                       {"comm_buffers", 160 << 20}});
    auto e = explainPeak(ddp, knobsOf(R"({"strategy":"ddp","optimizer":"adamw","world_size":4})"));
    QVERIFY(e);
    QCOMPARE(e->category, std::string("optimizer_state"));
    QCOMPARE(e->knob, std::string("strategy"));
    QCOMPARE(e->bytes, std::int64_t(128) << 20);
    QVERIFY2(QString::fromStdString(e->text).contains("AdamW keeps two fp32 states per parameter on every rank"),
             e->text.c_str());
    const ConfigKnobs z = knobsOf(R"({"strategy":"zero3","reduce_bucket_size":500000000,"overlap_comm":true,"world_size":4})");
    e = explainPeakDifference(ddp, "ddp #1", zero3, "zero3 #2", z);
    QVERIFY(e);
    QCOMPARE(e->category, std::string("comm_buffers"));
    QCOMPARE(e->knob, std::string("reduce_bucket_size"));
    QCOMPARE(e->bytes, std::int64_t(152) << 20);
    QVERIFY2(
        QString::fromStdString(e->text).startsWith("zero3 #2 peaks 40.00 MiB above ddp #1; communication buffers grew the most"),
        e->text.c_str());
    QVERIFY2(QString::fromStdString(e->text).contains("reduce_bucket_size 500.0M elements), two of them with overlap_comm"),
             e->text.c_str());
    // Activations with checkpointing already on: the micro-batch, not checkpointing again.
    const MemoryPeak act = peakWith({{"parameters", 8 << 20}, {"activations", 64 << 20}});
    e = explainPeak(act, knobsOf(R"({"strategy":"fsdp","activation_checkpointing":true,"micro_batch":8,"seq_len":512})"));
    QCOMPARE(e->knob, std::string("micro_batch"));
    QVERIFY(!QString::fromStdString(e->text).contains("activation_checkpointing"));
    QVERIFY(QString::fromStdString(e->text).contains("(micro_batch 8 x seq_len 512)"));
    e = explainPeak(act, knobsOf(R"({"strategy":"fsdp","activation_checkpointing":false})"));
    QCOMPARE(e->knob, std::string("activation_checkpointing"));
    // Nothing to say without a breakdown, or when the other run grew nowhere.
    QVERIFY(!explainPeak(MemoryPeak{}, z));
    QVERIFY(!explainPeakDifference(zero3, "a", ddp.breakdown.empty() ? zero3 : peakWith({{"parameters", 1}}), "b", z));
  }

  // The category tracks' names (issue 46): one spelling, read back to the category and device; any
  // other counter name is not one.
  void categoryTrackNames() {
    QCOMPARE(memoryCategoryTrackName(MemoryCategory::GatheredParameters, 0, 0),
             std::string("memory: gathered parameters (cpu:0)"));
    QCOMPARE(memoryCategoryTrackName(MemoryCategory::CommBuffers, 1, 12), std::string("memory: communication buffers (cuda:12)"));
    for (const MemoryCategory c : memoryCategories())
      for (const auto& [type, id] : std::vector<std::pair<int, int>>{{0, 0}, {1, 3}, {1, 100}}) {
        const auto back = parseMemoryCategoryTrackName(memoryCategoryTrackName(c, type, id));
        QVERIFY(back.has_value());
        QVERIFY(back->category == c);
        QCOMPARE(back->deviceType, type);
        QCOMPARE(back->deviceId, id);
      }
    for (const char* other : {"memory allocated (cpu:0)", "memory: gradients", "memory: gradients (gpu:0)",
                              "memory: weights (cpu:0)", "memory: gradients (cpu:x)", "memory: gradients (cpu:)", ""})
      QVERIFY2(!parseMemoryCategoryTrackName(other), other);
  }

  void peakWithItsCause() {
    QTemporaryDir dir;
    const std::string s = R"J({"distributedInfo": {"rank": 2, "world_size": 4}, "traceEvents": [
{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
{"ph": "X", "cat": "user_annotation", "name": "## forward ##", "pid": 1, "tid": 1, "ts": 10, "dur": 40},
{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 20, "dur": 10},
{"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 1, "tid": 1, "ts": 25, "dur": 1},
{"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 5, "args": {"Total Reserved": 1000, "Total Allocated": 100, "Bytes": 100, "Addr": 1, "Device Id": 0, "Device Type": 1}},
{"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 25.5, "args": {"Total Reserved": 2000, "Total Allocated": 500, "Bytes": 400, "Addr": 2, "Device Id": 0, "Device Type": 1}},
{"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 60, "args": {"Total Reserved": 3000, "Total Allocated": 200, "Bytes": -300, "Addr": 2, "Device Id": 0, "Device Type": 1}},
{"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 70, "args": {"Total Reserved": 3000, "Total Allocated": 500, "Bytes": 300, "Addr": 3, "Device Id": 0, "Device Type": 1}}
]})J";
    TraceStore store(pathIn(dir, "t.db"));
    const auto res = importKineto(store, {writeFile(dir, "m.json", s)});
    const auto peaks = computeMemoryPeaks(store, res.runIds.at(0));
    QCOMPARE(peaks.size(), std::size_t(1));
    const auto& p = peaks[0];
    QCOMPARE(p.rank, 2);
    QCOMPARE(p.deviceType, 1);
    QCOMPARE(p.peakAllocatedBytes, std::int64_t(500));
    QCOMPARE(p.allocatedAtNs, TimeNs(25'500));  // the first time the maximum was reached
    QCOMPARE(p.peakReservedBytes, std::int64_t(3000));
    QCOMPARE(p.reservedAtNs, TimeNs(60'000));
    QCOMPARE(*p.step, std::int64_t(3));
    QCOMPARE(QString::fromStdString(p.operation), QString("aten::empty"));
    QCOMPARE(QString::fromStdString(p.annotation), QString("## forward ##"));
  }

  // A peak between two operations (the runtime allocates a collective's buffer as it issues it,
  // before its wait; a trace between two ops) is named by its neighbours within its step.
  void peakBetweenOperations() {
    const auto peaks = peaksByDevice({
        op("user_annotation", "ProfilerStep#1", 0, 100),
        op("cpu_op", "forward lm_head", 10, 20),
        op("cpu_op", "aten::mm", 15, 15),
        op("cpu_op", "aten::addmm", 12, 2),
        op("cpu_op", "backward lm_head", 40, 20),
        op("cpu_op", "aten::mm_backward", 40, 5),
        op("cpu_op", "optimizer step", 150, 20),
        memory(5, 1, 100, 100, 100, 1, 0),
        memory(35, 1, 900, 900, 800, 2, 0),
        memory(50, 1, 900, 100, -800, 2, 0),
        memory(80, 2, 900, 100, 0, 3, 1),
        memory(90, 2, 950, 950, 850, 4, 1),
    });
    QCOMPARE(peaks.size(), std::size_t(2));
    // Device 0: at 35 us, after the forward (its outer op, not the aten::mm ending with it) and
    // before the backward (the outer op starting then).
    QCOMPARE(peaks[0].allocatedAtNs, TimeNs(35'000));
    QCOMPARE(*peaks[0].step, std::int64_t(1));
    QCOMPARE(QString::fromStdString(peaks[0].operation), QString("between forward lm_head and backward lm_head"));
    // Device 1: at 90 us, nothing after it within the step (the optimizer runs past the step's end).
    QCOMPARE(peaks[1].allocatedAtNs, TimeNs(90'000));
    QCOMPARE(QString::fromStdString(peaks[1].operation), QString("after backward lm_head"));
  }

  // The neighbours are looked for within 50 ms of the moment: an op further away does not name it
  // (a long step of an imported trace is not read whole for one peak).
  void neighboursWithin50Ms() {
    const auto peaks = peaksByDevice({
        op("user_annotation", "ProfilerStep#1", 0, 200000),
        op("cpu_op", "early op", 0, 10000),
        op("cpu_op", "late op", 150000, 10000),
        memory(5, 1, 100, 100, 100, 1, 0),
        memory(120000, 1, 900, 900, 800, 2, 0),
        memory(5, 1, 100, 100, 100, 3, 1),
        memory(80000, 1, 900, 900, 800, 4, 1),
    });
    QCOMPARE(peaks.size(), std::size_t(2));
    // At 120 ms: the early op ended 110 ms before, the late one starts 30 ms after.
    QCOMPARE(QString::fromStdString(peaks[0].operation), QString("before late op"));
    // At 80 ms: 70 ms from either: nothing named, the step still found.
    QCOMPARE(QString::fromStdString(peaks[1].operation), QString());
    QCOMPARE(*peaks[1].step, std::int64_t(1));
  }

  void downsamplingKeepsPeaks() {
    const std::vector<CounterSample> v = {{0, 1}, {1, 5}, {2, 3}, {10, 2}, {11, 9}, {19, 4}, {25, 100}};
    const auto d = downsampleMax(v, 0, 20, 2);
    QCOMPARE(d.size(), std::size_t(2));
    QCOMPARE(d[0].tsNs, TimeNs(1));
    QCOMPARE(d[0].value, 5.0);
    QCOMPARE(d[1].tsNs, TimeNs(11));
    QCOMPARE(d[1].value, 9.0);
    QVERIFY(downsampleMax(v, 0, 20, 0).empty());
    QCOMPARE(downsampleMax(v, 0, 30, 1000).size(), v.size());  // more buckets than samples: all kept
  }
};

QTEST_GUILESS_MAIN(TestMemoryPeaks)
#include "tst_memory_peaks.moc"
