#pragma once
// The headline figures of a run, defined once (docs/METRICS.md, "Run figures"): step time, tokens/s,
// the compute / communication / exposed / idle shares, overlap, peak memory per device and for the
// host, initialisation and checkpoint time. Every surface (the run summary of `run` and `compare`,
// `compare-runs`, `analyze`, `info`, the app's pages and every report format) reads them from here,
// so one run never shows two step times.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/analysis/memory_peaks.h"
#include "core/analysis/step_breakdown.h"
#include "core/storage/trace_store.h"
#include "core/util/json.h"
#include "core/util/progress.h"

namespace shardscope::core {

// Run-level metrics (rank NULL) the runtime stores and the figures read, by these keys.
namespace metric_keys {
constexpr const char* kTrainableParams = "trainable_params";  // trainable parameter elements
constexpr const char* kFrozenParams = "frozen_params";        // frozen base-weight elements (0: full fine-tuning)
constexpr const char* kSkippedSteps = "skipped_steps";        // steps skipped on fp16 overflow
}  // namespace metric_keys

// Means over ranks and counted steps (each (rank, step) row weighs the same).
struct StepMeans {
  std::int64_t rows = 0;
  double stepNs = 0, computeNs = 0, commNs = 0, overlappedNs = 0, exposedNs = 0, otherNs = 0, idleNs = 0;
  double minStepNs = 0, maxStepNs = 0;  // over the counted (rank, step) rows
};
StepMeans meanOverSteps(const std::vector<StepBreakdown>& steps, const CountedSteps& counted);

// A device's peak as every surface shows it (binary units: MiB, GiB).
struct DevicePeak {
  int rank = 0;
  std::string device;  // "cuda:0", "cpu"
  std::int64_t allocatedBytes = 0, reservedBytes = 0;
  bool fromCounter = false;  // the allocator's peak counter, above every memory record
};

// A figure that may not be known: its value, or why there is none (surfaces show "n/a" and the
// reason: a tooltip, a footnote, JSON's null beside the reason).
struct KnownFigure {
  std::optional<double> value;
  std::string why;  // with a value: how it was obtained; without: why it cannot be known
  bool known() const { return value.has_value(); }
};

struct RunFigures {
  RunId runId;
  RunSource source = RunSource::Kineto;
  CountedSteps steps;
  StepWindow window = StepWindow::Events;  // how the counted steps were measured (the first rank's)
  StepMeans means;
  std::optional<double> stepTimeMs;  // mean over ranks and counted steps of the step windows
  bool stepTimeFromTimer = false;    // no step windows stored (capture off): the runtime's own timer
  // The step-to-step distribution over the counted (rank, step) rows (nearest-rank percentiles), and
  // its spread: (p90 - p10) / p50, percent. A change between runs smaller than their spreads is noise.
  std::optional<double> stepP10Ms, stepP50Ms, stepP90Ms, stepSpreadPct;
  std::optional<double> tokensPerStep, tokensPerSecond;
  std::string tokensHow;  // where tokens per step came from ("" when unknown)
  // Shares of the step time, percent; n/a without steps.
  std::optional<double> computePct, commPct, exposedCommPct, idlePct;
  std::optional<double> overlapPct;  // overlapped / communication; n/a without communication
  std::vector<DevicePeak> peaks;     // one per rank and device with memory records or counters
  // Largest over ranks: of device (GPU) memory where the run has any, else of the host's.
  std::optional<std::int64_t> peakAllocatedBytes, peakReservedBytes;
  std::string peakDevice;                     // "GPU" or "host"
  std::optional<std::int64_t> hostPeakBytes;  // the largest host peak of a GPU run
  std::optional<double> initSeconds, checkpointSaveSeconds;

  // What was trained, as the strategy table names it (docs/METRICS.md "Strategy table").
  int worldSize = 0;                            // the run's ranks (a simulated run: the world it simulated)
  std::string strategy;                         // core::Strategy's name; "" when unknown (an imported trace without one)
  std::string precision;                        // "fp32", "bf16", "fp16" (the run's config); "" when unknown
  std::optional<int> loraRank;                  // 0: full fine-tuning; nullopt: unknown (imported traces)
  std::optional<double> tokensPerSecondPerGpu;  // tokensPerSecond / worldSize (a rank is one GPU or process)
  // Parameter elements that train and that stay frozen (metrics trainable_params, frozen_params; a
  // runtime or simulated run without them trained the whole model: its preset's parameter count, 0
  // frozen), and steps skipped on fp16 overflow (metric skipped_steps; 0 by definition for a run of
  // ours in fp32 or bf16, which never skips). Imported traces tell none of them.
  KnownFigure trainableParams, frozenParams, skippedSteps;
  std::optional<bool> savesCheckpoint;  // the config's save_checkpoint (why a save time is missing)

  // A rank's peak allocated bytes on the memory the run figure is about (its GPUs where the run has
  // any, else the host); nullopt for a rank without memory records or counters.
  std::optional<std::int64_t> rankPeakAllocated(int rank) const;
};

// From an analysis already at hand (analyzeRun's steps and memory peaks)...
RunFigures runFigures(TraceStore& store, RunId runId, const std::vector<StepBreakdown>& steps,
                      const std::vector<MemoryPeak>& peaks);
// ...or computing them.
RunFigures computeRunFigures(TraceStore& store, RunId runId, const CancelToken* cancel = nullptr);

// How the step time was measured ("step windows recorded by the runtime", ...; "" without one).
std::string describeStepTime(const RunFigures& f);

// The figures as one JSON object (the CLI's `figures`; nulls where a figure is n/a).
JsonValue toJson(const RunFigures& f);

// "cuda:0" / "cpu" for a device of a memory peak.
std::string deviceName(int deviceType, int deviceId);

}  // namespace shardscope::core
