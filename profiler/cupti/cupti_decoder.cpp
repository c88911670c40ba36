#include "profiler/cupti/cupti_decoder.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "core/model/kernel_classify.h"
#include "core/util/json.h"

namespace shardscope::cupti {

std::string_view toString(ActivityKind k) {
  switch (k) {
    case ActivityKind::Kernel:
      return "kernel";
    case ActivityKind::Memcpy:
      return "gpu_memcpy";
    case ActivityKind::MemcpyPeer:
      return "gpu_memcpy";
    case ActivityKind::Memset:
      return "gpu_memset";
    case ActivityKind::RuntimeApi:
      return "cuda_runtime";
    case ActivityKind::DriverApi:
      return "cuda_driver";
    case ActivityKind::Synchronization:
      return "cuda_sync";
    case ActivityKind::MemoryAlloc:
      return "gpu_malloc";
    case ActivityKind::MemoryFree:
      return "gpu_free";
    case ActivityKind::Overhead:
      return "overhead";
  }
  return "other";
}

std::string GpuActivity::argsJson() const {
  using core::JsonValue;
  auto num = [](auto v) { return JsonValue::number(static_cast<std::int64_t>(v)); };
  JsonValue o = JsonValue::object();
  if (device >= 0) o.set("device", num(device));
  if (kind == ActivityKind::Kernel || kind == ActivityKind::Memcpy || kind == ActivityKind::MemcpyPeer ||
      kind == ActivityKind::Memset || kind == ActivityKind::Synchronization) {
    o.set("stream", num(stream));
    o.set("context", num(context));
  }
  o.set("correlation", num(correlation));
  if (externalId) o.set("External id", num(*externalId));
  if (kind == ActivityKind::Kernel) {
    JsonValue g = JsonValue::array(), b = JsonValue::array();
    for (int v : grid) g.push(num(v));
    for (int v : block) b.push(num(v));
    o.set("grid", std::move(g));
    o.set("block", std::move(b));
    o.set("registers per thread", num(registersPerThread));
    o.set("shared memory", num(sharedMemoryBytes));
  }
  if (bytes) o.set("bytes", num(bytes));
  if (address) o.set("address", num(address));
  if (kind == ActivityKind::RuntimeApi || kind == ActivityKind::DriverApi) {
    o.set("cbid", num(cbid));
    o.set("pid", num(processId));
    o.set("tid", num(threadId));
  }
  return o.dump();
}

bool keepRuntimeApi(std::uint32_t cbid) {
  switch (cbid) {
    case CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaSetDevice_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaPeekAtLastError_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaEventCreate_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaEventCreateWithFlags_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaEventDestroy_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaGetDeviceCount_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamIsCapturing_v10000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaDeviceGetAttribute_v5000:
      return false;
    default:
      return true;
  }
}

bool keepDriverApi(std::uint32_t cbid) {
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz:
      return true;
    default:
      return false;
  }
}

std::string apiName(bool runtime, std::uint32_t cbid) {
  const char* name = nullptr;
  const CUptiResult r = cuptiGetCallbackName(runtime ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API, cbid, &name);
  if (r != CUPTI_SUCCESS || !name) return std::string(runtime ? "cudaRuntime#" : "cuDriver#") + std::to_string(cbid);
  std::string s(name);
  // "cudaLaunchKernel_v7000" -> "cudaLaunchKernel" (Kineto's names carry no version suffix).
  const auto v = s.rfind("_v");
  if (v != std::string::npos && v + 2 < s.size() &&
      std::all_of(s.begin() + static_cast<std::ptrdiff_t>(v) + 2, s.end(), [](char c) { return c >= '0' && c <= '9'; }))
    s.resize(v);
  return s;
}

namespace {

const char* copyKindName(std::uint8_t k) {
  switch (k) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
      return "HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
      return "DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA:
      return "HtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH:
      return "AtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA:
      return "AtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD:
      return "AtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA:
      return "DtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
      return "DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
      return "HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
      return "PtoP";
    default:
      return "Unknown";
  }
}

const char* memoryKindName(std::uint8_t k) {
  switch (k) {
    case CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE:
      return "Pageable";
    case CUPTI_ACTIVITY_MEMORY_KIND_PINNED:
      return "Pinned";
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE:
      return "Device";
    case CUPTI_ACTIVITY_MEMORY_KIND_ARRAY:
      return "Array";
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED:
      return "Managed";
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC:
      return "Device Static";
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC:
      return "Managed Static";
    default:
      return "Unknown";
  }
}

core::TimeNs asTime(std::uint64_t t) { return static_cast<core::TimeNs>(t); }

}  // namespace

std::string memcpyName(std::uint8_t copyKind, std::uint8_t srcKind, std::uint8_t dstKind) {
  return std::string("Memcpy ") + copyKindName(copyKind) + " (" + memoryKindName(srcKind) + " -> " + memoryKindName(dstKind) +
         ")";
}

std::string memsetName(std::uint8_t memoryKind) { return std::string("Memset (") + memoryKindName(memoryKind) + ")"; }

bool ActivityDecoder::inWindow(std::uint64_t start, std::uint64_t end) const {
  return asTime(end) >= windowStart_ && asTime(start) <= windowEnd_;
}

// The fields every device-side record (kernel, memcpy, memset) has, after the checks they share:
// start == end == 0 is a record lost to a full device buffer, a record outside the window is dropped.
template <typename Record>
std::optional<GpuActivity> ActivityDecoder::deviceRecord(const Record& r, ActivityKind kind) {
  if (r.start == 0 && r.end == 0) {
    ++stats_.zeroTimestamp;
    return std::nullopt;
  }
  if (!inWindow(r.start, r.end)) {
    ++stats_.outsideWindow;
    return std::nullopt;
  }
  GpuActivity a;
  a.kind = kind;
  a.startNs = asTime(r.start);
  a.endNs = asTime(r.end);
  a.device = static_cast<int>(r.deviceId);
  a.context = r.contextId;
  a.stream = r.streamId;
  a.correlation = r.correlationId;
  tagCorrelation(a);
  return a;
}

void ActivityDecoder::tagCorrelation(GpuActivity& a) const {
  if (auto it = external_.find(a.correlation); it != external_.end()) a.externalId = it->second;
}

void ActivityDecoder::deliver(GpuActivity&& a) {
  a.startNs += offset_;
  a.endNs += offset_;
  ++stats_.records;
  if (sink_) sink_(std::move(a));
}

std::size_t ActivityDecoder::decodeBuffer(std::uint8_t* buffer, std::size_t validSize) {
  std::size_t n = 0;
  if (!buffer || validSize == 0) return 0;
  CUpti_Activity* record = nullptr;
  for (;;) {
    const CUptiResult r = cuptiActivityGetNextRecord(buffer, validSize, &record);
    if (r != CUPTI_SUCCESS) break;  // CUPTI_ERROR_MAX_LIMIT_REACHED: end of the valid part
    decodeRecord(record);
    ++n;
  }
  return n;
}

void ActivityDecoder::decodeRecord(const CUpti_Activity* record) {
  if (!record) return;
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto* k = reinterpret_cast<const KernelRecord*>(record);
      auto a = deviceRecord(*k, ActivityKind::Kernel);
      if (!a) return;
      a->name = k->name ? k->name : "(unnamed kernel)";
      if (core::isNcclKernelName(a->name)) {
        a->category = core::Category::Communication;
        a->op = core::collectiveFromKernelName(a->name);
        ++stats_.ncclKernels;
      } else {
        a->category = core::htaKernelCategory(a->name);
      }
      a->grid[0] = k->gridX, a->grid[1] = k->gridY, a->grid[2] = k->gridZ;
      a->block[0] = k->blockX, a->block[1] = k->blockY, a->block[2] = k->blockZ;
      a->registersPerThread = k->registersPerThread;
      a->sharedMemoryBytes = k->staticSharedMemory + k->dynamicSharedMemory;
      if (auto it = launchStart_.find(a->correlation); it != launchStart_.end() && a->startNs < it->second) ++stats_.beforeLaunch;
      ++stats_.kernels;
      deliver(std::move(*a));
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* m = reinterpret_cast<const MemcpyRecord*>(record);
      auto a = deviceRecord(*m, ActivityKind::Memcpy);
      if (!a) return;
      a->bytes = static_cast<std::int64_t>(m->bytes);
      a->name = memcpyName(m->copyKind, m->srcKind, m->dstKind);
      a->category = core::Category::Memory;
      ++stats_.memcpys;
      deliver(std::move(*a));
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY2: {
      const auto* m = reinterpret_cast<const PeerRecord*>(record);
      auto a = deviceRecord(*m, ActivityKind::MemcpyPeer);
      if (!a) return;
      a->bytes = static_cast<std::int64_t>(m->bytes);
      a->name = "Memcpy PtoP (device " + std::to_string(m->srcDeviceId) + " -> device " + std::to_string(m->dstDeviceId) + ")";
      a->category = core::Category::Memory;
      ++stats_.memcpys;
      deliver(std::move(*a));
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* m = reinterpret_cast<const MemsetRecord*>(record);
      auto a = deviceRecord(*m, ActivityKind::Memset);
      if (!a) return;
      a->bytes = static_cast<std::int64_t>(m->bytes);
      a->name = memsetName(static_cast<std::uint8_t>(m->memoryKind));
      a->category = core::Category::Memory;
      ++stats_.memsets;
      deliver(std::move(*a));
      return;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
      const auto* api = reinterpret_cast<const CUpti_ActivityAPI*>(record);
      const bool runtime = record->kind == CUPTI_ACTIVITY_KIND_RUNTIME;
      if (!(runtime ? keepRuntimeApi(api->cbid) : keepDriverApi(api->cbid))) {
        ++stats_.filteredApi;
        return;
      }
      if (!inWindow(api->start, api->end)) {
        ++stats_.outsideWindow;
        return;
      }
      // Bounded: a long capture forgets the oldest launches rather than growing without end.
      if (launchStart_.size() > (1u << 21)) launchStart_.clear();
      launchStart_[api->correlationId] = asTime(api->start);
      GpuActivity a;
      a.kind = runtime ? ActivityKind::RuntimeApi : ActivityKind::DriverApi;
      a.startNs = asTime(api->start);
      a.endNs = asTime(api->end);
      a.correlation = api->correlationId;
      a.processId = api->processId;
      a.threadId = api->threadId;
      a.cbid = api->cbid;
      a.name = apiName(runtime, api->cbid);
      a.category = core::Category::Other;
      tagCorrelation(a);
      ++stats_.apiCalls;
      deliver(std::move(a));
      return;
    }
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
      const auto* e = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(record);
      if (e->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2) {
        if (external_.size() > (1u << 21)) external_.clear();
        external_[e->correlationId] = e->externalId;
      }
      return;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
      const auto* s = reinterpret_cast<const SyncRecord*>(record);
      if (!inWindow(s->start, s->end)) {
        ++stats_.outsideWindow;
        return;
      }
      GpuActivity a;
      a.kind = ActivityKind::Synchronization;
      a.startNs = asTime(s->start);
      a.endNs = asTime(s->end);
      a.context = s->contextId;
      a.stream = s->streamId;
      a.correlation = s->correlationId;
      switch (s->type) {
        case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE:
          a.name = "Event Sync";
          break;
        case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT:
          a.name = "Stream Wait Event";
          break;
        case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE:
          a.name = "Stream Sync";
          break;
        case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE:
          a.name = "Context Sync";
          break;
        default:
          a.name = "Sync";
          break;
      }
      tagCorrelation(a);
      ++stats_.syncs;
      deliver(std::move(a));
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMORY2: {
      const auto* m = reinterpret_cast<const MemoryRecord*>(record);
      if (!inWindow(m->timestamp, m->timestamp)) {
        ++stats_.outsideWindow;
        return;
      }
      GpuActivity a;
      a.kind = m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE ? ActivityKind::MemoryFree
                                                                                      : ActivityKind::MemoryAlloc;
      a.startNs = a.endNs = asTime(m->timestamp);
      a.device = static_cast<int>(m->deviceId);
      a.context = m->contextId;
      a.stream = m->streamId;
      a.correlation = m->correlationId;
      a.address = m->address;
      a.bytes = static_cast<std::int64_t>(m->bytes);
      a.name = a.kind == ActivityKind::MemoryFree ? "cudaFree" : "cudaMalloc";
      a.category = core::Category::Memory;
      ++stats_.memoryRecords;
      deliver(std::move(a));
      return;
    }
    case CUPTI_ACTIVITY_KIND_OVERHEAD: {
      const auto* o = reinterpret_cast<const OverheadRecord*>(record);
      if (!inWindow(o->start, o->end)) {
        ++stats_.outsideWindow;
        return;
      }
      GpuActivity a;
      a.kind = ActivityKind::Overhead;
      a.startNs = asTime(o->start);
      a.endNs = asTime(o->end);
      switch (o->overheadKind) {
        case CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH:
          a.name = "CUPTI buffer flush";
          break;
        case CUPTI_ACTIVITY_OVERHEAD_DRIVER_COMPILER:
          a.name = "Driver compiler";
          break;
        case CUPTI_ACTIVITY_OVERHEAD_CUPTI_INSTRUMENTATION:
          a.name = "CUPTI instrumentation";
          break;
        case CUPTI_ACTIVITY_OVERHEAD_CUPTI_RESOURCE:
          a.name = "CUPTI resource";
          break;
        default:
          a.name = "CUPTI overhead";
          break;
      }
      ++stats_.overheads;
      deliver(std::move(a));
      return;
    }
    default:
      ++stats_.unknownKinds;
      return;
  }
}

// ---- ClockAlignment ---------------------------------------------------------------------------

void ClockAlignment::addSample(core::TimeNs hostBefore, core::TimeNs cuptiNs, core::TimeNs hostAfter) {
  if (hostAfter < hostBefore) std::swap(hostBefore, hostAfter);
  samples_.push_back({hostBefore + (hostAfter - hostBefore) / 2 - cuptiNs, hostAfter - hostBefore});
}

namespace {
// The samples with the shortest round trips (the better half, at least one): preemption between
// the reads inflates a round trip and skews that sample's midpoint.
std::vector<std::pair<core::TimeNs, core::TimeNs>> bestHalf(const std::vector<std::pair<core::TimeNs, core::TimeNs>>& all) {
  auto v = all;
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  v.resize(std::max<std::size_t>(1, (v.size() + 1) / 2));
  return v;
}
core::TimeNs median(std::vector<core::TimeNs> v) {
  if (v.empty()) return 0;
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  if (v.size() % 2) return *mid;
  const core::TimeNs hi = *mid;
  const core::TimeNs lo = *std::max_element(v.begin(), mid);
  return lo + (hi - lo) / 2;
}
}  // namespace

core::TimeNs ClockAlignment::offset() const {
  if (samples_.empty()) return 0;
  std::vector<std::pair<core::TimeNs, core::TimeNs>> all;
  all.reserve(samples_.size());
  for (const auto& s : samples_) all.emplace_back(s.offset, s.roundTrip);
  std::vector<core::TimeNs> offsets;
  for (const auto& [o, rt] : bestHalf(all)) offsets.push_back(o);
  return median(std::move(offsets));
}

core::TimeNs ClockAlignment::uncertainty() const {
  if (samples_.empty()) return 0;
  std::vector<std::pair<core::TimeNs, core::TimeNs>> all;
  for (const auto& s : samples_) all.emplace_back(s.offset, s.roundTrip);
  std::vector<core::TimeNs> rts;
  for (const auto& [o, rt] : bestHalf(all)) rts.push_back(rt);
  return median(std::move(rts)) / 2;
}

}  // namespace shardscope::cupti
