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
{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "pid": 0, "tid": 21, "ts": )J" +
         ar2s + R"J(, "dur": 20, "args": {"stream": 21, "correlation": 5}}]})J";
}

// Rank r of a `world`-rank job with the lanes of a real multi-rank torch.profiler trace (µs): two CPU
// threads, GPU streams 7 (compute), 13 and 22 (copies), 24 (a little compute), 84 (NCCL, no process
// group) — first seen in a different order on every rank, as files written by different processes
// are — and per step: a gemm on stream 7, an all-gather on stream 84 partly hidden under it, copies.
// Ten steps of 100 µs; rank r's all-gather of step s starts r µs later (rank `world - 1` arrives last).
inline std::string traceMany(int rank, int world) {
  std::string j = R"J({"distributedInfo": {"rank": )J" + std::to_string(rank) + R"J(, "world_size": )J" + std::to_string(world) +
                  R"J(}, "traceEvents": [)J";
  bool first = true;
  auto add = [&](const std::string& e) {
    j += first ? "\n" : ",\n";
    j += e;
    first = false;
  };
  auto num = [](double v) { return std::to_string(v); };
  auto kernel = [&](const std::string& cat, const std::string& name, int stream, double ts, double dur, int corr) {
    add(R"J({"ph": "X", "cat": ")J" + cat + R"J(", "name": ")J" + name + R"J(", "pid": 0, "tid": )J" + std::to_string(stream) +
        R"J(, "ts": )J" + num(ts) + R"J(, "dur": )J" + num(dur) + R"J(, "args": {"stream": )J" + std::to_string(stream) +
        R"J(, "device": 0, "correlation": )J" + std::to_string(corr) + "}}");
  };
  auto cpu = [&](int tid, const std::string& cat, const std::string& name, double ts, double dur, int corr) {
    add(R"J({"ph": "X", "cat": ")J" + cat + R"J(", "name": ")J" + name + R"J(", "pid": 1, "tid": )J" + std::to_string(tid) +
        R"J(, "ts": )J" + num(ts) + R"J(, "dur": )J" + num(dur) +
        (corr ? R"J(, "args": {"correlation": )J" + std::to_string(corr) + "}}" : std::string("}")));
  };
  // The first event of each stream, in a rank-dependent order.
  const int streams[5] = {7, 13, 22, 24, 84};
  for (int k = 0; k < 5; ++k) {
    const int s = streams[(k + rank) % 5];
    if (s == 84)
      kernel("kernel", "ncclDevKernel_AllGather_RING_LL", s, 1 + k, 0.5, 90 + k);
    else
      kernel("gpu_memcpy", "Memcpy HtoD", s, 1 + k, 0.5, 90 + k);
  }
  for (int step = 0; step < 10; ++step) {
    const double t = 10 + step * 100.0;
    const int c = 100 + step * 10;
    cpu(1, "user_annotation", "ProfilerStep#" + std::to_string(step + 1), t, 100, 0);
    cpu(1, "cuda_runtime", "cudaLaunchKernel", t + 2, 1, c);
    cpu(1, "cuda_runtime", "cudaLaunchKernel", t + 4, 1, c + 1);
    cpu(2, "cpu_op", "backward worker", t + 5, 20, 0);
    kernel("kernel", "gemm", 7, t + 10, 40, c);
    kernel("kernel", "ncclDevKernel_AllGather_RING_LL", 84, t + 30 + rank, 40, c + 1);
    kernel("kernel", "small_gemm", 24, t + 75, 5, c + 2);
    kernel("gpu_memcpy", "Memcpy DtoD", 13, t + 80, 2, c + 3);
    kernel("gpu_memcpy", "Memcpy DtoH", 22, t + 85, 2, c + 4);
  }
  return j + "]}";
}

struct Found {
  std::uint32_t lane = 0, index = 0;
};

// The i-th event named `name` (by start) on rank `rankIndex`'s lanes with a track (not a derived copy).
inline Found findNamed(const tl::TimelineIndex& idx, int rankIndex, const std::string& name, int nth) {
  std::vector<std::pair<TimeNs, Found>> all;
  for (std::uint32_t li = 0; li < idx.lanes().size(); ++li) {
    const auto& l = idx.lane(li);
    if (l.rankIndex != rankIndex || !l.trackId || l.isCounter()) continue;
    for (std::uint32_t i = 0; i < l.eventCount(); ++i)
      if (idx.name(l.nameIdx[i]) == name) all.push_back({l.start[i], {li, i}});
  }
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  if (nth >= static_cast<int>(all.size())) throw std::runtime_error("no " + name);
  return all[static_cast<std::size_t>(nth)].second;
}

}  // namespace shardscope::test::timeline
