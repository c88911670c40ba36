#pragma once
// Memory over time, one curve per rank (QCustomPlot). The chart keeps every sample of every series in
// compact vectors (16 bytes a record, ~7 % more for the coarser levels of MaxPyramid; reserved only
// where it changes) and draws at most about one point per pixel: whenever the visible time range or
// the widget's width changes, the visible window is re-bucketed from the full samples with
// core::downsampleMax (through MaxPyramid), which keeps each bucket's maximum at its own time, so a
// peak is drawn at its exact time and value at every zoom level. Each series' peak
// is marked by a tracer and a label (value, time, step, phase/operation) placed so labels do not
// overlap. Wheel zooms and drag pans the time axis only.
#include <QColor>
#include <QString>
#include <QTimer>

#include <memory>
#include <vector>

#include "core/model/types.h"
#include "ui/charts/chart_style.h"
#include "ui/charts/max_pyramid.h"
#include "ui/charts/qcp.h"

namespace shardscope::ui::charts {

class MemoryChart : public QCustomPlot {
  Q_OBJECT

 public:
  struct Series {
    QString name;  // legend: "rank 0"
    QColor color;
    // Shared with whoever else holds them (the session's cache): the chart never copies samples.
    std::shared_ptr<const MaxPyramid> allocated;  // absolute ns, bytes; sorted by time
    std::shared_ptr<const MaxPyramid> reserved;   // the same, only where the value changes
    // Drawn at sample time - shiftNs: runs overlaid on one axis, each aligned on its own event (the
    // start of its first counted step). 0 for the curves of one run.
    core::TimeNs shiftNs = 0;
    // Filled down to the previous series' allocated curve (the axis for the first): series given
    // as running sums draw as stacked areas (the breakdown by category over time).
    bool stacked = false;
  };
  struct Peak {
    int series = -1;        // index into the series
    core::TimeNs atNs = 0;  // absolute
    double bytes = 0;
    QString label;    // drawn beside the marker (may have several lines)
    QString tooltip;  // shown when hovering the marker
  };

  explicit MemoryChart(QWidget* parent = nullptr);

  // origin: the time shown as 0 ms (the run start); endNs: the end of the time axis.
  void setSeries(core::TimeNs origin, core::TimeNs endNs, std::vector<Series> series, std::vector<Peak> allocatedPeaks,
                 std::vector<Peak> reservedPeaks);
  void clearSeries();
  void setShowAllocated(bool show);
  void setShowReserved(bool show);
  bool showAllocated() const { return showAllocated_; }
  bool showReserved() const { return showReserved_; }
  // Hides the series whose flag is false (e.g. another device type), with their peaks.
  void setSeriesVisible(const std::vector<bool>& visible);

  void resetZoom();
  // Shows [t0, t1) (absolute ns).
  void zoomTo(core::TimeNs t0, core::TimeNs t1);
  // Re-buckets the visible window now (otherwise done on the next event loop turn after a change).
  void rebucket();
  int bucketCount() const;

  // Plot coordinates.
  core::TimeNs origin() const { return origin_; }
  const ByteScale& scale() const { return scale_; }
  double toPlotX(core::TimeNs t) const { return static_cast<double>(t - origin_) / 1e6; }
  double toPlotY(double bytes) const { return bytes / scale_.factor; }

  // What is drawn, for tests.
  int seriesCount() const { return static_cast<int>(series_.size()); }
  QCPGraph* allocatedGraph(int series) const { return graphs_.at(static_cast<std::size_t>(series)).allocated; }
  QCPGraph* reservedGraph(int series) const { return graphs_.at(static_cast<std::size_t>(series)).reserved; }
  // The markers currently shown (allocated peaks, or reserved ones when only reserved is shown).
  int markerCount() const { return static_cast<int>(markers_.size()); }
  QCPItemTracer* markerTracer(int i) const { return markers_.at(static_cast<std::size_t>(i)).tracer; }
  QCPItemText* markerLabel(int i) const { return markers_.at(static_cast<std::size_t>(i)).text; }
  const Peak& markerPeak(int i) const { return markers_.at(static_cast<std::size_t>(i)).peak; }
  // Bytes held by the samples.
  std::size_t sampleBytes() const;

 Q_SIGNALS:
  void viewChanged();  // after a re-bucketing

 protected:
  void resizeEvent(QResizeEvent* event) override;
  void mouseMoveEvent(QMouseEvent* event) override;
  // Its own minimum, not the legend's one-row width: the legend wraps to the width it gets.
  QSize minimumSizeHint() const override { return minimumSize(); }

 private:
  void fitLegendToWidth();
  struct Graphs {
    QCPGraph* allocated = nullptr;
    QCPGraph* reserved = nullptr;
  };
  struct Marker {
    Peak peak;
    QCPItemTracer* tracer = nullptr;
    QCPItemText* text = nullptr;
    QCPItemLine* line = nullptr;
  };
  void onRangeChanged(const QCPRange& range);
  void scheduleRebucket();
  void fill(QCPGraph* graph, const MaxPyramid* samples, core::TimeNs shift, core::TimeNs t0, core::TimeNs t1, int buckets);
  void rebuildMarkers();
  void layoutLabels();
  void updateLegend();
  double fullUpper() const;

  core::TimeNs origin_ = 0;
  core::TimeNs end_ = 0;
  ByteScale scale_;
  std::vector<Series> series_;
  std::vector<bool> visible_;
  std::vector<Graphs> graphs_;
  std::vector<Peak> allocatedPeaks_;
  std::vector<Peak> reservedPeaks_;
  std::vector<Marker> markers_;
  bool showAllocated_ = true;
  bool showReserved_ = false;
  bool bounding_ = false;
  QTimer rebucketTimer_;
  QCPTextElement* emptyText_ = nullptr;
};

}  // namespace shardscope::ui::charts
