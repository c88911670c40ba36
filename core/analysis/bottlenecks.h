#pragma once
// All-gather / reduce-scatter bottlenecks: the instances whose exposed time costs the most, with a
// concrete suggestion from rules that can be justified from the trace (docs/METRICS.md).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/analysis/intervals.h"
#include "core/storage/trace_store.h"
#include "core/util/progress.h"

namespace shardscope::core {

// One collective of a rank's step loop (the same operation, group, size and kernel at the same
// position in every step) grouped over its exposed instances in every step; the fields below
// `meanExposedNs` describe its worst instance (the step and moment where it was most exposed).
struct Bottleneck {
  std::int64_t instances = 1;        // exposed instances grouped here (one per step it was exposed in)
  std::int64_t stepsSeen = 1;        // distinct steps among them
  TimeNs totalExposedNs = 0;         // summed over the instances
  TimeNs meanExposedNs = 0;          // totalExposedNs / instances
  int rank = 0;
  CollectiveOp op = CollectiveOp::None;
  std::optional<std::int64_t> step;
  TimeNs startNs = 0, durNs = 0, exposedNs = 0;
  std::optional<std::int64_t> bytes;
  std::optional<std::int64_t> elements;  // bytes / dtype size
  std::string processGroup;
  std::string kernel;          // the kernel's name
  std::string unit;            // annotation (layer or FSDP unit) active at its launch, when known
  std::vector<std::string> reasons;     // why it is exposed, one per rule that fired
  std::vector<std::string> suggestions;  // what to change, one per rule that fired
  std::optional<int> lateRank;           // rank-skew rule: the peer this rank waited for
  TimeNs waitForLateRankNs = 0;          // ... and how long (its arrival − this rank's, clocks aligned)
};

// Elements below which an all-gather is small enough to lose efficiency (FSDP paper Fig. 2b,
// strategies.md §3.3).
constexpr std::int64_t kEfficientCollectiveElements = 33'000'000;

// Rank skew: the rule fires when this rank waited for a later peer (last arrival − its own arrival,
// clocks aligned) for at least this share of the instance's exposed time, and it was not the last.
constexpr double kSkewShareOfExposed = 0.5;
// ... and only when that wait fits in the instance (a collective cannot complete before the last rank
// joins): wait <= its duration x (1 + this slack for clock-alignment error).
constexpr double kSkewAlignmentSlack = 0.1;

// The `limit` costliest all-gathers and reduce-scatters of a run, per rank, by exposed time summed
// over their steps (collectives among one rank are local: never a bottleneck).
std::vector<Bottleneck> findCollectiveBottlenecks(TraceStore& store, Id runId, std::size_t limit = 20,
                                                  const CancelToken* cancel = nullptr);

struct ScanContext;
class StragglerAccumulator;

// The same computation fed by scanRank (rank_scan.h): per rank it keeps only the exposed instances
// (times and ids); finish() ranks them and reads the few it reports back from the store. The rank-skew
// rule needs the instances matched across ranks: pass the finished StragglerAccumulator of the same scan.
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
    Id track;
    Id eventId;
    CollectiveOp op;
    std::int64_t step, bytes;
    std::uint32_t name, pg;
    bool local;  // among one rank
  };
  struct Candidate {  // an exposed all-gather / reduce-scatter
    std::size_t rankIndex;
    Id eventId;
    TimeNs exposed;
    bool hasPrevious;  // a collective ran before it on the same stream
    CollectiveOp previousOp;
    TimeNs previousEnd;
    std::int64_t step;  // EventChunk::kNull when outside steps
    // The same collective in every step: op, group, bytes, kernel name and its ordinal among the
    // step's collectives with those four.
    std::uint64_t key;
  };

 private:
  ScanContext& ctx_;
  std::size_t rankIndex_ = 0;
  Id track_ = 0;
  TrackKind kind_ = TrackKind::CpuThread;
  std::vector<intervals::Span> compute_;
  std::vector<Comm> comms_;
  std::vector<Candidate> candidates_;
};

}  // namespace shardscope::core
