#pragma once
// The application's main window: a thin shell over three parts that talk through signals.
//
// * RunSession (ui/session): the document of the open database: the selection, the shared time
//   range, the task runner and the cache of each run's analyses. Every page reads through it, so a
//   run is analysed once whichever pages show it.
// * RunBrowser (left): the runs, the selection in the order it was made (the first run is the
//   baseline), live follow of the file, rename, tags, delete.
// * TaskCentre (the Log dock): what runs now with progress and Cancel, and the log.
//
// The window holds the pages in tabs and hands them the selection: the current page at once, the
// others when they are shown (so one click does not start five analyses).
// * Imports run `shardscope-cli import` as a child process (ImportProcess); drag and drop of trace
//   files or folders does the same; a dropped database is opened.
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

#include "core/config/run_config.h"
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

class ImportProcess;
class MergeTask;
class Page;
class RunBrowser;
class RunController;
class RunSession;
class TaskCentre;

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
  // Reading the open database failed in a way a reopen may cure (RunSession::readFailed): every
  // connection of the app to it is closed, the file is checked on a fresh one (core::checkDatabase)
  // and reopened with the same selection and page when it reads; what the check found is said (the
  // file is called damaged only when PRAGMA quick_check says so). Retries while it is locked or
  // unreadable; databaseRecovered or an error at the end.
  bool recovering() const { return !recoverPath_.isEmpty(); }
  QStringList errors() const { return errors_; }  // every error shown since the start

  RunSession* session() const { return session_; }
  RunBrowser* runBrowser() const { return browser_; }
  TaskCentre* taskCentre() const { return tasks_; }

  // Run browser.
  RunListModel* runModel() const;
  QTreeView* runView() const;
  QComboBox* groupingCombo() const;
  void setGrouping(RunListModel::Grouping grouping);
  // Selected runs in the order they were selected (the first is the baseline).
  QList<core::RunId> selectedRuns() const;
  // Selects these runs (in this order); if the run list is still loading, once it has loaded.
  void selectRuns(const QList<core::RunId>& ids);
  // Hands the selection to the pages now instead of after the short debounce.
  void applySelectionNow();
  void makeBaseline(core::RunId id);
  bool runsLoading() const;
  void reloadRuns();
  void refresh();  // F5: the run list, and the current page with fresh analyses
  // Asks first (setAutoConfirm when not interactive), then deletes on a thread; runsDeleted when done.
  void deleteRuns(const QList<core::RunId>& ids);
  bool deleting() const;
  void renameRun(core::RunId id);  // inline editor on the name
  void editTags(core::RunId id);   // inline editor on the tags

  // Pages.
  const std::vector<Page*>& pages() const { return pages_; }
  Page* page(const QString& id) const;
  Page* currentPage() const;
  bool showPage(const QString& id);
  // The context last handed to a page (nullopt: never, or stale until it is shown).
  std::optional<QList<core::RunId>> pageContextRuns(const QString& id) const;
  // Loading anything (run list, current page, pending selection) or importing.
  bool busy() const;

  // Import (shardscope-cli import as a child process).
  bool importTraces(const QStringList& paths);
  bool importRunning() const;
  void cancelCurrentTask();  // the dock's Cancel: what the task centre shows
  // Dropped on the window: a database is opened (the first of several), traces and folders are
  // imported (into the dropped database when there is one).
  void handleDroppedUrls(const QList<QUrl>& urls);
  // An existing SQLite file (its header), or an empty *.db: what a drop opens instead of importing.
  static bool isDatabaseFile(const QString& path);

  // Export a run as one merged multi-rank trace for ui.perfetto.dev (core::exportPerfetto, in the
  // session's runner: progress and Cancel in the task centre). false when it cannot start.
  bool exportPerfetto(core::RunId run, const QString& path);
  bool exportRunning() const;

  // File ▸ Merge Databases…: the per-node databases of multi-node jobs into `out`
  // (core::mergeDatabases on a worker thread; progress and Cancel in the task centre), which is opened
  // when it is done. false when a merge is already running.
  bool mergeDatabases(const QStringList& inputs, const QString& out);
  bool mergeRunning() const;

  // Launch (shardscope-cli compare --progress json --config FILE as a child process, when the launch
  // code is built): `base` as run-config JSON, the strategies compared in order.
  // As LaunchDialog::config() and strategies(); progress in the Launch dock; the runs appear in the
  // browser as they are written and are selected (Compare page) when the comparison finishes.
  // `name` prefixes the run names; `repeats` runs each configuration that many times (the verdict then
  // judges them by their run-to-run spread and a t-test).
  bool launchComparison(const core::RunConfig& base, const QStringList& strategies, const QString& name = {}, int repeats = 1);
  bool launchRunning() const;
  // A bottleneck's "try it" (Page::tryChange): run `runId`'s stored configuration with `change`
  // applied (core::withChange) is launched into the open database; when it finishes the two runs are
  // selected side by side on the Compare page. False (and the error shown) when the run has no
  // configuration, the change does not apply or a launch cannot start.
  bool tryChange(core::RunId runId, const core::KnobChange& change);
  RunController* runController() const { return runController_; }  // null without the launch code
  QWidget* launchProgress() const { return launchProgress_; }      // its LaunchProgressWidget
  QDockWidget* launchDock() const { return launchDock_; }

  // Behaviour switches.
  bool isInteractive() const { return interactive_; }
  void setInteractive(bool on) { interactive_ = on; }    // message boxes and confirmation questions
  void setAutoConfirm(bool yes) { autoConfirm_ = yes; }  // the answer when not interactive
  void setPollInterval(int ms);
  // Select the latest run when a database is opened (default on; the screenshot mode selects its own).
  void setAutoSelectLatest(bool on);
  void restoreSettings();  // geometry, state, last page, grouping, recent files; also enables saving
  // Opens the most recent file (after restoreSettings) if it still exists; false when there is none.
  // The app does this at start when no file is given on its command line.
  bool openLastDatabase();
  void saveSettings();
  QStringList recentFiles() const { return recent_; }

  QPlainTextEdit* logView() const;
  QProgressBar* progressBar() const;
  QPushButton* cancelButton() const;
  QDockWidget* logDock() const { return dock_; }
  QAction* action(const QString& name) const;  // by objectName ("actionOpen", ...)
  // Every menu action with a shortcut, as (shortcut, "Menu ▸ Action") in menu order: Help ▸ Keyboard
  // Shortcuts shows this list, read from the actions themselves.
  std::vector<std::pair<QString, QString>> shortcutList() const;
  // Where Help ▸ Documentation looks for the docs (the installed share/doc/shardscope, then the source
  // tree of this build), and the first that exists ("" when none does).
  static QStringList documentationCandidates();
  static QString documentationDir();

 Q_SIGNALS:
  void databaseOpened(const QString& path);
  // A database whose read failed reads again and is reopened (see recovering()).
  void databaseRecovered(const QString& path, const QString& check);
  void runsLoaded();  // after every (re)load of the run list
  void importFinished(bool ok, const QList<qint64>& runIds);
  void launchEnded(bool ok, const QList<qint64>& runIds);
  void exportFinished(bool ok, const QString& pathOrError);
  void mergeFinished(bool ok, const QString& summaryOrError);
  void runsDeleted(const QList<qint64>& runIds);
  void errorReported(const QString& message);
  void contextDelivered(const QString& pageId, const QList<core::RunId>& runs);

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
  void chooseMerge();
  void choosePerfettoExport();
  void launchRuns();
  void setUpLaunch();
  void about();
  void addRecent(const QString& path);
  void updateRecentMenu();
  void updateTitle();
  void updateActions();
  void onSelectionApplied(const QList<core::RunId>& runs);
  void onCurrentPageChanged(int index);
  void deliverContext(Page* page, bool force = false);
  void markPagesStale();
  void onJumpToEvent(core::RunId runId, core::Id eventId, qint64 startNs, qint64 endNs);
  void showContextMenu(const QPoint& globalPos);
  bool confirm(const QString& question);
  void onCancelRequested(const QString& key);

  // The log dock and the status bar.
  void log(const QString& text, bool error = false);
  void showError(const QString& message, bool popup = true);
  void updateTaskUi();  // the activities of the import, the launch and the browser

  // Recovering from a failed read (recovering()).
  void recoverDatabase(const QString& error);
  void continueRecovery();
  QString recoverPath_;
  bool recoverReadOnly_ = false;
  QList<core::RunId> recoverRuns_;
  QString recoverPage_;
  QString recoverNote_;  // the last state said (once per state)
  qint64 recoverSince_ = 0;
  QTimer* recoverTimer_ = nullptr;

  // Database.
  std::unique_ptr<core::TraceStore> store_;
  QString dbPath_;
  bool readOnly_ = false;
  QString lastError_;
  QStringList errors_;

  RunSession* session_ = nullptr;
  RunBrowser* browser_ = nullptr;
  TaskCentre* tasks_ = nullptr;
  QList<core::RunId> contextRuns_;  // what the pages are told

  // Pages.
  QSplitter* splitter_ = nullptr;
  QTabWidget* tabs_ = nullptr;
  std::vector<Page*> pages_;
  std::map<Page*, std::pair<QString, QList<core::RunId>>> delivered_;  // last context per page

  // Import and launch.
  ImportProcess* import_ = nullptr;
  MergeTask* merge_ = nullptr;
  RunController* runController_ = nullptr;  // null when the launch code is not in the build
  core::RunId tryBaseline_;                 // the run a "try it" launch is compared with (0: none)
  QDockWidget* launchDock_ = nullptr;
  QWidget* launchProgress_ = nullptr;

  // Dock, status bar.
  QDockWidget* dock_ = nullptr;
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
};

}  // namespace shardscope::ui
