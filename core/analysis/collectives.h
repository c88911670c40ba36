#pragma once
// Shardscope's collectives table: per operation and process group, how many, how big, how long,
// at what algorithm/bus bandwidth (nccl-tests definitions, strategies.md §3.1), and how much of
// their time was exposed (no computation running on that rank meanwhile).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "core/analysis/intervals.h"
#include "core/storage/trace_store.h"
#include "core/util/progress.h"

namespace shardscope::core {

struct CollectiveStats {
  CollectiveOp op = CollectiveOp::None;
  std::string processGroup;  // c10d name ("0", "3"); empty when unknown
  int groupSize = 0;         // ranks in the group (0 when unknown)
  std::int64_t count = 0;    // instances over all ranks
  std::int64_t bytes = 0;    // message bytes summed over instances (S of nccl-tests), when known
  std::int64_t countWithBytes = 0;
  TimeNs totalNs = 0;
  TimeNs meanNs = 0;
  TimeNs exposedNs = 0;
  std::optional<double> algBwGBps;  // bytes / time over the instances with a size
  std::optional<double> busBwGBps;  // algBw x the op's factor for groupSize
  // The same over the counted steps only (THE steady-state rule, step_breakdown.h CountedSteps): what
  // per-step figures divide (compareCollectives, the Communication page), so that a runtime run's
  // warm-up step and what runs outside any step do not leak into "per step".
  std::int64_t countedCount = 0, countedBytes = 0, countedWithBytes = 0;
  TimeNs countedNs = 0, countedExposedNs = 0;
};

// nccl-tests bus-bandwidth factor: 2(n-1)/n for all-reduce, (n-1)/n for all-gather, reduce-scatter
// and all-to-all, 1 for broadcast/reduce/point-to-point; nullopt when n is unknown.
std::optional<double> busBandwidthFactor(CollectiveOp op, int n);

// Sorted by total time, descending. Collectives are the communication kernels (NCCL) on GPU streams,
// or the spans of a run's communication lanes.
std::vector<CollectiveStats> computeCollectives(TraceStore& store, RunId runId, const CancelToken* cancel = nullptr);

struct ScanContext;

// The same computation fed by scanRank (rank_scan.h).
class CollectivesAccumulator {
 public:
  explicit CollectivesAccumulator(ScanContext& ctx);
  ~CollectivesAccumulator();
  void beginRank(const Rank& rank);
  bool beginTrack(const TrackSummary& t);
  void onEvents(const EventChunk& c, std::size_t begin, std::size_t end, Id chunkId);
  void onEvent(const EventChunk& c, std::size_t i, Id chunkId);
  void endRank(const Rank& rank);
  std::vector<CollectiveStats> finish();

  struct Instance {
    TimeNs s, e;
    CollectiveOp op;
    Id pg;
    int groupSize;
    std::optional<std::int64_t> bytes;
    std::int64_t step;  // -1: outside any step
  };
  // One (op, group)'s totals in one step (for the counted-steps totals at finish).
  struct StepPart {
    std::int64_t count = 0, bytes = 0, withBytes = 0;
    TimeNs ns = 0, exposedNs = 0;
  };

 private:
  ScanContext& ctx_;
  std::map<Id, std::pair<std::string, int>> groups_;  // pg id -> (name, size)
  std::map<std::tuple<int, std::string>, CollectiveStats> table_;
  std::map<std::tuple<int, std::string>, std::map<std::int64_t, StepPart>> byStep_;
  bool hasGpu_ = false;
  TrackKind kind_ = TrackKind::CpuThread;
  std::vector<intervals::Span> compute_;
  std::vector<Instance> instances_;
};

}  // namespace shardscope::core
