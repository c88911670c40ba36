#pragma once
// Runs written straight into a TraceStore for the UI tests (no files from outside the test): ranks,
// a CPU thread with steps, annotations and operations, a communication lane with all-reduces,
// [memory] records with a known peak, and the metrics the runtime stores.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/model/memory_category.h"
#include "core/storage/store_access.h"
#include "core/storage/database.h"
#include "core/storage/trace_store.h"

namespace shardscope::test {

struct RunSpec {
  std::string name = "run";
  std::string strategy = "ddp";
  core::RunSource source = core::RunSource::Runtime;
  int ranks = 2;
  int steps = 4;
  core::TimeNs t0 = 1'700'000'000'000'000'000;  // absolute, like the runtime's clock
  core::TimeNs stepNs = 10'000'000;             // 10 ms
  core::TimeNs computeNs = 6'000'000;
  core::TimeNs commStartNs = 5'000'000;  // within the step
  core::TimeNs commNs = 3'000'000;
  int memorySamples = 400;              // per rank; 0: no memory records
  std::int64_t peakBytes = 96ll << 20;  // rank 0's peak; rank r adds r MiB
  double peakAt = 0.62;                 // where the peak falls, as a fraction of the run
  bool breakdown = true;                // peak_breakdown.* and model_state.* metrics
  // The category counter tracks the runtime records (core::memoryCategoryTrackName): at every memory
  // record the total split into the breakdown's fixed parts (parameters first) and activations,
  // equal to the peak_breakdown metrics at the peak.
  bool categoryTracks = false;
  double tokensPerS = 1000;
  double initS = 0.5;
  std::string commName = "allreduce";  // the runtime names its collectives "all_reduce grad bucket 0"
  std::string configJson = "{}";       // the run's stored configuration (run-config JSON for runs of ours)
  bool runMetrics = true;              // tokens_per_s and init_time_s (an imported trace has neither)
};

inline std::int64_t peakOf(const RunSpec& s, int rank) { return s.peakBytes + (static_cast<std::int64_t>(rank) << 20); }

inline core::RunId writeRun(core::TraceStore& store, const RunSpec& s) {
  using namespace core;
  Run run;
  run.name = s.name;
  run.strategy = s.strategy;
  run.source = s.source;
  run.status = RunStatus::Completed;
  run.worldSize = s.ranks;
  run.configJson = s.configJson;
  const RunId runId = store.createRun(run);
  const TimeNs end = s.t0 + s.steps * s.stepNs;
  const TimeNs peakT = s.t0 + static_cast<TimeNs>(s.peakAt * static_cast<double>(end - s.t0));
  const Id cpuOp = store.intern("cpu_op"), ann = store.intern("user_annotation");
  const Id mm = store.intern("aten::mm"), fwd = store.intern("## forward ##"), ar = store.intern(s.commName);
  std::vector<RankId> rankIds;
  for (int r = 0; r < s.ranks; ++r) {
    Rank rk;
    rk.runId = runId;
    rk.rank = r;
    const RankId rankId = store.addRank(rk);
    rankIds.push_back(rankId);
    Track cpu;
    cpu.rankId = rankId;
    cpu.kind = TrackKind::CpuThread;
    cpu.name = "main";
    cpu.tid = 1;
    const TrackId cpuTrack = store.addTrack(cpu);
    Track comm;
    comm.rankId = rankId;
    comm.kind = TrackKind::Comm;
    comm.name = "comm";
    comm.sortIndex = 1;
    const TrackId commTrack = store.addTrack(comm);
    if (s.memorySamples > 0) {
      for (const char* which : {"allocated", "reserved"}) {
        Track t;
        t.rankId = rankId;
        t.kind = TrackKind::Counter;
        t.name = std::string("memory ") + which + " (cpu:0)";
        t.derivedFrom = std::string("memory_events:") + which + ":0:0";
        t.sortIndex = 2;
        store.addTrack(t);
      }
    }
    // The fixed parts of the breakdown (activations take the rest), in stacking order.
    const std::vector<std::pair<MemoryCategory, std::int64_t>> parts = {{MemoryCategory::Parameters, 16 << 20},
                                                                        {MemoryCategory::Gradients, 16 << 20},
                                                                        {MemoryCategory::OptimizerState, 32 << 20},
                                                                        {MemoryCategory::CommBuffers, 2 << 20},
                                                                        {MemoryCategory::Other, 4096}};
    std::vector<std::pair<MemoryCategory, TrackId>> categoryTrack;
    if (s.categoryTracks && s.memorySamples > 0)
      for (const MemoryCategory c : memoryCategories()) {
        if (c == MemoryCategory::GatheredParameters) continue;  // as a DDP run: never used, no track
        Track t;
        t.rankId = rankId;
        t.kind = TrackKind::Counter;
        t.name = memoryCategoryTrackName(c, 0, 0);
        t.sortIndex = 900 + static_cast<int>(categoryTrack.size());
        categoryTrack.emplace_back(c, store.addTrack(t));
      }
    Transaction tx(shardscope::core::storeDb(store));
    BulkWriter w(store);
    auto addCategories = [&](const MemoryEvent& m) {
      std::int64_t left = m.totalAllocated;
      for (const auto& [c, track] : categoryTrack) {
        std::int64_t v = 0;
        if (c == MemoryCategory::Activations) {
          std::int64_t fixed = 0;  // what the fixed parts will take of the rest
          std::int64_t rest = left;
          for (const auto& [pc, pb] : parts)
            if (pc == MemoryCategory::CommBuffers || pc == MemoryCategory::Other) {
              fixed += std::min(rest, pb);
              rest -= std::min(rest, pb);
            }
          v = left - fixed;
        } else {
          for (const auto& [pc, pb] : parts)
            if (pc == c) v = std::min(left, pb);
        }
        left -= v;
        w.addCounter(track, m.tsNs, static_cast<double>(v));
      }
    };
    for (int k = 0; k < s.steps; ++k) {
      const TimeNs st = s.t0 + k * s.stepNs;
      store.addStep(Step{rankId, k, st, st + s.stepNs});
      EventRecord e;
      e.trackId = cpuTrack;
      e.step = k;
      // The forward annotation covers the first 70 % of the step; an aten::mm inside it.
      e.nameId = fwd;
      e.catId = ann;
      e.category = Category::Other;
      e.startNs = st;
      e.endNs = st + s.stepNs * 7 / 10;
      w.addEvent(e);
      e.nameId = mm;
      e.catId = cpuOp;
      e.category = Category::Computation;
      e.startNs = st + 1000;
      e.endNs = st + 1000 + s.computeNs;
      w.addEvent(e);
      EventRecord c;
      c.trackId = commTrack;
      c.step = k;
      c.nameId = ar;
      c.catId = cpuOp;
      c.category = Category::Communication;
      c.collOp = CollectiveOp::AllReduce;
      c.startNs = st + s.commStartNs;
      c.endNs = st + s.commStartNs + s.commNs;
      c.bytes = 1 << 20;
      w.addEvent(c);
    }
    // Memory: a slow ramp with noise, the peak at peakT, then the same value again later (the peak
    // is the first time the maximum is reached).
    const std::int64_t peak = peakOf(s, r);
    std::int64_t reserved = 0;
    for (int i = 0; i < s.memorySamples; ++i) {
      MemoryEvent m;
      m.rankId = rankId;
      m.tsNs = s.t0 + static_cast<TimeNs>((static_cast<double>(i) + 0.5) / s.memorySamples * static_cast<double>(end - s.t0));
      const std::int64_t ramp = (peak / 2) * i / std::max(1, s.memorySamples) + ((i * 7919) % 97) * 4096;
      m.totalAllocated = std::min(ramp, peak - 4096);
      if (i == s.memorySamples - 3) m.totalAllocated = peak;  // equal to the peak, later: not the peak
      m.bytes = 4096;
      m.addr = i;
      reserved = std::max(reserved, (m.totalAllocated + (2 << 20) - 1) / (2 << 20) * (2 << 20));
      m.totalReserved = reserved;
      w.addMemoryEvent(m);
      addCategories(m);
      if (i + 1 < s.memorySamples && m.tsNs < peakT &&
          s.t0 + static_cast<TimeNs>((static_cast<double>(i) + 1.5) / s.memorySamples * static_cast<double>(end - s.t0)) >=
              peakT) {
        MemoryEvent p = m;
        p.tsNs = peakT;
        p.totalAllocated = peak;
        reserved = std::max(reserved, (peak + (2 << 20) - 1) / (2 << 20) * (2 << 20));
        p.totalReserved = reserved;
        w.addMemoryEvent(p);
        addCategories(p);
      }
    }
    w.finish();
    tx.commit();
    if (s.breakdown) {
      const std::int64_t params = 16 << 20, grads = 16 << 20, optim = 32 << 20, buffers = 2 << 20, other = 4096;
      store.setMetric(runId, rankId, "peak_breakdown.parameters", static_cast<double>(params));
      store.setMetric(runId, rankId, "peak_breakdown.gradients", static_cast<double>(grads));
      store.setMetric(runId, rankId, "peak_breakdown.optimizer_state", static_cast<double>(optim));
      store.setMetric(runId, rankId, "peak_breakdown.comm_buffers", static_cast<double>(buffers));
      store.setMetric(runId, rankId, "peak_breakdown.other", static_cast<double>(other));
      store.setMetric(runId, rankId, "peak_breakdown.activations",
                      static_cast<double>(peak - params - grads - optim - buffers - other));
      store.setMetric(runId, rankId, "model_state.parameters_bytes", static_cast<double>(params / (r + 1)));
      store.setMetric(runId, rankId, "model_state.gradients_bytes", static_cast<double>(grads));
      store.setMetric(runId, rankId, "model_state.optimizer_bytes", static_cast<double>(optim));
      store.setMetric(runId, rankId, "model_state.buffers_bytes", 0.0);
    }
  }
  if (s.runMetrics) {
    store.setMetric(runId, std::nullopt, "tokens_per_s", s.tokensPerS);
    store.setMetric(runId, std::nullopt, "init_time_s", s.initS);
  }
  return runId;
}

}  // namespace shardscope::test
