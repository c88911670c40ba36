#include "profiler/cupti/cupti_tracer.h"

#include <time.h>

#include <chrono>
#include <cstdlib>
#include <stdexcept>

namespace shardscope::cupti {

namespace {

void check(CUptiResult r, const char* call) {
  if (r == CUPTI_SUCCESS) return;
  const char* text = nullptr;
  cuptiGetResultString(r, &text);
  throw std::runtime_error(std::string("CUPTI: ") + call + " failed: " + (text ? text : "unknown error") + " (" +
                           std::to_string(static_cast<int>(r)) + ")");
}

core::TimeNs realtimeNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<core::TimeNs>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace

CuptiTracer& CuptiTracer::instance() {
  static CuptiTracer tracer;
  return tracer;
}

core::TimeNs CuptiTracer::cuptiNow() {
  std::uint64_t t = 0;
  cuptiGetTimestamp(&t);
  return static_cast<core::TimeNs>(t);
}

void CuptiTracer::pushExternalId(std::uint64_t id) {
  cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2, id);
}

void CuptiTracer::popExternalId() {
  std::uint64_t last = 0;
  cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2, &last);
}

void CuptiTracer::initialize(const TracerOptions& options) {
  if (initialized_) return;
  options_ = options;
  check(cuptiGetVersion(&version_), "cuptiGetVersion");
  std::size_t deviceBuffer = 32u << 20;  // device-side record buffer (default 3.2 MB ~ 100k records, §4.2)
  std::size_t valueSize = sizeof deviceBuffer;
  check(cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, &valueSize, &deviceBuffer),
        "cuptiActivitySetAttribute(DEVICE_BUFFER_SIZE)");
  check(cuptiActivityRegisterCallbacks(&CuptiTracer::bufferRequested, &CuptiTracer::bufferCompleted),
        "cuptiActivityRegisterCallbacks");
  initialized_ = true;
}

// The API calls TracerOptions::ApiRecords::Launches records, one by one (CUPTI of CUDA 12.5 and later).
void CuptiTracer::enableLaunchApis([[maybe_unused]] bool enable) {
#if CUPTI_API_VERSION >= 23
  static constexpr CUpti_CallbackId kRuntime[] = {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
                                                  CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
                                                  CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
                                                  CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
                                                  CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000,
                                                  CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000,
                                                  CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
                                                  CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000,
                                                  CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020,
                                                  CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_ptds_v7000,
                                                  CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020,
                                                  CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000,
                                                  CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DAsync_v3020,
                                                  CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DAsync_ptsz_v7000,
                                                  CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeerAsync_v4000,
                                                  CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020,
                                                  CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_ptsz_v7000,
                                                  CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020,
                                                  CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_ptsz_v7000,
                                                  CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020,
                                                  CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020,
                                                  CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_v3020,
                                                  CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_ptsz_v7000,
                                                  CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_v3020,
                                                  CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_ptsz_v7000,
                                                  CUPTI_RUNTIME_TRACE_CBID_cudaEventRecordWithFlags_v11010,
                                                  CUPTI_RUNTIME_TRACE_CBID_cudaEventRecordWithFlags_ptsz_v11010,
                                                  CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020,
                                                  CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020};
  static constexpr CUpti_CallbackId kDriver[] = {CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
                                                 CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx};
  for (auto cbid : kRuntime) check(cuptiActivityEnableRuntimeApi(cbid, enable ? 1 : 0), "cuptiActivityEnableRuntimeApi");
  for (auto cbid : kDriver) check(cuptiActivityEnableDriverApi(cbid, enable ? 1 : 0), "cuptiActivityEnableDriverApi");
#endif
}

void CuptiTracer::sampleClock(ClockAlignment& c, int n) const {
  for (int i = 0; i < n; ++i) {
    const core::TimeNs before = realtimeNs();
    const core::TimeNs gpu = cuptiNow();
    const core::TimeNs after = realtimeNs();
    c.addSample(before, gpu, after);
  }
}

void CuptiTracer::start(ActivityDecoder::Sink sink) {
  if (!initialized_) initialize(options_);
  if (running_) throw std::runtime_error("CUPTI: the tracer is already capturing");
  startClock_ = ClockAlignment();
  sampleClock(startClock_, options_.clockSamples);
  decoder_ = std::make_unique<ActivityDecoder>(std::move(sink));
  decoder_->setClock(startClock_);
  decoder_->setWindow(cuptiNow());
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopConsumer_ = false;
    refused_ = completedBuffers_ = completedBytes_ = 0;
  }
  std::vector<CUpti_ActivityKind> kinds = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                           CUPTI_ACTIVITY_KIND_MEMCPY2, CUPTI_ACTIVITY_KIND_MEMSET};
  bool perCall = false;
  if (options_.api == TracerOptions::ApiRecords::All) {
    kinds.insert(kinds.end(),
                 {CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION});
  } else if (options_.api == TracerOptions::ApiRecords::Launches) {
#if CUPTI_API_VERSION >= 23  // CUDA 12.5: cuptiActivityEnableRuntimeApi / DriverApi
    perCall = true;
    kinds.push_back(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
#else
    kinds.insert(kinds.end(), {CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION});
#endif
  }
  if (options_.syncs) kinds.push_back(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION);
  if (options_.memory) kinds.push_back(CUPTI_ACTIVITY_KIND_MEMORY2);
  if (options_.overhead) kinds.push_back(CUPTI_ACTIVITY_KIND_OVERHEAD);
  std::vector<CUpti_ActivityKind> enabled;
  try {
    for (auto k : kinds) {
      check(cuptiActivityEnable(k), "cuptiActivityEnable");
      enabled.push_back(k);
    }
#if CUPTI_API_VERSION >= 130000
    if (options_.syncs) cuptiActivityEnableCudaEventDeviceTimestamps(1);
#endif
    if (perCall) enableLaunchApis(true);
  } catch (...) {
    for (auto k : enabled) cuptiActivityDisable(k);
    if (perCall) {
      try {
        enableLaunchApis(false);
      } catch (const std::exception&) {
      }
    }
    decoder_.reset();
    throw;
  }
  running_ = true;
  consumer_ = std::thread([this] { consume(); });
  stopFlusher_ = false;
  flusher_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(flushMu_);
    while (!stopFlusher_) {
      flushCv_.wait_for(lock, std::chrono::milliseconds(options_.flushPeriodMs), [this] { return stopFlusher_; });
      if (stopFlusher_) break;
      lock.unlock();
      cuptiActivityFlushAll(0);  // hands filled buffers to bufferCompleted
      lock.lock();
    }
  });
}

CaptureStats CuptiTracer::stop() {
  if (!running_) return decoder_ ? decoder_->stats() : CaptureStats{};
  {
    std::lock_guard<std::mutex> lock(flushMu_);
    stopFlusher_ = true;
  }
  flushCv_.notify_all();
  if (flusher_.joinable()) flusher_.join();
  for (auto k : {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMCPY2,
                 CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
                 CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, CUPTI_ACTIVITY_KIND_MEMORY2,
                 CUPTI_ACTIVITY_KIND_OVERHEAD})
    cuptiActivityDisable(k);
  if (options_.api == TracerOptions::ApiRecords::Launches) {
    try {
      enableLaunchApis(false);
    } catch (const std::exception&) {  // stopping goes on: the kinds are off, the buffers are flushed
    }
  }
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);  // partially filled buffers too
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopConsumer_ = true;
  }
  cv_.notify_all();
  if (consumer_.joinable()) consumer_.join();
  ClockAlignment end;
  sampleClock(end, options_.clockSamples);
  drift_ = end.offset() - startClock_.offset();
  running_ = false;
  CaptureStats s = decoder_->stats();
  std::lock_guard<std::mutex> lock(mu_);
  s.buffersRefused = refused_;
  s.buffersCompleted = completedBuffers_;
  s.bytesCompleted = completedBytes_;
  return s;
}

void CuptiTracer::bufferRequested(std::uint8_t** buffer, std::size_t* size, std::size_t* maxNumRecords) {
  auto& t = instance();
  *maxNumRecords = 0;
  std::size_t bytes = t.options_.bufferBytes;
  {
    std::lock_guard<std::mutex> lock(t.mu_);
#if CUPTI_API_VERSION >= 27
    if (t.outstanding_ + bytes > t.options_.maxBufferedBytes) {
      ++t.refused_;  // CUPTI drops records until a buffer is available again (counted as dropped)
      *buffer = nullptr;
      *size = 0;
      return;
    }
#endif
    t.outstanding_ += bytes;
  }
  *buffer = static_cast<std::uint8_t*>(std::aligned_alloc(8, bytes));
  *size = *buffer ? bytes : 0;
}

void CuptiTracer::bufferCompleted(CUcontext ctx, std::uint32_t streamId, std::uint8_t* buffer, std::size_t size,
                                  std::size_t validSize) {
  auto& t = instance();
  {
    std::lock_guard<std::mutex> lock(t.mu_);
    t.queue_.push_back({buffer, size, validSize, ctx, streamId});
  }
  t.cv_.notify_one();
}

void CuptiTracer::consume() {
  for (;;) {
    Completed c;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopConsumer_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      c = queue_.front();
      queue_.pop_front();
    }
    if (c.buffer) {
      decoder_->decodeBuffer(c.buffer, c.valid);
      // Re-enters CUPTI: never under our locks (§4.2).
      std::size_t dropped = 0;
      if (cuptiActivityGetNumDroppedRecords(c.context, c.streamId, &dropped) == CUPTI_SUCCESS)
        decoder_->stats().droppedByCupti += dropped;
      std::free(c.buffer);
    }
    std::lock_guard<std::mutex> lock(mu_);
    outstanding_ -= std::min(outstanding_, c.size);
    ++completedBuffers_;
    completedBytes_ += c.valid;
  }
}

}  // namespace shardscope::cupti
