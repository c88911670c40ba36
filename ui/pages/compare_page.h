#pragma once
// Compare page: the selected runs side by side. core::compareRuns runs off the GUI thread. On top, the
// strategy table (StrategyTableModel over core's: a row per run with strategy, precision, LoRA, peak
// memory per GPU, init time, tokens/s, communication shares, checkpoint save time, parameters and
// skipped steps; n/a cells say why in their tooltip); below, the comparison table
// (ComparisonModel) shows every figure with deltas against the baseline run (chosen in a combo; the
// browser's first selected run by default) and the best run per row; bar charts show step time,
// throughput, peak memory and exposed communication per run with the best bar highlighted. When two
// of the runs have PyTorch memory snapshots (issue #18), a section compares them (core's
// compareSnapshots of each run's largest snapshot peak, the first such run as A): peak active, peak
// reserved and fragmentation side by side with their deltas, and the allocation groups that grew
// (SnapshotGrowthModel).
#include <QList>
#include <QPointer>
#include <QString>

#include <optional>
#include <vector>

#include "core/analysis/comparison.h"
#include "core/analysis/memory_snapshot_analysis.h"

namespace shardscope::core {
struct Report;
}
#include "ui/pages/page.h"

class QComboBox;
class QGroupBox;
class QTableWidget;
class QLabel;
class QSplitter;
class QTableView;
class QToolButton;

namespace shardscope::ui {

class BackgroundTask;
class ComparisonModel;
class SnapshotGrowthModel;
class StrategyTableModel;
namespace charts {
class BarChart;
class StackedBarChart;
}  // namespace charts

class ComparePage : public Page {
  Q_OBJECT

 public:
  explicit ComparePage(QWidget* parent = nullptr);
  ~ComparePage() override;

  QString pageId() const override { return QStringLiteral("compare"); }
  QString title() const override { return tr("Compare"); }
  void setContext(const QString& dbPath, const QList<core::RunId>& runs) override;
  bool busy() const override;
  QJsonObject describe() const override;

  // Loads the comparison again (e.g. after runs were added to the database).
  void reload();
  // Stops a running comparison; the table keeps what it showed before.
  void cancelLoad();
  // Makes the i-th selected run the baseline (as the combo does).
  void setBaselineIndex(int index);
  // The table as CSV (what Copy puts on the clipboard).
  QString csv() const;
  void copyCsv();

  // For tests and screenshots.
  ComparisonModel* model() const { return model_; }
  QTableView* table() const { return table_; }
  // The strategy table (core's, one row per run) above the comparison.
  StrategyTableModel* strategyModel() const { return strategyModel_; }
  QTableView* strategyTable() const { return strategyTable_; }
  QComboBox* baselineCombo() const { return baseline_; }
  const std::vector<charts::BarChart*>& charts() const { return charts_; }
  // Where each run's mean step goes: compute, exposed communication, other device work, idle (ms).
  charts::StackedBarChart* breakdownChart() const { return breakdown_; }
  QString noteText() const;
  // How the figures were measured (core::describeStepTime per run; one line when all runs agree).
  QString measuredText() const;
  // The configuration keys that differ between the runs (core's configDiff), as shown.
  QString configDiffText() const;
  QString errorText() const { return error_; }
  // The verdict (core's recommendation sentences, plain text; "" when none) and the run it names.
  QString recommendationText() const;
  core::RunId recommendedRun() const { return recommendedRun_; }
  // The memory-snapshot comparison (none unless two runs have snapshots) and its widgets.
  const std::optional<core::SnapshotComparison>& snapshotComparison() const { return snapshotComparison_; }
  QGroupBox* snapshotBox() const { return snapshotBox_; }
  QTableWidget* snapshotFiguresTable() const { return snapshotFigures_; }
  SnapshotGrowthModel* snapshotGrowthModel() const { return growthModel_; }

 private:
  void start();
  void setBusy(bool busy);
  void showComparison(core::Comparison comparison);
  void showRecommendation(const core::Report& report);
  void showSnapshots(const core::Report& report);
  void showError(const QString& message);
  void updateNote();
  void updateCharts();
  void showContextMenu(const QPoint& pos);
  void fitTable();
  void fitStrategyTable();

 protected:
  void showEvent(QShowEvent* event) override;

 private:
  QString dbPath_;
  QList<core::RunId> runs_;
  bool loaded_ = false;
  QString error_;
  QPointer<BackgroundTask> task_;
  unsigned generation_ = 0;

  ComparisonModel* model_ = nullptr;
  StrategyTableModel* strategyModel_ = nullptr;
  QTableView* strategyTable_ = nullptr;
  QComboBox* baseline_ = nullptr;
  QToolButton* copyButton_ = nullptr;
  QLabel* note_ = nullptr;
  QLabel* measured_ = nullptr;
  QLabel* configDiff_ = nullptr;
  QLabel* recommendation_ = nullptr;
  QString recommendationPlain_;
  core::RunId recommendedRun_;
  QLabel* errorLabel_ = nullptr;
  QSplitter* splitter_ = nullptr;
  QTableView* table_ = nullptr;
  QWidget* chartPanel_ = nullptr;
  std::vector<charts::BarChart*> charts_;
  charts::StackedBarChart* breakdown_ = nullptr;
  std::optional<core::SnapshotComparison> snapshotComparison_;
  QGroupBox* snapshotBox_ = nullptr;
  QLabel* snapshotNote_ = nullptr;
  QTableWidget* snapshotFigures_ = nullptr;
  SnapshotGrowthModel* growthModel_ = nullptr;
  QTableView* growthTable_ = nullptr;
};

}  // namespace shardscope::ui
