#include "profiler/capture/recorder.h"

#include <chrono>
#include <ctime>

#include "core/storage/trace_store.h"
#include "core/util/error.h"

namespace shardscope::capture {

TimeNs nowNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<TimeNs>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

Recorder::Recorder(Options opts) : opts_(std::move(opts)) {
  store_ = std::make_unique<core::TraceStore>(opts_.dbPath);
  core::Rank r;
  r.runId = opts_.runId;
  r.rank = opts_.rank;
  r.host = opts_.host;
  r.device = opts_.device;
  r.sourceFile = "runtime";
  {
    std::lock_guard<std::mutex> wl(writeMu_);
    core::Transaction tx(store_->db());
    rankId_ = store_->addRank(r);
    tx.commit();
  }
  thread_ = std::thread([this] { run(); });
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
  t.rankId = rankId_;
  t.kind = kind;
  t.name = name;
  t.pid = opts_.rank;
  {
    std::lock_guard<std::mutex> l(mu_);
    t.tid = tid ? *tid : static_cast<std::int64_t>(laneTracks_.size());
  }
  t.device = device;
  t.stream = stream;
  t.sortIndex = sortIndex;
  core::Transaction tx(store_->db());
  const core::Id id = store_->addTrack(t);
  tx.commit();
  std::lock_guard<std::mutex> l(mu_);
  laneTracks_.push_back(id);
  return static_cast<int>(laneTracks_.size() - 1);
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
  core::Transaction tx(store_->db());
  const core::Id id = store_->addProcessGroup(pg);
  tx.commit();
  std::lock_guard<std::mutex> l(mu_);
  groupIds_[name] = id;
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
  for (auto r : store_->ranks(opts_.runId)) {
    if (r.id != rankId_) continue;
    r.metadataJson = json;
    core::Transaction tx(store_->db());
    store_->updateRank(r);
    tx.commit();
  }
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
  Pending p;
  {
    std::lock_guard<std::mutex> l(mu_);
    std::swap(p, pending_);
  }
  if (p.spans.empty() && p.steps.empty() && p.memory.empty() && p.counters.empty() && p.rankMetrics.empty() &&
      p.runMetrics.empty())
    return;
  try {
    write(p);
  } catch (...) {
    store_->invalidateCaches();
    // Put it back in front of what came since, so nothing is lost if the next attempt succeeds.
    std::lock_guard<std::mutex> l(mu_);
    p.spans.insert(p.spans.end(), std::make_move_iterator(pending_.spans.begin()), std::make_move_iterator(pending_.spans.end()));
    p.steps.insert(p.steps.end(), pending_.steps.begin(), pending_.steps.end());
    p.memory.insert(p.memory.end(), pending_.memory.begin(), pending_.memory.end());
    p.counters.insert(p.counters.end(), pending_.counters.begin(), pending_.counters.end());
    p.rankMetrics.insert(p.rankMetrics.end(), pending_.rankMetrics.begin(), pending_.rankMetrics.end());
    p.runMetrics.insert(p.runMetrics.end(), pending_.runMetrics.begin(), pending_.runMetrics.end());
    pending_ = std::move(p);
    throw;
  }
}

void Recorder::write(Pending& p) {
  core::Transaction tx(store_->db());
  core::BulkWriter w(*store_);
  for (const auto& s : p.spans) {
    core::EventRecord e;
    e.trackId = laneTracks_.at(static_cast<std::size_t>(s.lane));
    e.startNs = s.startNs;
    e.endNs = std::max(s.endNs, s.startNs);
    e.nameId = store_->intern(s.name);
    e.catId = store_->intern(s.cat);
    e.category = s.category;
    e.step = s.step;
    e.collOp = s.op;
    if (s.op != core::CollectiveOp::None) e.flags |= core::EventFlags::CollectiveMeta;
    if (s.gpuRow) e.flags |= core::EventFlags::HtaGpuRow;
    e.correlation = s.correlation;
    e.externalId = s.externalId;
    if (!s.group.empty()) {
      auto it = groupIds_.find(s.group);
      if (it != groupIds_.end()) e.processGroupId = it->second;
    }
    e.bytes = s.bytes;
    e.groupSize = s.groupSize;
    if (!s.dtype.empty()) e.dtypeId = store_->intern(s.dtype);
    w.addEvent(e, s.argsJson);
  }
  for (const auto& m : p.memory) {
    const auto key = std::make_pair(m.deviceType, m.deviceId);
    auto it = memTracks_.find(key);
    if (it == memTracks_.end()) {
      it = memTracks_.emplace(key, store_->addMemoryTracks(rankId_, m.deviceType, m.deviceId)).first;
    }
    w.addMemoryEvent(m);
    w.noteSample(it->second.first, m.tsNs);
    w.noteSample(it->second.second, m.tsNs);
  }
  for (const auto& [name, ts, value] : p.counters) {
    auto it = counterTracks_.find(name);
    if (it == counterTracks_.end()) {
      core::Track t;
      t.rankId = rankId_;
      t.kind = core::TrackKind::Counter;
      t.name = name;
      t.sortIndex = 900 + static_cast<int>(counterTracks_.size());
      it = counterTracks_.emplace(name, store_->addTrack(t)).first;
    }
    w.addCounter(it->second, ts, value);
  }
  w.finish();
  for (const auto& s : p.steps) store_->addStep(s);
  for (const auto& [k, v] : p.rankMetrics) store_->setMetric(opts_.runId, rankId_, k, v);
  for (const auto& [k, v] : p.runMetrics) store_->setMetric(opts_.runId, std::nullopt, k, v);
  tx.commit();
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
