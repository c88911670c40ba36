#pragma once
// The CUPTI activity tracer of one process (docs/GPU.md; traces.md §4, Kineto as the model).
//
//   initialize()  once, before LibTorch touches CUDA: registers the buffer callbacks and sets the
//                 device buffer size (CUPTI allows one activity subscriber per process, §4.6: this
//                 tracer and LibTorch's built-in Kineto cannot both run).
//   start(sink)   the capture window opens: CONCURRENT_KERNEL, MEMCPY, MEMCPY2, MEMSET, RUNTIME,
//                 DRIVER, EXTERNAL_CORRELATION, SYNCHRONIZATION, MEMORY2 and OVERHEAD are enabled,
//                 the clocks are paired (ClockAlignment), a flush thread calls
//                 cuptiActivityFlushAll(0) every flushPeriodMs so memory stays bounded, and a
//                 consumer thread decodes completed buffers (outside the CUPTI callback) into sink.
//   stop()        the caller has synchronised its devices; the kinds are disabled, everything is
//                 flushed (FLUSH_FORCED), the remaining buffers are decoded, and the stats returned
//                 (records per kind, dropped records — cuptiActivityGetNumDroppedRecords, called
//                 outside our locks — zero-timestamp records, refused buffers).
// Buffers: 8-byte aligned, bufferBytes each, at most maxBufferedBytes outstanding; past that CUPTI
// API >= 27 (CUDA 12.9) lets bufferRequested refuse (counted), older CUPTI always gets a buffer.
// Our spans push their id as CUSTOM2 external correlation around the launches they make, so every
// kernel can name the span that launched it.
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>
#include <mutex>
#include <string>
#include <thread>

#include "profiler/cupti/clock_alignment.h"
#include "profiler/cupti/cupti_decoder.h"
#include "profiler/cupti/gpu_activity.h"

namespace shardscope::cupti {

struct TracerOptions {
  std::size_t bufferBytes = 4u << 20;
  std::size_t maxBufferedBytes = 128u << 20;
  int flushPeriodMs = 100;
  bool memory = true;    // MEMORY2 (allocator segments)
  bool overhead = true;  // OVERHEAD
  bool syncs = true;     // SYNCHRONIZATION
  // Which CUDA API calls are recorded (each recorded call costs host time on every launch):
  //   Launches: only the calls that put work on a device or wait for it (kernel launches, copies,
  //     memsets, synchronisations, event records and waits, cudaMalloc/cudaFree; the driver's
  //     cuLaunchKernel/cuLaunchKernelEx, through which NCCL launches), chosen per call where CUPTI
  //     can (CUDA 12.5 and later), else every runtime call and no driver call;
  //   All: every runtime and driver call (the decoder still keeps only the meaningful ones);
  //   None: no API record (kernels, copies and memory only; GPU work is placed in steps by time).
  enum class ApiRecords { Launches, All, None };
  ApiRecords api = ApiRecords::Launches;
  int clockSamples = 32;  // clock pairs at start (and at stop, for the drift figure)
};

class CuptiTracer {
 public:
  // The process's tracer (one activity subscriber per process).
  static CuptiTracer& instance();

  // CUPTI's version and whether activity tracing can be set up here; throws std::runtime_error
  // with CUPTI's message ("CUPTI: cuptiActivityRegisterCallbacks: ...") when it cannot.
  void initialize(const TracerOptions& options = {});
  void start(ActivityDecoder::Sink sink);
  CaptureStats stop();
  bool running() const { return running_; }

  // Host - CUPTI clock offset at start, its uncertainty, and the drift seen at stop (ns).
  core::TimeNs clockOffset() const { return startClock_.offset(); }
  core::TimeNs clockUncertainty() const { return startClock_.uncertainty(); }
  core::TimeNs clockDrift() const { return drift_; }
  std::uint32_t cuptiVersion() const { return version_; }

  // Around the launches of one of our spans (thread-local in CUPTI).
  static void pushExternalId(std::uint64_t id);
  static void popExternalId();
  static core::TimeNs cuptiNow();

 private:
  CuptiTracer() = default;
  struct Completed {
    std::uint8_t* buffer = nullptr;
    std::size_t size = 0, valid = 0;
    CUcontext context = nullptr;
    std::uint32_t streamId = 0;
  };
  static void bufferRequested(std::uint8_t** buffer, std::size_t* size, std::size_t* maxNumRecords);
  static void bufferCompleted(CUcontext ctx, std::uint32_t streamId, std::uint8_t* buffer, std::size_t size,
                              std::size_t validSize);
  void consume();
  void sampleClock(ClockAlignment& c, int n) const;
  static void enableLaunchApis(bool enable);

  TracerOptions options_;
  bool initialized_ = false;
  bool running_ = false;
  std::uint32_t version_ = 0;
  ClockAlignment startClock_;
  core::TimeNs drift_ = 0;

  std::unique_ptr<ActivityDecoder> decoder_;
  std::mutex mu_;  // queue_, outstanding_, stopConsumer_
  std::condition_variable cv_;
  std::deque<Completed> queue_;
  std::size_t outstanding_ = 0;  // bytes handed to CUPTI and not yet decoded
  std::uint64_t refused_ = 0, completedBuffers_ = 0, completedBytes_ = 0;
  bool stopConsumer_ = false;
  bool stopFlusher_ = false;
  std::thread consumer_, flusher_;
  std::mutex flushMu_;
  std::condition_variable flushCv_;
};

}  // namespace shardscope::cupti
