#pragma once
// All-gather / reduce-scatter bottlenecks: the instances whose exposed time costs the most, with a
// concrete suggestion from rules that can be justified from the trace (docs/METRICS.md).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/storage/trace_store.h"
#include "core/util/progress.h"

namespace shardscope::core {

struct Bottleneck {
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
};

// Elements below which an all-gather is small enough to lose efficiency (FSDP paper Fig. 2b,
// strategies.md §3.3).
constexpr std::int64_t kEfficientCollectiveElements = 33'000'000;

// The `limit` costliest (by exposed time) all-gathers and reduce-scatters of a run.
std::vector<Bottleneck> findCollectiveBottlenecks(TraceStore& store, Id runId, std::size_t limit = 20,
                                                  const CancelToken* cancel = nullptr);

}  // namespace shardscope::core
