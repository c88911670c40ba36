#pragma once
// Decoding of CUPTI activity buffers into GpuActivity records (docs/GPU.md; traces.md §4).
//
// A completed buffer is walked with cuptiActivityGetNextRecord (CUPTI's own iterator: record sizes
// are CUPTI's business) until CUPTI_ERROR_MAX_LIMIT_REACHED. Each record is cast to the struct of
// the header we compile against (CUDA 13.0: Kernel10, Memcpy6, MemcpyPtoP4, Memset4, API,
// ExternalCorrelation, Synchronization2, Memory4, Overhead3; CUDA 12: Kernel9 and the older
// versions, by CUPTI_API_VERSION). The decoder is stateful across buffers:
//  - EXTERNAL_CORRELATION records come before the API record they tag: correlationId -> our span
//    id is remembered and attached to the API record and to every GPU record of that launch;
//  - launch API start times are remembered per correlation to flag GPU records that start before
//    their launch (clock trouble);
//  - NCCL kernels (name starts with "nccl") are Communication with the collective from the name;
//    other kernels follow HTA's classification; memcpy/memset are Memory;
//  - noise API records (cudaGetDevice, cudaSetDevice, cudaGetLastError, cudaEventCreate*,
//    cudaEventDestroy, and every driver call that is not a launch) are counted and dropped, as
//    Kineto does;
//  - kernel/memcpy/memset records with start == end == 0 are counted (device timestamp buffer
//    overflow) and dropped; records outside the capture window are counted and dropped.
// Times are mapped to the host clock with the ClockAlignment given.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <unordered_map>

#include <cupti.h>

#include "profiler/cupti/clock_alignment.h"
#include "profiler/cupti/gpu_activity.h"

namespace shardscope::cupti {

// The record structs of the header we compile against (traces.md §4.4). CUPTI API versions of
// CUDA 13 are 130000 and up; CUDA 12's are small integers (12.9: 27).
#if CUPTI_API_VERSION >= 130100
using KernelRecord = CUpti_ActivityKernel11;
#elif CUPTI_API_VERSION >= 130000
using KernelRecord = CUpti_ActivityKernel10;
#else
using KernelRecord = CUpti_ActivityKernel9;
#endif
#if CUPTI_API_VERSION >= 130000
using MemcpyRecord = CUpti_ActivityMemcpy6;
using SyncRecord = CUpti_ActivitySynchronization2;
using MemoryRecord = CUpti_ActivityMemory4;
using OverheadRecord = CUpti_ActivityOverhead3;
#else
using MemcpyRecord = CUpti_ActivityMemcpy5;
using SyncRecord = CUpti_ActivitySynchronization;
using MemoryRecord = CUpti_ActivityMemory3;
using OverheadRecord = CUpti_ActivityOverhead;
#endif
using PeerRecord = CUpti_ActivityMemcpyPtoP4;
using MemsetRecord = CUpti_ActivityMemset4;

class ActivityDecoder {
 public:
  using Sink = std::function<void(GpuActivity&&)>;
  explicit ActivityDecoder(Sink sink) : sink_(std::move(sink)) {}

  // The capture window in CUPTI time; records entirely outside it are dropped.
  void setWindow(core::TimeNs startCupti, core::TimeNs endCupti = std::numeric_limits<core::TimeNs>::max()) {
    windowStart_ = startCupti;
    windowEnd_ = endCupti;
  }
  void setClock(const ClockAlignment& clock) { offset_ = clock.offset(); }

  // Walks one buffer (validSize bytes); returns the number of records walked (kept or not).
  std::size_t decodeBuffer(std::uint8_t* buffer, std::size_t validSize);
  // Decodes one record (public for tests).
  void decodeRecord(const CUpti_Activity* record);

  const CaptureStats& stats() const { return stats_; }
  CaptureStats& stats() { return stats_; }

 private:
  bool inWindow(std::uint64_t start, std::uint64_t end) const;
  void deliver(GpuActivity&& a);
  void tagCorrelation(GpuActivity& a) const;
  template <typename Record>
  std::optional<GpuActivity> deviceRecord(const Record& r, ActivityKind kind);

  Sink sink_;
  core::TimeNs windowStart_ = 0;
  core::TimeNs windowEnd_ = std::numeric_limits<core::TimeNs>::max();
  core::TimeNs offset_ = 0;
  CaptureStats stats_;
  std::unordered_map<std::uint32_t, std::uint64_t> external_;    // correlationId -> external id
  std::unordered_map<std::uint32_t, core::TimeNs> launchStart_;  // correlationId -> API start (CUPTI time)
};

// True for the API callbacks we keep (launches, copies, syncs, allocations); false for the noise.
bool keepRuntimeApi(std::uint32_t cbid);
bool keepDriverApi(std::uint32_t cbid);

// "cudaLaunchKernel" etc. (cuptiGetCallbackName, without the "_v7000" suffix).
std::string apiName(bool runtime, std::uint32_t cbid);

// Kineto's memcpy naming: "Memcpy HtoD (Pageable -> Device)".
std::string memcpyName(std::uint8_t copyKind, std::uint8_t srcKind, std::uint8_t dstKind);
std::string memsetName(std::uint8_t memoryKind);

}  // namespace shardscope::cupti
