#pragma once
// The live view of a running comparison (for the main window's dock or a dialog): a progress bar per
// strategy (rank 0's step of steps) and one for the whole comparison, loss and step time per step
// as they arrive (QCustomPlot, one colour per strategy), the state, and Cancel (RunController::cancel:
// the CLI stops its ranks).
#include <QList>
#include <QPointer>
#include <QWidget>

class QCustomPlot;
class QGridLayout;
class QLabel;
class QProgressBar;
class QPushButton;
class QTimer;

namespace shardscope::ui {

class RunController;

class LaunchProgressWidget : public QWidget {
  Q_OBJECT

 public:
  explicit LaunchProgressWidget(QWidget* parent = nullptr);

  // The controller whose comparison is shown (not owned). Shows its current state at once.
  void setController(RunController* controller);
  RunController* controller() const { return controller_; }

  // For tests and screenshots.
  QProgressBar* overallBar() const { return overall_; }
  QProgressBar* strategyBar(int index) const;
  QLabel* strategyStatus(int index) const;
  QCustomPlot* lossPlot() const { return lossPlot_; }
  QCustomPlot* stepTimePlot() const { return timePlot_; }
  QPushButton* cancelButton() const { return cancel_; }
  QLabel* stateLabel() const { return state_; }

 private:
  struct Row {
    QLabel* name = nullptr;
    QProgressBar* bar = nullptr;
    QLabel* status = nullptr;
  };
  void rebuild();  // rows and graphs for the controller's strategies
  void refresh();  // bars, labels and button from the controller's state
  void addPoint(int index, int step, double loss, double stepMs);
  void replotSoon();

  QPointer<RunController> controller_;
  QList<QMetaObject::Connection> connections_;
  QList<Row> rows_;
  QLabel* title_ = nullptr;
  QLabel* state_ = nullptr;
  QPushButton* cancel_ = nullptr;
  QProgressBar* overall_ = nullptr;
  QWidget* rowsBox_ = nullptr;
  QGridLayout* rowsGrid_ = nullptr;
  QCustomPlot* lossPlot_ = nullptr;
  QCustomPlot* timePlot_ = nullptr;
  QLabel* message_ = nullptr;
  QTimer* tick_ = nullptr;
  QTimer* replot_ = nullptr;
  enum class Outcome { None, Finished, Cancelled, Failed } outcome_ = Outcome::None;
};

}  // namespace shardscope::ui
