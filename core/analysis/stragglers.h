#pragma once
// Collectives matched across ranks: arrival skew, the last-arriving rank and the wait it caused the
// others; the rank that keeps everybody waiting is the straggler. Clocks are aligned on the ends of
// matched collectives first (they end together on every rank), so per-node clock offsets do not
// masquerade as lateness.
#include <cstdint>
#include <optional>
#include <vector>

#include "core/storage/trace_store.h"
#include "core/util/progress.h"

namespace shardscope::core {

struct RankArrival {
  int rank = 0;
  TimeNs clockOffsetNs = 0;     // subtracted from this rank's times (median end difference vs the reference rank)
  std::int64_t instances = 0;   // matched collectives this rank took part in
  std::int64_t lastCount = 0;   // how often it arrived last
  TimeNs lateNs = 0;            // Σ (its arrival − the earliest arrival)
  TimeNs causedWaitNs = 0;      // Σ over collectives it arrived last at: Σ others' (its arrival − their arrival)
};

struct StragglerReport {
  std::int64_t matched = 0;     // collective instances matched across at least two ranks
  std::vector<RankArrival> ranks;
  std::optional<int> straggler;  // the rank that caused the most waiting, if it caused any
  TimeNs maxSkewNs = 0;          // largest arrival spread of one collective
};

// Instances are matched per (process group, operation) by their order on each rank.
StragglerReport detectStragglers(TraceStore& store, Id runId, const CancelToken* cancel = nullptr);

}  // namespace shardscope::core
