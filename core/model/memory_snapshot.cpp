#include "core/model/memory_snapshot.h"

#include <algorithm>
#include <array>
#include <set>
#include <unordered_map>

namespace shardscope::core {
namespace {

constexpr std::array<std::string_view, 9> kActionNames = {"alloc",         "free_requested", "free_completed",
                                                          "segment_alloc", "segment_free",   "segment_map",
                                                          "segment_unmap", "snapshot",       "oom"};

}  // namespace

std::string_view memActionName(MemAction a) {
  const auto i = static_cast<std::size_t>(a);
  return i < kActionNames.size() ? kActionNames[i] : std::string_view("?");
}

std::optional<MemAction> parseMemAction(std::string_view name) {
  for (std::size_t i = 0; i < kActionNames.size(); ++i)
    if (kActionNames[i] == name) return static_cast<MemAction>(i);
  return std::nullopt;
}

std::vector<int> MemorySnapshot::devices() const {
  std::set<int> d;
  for (const auto& e : events) d.insert(e.device);
  for (const auto& s : segments) d.insert(s.device);
  return {d.begin(), d.end()};
}

std::vector<MemPriorBlock> reconstructPriorBlocks(const MemorySnapshot& s) {
  std::vector<MemPriorBlock> out;
  for (int device : s.devices()) {
    std::unordered_map<std::uint64_t, bool> live;  // addresses allocated in the trace and not yet freed
    for (const auto& e : s.events) {
      if (e.device != device) continue;
      if (e.action == MemAction::Alloc) {
        live[e.addr] = true;
      } else if (e.action == MemAction::FreeCompleted) {
        if (live.erase(e.addr) == 0) out.push_back({device, e.addr, e.size, e.stack, true});
      }
    }
    for (const auto& b : s.blocks) {
      if (b.segment < 0 || static_cast<std::size_t>(b.segment) >= s.segments.size()) continue;
      if (s.segments[static_cast<std::size_t>(b.segment)].device != device) continue;
      if (b.state == "active_allocated" && !live.contains(b.address))
        out.push_back({device, b.address, b.requestedSize, b.stack, false});
    }
  }
  return out;
}

}  // namespace shardscope::core
