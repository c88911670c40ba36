#pragma once
// Statistics of a selected time range on one rank (the timeline's range selection): the Shardscope
// per-step figures of docs/METRICS.md computed over [t0, t1) instead of over a step, from the
// timeline index. Same definitions as core/analysis (step_breakdown for compute / communication /
// overlap / exposed communication, collectives for the instances and bytes): the event kinds are
// classified with their rules at build time (EventBits) and the spans combined with
// core/analysis/intervals.h. Events overlapping the range take part clipped to it.
#include <cstdint>
#include <optional>
#include <vector>

#include "core/timeline/timeline_index.h"

namespace shardscope::core::timeline {

struct RangeCollectives {
  CollectiveOp op = CollectiveOp::None;
  std::int64_t count = 0;
  std::int64_t countWithBytes = 0;
  std::int64_t bytes = 0;
};

struct RangeStats {
  int rankIndex = 0;
  TimeNs t0 = 0, t1 = 0;
  TimeNs rangeNs = 0;             // t1 - t0
  TimeNs computeNs = 0;           // union of computation on the rank's device lanes, within the range
  TimeNs commNs = 0;              // union of communication
  TimeNs overlappedCommNs = 0;    // communication while computation runs
  TimeNs exposedCommNs = 0;       // communication while no computation runs
  TimeNs busyNs = 0;              // union of all work on the device lanes
  TimeNs otherBusyNs = 0;         // busy - compute - exposed communication
  TimeNs idleNs = 0;              // range - busy
  std::optional<double> overlap;  // overlapped / communication; none without communication
  // Collective instances overlapping the range (counted whole; bytes = their message sizes).
  std::int64_t collectives = 0;
  std::int64_t collectivesWithBytes = 0;
  std::int64_t bytes = 0;
  std::vector<RangeCollectives> byOp;  // by operation
};

RangeStats rangeStatistics(const TimelineIndex& index, int rankIndex, TimeNs t0, TimeNs t1);

}  // namespace shardscope::core::timeline
