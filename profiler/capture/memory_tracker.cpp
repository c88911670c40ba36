#include "profiler/capture/memory_tracker.h"

#include <c10/core/CPUAllocator.h>

#include <mutex>
#include <unordered_map>

#include "profiler/capture/recorder.h"

namespace shardscope::capture {

namespace {
thread_local MemCategory tlsCategory = MemCategory::Other;
MemoryTracker* gInstance = nullptr;
}  // namespace

const char* toString(MemCategory c) { return core::memoryCategoryKey(c).data(); }  // the keys are literals

MemScope::MemScope(MemCategory c) : prev_(tlsCategory) { tlsCategory = c; }
MemScope::~MemScope() { tlsCategory = prev_; }
MemCategory currentMemCategory() { return tlsCategory; }

struct MemoryTracker::Ctx {
  c10::DataPtr inner;
  std::int64_t bytes;
  MemCategory category;
};

namespace {
// Live allocations by data pointer: the DataPtr's context is the data pointer itself, as
// c10::Allocator::raw_allocate requires (some kernels, e.g. CPU bf16 ones, allocate raw).
std::mutex gLiveMu;
std::unordered_map<void*, MemoryTracker::Ctx>* gLive = new std::unordered_map<void*, MemoryTracker::Ctx>();
}  // namespace

MemoryTracker::MemoryTracker() : inner_(c10::GetDefaultCPUAllocator()) {}

MemoryTracker& MemoryTracker::install() {
  if (!gInstance) {
    gInstance = new MemoryTracker();  // lives for the process: tensors may be freed at exit
    c10::SetCPUAllocator(gInstance, /*priority=*/100);
  }
  return *gInstance;
}

MemoryTracker* MemoryTracker::instance() { return gInstance; }

void MemoryTracker::setRecorder(Recorder* r, int deviceType, int deviceId) {
  std::lock_guard<std::mutex> l(mu_);
  recorder_ = r;
  deviceType_ = deviceType;
  deviceId_ = deviceId;
  auto names = std::make_shared<std::array<std::string, kMemCategoryCount>>();
  for (const MemCategory c : core::memoryCategories())
    (*names)[static_cast<std::size_t>(c)] = core::memoryCategoryTrackName(c, deviceType, deviceId);
  categoryTracks_ = std::move(names);
  // A new recorder's tracks start empty (read as 0: a category never used has no track). The same
  // recorder set again (after the link probe, which records nothing) keeps what its tracks show:
  // the next record carries each category that moved meanwhile.
  if (r && r != tracksOf_) {
    lastRecordedCategory_.fill(0);
    tracksOf_ = r;
  }
}

c10::DataPtr MemoryTracker::allocate(size_t n) SHARDSCOPE_ALLOCATOR_CONST {
  c10::DataPtr inner = inner_->allocate(n);
  void* data = inner.get();
  if (!data) return inner;  // nothing allocated (0 bytes): nothing to count
  const c10::Device dev = inner.device();
  const MemCategory c = tlsCategory;
  {
    std::lock_guard<std::mutex> l(gLiveMu);
    gLive->emplace(data, Ctx{std::move(inner), static_cast<std::int64_t>(n), c});
  }
  account(static_cast<std::int64_t>(n), c);
  return c10::DataPtr(data, data, &MemoryTracker::deleter, dev);
}

void MemoryTracker::deleter(void* p) {
  c10::DataPtr inner;
  std::int64_t bytes = 0;
  MemCategory c = MemCategory::Other;
  {
    std::lock_guard<std::mutex> l(gLiveMu);
    const auto it = gLive->find(p);
    if (it == gLive->end()) return;  // not ours (cannot happen: only our DataPtrs carry this deleter)
    inner = std::move(it->second.inner);
    bytes = it->second.bytes;
    c = it->second.category;
    gLive->erase(it);
  }
  inner.clear();  // frees the memory through the inner allocator's deleter, outside the lock
  if (gInstance) gInstance->account(-bytes, c);
}

void MemoryTracker::account(std::int64_t bytes, MemCategory c) const {
  if (bytes == 0) return;
  Recorder* rec = nullptr;
  std::int64_t total = 0;
  TimeNs ts = 0;
  // The categories whose counter changes with this record: (index, live bytes).
  std::array<std::pair<std::size_t, std::int64_t>, kMemCategoryCount> changed{};
  std::size_t nChanged = 0;
  std::shared_ptr<const std::array<std::string, kMemCategoryCount>> names;
  {
    std::lock_guard<std::mutex> l(mu_);
    cur_.total += bytes;
    cur_.byCategory[static_cast<std::size_t>(c)] += bytes;
    ts = nowNs();
    cur_.timeNs = ts;
    const bool newPeak = cur_.total > peak_.total;
    if (newPeak) peak_ = cur_;
    const std::int64_t diff = cur_.total - lastRecorded_;
    if (recorder_ && (newPeak || diff >= granularity_ || -diff >= granularity_)) {
      rec = recorder_;
      names = categoryTracks_;
      total = cur_.total;
      lastRecorded_ = total;
      // With each record, every category that moved since its last sample: at every record the
      // category tracks sum to the total, so the breakdown at any record (the peak's included) is exact.
      for (std::size_t i = 0; i < cur_.byCategory.size(); ++i)
        if (cur_.byCategory[i] != lastRecordedCategory_[i]) {
          lastRecordedCategory_[i] = cur_.byCategory[i];
          changed[nChanged++] = {i, cur_.byCategory[i]};
        }
    }
  }
  // CPU memory has no cache: reserved equals allocated.
  if (rec) {
    rec->memory(ts, bytes, total, total, deviceType_, deviceId_);
    for (std::size_t k = 0; k < nChanged; ++k)
      rec->counter((*names)[changed[k].first], ts, static_cast<double>(changed[k].second));
  }
}

MemSnapshot MemoryTracker::current() const {
  std::lock_guard<std::mutex> l(mu_);
  return cur_;
}

MemSnapshot MemoryTracker::peak() const {
  std::lock_guard<std::mutex> l(mu_);
  return peak_;
}

void MemoryTracker::resetPeak() {
  std::lock_guard<std::mutex> l(mu_);
  peak_ = cur_;
}

void MemoryTracker::restorePeak(const MemSnapshot& p) {
  std::lock_guard<std::mutex> l(mu_);
  peak_ = p.total >= cur_.total ? p : cur_;
}

}  // namespace shardscope::capture
