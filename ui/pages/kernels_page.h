#pragma once
// The Kernels page (pageId "kernels"): the views users know from HTA and Nsight Systems, for one run
// (the baseline of the selection, or the one picked in the run combo):
//
// * the top kernels (device lanes) and the top CPU operators (cpu_op, by self time) of
//   core::computeTopOps (docs/METRICS.md "Top kernels and operators"), with a column per rank
//   (the rank chooser shows every rank, none, or one) and each rank's total under the title;
// * HTA's per-rank temporal breakdown (compute / non-compute / idle, core::HtaRankFigures) as a
//   stacked bar per rank, and HTA's kernel-type breakdown (core::HtaKernelTypeRow) as bars; both are
//   the session's analysis of the run (RunSession::analysis), the figures `analyze` prints.
//
// One filter box (a name substring) applies to both tables. Loaded off the GUI thread through the
// session; the top tables are cached per run ("top-ops").
#include <QList>
#include <QPointer>
#include <QString>
#include <QStringList>

#include <memory>
#include <vector>

#include "core/analysis/hta_metrics.h"
#include "core/analysis/top_ops.h"
#include "ui/models/top_ops_model.h"
#include "ui/pages/page.h"

class QComboBox;
class QLabel;
class QLineEdit;
class QStackedWidget;
class QTableView;

namespace shardscope::ui {

class BackgroundTask;
namespace charts {
class BarChart;
class StackedBarChart;
}  // namespace charts

class KernelsPage : public Page {
  Q_OBJECT

 public:
  explicit KernelsPage(QWidget* parent = nullptr);
  ~KernelsPage() override;

  QString pageId() const override { return QStringLiteral("kernels"); }
  QString title() const override { return tr("Kernels"); }
  void setContext(const QString& dbPath, const QList<core::RunId>& runs) override;
  bool busy() const override { return !task_.isNull(); }
  QJsonObject describe() const override;

  // The run shown (0: none) and choosing another of the selection.
  core::RunId currentRun() const { return runId_; }
  void showRun(core::RunId runId);

  // The per-rank columns: -1 every rank, -2 none, else that rank number.
  void setRankColumns(int choice);
  int rankColumns() const { return rankChoice_; }
  void setFilterText(const QString& text);

  // The cache key of the top tables in the session's RunCache.
  static constexpr const char* kTopOpsProduct = "top-ops";

  // For tests and the screenshot mode.
  TopOpsModel* kernelsModel() const { return kernels_; }
  TopOpsModel* operatorsModel() const { return operators_; }
  TopOpsFilterProxy* kernelsProxy() const { return kernelsProxy_; }
  TopOpsFilterProxy* operatorsProxy() const { return operatorsProxy_; }
  QTableView* kernelsView() const { return kernelsView_; }
  QTableView* operatorsView() const { return operatorsView_; }
  QComboBox* runCombo() const { return runCombo_; }
  QComboBox* rankCombo() const { return rankCombo_; }
  QLineEdit* filterEdit() const { return filter_; }
  charts::StackedBarChart* temporalChart() const { return temporal_; }
  charts::BarChart* kernelTypeChart() const { return kernelTypes_; }
  const core::HtaFigures& hta() const { return hta_; }
  std::shared_ptr<const core::TopOps> topOps() const { return top_; }
  QString lastError() const { return lastError_; }
  QString kernelsNote() const;
  QString operatorsNote() const;

 public Q_SLOTS:
  void reload();
  void cancelLoad();

 private:
  struct Loaded;
  void load();
  void setBusy(bool busy);
  void showPlaceholder(const QString& text);
  void apply(Loaded loaded);
  void applyRankColumns();
  void rebuildCharts();
  void updateCounts();

  QString dbPath_;
  QList<core::RunId> runs_;
  core::RunId runId_;
  QPointer<BackgroundTask> task_;
  QString lastError_;
  int rankChoice_ = -1;
  bool rankChoiceSet_ = false;  // the user chose; otherwise the default follows the rank count
  std::shared_ptr<const core::TopOps> top_;
  core::HtaFigures hta_;

  TopOpsModel* kernels_ = nullptr;
  TopOpsModel* operators_ = nullptr;
  TopOpsFilterProxy* kernelsProxy_ = nullptr;
  TopOpsFilterProxy* operatorsProxy_ = nullptr;

  QStackedWidget* stack_ = nullptr;
  QLabel* placeholder_ = nullptr;
  QComboBox* runCombo_ = nullptr;
  QLabel* runInfo_ = nullptr;
  QLineEdit* filter_ = nullptr;
  QComboBox* rankCombo_ = nullptr;
  QLabel* kernelsCount_ = nullptr;
  QLabel* kernelsNote_ = nullptr;
  QLabel* operatorsCount_ = nullptr;
  QLabel* operatorsNote_ = nullptr;
  QTableView* kernelsView_ = nullptr;
  QTableView* operatorsView_ = nullptr;
  charts::StackedBarChart* temporal_ = nullptr;
  charts::BarChart* kernelTypes_ = nullptr;
  QLabel* htaNote_ = nullptr;
  QWidget* htaCharts_ = nullptr;
  QWidget* htaSection_ = nullptr;
};

}  // namespace shardscope::ui
