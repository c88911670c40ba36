#pragma once
// RunSession: the app's document, one per open database. It holds what every page shares:
//
// * the database (path, read-only or not);
// * the selection: the runs chosen in the run browser, in the order they were chosen, the first
//   being the baseline every change is measured against;
// * one time range pages may share (a window of one run, in that run's clock);
// * one task runner (TaskRunner): background work with progress and cancel, the latest task of a
//   slot being the only one that delivers;
// * a cache of each run's products (its analysis, memory curves, timeline index...), computed once
//   whichever page asks first and handed to every other page. Two pages asking for the same run at
//   once share one computation. The cache forgets a run when its data changes: the session watches
//   the file (PRAGMA data_version, cheap while nothing commits) and, when another connection has
//   committed, drops the runs that were deleted or changed status (a run being written finishing).
//
// Pages render what the session gives them; they never open the database on the GUI thread.
#include <QList>
#include <QObject>
#include <QPointer>
#include <QString>

#include <any>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "core/analysis/run_analysis.h"
#include "core/model/types.h"
#include "core/storage/trace_store.h"
#include "core/util/error.h"
#include "core/util/progress.h"
#include "ui/session/task_runner.h"

namespace shardscope::ui {

// The per-run products of one database, shared by the worker threads of every page. Thread-safe.
class RunCache {
 public:
  // The product `kind` of `run`: the cached one, the one another thread is computing (waited for),
  // or computed here by `compute`. A computation that throws is not cached (the next call tries
  // again); one whose caller was cancelled is taken over by the next caller waiting for it.
  template <typename T>
  std::shared_ptr<const T> get(const std::string& kind, core::RunId run, const core::CancelToken* cancel,
                               const std::function<std::shared_ptr<const T>()>& compute) {
    const Key key{kind, run};
    for (;;) {
      std::shared_future<std::shared_ptr<const void>> future;
      std::shared_ptr<std::promise<std::shared_ptr<const void>>> mine;
      std::uint64_t serial = 0;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        auto it = entries_.find(key);
        if (it != entries_.end()) {
          future = it->second.future;
          serial = it->second.serial;
        } else {
          mine = std::make_shared<std::promise<std::shared_ptr<const void>>>();
          future = mine->get_future().share();
          serial = ++serial_;
          entries_[key] = Entry{future, serial};
          ++computed_[key];
        }
      }
      if (mine) {
        try {
          std::shared_ptr<const T> value = compute();
          mine->set_value(std::static_pointer_cast<const void>(value));
          return value;
        } catch (...) {
          mine->set_exception(std::current_exception());
          forget(key, serial);
          throw;
        }
      }
      // Someone else computes it: wait, staying cancellable.
      while (future.wait_for(std::chrono::milliseconds(20)) != std::future_status::ready)
        if (cancel) cancel->throwIfCancelled();
      try {
        return std::static_pointer_cast<const T>(future.get());
      } catch (const core::Cancelled&) {
        forget(key, serial);  // its caller gave up: compute it here (next turn)
        if (cancel) cancel->throwIfCancelled();
      }
    }
  }

  bool has(const std::string& kind, core::RunId run) const;
  // How many times `kind` of `run` was computed (started) since the cache was made.
  int computedCount(const std::string& kind, core::RunId run) const;
  int computedCount(const std::string& kind) const;  // over all runs
  std::vector<core::RunId> runs() const;             // runs with at least one cached product
  void invalidate(core::RunId run);
  void clear();

 private:
  using Key = std::pair<std::string, core::RunId>;
  struct Entry {
    std::shared_future<std::shared_ptr<const void>> future;
    std::uint64_t serial = 0;
  };
  void forget(const Key& key, std::uint64_t serial);  // drops the entry if it is still that computation
  mutable std::mutex mutex_;
  std::map<Key, Entry> entries_;
  std::uint64_t serial_ = 0;
  std::map<Key, int> computed_;
};

class RunSession : public QObject {
  Q_OBJECT

 public:
  explicit RunSession(QObject* parent = nullptr);
  ~RunSession() override;

  // The database (empty: none). A new database starts a new cache and clears the selection.
  void setDatabase(const QString& path, bool readOnly = false);
  QString dbPath() const { return dbPath_; }
  bool readOnly() const { return readOnly_; }

  // The selection (first = baseline).
  QList<core::RunId> runs() const { return runs_; }
  core::RunId baseline() const { return runs_.isEmpty() ? core::RunId{} : runs_.first(); }
  void setRuns(const QList<core::RunId>& runs);

  // A time window pages may share: [startNs, endNs) of run `run`, in that run's clock.
  struct TimeRange {
    core::RunId run;
    qint64 startNs = 0, endNs = 0;
    bool operator==(const TimeRange& o) const { return run == o.run && startNs == o.startNs && endNs == o.endNs; }
  };
  std::optional<TimeRange> timeRange() const { return timeRange_; }
  void setTimeRange(const std::optional<TimeRange>& range);

  TaskRunner* tasks() const { return tasks_; }
  std::shared_ptr<RunCache> cache() const { return cache_; }

  // Background work on a read-only connection of the session's database (opened in the worker).
  template <typename T>
  using Work = std::function<T(core::TraceStore&, RunCache&, core::CancelToken&, const core::ProgressFn&)>;
  template <typename T>
  BackgroundTask* run(QObject* receiver, const QString& slot, const QString& label, Work<T> work, std::function<void(T)> done,
                      std::function<void(QString)> failed = {}) {
    const std::string path = dbPath_.toStdString();
    std::shared_ptr<RunCache> cache = cache_;
    // A read that failed on the file (not on the work's own logic) is the session's to handle: the
    // flag is set in the worker and read by the failure callback, on the GUI thread.
    auto readFailed = std::make_shared<std::atomic<bool>>(false);
    QPointer<RunSession> self(this);
    return tasks_->start<T>(
        receiver, slot, label,
        [path, cache, work, readFailed](core::CancelToken& cancel, const core::ProgressFn& progress) {
          if (path.empty()) throw core::Error("no database is open");
          try {
            core::TraceStore store(path, core::Database::Mode::ReadOnly);
            return work(store, *cache, cancel, progress);
          } catch (const core::DatabaseError& e) {
            if (e.readFailure()) readFailed->store(true);
            throw;
          }
        },
        std::move(done),
        [self, readFailed, failed = std::move(failed)](QString error) {
          if (readFailed->load() && self) {
            // Said once by the window, after it has checked the file; the page only learns that
            // its figures are not in.
            self->reportReadFailure(error);
            if (failed) failed(tr("the database could not be read; it is being checked and reopened"));
            return;
          }
          if (failed) failed(error);
        });
  }

  // A read of the database failed in a way reopening may cure (DatabaseError::readFailure: SQLite
  // saw pages it could not make sense of, or could not read the file). Emits readFailed once
  // until the database is set again; the window then closes every connection, checks the file
  // (core::checkDatabase) and reopens it. Pages and the browser call it; GUI thread only.
  void reportReadFailure(const QString& error);
  bool readFailureReported() const { return readFailureReported_; }

  // Worker-thread helpers: a run's analysis (core::analyzeRun with kBottleneckLimit), once per run, and
  // the same as a core::AnalysisSource for compareRuns / buildReport.
  static std::shared_ptr<const core::RunAnalysis> analysis(RunCache& cache, core::TraceStore& store, core::RunId run,
                                                           const core::CancelToken* cancel);
  static core::AnalysisSource analysisSource(RunCache& cache, core::TraceStore& store, const core::CancelToken* cancel);
  static constexpr const char* kAnalysis = "analysis";
  static constexpr std::size_t kBottleneckLimit = 50;  // the Communication page's list; reports cut it

  // Looks at the file: true when another connection committed since the last look (then runs that
  // were deleted or changed status are dropped from the cache and dataChanged names them).
  // Throws core::Error when the file cannot be read.
  bool poll();
  // Forgets every cached product (F5: the user asks for fresh figures).
  void invalidateAll();

 Q_SIGNALS:
  void databaseChanged(const QString& path);
  void selectionChanged(const QList<core::RunId>& runs);
  void timeRangeChanged();
  // Runs whose cached products were dropped because their data changed.
  void dataChanged(const QList<core::RunId>& runs);
  // See reportReadFailure.
  void readFailed(const QString& error);

 private:
  QString dbPath_;
  bool readOnly_ = false;
  QList<core::RunId> runs_;
  std::optional<TimeRange> timeRange_;
  TaskRunner* tasks_ = nullptr;
  std::shared_ptr<RunCache> cache_;
  std::unique_ptr<core::TraceStore> watch_;  // GUI-thread connection used only for the cheap look
  std::optional<std::int64_t> dataVersion_;
  std::map<core::RunId, core::RunStatus> statuses_;  // at the last look
  bool readFailureReported_ = false;
};

}  // namespace shardscope::ui
