#include "core/analysis/comparison.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "core/analysis/run_figures.h"
#include "core/util/error.h"
#include "core/util/json.h"

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

Comparison compareRuns(TraceStore& store, const std::vector<RunId>& runs, std::size_t baseline, const CancelToken* cancel,
                       const AnalysisSource& source) {
  if (runs.empty()) throw Error("compare: no runs given");
  if (baseline >= runs.size()) throw Error("compare: the baseline is not one of the runs");
  Comparison c;
  c.runs = runs;
  c.baseline = baseline;
  std::vector<std::string> configs;
  for (RunId id : runs) {
    auto r = store.run(id);
    if (!r) throw Error(store.path() + ": no run with id " + std::to_string(id.value()));
    c.names.push_back(r->name);
    configs.push_back(r->configJson);
  }
  c.configDiff = configDiff(configs);
  // Fixed row order, so tables line up between comparisons.
  row(c, "step_time_ms", "step time (ms, mean of counted steps)", true);
  row(c, "step_time_p50_ms", "step time p50 (ms)", true);
  row(c, "step_time_p90_ms", "step time p90 (ms)", true);
  row(c, "step_spread_pct", "step spread (%, p90-p10 over p50)", true);
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
    const RunId id = runs[i];
    // One definition of every figure (run_figures.h): the same numbers as the run summary,
    // `analyze` and the reports.
    if (cancel) cancel->throwIfCancelled();
    std::shared_ptr<const RunAnalysis> analysis = source ? source(id) : nullptr;
    const RunFigures& f = c.figures.emplace_back(analysis ? runFigures(store, id, analysis->steps, analysis->memoryPeaks)
                                                          : computeRunFigures(store, id, cancel));
    row(c, "step_time_ms", "", true).values[i] = f.stepTimeMs;
    row(c, "step_time_p50_ms", "", true).values[i] = f.stepP50Ms;
    row(c, "step_time_p90_ms", "", true).values[i] = f.stepP90Ms;
    row(c, "step_spread_pct", "", true).values[i] = f.stepSpreadPct;
    row(c, "compute_pct", "", false).values[i] = f.computePct;
    row(c, "comm_pct", "", true).values[i] = f.commPct;
    row(c, "exposed_comm_pct", "", true).values[i] = f.exposedCommPct;
    row(c, "idle_pct", "", true).values[i] = f.idlePct;
    row(c, "overlap_pct", "", false).values[i] = f.overlapPct;
    row(c, metric_keys::kTokensPerSecond, "", false).values[i] = f.tokensPerSecond;
    constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
    if (f.peakAllocatedBytes)
      row(c, "peak_allocated_gib", "", true).values[i] = static_cast<double>(*f.peakAllocatedBytes) / kGiB;
    if (f.peakReservedBytes && *f.peakReservedBytes > 0)
      row(c, "peak_reserved_gib", "", true).values[i] = static_cast<double>(*f.peakReservedBytes) / kGiB;
    std::set<int> ranks;  // device memory where the run has any, else the host's (rankPeakAllocated)
    for (const auto& p : f.peaks) ranks.insert(p.rank);
    for (int rank : ranks)
      if (const auto bytes = f.rankPeakAllocated(rank))
        row(c, "peak_allocated_gib_rank" + std::to_string(rank), "peak memory allocated, rank " + std::to_string(rank) + " (GiB)",
            true)
            .values[i] = static_cast<double>(*bytes) / kGiB;
    row(c, metric_keys::kInitSeconds, "", true).values[i] = f.initSeconds;
    row(c, metric_keys::kCheckpointSaveSeconds, "", true).values[i] = f.checkpointSaveSeconds;
  }

  c.strategies = strategyTable(c.names, c.figures);
  rebase(c, baseline);
  for (auto& r : c.rows) {
    for (std::size_t i = 0; i < runs.size(); ++i) {
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

namespace {

void flatten(const JsonValue& v, const std::string& prefix, std::map<std::string, std::string>& out) {
  if (v.isObject() && !v.members().empty()) {
    for (const auto& [k, x] : v.members()) flatten(x, prefix.empty() ? k : prefix + "." + k, out);
    return;
  }
  if (!prefix.empty()) out[prefix] = v.dump();
}

}  // namespace

std::vector<ConfigDiffRow> configDiff(const std::vector<std::string>& configJsons) {
  std::vector<std::map<std::string, std::string>> flat(configJsons.size());
  std::set<std::string> keys;
  for (std::size_t i = 0; i < configJsons.size(); ++i) {
    try {
      flatten(parseJson(configJsons[i].empty() ? "{}" : configJsons[i], "config"), "", flat[i]);
    } catch (const std::exception&) {
      // an unreadable config compares as empty
    }
    for (const auto& [k, v] : flat[i]) keys.insert(k);
  }
  std::vector<ConfigDiffRow> out;
  if (configJsons.size() < 2) return out;
  for (const auto& k : keys) {
    ConfigDiffRow r;
    r.key = k;
    bool differs = false;
    for (std::size_t i = 0; i < flat.size(); ++i) {
      auto it = flat[i].find(k);
      r.values.push_back(it == flat[i].end() ? std::nullopt : std::optional<std::string>(it->second));
      if (i > 0 && r.values[i] != r.values[0]) differs = true;
    }
    if (differs) out.push_back(std::move(r));
  }
  return out;
}

bool noiseJudged(const std::string& key) {
  return key == "step_time_ms" || key == "step_time_p50_ms" || key == "step_time_p90_ms" || key == metric_keys::kTokensPerSecond;
}

void rebase(Comparison& c, std::size_t baseline) {
  const std::size_t n = c.runs.size();
  c.baseline = baseline;
  const RunFigures none;  // a run without figures has no spread
  auto figures = [&](std::size_t i) -> const RunFigures& { return i < c.figures.size() ? c.figures[i] : none; };
  for (auto& r : c.rows) {
    r.deltaPct.assign(n, std::nullopt);
    r.deltaPp.assign(n, std::nullopt);
    r.withinNoise.assign(n, false);
    const auto& base = r.values[baseline];
    const bool share = r.key.size() > 4 && r.key.compare(r.key.size() - 4, 4, "_pct") == 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (!r.values[i] || !base) continue;
      if (*base != 0) r.deltaPct[i] = (*r.values[i] - *base) / *base * 100.0;
      if (share) r.deltaPp[i] = *r.values[i] - *base;
      if (noiseJudged(r.key) && r.key != metric_keys::kTokensPerSecond && r.deltaPct[i])
        r.withinNoise[i] = changeWithinNoise(*r.deltaPct[i], figures(i), figures(baseline));
    }
  }
  // Throughput is tokens per step over the step time: its change is noise when the step time's is.
  const ComparisonRow* step = nullptr;
  for (const auto& r : c.rows)
    if (r.key == "step_time_ms") step = &r;
  for (auto& r : c.rows)
    if (r.key == metric_keys::kTokensPerSecond && step)
      for (std::size_t i = 0; i < n; ++i) r.withinNoise[i] = step->withinNoise[i] && r.deltaPct[i].has_value();
}

bool changeWithinNoise(double deltaPct, const RunFigures& a, const RunFigures& b) {
  return std::abs(deltaPct) <= std::max(a.stepSpreadPct.value_or(0.0), b.stepSpreadPct.value_or(0.0));
}

CollectiveComparison compareCollectives(const std::vector<RunId>& runs, const std::vector<const RunAnalysis*>& analyses,
                                        const std::vector<RunFigures>& figures, std::size_t baseline) {
  if (analyses.size() != runs.size()) throw Error("compareCollectives: one analysis per run");
  if (baseline >= runs.size()) throw Error("compareCollectives: the baseline is not one of the runs");
  const std::size_t n = runs.size();
  CollectiveComparison out;
  out.runs = runs;
  out.baseline = baseline;
  std::map<CollectiveOp, CollectiveChangeRow> byOp;
  for (std::size_t i = 0; i < n; ++i) {
    const RunAnalysis& a = *analyses[i];
    const auto rankSteps = static_cast<std::int64_t>(a.steps.size());
    out.rankSteps.push_back(rankSteps);
    const double div = rankSteps > 0 ? static_cast<double>(rankSteps) : 1.0;
    for (const auto& c : a.collectives) {
      auto& r = byOp[c.op];
      if (r.count.empty()) {
        r.op = c.op;
        r.count.assign(n, std::nullopt);
        r.bytes.assign(n, std::nullopt);
        r.ms.assign(n, std::nullopt);
        r.exposedMs.assign(n, std::nullopt);
      }
      r.count[i] = r.count[i].value_or(0) + static_cast<double>(c.count) / div;
      if (c.countWithBytes > 0) r.bytes[i] = r.bytes[i].value_or(0) + static_cast<double>(c.bytes) / div;
      r.ms[i] = r.ms[i].value_or(0) + static_cast<double>(c.totalNs) / 1e6 / div;
      r.exposedMs[i] = r.exposedMs[i].value_or(0) + static_cast<double>(c.exposedNs) / 1e6 / div;
    }
  }
  for (auto& [op, r] : byOp) {
    r.deltaPct.assign(n, std::nullopt);
    r.withinNoise.assign(n, false);
    for (std::size_t i = 0; i < n; ++i) {
      if (!r.ms[i] || !r.ms[baseline] || *r.ms[baseline] == 0) continue;
      r.deltaPct[i] = (*r.ms[i] - *r.ms[baseline]) / *r.ms[baseline] * 100.0;
      if (i < figures.size() && baseline < figures.size())
        r.withinNoise[i] = changeWithinNoise(*r.deltaPct[i], figures[i], figures[baseline]);
    }
    out.rows.push_back(std::move(r));
  }
  auto key = [&](const CollectiveChangeRow& r) {
    double best = 0;
    for (const auto& v : r.ms) best = std::max(best, v.value_or(0));
    return std::make_pair(r.ms[baseline].value_or(-1.0), best);
  };
  std::stable_sort(out.rows.begin(), out.rows.end(), [&](const auto& a, const auto& b) { return key(a) > key(b); });
  return out;
}

}  // namespace shardscope::core
