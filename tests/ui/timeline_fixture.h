#pragma once
// The timeline tests' fixture: a hand-made 2-rank GPU trace with known kernels, and a lookup of an
// event by name in a built index (tst_timeline_widget, tst_timeline_page).
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/timeline/timeline_index.h"

namespace shardscope::test::timeline {

using core::TimeNs;
namespace tl = core::timeline;

// Rank r's trace (µs): step 1 [0, 100): gemm [20, 60) on stream 7, all-reduce [40, 80) on stream 21
// (20 µs of it exposed); step 2 [100, 200): gemm [120, 150), all-reduce [150 + r*5, 170 + r*5).
inline std::string trace(int rank) {
  const std::string ar2s = std::to_string(150 + rank * 5);
  return R"J({"distributedInfo": {"rank": )J" + std::to_string(rank) + R"J(, "world_size": 2}, "traceEvents": [
{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10, "dur": 1, "args": {"correlation": 1}},
{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 15, "dur": 1, "args": {"correlation": 2}},
{"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 20, "dur": 40, "args": {"stream": 7, "correlation": 1}},
{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "pid": 0, "tid": 21, "ts": 40, "dur": 40, "args": {"stream": 21, "correlation": 2}},
{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "pid": 1, "tid": 1, "ts": 100, "dur": 100},
{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 110, "dur": 1, "args": {"correlation": 4}},
{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 112, "dur": 1, "args": {"correlation": 5}},
{"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 120, "dur": 30, "args": {"stream": 7, "correlation": 4}},
{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "pid": 0, "tid": 21, "ts": )J" + ar2s +
         R"J(, "dur": 20, "args": {"stream": 21, "correlation": 5}}]})J";
}

struct Found {
  std::uint32_t lane = 0, index = 0;
};

// The i-th event named `name` (by start) on rank `rankIndex`'s lanes with a track (not a derived copy).
inline Found findNamed(const tl::TimelineIndex& idx, int rankIndex, const std::string& name, int nth) {
  std::vector<std::pair<TimeNs, Found>> all;
  for (std::uint32_t li = 0; li < idx.lanes().size(); ++li) {
    const auto& l = idx.lane(li);
    if (l.rankIndex != rankIndex || l.trackId == 0 || l.isCounter()) continue;
    for (std::uint32_t i = 0; i < l.eventCount(); ++i)
      if (idx.name(l.nameIdx[i]) == name) all.push_back({l.start[i], {li, i}});
  }
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  if (nth >= static_cast<int>(all.size())) throw std::runtime_error("no " + name);
  return all[static_cast<std::size_t>(nth)].second;
}

}  // namespace shardscope::test::timeline
