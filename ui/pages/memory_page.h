#pragma once
// Memory page: one run's memory over time, a curve per rank (allocated, and reserved on request),
// each rank's peak marked with what caused it, the list of peaks and, for runs of our runtime, the
// breakdown at the peak (stacked bars per rank) and the model-state bytes per rank. Everything is
// read off the GUI thread; the chart keeps the samples and re-buckets them as the user zooms. A run
// with a PyTorch memory snapshot (imported, issue #18) also has the snapshot view (SnapshotView: the
// active and reserved curves of the allocator's trace, the allocations alive at a clicked moment with
// their stacks, the top allocations at the peak), shown by the "Memory snapshot" button, and in place
// of the records' chart when the run has no memory records.
#include <QList>
#include <QPointer>
#include <QString>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "core/analysis/memory_peaks.h"
#include "core/analysis/memory_timeline.h"
#include "core/analysis/run_figures.h"
#include "core/storage/trace_store.h"
#include "core/util/progress.h"
#include "ui/charts/max_pyramid.h"
#include "ui/pages/page.h"

class QCheckBox;
class QComboBox;
class QLabel;
class QStackedWidget;
class QTableView;
class QTableWidget;
class QToolButton;

namespace shardscope::ui {

class BackgroundTask;
class MemoryPeaksModel;
class SnapshotView;
struct SnapshotRunData;
namespace charts {
class MemoryChart;
class StackedBarChart;
}  // namespace charts

// What the page shows of one run, read by loadMemoryRun in a worker thread.
struct MemoryRunData {
  core::Run run;
  std::vector<std::pair<core::RunId, std::string>> runNames;  // the context's runs, for the run selector
  core::TimeNs origin = 0;                                    // run start: 0 ms on the time axis
  core::TimeNs end = 0;
  struct Series {
    int rank = 0;
    int deviceType = 0;
    int deviceId = 0;
    std::shared_ptr<const charts::MaxPyramid> allocated;  // every record: time, total allocated (with its coarser levels)
    std::shared_ptr<const charts::MaxPyramid> reserved;   // where total reserved changes
  };
  std::vector<Series> series;  // by rank, then device in order of first appearance
  std::vector<core::MemoryPeak> peaks;
  struct ModelState {
    int rank = 0;
    std::optional<double> parameters, gradients, optimizer, buffers;  // model_state.*_bytes
  };
  std::vector<ModelState> modelState;  // ranks with at least one model_state metric
  std::uint64_t records = 0;
  // Runtime runs: what each rank's memory held over time, by category (core::memoryCategoryTimelines),
  // and the running sums the chart stacks (cumulative[k]: categories 0..k).
  struct CategoryStack {
    std::shared_ptr<const core::MemoryCategoryTimeline> timeline;
    std::vector<std::shared_ptr<const charts::MaxPyramid>> cumulative;
  };
  std::vector<CategoryStack> categoryStacks;  // by rank, then device
};

// Reads one run's memory records (streamed, one rank at a time), its peaks and model-state metrics.
// `peaks`: the run's memory peaks when at hand (the session's analysis); else computed.
MemoryRunData loadMemoryRun(core::TraceStore& store, core::RunId runId, const std::vector<core::RunId>& contextRuns,
                            const core::CancelToken* cancel = nullptr, const core::ProgressFn& progress = {},
                            const std::vector<core::MemoryPeak>* peaks = nullptr);

// One run of the overlay (several runs selected): its curves, its figures and where it is aligned.
struct MemoryOverlayRun {
  core::RunId id;
  QString label;  // "ddp #7"
  std::shared_ptr<const MemoryRunData> data;
  core::RunFigures figures;
  int peak = -1;                                // into data->peaks: the peak the run figure is about; -1: no memory records
  int series = -1;                              // into data->series: the curve of that peak's rank and device
  core::TimeNs alignNs = 0;                     // drawn as 0 ms: the start of the first counted step on that rank
  std::optional<core::TimeNs> peakStepStartNs;  // the start of the peak's step on that rank
};

class MemoryPage : public Page {
  Q_OBJECT

 public:
  explicit MemoryPage(QWidget* parent = nullptr);
  ~MemoryPage() override;

  QString pageId() const override { return QStringLiteral("memory"); }
  QString title() const override { return tr("Memory"); }
  // One run: its curves per rank. Several runs: their curves overlaid (the run figure's peak rank of
  // each, aligned at its first counted step), or one of them picked in the page's run selector.
  void setContext(const QString& dbPath, const QList<core::RunId>& runs) override;
  bool busy() const override { return !task_.isNull(); }
  QJsonObject describe() const override;
  // The runs overlaid (several selected); showOverlay() goes back to them.
  bool overlay() const { return overlay_; }
  void showOverlay();
  const std::vector<MemoryOverlayRun>& overlayRuns() const { return overlayRuns_; }
  QTableWidget* runPeaksTable() const { return runPeaks_; }

  void reload();
  void cancelLoad();
  // Shows the i-th run of the context.
  void showRun(int index);
  core::RunId currentRun() const { return current_; }

  // For tests and screenshots.
  const MemoryRunData* data() const { return data_.get(); }
  charts::MemoryChart* chart() const { return chart_; }
  charts::StackedBarChart* breakdownChart() const { return breakdown_; }
  MemoryPeaksModel* peaksModel() const { return peaksModel_; }
  QTableView* peaksTable() const { return peaksTable_; }
  QTableWidget* modelStateTable() const { return modelState_; }
  QComboBox* runCombo() const { return runCombo_; }
  QComboBox* deviceCombo() const { return deviceCombo_; }
  QCheckBox* allocatedCheck() const { return allocated_; }
  QCheckBox* reservedCheck() const { return reserved_; }
  // What the chart draws for one run: every rank's total, or one rank's memory by category over
  // time (stacked; runtime runs). showCategories(-1) goes back to every rank.
  QComboBox* viewCombo() const { return viewCombo_; }
  void showCategories(int rank);
  int categoriesRank() const;  // the rank shown by category, -1: every rank's total
  bool breakdownShown() const;
  // Why the peaks are as high as they are (core::explainPeak, explainPeakDifference), as shown under
  // the breakdown.
  QStringList peakExplanations() const { return explanations_; }
  QString messageText() const;  // the note shown instead of the chart ("" when the chart shows)
  QString errorText() const { return error_; }
  // The run's memory snapshots (null: none or not loaded) and their view.
  const SnapshotRunData* snapshotData() const { return snapshot_.get(); }
  SnapshotView* snapshotView() const { return snapshotView_; }
  QToolButton* snapshotButton() const { return snapshotButton_; }
  bool snapshotShown() const;
  void setSnapshotShown(bool shown);

 private:
  using OverlayRun = MemoryOverlayRun;
  void start();
  void startOverlay();
  bool overlayAvailable() const;
  void syncCombo();
  void applyRunNames(const std::vector<std::pair<core::RunId, std::string>>& names);
  void showLoadError(const QString& message);
  void setBusy(bool busy);
  void showData(std::shared_ptr<const MemoryRunData> data, std::shared_ptr<const SnapshotRunData> snapshot);
  void showContent();
  void showOverlayData(std::vector<OverlayRun> runs);
  void showMessage(const QString& text);
  void applyDeviceFilter();
  void applySessionRange();
  void updateBreakdown();
  void updateInfo();
  void showCurves();  // the chart's series for data_: per rank, or the chosen rank by category
  void zoomToPeak(int row);

  QString dbPath_;
  QList<core::RunId> runs_;
  core::RunId current_;
  bool loaded_ = false;
  QString error_;
  QPointer<BackgroundTask> task_;
  unsigned generation_ = 0;
  std::shared_ptr<const MemoryRunData> data_;
  std::shared_ptr<const SnapshotRunData> snapshot_;
  bool overlay_ = false;
  bool rangeFollowed_ = false;
  std::vector<OverlayRun> overlayRuns_;
  QTableWidget* runPeaks_ = nullptr;

  QComboBox* runCombo_ = nullptr;
  QComboBox* deviceCombo_ = nullptr;
  QLabel* deviceLabel_ = nullptr;
  QLabel* viewLabel_ = nullptr;
  QComboBox* viewCombo_ = nullptr;
  QCheckBox* allocated_ = nullptr;
  QCheckBox* reserved_ = nullptr;
  QToolButton* resetZoom_ = nullptr;
  QToolButton* snapshotButton_ = nullptr;
  SnapshotView* snapshotView_ = nullptr;
  QLabel* info_ = nullptr;
  QStackedWidget* stack_ = nullptr;
  QLabel* message_ = nullptr;
  charts::MemoryChart* chart_ = nullptr;
  MemoryPeaksModel* peaksModel_ = nullptr;
  QTableView* peaksTable_ = nullptr;
  QWidget* breakdownPanel_ = nullptr;
  charts::StackedBarChart* breakdown_ = nullptr;
  QLabel* breakdownNote_ = nullptr;
  QStringList explanations_;
  QTableWidget* modelState_ = nullptr;
};

}  // namespace shardscope::ui
