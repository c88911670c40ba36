#pragma once
// Run-vs-run comparison: the table users know (step time, throughput, communication share, exposed
// communication, peak memory, initialisation and checkpoint time), with deltas against a baseline and
// the best value of each row marked.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/analysis/run_analysis.h"
#include "core/analysis/run_figures.h"
#include "core/analysis/strategy_table.h"
#include "core/storage/trace_store.h"
#include "core/util/json.h"
#include "core/util/progress.h"

namespace shardscope::core {

struct ComparisonRow {
  std::string key;    // "step_time_ms", "exposed_comm_pct", "peak_allocated_gib_rank0", ...
  std::string label;  // for people
  bool lowerIsBetter = true;
  std::vector<std::optional<double>> values;    // one per run; nullopt when the run cannot tell
  std::vector<std::optional<double>> deltaPct;  // (value - baseline) / baseline * 100
  // Rows of shares (keys ending in _pct): value - baseline, in percentage points (how a change of a
  // share reads honestly: 8.5 % -> 15.6 % is +7.1 pp, not +82 %).
  std::vector<std::optional<double>> deltaPp;
  // Step-time rows (and throughput, derived from it): the change is within the step-to-step spread
  // of the two runs (RunFigures::stepSpreadPct of either): not a change you can claim.
  std::vector<bool> withinNoise;
  // Index of the best run (ties: the first). On those rows, none when the best is within the
  // noise of the next best: no figure marks a best run the runs cannot tell apart.
  std::optional<std::size_t> best;
};

// A configuration key whose value differs between the compared runs (or that some runs lack), from
// each run's config JSON (nested objects flattened with dots, e.g. "zero_optimization.stage").
struct ConfigDiffRow {
  std::string key;
  std::vector<std::optional<std::string>> values;  // one per run, JSON text; nullopt: the run has no such key
};

// Which run wins, and only on a difference the runs can measure (issue 46): the faster by tokens/s
// (when every ranked run has it, else mean step time) when the margin is beyond both the runs'
// step-to-step spread (RunFigures::stepSpreadPct, changeWithinNoise) and kTieMarginPct; else, when
// speed shows no measurable difference, the run that needs measurably less memory (peak allocated,
// more than kTieMarginPct apart); else none. Failed and cancelled runs never win. One rule for every
// surface: the report's recommendation, Compare's verdict and charts, `compare-runs --json`.
struct ComparisonVerdict {
  enum class By { None, Speed, Memory };
  std::optional<std::size_t> winner;  // index into Comparison::runs; nullopt: no measurable difference
  By by = By::None;
  std::string rankedBy;                   // "tokens/s" or "step time" ("" when nothing ranks)
  std::vector<std::size_t> ranked;        // completed runs with the speed figure, fastest first
  std::optional<std::size_t> runnerUp;    // the next fastest
  std::optional<double> speedMarginPct;   // fastest vs runner-up, % of the runner-up
  std::optional<double> noisePct;         // the larger step spread of the two
  std::optional<double> memoryMarginPct;  // with By::Memory: how much less the winner needs
  std::vector<std::string> reasons;       // one line each, figures included
  // Repeats: runs of one configuration (Comparison::configGroups with two runs or more, e.g. from
  // `compare --repeats N`) are judged together: their mean of the ranked figure, their run-to-run
  // spread, and Welch's t-test between the two best configurations (a win needs p < kSignificance
  // and the tie margin); noisePct is then the larger run-to-run spread of the two.
  struct RepeatSet {
    std::vector<std::size_t> runs;  // indices into Comparison::runs, in comparison order
    double mean = 0, min = 0, max = 0;
    double spreadPct = 0;  // (max - min) / mean
  };
  std::vector<RepeatSet> repeats;
  std::optional<double> pValue;         // the t-test's two-sided p, when both configurations were repeated
  std::vector<std::size_t> winnerRuns;  // every run of the winning configuration (the winner alone without repeats)
  std::string winnerName;               // "ddp #4", or "the configuration of ddp (3 runs: #1, #3, #5)"
};
constexpr double kTieMarginPct = 3.0;
constexpr double kSignificance = 0.05;

struct Comparison {
  std::vector<RunId> runs;
  std::vector<std::string> names;
  std::vector<bool> completed;  // per run: status completed (failed, cancelled and running runs never win)
  std::size_t baseline = 0;
  std::vector<ComparisonRow> rows;
  std::vector<RunFigures> figures;        // per run: the figures the rows show, and how they were measured
  std::vector<ConfigDiffRow> configDiff;  // what differs in the runs' configurations, in key order
  StrategyTable strategies;               // the strategy table of the runs (strategy_table.h), from `figures`
  // Runs of one configuration (the same run-config JSON of our runtime, compared as text): each run in
  // exactly one group, groups in the order of their first run; runs without a configuration alone.
  std::vector<std::vector<std::size_t>> configGroups;
  ComparisonVerdict verdict;  // judgeRuns(*this)
};

// The verdict of a comparison (see ComparisonVerdict); compareRuns sets Comparison::verdict.
ComparisonVerdict judgeRuns(const Comparison& c);
// Its serialisation (`compare-runs --json` "verdict", the Compare page's JSON): winner (a run id, or
// null when no difference is measurable), by ("speed" | "memory" | null), ranked_by, ranked (ids),
// runner_up, speed_margin_pct, noise_pct, memory_margin_pct, reasons, winner_runs (ids), p_value and
// repeats ([{runs, mean, min, max, spread_pct}]).
JsonValue toJson(const ComparisonVerdict& v, const std::vector<RunId>& runs);

// Comparison::configGroups of runs with these configurations ("" or "{}": a group of its own).
std::vector<std::vector<std::size_t>> configGroups(const std::vector<std::string>& configJsons);

// The configuration keys whose values differ between runs (configJson of each, "{}" for none).
std::vector<ConfigDiffRow> configDiff(const std::vector<std::string>& configJsons);

// Metrics a runtime run stores in `metrics` (run-level) and the comparison shows when present.
namespace metric_keys {
constexpr const char* kTokensPerSecond = "tokens_per_s";
constexpr const char* kInitSeconds = "init_time_s";
constexpr const char* kCheckpointSaveSeconds = "checkpoint_save_s";
}  // namespace metric_keys

// With `source`, each run's figures come from its analysis (runFigures(steps, memory peaks)) instead of
// a pass of their own over the events: the same numbers, computed once.
Comparison compareRuns(TraceStore& store, const std::vector<RunId>& runs, std::size_t baseline = 0,
                       const CancelToken* cancel = nullptr, const AnalysisSource& source = {});

// The collectives of several runs side by side, one row per operation (all process groups): what a
// rank spends on it per step: the run's totals over its COUNTED steps (CollectiveStats::counted*)
// divided by its counted (rank, step) rows of the step breakdown: the steady-state rule of the
// step figures, so a runtime run's warm-up step and what runs outside any step are left out. A run
// without steps shows its totals over all ranks (rankSteps 0).
struct CollectiveChangeRow {
  CollectiveOp op = CollectiveOp::None;
  // One per run; nullopt where the run has no such collective.
  std::vector<std::optional<double>> count, bytes, ms, exposedMs;
  std::vector<std::optional<double>> deltaPct;  // of ms vs the baseline (nullopt: either side missing)
  std::vector<bool> withinNoise;                // |deltaPct| within the runs' step spread
};
struct CollectiveComparison {
  std::vector<RunId> runs;
  std::size_t baseline = 0;
  std::vector<std::int64_t> rankSteps;    // the divisor of each run's values (0: totals, no steps)
  std::vector<CollectiveChangeRow> rows;  // by the baseline's time, then the others'
};
// `analyses` and `figures` (for the step spread) in the order of `runs`.
CollectiveComparison compareCollectives(const std::vector<RunId>& runs, const std::vector<const RunAnalysis*>& analyses,
                                        const std::vector<RunFigures>& figures, std::size_t baseline);

// Recomputes every row's deltaPct, deltaPp and withinNoise against run `baseline` (the app's baseline
// box uses this, so its deltas are compareRuns' own). Best does not depend on the baseline.
void rebase(Comparison& c, std::size_t baseline);

// Where a comparison row's change is noise (within the step spread of the two runs).
bool changeWithinNoise(double deltaPct, const RunFigures& a, const RunFigures& b);

// Whether a row's changes are judged against the runs' step-to-step spread.
bool noiseJudged(const std::string& key);

}  // namespace shardscope::core
