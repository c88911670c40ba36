#pragma once
// What live memory holds, one vocabulary for every layer: the runtime's counting allocator
// attributes each allocation to one (profiler/capture), stores the breakdown at the peak as
// `peak_breakdown.<key>` metrics, the simulator stores the same keys for simulated runs, the
// analysis reads them back (MemoryPeak::breakdown) and the Memory page and reports show them.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
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

// A device as the memory tracks name it: "cpu:0", "cuda:3" (deviceType 1 is CUDA, anything else is
// shown as cpu).
std::string memoryDeviceName(int deviceType, int deviceId);
// The counter track of one category's live bytes over time on one device of a rank, as the runtime
// records it (profiler/capture/memory_tracker): "memory: gradients (cpu:0)". Every sample is the
// category's exact live bytes at that time; at each memory record of the device the categories sum
// to its total allocated.
std::string memoryCategoryTrackName(MemoryCategory c, int deviceType, int deviceId);
struct MemoryCategoryTrack {
  MemoryCategory category = MemoryCategory::Other;
  int deviceType = 0;
  int deviceId = 0;
};
// The category and device of such a track name; nullopt for any other name.
std::optional<MemoryCategoryTrack> parseMemoryCategoryTrackName(std::string_view name);

}  // namespace shardscope::core
