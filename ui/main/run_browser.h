#pragma once
// The run browser: the left side of the main window. The runs of the open database in a tree
// (grouped by source, strategy or status), the user's selection in the order it was made (the first
// run is the baseline), renaming, tags and deleting. It follows the file live: every poll a cheap
// PRAGMA data_version tells whether another connection committed; then a fingerprint of the runs
// table decides whether to reload the list, off the GUI thread, updating the model in place so the
// selection survives. It also asks the session to look (RunSession::poll), so analyses of runs that
// changed are dropped from the cache.
//
// It talks to the window through signals only: selectionApplied (after a short debounce) is what the
// pages and the session are given; message/errorOccurred go to the task centre's log; activityChanged
// says the list is loading or runs are being deleted.
#include <QList>
#include <QPointer>
#include <QString>
#include <QStringList>
#include <QWidget>

#include <functional>
#include <memory>
#include <optional>

#include "core/model/types.h"
#include "ui/models/run_list_model.h"

class QComboBox;
class QLabel;
class QTimer;
class QTreeView;

namespace shardscope::core {
class TraceStore;
}

namespace shardscope::ui {

class BackgroundTask;
class RunSession;

class RunBrowser : public QWidget {
  Q_OBJECT

 public:
  explicit RunBrowser(RunSession* session, QWidget* parent = nullptr);
  ~RunBrowser() override;

  // The database the window opened: its connection (renames and tags are written through it when
  // `writable`; the watch reads through it either way).
  void setDatabase(const QString& path, core::TraceStore* store, bool writable);
  void clear();

  RunListModel* model() const { return model_; }
  QTreeView* view() const { return view_; }
  QComboBox* groupingCombo() const { return groupCombo_; }
  void setGrouping(RunListModel::Grouping grouping);
  QStringList collapsedGroups() const { return collapsedGroups_; }

  // The selection in the order it was made, and what was last applied (the pages' context).
  QList<core::RunId> selectedRuns() const { return selectionOrder_; }
  QList<core::RunId> appliedRuns() const { return applied_; }
  void selectRuns(const QList<core::RunId>& ids);  // after the run list loads, if it is loading
  void selectAfterNextLoad(const QList<core::RunId>& ids) { pendingSelection_ = ids; }
  void applySelectionNow();
  bool selectionPending() const;
  void makeBaseline(core::RunId id);
  core::RunId currentRun() const;             // the current row when selected, else the baseline
  QList<core::RunId> selectedInView() const;  // sorted by id
  void setAutoSelectLatest(bool on) { autoSelect_ = on; }

  bool runsLoading() const { return !runsTask_.isNull(); }
  void reloadRuns();
  void setPollInterval(int ms);
  void poll();

  void renameRun(core::RunId id);
  void editTags(core::RunId id);
  // Asks `confirm` first, then deletes on a thread; runsDeleted when done.
  void deleteRuns(const QList<core::RunId>& ids);
  bool deleting() const;
  void setConfirm(std::function<bool(const QString&)> confirm) { confirm_ = std::move(confirm); }

 Q_SIGNALS:
  void runsLoaded();
  void selectionApplied(const QList<core::RunId>& runs);
  void selectionEdited();  // the view's selection changed (actions follow it)
  void message(const QString& text);
  void errorOccurred(const QString& text, bool popup);
  void activityChanged();  // loading the list or deleting started or ended
  void runsDeleted(const QList<qint64>& runIds);
  void contextMenuRequested(const QPoint& globalPos);

 private:
  void onRunsLoaded(std::vector<RunRow> rows, int generation, const RunsFingerprint& fingerprint);
  void onSelectionChanged();
  void restoreSelection(const QList<core::RunId>& ids);
  void expandGroups();
  QList<core::RunId> selectedInViewOrdered() const;

  RunSession* session_ = nullptr;
  QString dbPath_;
  core::TraceStore* store_ = nullptr;  // the window's connection
  std::optional<std::int64_t> dataVersion_;
  QString runsError_, lastPollError_;

  RunListModel* model_ = nullptr;
  QTreeView* view_ = nullptr;
  QComboBox* groupCombo_ = nullptr;
  QLabel* selectionLabel_ = nullptr;
  QList<core::RunId> selectionOrder_;
  QList<core::RunId> applied_;
  std::optional<QList<core::RunId>> pendingSelection_;
  bool firstLoad_ = true;
  bool restoring_ = false;
  bool autoSelect_ = true;
  QStringList collapsedGroups_;
  QPointer<BackgroundTask> runsTask_;
  int runsGeneration_ = 0;
  bool reloadAgain_ = false;
  std::optional<RunsFingerprint> fingerprint_;
  QTimer* pollTimer_ = nullptr;
  QTimer* selectionTimer_ = nullptr;
  QList<QPointer<BackgroundTask>> deleteTasks_;  // in the session's runner, a slot each
  int deleteSerial_ = 0;
  std::function<bool(const QString&)> confirm_;
};

}  // namespace shardscope::ui
