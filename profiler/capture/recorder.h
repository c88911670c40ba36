#pragma once
// Per-rank capture of a runtime run into the trace store, while the run goes: spans of compute and
// of every collective, steps, memory records and metrics are buffered in memory and written by a
// flusher thread every flush interval in one short transaction (WAL: readers see them live; a crash
// loses at most one interval). Thread-safe: the compute thread, the communication threads and the
// allocator hooks all record here. No LibTorch in this header.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "core/model/types.h"
#include "core/storage/run_writer.h"

namespace shardscope::capture {

using core::TimeNs;

// Wall-clock nanoseconds (CLOCK_REALTIME): comparable between the ranks of one machine.
TimeNs nowNs();

// A span on one of the rank's lanes (the store's live-run record: names resolved when written).
using SpanRecord = core::LiveSpan;

class Recorder {
 public:
  struct Options {
    std::string dbPath;
    core::RunId runId;
    int rank = 0;
    std::string host;
    std::string device = "cpu";
    double flushIntervalS = 0.5;
    bool enabled = true;  // false: nothing is recorded (the capture-overhead baseline)
  };
  explicit Recorder(Options opts);
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  bool enabled() const { return opts_.enabled; }
  core::RankId rankId() const { return rankId_; }
  // A lane (track) of this rank: "compute" (CPU thread) or a communication lane per process group.
  int lane(const std::string& name, core::TrackKind kind, int sortIndex);
  // A GPU stream lane (CUPTI records), or a CPU lane of another thread (CUDA API records).
  int lane(const std::string& name, core::TrackKind kind, int sortIndex, std::optional<int> device,
           std::optional<std::int64_t> stream, std::optional<std::int64_t> tid);
  // Registers a process group (once per run: the first rank to call wins; same name = same group).
  void processGroup(const std::string& name, const std::string& backend, int size, const std::vector<int>& ranks);

  void span(SpanRecord s);
  void step(std::int64_t step, TimeNs startNs, TimeNs endNs);
  // Allocation record: bytes > 0 allocated, < 0 freed; totals after it.
  void memory(TimeNs ts, std::int64_t bytes, std::int64_t totalAllocated, std::int64_t totalReserved, int deviceType,
              int deviceId);
  // A sample of a named counter lane of this rank (e.g. CUPTI's cudaMalloc segment total).
  void counter(const std::string& name, TimeNs ts, double value);
  void metric(const std::string& key, double value, bool perRank = true);
  void rankMetadata(const std::string& json);

  void flush();  // writes what is buffered now (also called by the flusher thread)
  void close();  // final flush; stops the thread
  std::int64_t eventsWritten() const { return written_.load(); }

 private:
  void run();

  Options opts_;
  std::unique_ptr<core::RankWriter> writer_;  // guarded by writeMu_
  core::RankId rankId_;
  std::mutex mu_;
  std::mutex writeMu_;
  std::condition_variable cv_;
  core::LiveBatch pending_;
  bool stop_ = false;
  bool closed_ = false;
  std::atomic<std::int64_t> written_{0};
  std::thread thread_;
};

}  // namespace shardscope::capture
