#pragma once
// The stacked allocations of a memory snapshot as one QCustomPlot plottable: paints the pieces of a
// core::SnapshotBandDetail (the bands of the visible range at about one bucket per pixel, the
// allocations under a pixel's worth of bytes merged) as filled rectangles, coloured by the
// allocation's category (each allocation a shade of its category's colour, so neighbours stay
// apart; the merged pieces grey), the selected allocation outlined. One plottable instead of a
// QCPCurve per band: a frame paints a few thousand rectangles whatever the snapshot's size.
#include <QColor>

#include <cstdint>
#include <vector>

#include "core/analysis/snapshot_bands.h"
#include "ui/charts/qcp.h"

namespace shardscope::ui {

class SnapshotBandsPlot : public QCPAbstractPlottable {
 public:
  explicit SnapshotBandsPlot(QCPAxis* keyAxis, QCPAxis* valueAxis);

  // What to paint: `detail`'s pieces, times relative to `origin` in ms, bytes in `bytesPerUnit`;
  // `categories` per allocation (core::snapshotAllocationCategories). The vectors must outlive the plot's use.
  void setBands(const core::SnapshotBandDetail* detail, const std::vector<std::uint8_t>* categories, core::TimeNs origin,
                double bytesPerUnit);
  void setSelectedAllocation(std::int64_t allocation) { selected_ = allocation; }

  // The colour of a category (an index of core::snapshotCategoryNames()) and of the merged pieces.
  static QColor categoryColor(int category);
  static QColor smallColor();
  // The colour a piece is painted with.
  QColor pieceColor(const core::SnapshotBandPiece& piece) const;
  // The piece under the plot coordinates (ms, value in bytesPerUnit); nullptr where none is drawn.
  const core::SnapshotBandPiece* pieceAt(double keyMs, double value) const;
  double lastPaintMs() const { return lastPaintMs_; }

  double selectTest(const QPointF& pos, bool onlySelectable, QVariant* details = nullptr) const override;
  QCPRange getKeyRange(bool& foundRange, QCP::SignDomain inSignDomain = QCP::sdBoth) const override;
  QCPRange getValueRange(bool& foundRange, QCP::SignDomain inSignDomain = QCP::sdBoth,
                         const QCPRange& inKeyRange = QCPRange()) const override;

 protected:
  void draw(QCPPainter* painter) override;
  void drawLegendIcon(QCPPainter* painter, const QRectF& rect) const override;

 private:
  double keyOf(int bucket) const;

  const core::SnapshotBandDetail* detail_ = nullptr;
  const std::vector<std::uint8_t>* categories_ = nullptr;
  core::TimeNs origin_ = 0;
  double bytesPerUnit_ = 1;
  std::int64_t selected_ = -1;
  double lastPaintMs_ = 0;
};

}  // namespace shardscope::ui
