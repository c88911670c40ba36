#pragma once
// The report model (docs/REPORTS.md): everything a report of one run or of a comparison shows, read
// from the store once. The writers (HTML, Markdown, CSV in core/report; PDF in ui/report) only format
// it, so every format says the same thing. Figures come straight from core's analyses
// (compareRuns, analyzeRun, computeMemoryPeaks); the recommendation is computed from them with the
// reasons listed. Every string that comes from a trace or a config (run names, tags, kernel names,
// process groups, annotations, config values) is untrusted: the writers escape it.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/analysis/comparison.h"
#include "core/analysis/run_analysis.h"
#include "core/model/types.h"
#include "core/report/svg_chart.h"
#include "core/storage/trace_store.h"
#include "core/util/json.h"
#include "core/util/progress.h"

namespace shardscope::core {

struct ReportOptions {
  std::string title;                 // empty: "Shardscope report: <run name>" / "... comparison of N runs"
  std::optional<RunId> baseline;     // the run deltas refer to (must be one of the runs); default: the first
  std::size_t bottleneckLimit = 10;  // costliest exposed all-gathers / reduce-scatters per run
  int memoryPoints = 400;            // buckets of the memory curves (max per bucket, so peaks survive)
  std::string generatedAt;           // ISO 8601 UTC; empty: now
  bool memoryCharts = true;          // false: no memory charts (they read every memory record again)
  // Analyses at hand (the app's session cache), made with at least bottleneckLimit bottlenecks (the
  // list is cut to it). Empty: computed here.
  AnalysisSource analysisSource;
};

struct ReportKeyValue {
  std::string key, value;
};

// One knob of a run's configuration.
struct ReportKnob {
  std::string group;  // "Parallelism", "ZeRO", ...
  std::string key;    // JSON key ("world_size")
  std::string value;  // as the JSON spells it ("auto" for an unset bool|auto)
  bool isDefault = true;
};

struct ReportRun {
  RunId id;
  std::string name;
  std::string source;   // "runtime", "kineto", ...
  std::string status;   // "completed", "failed", ...
  bool failed = false;  // failed or cancelled: never recommended
  std::string failureReason;
  std::string strategy;  // "" when unknown (imported traces without a config)
  std::string createdAt;
  std::string tags;
  int worldSize = 0;
  int ranksStored = 0;
  // Environment: devices ("cuda:0 (ranks 0, 2)", GPU names), versions and backends (from the run and
  // rank metadata), process groups.
  std::vector<ReportKeyValue> environment;
  // Configuration: the knobs (runs of the embedded runtime) and the DeepSpeed-style JSON reproducing
  // them (pretty-printed); for imported runs `knownConfig` lists what the trace tells.
  bool hasRunConfig = false;
  std::vector<ReportKnob> knobs;
  std::string deepSpeedJson;
  std::vector<ReportKeyValue> knownConfig;
  // Figures (analyzeRun).
  RunAnalysis analysis;
  // Mean over ranks and steps >= 0 as compareRuns takes them (runtime and simulated runs without the
  // warm-up step): the step-time breakdown in ms; the four parts sum to stepMs (compute + exposed
  // communication + other busy + idle).
  std::optional<double> stepMs, computeMs, exposedCommMs, otherBusyMs, idleMs, commMs;
  std::optional<double> tokensPerSecond;
  RunFigures figures;              // run_figures: the definitions every surface shares (and how each was measured)
  std::int64_t stepsAnalysed = 0;  // distinct step numbers >= 0
  // Memory: peak allocated / reserved over ranks and devices (device memory when any, else CPU) and
  // the device's capacity when the trace names it (deviceProperties totalGlobalMem).
  std::optional<std::int64_t> peakAllocatedBytes, peakReservedBytes, deviceMemoryBytes;
  std::optional<int> peakRank;
};

struct ReportRecommendation {
  std::optional<std::size_t> recommended;  // index into Report::runs
  std::string rankedBy;                    // "tokens/s" or "step time"
  std::vector<std::string> sentences;      // the paragraph, sentence by sentence (computed from figures)
  std::vector<std::string> reasons;        // the figures behind it, one per line
};

struct Report {
  std::string title;
  std::string generatedAt;
  std::string toolVersion;
  std::string database;  // file name of the database (not its full path)
  std::vector<ReportRun> runs;
  std::size_t baseline = 0;  // index into runs
  Comparison comparison;     // compareRuns(store, ids, baseline)
  // Charts: step-time breakdown (stacked bars per run), tokens/s (bars), overlap per step (a line per
  // run), then one memory chart per run that has memory records (a line per rank and device, the peak marked).
  std::vector<Chart> charts;
  ReportRecommendation recommendation;
  double buildSeconds = 0;  // time buildReport took
};

// Reads the runs and computes everything. Throws Error naming a run id that does not exist (or the
// baseline when it is not one of the runs), Cancelled when `cancel` fires. Progress: one unit per
// analysis step ("analyse run 3", ...).
Report buildReport(TraceStore& store, const std::vector<RunId>& runs, const ReportOptions& options = {},
                   const CancelToken* cancel = nullptr, const ProgressFn& progress = {});

// Formatting helpers shared by the writers (plain text, not escaped).
std::string reportBytes(double bytes);             // "1.50 GiB", "312.0 MiB", "12 B"
std::string reportDuration(double ns);             // "1.234 ms"
std::string reportNumber(double v, int decimals);  // fixed, no locale
// "+12.3 %" / "-4.0 %" (always signed).
std::string reportDelta(double pct);
// A comparison row's value for people ("12.35", "1.50 GiB" for *_gib rows).
std::string reportRowValue(const ComparisonRow& row, double v);
// A JSON value indented with two spaces (for the DeepSpeed JSON block).
std::string prettyJson(const JsonValue& v);

}  // namespace shardscope::core

namespace shardscope::core {

// The report's tables as plain cells, built once here so every writer shows the same rows and
// columns (HTML and Markdown render them; CSV writes its own raw-number tables). Text is unescaped.
struct ReportCell {
  enum class Style { Text, Number, Code };
  std::string text;
  Style style = Style::Text;
  bool strong = false;  // the best value of a comparison row; a knob that differs from its default
  std::string note;     // a delta vs the baseline ("+12.3 %")
  int noteTone = 0;     // -1 worse, +1 better, 0 neutral
};
struct ReportTable {
  std::string caption;
  std::vector<std::string> header;
  std::vector<std::vector<ReportCell>> rows;
  std::string emptyText;  // shown instead of an empty table
  // The last `detailColumns` columns are long text (why, suggestion): HTML and PDF show them in a row
  // of their own under each row, spanning the table; Markdown keeps them as columns.
  std::size_t detailColumns = 0;
};

ReportTable comparisonTable(const Report& report);  // rows with at least one value; best marked
// The strategy table (core/analysis/strategy_table.h) of the report's runs: a row per run (one row in
// a single-run report), core's shown columns and cell text ("n/a" where not known); the caption says
// why each n/a is.
ReportTable strategyReportTable(const Report& report);
ReportTable environmentTable(const Report& report);  // one column per run
ReportTable knobTable(const ReportRun& run);         // runtime runs: every knob
// The knobs of every run that has a run configuration, a column per run (comparisons: one table
// instead of one per run); a knob whose values differ between the runs carries a note.
ReportTable knobComparisonTable(const Report& report);
// Whether the configuration section shows knobComparisonTable (two or more runs with a configuration).
bool reportComparesKnobs(const Report& report);
ReportTable knownConfigTable(const ReportRun& run);  // imported runs: what the trace tells
ReportTable bottleneckTable(const ReportRun& run);
ReportTable stragglerTable(const ReportRun& run);
ReportTable arrivalGroupTable(const ReportRun& run);  // per (process group, operation)
std::string stragglerSummary(const ReportRun& run);
ReportTable memoryPeakTable(const ReportRun& run);
ReportTable collectivesTable(const ReportRun& run);
// "name #id" (core::runLabel, as the app names a run) as charts and headers show a run.
std::string reportRunLabel(const ReportRun& run);

}  // namespace shardscope::core
