#pragma once
// What the CUPTI tracer hands to the capture: one GPU activity record, decoded from CUPTI's buffers
// into plain data (no CUPTI types here, so the consumers — the worker's capture, tests — do not need
// the CUDA headers). Times are nanoseconds in the host's CLOCK_REALTIME domain after clock alignment
// (docs/GPU.md "Clocks"); CUPTI owns its name strings, so names are copied.
#include <cstdint>
#include <optional>
#include <string>

#include "core/model/types.h"

namespace shardscope::cupti {

using core::TimeNs;

enum class ActivityKind : std::uint8_t {
  Kernel,           // CONCURRENT_KERNEL (NCCL kernels included: category Communication)
  Memcpy,           // MEMCPY
  MemcpyPeer,       // MEMCPY2 (peer to peer)
  Memset,           // MEMSET
  RuntimeApi,       // RUNTIME (cudaLaunchKernel, cudaMemcpyAsync, ...)
  DriverApi,        // DRIVER (cuLaunchKernelEx: NCCL's launches)
  Synchronization,  // SYNCHRONIZATION (stream/event/context synchronize)
  MemoryAlloc,      // MEMORY2 allocation (cudaMalloc: a caching-allocator segment)
  MemoryFree,       // MEMORY2 release
  Overhead,         // OVERHEAD (CUPTI's own buffer flushes, instrumentation)
};

std::string_view toString(ActivityKind k);

struct GpuActivity {
  ActivityKind kind = ActivityKind::Kernel;
  TimeNs startNs = 0;
  TimeNs endNs = 0;  // == startNs for memory records
  int device = -1;
  std::uint32_t context = 0;
  std::uint32_t stream = 0;                 // CUDA stream id (kernels, memcpy, memset, memory)
  std::uint32_t correlation = 0;            // launch API record <-> GPU record
  std::optional<std::uint64_t> externalId;  // our span's id pushed with cuptiActivityPushExternalCorrelationId
  std::string name;                         // kernel name; "Memcpy HtoD (Pinned -> Device)"; API name ("cudaLaunchKernel")
  core::Category category = core::Category::Other;
  core::CollectiveOp op = core::CollectiveOp::None;  // NCCL kernels: from the kernel name
  std::int64_t bytes = 0;                            // memcpy / memset / memory records
  std::uint64_t address = 0;                         // memory records
  std::uint32_t processId = 0, threadId = 0;         // API records
  std::uint32_t cbid = 0;                            // API records: the callback id
  // Kernels: launch configuration.
  std::int32_t grid[3] = {0, 0, 0};
  std::int32_t block[3] = {0, 0, 0};
  std::int32_t registersPerThread = 0;
  std::int32_t sharedMemoryBytes = 0;  // static + dynamic
  std::string argsJson() const;        // a Kineto-like args object for the store
};

// Counts of one capture (stored as metrics / warnings on the run).
struct CaptureStats {
  std::uint64_t records = 0;  // decoded and delivered
  std::uint64_t kernels = 0, ncclKernels = 0, memcpys = 0, memsets = 0, apiCalls = 0, syncs = 0, memoryRecords = 0, overheads = 0;
  std::uint64_t zeroTimestamp = 0;   // kernel/memcpy/memset with start == end == 0 (device buffer overflow)
  std::uint64_t outsideWindow = 0;   // ended before the capture window started, or started after it
  std::uint64_t beforeLaunch = 0;    // GPU record starting before its launch API call (clock skew warning)
  std::uint64_t filteredApi = 0;     // noise API records discarded (cudaGetDevice, cudaEventCreate, ...)
  std::uint64_t unknownKinds = 0;    // record kinds we do not decode
  std::uint64_t droppedByCupti = 0;  // cuptiActivityGetNumDroppedRecords
  std::uint64_t buffersCompleted = 0, buffersRefused = 0;
  std::uint64_t bytesCompleted = 0;
  std::uint64_t lost() const { return zeroTimestamp + droppedByCupti; }
};

}  // namespace shardscope::cupti
