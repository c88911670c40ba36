#pragma once
// The simulator and the trace store: a compute profile read from a measured run of our runtime,
// and a simulation written as a run with source `simulated` (same lanes, span names, steps, memory
// records and metrics as a runtime run), so every page, analysis and report shows it.
#include <array>
#include <optional>
#include <set>
#include <string>

#include "core/config/run_config.h"
#include "core/estimator/interference.h"
#include "core/estimator/simulator.h"
#include "core/storage/trace_store.h"
#include "core/util/progress.h"

namespace shardscope::core::estimator {

// What a run configuration asks the simulator to simulate: the model, scale, tokens, precision and
// knobs (EstimateInput), the strategy, the FSDP knobs and the step count.
struct SimTarget {
  EstimateInput input;
  Strategy strategy = Strategy::Ddp;
  BackwardPrefetch backwardPrefetch = BackwardPrefetch::Pre;
  bool forwardPrefetch = false;
  bool limitAllGathers = true;
  int steps = 0;
  bool gloo = false;  // CPU (Gloo; LibTorch 1.13: reduce-scatter as an all-reduce)
};
// Throws core::Error for a model no preset names.
SimTarget simTargetOf(const RunConfig& cfg);

// A measured run as the simulator sees it: what it ran (its SimTarget: model, world size, tokens,
// precision, knobs, strategy, FSDP knobs, steps, Gloo) and what it measured.
// Quantiles kept of a run's compute jitter distribution per phase (MeasuredProfile::jitterQuantiles).
constexpr int kJitterQuantiles = 128;

struct MeasuredProfile : SimTarget {
  RunId runId;
  // Mean per block over ranks and steady steps (the first step left out), each span less the
  // interference of the collectives it overlapped (interference.h): the compute alone.
  ComputeProfile compute;
  InterferenceFit interference;  // k, fitted from the run or its device class's default
  // The run's compute probe (profiler/runtime/link_probe.h): GEMM rate in GFLOP/s by product width
  // d, ascending; empty for runs without one.
  std::vector<std::pair<double, double>> gemmGflops;
  // The same for the weight gradient's products ([d x tokens] @ [tokens x d]).
  std::vector<std::pair<double, double>> gemmWeightGflops;
  // The probe points taken as disturbed and interpolated (smoothGemmDips), in words; empty if none.
  std::string gemmProbeNote;
  double stepS = 0;  // measured steady step time (mean over ranks and steps after the first)
  int steadySteps = 0;
  double stepCv = 0;  // relative SD over the steady steps of the ranks' mean step time
  // The host the ranks ran on (our runtime's rank metadata): cores, intra-op threads per rank,
  // ranks on the host, GPUs. Unknown for runs older than the link probe.
  struct Host {
    bool known = false;
    int cpus = 0, threadsPerRank = 0, ranksOnHost = 0, gpus = 0;
  } host;
  // The step breakdown's figures (docs/METRICS.md) over the same steady steps, for comparison
  // with a simulation: communication (union of collectives) and its exposed part.
  double commS = 0, exposedCommS = 0;
  // Rank-to-rank variation of compute: the relative standard deviation of a compute span (same
  // name, same step) across ranks, estimated robustly (1.4826 x the median absolute deviation,
  // weighted by duration): the variation is heavy-tailed (a rank descheduled for a time slice on a
  // shared core), and a few stalled spans would otherwise set the level for all. 0 with one rank.
  // It makes ranks arrive apart at every collective; `simulate --profile-run` uses it (per phase,
  // below) unless --jitter is given.
  double computeJitter = 0;
  // The same per phase (ComputePhase: forward and recompute, backward, the rest); -1 where the
  // run has no comparable span of the phase.
  double phaseJitter[kComputePhases] = {-1, -1, -1};
  // The whole distribution of those deviations per phase (signed, scaled as above, weighted by
  // duration, centred on 0): kJitterQuantiles quantiles at equal probability steps, ascending; empty
  // where the phase has no comparable span. Its tail (a rank descheduled for a time slice on a
  // shared core: |deviation| at the 99th percentile 5-15 times the median on the validation runs)
  // is what makes ranks wait for each other; a normal of the robust SD reproduced a quarter of the
  // measured arrival skew (docs/ESTIMATOR.md, "Jitter").
  std::array<std::vector<double>, kComputePhases> jitterQuantiles;
  double overlap() const { return commS > 0 ? 1.0 - exposedCommS / commS : 1.0; }
  std::string runName;
  // Disturbed steps (disturbedSteps below), by step number: left out of the compute profile, the
  // jitter and the link calibration, kept in stepS and stepCv. The note names them for the reader.
  std::set<std::int64_t> leftOutSteps;
  std::string leftOutNote;
  // A GPU run's forward and backward spans (host time): the share of it during which the rank's GPU
  // streams ran compute kernels (CUPTI). Near 1 the device is the bottleneck; near 0 the host is
  // (each op's launch and bookkeeping: a small model on a fast GPU), and the block's time follows
  // its number of ops, not its FLOPs (applyMeasuredProfile). -1: no GPU lanes (a CPU run, or a GPU
  // run without a GPU timeline).
  double deviceBusyShare = -1;
};

// A steady step whose time (the ranks' mean) exceeds the run's median step by more than
// kDisturbedStepShare and by more than kDisturbedStepSds robust standard deviations (1.4826 x the
// median absolute deviation of the steps at or below the median: disturbances are one-sided) was
// disturbed by something outside the run: another process on the
// host, a page-cache flush. On the validation's 2-core machine such steps took 1.3-1.5x the
// median for a few seconds (a medium-model DDP run: steps 6-8 at 1.54, 1.42 and 1.37 s against
// 1.06 s) and a profile taken from them carried the disturbance into every prediction made from it
// (+26 % for another strategy). At least kDisturbedStepMinSteps steady steps are needed to tell.
constexpr double kDisturbedStepShare = 0.15;
constexpr double kDisturbedStepSds = 3.0;
constexpr int kDisturbedStepMinSteps = 4;
// The disturbed steps among (step, time) pairs, and the median step time they were judged against
// (0 with too few steps to tell).
struct DisturbedSteps {
  std::vector<std::int64_t> steps;
  double median = 0;
};
DisturbedSteps disturbedSteps(const std::vector<std::pair<std::int64_t, double>>& stepTimes);
// {run, strategy, step_s, comm_s, exposed_comm_s, overlap, compute_jitter, compute_jitter_<phase>
//  (the phases it has)}: `shardscope-cli simulate --json`'s profile_run.
JsonValue toJson(const MeasuredProfile& m);

// Reads a runtime run's configuration and its compute spans ("forward <block>", "backward
// <block or module>", "optimizer step" on each rank's compute lane). Throws core::Error naming the
// store and run when the run is missing, not ours (no configuration), or has no steady step.
// `interferenceK`, where given, is the k its spans are taken apart with (interference.h) instead of
// the run's fit or the device class's default (`simulate --interference`).
MeasuredProfile measuredProfile(TraceStore& store, RunId runId, std::optional<double> interferenceK = std::nullopt);

// The GEMM rate at width d from a compute probe (log-log between its points, the end point's rate
// outside them); 0 without a probe.
double gemmRate(const std::vector<std::pair<double, double>>& curve, double d);
// A compute probe's point more than this share below both of its neighbours was disturbed: a GEMM's
// rate on a doubling ladder of widths rises and levels off, it does not dip at one width and come
// back at the next. On val25 one run's probe read 24.9 GFLOP/s at d 1024 between 32.1 and 30.1
// (the other five runs: 31.4-32.3), and the medium model's compute it carried to the small one
// came out 18 % short (docs/ESTIMATOR.md, "Model size").
constexpr double kGemmProbeDipShare = 0.10;
// Replaces each such point by the log-log interpolation of its neighbours; returns the widths
// replaced with their measured rates, for the note.
std::vector<std::pair<double, double>> smoothGemmDips(std::vector<std::pair<double, double>>& curve);
// How the rest of a block (its time less its matrix products at the probed rates: norms,
// activations, softmax, copies, allocation of its gradients, and the dispatch of every op) grows
// with its activations (tokens x hidden; tokens x vocab for the head): as activations^e. Measured
// on CPU between the small and medium presets' DDP runs (2 ranks, fp32): per transformer block the
// forward rest grew 1.67x and the backward rest 2.5x for 2x the activations (docs/ESTIMATOR.md,
// "Model size"). Part of the forward's is per-op dispatch that does not grow; the backward's also
// allocates and writes gradients, which grow with the parameters (4x).
constexpr double kRestGrowthForward = 0.74;
constexpr double kRestGrowthBackward = 1.32;
// The width at which a model's blocks are rated: sqrt(hidden x ffn) for the transformer blocks,
// sqrt(hidden x vocab) for the head.
double layerGemmWidth(const ModelShape& m);
double headGemmWidth(const ModelShape& m);

// Calibrates a simulation of si.model by a measured run (simulate --profile-run): the run's compute
// per block, carried to si.model by FLOPs and, where the run has a compute probe, by the ratio of
// the GEMM rates at the two models' widths; unless keepJitter its rank-to-rank jitter per phase
// (each capped at 0.9). The link is the caller's (calibrateLink for the run's own).
void applyMeasuredProfile(SimulateInput& si, const MeasuredProfile& mp, bool keepJitter);

// Writes the kept ranks of a simulation as one run (source simulated, status completed) in one
// transaction: nothing is left behind when it fails or is cancelled. Returns the run id.
RunId writeSimulatedRun(TraceStore& store, const SimulationResult& sim, const std::string& name,
                        const CancelToken* cancel = nullptr, const ProgressFn& progress = {});

}  // namespace shardscope::core::estimator
