#pragma once
// The memory-snapshot part of the Memory page (issue #18): a run that has PyTorch memory snapshots
// (torch.cuda.memory._dump_snapshot, imported) shows, for one rank and device at a time, the active
// and reserved memory over the trace (QCustomPlot; thinned to about one point per pixel of the
// visible range by core::curveLevelOfDetail, which keeps each bucket's maximum, re-thinned on every
// zoom and pan, so the peak is drawn at every zoom), the peak marked, core's figures in text (peak
// active, peak reserved, fragmentation, bytes alive before recording), and the top allocations at the
// peak (SnapshotTopModel). A click on the chart picks the highest point within a few pixels and lists
// the allocations alive there, largest first; the selected allocation's stack (frames, owner) shows
// in the side panel. Not drawn: memory_viz's one band per allocation (the list at the clicked time
// stands for it). Everything here is core's (buildSnapshotTimeline, snapshotFigures); the page loads
// it off the GUI thread with loadSnapshotRun.
#include <QWidget>

#include <memory>
#include <vector>

#include "core/analysis/memory_snapshot_analysis.h"
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

// The snapshots of one run, one entry per rank and device (rank, then device order).
struct SnapshotRunData {
  struct Entry {
    int rank = 0;
    int device = 0;
    std::shared_ptr<const core::MemorySnapshot> snapshot;
    core::SnapshotTimeline timeline;
    core::SnapshotFigures figures;  // core::snapshotFigures(snapshot, timeline): what every surface shows
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

  // For tests and screenshots.
  QCustomPlot* plot() const { return plot_; }
  QCPGraph* activeGraph() const { return active_; }
  QCPGraph* reservedGraph() const { return reserved_; }
  const std::vector<core::SnapshotCurvePoint>& drawnActive() const { return drawnActive_; }
  QCPItemTracer* peakTracer() const { return peakTracer_; }
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
  QPoint pressPos_;

  QComboBox* entryCombo_ = nullptr;
  QLabel* figures_ = nullptr;
  QCustomPlot* plot_ = nullptr;
  QCPGraph* active_ = nullptr;
  QCPGraph* reserved_ = nullptr;
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
