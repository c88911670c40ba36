#pragma once
// Long operations in core take a cancel token and a progress callback (plain C++); the CLI draws a
// terminal bar from them and the GUI adapts them to signals.
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "core/util/error.h"

namespace shardscope::core {

class CancelToken {
 public:
  void cancel() noexcept { cancelled_.store(true, std::memory_order_relaxed); }
  bool isCancelled() const noexcept { return cancelled_.load(std::memory_order_relaxed); }
  // The flag itself, for APIs that poll an atomic (the launcher).
  const std::atomic<bool>* flag() const noexcept { return &cancelled_; }
  void throwIfCancelled() const {
    if (isCancelled()) throw Cancelled();
  }

 private:
  std::atomic<bool> cancelled_{false};
};

struct Progress {
  std::string stage;        // e.g. "import rank0.json.gz"
  std::uint64_t done = 0;   // units processed (bytes, events, ...)
  std::uint64_t total = 0;  // 0 when unknown
  std::string unit;         // "bytes", "events"
};

using ProgressFn = std::function<void(const Progress&)>;

}  // namespace shardscope::core
