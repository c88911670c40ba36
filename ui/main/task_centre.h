#pragma once
// The task centre: the Log dock's body. One line says what runs now (an import, a launch, a page's
// analysis from the session's TaskRunner, a deletion, the run list loading), with a progress bar and
// Cancel; below it, the log of messages and errors. It knows nothing of pages or processes: activities
// are reported to it (setActivity / the runner's signals), and Cancel goes out as cancelRequested(key)
// for whoever owns the activity.
#include <QList>
#include <QPointer>
#include <QString>
#include <QWidget>

#include <map>

class QLabel;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;

namespace shardscope::ui {

class TaskRunner;

class TaskCentre : public QWidget {
  Q_OBJECT

 public:
  explicit TaskCentre(QWidget* parent = nullptr);

  // The session's runner: its tasks are shown (the preferred slot, the current page's, first).
  void setRunner(TaskRunner* runner);
  void setPreferredSlot(const QString& slot);
  // Runner slots (or slot prefixes, "delete.") shown below or above the pages' tasks, and whether
  // Cancel applies to them.
  void setSlotRule(const QString& prefix, int priority, bool cancellable);
  // Activities outside the runner, shown by priority (highest first; the runner's tasks are 50).
  // percent -1: unknown.
  void setActivity(const QString& key, const QString& label, int percent, bool cancellable, int priority);
  void clearActivity(const QString& key);
  bool hasActivity(const QString& key) const { return activities_.count(key) > 0; }

  void log(const QString& text, bool error = false);

  // What is shown: the activity key, or "task:<slot>" for a runner task; "" when idle.
  QString shownKey() const { return shownKey_; }
  QString shownLabel() const;
  // Idle: "Ready" and a full bar when a database is open, an empty one when not.
  void setIdleFull(bool full);

  QPlainTextEdit* logView() const { return log_; }
  QProgressBar* progressBar() const { return bar_; }
  QPushButton* cancelButton() const { return cancel_; }

 Q_SIGNALS:
  void cancelRequested(const QString& key);

 public Q_SLOTS:
  void refresh();

 private:
  struct Activity {
    QString label;
    int percent = -1;
    bool cancellable = false;
    int priority = 0;
  };
  std::map<QString, Activity> activities_;
  std::map<QString, std::pair<int, bool>> slotRules_;
  QPointer<TaskRunner> runner_;
  QString preferred_;
  QString shownKey_;
  bool idleFull_ = false;
  QLabel* label_ = nullptr;
  QProgressBar* bar_ = nullptr;
  QPushButton* cancel_ = nullptr;
  QPlainTextEdit* log_ = nullptr;
};

}  // namespace shardscope::ui
