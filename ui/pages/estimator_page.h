#pragma once
// Estimator page: before renting the GPUs — which strategies fit a model on N devices, how much they
// communicate and how fast they should be (core/estimator, docs/ESTIMATOR.md). Inputs on the left
// (model preset or custom shape, devices, device memory and headroom, precision, batch, sequence,
// checkpointing, offload, links); the charts and the ranking update as they change (the estimate is
// arithmetic: well under a millisecond for 1024 devices, so it runs on the GUI thread). Errors show
// at the form, never as a crash.
#include <QString>

#include <vector>

#include "core/estimator/recommend.h"
#include "ui/pages/page.h"

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QSpinBox;
class QTableWidget;

namespace shardscope::ui {

namespace charts {
class BarChart;
class StackedBarChart;
}  // namespace charts

class EstimatorPage : public Page {
  Q_OBJECT

 public:
  explicit EstimatorPage(QWidget* parent = nullptr);

  QString pageId() const override { return QStringLiteral("estimator"); }
  QString title() const override { return tr("Estimator"); }
  // The estimator does not read the database: the context is ignored.
  void setContext(const QString& dbPath, const QList<core::Id>& runs) override;
  bool busy() const override { return false; }

  // The input the form describes (throws std::invalid_argument with the field's name when invalid).
  core::estimator::RecommendInput input() const;
  // Recomputes from the form now (also called on every change).
  void recompute();

  const std::vector<core::estimator::StrategyAssessment>& assessments() const { return result_; }
  QString errorText() const;
  QComboBox* modelCombo() const { return model_; }
  QSpinBox* gpusSpin() const { return gpus_; }
  QLineEdit* memoryEdit() const { return memory_; }
  QSpinBox* headsSpin() const { return heads_; }
  QCheckBox* checkpointingCheck() const { return checkpointing_; }
  QTableWidget* rankingTable() const { return table_; }
  charts::StackedBarChart* memoryChart() const { return memoryChart_; }
  charts::BarChart* stepChart() const { return stepChart_; }

 private:
  void onModelChanged();
  void showResult();
  void showError(const QString& text);

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
  bool filling_ = false;  // suppresses recomputes while the form is filled programmatically
};

}  // namespace shardscope::ui
