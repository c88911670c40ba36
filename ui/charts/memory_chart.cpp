#include "ui/charts/memory_chart.h"

#include <QFontMetrics>
#include <QToolTip>

#include <algorithm>
#include <cmath>

#include "core/analysis/memory_peaks.h"

namespace shardscope::ui::charts {
namespace {

constexpr double kMinWidthMs = 1e-3;  // 1 µs: the narrowest window the time axis zooms to

}  // namespace

MemoryChart::MemoryChart(QWidget* parent) : QCustomPlot(parent) {
  applyPlotStyle(this);
  setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
  axisRect()->setRangeDrag(Qt::Horizontal);
  axisRect()->setRangeZoom(Qt::Horizontal);
  axisRect()->setRangeZoomFactor(0.85);
  setNoAntialiasingOnDrag(true);
  xAxis->setLabel(tr("time since run start (ms)"));
  yAxis->setLabel(tr("memory"));
  xAxis->setNumberFormat(QStringLiteral("f"));
  xAxis->setNumberPrecision(0);
  // "g": ticks keep the decimals they have (2.5, 7.5, 12.5) and no trailing zeros.
  yAxis->setNumberFormat(QStringLiteral("g"));
  yAxis->setNumberPrecision(4);
  // Legend below the plot, in one row that wraps.
  legend->setVisible(true);
  legend->setFillOrder(QCPLayoutGrid::foColumnsFirst);
  legend->setWrap(8);
  legend->setMargins(QMargins(4, 0, 4, 0));
  // The legend keeps its own width at the left of the row; an empty element takes the rest.
  auto* legendRow = new QCPLayoutGrid;
  plotLayout()->addElement(1, 0, legendRow);
  plotLayout()->setRowStretchFactor(1, 0.001);
  legendRow->setMargins(QMargins(0, 0, 0, 2));
  legendRow->setMinimumMargins(QMargins(0, 0, 0, 0));
  axisRect()->insetLayout()->take(legend);
  legendRow->addElement(0, 0, legend);
  legendRow->addElement(0, 1, new QCPLayoutElement(this));
  legendRow->setColumnStretchFactor(0, 0.001);
  legendRow->setColumnStretchFactor(1, 1.0);
  rebucketTimer_.setSingleShot(true);
  rebucketTimer_.setInterval(0);
  connect(&rebucketTimer_, &QTimer::timeout, this, &MemoryChart::rebucket);
  connect(xAxis, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), this, &MemoryChart::onRangeChanged);
  connect(this, &QCustomPlot::afterLayout, this, &MemoryChart::layoutLabels);
  setMouseTracking(true);
  setMinimumSize(320, 220);
  clearSeries();
}

std::size_t MemoryChart::sampleBytes() const {
  std::size_t n = 0;
  for (const auto& s : series_) n += (s.allocated ? s.allocated->bytes() : 0) + (s.reserved ? s.reserved->bytes() : 0);
  return n;
}

void MemoryChart::clearSeries() { setSeries(0, 0, {}, {}, {}); }

void MemoryChart::setSeries(core::TimeNs origin, core::TimeNs endNs, std::vector<Series> series, std::vector<Peak> allocatedPeaks,
                            std::vector<Peak> reservedPeaks) {
  clearGraphs();
  for (auto& m : markers_) {
    removeItem(m.tracer);
    removeItem(m.text);
    removeItem(m.line);
  }
  markers_.clear();
  graphs_.clear();
  origin_ = origin;
  series_ = std::move(series);
  visible_.assign(series_.size(), true);
  allocatedPeaks_ = std::move(allocatedPeaks);
  reservedPeaks_ = std::move(reservedPeaks);
  double maxBytes = 0;
  core::TimeNs last = origin;
  for (const auto& s : series_) {
    for (const MaxPyramid* v : {s.allocated.get(), s.reserved.get()}) {
      if (!v || v->empty()) continue;
      last = std::max(last, v->samples().back().tsNs - s.shiftNs);
      maxBytes = std::max(maxBytes, v->maxValue());
    }
  }
  end_ = std::max(endNs, last);
  scale_ = byteScaleFor(maxBytes);
  yAxis->setLabel(tr("memory (%1)").arg(scale_.suffix));
  yAxis->setRange(0, maxBytes > 0 ? maxBytes / scale_.factor * 1.3 : 1.0);
  for (const auto& s : series_) {
    Graphs g;
    g.allocated = addGraph();
    g.allocated->setName(s.name);
    g.allocated->setPen(QPen(s.color, 1.0));  // wider pens make Qt stroke the whole path: 50x slower
    g.allocated->setLineStyle(QCPGraph::lsStepLeft);
    g.allocated->setAdaptiveSampling(false);  // already at most one point per pixel
    g.allocated->setAntialiased(false);       // step lines are axis-parallel: crisp and much cheaper
    if (s.stacked) {
      QColor fill = s.color;
      fill.setAlpha(150);
      g.allocated->setBrush(fill);
      g.allocated->setChannelFillGraph(graphs_.empty() ? nullptr : graphs_.back().allocated);
      g.allocated->setPen(QPen(s.color.darker(130), 1.0));
    }
    g.reserved = addGraph();
    g.reserved->setName(tr("%1 reserved").arg(s.name));
    QPen dashed(s.color.darker(110), 1.0, Qt::DashLine);
    g.reserved->setPen(dashed);
    g.reserved->setLineStyle(QCPGraph::lsStepLeft);
    g.reserved->setAdaptiveSampling(false);
    g.reserved->setAntialiased(false);
    graphs_.push_back(g);
  }
  rebuildMarkers();
  updateLegend();
  resetZoom();
  scheduleRebucket();
}

void MemoryChart::setShowAllocated(bool show) {
  if (show == showAllocated_) return;
  showAllocated_ = show;
  rebuildMarkers();
  updateLegend();
  scheduleRebucket();
}

void MemoryChart::setShowReserved(bool show) {
  if (show == showReserved_) return;
  showReserved_ = show;
  rebuildMarkers();
  updateLegend();
  scheduleRebucket();
}

void MemoryChart::setSeriesVisible(const std::vector<bool>& visible) {
  visible_ = visible;
  visible_.resize(series_.size(), true);
  rebuildMarkers();
  updateLegend();
  scheduleRebucket();
}

void MemoryChart::updateLegend() {
  legend->clearItems();
  for (std::size_t i = 0; i < graphs_.size(); ++i) {
    const bool on = visible_[i];
    graphs_[i].allocated->setVisible(on && showAllocated_);
    graphs_[i].reserved->setVisible(on && showReserved_);
    if (on && showAllocated_) graphs_[i].allocated->addToLegend();
    if (on && showReserved_) graphs_[i].reserved->addToLegend();
  }
  legend->setVisible(legend->itemCount() > 0);
  fitLegendToWidth();
}

void MemoryChart::fitLegendToWidth() {
  // As many legend columns as the widest item allows in the chart's width (at most 8): the legend
  // wraps onto more rows on a narrow window instead of widening it.
  int widest = 1;
  for (int i = 0; i < legend->itemCount(); ++i)
    if (const QCPAbstractLegendItem* item = legend->item(i))  // a wrapped grid has empty cells
      widest = std::max(widest, item->minimumOuterSizeHint().width());
  const int columns = std::clamp((width() - 16) / (widest + legend->columnSpacing()), 1, 8);
  if (legend->wrap() != columns) legend->setWrap(columns);
  legend->setFillOrder(QCPLayoutGrid::foColumnsFirst, true);
}

double MemoryChart::fullUpper() const { return std::max(kMinWidthMs, toPlotX(end_)); }

void MemoryChart::resetZoom() {
  const double upper = fullUpper();
  xAxis->setRange(0, upper);
}

void MemoryChart::zoomTo(core::TimeNs t0, core::TimeNs t1) { xAxis->setRange(toPlotX(t0), toPlotX(t1)); }

void MemoryChart::onRangeChanged(const QCPRange& range) {
  if (bounding_) return;
  // Keep the window inside the run and no narrower than 1 µs.
  const double upper = fullUpper();
  double width = std::clamp(range.size(), kMinWidthMs, upper);
  double lo = range.lower;
  if (range.size() < kMinWidthMs) lo = range.center() - width / 2;
  lo = std::clamp(lo, 0.0, upper - width);
  if (lo != range.lower || lo + width != range.upper) {
    bounding_ = true;
    xAxis->setRange(lo, lo + width);
    bounding_ = false;
  }
  scheduleRebucket();
}

void MemoryChart::scheduleRebucket() {
  if (!rebucketTimer_.isActive()) rebucketTimer_.start();
}

void MemoryChart::resizeEvent(QResizeEvent* event) {
  fitLegendToWidth();
  QCustomPlot::resizeEvent(event);
  scheduleRebucket();
}

int MemoryChart::bucketCount() const { return std::max(64, axisRect()->width()); }

void MemoryChart::fill(QCPGraph* graph, const MaxPyramid* pyramid, core::TimeNs shift, core::TimeNs t0, core::TimeNs t1,
                       int buckets) {
  QVector<double> keys, values;
  // The window in the series' own clock.
  t0 += shift;
  t1 += shift;
  if (pyramid && !pyramid->empty()) {
    const auto& samples = pyramid->samples();
    auto before = [](const core::CounterSample& s, core::TimeNs t) { return s.tsNs < t; };
    const auto lo = std::lower_bound(samples.begin(), samples.end(), t0, before);
    const auto hi = std::lower_bound(lo, samples.end(), t1, before);
    const std::vector<core::CounterSample> picked = pyramid->downsample(t0, t1, buckets);
    keys.reserve(static_cast<qsizetype>(picked.size() + 2));
    values.reserve(keys.capacity());
    // The level in force when the window begins, and the first change after it, so the curve
    // reaches both edges.
    if (lo != samples.begin()) {
      keys << toPlotX(std::prev(lo)->tsNs - shift);
      values << toPlotY(std::prev(lo)->value);
    }
    for (const auto& s : picked) {
      keys << toPlotX(s.tsNs - shift);
      values << toPlotY(s.value);
    }
    if (hi != samples.end()) {
      keys << toPlotX(hi->tsNs - shift);
      values << toPlotY(hi->value);
    } else if (!keys.isEmpty()) {
      // Hold the last level to the end of the axis.
      keys << toPlotX(end_);
      values << values.back();
    }
  }
  graph->setData(keys, values, true);
}

void MemoryChart::rebucket() {
  rebucketTimer_.stop();
  const QCPRange r = xAxis->range();
  const core::TimeNs t0 = origin_ + static_cast<core::TimeNs>(std::floor(r.lower * 1e6));
  const core::TimeNs t1 = origin_ + static_cast<core::TimeNs>(std::ceil(r.upper * 1e6)) + 1;
  const int buckets = bucketCount();
  for (std::size_t i = 0; i < series_.size(); ++i) {
    const bool on = visible_[i];
    const auto& s = series_[i];
    fill(graphs_[i].allocated, on && showAllocated_ ? s.allocated.get() : nullptr, s.shiftNs, t0, t1, buckets);
    fill(graphs_[i].reserved, on && showReserved_ ? s.reserved.get() : nullptr, s.shiftNs, t0, t1, buckets);
  }
  replot(QCustomPlot::rpQueuedReplot);
  Q_EMIT viewChanged();
}

void MemoryChart::rebuildMarkers() {
  for (auto& m : markers_) {
    removeItem(m.tracer);
    removeItem(m.text);
    removeItem(m.line);
  }
  markers_.clear();
  const std::vector<Peak>* peaks = showAllocated_ ? &allocatedPeaks_ : showReserved_ ? &reservedPeaks_ : nullptr;
  if (!peaks) return;
  QFont font = xAxis->tickLabelFont();
  font.setPointSizeF(8.5);
  for (const Peak& p : *peaks) {
    if (p.series < 0 || static_cast<std::size_t>(p.series) >= series_.size() || !visible_[static_cast<std::size_t>(p.series)])
      continue;
    const QColor color = series_[static_cast<std::size_t>(p.series)].color;
    Marker m;
    m.peak = p;
    m.tracer = new QCPItemTracer(this);
    m.tracer->setStyle(QCPItemTracer::tsCircle);
    m.tracer->setSize(9);
    m.tracer->setPen(QPen(color.darker(130), 2));
    m.tracer->setBrush(Qt::white);
    m.tracer->position->setType(QCPItemPosition::ptPlotCoords);
    m.tracer->position->setCoords(toPlotX(p.atNs), toPlotY(p.bytes));
    m.line = new QCPItemLine(this);
    m.line->setPen(QPen(color.darker(110), 1));
    m.line->start->setType(QCPItemPosition::ptAbsolute);
    m.line->end->setType(QCPItemPosition::ptAbsolute);
    m.text = new QCPItemText(this);
    m.text->setFont(font);
    m.text->setText(p.label);
    m.text->setColor(QColor::fromRgb(0x24292f));
    m.text->setTextAlignment(Qt::AlignLeft);
    m.text->setPositionAlignment(Qt::AlignLeft | Qt::AlignTop);
    m.text->setPadding(QMargins(5, 3, 5, 3));
    m.text->setPen(QPen(color, 1));
    m.text->setBrush(QBrush(QColor(255, 255, 255, 235)));
    m.text->position->setType(QCPItemPosition::ptAbsolute);
    markers_.push_back(m);
  }
  // The tallest peaks get their labels placed first (closest to their marker).
  std::stable_sort(markers_.begin(), markers_.end(),
                   [](const Marker& a, const Marker& b) { return a.peak.bytes > b.peak.bytes; });
}

void MemoryChart::layoutLabels() {
  const QRectF area = QRectF(axisRect()->rect()).adjusted(4, 4, -4, -4);
  std::vector<QRectF> placed;
  for (const auto& m : markers_) {
    const double px = xAxis->coordToPixel(m.tracer->position->key());
    const double py = yAxis->coordToPixel(m.tracer->position->value());
    placed.emplace_back(px - 6, py - 6, 12, 12);  // markers are not covered either
  }
  for (auto& m : markers_) {
    const double px = xAxis->coordToPixel(m.tracer->position->key());
    const double py = yAxis->coordToPixel(m.tracer->position->value());
    const bool inView = area.adjusted(-6, -6, 6, 6).contains(px, py);
    m.tracer->setVisible(inView);
    if (!inView) {
      m.text->setVisible(false);
      m.line->setVisible(false);
      continue;
    }
    const QFontMetricsF fm(m.text->font());
    const QSizeF textSize = fm.boundingRect(QRectF(0, 0, 2000, 2000), Qt::AlignLeft, m.text->text()).size();
    const QSizeF size(textSize.width() + 10, textSize.height() + 6);
    std::optional<QRectF> best;
    // Candidates: above-right, above-left, below-right, below-left, moving away step by step.
    for (int k = 0; k < 40 && !best; ++k) {
      const double d = 10.0 + k * (size.height() / 2 + 2);
      const QRectF candidates[] = {
          QRectF(QPointF(px + 12, py - d - size.height()), size),
          QRectF(QPointF(px - 12 - size.width(), py - d - size.height()), size),
          QRectF(QPointF(px + 12, py + d), size),
          QRectF(QPointF(px - 12 - size.width(), py + d), size),
      };
      for (const QRectF& c : candidates) {
        if (!area.contains(c)) continue;
        bool clash = false;
        for (const QRectF& o : placed) clash = clash || o.intersects(c.adjusted(-2, -2, 2, 2));
        if (!clash) {
          best = c;
          break;
        }
      }
    }
    if (!best) {
      m.text->setVisible(false);
      m.line->setVisible(false);
      continue;
    }
    placed.push_back(*best);
    m.text->setVisible(true);
    m.text->position->setCoords(best->topLeft());
    const QPointF anchor(std::clamp(px, best->left(), best->right()), py < best->top() ? best->top() : best->bottom());
    m.line->setVisible(true);
    m.line->start->setCoords(anchor);
    m.line->end->setCoords(px, py);
  }
}

void MemoryChart::mouseMoveEvent(QMouseEvent* event) {
  QCustomPlot::mouseMoveEvent(event);
  const QPointF pos = event->position();
  for (const auto& m : markers_) {
    if (!m.tracer->visible()) continue;
    const QPointF p(xAxis->coordToPixel(m.tracer->position->key()), yAxis->coordToPixel(m.tracer->position->value()));
    if (std::hypot(p.x() - pos.x(), p.y() - pos.y()) <= 8) {
      QToolTip::showText(event->globalPosition().toPoint(), m.peak.tooltip, this);
      return;
    }
  }
  QToolTip::hideText();
}

}  // namespace shardscope::ui::charts
