#include "profiler/capture/recorder.h"

#include <chrono>
#include <pthread.h>
#include <ctime>

#include "core/util/error.h"

namespace shardscope::capture {

TimeNs nowNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<TimeNs>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

Recorder::Recorder(Options opts) : opts_(std::move(opts)) {
  core::Rank r;
  r.runId = opts_.runId;
  r.rank = opts_.rank;
  r.host = opts_.host;
  r.device = opts_.device;
  r.sourceFile = "runtime";
  {
    std::lock_guard<std::mutex> wl(writeMu_);
    writer_ = std::make_unique<core::RankWriter>(opts_.dbPath, r);
    rankId_ = writer_->rankId();
  }
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "ss-flush");  // for top -H, perf sched and gdb
    run();
  });
}

Recorder::~Recorder() {
  try {
    close();
  } catch (...) {
    // A destructor must not throw; close() reports its errors when called explicitly.
  }
}

int Recorder::lane(const std::string& name, core::TrackKind kind, int sortIndex) {
  return lane(name, kind, sortIndex, std::nullopt, std::nullopt, std::nullopt);
}

int Recorder::lane(const std::string& name, core::TrackKind kind, int sortIndex, std::optional<int> device,
                   std::optional<std::int64_t> stream, std::optional<std::int64_t> tid) {
  std::lock_guard<std::mutex> wl(writeMu_);
  core::Track t;
  t.kind = kind;
  t.name = name;
  t.pid = opts_.rank;
  t.tid = tid ? *tid : static_cast<std::int64_t>(writer_->laneCount());
  t.device = device;
  t.stream = stream;
  t.sortIndex = sortIndex;
  return writer_->addLane(t);
}

void Recorder::processGroup(const std::string& name, const std::string& backend, int size, const std::vector<int>& ranks) {
  std::string json = "[";
  for (std::size_t i = 0; i < ranks.size(); ++i) json += (i ? "," : "") + std::to_string(ranks[i]);
  json += "]";
  core::ProcessGroup pg;
  pg.runId = opts_.runId;
  pg.name = name;
  pg.backend = backend;
  pg.size = size;
  pg.ranksJson = json;
  pg.description = name;
  std::lock_guard<std::mutex> wl(writeMu_);
  writer_->addProcessGroup(pg);
}

void Recorder::span(SpanRecord s) {
  if (!opts_.enabled) return;
  std::lock_guard<std::mutex> l(mu_);
  pending_.spans.push_back(std::move(s));
}

void Recorder::step(std::int64_t step, TimeNs startNs, TimeNs endNs) {
  std::lock_guard<std::mutex> l(mu_);
  pending_.steps.push_back(core::Step{rankId_, step, startNs, endNs});
}

void Recorder::counter(const std::string& name, TimeNs ts, double value) {
  if (!opts_.enabled) return;
  std::lock_guard<std::mutex> l(mu_);
  pending_.counters.emplace_back(name, ts, value);
}

void Recorder::memory(TimeNs ts, std::int64_t bytes, std::int64_t totalAllocated, std::int64_t totalReserved, int deviceType,
                      int deviceId) {
  if (!opts_.enabled) return;
  core::MemoryEvent m;
  m.rankId = rankId_;
  m.tsNs = ts;
  m.bytes = bytes;
  m.totalAllocated = totalAllocated;
  m.totalReserved = totalReserved;
  m.deviceType = deviceType;
  m.deviceId = deviceId;
  std::lock_guard<std::mutex> l(mu_);
  pending_.memory.push_back(m);
}

void Recorder::metric(const std::string& key, double value, bool perRank) {
  std::lock_guard<std::mutex> l(mu_);
  (perRank ? pending_.rankMetrics : pending_.runMetrics).emplace_back(key, value);
}

void Recorder::rankMetadata(const std::string& json) {
  std::lock_guard<std::mutex> wl(writeMu_);
  writer_->setMetadata(json);
}

void Recorder::run() {
  std::unique_lock<std::mutex> l(mu_);
  const auto interval = std::chrono::duration<double>(opts_.flushIntervalS > 0 ? opts_.flushIntervalS : 0.5);
  while (!stop_) {
    cv_.wait_for(l, interval, [this] { return stop_; });
    if (stop_) break;
    l.unlock();
    try {
      flush();
    } catch (const std::exception&) {
      // Keep the data buffered; the next flush (or close()) retries and reports.
    }
    l.lock();
  }
}

void Recorder::flush() {
  std::lock_guard<std::mutex> wl(writeMu_);
  core::LiveBatch p;
  {
    std::lock_guard<std::mutex> l(mu_);
    std::swap(p, pending_);
  }
  if (p.empty()) return;
  try {
    writer_->write(p);
  } catch (...) {
    // Put it back in front of what came since, so nothing is lost if the next attempt succeeds.
    std::lock_guard<std::mutex> l(mu_);
    p.append(std::move(pending_));
    pending_ = std::move(p);
    throw;
  }
  written_ += static_cast<std::int64_t>(p.spans.size());
}

void Recorder::close() {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (closed_) return;
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  flush();
  std::lock_guard<std::mutex> l(mu_);
  closed_ = true;
}

}  // namespace shardscope::capture
