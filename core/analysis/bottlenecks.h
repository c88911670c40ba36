#pragma once
// Collective bottlenecks: the exposed collectives grouped by what the user can change, ranked by the
// exposed time they cost, each with its cause and what to try (docs/METRICS.md).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/analysis/intervals.h"
#include "core/model/config_knobs.h"
#include "core/storage/trace_store.h"
#include "core/util/progress.h"

namespace shardscope::core {

// Why a collective instance was exposed (docs/METRICS.md, "Collective bottlenecks"), one per instance,
// the first that holds in this order:
//   LateRank       it waited for a later peer for at least half its exposed time (rank skew);
//   Queued         it started right after another collective on the same stream, launched before
//                  that one ended: it waited its turn;
//   SlowTransfer   its bus bandwidth was under half the best this run's link reached on large
//                  messages, and at that bandwidth it would have lost at least half its exposed time;
//   NothingToOverlap  none of these: it ran when no computation was there to hide it (issued late).
enum class ExposedCause { LateRank, Queued, SlowTransfer, NothingToOverlap };
const char* toString(ExposedCause c);  // "late_rank", "queued", "slow_transfer", "nothing_to_overlap"

// A group of exposed collective instances that one change would act on, summed over steps and ranks:
// the same operation on the same target — what the run or trace names (the runtime's parameter,
// bucket or FSDP unit in the collective's name; else the innermost user annotation open at its CPU
// launch: a module or FSDP unit) — and process group; without a name, the same operation, message
// size and process group. The fields from `rank` on describe its worst instance.
struct Bottleneck {
  std::string target;          // "param layers.0.mlp.down_proj", "## forward ##"; "" when unnamed
  std::string targetFrom;      // "name" (the collective's own), "annotation" (at its launch), "size" (none)
  std::int64_t instances = 1;  // exposed instances in the group
  int ranks = 1;               // distinct ranks among them
  std::int64_t stepsSeen = 1;  // distinct steps among them
  TimeNs totalExposedNs = 0;   // summed over the instances
  TimeNs meanExposedNs = 0;    // totalExposedNs / instances
  TimeNs totalDurNs = 0;       // their durations summed
  int rank = 0;
  CollectiveOp op = CollectiveOp::None;
  std::optional<std::int64_t> step;
  TimeNs startNs = 0, durNs = 0, exposedNs = 0;
  std::optional<std::int64_t> bytes;     // the worst instance's message
  std::optional<std::int64_t> elements;  // bytes / dtype size
  std::string processGroup;
  int groupSize = 0;
  std::string kernel;  // the worst instance's kernel or span name
  std::string unit;    // annotation (layer or FSDP unit) active at its launch, when known
  // Exposed time of the group by cause, largest first; `cause` is the largest.
  struct CauseShare {
    ExposedCause cause = ExposedCause::NothingToOverlap;
    TimeNs exposedNs = 0;
    std::int64_t instances = 0;
  };
  std::vector<CauseShare> causes;
  ExposedCause cause = ExposedCause::NothingToOverlap;
  std::vector<std::string> reasons;      // why it is exposed, the dominant cause first
  std::vector<std::string> suggestions;  // what to try, for the run's backend and world size
  std::optional<int> lateRank;           // LateRank: the peer waited for most (its rank number)
  TimeNs waitForLateRankNs = 0;          // ... and the waiting for it, summed over the group
  std::optional<double> busBwGBps;       // the group's bus bandwidth (bytes and durations summed)
  std::optional<double> linkBwGBps;      // the best this run's link reached (p90 of large messages)
  // The link's knee on this process group (linkKnee below); absent when the sizes measured do not
  // bracket it.
  std::optional<std::int64_t> linkKneeBytes;
  // The first suggestion as a change of the run's own configuration that the runtime can launch
  // ("try it"); absent where no knob carries it out or the run has no configuration (imported traces).
  std::optional<KnobChange> tryIt;
};

// The link's knee: the message size at which a process group's collectives reach half the best bus
// bandwidth they reach at any size (Hockney's n½), from (bytes, bus GB/s) samples of one group —
// every collective of the run counts, the link probe's included. Samples are binned by powers of two;
// a bin needs kKneeMinSamples; the knee is interpolated (in log size) between the last bin under half
// and the first at or above it. nullopt when no bin is under half or none reaches it.
constexpr int kKneeMinSamples = 3;
std::optional<std::int64_t> linkKnee(const std::vector<std::pair<std::int64_t, double>>& samples);

// Elements below which an all-gather is small enough to lose efficiency (FSDP paper Fig. 2b,
// strategies.md §3.3).
constexpr std::int64_t kEfficientCollectiveElements = 33'000'000;

// Rank skew: the rule fires when this rank waited for a later peer (last arrival − its own arrival,
// clocks aligned) for at least this share of the instance's exposed time, and it was not the last.
constexpr double kSkewShareOfExposed = 0.5;
// ... and only when that wait fits in the instance (a collective cannot complete before the last rank
// joins): wait <= its duration x (1 + this slack for clock-alignment error).
constexpr double kSkewAlignmentSlack = 0.1;
// Slow transfer: bus bandwidth under this share of the link's (the p90 over the run's messages of at
// least kLinkReferenceBytes on the same process group).
constexpr double kSlowTransferShare = 0.5;
constexpr std::int64_t kLinkReferenceBytes = 1 << 20;

// The `limit` costliest groups of exposed collectives of a run (every operation: all-gather,
// reduce-scatter, all-reduce, all-to-all, broadcast, send/recv...), by exposed time summed over
// their instances (collectives among one rank are local: never a bottleneck).
std::vector<Bottleneck> findCollectiveBottlenecks(TraceStore& store, RunId runId, std::size_t limit = 20,
                                                  const CancelToken* cancel = nullptr);

struct ScanContext;
class StragglerAccumulator;

// The same computation fed by scanRank (rank_scan.h): per rank it keeps only the exposed instances
// (times, ids, target) and, for the link's reference bandwidth, the bandwidth of large messages;
// finish() groups them, judges each instance's cause (the rank-skew rule needs the instances matched
// across ranks: pass the finished StragglerAccumulator of the same scan) and reads the worst instance
// of each reported group back from the store.
class BottleneckAccumulator {
 public:
  explicit BottleneckAccumulator(ScanContext& ctx);
  ~BottleneckAccumulator();
  void beginRank(const Rank& rank);
  bool beginTrack(const TrackSummary& t);
  void onEvents(const EventChunk& c, std::size_t begin, std::size_t end, Id chunkId);
  void onEvent(const EventChunk& c, std::size_t i, Id chunkId);
  void endRank(const Rank& rank);
  std::vector<Bottleneck> finish(std::size_t limit, const StragglerAccumulator* stragglers);

  struct Comm {  // a collective on a device lane of the current rank
    TimeNs s, e;
    TrackId track;
    Id eventId;
    CollectiveOp op;
    std::int64_t step, bytes, correlation;
    std::uint32_t name, pg;
    int groupSize;
    bool local;  // among one rank
  };
  struct Candidate {  // an exposed collective instance
    std::size_t rankIndex;
    Id eventId;
    TimeNs s, e, exposed;
    CollectiveOp op;
    std::int64_t step;  // EventChunk::kNull when outside steps
    std::int64_t bytes;
    std::uint32_t pg;
    int groupSize;
    bool hasPrevious;  // a collective ran before it on the same stream
    CollectiveOp previousOp;
    TimeNs previousEnd;
    TimeNs launch;            // its CPU launch (INT64_MIN: unknown)
    std::uint32_t target;     // into targets_ (0: none)
    std::uint8_t targetFrom;  // 0 size, 1 name, 2 annotation
  };

 private:
  ScanContext& ctx_;
  std::size_t rankIndex_ = 0;
  TrackId track_;
  TrackKind kind_ = TrackKind::CpuThread;
  std::vector<intervals::Span> compute_;
  std::vector<Comm> comms_;
  struct Annotation {
    TimeNs s, e;
    std::uint32_t name;
  };
  std::vector<Annotation> annotations_;                    // the rank's CPU user annotations
  std::vector<std::pair<std::int64_t, TimeNs>> launches_;  // (correlation, start) of its CPU events
  std::uint32_t internTarget(const std::string& t);
  std::vector<Candidate> candidates_;
  bool hasGpu_ = false;                                // the rank's device lanes are GPU streams
  std::map<std::uint32_t, bool> annotationOk_;         // annotation name id -> names a target
  std::map<std::uint32_t, std::uint32_t> nameTarget_;  // collective name id -> target (0: none)
  std::vector<std::string> targets_{""};               // interned targets
  std::map<std::string, std::uint32_t> targetIds_;
  std::map<std::uint32_t, std::vector<double>> largeBusBw_;  // process group -> bus GB/s of large messages
  // process group -> (bytes, bus GB/s) of its collectives (every size, capped per group), for linkKnee
  std::map<std::uint32_t, std::vector<std::pair<std::int64_t, double>>> sizeBusBw_;
  std::map<std::uint32_t, bool> loadedProbe_;  // link-probe name id -> the loaded probe's
  bool gpuComms_ = false;                      // collectives ran as GPU kernels (NCCL)
};

}  // namespace shardscope::core
