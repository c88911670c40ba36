#pragma once
// Shardscope's per-step, per-rank time breakdown (docs/METRICS.md, "Shardscope metrics"): what the
// device did during each training step, and how much communication was left exposed.
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "core/analysis/intervals.h"
#include "core/storage/trace_store.h"
#include "core/util/progress.h"

namespace shardscope::core {

// How a step's window (its start, end and so its time) was measured (docs/METRICS.md, "Step time").
enum class StepWindow {
  Recorded,      // the window the runtime recorded (host clock; on CUDA it ends after the device
                 // finished the step) or the simulator computed
  DevicePeriod,  // traces with GPU work: from the step's first GPU work to the next step's first GPU
                 // work (the last step: to its last GPU work's end); GPU work belongs to the step of
                 // the CPU op that launched it
  Events,        // the first start and last end of the step's events (a CPU trace's step span)
};
const char* describe(StepWindow w);

struct StepBreakdown {
  int rank = 0;
  std::int64_t step = -1;  // -1: the events outside any step (or the whole trace when there are no steps)
  StepWindow window = StepWindow::Events;
  TimeNs startNs = 0, endNs = 0;  // the step's window on this rank (the work in it is clipped to it)
  TimeNs stepNs = 0;              // endNs - startNs
  TimeNs computeNs = 0;           // union of computation on the device lanes
  TimeNs commNs = 0;              // union of communication (collective kernels / comm spans; on GPU
                                  // ranks without collective kernels, the host threads' collectives,
                                  // e.g. Gloo over CUDA tensors). A collective of one rank is local
                                  // work (other busy), not communication.
  TimeNs overlappedCommNs = 0;    // communication while computation runs
  TimeNs exposedCommNs = 0;       // communication while no computation runs
  TimeNs otherBusyNs = 0;         // memory copies and other device work with neither of the above
  TimeNs idleNs = 0;              // step time with nothing on the device lanes
  // Shares of the step time (0..1) and overlap (overlapped / communication; nullopt without comm).
  double computeShare = 0, commShare = 0, exposedShare = 0, idleShare = 0;
  std::optional<double> overlap;
};

// THE steady-state rule: which steps count, for every figure that is a mean over steps (the run's
// figures, the step breakdown's means, the runtime's step_time_ms, the simulator's steady state,
// the link fit's samples). Events outside any step (before the first optimizer step:
// initialisation, the setup of a trace) are never a step. Runs we trained or simulated begin with a
// warm-up step (lazy optimizer state, ZeRO-3's first gathers, cuBLAS autotuning) that is left out
// when there are later ones; imported traces keep every step (the profiler's schedule already
// skipped its warm-up).
struct CountedSteps {
  std::int64_t first = 0, last = -1;  // the counted step numbers are [first, last] present in the run
  std::int64_t count = 0;             // distinct step numbers counted
  bool warmupLeftOut = false;
  bool counts(std::int64_t step) const { return count > 0 && step >= first && step <= last; }
};
// True for runs that begin with a warm-up step (runtime and simulated runs).
bool leavesOutWarmup(RunSource source);
// The rule over the step numbers present (any order, repeats allowed; negative = "no step").
CountedSteps countedStepNumbers(const std::vector<std::int64_t>& stepNumbers, RunSource source);
CountedSteps countedSteps(const std::vector<StepBreakdown>& steps, RunSource source);
// "steps after the first (warm-up) step, mean over ranks", ...: how a figure was measured.
const char* describeStepRule(const CountedSteps& c);

// One row per (rank, step) with events, ordered by rank then step. Device lanes are the rank's GPU
// streams, or, for a CPU run without any, its CPU threads and communication lanes.
std::vector<StepBreakdown> computeStepBreakdown(TraceStore& store, RunId runId, const CancelToken* cancel = nullptr);

struct ScanContext;

// The same computation fed by scanRank (rank_scan.h): a rank's spans become its rows when it ends.
class StepBreakdownAccumulator {
 public:
  explicit StepBreakdownAccumulator(ScanContext& ctx);
  ~StepBreakdownAccumulator();
  void beginRank(const Rank& rank);
  bool beginTrack(const TrackSummary& t);
  void onEvents(const EventChunk& c, std::size_t begin, std::size_t end, Id chunkId);
  void onEvent(const EventChunk& c, std::size_t i, Id chunkId);
  void endRank(const Rank& rank);
  std::vector<StepBreakdown> finish() { return std::move(out_); }

  struct Lists {  // one step's extent and spans
    TimeNs start = 0, end = 0;
    bool any = false;
    TimeNs devStart = 0, devEnd = 0;  // extent of the step's work on device lanes
    bool anyDev = false;
    std::vector<intervals::Span> compute, comm, all, hostComm;
  };

 private:
  ScanContext& ctx_;
  bool hasGpu_ = false;
  bool lane_ = false;          // the current track is a device lane
  bool hostCommLane_ = false;  // a GPU rank's host communication lane (Gloo over CUDA tensors)
  bool deviceComm_ = false;    // the rank has communication on its device lanes (NCCL kernels)
  bool worldOfOne_ = false;    // the run has one rank: every collective is local
  TrackKind kind_ = TrackKind::CpuThread;
  std::map<std::int64_t, Lists> steps_;
  std::int64_t lastStep_ = 0;
  Lists* last_ = nullptr;  // steps_[lastStep_]
  std::vector<StepBreakdown> out_;
};

}  // namespace shardscope::core
