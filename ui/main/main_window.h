#pragma once
// The application's main window. For now: open a database and show its runs; the pages (overview,
// compare, timeline, memory, communication, estimator) arrive with their issues.
#include <QMainWindow>

#include <memory>

class QLabel;
class QTreeWidget;

namespace shardscope::core {
class TraceStore;
}

namespace shardscope::ui {

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  explicit MainWindow(QWidget* parent = nullptr);
  ~MainWindow() override;

  // Opens (or creates) a database; returns false and shows the error in the window on failure.
  bool openDatabase(const QString& path);
  QString databasePath() const { return dbPath_; }
  QTreeWidget* runList() const { return runs_; }
  QString lastError() const { return lastError_; }

 private:
  void chooseDatabase();
  void refreshRuns();
  void showError(const QString& message);

  std::unique_ptr<core::TraceStore> store_;
  QString dbPath_;
  QString lastError_;
  QTreeWidget* runs_ = nullptr;
  QLabel* dbLabel_ = nullptr;
};

}  // namespace shardscope::ui
