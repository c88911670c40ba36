#pragma once
// A counting CPU allocator: wraps LibTorch's CPU allocator so that every tensor allocation and free
// of the process is counted, attributed to a category (the thread's current MemCategory scope), and
// reported to the Recorder as memory records (the memory-over-time curve) and, per category, as
// samples of the category's counter track (the breakdown over time). Live bytes per category
// are kept exactly, and the breakdown at the highest total seen is remembered (the breakdown at the
// peak). On CUDA the caching allocator's statistics take this role (profiler/runtime on GPU).
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include <c10/core/Allocator.h>
#include <torch/version.h>

#include "core/model/memory_category.h"

// LibTorch 2.3 made c10::Allocator::allocate non-const and added the pure virtual copy_data.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
#define SHARDSCOPE_ALLOCATOR_CONST
#define SHARDSCOPE_ALLOCATOR_COPY_DATA 1
#else
#define SHARDSCOPE_ALLOCATOR_CONST const
#define SHARDSCOPE_ALLOCATOR_COPY_DATA 0
#endif

namespace shardscope::capture {

class Recorder;

// The categories are core's (core/model/memory_category.h): the keys the breakdown is stored by.
using MemCategory = core::MemoryCategory;
constexpr int kMemCategoryCount = core::kMemoryCategoryCount;
const char* toString(MemCategory c);

// Sets the calling thread's category for the scope (RAII, nests).
class MemScope {
 public:
  explicit MemScope(MemCategory c);
  ~MemScope();
  MemScope(const MemScope&) = delete;
  MemScope& operator=(const MemScope&) = delete;

 private:
  MemCategory prev_;
};
MemCategory currentMemCategory();

struct MemSnapshot {
  std::int64_t total = 0;
  std::array<std::int64_t, kMemCategoryCount> byCategory{};
  std::int64_t timeNs = 0;
};

class MemoryTracker final : public c10::Allocator {
 public:
  struct Ctx;  // what a live allocation keeps (memory_tracker.cpp)
  // Installs itself as the CPU allocator of the process (once); returns the instance.
  static MemoryTracker& install();
  static MemoryTracker* instance();

  c10::DataPtr allocate(size_t n) SHARDSCOPE_ALLOCATOR_CONST override;
  // Every DataPtr of ours has its data pointer as context: raw_allocate/raw_deallocate work.
  c10::DeleterFnPtr raw_deleter() const override { return &MemoryTracker::deleter; }
#if SHARDSCOPE_ALLOCATOR_COPY_DATA
  void copy_data(void* dest, const void* src, std::size_t count) const override { default_copy_data(dest, src, count); }
#endif

  void setRecorder(Recorder* r, int deviceType = 0, int deviceId = 0);
  // Records only changes of at least this many bytes of the total since the last record (the peak
  // is always recorded exactly: a record is forced whenever the total reaches a new maximum).
  void setGranularity(std::int64_t bytes) { granularity_ = bytes; }

  MemSnapshot current() const;
  MemSnapshot peak() const;
  void resetPeak();
  // Puts back a peak taken earlier (peak()), or the current total where that is higher: work whose
  // buffers are not the run's (the link and compute probes) leaves no peak behind.
  void restorePeak(const MemSnapshot& p);

 private:
  MemoryTracker();
  static void deleter(void* data);
  void account(std::int64_t bytes, MemCategory c) const;

  c10::Allocator* inner_ = nullptr;
  mutable std::mutex mu_;
  mutable MemSnapshot cur_;
  mutable MemSnapshot peak_;
  mutable std::int64_t lastRecorded_ = 0;
  // Each category's live bytes as last recorded on its counter track (core::memoryCategoryTrackName)
  // and the tracks' names for the recorder's device.
  mutable std::array<std::int64_t, kMemCategoryCount> lastRecordedCategory_{};
  // (immutable: account() keeps its own reference outside the lock while setRecorder may replace it).
  std::shared_ptr<const std::array<std::string, kMemCategoryCount>> categoryTracks_;
  const Recorder* tracksOf_ = nullptr;  // the recorder lastRecordedCategory_ is about
  std::int64_t granularity_ = 0;
  Recorder* recorder_ = nullptr;
  int deviceType_ = 0;
  int deviceId_ = 0;
};

}  // namespace shardscope::capture
