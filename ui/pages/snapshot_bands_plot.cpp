#include "ui/pages/snapshot_bands_plot.h"

#include <QElapsedTimer>

#include <algorithm>
#include <cmath>

#include "ui/charts/chart_style.h"

namespace shardscope::ui {
namespace {
constexpr std::uint32_t kShades = 40;  // lighter(90) .. lighter(129)
}  // namespace

SnapshotBandsPlot::SnapshotBandsPlot(QCPAxis* keyAxis, QCPAxis* valueAxis) : QCPAbstractPlottable(keyAxis, valueAxis) {
  setAntialiased(false);  // pixel-aligned rectangles, the fast path of the raster engine
  setAntialiasedFill(false);
  setSelectable(QCP::stNone);
  setBrush(QBrush(categoryColor(3)));
  setPen(Qt::NoPen);
}

void SnapshotBandsPlot::setBands(const core::SnapshotBandDetail* detail, const std::vector<std::uint8_t>* categories,
                                 core::TimeNs origin, double bytesPerUnit) {
  detail_ = detail;
  categories_ = categories;
  origin_ = origin;
  bytesPerUnit_ = bytesPerUnit;
}

QColor SnapshotBandsPlot::categoryColor(int category) {
  // parameters, gradients, optimizer_state, activations, comm_buffers, unknown (core::snapshotCategoryNames)
  static const QColor colors[] = {QColor(0x4e79a7), QColor(0x59a14f), QColor(0xf28e2c),
                                  QColor(0xe15759), QColor(0xaf7aa1), QColor(0x9c755f)};
  return colors[std::clamp(category, 0, 5)];
}

QColor SnapshotBandsPlot::smallColor() { return QColor(0xc8c8c8); }

QColor SnapshotBandsPlot::pieceColor(const core::SnapshotBandPiece& piece) const {
  if (piece.allocation < 0) return smallColor();
  const auto a = static_cast<std::size_t>(piece.allocation);
  const int category = categories_ && a < categories_->size() ? (*categories_)[a] : 5;
  // A shade per allocation (a hash of its index), so neighbouring bands of one category stay apart.
  const auto h = static_cast<std::uint32_t>(piece.allocation) * 2654435761u;
  static const std::vector<QColor> shades = [] {  // QColor::lighter converts to HSV and back: once per shade
    std::vector<QColor> v;
    for (int c = 0; c < 6; ++c)
      for (std::uint32_t k = 0; k < kShades; ++k) v.push_back(categoryColor(c).lighter(90 + static_cast<int>(k)));
    return v;
  }();
  return shades[static_cast<std::size_t>(std::clamp(category, 0, 5)) * kShades + (h >> 24) % kShades];
}

double SnapshotBandsPlot::keyOf(int bucket) const { return static_cast<double>(detail_->bucketStart(bucket) - origin_) / 1e6; }

const core::SnapshotBandPiece* SnapshotBandsPlot::pieceAt(double keyMs, double value) const {
  if (!detail_) return nullptr;
  const int b = detail_->bucketOf(origin_ + static_cast<core::TimeNs>(std::floor(keyMs * 1e6)));
  if (b < 0) return nullptr;
  const double bytes = value * bytesPerUnit_;
  for (const auto& p : detail_->pieces)
    if (p.bucket0 <= b && b < p.bucket1 && static_cast<double>(p.bottom) <= bytes && bytes < static_cast<double>(p.top))
      return &p;
  return nullptr;
}

void SnapshotBandsPlot::draw(QCPPainter* painter) {
  QElapsedTimer timer;
  timer.start();
  if (!detail_ || detail_->buckets == 0 || !keyAxis() || !valueAxis()) return;
  painter->setPen(Qt::NoPen);
  const QRect clip = clipRect();
  const core::SnapshotBandPiece* selected = nullptr;
  for (const auto& p : detail_->pieces) {
    const QPointF a = coordsToPixels(keyOf(p.bucket0), static_cast<double>(p.top) / bytesPerUnit_);
    const QPointF b = coordsToPixels(keyOf(p.bucket1), static_cast<double>(p.bottom) / bytesPerUnit_);
    QRectF r = QRectF(a, b).normalized();
    if (!r.intersects(clip)) continue;
    // At least a pixel wide and tall: a band never vanishes between pixels.
    if (r.width() < 1) r.setWidth(1);
    if (r.height() < 1) r.setTop(r.bottom() - 1);
    painter->fillRect(r, pieceColor(p));
    if (p.allocation >= 0 && p.allocation == selected_) selected = &p;
  }
  if (selected) {  // the selected band outlined, every piece of it
    painter->setPen(QPen(Qt::black, 1.5));
    painter->setBrush(Qt::NoBrush);
    for (const auto& p : detail_->pieces)
      if (p.allocation == selected_)
        painter->drawRect(QRectF(coordsToPixels(keyOf(p.bucket0), static_cast<double>(p.top) / bytesPerUnit_),
                                 coordsToPixels(keyOf(p.bucket1), static_cast<double>(p.bottom) / bytesPerUnit_))
                              .normalized());
  }
  lastPaintMs_ = static_cast<double>(timer.nsecsElapsed()) / 1e6;
}

void SnapshotBandsPlot::drawLegendIcon(QCPPainter* painter, const QRectF& rect) const {
  painter->setPen(Qt::NoPen);
  painter->setBrush(brush());
  painter->drawRect(rect);
}

double SnapshotBandsPlot::selectTest(const QPointF& pos, bool onlySelectable, QVariant*) const {
  if (onlySelectable || !detail_ || !keyAxis() || !valueAxis()) return -1;
  double key = 0, value = 0;
  pixelsToCoords(pos, key, value);
  return pieceAt(key, value) ? 0 : -1;
}

QCPRange SnapshotBandsPlot::getKeyRange(bool& foundRange, QCP::SignDomain) const {
  foundRange = detail_ && detail_->buckets > 0;
  if (!foundRange) return {};
  return {keyOf(0), keyOf(detail_->buckets)};
}

QCPRange SnapshotBandsPlot::getValueRange(bool& foundRange, QCP::SignDomain, const QCPRange&) const {
  foundRange = detail_ && !detail_->bucketTop.empty();
  if (!foundRange) return {};
  return {0, static_cast<double>(*std::max_element(detail_->bucketTop.begin(), detail_->bucketTop.end())) / bytesPerUnit_};
}

}  // namespace shardscope::ui
