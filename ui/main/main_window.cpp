#include "ui/main/main_window.h"

#include <QAction>
#include <QActionGroup>
#include <QApplication>
#include <QCloseEvent>
#include <QComboBox>
#include <QDateTime>
#include <QDesktopServices>
#include <QDialog>
#include <QTableWidget>
#include <QDir>
#include <QCoreApplication>
#include <QDockWidget>
#include <QScrollArea>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QGuiApplication>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QKeySequence>
#include <QLabel>
#include <QMenu>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QRegularExpression>
#include <QSettings>
#include <QSplitter>
#include <QStatusBar>
#include <QFile>
#include <QThread>
#include <QTabWidget>
#include <QTimer>
#include <QToolBar>
#include <QTreeView>
#include <QUrl>
#include <QVBoxLayout>

#include <algorithm>
#include <chrono>
#include <exception>
#include <memory>
#include <utility>

#include "core/export/perfetto_exporter.h"
#include "core/storage/database_check.h"
#include "core/storage/open_guard.h"
#include "core/storage/trace_store.h"
#include "core/util/error.h"
#include "ui/common/background.h"
#include "ui/main/about_dialog.h"
#include "ui/main/app_icons.h"
#include "ui/main/import_process.h"
#include "ui/main/merge_task.h"
#include "ui/main/run_browser.h"
#include "ui/main/task_centre.h"
#include "ui/session/run_session.h"
#include "ui/pages/estimator_page.h"
#include "ui/pages/page.h"
#include "ui/pages/page_factory.h"
#include "ui/pages/timeline_page.h"
#include "ui/report/export_dialog.h"

#if __has_include("ui/launch/launch_dialog.h") && __has_include("ui/launch/run_controller.h") && \
                                                                __has_include("ui/launch/launch_progress_widget.h")
#include "ui/launch/launch_dialog.h"
#include "ui/launch/launch_progress_widget.h"
#include "ui/launch/run_controller.h"
#define SHARDSCOPE_HAVE_LAUNCH 1
#endif

namespace shardscope::ui {

namespace {

// Content in a scroll area (a page in its tab, a dock's widget): its minimum size never becomes the
// window's, so the window fits a small screen.
QScrollArea* scrolling(QWidget* content, QWidget* parent) {
  auto* scroll = new QScrollArea(parent);
  scroll->setFrameShape(QFrame::NoFrame);
  scroll->setWidgetResizable(true);
  scroll->setWidget(content);
  return scroll;
}

constexpr int kMaxRecent = 8;
// Priorities in the task centre (the session's page tasks are 50).
constexpr int kImportPriority = 100, kLaunchPriority = 90, kDeletePriority = 20, kRunListPriority = 10;

QString settingsKey(const char* k) { return QString::fromLatin1(k); }

}  // namespace

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
  setObjectName(QStringLiteral("MainWindow"));
  const QString platform = QGuiApplication::platformName();
  interactive_ = platform != QLatin1String("offscreen") && platform != QLatin1String("minimal");
  resize(1400, 900);
  setWindowIcon(appIcon());
  setAcceptDrops(true);

  session_ = new RunSession(this);
  // Queued: the failure is reported from inside a poll or a task's callback; the recovery closes
  // what reported it.
  connect(session_, &RunSession::readFailed, this, &MainWindow::recoverDatabase, Qt::QueuedConnection);
  recoverTimer_ = new QTimer(this);
  recoverTimer_->setSingleShot(true);
  connect(recoverTimer_, &QTimer::timeout, this, &MainWindow::continueRecovery);
  import_ = new ImportProcess(this);
  buildUi();
  buildActions();
  setUpLaunch();

  connect(browser_->model(), &RunListModel::runRenamed, this, [this](core::RunId id, const QString& name) {
    log(tr("Run %1 renamed to \"%2\"").arg(id.value()).arg(name));
    // Pages show names: tell those that show this run.
    if (contextRuns_.contains(id)) {
      markPagesStale();
      deliverContext(currentPage(), true);
    }
  });
  connect(import_, &ImportProcess::output, this, [this](const QString& line, bool isError) {
    log(QStringLiteral("import: ") + line, isError && line.startsWith(QLatin1String("error")));
  });
  connect(import_, &ImportProcess::finished, this,
          [this](bool ok, bool cancelled, const QString& message, const QList<qint64>& ids) {
            if (ok) {
              log(tr("Import finished: %1").arg(message));
              statusBar()->showMessage(message, 10000);
              if (import_->dbPath() == dbPath_) {
                if (!ids.isEmpty()) browser_->selectAfterNextLoad(QList<core::RunId>(ids.begin(), ids.end()));
                reloadRuns();
              }
            } else if (cancelled) {
              log(message);
              statusBar()->showMessage(message, 10000);
            } else {
              showError(tr("Import failed: %1").arg(message));
            }
            updateTaskUi();
            updateActions();
            Q_EMIT importFinished(ok, ids);
          });

  updateTitle();
  updateActions();
  updateTaskUi();
}

MainWindow::~MainWindow() {
  for (auto* p : pages_) cancelPageLoading(p);
  session_->tasks()->cancelAll();
}

// ------------------------------------------------------------------------------------------------
// Widgets

void MainWindow::buildUi() {
  splitter_ = new QSplitter(Qt::Horizontal, this);
  splitter_->setObjectName(QStringLiteral("mainSplitter"));
  browser_ = new RunBrowser(session_, splitter_);
  browser_->setConfirm([this](const QString& q) { return confirm(q); });
  connect(browser_, &RunBrowser::selectionApplied, this, &MainWindow::onSelectionApplied);
  connect(browser_, &RunBrowser::selectionEdited, this, &MainWindow::updateActions);
  connect(browser_, &RunBrowser::message, this, [this](const QString& m) { log(m); });
  connect(browser_, &RunBrowser::errorOccurred, this, [this](const QString& m, bool popup) { showError(m, popup); });
  connect(browser_, &RunBrowser::activityChanged, this, &MainWindow::updateTaskUi);
  connect(browser_, &RunBrowser::contextMenuRequested, this, &MainWindow::showContextMenu);
  connect(browser_, &RunBrowser::runsDeleted, this, [this](const QList<qint64>& ids) {
    statusBar()->showMessage(tr("Deleted %n run(s)", nullptr, static_cast<int>(ids.size())), 8000);
    updateActions();
    Q_EMIT runsDeleted(ids);
  });
  connect(browser_, &RunBrowser::runsLoaded, this, [this] {
    countLabel_->setText(tr("%n run(s)", nullptr, browser_->model()->runCount()));
    updateActions();
    Q_EMIT runsLoaded();
  });

  tabs_ = new QTabWidget(splitter_);
  tabs_->setObjectName(QStringLiteral("pageTabs"));
  tabs_->setDocumentMode(true);
  pages_ = createPages(tabs_);
  for (auto* p : pages_) {
    p->setSession(session_);  // one document: every page reads the same cached analyses
    // A page scrolls when the window is smaller than what it lays out (1366 x 768 screens): its
    // minimum size never becomes the window's.
    QScrollArea* scroll = scrolling(p, tabs_);
    scroll->setObjectName(QStringLiteral("pageScroll_") + p->pageId());
    tabs_->addTab(scroll, pageIcon(p->pageId()), p->title());
    connect(p, &Page::statusMessage, this, [this, p](const QString& text) {
      log(QStringLiteral("%1: %2").arg(p->title(), text));
      statusBar()->showMessage(text, 8000);
    });
    connect(p, &Page::errorMessage, this, [this](const QString& text) { showError(text, false); });
    connect(p, &Page::jumpToEvent, this, &MainWindow::onJumpToEvent);
    connect(p, &Page::tryChange, this, &MainWindow::tryChange);
    // Simulations stored from the Estimator page are runs: list them.
    if (auto* ep = qobject_cast<EstimatorPage*>(p)) connect(ep, &EstimatorPage::runsAdded, this, &MainWindow::reloadRuns);
  }
  splitter_->addWidget(browser_);
  splitter_->addWidget(tabs_);
  splitter_->setStretchFactor(0, 0);
  splitter_->setStretchFactor(1, 1);
  // The run list takes about 30 % of the width (at most 500 px) and can be collapsed; the pages the rest.
  splitter_->setSizes({500, 1100});
  splitter_->setCollapsible(1, false);
  setCentralWidget(splitter_);

  // The task centre: what runs now, progress, Cancel, and the log.
  dock_ = new QDockWidget(tr("Log"), this);
  dock_->setObjectName(QStringLiteral("logDock"));
  tasks_ = new TaskCentre(dock_);
  tasks_->setRunner(session_->tasks());
  tasks_->setSlotRule(QStringLiteral("delete."), kDeletePriority, false);  // one transaction: it ends
  tasks_->setSlotRule(QStringLiteral("runs"), kRunListPriority, false);
  connect(tasks_, &TaskCentre::cancelRequested, this, &MainWindow::onCancelRequested);
  dock_->setWidget(scrolling(tasks_, dock_));
  addDockWidget(Qt::BottomDockWidgetArea, dock_);
  resizeDocks({dock_}, {150}, Qt::Vertical);

#ifdef SHARDSCOPE_HAVE_LAUNCH
  // The comparison launched from the app: per-strategy progress, live loss and step time, Cancel.
  launchDock_ = new QDockWidget(tr("Launch"), this);
  launchDock_->setObjectName(QStringLiteral("launchDock"));
  auto* progressWidget = new LaunchProgressWidget(launchDock_);
  launchProgress_ = progressWidget;
  launchDock_->setWidget(scrolling(progressWidget, launchDock_));
  addDockWidget(Qt::BottomDockWidgetArea, launchDock_);
  tabifyDockWidget(dock_, launchDock_);
  dock_->raise();
  launchDock_->hide();  // shown when a comparison is launched
#endif

  // Status bar.
  dbLabel_ = new QLabel(tr("No database"), this);
  dbLabel_->setObjectName(QStringLiteral("dbLabel"));
  countLabel_ = new QLabel(this);
  countLabel_->setObjectName(QStringLiteral("runCountLabel"));
  statusBar()->addPermanentWidget(dbLabel_);
  statusBar()->addPermanentWidget(countLabel_);

  connect(tabs_, &QTabWidget::currentChanged, this, &MainWindow::onCurrentPageChanged);
}

void MainWindow::buildActions() {
  auto make = [this](const QString& name, const QString& text, const QKeySequence& key = {}) {
    auto* a = new QAction(text, this);
    a->setObjectName(name);
    if (!key.isEmpty()) a->setShortcut(key);
    return a;
  };

  // File
  auto* file = menuBar()->addMenu(tr("&File"));
  file->setToolTipsVisible(true);
  auto* newDb = make(QStringLiteral("actionNew"), tr("&New Database…"), QKeySequence::New);
  connect(newDb, &QAction::triggered, this, &MainWindow::chooseNewDatabase);
  auto* open = make(QStringLiteral("actionOpen"), tr("&Open Database…"), QKeySequence::Open);
  open->setIcon(actionIcon(QStringLiteral("document-open")));
  open->setToolTip(tr("Open a Shardscope database (Ctrl+O)"));
  connect(open, &QAction::triggered, this, &MainWindow::chooseDatabase);
  file->addAction(newDb);
  file->addAction(open);
  recentMenu_ = file->addMenu(tr("Recent &Files"));
  recentMenu_->setObjectName(QStringLiteral("recentMenu"));
  file->addSeparator();
  importAction_ = make(QStringLiteral("actionImport"), tr("&Import Traces…"), QKeySequence(Qt::CTRL | Qt::Key_I));
  importAction_->setIcon(actionIcon(QStringLiteral("folder-download")));
  importAction_->setToolTip(tr("Import torch.profiler (Kineto) traces: one run per job (Ctrl+I); or drop files on the window"));
  connect(importAction_, &QAction::triggered, this, &MainWindow::chooseTraces);
  file->addAction(importAction_);
  auto* mergeAction = make(QStringLiteral("actionMerge"), tr("&Merge Databases…"));
  mergeAction->setToolTip(tr(
      "Join the per-node databases of multi-node jobs (torchrun, srun) into one database: each job one run with all its ranks"));
  connect(mergeAction, &QAction::triggered, this, &MainWindow::chooseMerge);
  file->addAction(mergeAction);
  launchAction_ = make(QStringLiteral("actionLaunch"), tr("&Launch Runs…"), QKeySequence(Qt::CTRL | Qt::Key_R));
  launchAction_->setIcon(actionIcon(QStringLiteral("media-playback-start")));
  launchAction_->setToolTip(tr("Launch a comparison of strategies on the runtime (Ctrl+R): its runs appear in the list"));
  connect(launchAction_, &QAction::triggered, this, &MainWindow::launchRuns);
  // Reports (ui/report/export_dialog): the selected runs, the first as the baseline.
  auto* reportAction = make(QStringLiteral("actionExportReport"), tr("Export &Report…"));
  reportAction->setToolTip(tr("A report of the selected runs (one run, or a comparison) as HTML, PDF, Markdown or CSV"));
  connect(reportAction, &QAction::triggered, this, [this] {
    if (dbPath_.isEmpty() || selectedRuns().isEmpty()) {
      showError(tr("Export Report: open a database and select one or more runs first"), false);
      return;
    }
    // The report reads the analyses the pages already made (the session's cache).
    auto* dialog = new ExportReportDialog(dbPath_, selectedRuns(), this, session_);
    dialog->setAttribute(Qt::WA_DeleteOnClose);
    connect(dialog, &ExportReportDialog::exported, this,
            [this](const QString& path) { log(tr("Report written to %1").arg(path)); });
    dialog->open();
  });
  file->addAction(reportAction);
  auto* perfetto = make(QStringLiteral("actionExportPerfetto"), tr("Export to &Perfetto…"));
  perfetto->setToolTip(tr("The current run as one merged multi-rank trace (.json.gz) for ui.perfetto.dev"));
  connect(perfetto, &QAction::triggered, this, &MainWindow::choosePerfettoExport);
  file->addAction(perfetto);
  file->addSeparator();
  auto* quit = make(QStringLiteral("actionQuit"), tr("&Quit"), QKeySequence::Quit);
  connect(quit, &QAction::triggered, this, &QWidget::close);
  file->addAction(quit);

  // Run
  auto* runMenu = menuBar()->addMenu(tr("&Run"));
  runMenu->addAction(launchAction_);
  runMenu->addSeparator();
  renameAction_ = make(QStringLiteral("actionRename"), tr("&Rename"), QKeySequence(Qt::Key_F2));
  renameAction_->setShortcutContext(Qt::WidgetWithChildrenShortcut);
  connect(renameAction_, &QAction::triggered, this, [this] { renameRun(browser_->currentRun()); });
  tagsAction_ = make(QStringLiteral("actionTags"), tr("Edit &Tags"), QKeySequence(Qt::CTRL | Qt::Key_T));
  connect(tagsAction_, &QAction::triggered, this, [this] { editTags(browser_->currentRun()); });
  baselineAction_ = make(QStringLiteral("actionBaseline"), tr("Use as &Baseline"), QKeySequence(Qt::CTRL | Qt::Key_B));
  connect(baselineAction_, &QAction::triggered, this, [this] { makeBaseline(browser_->currentRun()); });
  deleteAction_ = make(QStringLiteral("actionDelete"), tr("&Delete…"), QKeySequence::Delete);
  deleteAction_->setShortcutContext(Qt::WidgetWithChildrenShortcut);
  connect(deleteAction_, &QAction::triggered, this, [this] { deleteRuns(browser_->selectedInView()); });
  runView()->addAction(renameAction_);
  runView()->addAction(deleteAction_);
  runMenu->addAction(renameAction_);
  runMenu->addAction(tagsAction_);
  runMenu->addAction(baselineAction_);
  runMenu->addSeparator();
  runMenu->addAction(deleteAction_);

  // View
  auto* view = menuBar()->addMenu(tr("&View"));
  auto* pageGroup = new QActionGroup(this);
  for (int i = 0; i < static_cast<int>(pages_.size()); ++i) {
    Page* p = pages_[static_cast<std::size_t>(i)];
    auto* a = make(QStringLiteral("actionPage_") + p->pageId(), p->title(), QKeySequence(Qt::CTRL | (Qt::Key_1 + i)));
    a->setIcon(pageIcon(p->pageId()));
    a->setCheckable(true);
    a->setActionGroup(pageGroup);
    connect(a, &QAction::triggered, this, [this, i] { tabs_->setCurrentIndex(i); });
    view->addAction(a);
    pageActions_ << a;
  }
  if (!pageActions_.isEmpty()) pageActions_.first()->setChecked(true);
  view->addSeparator();
  refreshAction_ = make(QStringLiteral("actionRefresh"), tr("&Refresh"), QKeySequence(Qt::Key_F5));
  refreshAction_->setIcon(actionIcon(QStringLiteral("view-refresh")));
  refreshAction_->setToolTip(tr("Reload the run list and the current page (F5)"));
  connect(refreshAction_, &QAction::triggered, this, &MainWindow::refresh);
  view->addAction(refreshAction_);
  auto* toggleDock = dock_->toggleViewAction();
  toggleDock->setObjectName(QStringLiteral("actionToggleLog"));
  toggleDock->setText(tr("&Log and Progress"));
  toggleDock->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_L));
  view->addAction(toggleDock);
  if (launchDock_) {
    auto* toggleLaunch = launchDock_->toggleViewAction();
    toggleLaunch->setObjectName(QStringLiteral("actionToggleLaunch"));
    toggleLaunch->setText(tr("L&aunch Progress"));
    view->addAction(toggleLaunch);
  }

  // Help
  auto* help = menuBar()->addMenu(tr("&Help"));
  auto* docsAction = make(QStringLiteral("actionDocs"), tr("&Documentation"), QKeySequence::HelpContents);
  docsAction->setToolTip(tr("The user documentation (README and docs/: metrics, estimator, reports, timeline, GPUs, clusters)"));
  connect(docsAction, &QAction::triggered, this, [this] {
    const QString dir = documentationDir();
    if (dir.isEmpty()) {
      showError(
          tr("The documentation is not installed beside this build (looked in %1)").arg(documentationCandidates().join(", ")));
      return;
    }
    log(tr("Opening the documentation: %1").arg(dir));
    QDesktopServices::openUrl(QUrl::fromLocalFile(dir));
  });
  help->addAction(docsAction);
  auto* shortcutsAction = make(QStringLiteral("actionShortcuts"), tr("&Keyboard Shortcuts"));
  connect(shortcutsAction, &QAction::triggered, this, [this] {
    auto* box = new QDialog(this);
    box->setAttribute(Qt::WA_DeleteOnClose);
    box->setWindowTitle(tr("Keyboard shortcuts"));
    auto* layout = new QVBoxLayout(box);
    auto* table = new QTableWidget(box);
    table->setObjectName(QStringLiteral("shortcutsTable"));
    const auto rows = shortcutList();
    table->setColumnCount(2);
    table->setRowCount(static_cast<int>(rows.size()));
    table->setHorizontalHeaderLabels({tr("Shortcut"), tr("Action")});
    for (int i = 0; i < static_cast<int>(rows.size()); ++i) {
      table->setItem(i, 0, new QTableWidgetItem(rows[static_cast<std::size_t>(i)].first));
      table->setItem(i, 1, new QTableWidgetItem(rows[static_cast<std::size_t>(i)].second));
    }
    table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    table->verticalHeader()->hide();
    table->horizontalHeader()->setStretchLastSection(true);
    table->resizeColumnToContents(0);
    layout->addWidget(table);
    auto* note = new QLabel(tr("Timeline: F fit steps, Home whole run, Z zoom to selection, Alt+Left/Right zoom history, "
                               "Enter/Shift+Enter next/previous match, wheel zoom, drag pan."),
                            box);
    note->setWordWrap(true);
    layout->addWidget(note);
    box->resize(520, 560);
    box->open();
  });
  help->addAction(shortcutsAction);
  help->addSeparator();
  auto* aboutAction = make(QStringLiteral("actionAbout"), tr("&About Shardscope"));
  aboutAction->setIcon(actionIcon(QStringLiteral("help-about")));
  connect(aboutAction, &QAction::triggered, this, &MainWindow::about);
  help->addAction(aboutAction);
  auto* aboutQt = make(QStringLiteral("actionAboutQt"), tr("About &Qt"));
  connect(aboutQt, &QAction::triggered, qApp, &QApplication::aboutQt);
  help->addAction(aboutQt);

  // Toolbar
  auto* tb = addToolBar(tr("Main"));
  tb->setObjectName(QStringLiteral("mainToolBar"));
  tb->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
  tb->setMovable(false);
  tb->addAction(open);
  tb->addAction(importAction_);
  tb->addAction(launchAction_);
  tb->addAction(refreshAction_);

  updateRecentMenu();
}

QAction* MainWindow::action(const QString& name) const { return findChild<QAction*>(name); }

// ------------------------------------------------------------------------------------------------
// Settings

void MainWindow::restoreSettings() {
  persist_ = true;
  QSettings s;
  if (s.contains(settingsKey("window/geometry"))) restoreGeometry(s.value(settingsKey("window/geometry")).toByteArray());
  if (s.contains(settingsKey("window/state"))) restoreState(s.value(settingsKey("window/state")).toByteArray());
  if (s.contains(settingsKey("window/splitter"))) splitter_->restoreState(s.value(settingsKey("window/splitter")).toByteArray());
  if (s.contains(settingsKey("runs/header")))
    runView()->header()->restoreState(s.value(settingsKey("runs/header")).toByteArray());
  recent_ = s.value(settingsKey("recentFiles")).toStringList();
  while (recent_.size() > kMaxRecent) recent_.removeLast();
  updateRecentMenu();
  const QString grouping = s.value(settingsKey("runs/grouping"), QStringLiteral("source")).toString();
  setGrouping(RunListModel::groupingFromName(grouping));
  const QString last = s.value(settingsKey("window/lastPage")).toString();
  if (!last.isEmpty()) showPage(last);
}

void MainWindow::saveSettings() {
  if (!persist_) return;
  QSettings s;
  s.setValue(settingsKey("window/geometry"), saveGeometry());
  s.setValue(settingsKey("window/state"), saveState());
  s.setValue(settingsKey("window/splitter"), splitter_->saveState());
  s.setValue(settingsKey("runs/header"), runView()->header()->saveState());
  s.setValue(settingsKey("window/lastPage"), currentPage() ? currentPage()->pageId() : QString());
  s.setValue(settingsKey("recentFiles"), recent_);
  s.setValue(settingsKey("runs/grouping"), RunListModel::groupingName(runModel()->grouping()));
}

void MainWindow::addRecent(const QString& path) {
  recent_.removeAll(path);
  recent_.prepend(path);
  while (recent_.size() > kMaxRecent) recent_.removeLast();
  updateRecentMenu();
  if (persist_) QSettings().setValue(settingsKey("recentFiles"), recent_);
}

void MainWindow::updateRecentMenu() {
  recentMenu_->clear();
  for (int i = 0; i < recent_.size(); ++i) {
    const QString path = recent_[i];
    auto* a = recentMenu_->addAction(QStringLiteral("&%1  %2").arg(i + 1).arg(path));
    a->setData(path);
    connect(a, &QAction::triggered, this, [this, path] { openDatabase(path, OpenMode::MustExist); });
  }
  if (!recent_.isEmpty()) {
    recentMenu_->addSeparator();
    recentMenu_->addAction(tr("Clear List"), this, [this] {
      recent_.clear();
      updateRecentMenu();
      if (persist_) QSettings().setValue(settingsKey("recentFiles"), recent_);
    });
  }
  recentMenu_->setEnabled(!recent_.isEmpty());
}

void MainWindow::closeEvent(QCloseEvent* event) {
  if (importRunning()) {
    if (interactive_ && !confirm(tr("An import is running. Quit and cancel it (nothing of it is kept)?"))) {
      event->ignore();
      return;
    }
    import_->cancel();
  }
  if (launchRunning()) {
    if (interactive_ && !confirm(tr("A comparison is running. Quit and stop its ranks (its runs are stored as cancelled)?"))) {
      event->ignore();
      return;
    }
    cancelCurrentTask();
  }
  saveSettings();
  browser_->clear();
  for (auto* p : pages_) cancelPageLoading(p);
  session_->tasks()->cancelAll();
  event->accept();
}

// ------------------------------------------------------------------------------------------------
// Database

void MainWindow::chooseMerge() {
  const QString dir = dbPath_.isEmpty() ? QString() : QFileInfo(dbPath_).absolutePath();
  const QStringList inputs = QFileDialog::getOpenFileNames(this, tr("Merge Databases: the per-node databases"), dir,
                                                           tr("Shardscope databases (*.db *.db.node* *.sqlite);;All files (*)"));
  if (inputs.isEmpty()) return;
  const QString out = QFileDialog::getSaveFileName(this, tr("Merge Databases: write to"),
                                                   QFileInfo(inputs.front()).absolutePath() + QStringLiteral("/merged.db"),
                                                   tr("Shardscope databases (*.db)"), nullptr, QFileDialog::DontConfirmOverwrite);
  if (out.isEmpty()) return;
  mergeDatabases(inputs, out);
}

bool MainWindow::mergeRunning() const { return merge_ && merge_->isRunning(); }

bool MainWindow::mergeDatabases(const QStringList& inputs, const QString& out) {
  if (mergeRunning()) {
    showError(tr("Merge Databases: a merge is already running"), false);
    return false;
  }
  if (!merge_) {
    merge_ = new MergeTask(this);
    connect(merge_, &MergeTask::progress, this,
            [this](int pct, const QString& label) { tasks_->setActivity(QStringLiteral("merge"), label, pct, true, 60); });
    connect(merge_, &MergeTask::finished, this, [this](bool ok, const QString& message) {
      tasks_->clearActivity(QStringLiteral("merge"));
      if (!ok) {
        showError(tr("Merge Databases: %1").arg(message), false);
        Q_EMIT mergeFinished(false, message);
        return;
      }
      const QString summary = MergeTask::summary(merge_->result());
      for (const auto& line : summary.split(QLatin1Char('\n'))) log(line);
      if (QFileInfo(merge_->output()).absoluteFilePath() != QFileInfo(dbPath_).absoluteFilePath())
        openDatabase(merge_->output(), OpenMode::MustExist);
      Q_EMIT mergeFinished(true, summary);
    });
  }
  log(tr("Merging %n database(s) into %1…", nullptr, static_cast<int>(inputs.size())).arg(out));
  tasks_->setActivity(QStringLiteral("merge"), tr("Merging databases…"), -1, true, 60);
  return merge_->start(inputs, out);
}

void MainWindow::chooseNewDatabase() {
  const QString path = QFileDialog::getSaveFileName(
      this, tr("New Shardscope database"), dbPath_.isEmpty() ? QString() : QFileInfo(dbPath_).absolutePath(),
      tr("Shardscope databases (*.db);;All files (*)"), nullptr, QFileDialog::DontConfirmOverwrite);
  if (path.isEmpty()) return;
  if (QFileInfo::exists(path)) {
    // A database is never truncated: an existing file is opened.
    log(tr("%1 exists: opening it").arg(path));
  }
  openDatabase(path, OpenMode::OpenOrCreate);
}

void MainWindow::chooseDatabase() {
  const QString path = QFileDialog::getOpenFileName(this, tr("Open a Shardscope database"),
                                                    dbPath_.isEmpty() ? QString() : QFileInfo(dbPath_).absolutePath(),
                                                    tr("Shardscope databases (*.db *.sqlite);;All files (*)"));
  if (!path.isEmpty()) openDatabase(path, OpenMode::MustExist);
}

// ------------------------------------------------------------------------------------------------
// A failed read: close, check, reopen

void MainWindow::recoverDatabase(const QString& error) {
  if (recovering() || dbPath_.isEmpty()) return;
  recoverPath_ = dbPath_;
  recoverReadOnly_ = readOnly_;
  recoverRuns_ = selectedRuns();
  recoverPage_ = currentPage() ? currentPage()->pageId() : QString();
  recoverNote_.clear();
  recoverSince_ = QDateTime::currentMSecsSinceEpoch();
  // SQLite's words for SQLITE_CORRUPT name damage the check has not found yet: a process that lost
  // its locks reads a stale view of a healthy file the same way.
  QString what = error;
  what.replace(QLatin1String("database disk image is malformed"),
               QLatin1String("SQLITE_CORRUPT: the pages read did not fit together (a stale view of the file, or damage)"));
  log(tr("Reading %1 failed (%2): closing the app's connections to it, then checking the file").arg(recoverPath_, what));
  // SQLite shares one view of a file among a process's connections: the check and the reopen
  // need all of them closed, the background readers' included (they end when cancelled).
  closeDatabase();
  dbLabel_->setText(tr("Reopening %1…").arg(recoverPath_));
  statusBar()->showMessage(tr("Checking %1…").arg(recoverPath_));
  recoverTimer_->start(0);
}

void MainWindow::continueRecovery() {
  if (!recovering()) return;
  const QString path = recoverPath_;
  const qint64 waited = QDateTime::currentMSecsSinceEpoch() - recoverSince_;
  // Readers of the old view still closing (a cancelled analysis ends at its next check).
  if (core::heldConnections(path.toStdString()) > 0 && waited < 30000) {
    recoverTimer_->start(50);
    return;
  }
  const core::DatabaseHealth health = core::checkDatabase(path.toStdString(), std::chrono::milliseconds(2000));
  const QString said = QString::fromStdString(health.message(path.toStdString()));
  using S = core::DatabaseHealth::State;
  if (health.ok()) {
    const QList<core::RunId> runs = recoverRuns_;
    const QString page = recoverPage_;
    const bool readOnly = recoverReadOnly_;
    recoverPath_.clear();
    if (openDatabase(path, OpenMode::MustExist)) {
      if (readOnly && !readOnly_) log(tr("%1 is writable again").arg(path));
      if (!page.isEmpty()) showPage(page);
      if (!runs.isEmpty()) browser_->selectAfterNextLoad(runs);
      log(tr("%1 reads again: reopened (%2)").arg(path, said));
      statusBar()->showMessage(tr("%1 reads again").arg(path), 5000);
      Q_EMIT databaseRecovered(path, said);
    }
    return;
  }
  if (health.state == S::Malformed || health.state == S::NotADatabase) {
    recoverPath_.clear();
    dbLabel_->setText(tr("No database"));
    showError(said);
    return;
  }
  // Locked, unreadable, missing: said once per state, tried again every 2 s until it reads (or
  // another database is opened).
  if (said != recoverNote_) {
    showError(tr("%1; trying again every 2 s").arg(said), false);
    recoverNote_ = said;
  }
  recoverTimer_->start(2000);
}

bool MainWindow::openDatabase(const QString& path, OpenMode mode) {
  if (path.isEmpty()) {
    showError(tr("No database file given"));
    return false;
  }
  const QFileInfo info(path);
  const QString abs = info.absoluteFilePath();
  if (mode == OpenMode::MustExist && !info.exists()) {
    showError(tr("%1: no such file").arg(abs));
    return false;
  }
  if (info.isDir()) {
    showError(tr("%1: is a directory, not a database file").arg(abs));
    return false;
  }
  // Opening another database ends a recovery; reopening the open one starts from no connection
  // (the old ones would share their view of the file with the new).
  if (recovering() && recoverPath_ != abs) recoverPath_.clear();
  recoverTimer_->stop();
  if (abs == dbPath_) closeDatabase();
  std::unique_ptr<core::TraceStore> store;
  bool readOnly = false;
  QString rwError;
  try {
    store = std::make_unique<core::TraceStore>(abs.toStdString());
  } catch (const std::exception& e) {
    rwError = QString::fromUtf8(e.what());
    if (const auto* dbError = dynamic_cast<const core::DatabaseError*>(&e); dbError && dbError->readFailure()) {
      // Say what the file is, not what one read saw: "malformed" only after quick_check says so.
      const core::DatabaseHealth health = core::checkDatabase(abs.toStdString(), std::chrono::milliseconds(2000));
      if (health.ok()) {
        try {
          store = std::make_unique<core::TraceStore>(abs.toStdString());
        } catch (const std::exception& again) {
          rwError = QString::fromUtf8(again.what());
        }
      } else {
        rwError = QString::fromStdString(health.message(abs.toStdString()));
      }
    }
  }
  if (!store) {
    // A file we may read but not write (another user's, a read-only mount): browse it read-only.
    if (info.exists() && info.isReadable() && !info.isWritable()) {
      try {
        store = std::make_unique<core::TraceStore>(abs.toStdString(), core::Database::Mode::ReadOnly);
        readOnly = true;
        log(tr("%1 is not writable: opened read-only (renaming, tags, deleting and importing are off)").arg(abs));
      } catch (const std::exception&) {
        store.reset();
      }
    }
    if (!store) {
      showError(tr("Cannot open %1: %2").arg(abs, rwError));
      return false;
    }
  }

  closeDatabase();
  store_ = std::move(store);
  readOnly_ = readOnly;
  dbPath_ = abs;
  lastError_.clear();
  // Renames and tags are written from this thread: never freeze the window for long behind another
  // process's write (an import holds the lock for its whole transaction); the message says so.
  store_->setBusyTimeout(std::chrono::milliseconds(3000));
  session_->setDatabase(abs, readOnly_);
  dbLabel_->setText(abs);
  dbLabel_->setToolTip(abs);
  addRecent(abs);
  updateTitle();
  updateActions();
  log(tr("Opened %1").arg(abs));
  // Pages learn about the new database (no run selected yet).
  contextRuns_.clear();
  markPagesStale();
  deliverContext(currentPage(), true);
  browser_->setDatabase(abs, store_.get(), !readOnly_);
  Q_EMIT databaseOpened(abs);
  return true;
}

void MainWindow::closeDatabase() {
  if (!store_ && dbPath_.isEmpty()) return;
  for (auto* p : pages_) cancelPageLoading(p);
  browser_->clear();
  session_->setDatabase(QString());
  contextRuns_.clear();
  store_.reset();
  dbPath_.clear();
  readOnly_ = false;
  dbLabel_->setText(tr("No database"));
  countLabel_->clear();
  markPagesStale();
  deliverContext(currentPage(), true);
  updateTitle();
  updateActions();
  updateTaskUi();
}

void MainWindow::updateTitle() {
  setWindowTitle(dbPath_.isEmpty()
                     ? tr("Shardscope")
                     : tr("%1%2 — Shardscope").arg(QFileInfo(dbPath_).fileName(), readOnly_ ? tr(" (read-only)") : QString()));
}

void MainWindow::updateActions() {
  const bool open = !dbPath_.isEmpty();
  const bool writable = open && !readOnly_;
  const bool hasSelection = !browser_->selectedInView().isEmpty();
  importAction_->setEnabled(writable && !importRunning());
  if (QAction* report = action(QStringLiteral("actionExportReport"))) report->setEnabled(open && !selectedRuns().isEmpty());
  if (QAction* pf = action(QStringLiteral("actionExportPerfetto")))
    pf->setEnabled(open && !selectedRuns().isEmpty() && !exportRunning());
#ifdef SHARDSCOPE_HAVE_LAUNCH
  launchAction_->setEnabled(writable && !launchRunning());
  launchAction_->setToolTip(tr("Launch training runs of the embedded runtime and compare them (Ctrl+R)"));
#else
  launchAction_->setEnabled(false);
  launchAction_->setToolTip(tr("The launch dialog is not part of this build yet (use shardscope-cli compare)"));
#endif
  refreshAction_->setEnabled(open);
  renameAction_->setEnabled(writable && hasSelection);
  tagsAction_->setEnabled(writable && hasSelection);
  deleteAction_->setEnabled(writable && hasSelection);
  baselineAction_->setEnabled(selectedRuns().size() > 1);
}

// ------------------------------------------------------------------------------------------------
// Run list

RunListModel* MainWindow::runModel() const { return browser_->model(); }
QTreeView* MainWindow::runView() const { return browser_->view(); }
QComboBox* MainWindow::groupingCombo() const { return browser_->groupingCombo(); }
void MainWindow::setGrouping(RunListModel::Grouping grouping) { browser_->setGrouping(grouping); }
QList<core::RunId> MainWindow::selectedRuns() const { return browser_->selectedRuns(); }
void MainWindow::selectRuns(const QList<core::RunId>& ids) {
  browser_->selectRuns(ids);
  updateActions();
}
void MainWindow::applySelectionNow() { browser_->applySelectionNow(); }
void MainWindow::makeBaseline(core::RunId id) { browser_->makeBaseline(id); }
bool MainWindow::runsLoading() const { return browser_->runsLoading(); }
void MainWindow::reloadRuns() { browser_->reloadRuns(); }
void MainWindow::deleteRuns(const QList<core::RunId>& ids) { browser_->deleteRuns(ids); }
bool MainWindow::deleting() const { return browser_->deleting(); }
void MainWindow::renameRun(core::RunId id) { browser_->renameRun(id); }
void MainWindow::editTags(core::RunId id) { browser_->editTags(id); }
void MainWindow::setPollInterval(int ms) { browser_->setPollInterval(ms); }
void MainWindow::setAutoSelectLatest(bool on) { browser_->setAutoSelectLatest(on); }
QPlainTextEdit* MainWindow::logView() const { return tasks_->logView(); }
QProgressBar* MainWindow::progressBar() const { return tasks_->progressBar(); }
QPushButton* MainWindow::cancelButton() const { return tasks_->cancelButton(); }

void MainWindow::refresh() {
  if (dbPath_.isEmpty()) return;
  log(tr("Refreshing"));
  session_->invalidateAll();  // F5 asks for fresh figures
  reloadRuns();
  markPagesStale();
  deliverContext(currentPage(), true);
  reloadPage(currentPage());  // a page shown with the same runs keeps them otherwise
}

void MainWindow::onSelectionApplied(const QList<core::RunId>& runs) {
  session_->setRuns(runs);
  contextRuns_ = runs;
  // A run of memory snapshots alone has nothing for the Overview: it opens on its snapshot.
  if (runs.size() == 1 && currentPage() && currentPage()->pageId() == QLatin1String("overview"))
    if (const RunRow* row = browser_->model()->runRow(runs.front()); row && core::isMemorySnapshotRun(row->run))
      showPage(QStringLiteral("memory"));
  markPagesStale();
  deliverContext(currentPage());
  updateActions();
}

void MainWindow::showContextMenu(const QPoint& globalPos) {
  QMenu menu(this);
  menu.addAction(renameAction_);
  menu.addAction(tagsAction_);
  menu.addAction(baselineAction_);
  menu.addSeparator();
  menu.addAction(deleteAction_);
  menu.exec(globalPos);
}

bool MainWindow::confirm(const QString& question) {
  if (!interactive_ || !isVisible()) return autoConfirm_;
  return QMessageBox::question(this, tr("Shardscope"), question, QMessageBox::Yes | QMessageBox::No, QMessageBox::No) ==
         QMessageBox::Yes;
}

// ------------------------------------------------------------------------------------------------
// Pages

std::vector<std::pair<QString, QString>> MainWindow::shortcutList() const {
  std::vector<std::pair<QString, QString>> out;
  for (QAction* menuAction : menuBar()->actions()) {
    QMenu* menu = menuAction->menu();
    if (!menu) continue;
    const QString menuName = menuAction->text().remove(QLatin1Char('&'));
    for (QAction* a : menu->actions()) {
      if (a->isSeparator() || a->shortcut().isEmpty()) continue;
      QString text = a->text().remove(QLatin1Char('&'));
      text.remove(QChar(0x2026));  // "…"
      out.emplace_back(a->shortcut().toString(QKeySequence::NativeText), menuName + QStringLiteral(" \u25b8 ") + text);
    }
  }
  return out;
}

QStringList MainWindow::documentationCandidates() {
  QStringList dirs;
  dirs << QDir(QCoreApplication::applicationDirPath()).absoluteFilePath(QStringLiteral("../share/doc/shardscope"));
#ifdef SHARDSCOPE_SOURCE_DIR
  dirs << QStringLiteral(SHARDSCOPE_SOURCE_DIR "/docs");
#endif
  for (QString& d : dirs) d = QDir::cleanPath(d);
  return dirs;
}

QString MainWindow::documentationDir() {
  for (const QString& d : documentationCandidates())
    if (QFileInfo::exists(d + QStringLiteral("/METRICS.md"))) return d;
  return {};
}

Page* MainWindow::page(const QString& id) const {
  for (auto* p : pages_)
    if (p->pageId() == id) return p;
  return nullptr;
}

Page* MainWindow::currentPage() const {
  const auto* scroll = qobject_cast<QScrollArea*>(tabs_->currentWidget());
  return scroll ? qobject_cast<Page*>(scroll->widget()) : nullptr;
}

bool MainWindow::showPage(const QString& id) {
  Page* p = page(id);
  if (!p) return false;
  for (int i = 0; i < tabs_->count(); ++i) {
    const auto* scroll = qobject_cast<QScrollArea*>(tabs_->widget(i));
    if (scroll && scroll->widget() == p) {
      tabs_->setCurrentIndex(i);
      return true;
    }
  }
  return false;
}

std::optional<QList<core::RunId>> MainWindow::pageContextRuns(const QString& id) const {
  Page* p = page(id);
  const auto it = delivered_.find(p);
  if (!p || it == delivered_.end()) return std::nullopt;
  return it->second.second;
}

void MainWindow::markPagesStale() { delivered_.clear(); }

void MainWindow::deliverContext(Page* p, bool force) {
  if (!p) return;
  const auto it = delivered_.find(p);
  if (!force && it != delivered_.end() && it->second.first == dbPath_ && it->second.second == contextRuns_) return;
  delivered_[p] = {dbPath_, contextRuns_};
  p->setContext(dbPath_, contextRuns_);
  Q_EMIT contextDelivered(p->pageId(), contextRuns_);
  updateTaskUi();
}

void MainWindow::onCurrentPageChanged(int index) {
  if (index >= 0 && index < pageActions_.size()) pageActions_[index]->setChecked(true);
  if (Page* p = currentPage()) tasks_->setPreferredSlot(p->pageId());
  deliverContext(currentPage());
  updateTaskUi();
}

void MainWindow::onJumpToEvent(core::RunId runId, core::Id eventId, qint64 startNs, qint64 endNs) {
  Page* timeline = page(QStringLiteral("timeline"));
  if (!timeline) return;
  showPage(QStringLiteral("timeline"));
  if (auto* t = qobject_cast<TimelinePage*>(timeline)) t->showEvent(qint64(runId.value()), eventId, startNs, endNs);
  log(tr("Jump to event %1 of run %2 (%3 ns)").arg(eventId).arg(runId.value()).arg(startNs));
}

bool MainWindow::busy() const {
  if (runsLoading() || importRunning() || launchRunning() || deleting() || browser_->selectionPending()) return true;
  const Page* p = currentPage();
  return p && p->busy();
}

// ------------------------------------------------------------------------------------------------
// Import, launch, drag and drop

void MainWindow::chooseTraces() {
  if (dbPath_.isEmpty()) {
    showError(tr("Open or create a database first (File ▸ Open)"));
    return;
  }
  const QStringList files =
      QFileDialog::getOpenFileNames(this, tr("Import traces (one run: all ranks of a job) or memory snapshots"), QString(),
                                    tr("Traces and memory snapshots (*.json *.json.gz *.pickle *.pickle.gz);;"
                                       "Kineto traces (*.json *.json.gz *.pt.trace.json);;"
                                       "PyTorch memory snapshots (*.pickle *.pickle.gz);;All files (*)"));
  if (!files.isEmpty()) importTraces(files);
}

bool MainWindow::importRunning() const { return import_->isRunning(); }

void MainWindow::choosePerfettoExport() {
  const core::RunId run = browser_->currentRun();
  if (dbPath_.isEmpty() || !run) {
    showError(tr("Export to Perfetto: open a database and select a run first"), false);
    return;
  }
  QString name = QStringLiteral("run%1").arg(run.value());
  if (const auto* r = runModel()->runRow(run))
    name = QString::fromStdString(r->run.name) + QStringLiteral("_%1").arg(run.value());
  name.replace(QRegularExpression(QStringLiteral("[^A-Za-z0-9._-]")), QStringLiteral("_"));
  const QString path =
      QFileDialog::getSaveFileName(this, tr("Export run %1 to Perfetto").arg(run.value()),
                                   QFileInfo(dbPath_).absoluteDir().filePath(name + QStringLiteral(".perfetto.json.gz")),
                                   tr("Perfetto / Chrome trace (*.json.gz *.json)"));
  if (!path.isEmpty()) exportPerfetto(run, path);
}

bool MainWindow::exportRunning() const { return session_->tasks()->busy(QStringLiteral("export")); }

bool MainWindow::exportPerfetto(core::RunId run, const QString& path) {
  if (dbPath_.isEmpty() || !run || path.isEmpty()) return false;
  if (exportRunning()) {
    showError(tr("An export is already running: cancel it or wait for it to finish"), false);
    return false;
  }
  const std::string out = path.toStdString();
  log(tr("Exporting run %1 to %2…").arg(run.value()).arg(path));
  session_->run<core::ExportResult>(
      this, QStringLiteral("export"), tr("Exporting run %1 to Perfetto").arg(run.value()),
      [run, out](core::TraceStore& store, RunCache&, core::CancelToken& cancel, const core::ProgressFn& progress) {
        core::ExportOptions o;
        o.progress = progress;
        o.cancel = &cancel;
        return core::exportPerfetto(store, run, out, o);
      },
      [this, path](core::ExportResult r) {
        const QString msg = tr("Wrote %1: %2 events, %3 bytes; open it in ui.perfetto.dev")
                                .arg(path)
                                .arg(static_cast<qulonglong>(r.events))
                                .arg(static_cast<qulonglong>(r.bytes));
        log(msg);
        statusBar()->showMessage(msg, 10000);
        updateActions();
        Q_EMIT exportFinished(true, path);
      },
      [this, path](QString error) {
        showError(tr("Export to %1 failed: %2").arg(path, error));
        updateActions();
        Q_EMIT exportFinished(false, error);
      });
  updateActions();
  return true;
}

bool MainWindow::importTraces(const QStringList& paths) {
  if (dbPath_.isEmpty()) {
    showError(tr("Open or create a database first, then import traces into it"));
    return false;
  }
  if (readOnly_) {
    showError(tr("%1 is open read-only: traces cannot be imported into it").arg(dbPath_));
    return false;
  }
  QString error;
  const QString cli = findShardscopeCli();
  if (!import_->start(cli, dbPath_, paths, &error)) {
    showError(tr("Cannot import: %1").arg(error));
    return false;
  }
  log(tr("Importing %n path(s) with %1: %2", nullptr, static_cast<int>(paths.size())).arg(cli, paths.join(QStringLiteral(", "))));
  updateActions();
  updateTaskUi();
  return true;
}

bool MainWindow::isDatabaseFile(const QString& path) {
  const QFileInfo info(path);
  if (!info.isFile()) return false;
  // A database the app holds is one, and must not be opened outside SQLite (open_guard.h).
  if (core::isHeldDatabaseFile(path.toStdString())) return true;
  // SQLite's file header; a trace (JSON, gzip, xz) never starts with it.
  QFile f(path);
  if (f.open(QIODevice::ReadOnly) && f.read(16) == QByteArray("SQLite format 3\0", 16)) return true;
  return info.size() == 0 && info.suffix().compare(QLatin1String("db"), Qt::CaseInsensitive) == 0;
}

void MainWindow::handleDroppedUrls(const QList<QUrl>& urls) {
  QStringList paths, databases;
  for (const auto& u : urls)
    if (u.isLocalFile()) (isDatabaseFile(u.toLocalFile()) ? databases : paths) << u.toLocalFile();
  if (paths.isEmpty() && databases.isEmpty()) {
    showError(tr("Only local databases, trace files or folders can be dropped"));
    return;
  }
  // A database dropped on the window is opened (the first of several); traces dropped with it are
  // imported into it.
  if (!databases.isEmpty()) {
    if (databases.size() > 1) log(tr("Several databases dropped: opening %1").arg(databases.first()));
    if (!openDatabase(databases.first(), OpenMode::MustExist)) return;
  }
  if (!paths.isEmpty()) importTraces(paths);
}

bool MainWindow::openLastDatabase() {
  if (recent_.isEmpty() || !QFileInfo(recent_.first()).isFile()) return false;
  return openDatabase(recent_.first(), OpenMode::MustExist);
}

void MainWindow::dragEnterEvent(QDragEnterEvent* event) {
  const auto* mime = event->mimeData();
  if (mime && mime->hasUrls()) {
    for (const auto& u : mime->urls())
      if (u.isLocalFile()) {
        event->acceptProposedAction();
        return;
      }
  }
  QMainWindow::dragEnterEvent(event);
}

void MainWindow::dropEvent(QDropEvent* event) {
  const auto* mime = event->mimeData();
  if (!mime || !mime->hasUrls()) {
    QMainWindow::dropEvent(event);
    return;
  }
  event->acceptProposedAction();
  const QList<QUrl> urls = mime->urls();
  // Start the import after the drop returns (the drag source waits for it).
  QTimer::singleShot(0, this, [this, urls] { handleDroppedUrls(urls); });
}

void MainWindow::setUpLaunch() {
#ifdef SHARDSCOPE_HAVE_LAUNCH
  runController_ = new RunController(this);
  static_cast<LaunchProgressWidget*>(launchProgress_)->setController(runController_);
  connect(runController_, &RunController::started, this, [this](const QStringList&) {
    launchDock_->show();
    launchDock_->raise();
    updateTaskUi();
  });
  connect(runController_, &RunController::strategyStarted, this, [this](int, const QString& name) {
    log(tr("Launch: %1 started").arg(name));
    updateTaskUi();
  });
  connect(runController_, &RunController::stepProgress, this, [this] { updateTaskUi(); });
  connect(runController_, &RunController::strategyFinished, this, [this](int, const QString& name, qint64 runId) {
    log(tr("Launch: %1 done (run %2)").arg(name).arg(runId));
    reloadRuns();  // the run is complete: the browser shows it at once (the watch would in 2 s)
  });
  connect(runController_, &RunController::logLine, this, [this](const QString& line, bool isError) {
    log(QStringLiteral("launch: ") + line, isError && line.startsWith(QLatin1String("error")));
  });
  connect(runController_, &RunController::finished, this, [this](int) {
    const QList<qint64> ids = runController_->runIds();
    log(tr("Launch finished: runs %1").arg([&] {
      QStringList s;
      for (auto id : ids) s << QString::number(id);
      return s.join(QStringLiteral(", "));
    }()));
    if (runController_->databasePath() == dbPath_ && !ids.isEmpty()) {
      // Side by side: select the new runs (the first strategy is the baseline; after a "try it", the
      // run it changed) and compare them.
      QList<core::RunId> select(ids.begin(), ids.end());
      if (tryBaseline_) select.prepend(tryBaseline_);
      browser_->selectAfterNextLoad(select);
      if (select.size() > 1) showPage(QStringLiteral("compare"));
      reloadRuns();
    }
    tryBaseline_ = core::RunId{};
    updateTaskUi();
    Q_EMIT launchEnded(true, ids);
  });
  connect(runController_, &RunController::cancelled, this, [this](int) {
    tryBaseline_ = core::RunId{};
    statusBar()->showMessage(tr("Comparison cancelled: its ranks were stopped"), 10000);
    reloadRuns();
    updateTaskUi();
    Q_EMIT launchEnded(false, runController_->runIds());
  });
  connect(runController_, &RunController::failed, this, [this](int, const QString& error) {
    tryBaseline_ = core::RunId{};
    showError(tr("Launch failed: %1").arg(error));
    reloadRuns();
    updateTaskUi();
    Q_EMIT launchEnded(false, runController_->runIds());
  });
#endif
}

bool MainWindow::launchRunning() const {
#ifdef SHARDSCOPE_HAVE_LAUNCH
  return runController_ && runController_->isRunning();
#else
  return false;
#endif
}

bool MainWindow::launchComparison(const core::RunConfig& base, const QStringList& strategies, const QString& name, int repeats) {
  if (dbPath_.isEmpty()) {
    showError(tr("Open or create a database first: launched runs are stored in it"));
    return false;
  }
  if (readOnly_) {
    showError(tr("%1 is open read-only: runs cannot be launched into it").arg(dbPath_));
    return false;
  }
#ifdef SHARDSCOPE_HAVE_LAUNCH
  if (launchRunning()) {
    showError(tr("A comparison is already running: cancel it or wait for it to finish"));
    return false;
  }
  const bool ok = runController_->start(dbPath_, base, strategies, name, repeats);  // failures arrive through failed()
  updateActions();
  updateTaskUi();
  return ok;
#else
  (void)base;
  (void)strategies;
  (void)name;
  (void)repeats;
  showError(tr("The launch code is not part of this build: use shardscope-cli compare --db %1").arg(dbPath_));
  return false;
#endif
}

bool MainWindow::tryChange(core::RunId runId, const core::KnobChange& change) {
  if (dbPath_.isEmpty() || !runId || change.empty()) return false;
  core::RunConfig cfg;
  std::string name;
  try {
    // The run as the browser holds it (its stored configuration included): no read on the GUI thread.
    const RunRow* row = browser_->model()->runRow(runId);
    const core::Run* run = row ? &row->run : nullptr;
    if (!run) throw core::Error(dbPath_.toStdString() + ": no run with id " + std::to_string(runId.value()));
    if (run->source == core::RunSource::Kineto)
      throw core::Error("run " + std::to_string(runId.value()) + " is an imported trace: it has no configuration to change");
    const std::string label = "run " + std::to_string(runId.value());
    std::vector<std::string> warnings;
    cfg = core::withChange(core::parseRunConfigJson(core::parseJson(run->configJson, label), label, &warnings), change);
    name = run->name + " · " + change.text();
  } catch (const std::exception& e) {
    showError(tr("Try it: %1").arg(QString::fromStdString(e.what())));
    return false;
  }
  log(tr("Try it: run %1 with %2").arg(runId.value()).arg(QString::fromStdString(change.text())));
  if (!launchComparison(cfg, {QString::fromStdString(std::string(core::toString(cfg.strategy)))}, QString::fromStdString(name),
                        1))
    return false;
  tryBaseline_ = runId;
  return true;
}

void MainWindow::launchRuns() {
#ifdef SHARDSCOPE_HAVE_LAUNCH
  if (dbPath_.isEmpty()) {
    showError(tr("Open or create a database first: launched runs are stored in it"));
    return;
  }
  if (launchRunning()) {
    launchDock_->show();
    launchDock_->raise();
    showError(tr("A comparison is already running: cancel it or wait for it to finish"));
    return;
  }
  auto* dialog = new LaunchDialog(this);
  dialog->setAttribute(Qt::WA_DeleteOnClose);
  dialog->restoreSettings();  // what was launched last time
  dialog->setDatabasePath(dbPath_);
  connect(dialog, &QDialog::accepted, this, [this, dialog] {
    dialog->saveSettings();
    log(tr("Launching: %1").arg(dialog->commandLine()));
    launchComparison(dialog->config(), dialog->strategies(), dialog->runName(), dialog->repeats());
  });
  dialog->open();
#else
  showError(tr("The launch dialog is not part of this build yet: use shardscope-cli compare --db %1").arg(dbPath_));
#endif
}

void MainWindow::cancelCurrentTask() {
  const QString key = tasks_->shownKey();
  if (!key.isEmpty()) onCancelRequested(key);
}

void MainWindow::onCancelRequested(const QString& key) {
  if (key == QLatin1String("merge") && mergeRunning()) {
    log(tr("Cancelling the merge…"));
    merge_->cancel();
    return;
  }
  if (key == QLatin1String("import") && importRunning()) {
    log(tr("Cancelling the import…"));
    import_->cancel();
    return;
  }
#ifdef SHARDSCOPE_HAVE_LAUNCH
  if (key == QLatin1String("launch") && launchRunning()) {
    log(tr("Cancelling the comparison: stopping its ranks…"));
    runController_->cancel();
    return;
  }
#endif
  if (key == QLatin1String("task:export")) {
    session_->tasks()->cancel(QStringLiteral("export"));
    log(tr("Export cancelled (nothing is left of the file)"));
    updateActions();
    Q_EMIT exportFinished(false, tr("cancelled"));
    return;
  }
  if (key.startsWith(QLatin1String("task:"))) {
    // A page's work in the session's runner: the page cancels it (and says so where it shows).
    const QString slot = key.mid(5);
    const QString pageId = slot.section(QLatin1Char('.'), 0, 0);
    Page* p = page(pageId);
    if (p && cancelPageLoading(p)) log(tr("%1: loading cancelled").arg(p->title()));
    session_->tasks()->cancel(slot);  // whatever the page did not
    delivered_.erase(p);              // load again when shown next
  }
  updateTaskUi();
}

void MainWindow::about() {
  // Non-modal and reused: a second Help > About raises the open one.
  if (auto* open = findChild<AboutDialog*>(); open && open->isVisible()) {
    open->raise();
    open->activateWindow();
    return;
  }
  auto* dialog = new AboutDialog(this);
  dialog->setAttribute(Qt::WA_DeleteOnClose);
  dialog->show();
  log(versionLines().join(QStringLiteral("; ")));
}

// ------------------------------------------------------------------------------------------------
// Log, errors, progress

void MainWindow::log(const QString& text, bool error) { tasks_->log(text, error); }

void MainWindow::showError(const QString& message, bool popup) {
  lastError_ = message;
  errors_ << message;
  log(message, true);
  statusBar()->showMessage(message, 15000);
  Q_EMIT errorReported(message);
  if (popup && interactive_ && isVisible() && !messageBox_) {
    auto* box = new QMessageBox(QMessageBox::Warning, tr("Shardscope"), message, QMessageBox::Ok, this);
    box->setAttribute(Qt::WA_DeleteOnClose);
    messageBox_ = box;
    box->open();  // not exec(): the window keeps running
  }
}

void MainWindow::updateTaskUi() {
  // What is not the session's: the import, the launch, deleting, the run list. The task centre shows
  // the most important of these and of the session's tasks (the current page's first).
  if (importRunning())
    tasks_->setActivity(QStringLiteral("import"), tr("Importing %n path(s)…", nullptr, static_cast<int>(import_->paths().size())),
                        -1, true, kImportPriority);
  else
    tasks_->clearActivity(QStringLiteral("import"));
#ifdef SHARDSCOPE_HAVE_LAUNCH
  if (launchRunning()) {
    // Overall: finished strategies plus the current one's share of its steps.
    const auto& states = runController_->strategies();
    const int cur = runController_->currentStrategy();
    double done = 0;
    for (const auto& st : states) {
      if (st.status == RunController::Status::Done)
        done += 1;
      else if (st.steps > 0)
        done += static_cast<double>(st.step) / st.steps;
    }
    QString what = tr("starting");
    if (cur >= 0 && cur < states.size()) {
      const auto& st = states[cur];
      what = st.steps > 0
                 ? tr("%1 step %2 of %3 (%4 of %5)").arg(st.name).arg(st.step).arg(st.steps).arg(cur + 1).arg(states.size())
                 : tr("%1 starting (%2 of %3)").arg(st.name).arg(cur + 1).arg(states.size());
    }
    const int pct = done <= 0 || states.isEmpty() ? -1 : static_cast<int>(100.0 * done / static_cast<double>(states.size()));
    tasks_->setActivity(QStringLiteral("launch"), tr("Comparing: %1").arg(what), pct, true, kLaunchPriority);
  } else {
    tasks_->clearActivity(QStringLiteral("launch"));
  }
#endif
  tasks_->setIdleFull(!dbPath_.isEmpty());
}

}  // namespace shardscope::ui
