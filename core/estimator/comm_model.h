#pragma once
// Communication per training step: which collectives each strategy issues, their message bytes
// (nccl-tests' S) and wire bytes per device, and their time from an alpha-beta model
// t = count·alpha + S·factor(op, n) / busBw (strategies.md §3.1–3.3, docs/RUNTIME.md's table).
// Link presets are stated assumptions (docs/ESTIMATOR.md); alpha and beta can also be fitted from a
// measured run's collectives (least squares of duration against wire bytes).
#include <array>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/estimator/memory_estimator.h"
#include "core/storage/trace_store.h"

namespace shardscope::core::estimator {

enum class CollKind { AllReduce, AllGather, ReduceScatter };
std::string collKindName(CollKind k);  // "all_reduce", "all_gather", "reduce_scatter"
// nccl-tests bus factor: 2(n-1)/n for all-reduce, (n-1)/n for all-gather and reduce-scatter.
double ringFactor(CollKind k, int n);

// When in the step a collective runs (what it can overlap with).
enum class CommPhase { Forward, Backward, AfterStep };
std::string phaseName(CommPhase p);

// How the ranks waited on a collective: issued and waited on at once, nothing computed between
// (on demand: the rank idles for it; a ZeRO-3 all-gather without prefetch), or issued ahead of its
// wait (prefetch, overlap, buckets reduced during backward). A measured instance is on demand where
// its ranks computed, on average, less than a tenth of the time from its issue to its end before
// they began to wait on it.
enum class WaitKind : std::uint8_t { Unknown, Ahead, OnDemand };

struct LinkModel {
  std::string name;
  double busBwGBps = 0;           // all-gather / reduce-scatter bus bandwidth (GB/s = 1e9 B/s)
  double allReduceBusBwGBps = 0;  // all-reduce bus bandwidth (NVLS may beat the ring); 0 = busBwGBps
  double alphaUs = 0;             // per-collective latency
  std::string note;               // where the figure comes from
  double allReduceAlphaUs = -1;   // all-reduce latency when fitted apart; < 0 = alphaUs
  double arBw() const { return allReduceBusBwGBps > 0 ? allReduceBusBwGBps : busBwGBps; }
  double arAlphaUs() const { return allReduceAlphaUs >= 0 ? allReduceAlphaUs : alphaUs; }
  // Measured times of one instance (a link probe, link_calibration.h), ascending in wire bytes:
  // all-reduce-like collectives (all-reduce, Gloo's emulated reduce-scatter) and the others. Where
  // a kind has two or more, its time is interpolated between them (log-log: a link's time is
  // rarely a straight line from 4 KiB to 100 MiB, e.g. Gloo changes algorithm with size) and,
  // outside them, the alpha-beta line scaled to meet the nearest point.
  std::vector<std::pair<double, double>> allReducePoints{}, otherPoints{};
  // Times a calibration run's own collectives took at exactly these wire bytes (their mean, with
  // the slowdown beside compute taken out: link_calibration.h), ascending: at those sizes they are
  // used as they are, in place of the probe's curve and the contention factor.
  // With each size, the lateness of its last rank to start (Σ lateness / Σ time of its instances,
  // link_calibration.h's "Completion"; < 0 where none was matched across ranks).
  struct InRunSize {
    double wireBytes = 0, timeS = 0, lastLateness = -1;
    // Where it was measured: the run's steps, or the loaded probe (link_calibration.h), and from
    // how many instances.
    bool fromLoadedProbe = false;
    int instances = 0;
  };
  std::vector<InRunSize> allReduceInRun{}, otherInRun{};
  // The same apart by how the ranks waited on them (WaitKind): [0] issued ahead, [1] on demand.
  // Where a size has them, an instance of that kind takes its class's time and lateness: on CPU
  // Gloo a ZeRO-3 run's 352 KB all-gathers waited on at once took 1.1-2x the time of those issued
  // ahead and their last starter ended 0.74-0.91 of it after the other (0.24-0.40 ahead), while its
  // small ones stayed under 0.2 either way (validation grid val15).
  std::array<std::vector<InRunSize>, 2> allReduceInRunByWait{}, otherInRunByWait{};
  // The group size the link was measured in (0: unknown, a preset), and whether its latency is a
  // ring's steps: Gloo's all-gather passes n - 1 messages round a ring of n ranks and its all-reduce
  // 2(n - 1), so a group of n ranks pays the measured latency x (n - 1) / (n0 - 1) for the same
  // wire bytes (the bandwidth term is already per device: wire bytes carry the ring factor). NCCL's
  // pipelined protocols do not scale so, and nothing here measured how they do: false, carried
  // unchanged.
  int measuredGroupSize = 0;
  bool ringLatency = false;
  // The run's own size nearest in class to an instance carrying `wireBytes` (its class's, else the
  // pooled one), or nullptr where the run did not use that size or `groupSize` (0: as measured) is
  // not the size it was measured in.
  const InRunSize* inRunSize(bool allReduceLike, double wireBytes, WaitKind waited = WaitKind::Unknown, int groupSize = 0) const;
  // The time of one instance carrying `wireBytes` per device (nccl-tests' S x the bus factor) in a
  // group of `groupSize` ranks (0: the size the link was measured in).
  double instanceS(bool allReduceLike, double wireBytes, WaitKind waited = WaitKind::Unknown, int groupSize = 0) const;
  // What a group of `groupSize` ranks adds to (or takes from) an instance's measured time: the
  // latency's extra ring steps where ringLatency, else 0.
  double ringStepsS(bool allReduceLike, int groupSize) const;
};
// A measured curve between its points: log-log interpolation over (x, y) ascending in x, for x in
// [front.x, back.x] (the link's time by size, a GEMM rate by width).
double logLogBetween(const std::vector<std::pair<double, double>>& pts, double x);

// nvlink-h100, nvlink-h200, pcie4, pcie5, ib-ndr, ib-hdr, eth-100g, eth-25g, gloo-cpu-local.
std::optional<LinkModel> linkPreset(std::string_view name);
const std::vector<std::string>& linkPresetNames();

struct Collective {
  std::string what;  // "gradient all-reduce", "forward parameter all-gather", ...
  CollKind kind = CollKind::AllReduce;
  CommPhase phase = CommPhase::Backward;
  int groupSize = 1;                   // ranks in the group
  bool interNode = false;              // the group spans nodes (the slower link)
  std::int64_t count = 0;              // collectives per step (buckets / units)
  std::int64_t messageBytes = 0;       // S per step, summed over `count` instances
  bool emulatedReduceScatter = false;  // Gloo (LibTorch 1.13): an all-reduce of the whole buffer
  double wireFactor() const;
  double wireBytes() const { return static_cast<double>(messageBytes) * wireFactor(); }
  double timeS = 0;  // filled by commTime
};
// {what, op, phase, group_size, inter_node, count, message_bytes, wire_bytes,
//  emulated_by_all_reduce, time_s}.
JsonValue toJson(const Collective& c);

struct CommOptions {
  // LibTorch 1.13's Gloo has no reduce-scatter: the runtime all-reduces the whole buffer.
  bool emulatedReduceScatter = false;
};

struct CommEstimate {
  Strategy strategy = Strategy::Ddp;
  std::vector<Collective> collectives;
  std::int64_t messageBytes = 0;  // per device per step
  double wireBytes = 0;           // per device per step
  double timeS = 0;               // sum of the collectives' times (no overlap)
  std::vector<std::string> notes;
};
// {message_bytes, wire_bytes, time_s, collectives}; the strategy and the notes are left to the
// holder (an assessment lists them with the memory's).
JsonValue toJson(const CommEstimate& c);

// The collectives one step of strategy s issues on one device (no times).
CommEstimate commVolume(const EstimateInput& in, Strategy s, const CommOptions& opt = {});
// Fills each collective's and the total time: groups inside a node use `intra`, groups that span
// nodes use `inter` (a ring across nodes runs at the slowest link).
void commTime(CommEstimate& c, const LinkModel& intra, const LinkModel& inter);

// One collective instance of a measured run, for the fit.
struct CollectiveSample {
  CollKind kind = CollKind::AllReduce;
  int groupSize = 0;
  std::int64_t messageBytes = 0;
  bool emulatedReduceScatter = false;
  double durationS = 0;
  // The fraction of the instance during which its rank computed (mean over the ranks of a matched
  // instance): what slows a collective down beside compute (link_calibration.h).
  double computeOverlap = 0;
  // A matched instance's last rank to start it: how much later than the others (their mean) it
  // saw the collective end. 0 where the instance was not matched across ranks.
  double lastLatenessS = 0;
  // How its ranks waited on it (our runtime's issue and wait times); Unknown for imported traces.
  WaitKind waited = WaitKind::Unknown;
  bool matched = false;  // across the ranks (the duration from the last start, lastLatenessS)
};
struct LinkFit {
  LinkModel link;  // name "fitted:<run>", alpha and busBw from the fit
  std::int64_t samples = 0;
  double r2 = 0;  // coefficient of determination of duration vs wire bytes
  double meanAbsRelError = 0;
};
// duration = alpha + wire/busBw, fitted apart for all-reduce-like collectives (all-reduce and the
// emulated reduce-scatter: they reduce, and run at allReduceBusBw) and the others (all-gather,
// reduce-scatter): least squares on relative error (weights 1/prediction², iterated) where a kind
// has two or more sizes whose duration grows with size; otherwise the kind keeps the other kind's
// latency (or none) and gets the mean bandwidth, and the link's note says so. Throws core::Error
// with fewer than two samples with a size and a duration.
LinkFit fitLink(const std::vector<CollectiveSample>& samples, const std::string& name);
// fitLink over a stored run's collectives, named "fitted:run<id>".
LinkFit fitRunLink(TraceStore& store, RunId runId);
// Which collectives of a run: those of its counted steps (the run's own traffic), or its link
// probe (profiler/runtime/link_probe.h: spans named "<op> link probe" outside the steps; the
// probe's warm-up instances are never read).
enum class SampleSet { Steps, LinkProbe };
// The all-reduce, all-gather and reduce-scatter instances of a run with a known size (communication
// lanes of our runtime, or NCCL kernels of an imported trace), from the trace store.
std::vector<CollectiveSample> collectiveSamples(TraceStore& store, RunId runId, SampleSet which = SampleSet::Steps);
// Whether a run's ranks ran on CUDA devices ("cuda:N", as our runtime and the importers name a
// rank's device): what picks a device class's measured defaults (interference, contention).
bool ranOnCuda(const std::vector<Rank>& ranks);
// The sets in one read of the run's tracks: the steps', the link probe's and the loaded probe's
// (its all-gathers waited on at once with compute right after; never in `probe`).
struct RunCollectiveSamples {
  std::vector<CollectiveSample> steps, probe, loaded;
};
// Step samples of the steps in `leftOut` (step numbers: a profile's disturbed steps) are dropped.
RunCollectiveSamples runCollectiveSamples(TraceStore& store, RunId runId, const std::set<std::int64_t>* leftOut = nullptr);

}  // namespace shardscope::core::estimator
