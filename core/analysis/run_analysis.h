#pragma once
// The full analysis of a run (what `shardscope-cli analyze` shows): every analysis of core/analysis
// fed by one shared pass over the store, one rank at a time (rank_scan.h). Same results as calling
// computeHtaFigures, computeStepBreakdown, computeCollectives, findCollectiveBottlenecks,
// detectStragglers and computeMemoryPeaks one by one, in about the time of one of them.
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/analysis/bottlenecks.h"
#include "core/analysis/collectives.h"
#include "core/analysis/hta_metrics.h"
#include "core/analysis/memory_peaks.h"
#include "core/analysis/step_breakdown.h"
#include "core/analysis/stragglers.h"
#include "core/storage/trace_store.h"
#include "core/util/progress.h"

namespace shardscope::core {

struct RunAnalysisOptions {
  std::size_t bottleneckLimit = 10;  // costliest exposed all-gathers / reduce-scatters reported
};

struct RunAnalysis {
  HtaFigures hta;
  std::vector<StepBreakdown> steps;
  std::vector<CollectiveStats> collectives;
  std::vector<Bottleneck> bottlenecks;
  StragglerReport stragglers;
  std::vector<MemoryPeak> memoryPeaks;
  std::vector<SnapshotFigures> memorySnapshots;  // the run's memory snapshots, top 20 allocations at each peak
  // Wall time of each part, ms, in order: "scan" (reading and decoding the events, handing them
  // over), then each analysis' own work (per-rank condensing and the final figures), "memory".
  std::vector<std::pair<std::string, double>> timings;
};

RunAnalysis analyzeRun(TraceStore& store, RunId runId, const RunAnalysisOptions& options = {},
                       const CancelToken* cancel = nullptr);

// Where a run's analysis comes from when a caller already has it or keeps a cache of them (the app's
// session analyses each run once for all its pages): given a run id, its analysis (made with at
// least the default bottleneck limit; a consumer cuts the list to its own). Functions taking one compute nothing the source
// gives; an empty source means "compute".
using AnalysisSource = std::function<std::shared_ptr<const RunAnalysis>(RunId runId)>;

}  // namespace shardscope::core
