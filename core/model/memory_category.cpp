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

std::string memoryDeviceName(int deviceType, int deviceId) {
  return (deviceType == 1 ? "cuda:" : "cpu:") + std::to_string(deviceId);
}

namespace {
constexpr std::string_view kTrackPrefix = "memory: ";
}

std::string memoryCategoryTrackName(MemoryCategory c, int deviceType, int deviceId) {
  return std::string(kTrackPrefix) + std::string(memoryCategoryLabel(c)) + " (" + memoryDeviceName(deviceType, deviceId) + ")";
}

std::optional<MemoryCategoryTrack> parseMemoryCategoryTrackName(std::string_view name) {
  if (name.substr(0, kTrackPrefix.size()) != kTrackPrefix) return std::nullopt;
  const std::size_t open = name.rfind(" (");
  if (open == std::string_view::npos || open < kTrackPrefix.size() || name.back() != ')') return std::nullopt;
  const std::string_view label = name.substr(kTrackPrefix.size(), open - kTrackPrefix.size());
  std::string_view dev = name.substr(open + 2, name.size() - open - 3);
  MemoryCategoryTrack t;
  if (dev.substr(0, 5) == "cuda:") {
    t.deviceType = 1;
    dev.remove_prefix(5);
  } else if (dev.substr(0, 4) == "cpu:") {
    dev.remove_prefix(4);
  } else {
    return std::nullopt;
  }
  if (dev.empty() || dev.size() > 6) return std::nullopt;
  int id = 0;
  for (const char ch : dev) {
    if (ch < '0' || ch > '9') return std::nullopt;
    id = id * 10 + (ch - '0');
  }
  t.deviceId = id;
  for (const MemoryCategory c : memoryCategories())
    if (memoryCategoryLabel(c) == label) {
      t.category = c;
      return t;
    }
  return std::nullopt;
}

}  // namespace shardscope::core
