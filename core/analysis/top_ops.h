#pragma once
// Top kernels and top operators of a run (docs/METRICS.md, "Top kernels and operators"): the views
// users know from HTA and Nsight Systems. Per kernel or operator name over every rank: count, time,
// mean, max, share, and the time per rank so imbalance shows.
//
// * Kernels: the work on the device lanes (lanes.h). A rank with GPU work: every event of its GPU
//   streams (kernels, memcpy, memset, NCCL kernels), annotations and instants left out. A rank of a
//   run we trained or simulated without GPU work: its computation spans on CPU threads and its
//   collective spans on communication lanes (the same device lanes the step breakdown reads). An
//   imported trace without GPU work has no device lanes: no kernels.
//   Their time is the duration; the table's time (the "device time") is the sum over every kernel.
// * Operators: the `cpu_op` events on CPU threads (aten::..., and our runtime's compute spans), ranked
//   by *self time*: the duration minus the time of the cpu_op events nested directly in it on the
//   same thread. Self times add up to the time operators ran, without counting a nested op twice.
//
// Rows are ranked by time (descending; ties: count, then name). Past `limit` rows the rest is summed
// into one "other" row, so the shares add up to 1.
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/analysis/step_breakdown.h"
#include "core/model/types.h"
#include "core/storage/trace_store.h"
#include "core/util/json.h"
#include "core/util/progress.h"

namespace shardscope::core {

struct TopOpRow {
  std::string name;                     // the kernel or operator name; "other" for the other row
  bool other = false;                   // the names past the limit, summed
  std::int64_t names = 1;               // distinct names in the row (the other row: how many)
  Category category = Category::Other;  // kernels: the class given at import (HTA's); other row: Other
  std::int64_t count = 0;               // instances over every rank
  TimeNs timeNs = 0;                    // the ranked time: kernels Σ duration, operators Σ self time
  TimeNs totalNs = 0;                   // Σ duration (operators: inclusive of nested operators)
  TimeNs meanNs = 0;                    // timeNs / count
  TimeNs maxNs = 0;                     // the longest instance (of the ranked time)
  double share = 0;                     // timeNs / the table's timeNs
  std::vector<TimeNs> perRankNs;        // the ranked time per rank, in TopOps::ranks order
};

struct TopOpsTable {
  std::vector<TopOpRow> rows;     // ranked; at most `limit` named rows, then "other" when names remain
  TimeNs timeNs = 0;              // kernels: the run's device time (Σ kernel durations); operators: Σ self
  std::vector<TimeNs> perRankNs;  // the same per rank
  std::int64_t count = 0;         // instances
  std::int64_t distinctNames = 0;
};

struct TopOps {
  RunId runId;
  std::vector<int> ranks;  // rank numbers, the order of every perRankNs
  // What the kernels are: "GPU streams", "CPU compute and communication lanes (no GPU)", both
  // ("GPU streams; ...") for a run whose ranks differ, or "none" when no rank has device lanes.
  std::string deviceLanes;
  // Which events count (THE steady-state rule, step_breakdown.h): "counted steps (the warm-up step
  // and what runs outside any step left out)" for a run with recorded steps, else "the whole trace";
  // the runtime's link probe (calibration) is never counted.
  std::string measuredOver;
  std::size_t limit = 0;
  TopOpsTable kernels, operators;
};

constexpr std::size_t kTopOpsDefaultLimit = 50;

// One pass over each rank of the run (rank_scan.h). limit 0: every name, no other row.
TopOps computeTopOps(TraceStore& store, RunId runId, std::size_t limit = kTopOpsDefaultLimit,
                     const CancelToken* cancel = nullptr);

// As `top --json` prints it: {"run", "ranks", "device_lanes", "limit", "kernels": {...}, "operators": {...}}
// with times in integer ns and shares as fractions.
JsonValue toJson(const TopOps& t);

struct ScanContext;

// The same computation fed by scanRank (rank_scan.h).
class TopOpsAccumulator {
 public:
  explicit TopOpsAccumulator(ScanContext& ctx);
  ~TopOpsAccumulator();
  void beginRank(const Rank& rank);
  bool beginTrack(const TrackSummary& t);
  void onEvents(const EventChunk& c, std::size_t begin, std::size_t end, Id chunkId);
  void onEvent(const EventChunk& c, std::size_t i, Id chunkId);
  void endRank(const Rank& rank);
  TopOps finish(std::size_t limit);

  struct Acc {
    std::int64_t count = 0;
    TimeNs time = 0, total = 0, max = 0;
    std::uint8_t category = 0;
    std::vector<TimeNs> perRank;
  };

 private:
  enum class Lane { None, GpuStream, CpuCompute, CpuComm };
  struct OpenOp {
    TimeNs s, e;
    std::uint32_t name;
    TimeNs child;
  };
  void add(std::unordered_map<std::uint32_t, Acc>& table, std::vector<TimeNs>& rankTotals, std::uint32_t name,
           std::uint8_t category, TimeNs time, TimeNs total);
  void closeOp();
  void closeAllOps();
  TopOpsTable table(std::unordered_map<std::uint32_t, Acc>& accs, std::vector<TimeNs>& rankTotals, std::size_t limit);

  ScanContext& ctx_;
  CountedSteps counted_;  // from the recorded steps (runs we trained or simulated)
  bool byCountedSteps_ = false;
  bool cpuKernels_ = false;  // a run we trained or simulated: CPU lanes are device lanes
  bool hasGpu_ = false;
  bool anyGpuRank_ = false, anyCpuRank_ = false;
  Lane lane_ = Lane::None;
  bool cpuThread_ = false;
  std::size_t rankIndex_ = 0;
  std::vector<int> ranks_;
  std::vector<OpenOp> stack_;  // cpu_op events open on the current thread
  std::unordered_map<std::uint32_t, Acc> kernels_, ops_;
  std::vector<TimeNs> kernelRank_, opRank_;
};

}  // namespace shardscope::core
