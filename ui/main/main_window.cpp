#include "ui/main/main_window.h"

#include <QAction>
#include <QActionGroup>
#include <QApplication>
#include <QCloseEvent>
#include <QComboBox>
#include <QDateTime>
#include <QDockWidget>
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
#include <QSettings>
#include <QSplitter>
#include <QStatusBar>
#include <QStyle>
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

#include "core/storage/trace_store.h"
#include "core/util/error.h"
#include "ui/common/background.h"
#include "ui/main/import_process.h"
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

constexpr int kMaxRecent = 8;
constexpr int kDefaultPollMs = 1000;  // cheap: one pragma while nothing changes
constexpr int kSelectionDebounceMs = 150;

QString settingsKey(const char* k) { return QString::fromLatin1(k); }

}  // namespace

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
  setObjectName(QStringLiteral("MainWindow"));
  const QString platform = QGuiApplication::platformName();
  interactive_ = platform != QLatin1String("offscreen") && platform != QLatin1String("minimal");
  resize(1400, 900);
  setAcceptDrops(true);

  model_ = new RunListModel(this);
  import_ = new ImportProcess(this);
  buildUi();
  buildActions();
  setUpLaunch();

  pollTimer_ = new QTimer(this);
  pollTimer_->setInterval(kDefaultPollMs);
  connect(pollTimer_, &QTimer::timeout, this, &MainWindow::poll);
  selectionTimer_ = new QTimer(this);
  selectionTimer_->setSingleShot(true);
  selectionTimer_->setInterval(kSelectionDebounceMs);
  connect(selectionTimer_, &QTimer::timeout, this, &MainWindow::applySelectionNow);

  connect(model_, &RunListModel::errorOccurred, this, [this](const QString& m) { showError(m); });
  connect(model_, &RunListModel::runRenamed, this, [this](core::Id id, const QString& name) {
    log(tr("Run %1 renamed to \"%2\"").arg(id).arg(name));
    // Pages show names: tell those that show this run.
    if (contextRuns_.contains(id)) {
      markPagesStale();
      deliverContext(currentPage(), true);
    }
  });
  connect(import_, &ImportProcess::output, this, [this](const QString& line, bool isError) {
    log(QStringLiteral("import: ") + line, isError && line.startsWith(QLatin1String("error")));
  });
  connect(import_, &ImportProcess::finished, this, [this](bool ok, bool cancelled, const QString& message, const QList<qint64>& ids) {
    if (ok) {
      log(tr("Import finished: %1").arg(message));
      statusBar()->showMessage(message, 10000);
      if (import_->dbPath() == dbPath_) {
        if (!ids.isEmpty()) pendingSelection_ = QList<core::Id>(ids.begin(), ids.end());
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
  pollTimer_->stop();
  for (QThread* t : deleteThreads_) {
    t->disconnect(this);
    t->wait();  // a deletion is one transaction: let it end rather than kill it
    delete t;
  }
  for (auto* p : pages_) cancelPageLoading(p);
  if (runsTask_) runsTask_->cancel();
}

// ------------------------------------------------------------------------------------------------
// Widgets

void MainWindow::buildUi() {
  splitter_ = new QSplitter(Qt::Horizontal, this);
  splitter_->setObjectName(QStringLiteral("mainSplitter"));

  auto* browser = new QWidget(splitter_);
  auto* bl = new QVBoxLayout(browser);
  bl->setContentsMargins(4, 4, 0, 4);
  auto* top = new QHBoxLayout;
  auto* groupLabel = new QLabel(tr("Group by"), browser);
  groupCombo_ = new QComboBox(browser);
  groupCombo_->setObjectName(QStringLiteral("groupingCombo"));
  groupCombo_->addItem(tr("Source"), QVariant::fromValue(static_cast<int>(RunListModel::Grouping::Source)));
  groupCombo_->addItem(tr("Strategy"), QVariant::fromValue(static_cast<int>(RunListModel::Grouping::Strategy)));
  groupCombo_->addItem(tr("Status"), QVariant::fromValue(static_cast<int>(RunListModel::Grouping::Status)));
  groupCombo_->addItem(tr("None"), QVariant::fromValue(static_cast<int>(RunListModel::Grouping::None)));
  groupLabel->setBuddy(groupCombo_);
  top->addWidget(groupLabel);
  top->addWidget(groupCombo_, 1);
  bl->addLayout(top);

  runView_ = new QTreeView(browser);
  runView_->setObjectName(QStringLiteral("runView"));
  runView_->setModel(model_);
  runView_->setSelectionMode(QAbstractItemView::ExtendedSelection);
  runView_->setSelectionBehavior(QAbstractItemView::SelectRows);
  runView_->setEditTriggers(QAbstractItemView::EditKeyPressed);
  runView_->setAlternatingRowColors(true);
  runView_->setUniformRowHeights(true);
  runView_->setAllColumnsShowFocus(true);
  runView_->setContextMenuPolicy(Qt::CustomContextMenu);
  runView_->header()->setStretchLastSection(true);
  runView_->header()->resizeSection(RunListModel::NameColumn, 150);
  runView_->header()->resizeSection(RunListModel::StrategyColumn, 64);
  runView_->header()->resizeSection(RunListModel::StatusColumn, 76);
  runView_->header()->resizeSection(RunListModel::WorldSizeColumn, 44);
  runView_->header()->resizeSection(RunListModel::EventsColumn, 70);
  runView_->header()->resizeSection(RunListModel::CreatedColumn, 116);
  bl->addWidget(runView_, 1);
  selectionLabel_ = new QLabel(browser);
  selectionLabel_->setWordWrap(true);
  selectionLabel_->setStyleSheet(QStringLiteral("color: palette(mid);"));
  bl->addWidget(selectionLabel_);

  tabs_ = new QTabWidget(splitter_);
  tabs_->setObjectName(QStringLiteral("pageTabs"));
  tabs_->setDocumentMode(true);
  pages_ = createPages(tabs_);
  for (auto* p : pages_) {
    tabs_->addTab(p, p->title());
    connect(p, &Page::statusMessage, this, [this, p](const QString& text) {
      log(QStringLiteral("%1: %2").arg(p->title(), text));
      statusBar()->showMessage(text, 8000);
    });
    connect(p, &Page::errorMessage, this, [this](const QString& text) { showError(text, false); });
    connect(p, &Page::progress, this, [this, p](int percent, const QString& stage) {
      pageProgress_[p] = {percent, stage};
      updateTaskUi();
    });
    connect(p, &Page::busyChanged, this, [this, p](bool b) {
      if (!b) pageProgress_.erase(p);
      updateTaskUi();
    });
    connect(p, &Page::jumpToEvent, this, &MainWindow::onJumpToEvent);
    // Simulations stored from the Estimator page are runs: list them.
    if (auto* ep = qobject_cast<EstimatorPage*>(p)) connect(ep, &EstimatorPage::runsAdded, this, &MainWindow::reloadRuns);
  }
  splitter_->addWidget(browser);
  splitter_->addWidget(tabs_);
  splitter_->setStretchFactor(0, 0);
  splitter_->setStretchFactor(1, 1);
  splitter_->setSizes({500, 1100});
  setCentralWidget(splitter_);

  // Log and progress dock.
  dock_ = new QDockWidget(tr("Log"), this);
  dock_->setObjectName(QStringLiteral("logDock"));
  auto* dockBody = new QWidget(dock_);
  auto* dl = new QVBoxLayout(dockBody);
  dl->setContentsMargins(4, 2, 4, 4);
  auto* taskRow = new QHBoxLayout;
  taskLabel_ = new QLabel(tr("Ready"), dockBody);
  taskLabel_->setMinimumWidth(200);
  progressBar_ = new QProgressBar(dockBody);
  progressBar_->setObjectName(QStringLiteral("taskProgress"));
  progressBar_->setMaximumHeight(18);
  cancelButton_ = new QPushButton(tr("Cancel"), dockBody);
  cancelButton_->setObjectName(QStringLiteral("taskCancel"));
  connect(cancelButton_, &QPushButton::clicked, this, &MainWindow::cancelCurrentTask);
  taskRow->addWidget(taskLabel_, 1);
  taskRow->addWidget(progressBar_, 2);
  taskRow->addWidget(cancelButton_);
  dl->addLayout(taskRow);
  log_ = new QPlainTextEdit(dockBody);
  log_->setObjectName(QStringLiteral("logView"));
  log_->setReadOnly(true);
  log_->setAcceptDrops(false);
  log_->setMaximumBlockCount(5000);
  log_->setPlaceholderText(tr("Messages, import output and errors appear here."));
  dl->addWidget(log_, 1);
  dock_->setWidget(dockBody);
  addDockWidget(Qt::BottomDockWidgetArea, dock_);
  resizeDocks({dock_}, {150}, Qt::Vertical);

#ifdef SHARDSCOPE_HAVE_LAUNCH
  // The comparison launched from the app: per-strategy progress, live loss and step time, Cancel.
  launchDock_ = new QDockWidget(tr("Launch"), this);
  launchDock_->setObjectName(QStringLiteral("launchDock"));
  auto* progressWidget = new LaunchProgressWidget(launchDock_);
  launchProgress_ = progressWidget;
  launchDock_->setWidget(progressWidget);
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

  connect(groupCombo_, &QComboBox::currentIndexChanged, this, [this](int i) {
    setGrouping(static_cast<RunListModel::Grouping>(groupCombo_->itemData(i).toInt()));
  });
  connect(runView_->selectionModel(), &QItemSelectionModel::selectionChanged, this, &MainWindow::onSelectionChanged);
  connect(runView_, &QTreeView::customContextMenuRequested, this, &MainWindow::showContextMenu);
  connect(runView_, &QTreeView::collapsed, this, [this](const QModelIndex& i) {
    const QString key = i.data(RunListModel::GroupKeyRole).toString();
    if (!collapsedGroups_.contains(key)) collapsedGroups_ << key;
  });
  connect(runView_, &QTreeView::expanded, this,
          [this](const QModelIndex& i) { collapsedGroups_.removeAll(i.data(RunListModel::GroupKeyRole).toString()); });
  connect(model_, &QAbstractItemModel::rowsInserted, this, [this](const QModelIndex& parent) {
    if (!parent.isValid()) expandGroups();
  });
  connect(model_, &QAbstractItemModel::modelReset, this, [this] {
    expandGroups();
    restoreSelection(contextRuns_);
  });
  connect(tabs_, &QTabWidget::currentChanged, this, &MainWindow::onCurrentPageChanged);
}

void MainWindow::buildActions() {
  auto* style = QApplication::style();
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
  open->setIcon(style->standardIcon(QStyle::SP_DialogOpenButton));
  open->setToolTip(tr("Open a Shardscope database (Ctrl+O)"));
  connect(open, &QAction::triggered, this, &MainWindow::chooseDatabase);
  file->addAction(newDb);
  file->addAction(open);
  recentMenu_ = file->addMenu(tr("Recent &Files"));
  recentMenu_->setObjectName(QStringLiteral("recentMenu"));
  file->addSeparator();
  importAction_ = make(QStringLiteral("actionImport"), tr("&Import Traces…"), QKeySequence(Qt::CTRL | Qt::Key_I));
  importAction_->setIcon(style->standardIcon(QStyle::SP_FileDialogNewFolder));
  importAction_->setToolTip(tr("Import torch.profiler (Kineto) traces: one run per job (Ctrl+I); or drop files on the window"));
  connect(importAction_, &QAction::triggered, this, &MainWindow::chooseTraces);
  file->addAction(importAction_);
  launchAction_ = make(QStringLiteral("actionLaunch"), tr("&Launch Runs…"), QKeySequence(Qt::CTRL | Qt::Key_R));
  launchAction_->setIcon(style->standardIcon(QStyle::SP_MediaPlay));
  connect(launchAction_, &QAction::triggered, this, &MainWindow::launchRuns);
  file->addAction(launchAction_);
  // Reports (ui/report/export_dialog): the selected runs, the first as the baseline.
  auto* reportAction = make(QStringLiteral("actionExportReport"), tr("Export &Report…"));
  reportAction->setToolTip(tr("A report of the selected runs (one run, or a comparison) as HTML, PDF, Markdown or CSV"));
  connect(reportAction, &QAction::triggered, this, [this] {
    if (dbPath_.isEmpty() || selectionOrder_.isEmpty()) {
      showError(tr("Export Report: open a database and select one or more runs first"), false);
      return;
    }
    auto* dialog = new ExportReportDialog(dbPath_, selectionOrder_, this);
    dialog->setAttribute(Qt::WA_DeleteOnClose);
    connect(dialog, &ExportReportDialog::exported, this, [this](const QString& path) { log(tr("Report written to %1").arg(path)); });
    dialog->open();
  });
  file->addAction(reportAction);
  file->addSeparator();
  auto* quit = make(QStringLiteral("actionQuit"), tr("&Quit"), QKeySequence::Quit);
  connect(quit, &QAction::triggered, this, &QWidget::close);
  file->addAction(quit);

  // Run
  auto* runMenu = menuBar()->addMenu(tr("&Run"));
  renameAction_ = make(QStringLiteral("actionRename"), tr("&Rename"), QKeySequence(Qt::Key_F2));
  renameAction_->setShortcutContext(Qt::WidgetWithChildrenShortcut);
  connect(renameAction_, &QAction::triggered, this, [this] { renameRun(currentRun()); });
  tagsAction_ = make(QStringLiteral("actionTags"), tr("Edit &Tags"), QKeySequence(Qt::CTRL | Qt::Key_T));
  connect(tagsAction_, &QAction::triggered, this, [this] { editTags(currentRun()); });
  baselineAction_ = make(QStringLiteral("actionBaseline"), tr("Use as &Baseline"), QKeySequence(Qt::CTRL | Qt::Key_B));
  connect(baselineAction_, &QAction::triggered, this, [this] { makeBaseline(currentRun()); });
  deleteAction_ = make(QStringLiteral("actionDelete"), tr("&Delete…"), QKeySequence::Delete);
  deleteAction_->setShortcutContext(Qt::WidgetWithChildrenShortcut);
  connect(deleteAction_, &QAction::triggered, this, [this] { deleteRuns(selectedInView()); });
  runView_->addAction(renameAction_);
  runView_->addAction(deleteAction_);
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
    a->setCheckable(true);
    a->setActionGroup(pageGroup);
    connect(a, &QAction::triggered, this, [this, i] { tabs_->setCurrentIndex(i); });
    view->addAction(a);
    pageActions_ << a;
  }
  if (!pageActions_.isEmpty()) pageActions_.first()->setChecked(true);
  view->addSeparator();
  refreshAction_ = make(QStringLiteral("actionRefresh"), tr("&Refresh"), QKeySequence(Qt::Key_F5));
  refreshAction_->setIcon(style->standardIcon(QStyle::SP_BrowserReload));
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
  auto* aboutAction = make(QStringLiteral("actionAbout"), tr("&About Shardscope"));
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
  if (s.contains(settingsKey("runs/header"))) runView_->header()->restoreState(s.value(settingsKey("runs/header")).toByteArray());
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
  s.setValue(settingsKey("runs/header"), runView_->header()->saveState());
  s.setValue(settingsKey("window/lastPage"), currentPage() ? currentPage()->pageId() : QString());
  s.setValue(settingsKey("recentFiles"), recent_);
  s.setValue(settingsKey("runs/grouping"), RunListModel::groupingName(model_->grouping()));
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
  pollTimer_->stop();
  for (auto* p : pages_) cancelPageLoading(p);
  event->accept();
}

// ------------------------------------------------------------------------------------------------
// Database

void MainWindow::chooseNewDatabase() {
  const QString path = QFileDialog::getSaveFileName(this, tr("New Shardscope database"),
                                                    dbPath_.isEmpty() ? QString() : QFileInfo(dbPath_).absolutePath(),
                                                    tr("Shardscope databases (*.db);;All files (*)"), nullptr,
                                                    QFileDialog::DontConfirmOverwrite);
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
  std::unique_ptr<core::TraceStore> store;
  bool readOnly = false;
  try {
    store = std::make_unique<core::TraceStore>(abs.toStdString());
  } catch (const std::exception& e) {
    const QString rwError = QString::fromUtf8(e.what());
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
  model_->setStore(readOnly_ ? nullptr : store_.get());
  firstLoad_ = true;
  fingerprint_.reset();
  dataVersion_.reset();
  runsError_.clear();
  // Renames and tags are written from this thread: never freeze the window for long behind another
  // process's write (an import holds the lock for its whole transaction); the message says so.
  store_->db().setBusyTimeout(std::chrono::milliseconds(3000));
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
  reloadRuns();
  pollTimer_->start();
  Q_EMIT databaseOpened(abs);
  return true;
}

void MainWindow::closeDatabase() {
  if (!store_ && dbPath_.isEmpty()) return;
  pollTimer_->stop();
  if (runsTask_) runsTask_->cancel();
  runsTask_ = nullptr;
  ++runsGeneration_;
  reloadAgain_ = false;
  for (auto* p : pages_) cancelPageLoading(p);
  {
    const QSignalBlocker block(runView_->selectionModel());
    runView_->selectionModel()->clear();
  }
  selectionOrder_.clear();
  contextRuns_.clear();
  model_->setStore(nullptr);
  model_->clear();
  store_.reset();
  dbPath_.clear();
  readOnly_ = false;
  fingerprint_.reset();
  dataVersion_.reset();
  runsError_.clear();
  dbLabel_->setText(tr("No database"));
  countLabel_->clear();
  markPagesStale();
  deliverContext(currentPage(), true);
  updateTitle();
  updateActions();
}

void MainWindow::updateTitle() {
  setWindowTitle(dbPath_.isEmpty() ? tr("Shardscope")
                                   : tr("%1%2 — Shardscope").arg(QFileInfo(dbPath_).fileName(), readOnly_ ? tr(" (read-only)") : QString()));
}

void MainWindow::updateActions() {
  const bool open = !dbPath_.isEmpty();
  const bool writable = open && !readOnly_;
  const bool hasSelection = !selectedInView().isEmpty();
  importAction_->setEnabled(writable && !importRunning());
  if (QAction* report = action(QStringLiteral("actionExportReport"))) report->setEnabled(open && !selectionOrder_.isEmpty());
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
  baselineAction_->setEnabled(selectionOrder_.size() > 1);
}

// ------------------------------------------------------------------------------------------------
// Run list

void MainWindow::setPollInterval(int ms) { pollTimer_->setInterval(ms); }

bool MainWindow::runsLoading() const { return !runsTask_.isNull(); }

void MainWindow::reloadRuns() {
  if (dbPath_.isEmpty()) return;
  if (runsTask_) {
    reloadAgain_ = true;  // one more once this one is in
    return;
  }
  const int gen = ++runsGeneration_;
  using Loaded = std::pair<RunsFingerprint, std::vector<RunRow>>;
  runsTask_ = BackgroundTask::start<Loaded>(
      this, dbPath_,
      [](core::TraceStore& s, core::CancelToken&, const core::ProgressFn&) {
        // The fingerprint before the rows: a run written in between is in the rows and makes the next
        // poll see a change (reloading once more), never the other way round (a run never shown).
        RunsFingerprint f = runsFingerprint(s);
        return Loaded{f, loadRunRows(s)};
      },
      [this, gen](Loaded loaded) { onRunsLoaded(std::move(loaded.second), gen, loaded.first); },
      [this, gen](QString error) {
        if (gen != runsGeneration_) return;
        runsTask_ = nullptr;
        // The watch tries again at every poll: one message for one problem, not one every poll.
        const QString msg = tr("Cannot read the runs of %1: %2").arg(dbPath_, error);
        if (msg != runsError_) showError(msg);
        runsError_ = msg;
        updateTaskUi();
      });
  updateTaskUi();
}

void MainWindow::onRunsLoaded(std::vector<RunRow> rows, int generation, const RunsFingerprint& fingerprint) {
  if (generation != runsGeneration_) return;
  runsTask_ = nullptr;
  if (!runsError_.isEmpty()) {
    log(tr("The runs of %1 can be read again").arg(dbPath_));
    runsError_.clear();
  }
  // Statuses of the runs the pages show: a change (a run finished) makes them reload.
  std::map<core::Id, core::RunStatus> before;
  for (core::Id id : contextRuns_)
    if (const auto* r = model_->runRow(id)) before[id] = r->run.status;

  const QList<core::Id> keep = selectionOrder_;
  restoring_ = true;
  model_->setRuns(std::move(rows));
  restoring_ = false;

  QList<core::Id> want;
  if (pendingSelection_) {
    want = *pendingSelection_;
    // Runs written after this load started come with the next one (reloadAgain_): keep waiting.
    const bool all = std::all_of(want.begin(), want.end(), [this](core::Id id) { return model_->runRow(id) != nullptr; });
    if (all || !reloadAgain_) pendingSelection_.reset();
  } else if (firstLoad_ && autoSelect_) {
    const QList<core::Id> all = model_->runIds();
    if (!all.isEmpty()) want = {*std::max_element(all.begin(), all.end())};
  } else {
    want = keep;
  }
  firstLoad_ = false;
  QList<core::Id> existing;
  for (core::Id id : want)
    if (model_->runRow(id) && !existing.contains(id)) existing << id;
  if (existing != selectedInViewOrdered()) restoreSelection(existing);
  selectionOrder_ = existing;
  if (!runView_->currentIndex().isValid() && !existing.isEmpty()) {
    runView_->selectionModel()->setCurrentIndex(model_->indexOfRun(existing.first()), QItemSelectionModel::NoUpdate);
  }

  bool statusChanged = false;
  for (const auto& [id, status] : before) {
    const auto* r = model_->runRow(id);
    if (r && r->run.status != status) statusChanged = true;
  }
  countLabel_->setText(tr("%n run(s)", nullptr, model_->runCount()));
  if (statusChanged) {
    log(tr("A selected run changed status: reloading the page"));
    markPagesStale();
  }
  applySelectionNow();
  if (statusChanged) deliverContext(currentPage(), true);
  fingerprint_ = fingerprint;
  updateActions();
  updateTaskUi();
  Q_EMIT runsLoaded();
  if (reloadAgain_) {
    reloadAgain_ = false;
    reloadRuns();
  }
}

void MainWindow::poll() {
  if (!store_ || runsTask_) return;
  try {
    // data_version changes when another connection (any process) commits: nothing else to read
    // while it stays the same.
    const std::int64_t dv = store_->db().pragmaInt("data_version");
    if (dataVersion_ && *dataVersion_ == dv && fingerprint_ && runsError_.isEmpty()) return;
    const auto f = runsFingerprint(*store_);
    dataVersion_ = dv;
    lastPollError_.clear();
    if (!fingerprint_ || !(f == *fingerprint_) || f.active > 0 || !runsError_.isEmpty()) reloadRuns();
  } catch (const std::exception& e) {
    const QString msg = tr("Watching %1: %2").arg(dbPath_, QString::fromUtf8(e.what()));
    if (msg != lastPollError_) showError(msg, false);  // once, not every 2 s
    lastPollError_ = msg;
  }
}

void MainWindow::refresh() {
  if (dbPath_.isEmpty()) return;
  log(tr("Refreshing"));
  reloadRuns();
  markPagesStale();
  deliverContext(currentPage(), true);
}

void MainWindow::setGrouping(RunListModel::Grouping grouping) {
  const int i = groupCombo_->findData(static_cast<int>(grouping));
  if (i >= 0 && groupCombo_->currentIndex() != i) {
    groupCombo_->setCurrentIndex(i);  // comes back here through the signal
    return;
  }
  if (model_->grouping() == grouping) return;
  const QList<core::Id> keep = selectionOrder_;
  restoring_ = true;
  model_->setGrouping(grouping);  // a reset: the view forgets its selection
  restoring_ = false;
  restoreSelection(keep);
  selectionOrder_ = keep;
  expandGroups();
}

void MainWindow::expandGroups() {
  if (model_->grouping() == RunListModel::Grouping::None) return;
  for (int g = 0; g < model_->rowCount(); ++g) {
    const QModelIndex i = model_->index(g, 0);
    runView_->setFirstColumnSpanned(g, QModelIndex(), true);  // the group's label uses the whole row
    runView_->setExpanded(i, !collapsedGroups_.contains(i.data(RunListModel::GroupKeyRole).toString()));
  }
}

QList<core::Id> MainWindow::selectedInView() const {
  QList<core::Id> ids;
  for (const auto& i : runView_->selectionModel()->selectedRows(0)) {
    const core::Id id = model_->runId(i);
    if (id) ids << id;
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

QList<core::Id> MainWindow::selectedInViewOrdered() const {
  // The view's selection in selection order (for comparing with a wanted order).
  const QList<core::Id> inView = selectedInView();
  QList<core::Id> out;
  for (core::Id id : selectionOrder_)
    if (inView.contains(id)) out << id;
  for (core::Id id : inView)
    if (!out.contains(id)) out << id;
  return out;
}

core::Id MainWindow::currentRun() const {
  const core::Id cur = model_->runId(runView_->currentIndex());
  if (cur && selectionOrder_.contains(cur)) return cur;
  return selectionOrder_.isEmpty() ? 0 : selectionOrder_.first();
}

void MainWindow::restoreSelection(const QList<core::Id>& ids) {
  auto* sm = runView_->selectionModel();
  const bool old = restoring_;
  restoring_ = true;
  sm->clearSelection();
  for (core::Id id : ids) {
    const QModelIndex i = model_->indexOfRun(id);
    if (i.isValid()) sm->select(i, QItemSelectionModel::Select | QItemSelectionModel::Rows);
  }
  restoring_ = old;
}

void MainWindow::selectRuns(const QList<core::Id>& ids) {
  if (runsLoading()) {
    pendingSelection_ = ids;
    return;
  }
  QList<core::Id> existing;
  for (core::Id id : ids)
    if (model_->runRow(id) && !existing.contains(id)) existing << id;
  restoreSelection(existing);
  selectionOrder_ = existing;
  if (!existing.isEmpty()) {
    const QModelIndex i = model_->indexOfRun(existing.first());
    runView_->selectionModel()->setCurrentIndex(i, QItemSelectionModel::NoUpdate);
    runView_->scrollTo(i);
  }
  updateActions();
  selectionTimer_->start();
}

void MainWindow::onSelectionChanged() {
  if (restoring_) return;
  // Keep the order of selection: drop what is no longer selected, append what is new (view order).
  const QList<core::Id> now = selectedInView();
  QList<core::Id> order;
  for (core::Id id : selectionOrder_)
    if (now.contains(id)) order << id;
  QList<core::Id> added;
  for (const auto& i : runView_->selectionModel()->selectedRows(0)) {
    const core::Id id = model_->runId(i);
    if (id && !order.contains(id) && !added.contains(id)) added << id;
  }
  std::sort(added.begin(), added.end(), [this](core::Id a, core::Id b) {
    const QModelIndex ia = model_->indexOfRun(a), ib = model_->indexOfRun(b);
    const int ga = ia.parent().isValid() ? ia.parent().row() : -1, gb = ib.parent().isValid() ? ib.parent().row() : -1;
    return ga != gb ? ga < gb : ia.row() < ib.row();
  });
  order += added;
  selectionOrder_ = order;
  updateActions();
  selectionTimer_->start();
}

void MainWindow::applySelectionNow() {
  selectionTimer_->stop();
  const QList<core::Id> runs = selectionOrder_;
  QStringList names;
  for (core::Id id : runs)
    if (const auto* r = model_->runRow(id)) names << QString::fromStdString(r->run.name);
  if (runs.isEmpty())
    selectionLabel_->setText(dbPath_.isEmpty() ? tr("Open a database to see its runs.") : tr("No run selected."));
  else if (runs.size() == 1)
    selectionLabel_->setText(tr("Selected: %1").arg(names.value(0)));
  else
    selectionLabel_->setText(tr("%1 runs selected; baseline: %2 (Ctrl+B makes the current run the baseline)")
                                 .arg(runs.size())
                                 .arg(names.value(0)));
  if (runs == contextRuns_) return;
  contextRuns_ = runs;
  markPagesStale();
  deliverContext(currentPage());
}

void MainWindow::makeBaseline(core::Id id) {
  if (!id || !selectionOrder_.contains(id) || selectionOrder_.first() == id) return;
  selectionOrder_.removeAll(id);
  selectionOrder_.prepend(id);
  log(tr("Run %1 is now the baseline").arg(id));
  applySelectionNow();
}

void MainWindow::showContextMenu(const QPoint& pos) {
  const QModelIndex i = runView_->indexAt(pos);
  if (!model_->runId(i)) return;
  QMenu menu(this);
  menu.addAction(renameAction_);
  menu.addAction(tagsAction_);
  menu.addAction(baselineAction_);
  menu.addSeparator();
  menu.addAction(deleteAction_);
  menu.exec(runView_->viewport()->mapToGlobal(pos));
}

void MainWindow::renameRun(core::Id id) {
  const QModelIndex i = model_->indexOfRun(id, RunListModel::NameColumn);
  if (!i.isValid() || !model_->isEditable()) return;
  runView_->setCurrentIndex(i);
  runView_->edit(i);
}

void MainWindow::editTags(core::Id id) {
  const QModelIndex i = model_->indexOfRun(id, RunListModel::TagsColumn);
  if (!i.isValid() || !model_->isEditable()) return;
  runView_->scrollTo(i);
  runView_->edit(i);
}

bool MainWindow::confirm(const QString& question) {
  if (!interactive_ || !isVisible()) return autoConfirm_;
  return QMessageBox::question(this, tr("Shardscope"), question, QMessageBox::Yes | QMessageBox::No, QMessageBox::No) ==
         QMessageBox::Yes;
}

void MainWindow::deleteRuns(const QList<core::Id>& ids) {
  if (ids.isEmpty() || !model_->isEditable()) return;
  QStringList names;
  bool active = false;
  for (core::Id id : ids) {
    if (const auto* r = model_->runRow(id)) {
      names << QStringLiteral("%1 (%2)").arg(QString::fromStdString(r->run.name)).arg(id);
      active = active || r->run.status == core::RunStatus::Running || r->run.status == core::RunStatus::Pending;
    }
  }
  QString question = tr("Delete %n run(s) from %1?\n\n%2\n\nTheir ranks, events, metrics and memory records are removed. "
                        "This cannot be undone.",
                        nullptr, static_cast<int>(ids.size()))
                         .arg(QFileInfo(dbPath_).fileName(), names.join(QStringLiteral("\n")));
  if (active) question += tr("\n\nA run still pending or running is being written by its job: deleting it makes the job fail.");
  if (!confirm(question)) {
    log(tr("Deletion cancelled"));
    return;
  }
  // The pages stop showing the runs about to go.
  QList<core::Id> keep;
  for (core::Id id : selectionOrder_)
    if (!ids.contains(id)) keep << id;
  restoreSelection(keep);
  selectionOrder_ = keep;
  applySelectionNow();

  // Deleting a big run (millions of events, memory records) takes seconds: on a thread with its
  // own connection, never on the GUI thread. The list follows when it is done.
  const QString db = dbPath_;
  const QString what = names.join(QStringLiteral(", "));
  auto error = std::make_shared<QString>();
  auto deleted = std::make_shared<QList<qint64>>();
  QThread* thread = QThread::create([db, ids, error, deleted] {
    try {
      core::TraceStore store(db.toStdString());
      for (core::Id id : ids) {
        store.deleteRun(id);
        *deleted << id;
      }
    } catch (const std::exception& e) {
      *error = QString::fromUtf8(e.what());
    }
  });
  deleteThreads_ << thread;
  connect(thread, &QThread::finished, this, [this, thread, db, what, error, deleted] {
    deleteThreads_.removeAll(thread);
    thread->deleteLater();
    if (error->isEmpty()) {
      log(tr("Deleted %n run(s): %1", nullptr, static_cast<int>(deleted->size())).arg(what));
      statusBar()->showMessage(tr("Deleted %n run(s)", nullptr, static_cast<int>(deleted->size())), 8000);
    } else {
      showError(tr("Cannot delete %1: %2").arg(what, *error));
    }
    if (db == dbPath_) reloadRuns();
    updateTaskUi();
    updateActions();
    Q_EMIT runsDeleted(*deleted);
  });
  thread->start();
  updateActions();
  updateTaskUi();
}

bool MainWindow::deleting() const { return !deleteThreads_.isEmpty(); }

// ------------------------------------------------------------------------------------------------
// Pages

Page* MainWindow::page(const QString& id) const {
  for (auto* p : pages_)
    if (p->pageId() == id) return p;
  return nullptr;
}

Page* MainWindow::currentPage() const { return qobject_cast<Page*>(tabs_->currentWidget()); }

bool MainWindow::showPage(const QString& id) {
  Page* p = page(id);
  if (!p) return false;
  tabs_->setCurrentWidget(p);
  return true;
}

std::optional<QList<core::Id>> MainWindow::pageContextRuns(const QString& id) const {
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
  deliverContext(currentPage());
  updateTaskUi();
}

void MainWindow::onJumpToEvent(core::Id runId, core::Id eventId, qint64 startNs, qint64 endNs) {
  Page* timeline = page(QStringLiteral("timeline"));
  if (!timeline) return;
  showPage(QStringLiteral("timeline"));
  if (auto* t = qobject_cast<TimelinePage*>(timeline)) t->showEvent(runId, eventId, startNs, endNs);
  log(tr("Jump to event %1 of run %2 (%3 ns)").arg(eventId).arg(runId).arg(startNs));
}

bool MainWindow::busy() const {
  if (runsLoading() || importRunning() || launchRunning() || deleting() || selectionTimer_->isActive()) return true;
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
  const QStringList files = QFileDialog::getOpenFileNames(this, tr("Import torch.profiler traces (one run: all ranks of a job)"),
                                                          QString(), tr("Kineto traces (*.json *.json.gz *.pt.trace.json);;All files (*)"));
  if (!files.isEmpty()) importTraces(files);
}

bool MainWindow::importRunning() const { return import_->isRunning(); }

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

void MainWindow::handleDroppedUrls(const QList<QUrl>& urls) {
  QStringList paths;
  for (const auto& u : urls)
    if (u.isLocalFile()) paths << u.toLocalFile();
  if (paths.isEmpty()) {
    showError(tr("Only local trace files or folders can be dropped"));
    return;
  }
  importTraces(paths);
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
      // Side by side: select the new runs (the first strategy is the baseline) and compare them.
      pendingSelection_ = QList<core::Id>(ids.begin(), ids.end());
      if (ids.size() > 1) showPage(QStringLiteral("compare"));
      reloadRuns();
    }
    updateTaskUi();
    Q_EMIT launchEnded(true, ids);
  });
  connect(runController_, &RunController::cancelled, this, [this](int) {
    statusBar()->showMessage(tr("Comparison cancelled: its ranks were stopped"), 10000);
    reloadRuns();
    updateTaskUi();
    Q_EMIT launchEnded(false, runController_->runIds());
  });
  connect(runController_, &RunController::failed, this, [this](int, const QString& error) {
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

bool MainWindow::launchComparison(const QStringList& compareArgs) {
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
  const bool ok = runController_->start(dbPath_, compareArgs);  // failures arrive through failed()
  updateActions();
  updateTaskUi();
  return ok;
#else
  (void)compareArgs;
  showError(tr("The launch code is not part of this build: use shardscope-cli compare --db %1").arg(dbPath_));
  return false;
#endif
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
  dialog->setDatabasePath(dbPath_);
  connect(dialog, &QDialog::accepted, this, [this, dialog] {
    log(tr("Launching: %1").arg(dialog->commandLine()));
    launchComparison(dialog->arguments());
  });
  dialog->open();
#else
  showError(tr("The launch dialog is not part of this build yet: use shardscope-cli compare --db %1").arg(dbPath_));
#endif
}

void MainWindow::cancelCurrentTask() {
  if (importRunning()) {
    log(tr("Cancelling the import…"));
    import_->cancel();
    return;
  }
#ifdef SHARDSCOPE_HAVE_LAUNCH
  if (launchRunning()) {
    log(tr("Cancelling the comparison: stopping its ranks…"));
    runController_->cancel();
    return;
  }
#endif
  Page* p = currentPage();
  if (p && p->busy()) {
    if (cancelPageLoading(p)) log(tr("%1: loading cancelled").arg(p->title()));
    pageProgress_.erase(p);
    delivered_.erase(p);  // load again when shown next
  }
  updateTaskUi();
}

void MainWindow::about() {
  const QString text =
      tr("<h3>Shardscope %1</h3><p>Profiler and strategy explorer for sharded training (DDP, FSDP, ZeRO).</p>"
         "<p>Runs are stored in one SQLite file; traces from torch.profiler (Kineto) are imported, and "
         "<code>shardscope-cli run/compare</code> trains and captures runs of its own.</p>")
          .arg(QStringLiteral(SHARDSCOPE_VERSION));
  if (interactive_)
    QMessageBox::about(this, tr("About Shardscope"), text);
  else
    log(tr("Shardscope %1").arg(QStringLiteral(SHARDSCOPE_VERSION)));
}

// ------------------------------------------------------------------------------------------------
// Log, errors, progress

void MainWindow::log(const QString& text, bool error) {
  const QString time = QDateTime::currentDateTime().toString(QStringLiteral("HH:mm:ss"));
  const QString escaped = text.toHtmlEscaped();
  if (error)
    log_->appendHtml(QStringLiteral("<span style='color:gray'>%1</span> <span style='color:#c62828'>%2</span>").arg(time, escaped));
  else
    log_->appendHtml(QStringLiteral("<span style='color:gray'>%1</span> %2").arg(time, escaped));
}

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
  Page* p = currentPage();
  if (importRunning()) {
    taskLabel_->setText(tr("Importing %n path(s)…", nullptr, static_cast<int>(import_->paths().size())));
    progressBar_->setRange(0, 0);
    cancelButton_->setEnabled(true);
    return;
  }
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
      what = st.steps > 0 ? tr("%1 step %2 of %3 (%4 of %5)").arg(st.name).arg(st.step).arg(st.steps).arg(cur + 1).arg(states.size())
                          : tr("%1 starting (%2 of %3)").arg(st.name).arg(cur + 1).arg(states.size());
    }
    taskLabel_->setText(tr("Comparing: %1").arg(what));
    if (done <= 0 || states.isEmpty()) {
      progressBar_->setRange(0, 0);
    } else {
      progressBar_->setRange(0, 100);
      progressBar_->setValue(static_cast<int>(100.0 * done / static_cast<double>(states.size())));
    }
    cancelButton_->setEnabled(true);
    return;
  }
#endif
  if (p && p->busy()) {
    const auto it = pageProgress_.find(p);
    const int pct = it != pageProgress_.end() ? it->second.first : -1;
    const QString stage = it != pageProgress_.end() && !it->second.second.isEmpty() ? it->second.second : tr("loading");
    taskLabel_->setText(QStringLiteral("%1: %2").arg(p->title(), stage));
    if (pct < 0) {
      progressBar_->setRange(0, 0);
    } else {
      progressBar_->setRange(0, 100);
      progressBar_->setValue(std::clamp(pct, 0, 100));
    }
    cancelButton_->setEnabled(true);
    return;
  }
  if (deleting()) {
    taskLabel_->setText(tr("Deleting runs…"));
    progressBar_->setRange(0, 0);
    cancelButton_->setEnabled(false);
    return;
  }
  if (runsLoading()) {
    taskLabel_->setText(tr("Loading the run list…"));
    progressBar_->setRange(0, 0);
    cancelButton_->setEnabled(false);
    return;
  }
  taskLabel_->setText(tr("Ready"));
  progressBar_->setRange(0, 100);
  progressBar_->setValue(dbPath_.isEmpty() ? 0 : 100);
  cancelButton_->setEnabled(false);
}

}  // namespace shardscope::ui
