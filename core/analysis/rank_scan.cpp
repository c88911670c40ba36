#include "core/analysis/rank_scan.h"

#include <algorithm>

#include "core/model/kernel_classify.h"

namespace shardscope::core {

const StringClasses::Entry& StringClasses::fill(std::uint32_t id) {
  const std::string_view s = store_.stringView(id);
  Entry e;
  e.known = true;
  if (s.empty()) e.bits |= kEmpty;
  if (s == "Trace") e.bits |= kTrace;
  if (s == "cpu_op") e.bits |= kCpuOp;
  if (s == "user_annotation") e.bits |= kUserAnnotation;
  if (s == "gpu_user_annotation") e.bits |= kGpuUserAnnotation;
  if (s == "Event Sync" || s == "Context Sync") e.bits |= kSyncName;
  if (isLinkProbeName(s)) e.bits |= kLinkProbe;
  if (auto n = profilerStepNumber(s)) e.step = *n;
  constexpr std::uint32_t kMaxCached = 1u << 24;
  if (id >= kMaxCached) {
    spare_ = e;
    return spare_;
  }
  if (id >= cache_.size()) cache_.resize(std::max<std::size_t>(id + 1, cache_.size() * 2));
  cache_[id] = e;
  return cache_[id];
}

}  // namespace shardscope::core
