#pragma once
// The bridge from the CUPTI tracer's records to a rank's Recorder (docs/GPU.md): one GPU-stream
// lane per (device, stream) with the kernels, memcpys and memsets (NCCL kernels as communication
// with their collective), one CPU lane per host thread with the CUDA runtime/driver calls, a lane
// for CUPTI's own overhead, allocator segments (MEMORY2: cudaMalloc/cudaFree) as memory records of
// the device, and at the end the capture statistics as metrics of the rank (cupti.*: records per
// kind, dropped and zero-timestamp records, clock offset uncertainty and drift). No LibTorch and no
// CUPTI headers here: it consumes plain GpuActivity records, so it is tested without a GPU.
#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

#include "profiler/capture/recorder.h"
#include "profiler/cupti/gpu_activity.h"

namespace shardscope::gpu {

class GpuCapture {
 public:
  explicit GpuCapture(capture::Recorder& recorder) : rec_(recorder) {}
  // The training loop announces each step as it starts (host time). GPU records belong to the step
  // during which they were launched (their launch API call, by correlation; else their own start),
  // as Kineto's kernels belong to the ProfilerStep of their launching op.
  void beginStep(std::int64_t step, core::TimeNs hostStartNs);
  // Thread-safe (the tracer's consumer thread calls it).
  void onActivity(cupti::GpuActivity&& a);
  // Stores the capture statistics (and the clock figures) as rank metrics.
  void finish(const cupti::CaptureStats& stats, core::TimeNs clockUncertaintyNs, core::TimeNs clockDriftNs);
  // Segment bytes currently held per device (MEMORY2), for tests.
  std::int64_t segmentBytes(int device) const;

 private:
  int streamLane(int device, std::uint32_t stream);
  int threadLane(std::uint32_t tid);
  int overheadLane();
  int syncLane();

  capture::Recorder& rec_;
  mutable std::mutex mu_;
  std::map<std::pair<int, std::uint32_t>, int> streamLanes_;
  std::map<std::uint32_t, int> threadLanes_;
  int overheadLane_ = -1;
  int syncLane_ = -1;
  std::map<int, std::int64_t> segments_;                           // device -> bytes
  std::vector<std::pair<core::TimeNs, std::int64_t>> stepStarts_;  // (host start, step), by time
  std::map<std::uint32_t, core::TimeNs> launchNs_;                 // correlation -> launch API start
};

}  // namespace shardscope::gpu
