#include "core/analysis/comparison.h"

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <map>
#include <set>

#include "core/analysis/run_figures.h"
#include "core/util/error.h"
#include "core/util/json.h"
#include "core/util/stats.h"
#include "core/util/units.h"

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
    c.completed.push_back(r->status == RunStatus::Completed);
    configs.push_back(r->configJson);
  }
  c.configDiff = configDiff(configs);
  c.configGroups = configGroups(configs);
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
    // Speed rows: a best only beyond the noise of the next best.
    if (r.best && noiseJudged(r.key)) {
      std::optional<std::size_t> next;
      for (std::size_t i = 0; i < runs.size(); ++i) {
        if (i == *r.best || !r.values[i]) continue;
        if (!next || (r.lowerIsBetter ? *r.values[i] < *r.values[*next] : *r.values[i] > *r.values[*next])) next = i;
      }
      if (next && *r.values[*next] != 0) {
        const double delta = 100.0 * (*r.values[*r.best] - *r.values[*next]) / std::abs(*r.values[*next]);
        if (changeWithinNoise(delta, c.figures[*r.best], c.figures[*next]) || std::abs(delta) < kTieMarginPct) r.best.reset();
      }
    }
  }
  c.verdict = judgeRuns(c);
  // With repeats the verdict decides the speed rows' best: only a run of the winning configuration,
  // and none when speed shows no measurable difference.
  if (!c.verdict.repeats.empty())
    for (auto& r : c.rows) {
      if (!r.best || !noiseJudged(r.key)) continue;
      const auto& w = c.verdict.winnerRuns;
      if (c.verdict.by != ComparisonVerdict::By::Speed || std::find(w.begin(), w.end(), *r.best) == w.end()) r.best.reset();
    }
  return c;
}

ComparisonVerdict judgeRuns(const Comparison& c) {
  ComparisonVerdict v;
  const std::size_t n = c.runs.size();
  const ComparisonRow *tps = nullptr, *step = nullptr, *peak = nullptr;
  for (const auto& r : c.rows) {
    if (r.key == metric_keys::kTokensPerSecond) tps = &r;
    if (r.key == "step_time_ms") step = &r;
    if (r.key == "peak_allocated_gib") peak = &r;
  }
  auto completed = [&](std::size_t i) { return i < c.completed.size() ? c.completed[i] : true; };
  auto has = [](const ComparisonRow* r, std::size_t i) { return r && i < r->values.size() && r->values[i].has_value(); };
  // Tokens/s when every completed run with a speed figure has it.
  std::size_t withSpeed = 0, withTps = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (!completed(i)) continue;
    withSpeed += (has(step, i) || has(tps, i)) ? 1 : 0;
    withTps += has(tps, i) ? 1 : 0;
  }
  const bool useTps = withTps > 0 && withTps == withSpeed;
  const ComparisonRow* speed = useTps ? tps : step;
  if (!speed) return v;
  v.rankedBy = useTps ? "tokens/s" : "step time";
  auto better = [&](double a, double b) { return useTps ? a > b : a < b; };

  // The units judged: configurations (every completed run of one configuration with the figure),
  // or each run alone when the comparison holds no repeats.
  struct Unit {
    std::vector<std::size_t> runs;
    std::vector<double> values;  // the runs' figures (in the order they were found)
    double mean = 0, min = 0, max = 0;
    double noisePct = 0;
  };
  std::vector<Unit> units;
  std::vector<std::vector<std::size_t>> groups = c.configGroups;
  if (groups.empty())
    for (std::size_t i = 0; i < n; ++i) groups.push_back({i});
  for (const auto& g : groups) {
    Unit u;
    for (std::size_t i : g)
      if (i < n && completed(i) && has(speed, i)) {
        u.runs.push_back(i);
        u.values.push_back(*speed->values[i]);
      }
    if (u.runs.empty()) continue;
    u.mean = core::mean(u.values);
    const auto [lo, hi] = std::minmax_element(u.values.begin(), u.values.end());
    u.min = *lo;
    u.max = *hi;
    // What varies between measurements of the unit: its run-to-run spread, or one run's step spread.
    if (u.runs.size() > 1)
      u.noisePct = u.mean != 0 ? 100.0 * (u.max - u.min) / std::abs(u.mean) : 0.0;
    else if (c.figures.size() > u.runs[0])
      u.noisePct = c.figures[u.runs[0]].stepSpreadPct.value_or(0.0);
    units.push_back(std::move(u));
  }
  std::stable_sort(units.begin(), units.end(), [&](const Unit& a, const Unit& b) { return better(a.mean, b.mean); });
  for (auto& u : units) {
    std::stable_sort(u.runs.begin(), u.runs.end(),
                     [&](std::size_t a, std::size_t b) { return better(*speed->values[a], *speed->values[b]); });
    for (std::size_t i : u.runs) v.ranked.push_back(i);
    if (u.runs.size() < 2) continue;
    ComparisonVerdict::RepeatSet r;
    r.runs = u.runs;
    std::sort(r.runs.begin(), r.runs.end());
    r.mean = u.mean;
    r.min = u.min;
    r.max = u.max;
    r.spreadPct = u.noisePct;
    v.repeats.push_back(std::move(r));
  }
  auto name = [&](std::size_t i) {
    return (i < c.names.size() ? c.names[i] : std::string("run")) + " #" + std::to_string(c.runs[i].value());
  };
  auto unitName = [&](const Unit& u) {
    if (u.runs.size() < 2) return name(u.runs[0]);
    std::vector<std::size_t> inOrder = u.runs;
    std::sort(inOrder.begin(), inOrder.end());
    std::string ids;
    for (std::size_t i : inOrder) ids += (ids.empty() ? "#" : ", #") + std::to_string(c.runs[i].value());
    // What the repeats' names share ("ddp (1/3)", "ddp (2/3)" -> "ddp"), else the first one's.
    auto nameOf = [&](std::size_t i) { return i < c.names.size() ? c.names[i] : std::string("run"); };
    std::string common = nameOf(u.runs[0]);
    for (std::size_t i : u.runs) {
      const std::string other = nameOf(i);
      std::size_t k = 0;
      while (k < common.size() && k < other.size() && common[k] == other[k]) ++k;
      common.resize(k);
    }
    while (!common.empty() && (common.back() == ' ' || common.back() == '(' || common.back() == '#')) common.pop_back();
    if (common.empty()) common = nameOf(u.runs[0]);
    return "the configuration of " + common + " (" + std::to_string(u.runs.size()) + " runs: " + ids + ")";
  };
  auto text = [&](double x) { return useTps ? formatFixed(x, 0) + " tokens/s" : formatFixed(x, 2) + " ms per step"; };
  auto unitText = [&](const Unit& u) { return (u.runs.size() > 1 ? "a mean of " : "") + text(u.mean); };
  if (units.empty()) {
    v.reasons.push_back("no completed run has " + v.rankedBy + " figures");
    return v;
  }
  if (units.size() == 1) {
    if (units[0].runs.size() > 1) {
      v.reasons.push_back("every ranked run is a repeat of one configuration (" + unitName(units[0]) + "): nothing to compare");
    } else if (n > 1) {
      v.winner = units[0].runs[0];
      v.winnerRuns = units[0].runs;
      v.winnerName = unitName(units[0]);
      v.by = ComparisonVerdict::By::Speed;
      v.reasons.push_back(name(units[0].runs[0]) + " is the only completed run with " + v.rankedBy + " figures");
    }
    return v;
  }
  const Unit &best = units[0], &next = units[1];
  const bool repeated = best.runs.size() > 1 || next.runs.size() > 1;
  v.runnerUp = next.runs[0];
  v.speedMarginPct = 100.0 * std::abs(best.mean - next.mean) / std::max(std::abs(next.mean), 1e-300);
  v.noisePct = std::max(best.noisePct, next.noisePct);
  const std::string margin = formatFixed(*v.speedMarginPct, 1) + " %";
  const std::string tie = "the " + formatFixed(kTieMarginPct, 0) + " % tie margin";
  const auto test = welchTTest(best.values, next.values);
  if (test) v.pValue = test->p;
  bool wins = false;
  std::string why;
  if (test) {
    // Both configurations repeated: significance, not the spread, decides (and the tie margin).
    wins = test->p<kSignificance&& * v.speedMarginPct> kTieMarginPct;
    why = "Welch's t-test p = " + formatFixed(test->p, 3) + (test->p < kSignificance ? " (significant" : " (not significant") +
          " at " + formatFixed(kSignificance, 2) + "), run-to-run spread " + formatFixed(*v.noisePct, 1) + " %";
    if (test->p < kSignificance && !wins) why += ", within " + tie;
  } else {
    const double bar = std::max(*v.noisePct, kTieMarginPct);
    wins = *v.speedMarginPct > bar;
    const std::string noise = repeated ? "the run-to-run spread of " + formatFixed(*v.noisePct, 1) + " %"
                                       : "the runs' step spread of " + formatFixed(*v.noisePct, 1) + " % (p90-p10 over p50)";
    why = wins ? "beyond " + noise + " and " + tie : "within " + (*v.noisePct >= kTieMarginPct ? noise : tie);
  }
  if (wins) {
    v.winner = best.runs[0];
    v.winnerRuns = best.runs;
    v.winnerName = unitName(best);
    v.by = ComparisonVerdict::By::Speed;
    v.reasons.push_back(unitName(best) + " is faster: " + unitText(best) + " vs " + unitText(next) + " for " + unitName(next) +
                        ", " + margin + ", " + why);
    return v;
  }
  v.reasons.push_back("no measurable difference in speed between " + unitName(best) + " and " + unitName(next) + ": " +
                      unitText(best) + " vs " + unitText(next) + ", " + margin + ", " + why);
  // Speed cannot tell them apart: the one that needs measurably less memory (mean peak of each unit).
  auto peakOf = [&](const Unit& u) -> std::optional<double> {
    std::vector<double> p;
    for (std::size_t i : u.runs) {
      if (!has(peak, i) || *peak->values[i] <= 0) return std::nullopt;
      p.push_back(*peak->values[i]);
    }
    return core::mean(p);
  };
  const auto pb = peakOf(best), pn = peakOf(next);
  if (pb && pn) {
    const bool nextLean = *pn < *pb;
    const Unit& lean = nextLean ? next : best;
    const double leanPeak = nextLean ? *pn : *pb, heavyPeak = nextLean ? *pb : *pn;
    const double saved = 100.0 * (heavyPeak - leanPeak) / heavyPeak;
    if (saved > kTieMarginPct) {
      v.winner = lean.runs[0];
      v.winnerRuns = lean.runs;
      v.winnerName = unitName(lean);
      v.by = ComparisonVerdict::By::Memory;
      v.memoryMarginPct = saved;
      v.reasons.push_back(unitName(lean) + " needs " + formatFixed(saved, 1) + " % less memory at its peak (" +
                          formatFixed(leanPeak * 1024.0, 1) + " vs " + formatFixed(heavyPeak * 1024.0, 1) + " MiB allocated)");
      return v;
    }
    v.reasons.push_back("their memory peaks are within " + formatFixed(kTieMarginPct, 0) + " % of each other too");
  }
  return v;
}

std::vector<std::vector<std::size_t>> configGroups(const std::vector<std::string>& configJsons) {
  std::vector<std::vector<std::size_t>> groups;
  std::map<std::string, std::size_t> byConfig;
  for (std::size_t i = 0; i < configJsons.size(); ++i) {
    const std::string& cfg = configJsons[i];
    if (cfg.empty() || cfg == "{}") {
      groups.push_back({i});
      continue;
    }
    const auto [it, fresh] = byConfig.emplace(cfg, groups.size());
    if (fresh)
      groups.push_back({i});
    else
      groups[it->second].push_back(i);
  }
  return groups;
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
    // Per rank and COUNTED step (the steady-state rule the step figures use): the counted steps'
    // totals over the counted (rank, step) rows; without figures, every row.
    std::int64_t rankSteps = 0;
    const bool haveRule = i < figures.size() && figures[i].steps.count > 0;
    for (const auto& row : a.steps) rankSteps += (!haveRule || figures[i].steps.counts(row.step)) ? 1 : 0;
    out.rankSteps.push_back(rankSteps);
    const double div = rankSteps > 0 ? static_cast<double>(rankSteps) : 1.0;
    for (const auto& whole : a.collectives) {
      // Counted-step totals where the run has counted steps, else the whole run's.
      CollectiveStats c = whole;
      if (rankSteps > 0 && haveRule) {
        c.count = whole.countedCount;
        c.bytes = whole.countedBytes;
        c.countWithBytes = whole.countedWithBytes;
        c.totalNs = whole.countedNs;
        c.exposedNs = whole.countedExposedNs;
        if (c.count == 0) continue;
      }
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

namespace shardscope::core {

JsonValue toJson(const ComparisonVerdict& v, const std::vector<RunId>& runs) {
  auto id = [&](std::optional<std::size_t> i) {
    return i && *i < runs.size() ? JsonValue::number(static_cast<std::int64_t>(runs[*i].value())) : JsonValue();
  };
  auto num = [](const std::optional<double>& x) { return x ? JsonValue::number(*x) : JsonValue(); };
  JsonValue o = JsonValue::object();
  o.set("winner", id(v.winner));
  o.set("by", v.by == ComparisonVerdict::By::Speed    ? JsonValue::string("speed")
              : v.by == ComparisonVerdict::By::Memory ? JsonValue::string("memory")
                                                      : JsonValue());
  o.set("ranked_by", v.rankedBy.empty() ? JsonValue() : JsonValue::string(v.rankedBy));
  JsonValue ranked = JsonValue::array();
  for (std::size_t i : v.ranked) ranked.push(id(i));
  o.set("ranked", std::move(ranked));
  o.set("runner_up", id(v.runnerUp));
  o.set("speed_margin_pct", num(v.speedMarginPct));
  o.set("noise_pct", num(v.noisePct));
  o.set("memory_margin_pct", num(v.memoryMarginPct));
  JsonValue winners = JsonValue::array();
  for (std::size_t i : v.winnerRuns) winners.push(id(i));
  o.set("winner_runs", std::move(winners));
  o.set("p_value", num(v.pValue));
  o.set("winner_name", v.winnerName.empty() ? JsonValue() : JsonValue::string(v.winnerName));
  JsonValue repeats = JsonValue::array();
  for (const auto& r : v.repeats) {
    JsonValue x = JsonValue::object(), ids = JsonValue::array();
    for (std::size_t i : r.runs) ids.push(id(i));
    x.set("runs", std::move(ids));
    x.set("mean", JsonValue::number(r.mean));
    x.set("min", JsonValue::number(r.min));
    x.set("max", JsonValue::number(r.max));
    x.set("spread_pct", JsonValue::number(r.spreadPct));
    repeats.push(std::move(x));
  }
  o.set("repeats", std::move(repeats));
  JsonValue reasons = JsonValue::array();
  for (const auto& r : v.reasons) reasons.push(JsonValue::string(r));
  o.set("reasons", std::move(reasons));
  return o;
}

}  // namespace shardscope::core
