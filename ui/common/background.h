#pragma once
// Running core work off the GUI thread, with progress and cancel. start() opens its own read-only
// TraceStore in the worker thread (one SQLite connection per thread; WAL lets it read while a run is
// being written), so pages never share a connection with the GUI thread; run() takes no store.
//
//   auto* task = BackgroundTask::start<Comparison>(this, dbPath,
//       [ids](core::TraceStore& s, core::CancelToken& c, const core::ProgressFn& p) { return core::compareRuns(s, ids, 0, &c); },
//       [this](Comparison c) { show(c); },            // GUI thread, unless cancelled
//       [this](QString error) { showError(error); }); // GUI thread: the message of the exception
//   task->cancel();                                   // cooperative: core checks the token
//
// The task deletes itself after delivering its result. Progress is reported through progress(), on
// the GUI thread, throttled by Qt's queued connections.
#include <QObject>
#include <QPointer>
#include <QString>
#include <QThread>

#include <exception>
#include <functional>
#include <memory>
#include <optional>

#include "core/storage/trace_store.h"
#include "core/util/error.h"
#include "core/util/progress.h"

namespace shardscope::ui {

class BackgroundTask : public QObject {
  Q_OBJECT

 public:
  template <typename T>
  using Work = std::function<T(core::TraceStore&, core::CancelToken&, const core::ProgressFn&)>;

  template <typename T>
  static BackgroundTask* start(QObject* owner, const QString& dbPath, Work<T> work, std::function<void(T)> done,
                               std::function<void(QString)> failed = {}) {
    return run<T>(
        owner,
        [dbPath, work](core::CancelToken& c, const core::ProgressFn& p) {
          core::TraceStore store(dbPath.toStdString(), core::Database::Mode::ReadOnly);
          return work(store, c, p);
        },
        std::move(done), std::move(failed));
  }

  // The same without a store (work that computes, or opens what it needs itself, e.g. a store to
  // write into).
  template <typename T>
  using PlainWork = std::function<T(core::CancelToken&, const core::ProgressFn&)>;
  template <typename T>
  static BackgroundTask* run(QObject* owner, PlainWork<T> work, std::function<void(T)> done,
                             std::function<void(QString)> failed = {}) {
    auto* task = new BackgroundTask(owner);
    auto result = std::make_shared<std::optional<T>>();
    auto error = std::make_shared<QString>();
    auto token = task->token_;
    QPointer<BackgroundTask> self(task);
    task->thread_ = QThread::create([=]() {
      try {
        core::ProgressFn progress = [self](const core::Progress& p) {
          if (!self) return;
          const int pct = p.total ? static_cast<int>(100.0 * static_cast<double>(p.done) / static_cast<double>(p.total)) : -1;
          QMetaObject::invokeMethod(
              self,
              [self, pct, stage = QString::fromStdString(p.stage)] {
                if (self) Q_EMIT self->progress(pct, stage);
              },
              Qt::QueuedConnection);
        };
        *result = work(*token, progress);
      } catch (const core::Cancelled&) {
        *error = QString();
      } catch (const std::exception& e) {
        *error = QString::fromUtf8(e.what());
        if (error->isEmpty()) *error = QStringLiteral("unknown error");
      }
    });
    connect(task->thread_, &QThread::finished, task, [task, result, error, done, failed, token] {
      if (token->isCancelled()) {
        Q_EMIT task->cancelled();
      } else if (result->has_value()) {
        if (done) done(std::move(**result));
        Q_EMIT task->finished();
      } else {
        if (failed) failed(*error);
        Q_EMIT task->failed(*error);
      }
      task->thread_->deleteLater();
      task->deleteLater();
    });
    task->thread_->start();
    return task;
  }

  void cancel() { token_->cancel(); }
  bool isCancelled() const { return token_->isCancelled(); }
  // Blocks until the work is over (tests; never on the GUI thread in the app).
  bool wait(int ms) { return thread_ ? thread_->wait(QDeadlineTimer(ms)) : true; }

 Q_SIGNALS:
  void progress(int percent, const QString& stage);  // percent -1: unknown
  void finished();
  void failed(const QString& error);
  void cancelled();

 private:
  explicit BackgroundTask(QObject* owner) : QObject(owner), token_(std::make_shared<core::CancelToken>()) {}
  std::shared_ptr<core::CancelToken> token_;
  QThread* thread_ = nullptr;
};

}  // namespace shardscope::ui
