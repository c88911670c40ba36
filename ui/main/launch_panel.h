#pragma once
// The progress of a comparison launched from the app (Launch Runs…): one row per strategy with its
// step progress bar and state, and live charts of the loss and the step time per strategy (rank 0's
// reports). Fed by the main window from RunController's signals; knows nothing about processes.
#include <QList>
#include <QString>
#include <QStringList>
#include <QVector>
#include <QWidget>

class QCustomPlot;
class QLabel;
class QProgressBar;
class QGridLayout;

namespace shardscope::ui {

class LaunchPanel : public QWidget {
  Q_OBJECT

 public:
  explicit LaunchPanel(QWidget* parent = nullptr);

  void start(const QStringList& strategies, const QString& commandLine);
  void strategyStarted(int index);
  void stepProgress(int index, int step, int steps, double loss, double stepMs);
  void strategyFinished(int index, qint64 runId);
  // "finished", "cancelled" or "failed: <reason>": strategies still running or queued take it.
  void ended(const QString& outcome, bool ok);

  // For tests and the dock's progress bar.
  int strategyCount() const { return static_cast<int>(rows_.size()); }
  QString stateText(int index) const;
  int stepOf(int index) const;
  int stepsOf(int index) const;
  int overallPercent() const;  // over all strategies, -1 before any step
  QString currentText() const;  // "fsdp: step 5 of 20 (2 of 3)"
  int pointCount(int index) const;  // loss points plotted for a strategy
  QCustomPlot* lossPlot() const { return loss_; }
  QCustomPlot* stepTimePlot() const { return stepTime_; }

 private:
  struct Row {
    QString name;
    QLabel* label = nullptr;
    QProgressBar* bar = nullptr;
    QLabel* state = nullptr;
    int step = 0;
    int steps = 0;
    bool done = false;
    QVector<double> x, loss, ms;
  };
  void replot();
  void setState(Row& r, const QString& text, const QString& color = {});

  QLabel* command_ = nullptr;
  QWidget* rowsBox_ = nullptr;
  QGridLayout* grid_ = nullptr;
  QCustomPlot* loss_ = nullptr;
  QCustomPlot* stepTime_ = nullptr;
  QList<Row> rows_;
  int current_ = -1;
};

}  // namespace shardscope::ui
