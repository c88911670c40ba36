#include "core/analysis/memory_peaks.h"

#include "core/model/memory_category.h"
#include "core/util/units.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <optional>

namespace shardscope::core {

std::vector<CounterSample> downsampleMax(const std::vector<CounterSample>& samples, TimeNs t0, TimeNs t1, int buckets) {
  std::vector<CounterSample> out;
  if (buckets <= 0 || t1 <= t0) return out;
  const double width = static_cast<double>(t1 - t0) / buckets;
  int current = -1;
  for (const auto& s : samples) {
    if (s.tsNs < t0 || s.tsNs >= t1) continue;
    const int b = std::min(buckets - 1, static_cast<int>(static_cast<double>(s.tsNs - t0) / width));
    if (b != current) {
      out.push_back(s);
      current = b;
    } else if (s.value > out.back().value) {
      out.back() = s;
    }
  }
  return out;
}

namespace {

bool isOperationOrWait(const Event& e) { return e.cat == "cpu_op" || e.cat == "Operator" || e.cat == "wait"; }

// "between A and B", "after A" or "before B": the operations (or waits) on the rank's CPU threads that
// ended last before t and started first after it, within 50 ms and the step; empty if there are none.
// Of two that end (start) together, the outer one, which names the work rather than a detail of it.
std::string neighbourOperations(TraceStore& store, const RunSummary& summary, RankId rankId, TimeNs t, const Step* step) {
  // 50 ms either side, inside the step: a long step of an imported trace holds millions of ops.
  constexpr TimeNs kReach = 50'000'000;
  const TimeNs t0 = step ? std::max(step->startNs, t - kReach) : t - kReach;
  const TimeNs t1 = step ? std::min(step->endNs, t + kReach) : t + kReach;
  std::optional<Event> before, after;
  for (const auto& tr : summary.tracks) {
    if (tr.track.rankId != rankId || tr.track.kind != TrackKind::CpuThread) continue;
    for (Event& e : store.eventsInWindow(tr.track.id, t0, t1)) {
      if (!isOperationOrWait(e)) continue;
      if (e.endNs <= t && e.endNs >= t0 &&
          (!before || e.endNs > before->endNs || (e.endNs == before->endNs && e.startNs < before->startNs)))
        before = e;
      if (e.startNs >= t && e.startNs <= t1 &&
          (!after || e.startNs < after->startNs || (e.startNs == after->startNs && e.endNs > after->endNs)))
        after = std::move(e);
    }
  }
  if (before && after) return "between " + std::string(before->name) + " and " + std::string(after->name);
  if (before) return "after " + std::string(before->name);
  if (after) return "before " + std::string(after->name);
  return {};
}

}  // namespace

std::vector<MemoryPeak> computeMemoryPeaks(TraceStore& store, RunId runId, const std::vector<SnapshotFigures>* snapshots) {
  std::vector<MemoryPeak> out;
  std::vector<SnapshotFigures> ownSnapshots;
  if (!snapshots) {
    ownSnapshots = computeSnapshotFigures(store, runId, /*topN=*/0);
    snapshots = &ownSnapshots;
  }
  const RunSummary summary = store.summary(runId);
  const std::vector<Step> steps = store.steps(runId);
  for (const Rank& rank : summary.ranks) {
    std::map<std::pair<int, int>, MemoryPeak> peaks;
    // Records come in time order; consecutive ones are usually of the same device.
    std::pair<int, int> lastKey{-1, -1};
    MemoryPeak* last = nullptr;
    store.forEachMemoryEvent(
        rank.id,
        [&](const MemoryEvent& m) {
          if (!last || lastKey.first != m.deviceType || lastKey.second != m.deviceId) {
            auto [it, fresh] = peaks.try_emplace({m.deviceType, m.deviceId});
            lastKey = it->first;
            last = &it->second;
            if (fresh) {
              MemoryPeak& p = it->second;
              p.rank = rank.rank;
              p.deviceType = m.deviceType;
              p.deviceId = m.deviceId;
              p.peakAllocatedBytes = m.totalAllocated;
              p.allocatedAtNs = m.tsNs;
              p.peakReservedBytes = m.totalReserved;
              p.reservedAtNs = m.tsNs;
              return;
            }
          }
          // The first time the maximum is reached is the moment it was caused.
          MemoryPeak& p = *last;
          if (m.totalAllocated > p.peakAllocatedBytes) {
            p.peakAllocatedBytes = m.totalAllocated;
            p.allocatedAtNs = m.tsNs;
          }
          if (m.totalReserved > p.peakReservedBytes) {
            p.peakReservedBytes = m.totalReserved;
            p.reservedAtNs = m.tsNs;
          }
        },
        /*totalsOnly=*/true);
    // Runs we trained also store the allocator's own peak counters (torch.cuda.max_memory_allocated /
    // max_memory_reserved on CUDA, the counting allocator's on the host): a peak between two memory
    // records shows only there. The larger of the two is the peak (docs/METRICS.md, "Peak memory").
    if (summary.run.source == RunSource::Runtime) {
      const bool cudaRank = store.metric(runId, rank.id, "peak_host_allocated_bytes").has_value();
      int cudaId = 0;
      if (cudaRank && rank.device.rfind("cuda:", 0) == 0) cudaId = std::atoi(rank.device.c_str() + 5);
      auto raise = [&](int type, int id, const char* allocatedKey, const char* reservedKey) {
        const auto a = store.metric(runId, rank.id, allocatedKey);
        const auto r = reservedKey ? store.metric(runId, rank.id, reservedKey) : std::nullopt;
        if (!a && !r) return;
        auto [it, fresh] = peaks.try_emplace({type, id});
        MemoryPeak& p = it->second;
        if (fresh) {
          p.rank = rank.rank;
          p.deviceType = type;
          p.deviceId = id;
        }
        if (a && static_cast<std::int64_t>(*a) > p.peakAllocatedBytes) {
          p.peakAllocatedBytes = static_cast<std::int64_t>(*a);
          p.allocatedFromCounter = true;
        }
        if (r && static_cast<std::int64_t>(*r) > p.peakReservedBytes) {
          p.peakReservedBytes = static_cast<std::int64_t>(*r);
          p.reservedFromCounter = true;
        }
      };
      if (cudaRank) {
        raise(1, cudaId, "peak_allocated_bytes", "peak_reserved_bytes");
        raise(0, 0, "peak_host_allocated_bytes", nullptr);
      } else {
        raise(0, 0, "peak_allocated_bytes", nullptr);
      }
    }
    // A memory snapshot of the rank's device: its peaks are memory_viz's (docs/METRICS.md, "Memory
    // snapshots"), whatever the sampled records said.
    for (const SnapshotFigures& f : *snapshots) {
      if (f.rank != rank.rank) continue;
      auto [it, fresh] = peaks.try_emplace({1, f.device});
      MemoryPeak& p = it->second;
      p.rank = rank.rank;
      p.deviceType = 1;
      p.deviceId = f.device;
      p.peakAllocatedBytes = f.peakActiveBytes;
      p.allocatedAtNs = f.peakActiveNs;
      p.peakReservedBytes = f.peakReservedBytes;
      p.reservedAtNs = f.peakReservedNs;
      p.allocatedFromCounter = p.reservedFromCounter = false;
      p.fromSnapshot = true;
    }
    for (auto& [key, p] : peaks) {
      const Step* inStep = nullptr;
      for (const Step& s : steps)
        if (s.rankId == rank.id && p.allocatedAtNs >= s.startNs && p.allocatedAtNs < s.endNs) inStep = &s;
      if (inStep) p.step = inStep->step;
      // What was running: the innermost CPU op and user annotation covering the moment; where no
      // op covers it, the wait the thread was in (our runtime's "wait all_gather param ...": the
      // peak then is that collective's buffer, allocated before the wait began).
      TimeNs opStart = INT64_MIN, annStart = INT64_MIN, waitStart = INT64_MIN;
      std::string wait;
      for (const auto& t : summary.tracks) {
        if (t.track.rankId != rank.id || t.track.kind != TrackKind::CpuThread) continue;
        for (const Event& e : store.eventsInWindow(t.track.id, p.allocatedAtNs, p.allocatedAtNs + 1)) {
          if (e.startNs > p.allocatedAtNs || e.endNs < p.allocatedAtNs) continue;
          if (e.cat == "user_annotation") {
            if (e.startNs >= annStart && e.name.rfind("ProfilerStep", 0) != 0) {
              annStart = e.startNs;
              p.annotation = e.name;
            }
          } else if (e.cat == "cpu_op" || e.cat == "Operator") {
            if (e.startNs >= opStart) {
              opStart = e.startNs;
              p.operation = e.name;
            }
          } else if (e.cat == "wait" && e.startNs >= waitStart) {
            waitStart = e.startNs;
            wait = e.name;
          }
        }
      }
      if (p.operation.empty()) p.operation = wait;
      // Nothing ran then on the rank's CPU threads: the moment fell between two operations (our
      // runtime allocates a collective's buffer as it issues it, before any wait; a Kineto trace
      // between two ops). Name it by its neighbours within 50 ms, inside its step.
      if (p.operation.empty()) p.operation = neighbourOperations(store, summary, rank.id, p.allocatedAtNs, inStep);
      // The runtime stores its allocator's breakdown at the peak (CPU allocator: device type 0).
      if (summary.run.source == RunSource::Runtime && p.deviceType == 0) {
        for (const MemoryCategory cat : memoryCategories()) {
          const std::string name(memoryCategoryKey(cat));
          if (auto v = store.metric(runId, rank.id, "peak_breakdown." + name))
            p.breakdown.emplace_back(name, static_cast<std::int64_t>(*v));
        }
      }
      out.push_back(p);
    }
  }
  return out;
}

namespace {

std::int64_t categoryBytes(const MemoryPeak& p, std::string_view key) {
  for (const auto& [name, bytes] : p.breakdown)
    if (name == key) return bytes;
  return 0;
}

// What sizes a category in this run's configuration, and what would shrink it (never a knob the run
// already has at the value suggested). The knob's key and the advice.
std::pair<std::string, std::string> categoryAdvice(MemoryCategory c, const ConfigKnobs& k) {
  using F = ConfigKnobs::Family;
  const bool shardsParams = (k.family == F::Zero && k.zeroStage == 3) || k.family == F::Fsdp;
  const std::string ranks = k.worldSize ? std::to_string(*k.worldSize) + " ranks" : std::string("the ranks");
  switch (c) {
    case MemoryCategory::Parameters:
      if (!k.known()) return {"", "each rank's copy (or shard) of the parameters"};
      if (shardsParams)
        return {std::string(knob_key::kWorldSize), "each rank keeps its shard of the parameters: more ranks make it smaller"};
      return {std::string(knob_key::kStrategy),
              "every rank holds all parameters under " + k.strategy + ": ZeRO-3 or FSDP would shard them over " + ranks};
    case MemoryCategory::GatheredParameters:
      if (k.family == F::Zero)
        return {std::string(knob_key::kMaxLiveParameters),
                "units all-gathered for forward and backward: max_live_parameters" +
                    (k.maxLiveParameters ? " (now " + formatElements(*k.maxLiveParameters) + ")" : std::string()) +
                    " caps what stays gathered, and prefetch_bucket_size" +
                    (k.prefetchBucketSize ? " (now " + formatElements(*k.prefetchBucketSize) + ")" : std::string()) +
                    " how much is fetched ahead"};
      if (k.family == F::Fsdp) {
        std::string prefetch =
            k.backwardPrefetch && *k.backwardPrefetch != BackwardPrefetch::None
                ? "backward_prefetch=" + std::string(toString(*k.backwardPrefetch)) + " keeps the next unit gathered too; "
                : std::string();
        return {std::string(knob_key::kBackwardPrefetch),
                "units all-gathered for forward and backward: " + prefetch + "smaller wrapped units gather less at a time"};
      }
      return {"", "parameters gathered whole for compute"};
    case MemoryCategory::Gradients:
      if (k.family == F::Ddp)
        return {
            std::string(knob_key::kGradientAsBucketView),
            k.gradientAsBucketView.value_or(false)
                ? "every rank holds the whole gradient (in its buckets, gradient_as_bucket_view is on): ZeRO-2 or FSDP would "
                  "shard it"
                : "every rank holds the whole gradient and a copy in its buckets: gradient_as_bucket_view=true saves the copy"};
      if (k.family == F::Zero && k.zeroStage == 1)
        return {std::string(knob_key::kStrategy), "ZeRO-1 keeps the whole gradient on every rank: ZeRO-2 shards it"};
      return {std::string(knob_key::kWorldSize), "each rank keeps its shard of the gradient: more ranks make it smaller"};
    case MemoryCategory::OptimizerState: {
      const std::string what = k.optimizer == "adamw" ? "AdamW keeps two fp32 states per parameter" : "the optimizer's state";
      if (k.family == F::Ddp) return {std::string(knob_key::kStrategy), what + " on every rank: ZeRO-1 or higher shards it"};
      if (k.family == F::Zero && (k.offloadOptimizer.empty() || k.offloadOptimizer == "none"))
        return {std::string(knob_key::kOffloadOptimizer), what + ", sharded: offload_optimizer=cpu moves it to the host"};
      if (k.optimizer == "adamw") return {std::string(knob_key::kOptimizer), what + " (sharded): SGD keeps at most one"};
      return {"", what};
    }
    case MemoryCategory::Activations: {
      const std::string size = k.microBatch && k.seqLen ? " (micro_batch " + std::to_string(*k.microBatch) + " x seq_len " +
                                                              std::to_string(*k.seqLen) + ")"
                                                        : std::string();
      if (k.known() && !k.activationCheckpointing.value_or(false))
        return {std::string(knob_key::kActivationCheckpointing),
                "what forward keeps for backward" + size + ": activation_checkpointing=true recomputes it instead"};
      return {std::string(knob_key::kMicroBatch),
              "what forward keeps for backward" + size + ": a smaller micro_batch (with more accumulation) shrinks it"};
    }
    case MemoryCategory::CommBuffers:
      if (k.family == F::Ddp)
        return {std::string(knob_key::kBucketCapMb),
                "gradient buckets" + (k.bucketCapMb ? " (bucket_cap_mb " + formatFixed(*k.bucketCapMb, 0) + ")" : std::string()) +
                    " and collective buffers"};
      if (k.family == F::Zero)
        return {std::string(knob_key::kReduceBucketSize),
                "reduce buckets" +
                    (k.reduceBucketSize ? " (reduce_bucket_size " + formatElements(*k.reduceBucketSize) + ")" : std::string()) +
                    (k.overlapComm.value_or(false) ? ", two of them with overlap_comm" : std::string()) +
                    " and collective buffers: a smaller reduce_bucket_size holds less"};
      if (k.family == F::Fsdp) return {"", "reduce-scatter inputs and outputs of each unit's gradients"};
      return {"", "collective buffers"};
    case MemoryCategory::Other:
      break;
  }
  return {"", "initialisation scratch and what no category claims"};
}

}  // namespace

std::optional<PeakExplanation> explainPeak(const MemoryPeak& peak, const ConfigKnobs& knobs) {
  if (peak.breakdown.empty()) return std::nullopt;
  std::optional<MemoryCategory> top;
  std::int64_t topBytes = -1, total = 0;
  for (MemoryCategory c : memoryCategories()) {
    const std::int64_t b = categoryBytes(peak, memoryCategoryKey(c));
    total += b;
    if (b > topBytes) {
      topBytes = b;
      top = c;
    }
  }
  if (!top || topBytes <= 0) return std::nullopt;
  PeakExplanation e;
  e.category = std::string(memoryCategoryKey(*top));
  e.bytes = topBytes;
  const auto [knob, advice] = categoryAdvice(*top, knobs);
  e.knob = knob;
  e.text = std::string(memoryCategoryLabel(*top)) + " hold the most at the peak, " + formatBytes(static_cast<double>(topBytes)) +
           " of " + formatBytes(static_cast<double>(total)) + " (" +
           formatFixed(100.0 * static_cast<double>(topBytes) / static_cast<double>(std::max<std::int64_t>(total, 1)), 0) +
           " %): " + advice;
  return e;
}

std::optional<PeakExplanation> explainPeakDifference(const MemoryPeak& base, const std::string& baseName, const MemoryPeak& other,
                                                     const std::string& otherName, const ConfigKnobs& otherKnobs) {
  if (base.breakdown.empty() || other.breakdown.empty()) return std::nullopt;
  std::optional<MemoryCategory> top;
  std::int64_t grew = 0;
  for (MemoryCategory c : memoryCategories()) {
    const std::int64_t d = categoryBytes(other, memoryCategoryKey(c)) - categoryBytes(base, memoryCategoryKey(c));
    if (d > grew) {
      grew = d;
      top = c;
    }
  }
  if (!top) return std::nullopt;
  PeakExplanation e;
  e.category = std::string(memoryCategoryKey(*top));
  e.bytes = grew;
  const auto [knob, advice] = categoryAdvice(*top, otherKnobs);
  e.knob = knob;
  const std::int64_t delta = other.peakAllocatedBytes - base.peakAllocatedBytes;
  const std::string key(memoryCategoryKey(*top));
  e.text = otherName + " peaks " + formatBytes(static_cast<double>(std::abs(delta))) + (delta >= 0 ? " above " : " below ") +
           baseName + "; " + std::string(memoryCategoryLabel(*top)) + " grew the most, " +
           formatBytes(static_cast<double>(categoryBytes(base, key))) + " -> " +
           formatBytes(static_cast<double>(categoryBytes(other, key))) + " (+" + formatBytes(static_cast<double>(grew)) +
           "): " + advice;
  return e;
}

}  // namespace shardscope::core
