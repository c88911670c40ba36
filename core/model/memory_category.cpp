#include "core/model/memory_category.h"

namespace shardscope::core {
namespace {

struct Names {
  std::string_view key, label;
};

constexpr std::array<Names, kMemoryCategoryCount> kNames = {{
    {"parameters", "parameters"},
    {"gathered_parameters", "gathered parameters"},
    {"gradients", "gradients"},
    {"optimizer_state", "optimizer state"},
    {"activations", "activations"},
    {"comm_buffers", "communication buffers"},
    {"other", "other"},
}};

}  // namespace

const std::array<MemoryCategory, kMemoryCategoryCount>& memoryCategories() {
  static const std::array<MemoryCategory, kMemoryCategoryCount> all = {
      MemoryCategory::Parameters,  MemoryCategory::GatheredParameters, MemoryCategory::Gradients, MemoryCategory::OptimizerState,
      MemoryCategory::Activations, MemoryCategory::CommBuffers,        MemoryCategory::Other};
  return all;
}

std::string_view memoryCategoryKey(MemoryCategory c) { return kNames[static_cast<std::size_t>(c)].key; }

std::string_view memoryCategoryLabel(MemoryCategory c) { return kNames[static_cast<std::size_t>(c)].label; }

std::optional<MemoryCategory> memoryCategoryFromKey(std::string_view key) {
  for (MemoryCategory c : memoryCategories())
    if (memoryCategoryKey(c) == key) return c;
  return std::nullopt;
}

}  // namespace shardscope::core
