#pragma once
// The memory-snapshot part of the Memory page (issue #18): a run that has PyTorch memory snapshots
// (torch.cuda.memory._dump_snapshot, imported) shows, for one rank and device at a time, memory_viz's
// Active Memory Timeline: every allocation a band stacked in order of allocation, sliding down when
// one below it is freed (core::layoutSnapshotBands), drawn by SnapshotBandsPlot from
// core::snapshotBandDetail for the visible range at one bucket per pixel (each bucket its highest
// point; the allocations under a pixel's worth of bytes merged into grey "small allocations" pieces),
// re-laid on every zoom and pan, so the drawn top is the active curve's maximum at every zoom. The
// bands are coloured by category (legend), the active curve's outline and the reserved curve are drawn
// over them (thinned by core::curveLevelOfDetail), the peak is marked, core's figures are in text
// (peak active, peak reserved, fragmentation, bytes alive before recording), and the top allocations
// at the peak are a table (SnapshotTopModel). A click on a band selects that allocation (the band under
// the cursor's time and bytes) and shows its size, address, alloc and free times, category and stack
// in the side panel; the allocations alive at that moment are listed there too (largest first). A
// click above the stack lists what is alive at the highest point within a few pixels. Everything here
// is core's (buildSnapshotTimeline, snapshotFigures, layoutSnapshotBands, snapshotAllocationCategories);
// the page loads it off the GUI thread with loadSnapshotRun.
#include <QWidget>

#include <memory>
#include <vector>

#include "core/analysis/memory_snapshot_analysis.h"
#include "core/analysis/snapshot_bands.h"
#include "core/storage/trace_store.h"
#include "core/util/progress.h"
#include "ui/charts/qcp.h"

class QComboBox;
class QLabel;
class QPlainTextEdit;
class QTableView;
class QTableWidget;

namespace shardscope::ui {

class SnapshotTopModel;
class SnapshotBandsPlot;

// The snapshots of one run, one entry per rank and device (rank, then device order).
struct SnapshotRunData {
  struct Entry {
    int rank = 0;
    int device = 0;
    std::shared_ptr<const core::MemorySnapshot> snapshot;
    core::SnapshotTimeline timeline;
    core::SnapshotFigures figures;         // core::snapshotFigures(snapshot, timeline): what every surface shows
    core::SnapshotBandLayout layout;       // core::layoutSnapshotBands(timeline)
    std::vector<std::uint8_t> categories;  // core::snapshotAllocationCategories, per allocation
  };
  std::vector<Entry> entries;
  double loadMs = 0;  // reading the store and building the timelines and figures
};

// Reads every snapshot of `runId` (none: no entries). Runs in a worker thread.
SnapshotRunData loadSnapshotRun(core::TraceStore& store, core::RunId runId, const core::CancelToken* cancel = nullptr);

class SnapshotView : public QWidget {
  Q_OBJECT

 public:
  explicit SnapshotView(QWidget* parent = nullptr);

  void setData(std::shared_ptr<const SnapshotRunData> runData);
  void clear();
  bool hasData() const { return data_ && !data_->entries.empty(); }
  // Shows the i-th entry (rank and device).
  void showEntry(int index);
  const SnapshotRunData::Entry* entry() const;

  // Shows [t0, t1) (absolute ns, the allocator's clock); resetZoom: the whole trace.
  void zoomTo(core::TimeNs t0, core::TimeNs t1);
  void resetZoom();
  // What a click at time `ns` does: picks the highest active point within a few pixels of it.
  void selectAt(core::TimeNs ns);
  // Lists the allocations alive after trace position `seq` (the active curve's point) and shows the
  // stack of the largest.
  void selectSeq(std::int64_t seq);
  // What a click at (time `ns`, `bytes`) does: selects the allocation whose drawn band is there (for a
  // merged piece, the small allocation the layout puts there) and lists what is alive at the bucket's
  // point; above the stack, selectAt(ns). Returns the allocation (index into the timeline's), or -1.
  std::int64_t selectAllocationAt(core::TimeNs ns, std::int64_t bytes);
  // Shows allocation `index` (of the timeline's) in the side panel and outlines its band.
  void selectAllocation(std::int64_t index);

  // For tests and screenshots.
  QCustomPlot* plot() const { return plot_; }
  QCPGraph* activeGraph() const { return active_; }
  QCPGraph* reservedGraph() const { return reserved_; }
  const std::vector<core::SnapshotCurvePoint>& drawnActive() const { return drawnActive_; }
  QCPItemTracer* peakTracer() const { return peakTracer_; }
  SnapshotBandsPlot* bandsPlot() const { return bands_; }
  const core::SnapshotBandDetail& bandDetail() const { return detail_; }
  // The legend's entries for the categories present in the shown snapshot (index of
  // core::snapshotCategoryNames(), graph) and the one of the merged small allocations.
  const std::vector<std::pair<int, QCPGraph*>>& categoryLegend() const { return categoryLegend_; }
  QCPGraph* smallLegend() const { return smallLegend_; }
  std::int64_t selectedAllocation() const { return selectedAllocation_; }
  double lastRelayoutMs() const { return lastRelayoutMs_; }
  SnapshotTopModel* topModel() const { return topModel_; }
  QTableView* topTable() const { return topTable_; }
  QTableWidget* aliveTable() const { return alive_; }
  QComboBox* entryCombo() const { return entryCombo_; }
  QString figuresText() const;
  QString stackText() const;
  std::int64_t selectedSeq() const { return selectedSeq_; }
  double bytesPerUnit() const { return bytesPerUnit_; }
  core::TimeNs origin() const { return origin_; }

 Q_SIGNALS:
  void statusMessage(const QString& text);

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  void rethin();
  void showStack(core::StackId stack, const QString& heading);
  void showAliveRow(int row);

  std::shared_ptr<const SnapshotRunData> data_;
  int current_ = -1;
  core::TimeNs origin_ = 0;  // drawn as 0 ms: the first event of the trace
  core::TimeNs end_ = 0;
  double bytesPerUnit_ = 1;  // the y axis' unit (GiB, MiB, ...)
  std::vector<core::SnapshotCurvePoint> drawnActive_;
  std::vector<const core::SnapshotAllocation*> aliveRows_;  // the alive table's rows
  std::int64_t selectedSeq_ = -2;
  std::int64_t selectedAllocation_ = -1;
  core::SnapshotBandDetail detail_;
  double lastRelayoutMs_ = 0;
  QPoint pressPos_;

  QComboBox* entryCombo_ = nullptr;
  QLabel* figures_ = nullptr;
  QCustomPlot* plot_ = nullptr;
  QCPGraph* active_ = nullptr;
  QCPGraph* reserved_ = nullptr;
  SnapshotBandsPlot* bands_ = nullptr;
  std::vector<QCPGraph*> categoryGraphs_;  // one per core::snapshotCategoryNames(), in the legend when present
  std::vector<std::pair<int, QCPGraph*>> categoryLegend_;
  QCPGraph* smallLegend_ = nullptr;
  QCPItemTracer* peakTracer_ = nullptr;
  QCPItemText* peakLabel_ = nullptr;
  QCPItemStraightLine* cursor_ = nullptr;
  SnapshotTopModel* topModel_ = nullptr;
  QTableView* topTable_ = nullptr;
  QLabel* aliveHeading_ = nullptr;
  QTableWidget* alive_ = nullptr;
  QPlainTextEdit* stack_ = nullptr;
};

}  // namespace shardscope::ui
