#pragma once
// The application's main window: the run browser (left), the pages (Overview, Compare, Timeline,
// Memory, Communication) in tabs, a log/progress dock, menus, toolbar and status bar.
//
// * The run list is loaded off the GUI thread (BackgroundTask) and watched: every 2 s a cheap query
//   over the runs table decides whether to reload it (new runs, status changes, runs being written),
//   and the model is updated in place so the selection survives.
// * The pages get (database, selected runs) as their context; the current page at once, the others
//   when they are shown (so one click does not start five analyses). The first selected run is the
//   baseline.
// * Imports run `shardscope-cli import` as a child process (ImportProcess); drag and drop of trace
//   files or folders does the same.
// * Errors go to the log dock and the status bar, and to a (non-blocking) message box only when the
//   window is interactive (not offscreen: tests and the screenshot mode).
#include <QList>
#include <QMainWindow>
#include <QPointer>
#include <QString>
#include <QStringList>

#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "core/model/types.h"
#include "ui/models/run_list_model.h"

class QAction;
class QComboBox;
class QDockWidget;
class QLabel;
class QMenu;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QSplitter;
class QTabWidget;
class QThread;
class QTimer;
class QTreeView;
class QUrl;

namespace shardscope::core {
class TraceStore;
}

namespace shardscope::ui {

class BackgroundTask;
class ImportProcess;
class Page;
class RunController;

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  explicit MainWindow(QWidget* parent = nullptr);
  ~MainWindow() override;

  enum class OpenMode { OpenOrCreate, MustExist };
  // Opens (or creates) a database; false, with the error shown in the window, on failure (the
  // previously open database, if any, stays open).
  bool openDatabase(const QString& path, OpenMode mode = OpenMode::OpenOrCreate);
  void closeDatabase();
  QString databasePath() const { return dbPath_; }
  bool isReadOnly() const { return readOnly_; }
  QString lastError() const { return lastError_; }
  QStringList errors() const { return errors_; }  // every error shown since the start

  // Run browser.
  RunListModel* runModel() const { return model_; }
  QTreeView* runView() const { return runView_; }
  QComboBox* groupingCombo() const { return groupCombo_; }
  void setGrouping(RunListModel::Grouping grouping);
  // Selected runs in the order they were selected (the first is the baseline).
  QList<core::Id> selectedRuns() const { return selectionOrder_; }
  // Selects these runs (in this order); if the run list is still loading, once it has loaded.
  void selectRuns(const QList<core::Id>& ids);
  // Hands the selection to the pages now instead of after the short debounce.
  void applySelectionNow();
  void makeBaseline(core::Id id);
  bool runsLoading() const;
  void reloadRuns();
  void refresh();  // F5: the run list and the current page
  // Asks first (setAutoConfirm when not interactive), then deletes on a thread; runsDeleted when done.
  void deleteRuns(const QList<core::Id>& ids);
  bool deleting() const;
  void renameRun(core::Id id);                   // inline editor on the name
  void editTags(core::Id id);                    // inline editor on the tags

  // Pages.
  const std::vector<Page*>& pages() const { return pages_; }
  Page* page(const QString& id) const;
  Page* currentPage() const;
  bool showPage(const QString& id);
  // The context last handed to a page (nullopt: never, or stale until it is shown).
  std::optional<QList<core::Id>> pageContextRuns(const QString& id) const;
  // Loading anything (run list, current page, pending selection) or importing.
  bool busy() const;

  // Import (shardscope-cli import as a child process).
  bool importTraces(const QStringList& paths);
  bool importRunning() const;
  void cancelCurrentTask();  // the dock's Cancel: the import, else the current page's loading
  void handleDroppedUrls(const QList<QUrl>& urls);

  // Launch (shardscope-cli compare --progress-json as a child process, when the launch code is built).
  // compareArgs as LaunchDialog::arguments(); progress in the Launch dock; the runs appear in the
  // browser as they are written and are selected (Compare page) when the comparison finishes.
  bool launchComparison(const QStringList& compareArgs);
  bool launchRunning() const;
  RunController* runController() const { return runController_; }  // null without the launch code
  QWidget* launchProgress() const { return launchProgress_; }         // its LaunchProgressWidget
  QDockWidget* launchDock() const { return launchDock_; }

  // Behaviour switches.
  bool isInteractive() const { return interactive_; }
  void setInteractive(bool on) { interactive_ = on; }  // message boxes and confirmation questions
  void setAutoConfirm(bool yes) { autoConfirm_ = yes; }  // the answer when not interactive
  void setPollInterval(int ms);
  // Select the latest run when a database is opened (default on; the screenshot mode selects its own).
  void setAutoSelectLatest(bool on) { autoSelect_ = on; }
  void restoreSettings();  // geometry, state, last page, grouping, recent files; also enables saving
  void saveSettings();
  QStringList recentFiles() const { return recent_; }

  QPlainTextEdit* logView() const { return log_; }
  QProgressBar* progressBar() const { return progressBar_; }
  QPushButton* cancelButton() const { return cancelButton_; }
  QDockWidget* logDock() const { return dock_; }
  QAction* action(const QString& name) const;  // by objectName ("actionOpen", ...)

 Q_SIGNALS:
  void databaseOpened(const QString& path);
  void runsLoaded();  // after every (re)load of the run list
  void importFinished(bool ok, const QList<qint64>& runIds);
  void launchEnded(bool ok, const QList<qint64>& runIds);
  void runsDeleted(const QList<qint64>& runIds);
  void errorReported(const QString& message);
  void contextDelivered(const QString& pageId, const QList<core::Id>& runs);

 protected:
  void closeEvent(QCloseEvent* event) override;
  void dragEnterEvent(QDragEnterEvent* event) override;
  void dropEvent(QDropEvent* event) override;

 private:
  void buildUi();
  void buildActions();
  void chooseNewDatabase();
  void chooseDatabase();
  void chooseTraces();
  void launchRuns();
  void setUpLaunch();
  void about();
  void addRecent(const QString& path);
  void updateRecentMenu();
  void updateTitle();
  void updateActions();
  void poll();
  void onRunsLoaded(std::vector<RunRow> rows, int generation, const RunsFingerprint& fingerprint);
  void onSelectionChanged();
  void onCurrentPageChanged(int index);
  void deliverContext(Page* page, bool force = false);
  void markPagesStale();
  void onJumpToEvent(core::Id runId, core::Id eventId, qint64 startNs, qint64 endNs);
  void restoreSelection(const QList<core::Id>& ids);
  void expandGroups();
  void showContextMenu(const QPoint& pos);
  QList<core::Id> selectedInView() const;
  QList<core::Id> selectedInViewOrdered() const;
  core::Id currentRun() const;
  bool confirm(const QString& question);

  // The log dock and the status bar.
  void log(const QString& text, bool error = false);
  void showError(const QString& message, bool popup = true);
  void updateTaskUi();

  // Database.
  std::unique_ptr<core::TraceStore> store_;
  QString dbPath_;
  bool readOnly_ = false;
  QString lastError_;
  QStringList errors_;
  QString lastPollError_;
  QString runsError_;                      // the run list's read error, shown once until it reads again
  std::optional<std::int64_t> dataVersion_;  // PRAGMA data_version at the last poll that read the runs

  // Run browser.
  RunListModel* model_ = nullptr;
  QTreeView* runView_ = nullptr;
  QComboBox* groupCombo_ = nullptr;
  QLabel* selectionLabel_ = nullptr;
  QList<core::Id> selectionOrder_;
  QList<core::Id> contextRuns_;  // what the pages are told
  std::optional<QList<core::Id>> pendingSelection_;  // applied after the next load
  bool firstLoad_ = true;
  bool restoring_ = false;
  QStringList collapsedGroups_;
  QPointer<BackgroundTask> runsTask_;
  int runsGeneration_ = 0;
  bool reloadAgain_ = false;
  std::optional<RunsFingerprint> fingerprint_;
  QTimer* pollTimer_ = nullptr;
  QTimer* selectionTimer_ = nullptr;

  // Pages.
  QSplitter* splitter_ = nullptr;
  QTabWidget* tabs_ = nullptr;
  std::vector<Page*> pages_;
  std::map<Page*, std::pair<QString, QList<core::Id>>> delivered_;  // last context per page
  std::map<Page*, std::pair<int, QString>> pageProgress_;

  QList<QThread*> deleteThreads_;

  // Import and launch.
  ImportProcess* import_ = nullptr;
  RunController* runController_ = nullptr;  // null when the launch code is not in the build
  QDockWidget* launchDock_ = nullptr;
  QWidget* launchProgress_ = nullptr;

  // Dock, status bar.
  QDockWidget* dock_ = nullptr;
  QPlainTextEdit* log_ = nullptr;
  QLabel* taskLabel_ = nullptr;
  QProgressBar* progressBar_ = nullptr;
  QPushButton* cancelButton_ = nullptr;
  QLabel* dbLabel_ = nullptr;
  QLabel* countLabel_ = nullptr;
  QPointer<QWidget> messageBox_;

  // Actions and menus.
  QMenu* recentMenu_ = nullptr;
  QList<QAction*> pageActions_;
  QAction* launchAction_ = nullptr;
  QAction* importAction_ = nullptr;
  QAction* renameAction_ = nullptr;
  QAction* tagsAction_ = nullptr;
  QAction* deleteAction_ = nullptr;
  QAction* baselineAction_ = nullptr;
  QAction* refreshAction_ = nullptr;
  QStringList recent_;

  bool interactive_ = true;
  bool autoConfirm_ = false;
  bool persist_ = false;
  bool autoSelect_ = true;
};

}  // namespace shardscope::ui
