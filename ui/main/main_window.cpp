#include "ui/main/main_window.h"

#include <QAction>
#include <QFileDialog>
#include <QHeaderView>
#include <QKeySequence>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QStatusBar>
#include <QTreeWidget>

#include "core/storage/trace_store.h"
#include "core/util/error.h"

namespace shardscope::ui {

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
  setWindowTitle(QStringLiteral("Shardscope"));
  resize(1280, 800);

  runs_ = new QTreeWidget(this);
  runs_->setColumnCount(6);
  runs_->setHeaderLabels({tr("Run"), tr("Source"), tr("Strategy"), tr("Status"), tr("World size"), tr("Events")});
  runs_->header()->setStretchLastSection(false);
  runs_->setRootIsDecorated(false);
  runs_->setSortingEnabled(true);
  setCentralWidget(runs_);

  auto* file = menuBar()->addMenu(tr("&File"));
  auto* open = file->addAction(tr("&Open Database…"), this, &MainWindow::chooseDatabase);
  open->setShortcut(QKeySequence::Open);
  file->addSeparator();
  auto* quit = file->addAction(tr("&Quit"), this, &QWidget::close);
  quit->setShortcut(QKeySequence::Quit);

  dbLabel_ = new QLabel(tr("No database"), this);
  statusBar()->addPermanentWidget(dbLabel_);
}

MainWindow::~MainWindow() = default;

void MainWindow::chooseDatabase() {
  const QString path = QFileDialog::getSaveFileName(this, tr("Open or create a Shardscope database"), dbPath_,
                                                    tr("Shardscope databases (*.db);;All files (*)"), nullptr,
                                                    QFileDialog::DontConfirmOverwrite);
  if (!path.isEmpty()) openDatabase(path);
}

bool MainWindow::openDatabase(const QString& path) {
  try {
    auto store = std::make_unique<core::TraceStore>(path.toStdString());
    store_ = std::move(store);
    dbPath_ = path;
    dbLabel_->setText(path);
    lastError_.clear();
    refreshRuns();
    return true;
  } catch (const core::Error& e) {
    showError(QString::fromStdString(e.what()));
    return false;
  }
}

void MainWindow::refreshRuns() {
  runs_->clear();
  if (!store_) return;
  for (const auto& run : store_->runs()) {
    const auto summary = store_->summary(run.id);
    auto* item = new QTreeWidgetItem(runs_);
    item->setText(0, QStringLiteral("%1  %2").arg(run.id).arg(QString::fromStdString(run.name)));
    item->setText(1, QString::fromUtf8(core::toString(run.source).data()));
    item->setText(2, QString::fromStdString(run.strategy));
    item->setText(3, QString::fromUtf8(core::toString(run.status).data()));
    item->setData(4, Qt::DisplayRole, run.worldSize);
    item->setData(5, Qt::DisplayRole, static_cast<qlonglong>(summary.eventCount));
    item->setData(0, Qt::UserRole, static_cast<qlonglong>(run.id));
  }
  statusBar()->showMessage(tr("%n run(s)", nullptr, runs_->topLevelItemCount()), 5000);
}

void MainWindow::showError(const QString& message) {
  lastError_ = message;
  statusBar()->showMessage(message);
  if (isVisible()) QMessageBox::warning(this, tr("Shardscope"), message);
}

}  // namespace shardscope::ui
