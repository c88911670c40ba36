#pragma once
// The pipeline of the Kineto reader: opening the files (plain or gzip), reading their top-level keys,
// cutting the events out by a bracket scan, parsing them (one KinetoParser per worker thread) and
// handing the batches back in file order, with cancellation and the first error surfacing on the
// caller's thread. Memory is bounded by the queues, not the files. Two modes:
// - split (one file): one thread ("ss-read", reading ahead on a prefetch thread) cuts the file into
//   segments of raw event text that the worker threads ("ss-parse") parse;
// - per file (two files or more): each worker thread ("ss-file") takes the next file and inflates,
//   cuts and parses it alone, in place in its inflate buffer, into that file's queue; the caller
//   drains the files' queues in file order. No copy of the text, no thread that all files share.
#include <condition_variable>
#include <cstdint>
#include <atomic>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/import/kineto_parser.h"
#include "core/import/kineto_records.h"
#include "core/import/trace_reader.h"

namespace shardscope::core::kineto {

// A bounded queue between threads. stop() wakes everybody (cancellation, errors); close() lets the
// consumers drain what is left and then see the end.
template <typename T>
class BoundedQueue {
 public:
  explicit BoundedQueue(std::size_t cap) : cap_(cap) {}
  bool push(std::unique_ptr<T> b) {
    std::unique_lock lk(m_);
    notFull_.wait(lk, [&] { return q_.size() < cap_ || stop_; });
    if (stop_) return false;
    q_.push_back(std::move(b));
    notEmpty_.notify_one();
    return true;
  }
  // nullptr when stopped, or closed and empty.
  std::unique_ptr<T> pop() {
    std::unique_lock lk(m_);
    notEmpty_.wait(lk, [&] { return !q_.empty() || stop_ || closed_; });
    if (stop_ || q_.empty()) return nullptr;
    auto b = std::move(q_.front());
    q_.pop_front();
    notFull_.notify_one();
    return b;
  }
  void stop() {
    std::lock_guard lk(m_);
    stop_ = true;
    notFull_.notify_all();
    notEmpty_.notify_all();
  }
  void close() {
    std::lock_guard lk(m_);
    closed_ = true;
    notEmpty_.notify_all();
  }
  bool stopped() {
    std::lock_guard lk(m_);
    return stop_;
  }

 private:
  std::size_t cap_;
  std::mutex m_;
  std::condition_variable notFull_, notEmpty_;
  std::deque<std::unique_ptr<T>> q_;
  bool stop_ = false;
  bool closed_ = false;
};

using BatchQueue = BoundedQueue<Batch>;
using SegmentQueue = BoundedQueue<Segment>;

class KinetoPipeline {
 public:
  // Starts the threads: `workers()` of them (hardware threads, 1..4; $SHARDSCOPE_IMPORT_THREADS
  // overrides, 1..16), plus the splitter in split mode. $SHARDSCOPE_IMPORT_PIPELINE=split|files
  // forces a mode (comparisons, tests).
  KinetoPipeline(const ImportOptions& options, const std::vector<std::string>& files);
  // Stops every queue and joins the threads (an unfinished import is abandoned).
  ~KinetoPipeline();
  KinetoPipeline(const KinetoPipeline&) = delete;
  KinetoPipeline& operator=(const KinetoPipeline&) = delete;

  int workers() const { return workers_; }
  // The next batch in file order; nullptr after the last. Rethrows the first error of any thread
  // (whatever its order) and throws core::Cancelled when the import is cancelled.
  std::unique_ptr<Batch> next();
  // Gives a written batch back, for a parser thread to fill again.
  void recycle(std::unique_ptr<Batch> batch) { pool_.give(std::move(batch)); }

 private:
  static bool perFileMode(std::size_t files, int workers);
  void startPerFile(const std::vector<std::string>& files);
  void stopPerFile();  // every file queue and the window: errors, cancel, destruction
  std::unique_ptr<Batch> nextPerFile();

  const ImportOptions& opt_;
  BatchPool pool_{16};  // before the threads that use it, after them in destruction
  int workers_ = 1;
  bool perFile_ = false;
  SegmentQueue work_;
  BatchQueue queue_;
  std::uint64_t seqCounter_ = 0;  // the splitter's (segments and file ends share one sequence)
  std::vector<std::unique_ptr<KinetoParser>> parsers_;
  std::thread producer_;
  std::vector<std::thread> parserThreads_;
  std::map<std::uint64_t, std::unique_ptr<Batch>> pending_;  // arrived ahead of their turn
  std::uint64_t nextSeq_ = 0;
  // Per-file mode: one queue per file, the next file a worker takes, the file being written.
  std::vector<std::unique_ptr<BatchQueue>> fileQueues_;
  std::atomic<std::size_t> nextFile_{0};
  std::size_t currentFile_ = 0;
  static constexpr std::size_t kFileQueueBatches = 64;
  std::mutex windowMutex_;  // workers start file i only while i <= writing_ + workers_
  std::condition_variable windowCv_;
  std::size_t writing_ = 0;
  bool windowStop_ = false;
  std::mutex errorMutex_;
  std::exception_ptr error_;
};

}  // namespace shardscope::core::kineto
