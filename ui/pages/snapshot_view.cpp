#include "ui/pages/snapshot_view.h"

#include <QComboBox>
#include <QElapsedTimer>
#include <QEvent>
#include <QFontDatabase>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QMouseEvent>
#include <QPlainTextEdit>
#include <QSplitter>
#include <QTableView>
#include <QTableWidget>
#include <QTimer>
#include <QVBoxLayout>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/storage/memsnap_store.h"
#include "ui/charts/chart_style.h"
#include "ui/models/snapshot_models.h"
#include "ui/pages/snapshot_bands_plot.h"

namespace shardscope::ui {
namespace {

constexpr int kAliveRowsShown = 1000;  // the largest; the heading gives the count and total of all

QString ownerText(const core::MemorySnapshot& s, const core::SnapshotAllocation& a) {
  const std::string owner = core::snapshotOwnerFrame(s, a.stack);
  if (!owner.empty()) return QString::fromStdString(owner);
  return a.allocSeq < 0 ? QObject::tr("<allocated before recording started>") : QObject::tr("<no Python frame>");
}

QString categoryName(std::size_t category) {
  const auto& names = core::snapshotCategoryNames();
  const std::string_view n = names[std::min(category, names.size() - 1)];
  return QString::fromUtf8(n.data(), static_cast<qsizetype>(n.size()));
}

}  // namespace

SnapshotRunData loadSnapshotRun(core::TraceStore& store, core::RunId runId, const core::CancelToken* cancel) {
  const auto start = std::chrono::steady_clock::now();
  SnapshotRunData d;
  for (const core::Rank& r : core::memorySnapshotRanks(store, runId)) {
    if (cancel) cancel->throwIfCancelled();
    auto snap = core::loadMemorySnapshot(store, r.id);
    if (!snap) continue;
    auto shared = std::make_shared<const core::MemorySnapshot>(std::move(*snap));
    for (int device : shared->devices()) {
      if (cancel) cancel->throwIfCancelled();
      SnapshotRunData::Entry e;
      e.rank = r.rank;
      e.device = device;
      e.snapshot = shared;
      e.timeline = core::buildSnapshotTimeline(*shared, device);
      e.figures = core::snapshotFigures(*shared, e.timeline);
      e.figures.rank = r.rank;
      e.layout = core::layoutSnapshotBands(e.timeline);
      e.categories = core::snapshotAllocationCategories(*shared, e.timeline);
      d.entries.push_back(std::move(e));
    }
  }
  d.loadMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return d;
}

SnapshotView::SnapshotView(QWidget* parent) : QWidget(parent), topModel_(new SnapshotTopModel(this)) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(4);
  auto* bar = new QHBoxLayout;
  auto* entryLabel = new QLabel(tr("Snapshot:"), this);
  entryCombo_ = new QComboBox(this);
  entryLabel->setBuddy(entryCombo_);
  bar->addWidget(entryLabel);
  bar->addWidget(entryCombo_);
  figures_ = new QLabel(this);
  figures_->setObjectName(QStringLiteral("snapshotFigures"));
  figures_->setWordWrap(true);
  figures_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  bar->addWidget(figures_, 1);
  layout->addLayout(bar);

  auto* split = new QSplitter(Qt::Horizontal, this);
  auto* left = new QSplitter(Qt::Vertical, split);
  plot_ = new QCustomPlot(left);
  plot_->setMinimumHeight(200);
  plot_->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
  plot_->axisRect()->setRangeDrag(Qt::Horizontal);
  plot_->axisRect()->setRangeZoom(Qt::Horizontal);
  plot_->xAxis->setLabel(tr("time since the first event of the trace (ms)"));
  // The legend in a row under the chart (over it, it would hide the peak), filled row by row.
  plot_->legend->setVisible(true);
  plot_->axisRect()->insetLayout()->take(plot_->legend);
  plot_->plotLayout()->addElement(1, 0, plot_->legend);
  plot_->plotLayout()->setRowStretchFactor(1, 0.001);
  plot_->legend->setFillOrder(QCPLayoutGrid::foColumnsFirst);
  plot_->legend->setWrap(5);
  plot_->legend->setBorderPen(Qt::NoPen);
  plot_->setToolTip(
      tr("Each band is an allocation, stacked in order of allocation · click a band: its stack · wheel: zoom the time "
         "axis · drag: pan"));
  // The bands first: the curves and the peak are drawn over them.
  bands_ = new SnapshotBandsPlot(plot_->xAxis, plot_->yAxis);
  bands_->setName(tr("allocations"));
  bands_->removeFromLegend();
  reserved_ = plot_->addGraph();
  reserved_->setName(tr("reserved"));
  reserved_->setLineStyle(QCPGraph::lsStepLeft);
  reserved_->setPen(QPen(QColor(0x6a737d), 0, Qt::DashLine));
  active_ = plot_->addGraph();
  active_->setName(tr("active (allocated)"));
  active_->setLineStyle(QCPGraph::lsStepLeft);
  // A cosmetic, aliased pen: the outline of a zoomed-out trace is a comb of per-pixel steps, which a
  // wide antialiased pen strokes in over 100 ms (1M events); this one in a few.
  active_->setPen(QPen(QColor(0x222222), 0));
  active_->setAntialiased(false);
  // The legend of the bands' colours: an empty graph per category (shown for the categories present).
  const auto legendEntry = [this](const QString& name, const QColor& color) {
    QCPGraph* g = plot_->addGraph();
    g->setName(name);
    g->setPen(QPen(color.darker(120)));
    g->setBrush(color);
    g->setLineStyle(QCPGraph::lsNone);
    g->removeFromLegend();
    return g;
  };
  for (std::size_t c = 0; c < core::snapshotCategoryNames().size(); ++c)
    categoryGraphs_.push_back(legendEntry(categoryName(c), SnapshotBandsPlot::categoryColor(static_cast<int>(c))));
  smallLegend_ = legendEntry(tr("small allocations (under a pixel, merged)"), SnapshotBandsPlot::smallColor());
  peakTracer_ = new QCPItemTracer(plot_);
  peakTracer_->setStyle(QCPItemTracer::tsCircle);
  peakTracer_->setSize(9);
  peakTracer_->setPen(QPen(QColor(0xd62728), 2));
  peakTracer_->position->setType(QCPItemPosition::ptPlotCoords);
  peakLabel_ = new QCPItemText(plot_);
  peakLabel_->setPositionAlignment(Qt::AlignBottom | Qt::AlignHCenter);
  peakLabel_->position->setType(QCPItemPosition::ptAbsolute);
  peakLabel_->position->setParentAnchor(peakTracer_->position);
  peakLabel_->position->setCoords(0, -8);
  peakLabel_->setColor(QColor(0xd62728));
  cursor_ = new QCPItemStraightLine(plot_);
  cursor_->setPen(QPen(QColor(0x333333), 1, Qt::DotLine));
  cursor_->point1->setType(QCPItemPosition::ptPlotCoords);
  cursor_->point2->setType(QCPItemPosition::ptPlotCoords);
  cursor_->setVisible(false);
  left->addWidget(plot_);

  topTable_ = new QTableView(left);
  topTable_->setObjectName(QStringLiteral("snapshotTop"));
  topTable_->setModel(topModel_);
  topTable_->verticalHeader()->hide();
  topTable_->setSelectionBehavior(QAbstractItemView::SelectRows);
  topTable_->setSelectionMode(QAbstractItemView::SingleSelection);
  topTable_->setAlternatingRowColors(true);
  topTable_->setWordWrap(false);
  topTable_->horizontalHeader()->setStretchLastSection(true);
  topTable_->setToolTip(tr("The allocations alive at the active peak, grouped by stack (top 20 by bytes)"));
  left->addWidget(topTable_);
  left->setStretchFactor(0, 3);
  left->setStretchFactor(1, 2);
  split->addWidget(left);

  auto* side = new QWidget(split);
  auto* sl = new QVBoxLayout(side);
  sl->setContentsMargins(0, 0, 0, 0);
  aliveHeading_ = new QLabel(side);
  aliveHeading_->setWordWrap(true);
  sl->addWidget(aliveHeading_);
  alive_ = new QTableWidget(side);
  alive_->setObjectName(QStringLiteral("snapshotAlive"));
  alive_->setColumnCount(3);
  alive_->setHorizontalHeaderLabels({tr("Bytes"), tr("Allocated at (ms)"), tr("Owner frame")});
  alive_->verticalHeader()->hide();
  alive_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  alive_->setSelectionBehavior(QAbstractItemView::SelectRows);
  alive_->setSelectionMode(QAbstractItemView::SingleSelection);
  alive_->horizontalHeader()->setStretchLastSection(true);
  alive_->setWordWrap(false);
  sl->addWidget(alive_, 2);
  stack_ = new QPlainTextEdit(side);
  stack_->setObjectName(QStringLiteral("snapshotStack"));
  stack_->setReadOnly(true);
  stack_->setLineWrapMode(QPlainTextEdit::NoWrap);
  stack_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  sl->addWidget(stack_, 3);
  split->addWidget(side);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  layout->addWidget(split, 1);

  connect(entryCombo_, &QComboBox::currentIndexChanged, this, &SnapshotView::showEntry);
  connect(plot_->xAxis, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), this, [this] { rethin(); });
  connect(plot_, &QCustomPlot::mousePress, this, [this](QMouseEvent* e) { pressPos_ = e->position().toPoint(); });
  connect(plot_, &QCustomPlot::mouseRelease, this, [this](QMouseEvent* e) {
    const QPoint p = e->position().toPoint();
    if (e->button() != Qt::LeftButton || (p - pressPos_).manhattanLength() > 3 || !entry()) return;
    if (!plot_->axisRect()->rect().contains(p)) return;
    const double ms = plot_->xAxis->pixelToCoord(p.x());
    const double value = plot_->yAxis->pixelToCoord(p.y());
    selectAllocationAt(origin_ + static_cast<core::TimeNs>(std::llround(ms * 1e6)),
                       static_cast<std::int64_t>(std::floor(value * bytesPerUnit_)));
  });
  connect(topTable_->selectionModel(), &QItemSelectionModel::currentRowChanged, this, [this](const QModelIndex& i) {
    if (!i.isValid() || !entry()) return;
    const core::SnapshotStackGroup& g = topModel_->groupAt(i.row());
    showStack(g.stack, tr("%1 allocation(s) alive at the peak, %2 (%3)")
                           .arg(g.count)
                           .arg(charts::formatBytes(static_cast<double>(g.bytes), 2), QString::fromStdString(g.category)));
  });
  connect(alive_, &QTableWidget::currentCellChanged, this, [this](int row) { showAliveRow(row); });
  plot_->installEventFilter(this);
  clear();
}

void SnapshotView::clear() {
  data_.reset();
  current_ = -1;
  {
    const QSignalBlocker block(entryCombo_);
    entryCombo_->clear();
  }
  figures_->clear();
  active_->data()->clear();
  reserved_->data()->clear();
  drawnActive_.clear();
  detail_ = {};
  bands_->setBands(nullptr, nullptr, 0, 1);
  bands_->setSelectedAllocation(-1);
  selectedAllocation_ = -1;
  for (QCPGraph* g : categoryGraphs_) g->removeFromLegend();
  smallLegend_->removeFromLegend();
  categoryLegend_.clear();
  peakTracer_->setVisible(false);
  peakLabel_->setVisible(false);
  cursor_->setVisible(false);
  topModel_->clear();
  aliveRows_.clear();
  alive_->setRowCount(0);
  aliveHeading_->clear();
  stack_->clear();
  selectedSeq_ = -2;
  plot_->replot();
}

void SnapshotView::setData(std::shared_ptr<const SnapshotRunData> runData) {
  clear();
  data_ = std::move(runData);
  if (!hasData()) return;
  {
    const QSignalBlocker block(entryCombo_);
    for (const auto& e : data_->entries) entryCombo_->addItem(tr("rank %1 · cuda:%2").arg(e.rank).arg(e.device));
    entryCombo_->setCurrentIndex(0);
  }
  entryCombo_->setEnabled(data_->entries.size() > 1);
  showEntry(0);
}

const SnapshotRunData::Entry* SnapshotView::entry() const {
  if (!data_ || current_ < 0 || current_ >= static_cast<int>(data_->entries.size())) return nullptr;
  return &data_->entries[static_cast<std::size_t>(current_)];
}

void SnapshotView::showEntry(int index) {
  if (!data_ || index < 0 || index >= static_cast<int>(data_->entries.size())) return;
  current_ = index;
  const auto& e = data_->entries[static_cast<std::size_t>(index)];
  const core::SnapshotFigures& f = e.figures;
  origin_ = e.timeline.active.front().tsNs;
  end_ = std::max(e.timeline.active.back().tsNs, e.timeline.reserved.back().tsNs);
  if (end_ <= origin_) end_ = origin_ + 1000;
  const charts::ByteScale scale = charts::byteScaleFor(static_cast<double>(std::max(f.peakActiveBytes, f.peakReservedBytes)));
  bytesPerUnit_ = scale.factor;
  plot_->yAxis->setLabel(tr("memory (%1)").arg(scale.suffix));
  plot_->yAxis->setRange(0, static_cast<double>(std::max(f.peakActiveBytes, f.peakReservedBytes)) / bytesPerUnit_ * 1.15);

  const double peakMs = static_cast<double>(f.peakActiveNs - origin_) / 1e6;
  peakTracer_->position->setCoords(peakMs, static_cast<double>(f.peakActiveBytes) / bytesPerUnit_);
  peakTracer_->setVisible(true);
  peakLabel_->setText(
      tr("peak %1\n%2").arg(charts::formatBytes(static_cast<double>(f.peakActiveBytes), 2), charts::formatMs(peakMs)));
  peakLabel_->setVisible(true);

  const auto bytes = [](std::int64_t b) { return charts::formatBytes(static_cast<double>(b), 2); };
  figures_->setText(tr("Peak active %1 at %2 · peak reserved %3 · fragmentation at the peak %4 (reserved %5 − active) · "
                       "alive before recording %6 · %7 allocations at the peak · %8 events")
                        .arg(bytes(f.peakActiveBytes), charts::formatMs(peakMs), bytes(f.peakReservedBytes),
                             bytes(f.fragmentationBytes), bytes(f.reservedAtPeakBytes), bytes(f.priorActiveBytes),
                             charts::formatNumber(static_cast<double>(f.allocationsAtPeak)),
                             charts::formatNumber(static_cast<double>(f.events))));
  topModel_->setGroups(f.topAtPeak);
  topTable_->resizeColumnsToContents();
  // The legend: the categories of this snapshot's allocations, then the merged pieces.
  std::vector<bool> present(categoryGraphs_.size(), false);
  for (const std::uint8_t c : e.categories) present[std::min<std::size_t>(c, present.size() - 1)] = true;
  categoryLegend_.clear();
  for (std::size_t c = 0; c < categoryGraphs_.size(); ++c) {
    categoryGraphs_[c]->removeFromLegend();
    if (present[c]) {
      categoryGraphs_[c]->addToLegend();
      categoryLegend_.emplace_back(static_cast<int>(c), categoryGraphs_[c]);
    }
  }
  smallLegend_->removeFromLegend();
  smallLegend_->addToLegend();
  selectedAllocation_ = -1;
  bands_->setSelectedAllocation(-1);
  aliveRows_.clear();
  alive_->setRowCount(0);
  aliveHeading_->setText(tr("Click a band: that allocation, its stack, and the allocations alive at that moment."));
  stack_->clear();
  cursor_->setVisible(false);
  selectedSeq_ = -2;
  resetZoom();
}

void SnapshotView::resetZoom() {
  if (!entry()) return;
  zoomTo(origin_, end_ + std::max<core::TimeNs>(1, (end_ - origin_) / 50));
}

void SnapshotView::zoomTo(core::TimeNs t0, core::TimeNs t1) {
  const QCPRange before = plot_->xAxis->range();
  plot_->xAxis->setRange(static_cast<double>(t0 - origin_) / 1e6, static_cast<double>(t1 - origin_) / 1e6);
  if (plot_->xAxis->range() == before) rethin();  // rangeChanged did not fire
}

bool SnapshotView::eventFilter(QObject* watched, QEvent* event) {
  if (watched == plot_ && event->type() == QEvent::Resize) QTimer::singleShot(0, this, [this] { rethin(); });
  return QWidget::eventFilter(watched, event);
}

void SnapshotView::rethin() {
  const auto* e = entry();
  if (!e) return;
  const QCPRange r = plot_->xAxis->range();
  const core::TimeNs t0 = origin_ + static_cast<core::TimeNs>(std::floor(r.lower * 1e6));
  const core::TimeNs t1 = origin_ + static_cast<core::TimeNs>(std::ceil(r.upper * 1e6)) + 1;
  const int buckets = std::max(50, plot_->axisRect()->width());
  const auto thin = [&](const std::vector<core::SnapshotCurvePoint>& curve) {
    std::vector<core::SnapshotCurvePoint> pts = core::curveLevelOfDetail(curve, t0, t1, buckets);
    // The level entering the window (the last point before it) and leaving it: the step line spans it.
    const auto lt = [](const core::SnapshotCurvePoint& p, core::TimeNs t) { return p.tsNs < t; };
    if (auto it = std::lower_bound(curve.begin(), curve.end(), t0, lt); it != curve.begin()) {
      core::SnapshotCurvePoint in = *std::prev(it);
      in.tsNs = t0;
      pts.insert(pts.begin(), in);
    }
    if (!pts.empty() && pts.back().tsNs < std::min(t1, end_)) {
      core::SnapshotCurvePoint out = *std::prev(std::lower_bound(curve.begin(), curve.end(), t1, lt));
      out.tsNs = std::min(t1, end_);
      pts.push_back(out);
    }
    return pts;
  };
  const auto draw = [&](QCPGraph* g, const std::vector<core::SnapshotCurvePoint>& pts) {
    QVector<double> keys, values;
    keys.reserve(static_cast<qsizetype>(pts.size()));
    values.reserve(static_cast<qsizetype>(pts.size()));
    for (const auto& p : pts) {
      keys.push_back(static_cast<double>(p.tsNs - origin_) / 1e6);
      values.push_back(static_cast<double>(p.bytes) / bytesPerUnit_);
    }
    g->setData(keys, values, true);
  };
  // The bands: a bucket per pixel of time, a band of its own for each allocation of a pixel's bytes or more.
  QElapsedTimer timer;
  timer.start();
  const double bytesPerPixel = plot_->yAxis->range().size() * bytesPerUnit_ / std::max(1, plot_->axisRect()->height());
  detail_ = core::snapshotBandDetail(e->timeline, e->layout, t0, t1, std::max(50, plot_->axisRect()->width()),
                                     static_cast<std::int64_t>(std::ceil(bytesPerPixel)));
  bands_->setBands(&detail_, &e->categories, origin_, bytesPerUnit_);
  lastRelayoutMs_ = static_cast<double>(timer.nsecsElapsed()) / 1e6;
  drawnActive_ = thin(e->timeline.active);
  draw(active_, drawnActive_);
  draw(reserved_, thin(e->timeline.reserved));
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

void SnapshotView::selectAt(core::TimeNs ns) {
  const auto* e = entry();
  if (!e) return;
  const auto& curve = e->timeline.active;
  // A few pixels either side: the highest point there, so a click on a spike gets its top.
  const double nsPerPixel = plot_->xAxis->range().size() * 1e6 / std::max(1, plot_->axisRect()->width());
  const auto w = static_cast<core::TimeNs>(std::ceil(4 * nsPerPixel));
  const auto lt = [](const core::SnapshotCurvePoint& p, core::TimeNs t) { return p.tsNs < t; };
  const core::SnapshotCurvePoint* best = nullptr;
  for (auto it = std::lower_bound(curve.begin(), curve.end(), ns - w, lt); it != curve.end() && it->tsNs <= ns + w; ++it)
    if (!best || it->bytes > best->bytes) best = &*it;
  if (!best) {  // between events: the level in force
    auto it = std::lower_bound(curve.begin(), curve.end(), ns + 1, lt);
    best = it == curve.begin() ? &curve.front() : &*std::prev(it);
  }
  cursor_->point1->setCoords(static_cast<double>(best->tsNs - origin_) / 1e6, 0);
  cursor_->point2->setCoords(static_cast<double>(best->tsNs - origin_) / 1e6, 1);
  cursor_->setVisible(true);
  plot_->replot(QCustomPlot::rpQueuedReplot);
  selectSeq(best->seq);
}

std::int64_t SnapshotView::selectAllocationAt(core::TimeNs ns, std::int64_t bytes) {
  const auto* e = entry();
  if (!e) return -1;
  const int b = detail_.bucketOf(ns);
  const std::int32_t point = b < 0 ? -1 : detail_.bucketPoint[static_cast<std::size_t>(b)];
  std::int64_t hit = -1;
  if (point >= 0) {
    for (const auto& p : detail_.pieces)
      if (p.bucket0 <= b && b < p.bucket1 && p.bottom <= bytes && bytes < p.top) {
        // A band of its own is that allocation; a merged piece, the small one the layout puts at these bytes.
        hit = p.allocation >= 0 ? p.allocation : core::snapshotAllocationAt(e->timeline, e->layout, point, bytes);
        break;
      }
  }
  if (hit < 0) {
    selectAt(ns);
    return -1;
  }
  const core::TimeNs at = e->timeline.active[static_cast<std::size_t>(point)].tsNs;
  cursor_->point1->setCoords(static_cast<double>(at - origin_) / 1e6, 0);
  cursor_->point2->setCoords(static_cast<double>(at - origin_) / 1e6, 1);
  cursor_->setVisible(true);
  selectSeq(e->timeline.active[static_cast<std::size_t>(point)].seq);
  selectAllocation(hit);
  return hit;
}

void SnapshotView::selectAllocation(std::int64_t index) {
  const auto* e = entry();
  if (!e || index < 0 || static_cast<std::size_t>(index) >= e->timeline.allocations.size()) return;
  const core::SnapshotAllocation& a = e->timeline.allocations[static_cast<std::size_t>(index)];
  // Its row in the alive list when listed there (the list shows the largest).
  int row = -1;
  for (std::size_t r = 0; r < aliveRows_.size(); ++r)
    if (aliveRows_[r] == &a) row = static_cast<int>(r);
  {
    const QSignalBlocker block(alive_);
    if (row >= 0)
      alive_->setCurrentCell(row, 0);
    else
      alive_->clearSelection();
  }
  selectedAllocation_ = index;
  bands_->setSelectedAllocation(index);
  QString heading =
      tr("%1 (%2 bytes) at 0x%3, %4, ")
          .arg(charts::formatBytes(static_cast<double>(a.size), 2), charts::formatNumber(static_cast<double>(a.size)))
          .arg(a.addr, 0, 16)
          .arg(categoryName(e->categories[static_cast<std::size_t>(index)]));
  heading += a.allocSeq < 0 ? tr("allocated before recording started")
                            : tr("allocated at %1 (event %2)")
                                  .arg(charts::formatMs(static_cast<double>(a.allocNs - origin_) / 1e6))
                                  .arg(a.allocSeq);
  heading +=
      a.freeSeq < 0
          ? tr(", alive at the dump")
          : tr(", freed at %1 (event %2)").arg(charts::formatMs(static_cast<double>(a.freeNs - origin_) / 1e6)).arg(a.freeSeq);
  showStack(a.stack, heading);
  plot_->replot(QCustomPlot::rpQueuedReplot);
  Q_EMIT statusMessage(tr("Allocation of %1 selected").arg(charts::formatBytes(static_cast<double>(a.size), 2)));
}

void SnapshotView::selectSeq(std::int64_t seq) {
  const auto* e = entry();
  if (!e) return;
  selectedSeq_ = seq;
  aliveRows_.clear();
  std::int64_t total = 0;
  for (const auto& a : e->timeline.allocations)
    if (a.allocSeq <= seq && (a.freeSeq < 0 || a.freeSeq > seq)) {
      aliveRows_.push_back(&a);
      total += a.size;
    }
  std::stable_sort(aliveRows_.begin(), aliveRows_.end(), [](const auto* x, const auto* y) { return x->size > y->size; });
  core::TimeNs at = origin_;
  for (const auto& p : e->timeline.active)
    if (p.seq == seq) at = p.tsNs;
  const qsizetype all = static_cast<qsizetype>(aliveRows_.size());
  aliveHeading_->setText(tr("At %1 (after event %2%3): %4 allocation(s) alive, %5%6")
                             .arg(charts::formatMs(static_cast<double>(at - origin_) / 1e6))
                             .arg(seq)
                             .arg(seq == e->figures.peakActiveSeq ? tr(", the peak") : QString())
                             .arg(all)
                             .arg(charts::formatBytes(static_cast<double>(total), 2),
                                  all > kAliveRowsShown ? tr(" (the %1 largest listed)").arg(kAliveRowsShown) : QString()));
  if (aliveRows_.size() > static_cast<std::size_t>(kAliveRowsShown)) aliveRows_.resize(kAliveRowsShown);
  const QSignalBlocker block(alive_);
  alive_->setRowCount(static_cast<int>(aliveRows_.size()));
  for (int row = 0; row < static_cast<int>(aliveRows_.size()); ++row) {
    const core::SnapshotAllocation& a = *aliveRows_[static_cast<std::size_t>(row)];
    auto* bytes = new QTableWidgetItem(charts::formatBytes(static_cast<double>(a.size), 2));
    bytes->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
    bytes->setToolTip(tr("%1 bytes at 0x%2").arg(charts::formatNumber(static_cast<double>(a.size))).arg(a.addr, 0, 16));
    alive_->setItem(row, 0, bytes);
    auto* when = new QTableWidgetItem(a.allocSeq < 0 ? tr("before recording")
                                                     : charts::formatNumber(static_cast<double>(a.allocNs - origin_) / 1e6, 3));
    when->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
    alive_->setItem(row, 1, when);
    alive_->setItem(row, 2, new QTableWidgetItem(ownerText(*e->snapshot, a)));
  }
  alive_->resizeColumnToContents(0);
  alive_->resizeColumnToContents(1);
  if (!aliveRows_.empty()) alive_->setCurrentCell(0, 0);
  showAliveRow(aliveRows_.empty() ? -1 : 0);
  Q_EMIT statusMessage(tr("%1 allocation(s) alive after event %2").arg(all).arg(seq));
}

void SnapshotView::showAliveRow(int row) {
  const auto* e = entry();
  if (!e || row < 0 || row >= static_cast<int>(aliveRows_.size())) {
    stack_->clear();
    selectedAllocation_ = -1;
    bands_->setSelectedAllocation(-1);
    return;
  }
  selectAllocation(aliveRows_[static_cast<std::size_t>(row)] - e->timeline.allocations.data());
}

void SnapshotView::showStack(core::StackId stack, const QString& heading) {
  const auto* e = entry();
  if (!e) return;
  const core::MemorySnapshot& s = *e->snapshot;
  QStringList lines{heading, QString()};
  const std::string owner = core::snapshotOwnerFrame(s, stack);
  lines << tr("Owner: %1").arg(owner.empty() ? tr("(no Python frame)") : QString::fromStdString(owner));
  if (stack < 0 || static_cast<std::size_t>(stack) >= s.stacks.size()) {
    lines << tr("No stack was recorded for this allocation.");
  } else {
    lines << tr("Stack (innermost first):");
    for (std::int32_t fi : s.stacks[static_cast<std::size_t>(stack)]) {
      if (fi < 0 || static_cast<std::size_t>(fi) >= s.frames.size()) continue;
      const core::MemFrame& f = s.frames[static_cast<std::size_t>(fi)];
      QString line = QStringLiteral("  ") + QString::fromStdString(f.name);
      if (!f.file.empty() && f.file != "??")
        line += QStringLiteral("\n      %1:%2").arg(QString::fromStdString(f.file)).arg(f.line);
      lines << line;
    }
  }
  stack_->setPlainText(lines.join(QLatin1Char('\n')));
}

QString SnapshotView::figuresText() const { return figures_->text(); }

QString SnapshotView::stackText() const { return stack_->toPlainText(); }

}  // namespace shardscope::ui
