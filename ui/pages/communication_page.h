#pragma once
// The Communication page (pageId "communication"): for one run (the baseline of the selection, or the
// one picked in the run combo) the collectives table (sortable, filterable by text, operation and
// group), the overlap and exposed communication per step (QCustomPlot: stacked bars of exposed and
// overlapped communication, a line of overlap %, per rank or the mean over ranks), and the costliest
// exposed all-gathers / reduce-scatters with their reasons and suggestions. Double-clicking a
// bottleneck asks the main window to show it in the timeline (jumpToEvent).
//
// Everything is computed by core::analyzeRun in a BackgroundTask (own read-only store, cancel).
#include <QList>
#include <QStringList>
#include <QPointer>
#include <QString>

#include <optional>
#include <vector>

#include "core/analysis/comparison.h"
#include "core/analysis/step_breakdown.h"
#include "core/analysis/stragglers.h"
#include "ui/models/bottleneck_model.h"
#include "ui/models/collectives_model.h"
#include "ui/pages/page.h"

class QComboBox;
class QCustomPlot;
class QLabel;
class QLineEdit;
class QPushButton;
class QStackedWidget;
class QTableView;
class QTableWidget;
class QTextBrowser;

namespace shardscope::ui {

class BackgroundTask;

class CommunicationPage : public Page {
  Q_OBJECT

 public:
  explicit CommunicationPage(QWidget* parent = nullptr);
  ~CommunicationPage() override;

  QString pageId() const override { return QStringLiteral("communication"); }
  QString title() const override { return tr("Communication"); }
  void setContext(const QString& dbPath, const QList<core::RunId>& runs) override;
  bool busy() const override { return !task_.isNull(); }
  QJsonObject describe() const override;

  // The run shown (0: none) and choosing another of the selection.
  core::RunId currentRun() const { return runId_; }
  void showRun(core::RunId runId);

  // One point of the per-step chart for the current rank choice.
  struct StepPoint {
    std::int64_t step = -1;
    double exposedMs = 0;
    double overlappedMs = 0;
    std::optional<double> overlapPct;  // undefined without communication in that step
  };
  // -1: the mean over ranks; else a rank number.
  void setChartRank(int rank);
  int chartRank() const { return chartRank_; }
  const std::vector<StepPoint>& chartSeries() const { return series_; }
  const std::vector<core::StepBreakdown>& stepRows() const { return steps_; }

  // Emits jumpToEvent for a bottleneck row (what a double-click does).
  void activateBottleneck(int row);

  // For tests and the screenshot mode.
  CollectivesModel* collectivesModel() const { return collectives_; }
  CollectivesFilterProxy* collectivesProxy() const { return proxy_; }
  BottleneckModel* bottleneckModel() const { return bottlenecks_; }
  QTableView* collectivesView() const { return collView_; }
  QTableView* bottleneckView() const { return bnView_; }
  QCustomPlot* stepChart() const { return chart_; }
  QComboBox* runCombo() const { return runCombo_; }
  QComboBox* rankCombo() const { return rankCombo_; }
  QComboBox* operationCombo() const { return opCombo_; }
  QComboBox* groupCombo() const { return groupCombo_; }
  QLineEdit* filterEdit() const { return filter_; }
  QTextBrowser* detailsView() const { return details_; }
  // "Try it: <change>": visible when the selected bottleneck's first suggestion is a change of the
  // run's configuration (core::Bottleneck::tryIt); clicking emits tryChange.
  QPushButton* tryButton() const { return tryButton_; }
  QString lastError() const { return lastError_; }
  // The selected runs side by side (two or more runs): core::compareCollectives as shown.
  QTableWidget* runsTable() const;
  // Arrival at collectives (core::StragglerReport): per rank, then per collective group.
  QTableWidget* arrivalsTable() const { return arrivals_; }
  QString arrivalsNote() const;
  QSortFilterProxyModel* bottleneckProxy() const;
  const std::optional<core::CollectiveComparison>& runsCompared() const { return runsCompared_; }

 private:
  void showRunsCompared();
  void showArrivals();
  struct Loaded;
  void load();
  void cancelTask();
  void setBusy(bool busy);
  void showPlaceholder(const QString& text);
  void apply(Loaded loaded);
  void rebuildFilters();
  void rebuildChart();
  void showDetails();
  int sourceRowOfBottleneck(const QModelIndex& viewIndex) const;

  QString dbPath_;
  QList<core::RunId> runs_;
  core::RunId runId_;
  QPointer<BackgroundTask> task_;
  QString lastError_;
  int chartRank_ = -1;
  std::vector<core::StepBreakdown> steps_;
  std::optional<core::CollectiveComparison> runsCompared_;
  QStringList runLabels_;
  QWidget* runsPanel_ = nullptr;
  QLabel* runsNote_ = nullptr;
  QTableWidget* runsTable_ = nullptr;
  std::vector<StepPoint> series_;

  CollectivesModel* collectives_ = nullptr;
  CollectivesFilterProxy* proxy_ = nullptr;
  BottleneckModel* bottlenecks_ = nullptr;
  CollectivesFilterProxy* bnProxy_ = nullptr;  // the page's filters apply to the bottlenecks too
  QTableWidget* arrivals_ = nullptr;
  QLabel* arrivalsNote_ = nullptr;
  core::StragglerReport stragglers_;

  QStackedWidget* stack_ = nullptr;
  QLabel* placeholder_ = nullptr;
  QComboBox* runCombo_ = nullptr;
  QLabel* runInfo_ = nullptr;
  QLineEdit* filter_ = nullptr;
  QComboBox* opCombo_ = nullptr;
  QComboBox* groupCombo_ = nullptr;
  QLabel* collCount_ = nullptr;
  QTableView* collView_ = nullptr;
  QComboBox* rankCombo_ = nullptr;
  QCustomPlot* chart_ = nullptr;
  QLabel* chartNote_ = nullptr;
  QTableView* bnView_ = nullptr;
  QTextBrowser* details_ = nullptr;
  QPushButton* jumpButton_ = nullptr;
  QPushButton* tryButton_ = nullptr;  // the selected bottleneck's "try it" (its KnobChange)
  QLabel* bnCount_ = nullptr;
};

}  // namespace shardscope::ui
