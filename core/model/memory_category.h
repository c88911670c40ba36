#pragma once
// What live memory holds, one vocabulary for every layer: the runtime's counting allocator
// attributes each allocation to one (profiler/capture), stores the breakdown at the peak as
// `peak_breakdown.<key>` metrics, the simulator stores the same keys for simulated runs, the
// analysis reads them back (MemoryPeak::breakdown) and the Memory page and reports show them.
#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace shardscope::core {

enum class MemoryCategory : std::uint8_t {
  Parameters,          // the parameters a rank keeps (its shard under ZeRO-3/FSDP, all of them otherwise)
  GatheredParameters,  // ZeRO-3/FSDP: whole units all-gathered for forward or backward, freed after use
  Gradients,
  OptimizerState,
  Activations,
  CommBuffers,  // gradient buckets, reduce-scatter inputs and outputs, other collective buffers
  Other,
};
constexpr int kMemoryCategoryCount = 7;

// Every category, in display order.
const std::array<MemoryCategory, kMemoryCategoryCount>& memoryCategories();
// The metric key ("gathered_parameters": peak_breakdown.gathered_parameters) and the label for
// people ("gathered parameters").
std::string_view memoryCategoryKey(MemoryCategory c);
std::string_view memoryCategoryLabel(MemoryCategory c);
std::optional<MemoryCategory> memoryCategoryFromKey(std::string_view key);

}  // namespace shardscope::core
