#pragma once
// Test oracles for a memory snapshot's curves, computed from their definitions (brute force), for
// the band layout's tests in core and the Memory page's in ui.
#include <algorithm>
#include <cstdint>

#include "core/analysis/memory_snapshot_analysis.h"

namespace shardscope::test {

// The active curve's maximum over [s, e), by the definition: the points inside it and, unless one
// sits on s, the level in force at s. -1: no point there or the bucket starts after the last point.
inline std::int64_t activeMaxByDefinition(const core::SnapshotTimeline& t, core::TimeNs s, core::TimeNs e) {
  if (t.active.empty() || s > t.active.back().tsNs) return -1;
  std::int64_t best = -1;
  bool onStart = false;
  const core::SnapshotCurvePoint* before = nullptr;
  for (const auto& p : t.active) {
    if (p.tsNs < s) before = &p;
    if (p.tsNs == s) onStart = true;
    if (p.tsNs >= s && p.tsNs < e) best = std::max(best, p.bytes);
  }
  if (before && !onStart) best = std::max(best, before->bytes);
  return best;
}

}  // namespace shardscope::test
