#include "ui/session/run_session.h"

#include <algorithm>

namespace shardscope::ui {

// ------------------------------------------------------------------------------------------------
// RunCache

bool RunCache::has(const std::string& kind, core::RunId run) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find({kind, run});
  return it != entries_.end() && it->second.future.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

int RunCache::computedCount(const std::string& kind, core::RunId run) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = computed_.find({kind, run});
  return it == computed_.end() ? 0 : it->second;
}

int RunCache::computedCount(const std::string& kind) const {
  std::lock_guard<std::mutex> lock(mutex_);
  int n = 0;
  for (const auto& [key, count] : computed_)
    if (key.first == kind) n += count;
  return n;
}

std::vector<core::RunId> RunCache::runs() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<core::RunId> out;
  for (const auto& [key, f] : entries_)
    if (std::find(out.begin(), out.end(), key.second) == out.end()) out.push_back(key.second);
  return out;
}

void RunCache::invalidate(core::RunId run) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = entries_.begin(); it != entries_.end();) it = it->first.second == run ? entries_.erase(it) : std::next(it);
}

void RunCache::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  entries_.clear();
}

void RunCache::forget(const Key& key, std::uint64_t serial) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(key);
  // Only that computation's entry: a newer one (after an invalidation) stays.
  if (it != entries_.end() && it->second.serial == serial) entries_.erase(it);
}

// ------------------------------------------------------------------------------------------------
// RunSession

RunSession::RunSession(QObject* parent) : QObject(parent), tasks_(new TaskRunner(this)), cache_(std::make_shared<RunCache>()) {}

RunSession::~RunSession() { tasks_->cancelAll(); }

void RunSession::setDatabase(const QString& path, bool readOnly) {
  tasks_->cancelAll();
  dbPath_ = path;
  readOnly_ = readOnly;
  cache_ = std::make_shared<RunCache>();  // workers of the old database keep the old one
  watch_.reset();
  dataVersion_.reset();
  statuses_.clear();
  readFailureReported_ = false;
  const bool hadRuns = !runs_.isEmpty();
  runs_.clear();
  const bool hadRange = timeRange_.has_value();
  timeRange_.reset();
  Q_EMIT databaseChanged(path);
  if (hadRuns) Q_EMIT selectionChanged(runs_);
  if (hadRange) Q_EMIT timeRangeChanged();
}

void RunSession::setRuns(const QList<core::RunId>& runs) {
  if (runs == runs_) return;
  runs_ = runs;
  if (timeRange_ && !runs_.contains(timeRange_->run)) {
    timeRange_.reset();
    Q_EMIT timeRangeChanged();
  }
  Q_EMIT selectionChanged(runs_);
}

void RunSession::setTimeRange(const std::optional<TimeRange>& range) {
  if (range == timeRange_) return;
  timeRange_ = range;
  Q_EMIT timeRangeChanged();
}

std::shared_ptr<const core::RunAnalysis> RunSession::analysis(RunCache& cache, core::TraceStore& store, core::RunId run,
                                                              const core::CancelToken* cancel) {
  return cache.get<core::RunAnalysis>(kAnalysis, run, cancel, [&store, run, cancel] {
    core::RunAnalysisOptions options;
    options.bottleneckLimit = kBottleneckLimit;
    return std::make_shared<const core::RunAnalysis>(core::analyzeRun(store, run, options, cancel));
  });
}

core::AnalysisSource RunSession::analysisSource(RunCache& cache, core::TraceStore& store, const core::CancelToken* cancel) {
  return [&cache, &store, cancel](core::RunId run) { return analysis(cache, store, run, cancel); };
}

bool RunSession::poll() {
  if (dbPath_.isEmpty()) return false;
  if (!watch_) {
    try {
      watch_ = std::make_unique<core::TraceStore>(dbPath_.toStdString(), core::Database::Mode::ReadOnly);
    } catch (...) {
      watch_.reset();
      throw;
    }
  }
  const std::int64_t dv = watch_->dataVersion();
  if (dataVersion_ && *dataVersion_ == dv) return false;
  const bool first = !dataVersion_;
  std::map<core::RunId, core::RunStatus> now;
  for (const auto& r : watch_->runs()) now[r.id] = r.status;
  dataVersion_ = dv;
  QList<core::RunId> changed;
  if (!first) {
    for (core::RunId id : cache_->runs()) {
      auto before = statuses_.find(id);
      auto after = now.find(id);
      const bool gone = after == now.end();
      const bool statusChanged = before != statuses_.end() && !gone && before->second != after->second;
      if (gone || statusChanged) {
        cache_->invalidate(id);
        changed << id;
      }
    }
  }
  statuses_ = std::move(now);
  if (!changed.isEmpty()) Q_EMIT dataChanged(changed);
  return !first;
}

void RunSession::reportReadFailure(const QString& error) {
  if (readFailureReported_ || dbPath_.isEmpty()) return;
  readFailureReported_ = true;
  watch_.reset();  // this connection shares the failed view of the file
  Q_EMIT readFailed(error);
}

void RunSession::invalidateAll() {
  const auto ids = cache_->runs();
  cache_->clear();
  QList<core::RunId> changed(ids.begin(), ids.end());
  if (!changed.isEmpty()) Q_EMIT dataChanged(changed);
}

}  // namespace shardscope::ui
