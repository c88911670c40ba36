#pragma once
// The one place background work of the app runs through (RunSession::tasks()). A task has a slot
// (a page's id, "report", ...): starting a task in a slot cancels the one running there, and only the
// latest task of a slot delivers its result (an earlier one that ends late is dropped). The runner
// knows every running task, with its label and progress, so the task centre (the log dock's progress
// bar and Cancel) shows and cancels them without asking each page.
//
//   runner->start<Comparison>(this, "compare", tr("Comparing 3 runs"),
//       [=](core::CancelToken& c, const core::ProgressFn& p) { return ...; },
//       [this](Comparison c) { show(c); },      // GUI thread; only if still the slot's latest
//       [this](QString error) { showError(error); });
#include <QList>
#include <QObject>
#include <QPointer>
#include <QString>

#include <functional>
#include <map>

#include "ui/common/background.h"

namespace shardscope::ui {

class TaskRunner : public QObject {
  Q_OBJECT

 public:
  explicit TaskRunner(QObject* parent = nullptr) : QObject(parent) {}
  ~TaskRunner() override { cancelAll(); }

  struct TaskInfo {
    QString slot, label, stage;
    int percent = -1;  // -1: unknown
  };

  template <typename T>
  BackgroundTask* start(QObject* receiver, const QString& slot, const QString& label, BackgroundTask::PlainWork<T> work,
                        std::function<void(T)> done, std::function<void(QString)> failed = {}) {
    cancel(slot);
    const quint64 serial = ++serial_;
    QPointer<QObject> guard(receiver);
    QPointer<TaskRunner> self(this);
    auto* task = BackgroundTask::run<T>(
        this, std::move(work),
        [self, guard, slot, serial, done](T value) {
          if (!self || !self->isLatest(slot, serial)) return;
          self->finish(slot);
          if (guard && done) done(std::move(value));
        },
        [self, guard, slot, serial, failed](QString error) {
          if (!self || !self->isLatest(slot, serial)) return;
          self->finish(slot);
          if (guard && failed) failed(error);
        });
    Running r;
    r.task = task;
    r.serial = serial;
    r.info.slot = slot;
    r.info.label = label;
    running_[slot] = r;
    connect(task, &BackgroundTask::progress, this, [this, slot, serial](int percent, const QString& stage) {
      auto it = running_.find(slot);
      if (it == running_.end() || it->second.serial != serial) return;
      it->second.info.percent = percent;
      if (!stage.isEmpty()) it->second.info.stage = stage;
      Q_EMIT progress(slot, percent, it->second.info.stage);
      Q_EMIT changed();
    });
    connect(task, &BackgroundTask::cancelled, this, [this, slot, serial] {
      if (isLatest(slot, serial)) finish(slot);
    });
    Q_EMIT started(slot, label);
    Q_EMIT changed();
    return task;
  }

  bool busy() const { return !running_.empty(); }
  bool busy(const QString& slot) const { return running_.count(slot) > 0; }
  // Cancels the slot's task (its result is dropped); false when none runs there.
  bool cancel(const QString& slot) {
    auto it = running_.find(slot);
    if (it == running_.end()) return false;
    if (it->second.task) it->second.task->cancel();
    running_.erase(it);
    Q_EMIT ended(slot);
    Q_EMIT changed();
    return true;
  }
  void cancelAll() {
    while (!running_.empty()) cancel(running_.begin()->first);
  }
  QList<TaskInfo> tasks() const {
    QList<TaskInfo> out;
    for (const auto& [slot, r] : running_) out << r.info;
    return out;
  }
  std::optional<TaskInfo> task(const QString& slot) const {
    auto it = running_.find(slot);
    if (it == running_.end()) return std::nullopt;
    return it->second.info;
  }
  // Tasks started since the runner was made (tests count them).
  quint64 startedCount() const { return serial_; }

 Q_SIGNALS:
  void started(const QString& slot, const QString& label);
  void progress(const QString& slot, int percent, const QString& stage);
  void ended(const QString& slot);  // delivered, failed or cancelled
  void changed();                   // any of the above

 private:
  struct Running {
    QPointer<BackgroundTask> task;
    quint64 serial = 0;
    TaskInfo info;
  };
  bool isLatest(const QString& slot, quint64 serial) const {
    auto it = running_.find(slot);
    return it != running_.end() && it->second.serial == serial;
  }
  void finish(const QString& slot) {
    running_.erase(slot);
    Q_EMIT ended(slot);
    Q_EMIT changed();
  }

  std::map<QString, Running> running_;
  quint64 serial_ = 0;
};

}  // namespace shardscope::ui
