#pragma once
// Estimator page: before renting the GPUs — which strategies fit a model on N devices, how much they
// communicate and how fast they should be (core/estimator, docs/ESTIMATOR.md). Inputs on the left
// (model preset or custom shape, devices, device memory and headroom, precision, batch, sequence,
// checkpointing, offload, links); the charts and the ranking update as they change (the estimate is
// arithmetic: well under a millisecond for 1024 devices, so it runs on the GUI thread). Errors show
// at the form, never as a crash. "Simulate" runs the event-driven step simulation
// (core/estimator/simulator) of every strategy that fits, off the GUI thread with progress and
// cancel, shows simulated against estimated step time, and can store the simulations as runs with
// source `simulated` in the open database (the other pages then show them like measured runs).
#include <QPointer>
#include <QString>

#include <vector>

#include "core/estimator/ranking_check.h"
#include "core/estimator/recommend.h"
#include "ui/pages/page.h"

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTableWidget;

namespace shardscope::ui {

namespace charts {
class BarChart;
class StackedBarChart;
}  // namespace charts
class BackgroundTask;

class EstimatorPage : public Page {
  Q_OBJECT

 public:
  explicit EstimatorPage(QWidget* parent = nullptr);

  QString pageId() const override { return QStringLiteral("estimator"); }
  QString title() const override { return tr("Estimator"); }
  // The estimate does not read the database; simulations are stored into it when asked.
  void setContext(const QString& dbPath, const QList<core::RunId>& runs) override;
  bool busy() const override { return simulating(); }

  // The input the form describes (throws std::invalid_argument with the field's name when invalid).
  core::estimator::RecommendInput input() const;
  // Fills the form from an input (and recomputes). Returns the first field the form cannot show
  // as given (core::estimator::firstInputDifference against input()), empty when it shows it all;
  // that difference is also the page's error.
  QString setInput(const core::estimator::RecommendInput& in);
  // A scenario of core::estimator::scenarios() by name (its input from the options through core's
  // applyEstimatorOptions, the same path as `estimate --scenario`); an empty name or "(none)" only
  // resets the combo. Returns what setInput returns ("unknown scenario" for a bad name).
  QString applyScenario(const QString& name);
  // Recomputes from the form now (also called on every change).
  void recompute();

  const std::vector<core::estimator::StrategyAssessment>& assessments() const { return result_; }
  QString errorText() const;
  // The page JSON: the device and scenario chosen, the summary, every strategy as core serialises it
  // (estimate --json's strategies, to_fit included), the simulation's rows and its ranking notes.
  QJsonObject describe() const override;
  QComboBox* scenarioCombo() const { return scenario_; }
  QComboBox* deviceCombo() const { return device_; }
  QDoubleSpinBox* tflopsSpin() const { return tflops_; }
  QDoubleSpinBox* efficiencySpin() const { return efficiency_; }
  QDoubleSpinBox* memBwSpin() const { return memBw_; }
  QComboBox* precisionCombo() const { return precision_; }
  QSpinBox* microBatchSpin() const { return microBatch_; }
  QCheckBox* offloadOptimizerCheck() const { return offloadOptimizer_; }
  QCheckBox* offloadParamCheck() const { return offloadParam_; }
  QString summaryText() const;
  QComboBox* modelCombo() const { return model_; }
  QComboBox* fineTuningCombo() const { return fineTuning_; }
  QSpinBox* loraRankSpin() const { return loraRank_; }
  QLineEdit* loraTargetsEdit() const { return loraTargets_; }
  QSpinBox* gpusSpin() const { return gpus_; }
  QLineEdit* memoryEdit() const { return memory_; }
  QSpinBox* headsSpin() const { return heads_; }
  QCheckBox* checkpointingCheck() const { return checkpointing_; }
  QTableWidget* rankingTable() const { return table_; }
  charts::StackedBarChart* memoryChart() const { return memoryChart_; }
  charts::BarChart* stepChart() const { return stepChart_; }

  // One simulated strategy (what the simulation table shows).
  struct SimulatedRow {
    core::estimator::Strategy strategy = core::estimator::Strategy::Ddp;
    double estimatedStepS = 0, stepS = 0, computeS = 0, commS = 0, exposedCommS = 0, overlap = 0;
    core::estimator::StepParts estimated;  // the estimate's split of its step
    double slowestRankStepS = 0, tokensPerSPerDevice = 0;
    std::int64_t peakBytes = 0, collectivesPerStep = 0;
    core::RunId runId;  // stored as this run (0: not stored)
    // A prediction from the selected run (core/estimator/prediction.h): the step's interval, what
    // changes from the run, what is extrapolated. Absent in FLOPs mode.
    bool predicted = false;
    double lowS = 0, highS = 0;
    std::string change, intervalBasis;
    std::vector<std::string> extrapolation;
    std::string leftOutNote;  // the calibration run's disturbed steps, left out of its profile
  };
  // Simulates every strategy of the current estimate that fits (progress, cancel; the inputs stay
  // editable, a change marks the result stale), with compute from FLOPs at the estimate's device
  // figures or from the selected run. Stores them when "Store as runs" is checked and a database
  // is open. No-op while one is running.
  void simulate();
  void cancelSimulation();
  bool simulating() const { return !simTask_.isNull(); }
  const std::vector<SimulatedRow>& simulated() const { return simRows_; }
  QPushButton* simulateButton() const { return simulate_; }
  QCheckBox* storeSimulationsCheck() const { return simStore_; }
  // Compute per block, link and jitter from the first selected run of our runtime (what
  // `simulate --profile-run` does), carried to the page's model by FLOPs.
  QCheckBox* profileFromRunCheck() const { return simFromRun_; }
  // Predict even where the run's ranks shared cores or GPUs differently (as simulate
  // --allow-extrapolation); otherwise such a prediction is refused with the reason.
  QCheckBox* allowExtrapolationCheck() const { return simAllowExtrapolation_; }
  QSpinBox* simulationStepsSpin() const { return simSteps_; }
  QTableWidget* simulationTable() const { return simTable_; }
  QString simulationStatus() const;
  // Where the simulation orders two strategies otherwise than the estimate, and why
  // (core::estimator::rankingReversals over the simulated rows).
  const std::vector<core::estimator::RankingReversal>& rankingReversals() const { return reversals_; }
  // Every one of them in words (the status shows the first few; this is its tooltip).
  QString rankingNotes() const;

 Q_SIGNALS:
  void simulationFinished(bool ok);  // ok false: failed or cancelled
  void runsAdded();                  // simulations were stored: the run list should reload

 private:
  void onModelChanged();
  void showResult();
  void showError(const QString& text);
  void showSimulation();
  void markSimulationStale();
  void onDeviceChanged();
  void applyDevice(const std::string& name);  // the preset's figures into the form (filling)

  QComboBox* scenario_ = nullptr;
  QComboBox* device_ = nullptr;  // a device preset or "custom"
  QDoubleSpinBox* tflops_ = nullptr;
  QDoubleSpinBox* efficiency_ = nullptr;
  QDoubleSpinBox* memBw_ = nullptr;
  QDoubleSpinBox* loraAlpha_ = nullptr;
  QComboBox* model_ = nullptr;
  QSpinBox* layers_ = nullptr;
  QSpinBox* hidden_ = nullptr;
  QSpinBox* heads_ = nullptr;
  QSpinBox* kvHeads_ = nullptr;
  QSpinBox* ffn_ = nullptr;
  QSpinBox* vocab_ = nullptr;
  QSpinBox* gpus_ = nullptr;
  QSpinBox* gpusPerNode_ = nullptr;
  QLineEdit* memory_ = nullptr;
  QDoubleSpinBox* headroom_ = nullptr;
  QComboBox* precision_ = nullptr;
  QComboBox* fineTuning_ = nullptr;  // full | LoRA | QLoRA
  QSpinBox* loraRank_ = nullptr;
  QLineEdit* loraTargets_ = nullptr;
  QSpinBox* microBatch_ = nullptr;
  QSpinBox* seqLen_ = nullptr;
  QCheckBox* checkpointing_ = nullptr;
  QCheckBox* offloadOptimizer_ = nullptr;
  QCheckBox* offloadParam_ = nullptr;
  QComboBox* link_ = nullptr;
  QComboBox* interLink_ = nullptr;
  QLabel* error_ = nullptr;
  QLabel* summary_ = nullptr;
  charts::StackedBarChart* memoryChart_ = nullptr;
  charts::BarChart* stepChart_ = nullptr;
  QTableWidget* table_ = nullptr;
  std::vector<core::estimator::StrategyAssessment> result_;
  // Simulation.
  QSpinBox* simSteps_ = nullptr;
  QDoubleSpinBox* simJitter_ = nullptr;
  QCheckBox* simStore_ = nullptr;
  QCheckBox* simFromRun_ = nullptr;
  QCheckBox* simAllowExtrapolation_ = nullptr;
  QPushButton* simulate_ = nullptr;
  QPushButton* simCancel_ = nullptr;
  QProgressBar* simProgress_ = nullptr;
  QLabel* simStatus_ = nullptr;
  QTableWidget* simTable_ = nullptr;
  QPointer<BackgroundTask> simTask_;
  std::vector<SimulatedRow> simRows_;
  std::vector<core::estimator::RankingReversal> reversals_;
  QString dbPath_;
  QList<core::RunId> runs_;
  bool filling_ = false;  // suppresses recomputes while the form is filled programmatically
};

}  // namespace shardscope::ui
