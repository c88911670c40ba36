#include "profiler/gpu/gpu_capture.h"

#include <algorithm>
#include <iterator>
#include <string>

namespace shardscope::gpu {

using cupti::ActivityKind;

int GpuCapture::streamLane(int device, std::uint32_t stream) {
  auto key = std::make_pair(device, stream);
  if (auto it = streamLanes_.find(key); it != streamLanes_.end()) return it->second;
  // Device lanes first, ordered by device then stream (the store's display order).
  const int lane = rec_.lane("GPU " + std::to_string(device) + " stream " + std::to_string(stream), core::TrackKind::GpuStream,
                             -1000 + device * 100 + static_cast<int>(stream % 100), device, static_cast<std::int64_t>(stream),
                             static_cast<std::int64_t>(stream));
  streamLanes_.emplace(key, lane);
  return lane;
}

int GpuCapture::threadLane(std::uint32_t tid) {
  if (auto it = threadLanes_.find(tid); it != threadLanes_.end()) return it->second;
  const int lane =
      rec_.lane("CUDA API (thread " + std::to_string(tid) + ")", core::TrackKind::CpuThread,
                500 + static_cast<int>(threadLanes_.size()), std::nullopt, std::nullopt, static_cast<std::int64_t>(tid));
  threadLanes_.emplace(tid, lane);
  return lane;
}

int GpuCapture::syncLane() {
  if (syncLane_ < 0)
    syncLane_ = rec_.lane("CUDA synchronization", core::TrackKind::CpuThread, 800, std::nullopt, std::nullopt, std::nullopt);
  return syncLane_;
}

int GpuCapture::overheadLane() {
  if (overheadLane_ < 0)
    overheadLane_ = rec_.lane("CUPTI overhead", core::TrackKind::CpuThread, 900, std::nullopt, std::nullopt, std::nullopt);
  return overheadLane_;
}

void GpuCapture::beginStep(std::int64_t step, core::TimeNs hostStartNs) {
  std::lock_guard<std::mutex> lock(mu_);
  stepStarts_.emplace_back(hostStartNs, step);
}

void GpuCapture::onActivity(cupti::GpuActivity&& a) {
  std::lock_guard<std::mutex> lock(mu_);
  capture::SpanRecord s;
  if (a.kind == ActivityKind::RuntimeApi || a.kind == ActivityKind::DriverApi) {
    if (launchNs_.size() > (1u << 20)) launchNs_.clear();  // bounded; old launches are long done
    launchNs_[a.correlation] = a.startNs;
  }
  if (!stepStarts_.empty()) {
    core::TimeNs t = a.startNs;
    if (auto it = launchNs_.find(a.correlation); a.correlation && it != launchNs_.end()) t = it->second;
    auto st = std::upper_bound(stepStarts_.begin(), stepStarts_.end(), t,
                               [](core::TimeNs v, const std::pair<core::TimeNs, std::int64_t>& p) { return v < p.first; });
    if (st != stepStarts_.begin()) s.step = std::prev(st)->second;
  }
  s.startNs = a.startNs;
  s.endNs = a.endNs;
  s.category = a.category;
  s.op = a.op;
  s.correlation = static_cast<std::int64_t>(a.correlation);
  if (a.externalId) s.externalId = static_cast<std::int64_t>(*a.externalId);
  switch (a.kind) {
    case ActivityKind::Kernel:
    case ActivityKind::Memcpy:
    case ActivityKind::MemcpyPeer:
    case ActivityKind::Memset:
      s.lane = streamLane(a.device, a.stream);
      s.cat = std::string(cupti::toString(a.kind));
      s.gpuRow = true;
      if (a.kind != ActivityKind::Kernel) s.bytes = a.bytes;
      break;
    case ActivityKind::Synchronization:
      // Host-side waits: on the stream they wait for would overlap its kernels; CUDA API lane.
      s.lane = syncLane();
      s.cat = "cuda_sync";
      break;
    case ActivityKind::RuntimeApi:
    case ActivityKind::DriverApi:
      s.lane = threadLane(a.threadId);
      s.cat = std::string(cupti::toString(a.kind));
      break;
    case ActivityKind::Overhead:
      s.lane = overheadLane();
      s.cat = "overhead";
      break;
    case ActivityKind::MemoryAlloc:
    case ActivityKind::MemoryFree: {
      const std::int64_t delta = a.kind == ActivityKind::MemoryAlloc ? a.bytes : -a.bytes;
      std::int64_t& total = segments_[a.device];
      total += delta;
      // MEMORY2 sees cudaMalloc segments (the caching allocator's reserved memory, and NCCL's and
      // cuBLAS's own buffers): a counter lane of its own. The device's memory records are the caching
      // allocator's statistics (allocated and reserved), so its peaks never mix the two sources.
      rec_.counter("cudaMalloc total, cuda:" + std::to_string(a.device) + " (CUPTI)", a.startNs, static_cast<double>(total));
      return;
    }
  }
  s.name = std::move(a.name);
  s.argsJson = a.argsJson();
  rec_.span(std::move(s));
}

void GpuCapture::finish(const cupti::CaptureStats& st, core::TimeNs clockUncertaintyNs, core::TimeNs clockDriftNs) {
  auto m = [&](const char* key, double v) { rec_.metric(std::string("cupti.") + key, v); };
  m("records", static_cast<double>(st.records));
  m("kernels", static_cast<double>(st.kernels));
  m("nccl_kernels", static_cast<double>(st.ncclKernels));
  m("memcpys", static_cast<double>(st.memcpys));
  m("memsets", static_cast<double>(st.memsets));
  m("api_calls", static_cast<double>(st.apiCalls));
  m("memory_records", static_cast<double>(st.memoryRecords));
  m("dropped_records", static_cast<double>(st.droppedByCupti));
  m("zero_timestamp_records", static_cast<double>(st.zeroTimestamp));
  m("lost_records", static_cast<double>(st.lost()));
  m("outside_window", static_cast<double>(st.outsideWindow));
  m("before_launch", static_cast<double>(st.beforeLaunch));
  m("buffers_refused", static_cast<double>(st.buffersRefused));
  m("buffers_completed", static_cast<double>(st.buffersCompleted));
  m("clock_uncertainty_ns", static_cast<double>(clockUncertaintyNs));
  m("clock_drift_ns", static_cast<double>(clockDriftNs));
}

std::int64_t GpuCapture::segmentBytes(int device) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = segments_.find(device);
  return it == segments_.end() ? 0 : it->second;
}

}  // namespace shardscope::gpu
