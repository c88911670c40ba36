#include "core/analysis/comparison.h"

#include <algorithm>
#include <climits>

#include <map>

#include "core/analysis/memory_peaks.h"
#include "core/analysis/step_breakdown.h"
#include "core/util/error.h"

namespace shardscope::core {
namespace {

ComparisonRow& row(Comparison& c, const std::string& key, const std::string& label, bool lowerIsBetter) {
  for (auto& r : c.rows)
    if (r.key == key) return r;
  ComparisonRow r;
  r.key = key;
  r.label = label;
  r.lowerIsBetter = lowerIsBetter;
  r.values.assign(c.runs.size(), std::nullopt);
  c.rows.push_back(std::move(r));
  return c.rows.back();
}

}  // namespace

Comparison compareRuns(TraceStore& store, const std::vector<Id>& runs, std::size_t baseline, const CancelToken* cancel) {
  if (runs.empty()) throw Error("compare: no runs given");
  if (baseline >= runs.size()) throw Error("compare: the baseline is not one of the runs");
  Comparison c;
  c.runs = runs;
  c.baseline = baseline;
  for (Id id : runs) {
    auto r = store.run(id);
    if (!r) throw Error(store.path() + ": no run with id " + std::to_string(id));
    c.names.push_back(r->name);
  }
  // Fixed row order, so tables line up between comparisons.
  row(c, "step_time_ms", "step time (ms, mean over ranks and steps)", true);
  row(c, metric_keys::kTokensPerSecond, "throughput (tokens/s)", false);
  row(c, "compute_pct", "compute (% of step)", false);
  row(c, "comm_pct", "communication (% of step)", true);
  row(c, "exposed_comm_pct", "exposed communication (% of step)", true);
  row(c, "overlap_pct", "communication overlapped (%)", false);
  row(c, "idle_pct", "device idle (% of step)", true);
  row(c, "peak_allocated_gib", "peak memory allocated (GiB, max over ranks)", true);
  row(c, "peak_reserved_gib", "peak memory reserved (GiB, max over ranks)", true);
  row(c, metric_keys::kInitSeconds, "initialisation (s)", true);
  row(c, metric_keys::kCheckpointSaveSeconds, "checkpoint save (s)", true);

  for (std::size_t i = 0; i < runs.size(); ++i) {
    const Id id = runs[i];
    const auto steps = computeStepBreakdown(store, id, cancel);
    double stepNs = 0, compute = 0, comm = 0, exposed = 0, idle = 0, overlapped = 0, n = 0;
    bool anyStep = false;
    std::int64_t firstStep = INT64_MAX, lastStep = -1;
    for (const auto& b : steps) {
      anyStep = anyStep || b.step >= 0;
      if (b.step >= 0) firstStep = std::min(firstStep, b.step), lastStep = std::max(lastStep, b.step);
    }
    // Runs we trained (or simulated) start with a warm-up step (lazy optimizer state, ZeRO-3's first
    // gathers): like their tokens_per_s and step_time_ms metrics, the figures are the steady state
    // (steps after the first). Imported traces keep every step: the profiler's schedule already
    // skipped the warm-up.
    const auto source = store.run(id)->source;
    const bool skipWarmup = (source == RunSource::Runtime || source == RunSource::Simulated) && lastStep > firstStep;
    for (const auto& b : steps) {
      if (anyStep && b.step < 0) continue;  // events outside steps do not make a step
      if (skipWarmup && b.step == firstStep) continue;
      stepNs += static_cast<double>(b.stepNs);
      compute += static_cast<double>(b.computeNs);
      comm += static_cast<double>(b.commNs);
      exposed += static_cast<double>(b.exposedCommNs);
      idle += static_cast<double>(b.idleNs);
      overlapped += static_cast<double>(b.overlappedCommNs);
      n += 1;
    }
    if (n > 0 && stepNs > 0) {
      row(c, "step_time_ms", "", true).values[i] = stepNs / n / 1e6;
      row(c, "compute_pct", "", false).values[i] = 100.0 * compute / stepNs;
      row(c, "comm_pct", "", true).values[i] = 100.0 * comm / stepNs;
      row(c, "exposed_comm_pct", "", true).values[i] = 100.0 * exposed / stepNs;
      row(c, "idle_pct", "", true).values[i] = 100.0 * idle / stepNs;
      if (comm > 0) row(c, "overlap_pct", "", false).values[i] = 100.0 * overlapped / comm;
    }
    const auto peaks = computeMemoryPeaks(store, id);
    std::map<int, std::pair<double, double>> perRank;  // device memory only (CUDA/HIP), else CPU
    for (const auto& p : peaks) {
      auto& [a, r] = perRank[p.rank];
      a = std::max(a, static_cast<double>(p.peakAllocatedBytes));
      r = std::max(r, static_cast<double>(p.peakReservedBytes));
    }
    constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
    for (const auto& [rank, ar] : perRank) {
      auto& all = row(c, "peak_allocated_gib", "", true).values[i];
      all = std::max(all.value_or(0), ar.first / kGiB);
      auto& res = row(c, "peak_reserved_gib", "", true).values[i];
      res = std::max(res.value_or(0), ar.second / kGiB);
      row(c, "peak_allocated_gib_rank" + std::to_string(rank), "peak memory allocated, rank " + std::to_string(rank) + " (GiB)",
          true)
          .values[i] = ar.first / kGiB;
    }
    for (const char* key : {metric_keys::kTokensPerSecond, metric_keys::kInitSeconds, metric_keys::kCheckpointSaveSeconds})
      if (auto v = store.metric(id, std::nullopt, key)) row(c, key, "", true).values[i] = *v;
  }

  for (auto& r : c.rows) {
    r.deltaPct.assign(runs.size(), std::nullopt);
    const auto& base = r.values[baseline];
    for (std::size_t i = 0; i < runs.size(); ++i) {
      if (r.values[i] && base && *base != 0) r.deltaPct[i] = (*r.values[i] - *base) / *base * 100.0;
      if (!r.values[i]) continue;
      if (!r.best || (r.lowerIsBetter ? *r.values[i] < *r.values[*r.best] : *r.values[i] > *r.values[*r.best])) r.best = i;
    }
    // A best value is only meaningful when at least two runs have one.
    std::size_t have = 0;
    for (const auto& v : r.values) have += v.has_value();
    if (have < 2) r.best.reset();
  }
  return c;
}

}  // namespace shardscope::core
