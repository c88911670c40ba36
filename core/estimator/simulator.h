#pragma once
// Event-driven simulation of training steps of one strategy on N devices (docs/ESTIMATOR.md,
// "Simulator"). Every rank runs the same program, built by replaying the strategy's real rules the
// way our runtime's engines apply them (profiler/runtime/engine.cpp; DeepSpeed's and FSDP's
// semantics, strategies.md §1.4–1.5): compute per block on the rank's compute thread, collectives
// issued in program order onto one stream per process group (a group's collectives serialise, as
// NCCL's do on their stream and our Gloo communication threads do), each finishing when the last
// member of its group has started it plus its alpha-beta time; waits block the compute thread;
// ZeRO-3 prefetch (trace order, prefetch bucket, two fetches in flight, max live, reuse distance),
// FSDP backward prefetch pre/post/none, forward prefetch and the rate limiter; memory by category
// over time. Pure C++: no Qt, no LibTorch; writing the result into a store is simulator_store.h.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/estimator/comm_model.h"
#include "core/estimator/memory_estimator.h"
#include "core/util/json.h"
#include "core/util/progress.h"

namespace shardscope::core::estimator {

// The forward of a checkpointed block runs without autograd's graph (nothing saved for backward).
// Where a run has no checkpointing probe (profiler/runtime/checkpoint_probe.h: runs before it,
// imported traces, FLOPs mode) it is taken as 0.86 of the same block's forward with it (FSDP, model
// small, 2 CPU ranks on the VM of sessions 1-9: the mean over three validation grids of 3 runs
// each, whose ratios were 0.885, 0.860 and 0.822; each span less its interference).
constexpr double kCheckpointedForwardShare = 0.86;
// Its recomputation inside the backward adds less than that forward: 0.80 of it where not probed
// (the same grids: 0.90, 0.78 and 0.72; a checkpointed block's backward less the plain one's, over
// the plain forward; the recomputed activations are used at once, still in cache).
constexpr double kRecomputeShare = 0.80;

// Compute time of one micro-batch on one device, per block: 0 the embedding, 1..L the transformer
// blocks, L+1 the final norm, LM head and loss.
struct ComputeProfile {
  std::string source;               // "flops: ..." or "run 3 (small, ddp, 2 ranks)"
  std::vector<double> forwardS;     // L+2 entries
  std::vector<double> backwardS;    // L+2 entries, without recomputation
  double optimizerSPerElement = 0;  // optimizer step time per parameter element a rank updates
  // The optimizer step's time per trainable parameter of the model, whatever the rank's shard
  // (work over the whole gradient or model on every rank): kCpuOptimizerModelShare of a CPU run's
  // measured step; 0 in FLOPs mode and for GPU runs (not measured there).
  double optimizerSPerModelElement = 0;
  // Host work per step outside any block's compute and outside waits (a measured run's step time
  // less its compute and wait spans: hooks, gradient copies into buckets, the loss read-back); run
  // on the compute thread at the end of each step. 0 in FLOPs mode.
  double stepOverheadS = 0;
  // What activation checkpointing costs a block here (kCheckpointedForwardShare, kRecomputeShare):
  // the run's checkpointing probe where it has one, the constants otherwise.
  double checkpointedForwardShare = kCheckpointedForwardShare;
  double recomputeShare = kRecomputeShare;
  bool checkpointProbed = false;
  // The recomputation measured in the run's own steps ("recompute <block>" spans, our runtime
  // since session 15) rather than by the probe: recomputeShare is then that time over the plain
  // forward (the checkpointed forward over checkpointedForwardShare).
  bool recomputeMeasured = false;
};

// Forward 1/3, backward 2/3 of the training FLOPs of each block (6 FLOPs per parameter and token
// plus attention, the runtime's trainFlopsPerToken split by block) at tflops·efficiency; the
// embedding as a memory-bound row gather; the optimizer reading and writing its state (AdamW:
// parameter, gradient, two moments read, three written) at memBwGBps·efficiency.
ComputeProfile flopsComputeProfile(const EstimateInput& in, double tflops, double efficiency, double memBwGBps);

// Training FLOPs of one micro-batch per block (forward + backward, no recomputation).
std::vector<double> blockTrainFlops(const EstimateInput& in);

// A profile measured at `measured` (its shape and tokens) carried over to `target`: the same block
// times when the shapes and tokens agree, otherwise each phase's measured FLOP rate applied to the
// target's FLOPs (layers and head separately; the embedding by tokens × hidden).
ComputeProfile scaleComputeProfile(const ComputeProfile& p, const EstimateInput& measured, const EstimateInput& target);

using core::BackwardPrefetch;  // the run config's --backward-prefetch (core/model/run_knobs.h)

// Phases of compute whose rank-to-rank variation is told apart: forward (and its recomputation),
// backward, and the rest (optimizer step, host work).
enum class ComputePhase : std::uint8_t { Forward, Backward, Other };
constexpr int kComputePhases = 3;
const char* computePhaseName(ComputePhase p);  // "forward", "backward", "other"
// The phase of a compute span by its name as our runtime records it ("forward layers.3",
// "recompute layers.3", "backward lm_head", "optimizer step").
ComputePhase computePhaseOf(const std::string& spanName);

struct SimulateInput {
  EstimateInput model;
  Strategy strategy = Strategy::Ddp;
  ComputeProfile compute;  // empty forwardS: flopsComputeProfile(model, 989, 0.4, 3350)
  LinkModel intraNode;     // groups inside a node
  LinkModel interNode;     // groups that span nodes
  CommOptions comm;
  // FSDP knobs (the runtime's --backward-prefetch, --forward-prefetch, --limit-all-gathers).
  BackwardPrefetch backwardPrefetch = BackwardPrefetch::Pre;
  bool forwardPrefetch = false;
  bool limitAllGathers = true;
  int steps = 2;  // simulated steps; the first is reported as warm-up like a measured run
  // Per-rank variation: compute durations × (1 + jitter·z), z ~ N(0,1) from (seed, rank, op), and
  // a fixed factor for listed ranks (stragglers).
  double jitter = 0;
  // The same per phase, when known apart (a measured run's, MeasuredProfile::phaseJitter); a
  // negative entry falls back to `jitter`.
  double phaseJitter[kComputePhases] = {-1, -1, -1};
  double jitterOf(ComputePhase p) const {
    const double j = phaseJitter[static_cast<int>(p)];
    return j >= 0 ? j : jitter;
  }
  // A measured distribution of the relative deviation per phase (MeasuredProfile::jitterQuantiles:
  // ascending quantiles at equal probability steps, mean 0): where a phase has one, a compute op
  // takes (1 + q(u)) times its duration, u ~ U(0,1) from (seed, rank, op), instead of the normal.
  std::array<std::vector<double>, kComputePhases> jitterQuantiles;
  std::uint64_t seed = 1;
  std::vector<std::pair<int, double>> slowRanks;
  // Interference of communication with compute (interference.h): a compute op overlapped by the
  // rank's in-flight collectives for a fraction f of its time takes (1 + interference·f) times its
  // profile's duration. 0: none (the profile is taken as it is).
  double interference = 0;
  // The same for collectives (link_calibration.h): a collective whose rank computes for a
  // fraction g of it takes (1 + commInterference·g) times the link's time; all-reduce-like
  // (all-reduce, Gloo's emulated reduce-scatter) and the others.
  double commInterferenceAllReduce = 0, commInterferenceOther = 0;
  // Completion (link_calibration.h): the last member to start a collective ends it later than the
  // others by lastLateness x its time; the members' mean end stays start + time.
  double lastLatenessAllReduce = 0, lastLatenessOther = 0;
  // The same by how the ranks wait on it (LinkCalibration::lastLatenessByWait: [all-reduce-like 0,
  // other 1][ahead 0, on demand 1]; < 0: the value above). A collective is on demand where its
  // issue is followed by its wait with no compute between.
  double lastLatenessByWait[2][2] = {{-1, -1}, {-1, -1}};
  int keepRanks = 16;  // ranks whose events are kept in the result (0 = all)
};

// A simulated span on a lane of one rank (names and categories as our runtime records them).
struct SimSpan {
  enum class Lane : std::uint8_t { Compute, Comm };
  Lane lane = Lane::Compute;
  int commLane = 0;  // index into SimulationResult::groups for Comm spans
  double startS = 0, endS = 0;
  int name = 0;  // index into SimulationResult::names
  enum class Kind : std::uint8_t { Compute, Annotation, Wait, Collective } kind = Kind::Compute;
  int step = 0;
  CollKind op = CollKind::AllReduce;
  std::int64_t bytes = 0;  // collective message bytes (nccl-tests' S)
  int groupSize = 0;
  bool emulated = false;  // reduce-scatter run as an all-reduce (Gloo)
  double issueS = 0;      // collectives: when the compute thread issued it
  double waitS = 0;       // collectives: how long the compute thread waited on it
};

struct SimMemorySample {
  double tS = 0;
  std::int64_t delta = 0;
  std::int64_t total = 0;
};

// Memory categories of a simulated rank (the runtime's peak_breakdown.* keys).
enum class MemCat : std::uint8_t { Parameters, Gradients, Optimizer, Activations, CommBuffers, Other };
constexpr int kMemCats = 6;
const char* memCatKey(MemCat c);  // "parameters", "gradients", "optimizer_state", "activations", "comm_buffers", "other"

struct SimRankTrace {
  int rank = 0;
  std::vector<SimSpan> spans;
  std::vector<SimMemorySample> memory;
  std::vector<std::pair<double, double>> steps;  // [start, end) per step
};

struct SimStepFigures {
  double stepS = 0;         // step time
  double computeS = 0;      // compute busy time
  double commS = 0;         // union of collective spans
  double exposedCommS = 0;  // communication not overlapped by compute
  double overlap() const { return commS > 0 ? 1.0 - exposedCommS / commS : 1.0; }
};

struct SimProcessGroup {
  std::string name;  // "world", "shard0", "replica1", "node0"
  int size = 0;
  std::vector<int> ranks;
};

// What a prediction from a measured run claims (core/estimator/prediction.h fills it; absent for a
// simulation from FLOPs and presets).
struct PredictionNotes {
  std::int64_t calibrationRun = 0;
  std::string change;                      // replay, strategy, knob, scale, model
  std::vector<std::string> extrapolation;  // what it extrapolates; empty: inside the calibrated range
  double loadFactor = 1;                   // compute scaled by the host load (--allow-extrapolation)
  double lowS = 0, highS = 0, relSe = 0;   // the step time's interval (about 95 %)
  std::string intervalBasis;
  std::string link;  // how the link was obtained
  std::string interference;
  // Where checkpointing is on in the calibration run or the target: the shares it was taken to
  // cost and their source (the run's checkpointing probe or the constants); empty otherwise.
  std::string checkpointing;
};

// {calibration_run, change, extrapolation, load_factor, interval_s: [low, high], rel_se,
//  interval_basis, link, interference, checkpointing (where set)}.
JsonValue toJson(const PredictionNotes& p);

struct SimulationResult {
  SimulateInput input;
  std::optional<PredictionNotes> prediction;
  std::vector<std::string> names;          // span names
  std::vector<SimProcessGroup> groups;     // every process group of the run
  std::vector<std::string> laneGroupKind;  // per comm lane index: the group kind's display name
  std::vector<SimRankTrace> ranks;         // the kept ranks
  // Steady state: the mean over ranks of the last step (or of steps after the first).
  SimStepFigures steady;
  double slowestRankStepS = 0;  // the slowest rank's steady step
  int slowestRank = 0;
  std::int64_t peakBytes = 0;                  // highest simulated allocation on any rank
  std::int64_t peakByCategory[kMemCats] = {};  // at rank 0's peak
  double tokensPerSPerDevice = 0;
  std::int64_t messageBytesPerStep = 0;  // per device
  double wireBytesPerStep = 0;           // per device
  std::int64_t collectivesPerStep = 0;
  std::int64_t eventsSimulated = 0;  // ops × ranks processed
  double wallS = 0;                  // time the simulation took
  std::vector<std::string> notes;
};

// The figures of a simulation (not its traces): {strategy, step_s, compute_s, comm_s,
// exposed_comm_s, overlap, slowest_rank, slowest_rank_step_s, peak_bytes, tokens_per_s_per_device,
// collectives_per_step, message_bytes_per_step, wire_bytes_per_step, events_simulated, wall_s,
// prediction (when calibrated on a run: {calibration_run, change, extrapolation, load_factor,
// interval_s: [low, high], rel_se, interval_basis, link, interference})}:
// `shardscope-cli simulate --json`'s simulations.
JsonValue toJson(const SimulationResult& r);

// Throws std::invalid_argument for an input it cannot simulate (what estimateMemory refuses,
// steps < 1, non-finite knobs), core::Error when cancelled.
SimulationResult simulate(const SimulateInput& in, const CancelToken* cancel = nullptr, const ProgressFn& progress = {});

}  // namespace shardscope::core::estimator
