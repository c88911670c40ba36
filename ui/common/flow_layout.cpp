#include "ui/common/flow_layout.h"

#include <QWidget>

#include <algorithm>

namespace shardscope::ui {

FlowLayout::FlowLayout(QWidget* parent, int hSpacing, int vSpacing) : QLayout(parent), hSpacing_(hSpacing), vSpacing_(vSpacing) {
  setContentsMargins(0, 0, 0, 0);
}

FlowLayout::~FlowLayout() {
  while (QLayoutItem* item = takeAt(0)) delete item;
}

void FlowLayout::addItem(QLayoutItem* item) { items_.append(item); }

QLayoutItem* FlowLayout::itemAt(int index) const { return index >= 0 && index < items_.size() ? items_.at(index) : nullptr; }

QLayoutItem* FlowLayout::takeAt(int index) { return index >= 0 && index < items_.size() ? items_.takeAt(index) : nullptr; }

int FlowLayout::heightForWidth(int width) const { return arrange(QRect(0, 0, width, 0), false); }

QSize FlowLayout::minimumSize() const {
  QSize size;
  for (const QLayoutItem* item : items_)
    if (!item->isEmpty()) size = size.expandedTo(item->minimumSize());
  const QMargins m = contentsMargins();
  return size + QSize(m.left() + m.right(), m.top() + m.bottom());
}

QSize FlowLayout::sizeHint() const {
  // Everything in one row: what the layout would like when there is room.
  int width = 0, height = 0, n = 0;
  for (const QLayoutItem* item : items_) {
    if (item->isEmpty()) continue;
    width += item->sizeHint().width() + (n++ > 0 ? hSpacing_ : 0);
    height = std::max(height, item->sizeHint().height());
  }
  const QMargins m = contentsMargins();
  return QSize(width + m.left() + m.right(), height + m.top() + m.bottom());
}

void FlowLayout::setGeometry(const QRect& rect) {
  QLayout::setGeometry(rect);
  arrange(rect, true);
}

int FlowLayout::arrange(const QRect& rect, bool apply) const {
  const QRect area = rect.marginsRemoved(contentsMargins());
  int y = area.y();
  int i = 0;
  const int n = static_cast<int>(items_.size());
  while (i < n) {
    // One row: as many items as fit (at least one), at their preferred width.
    int rowEnd = i, rowWidth = 0, rowHeight = 0, inRow = 0;
    for (; rowEnd < n; ++rowEnd) {
      const QLayoutItem* item = items_.at(rowEnd);
      if (item->isEmpty()) continue;
      const int w = std::min(item->sizeHint().width(), std::max(area.width(), item->minimumSize().width()));
      const int needed = rowWidth + (inRow > 0 ? hSpacing_ : 0) + w;
      if (inRow > 0 && needed > area.width()) break;
      rowWidth = needed;
      rowHeight = std::max(rowHeight, item->sizeHint().height());
      ++inRow;
    }
    if (apply) {
      int x = area.x();
      for (int k = i; k < rowEnd; ++k) {
        QLayoutItem* item = items_.at(k);
        if (item->isEmpty()) continue;
        const QSize hint = item->sizeHint();
        const int w = std::min(hint.width(), std::max(area.width(), item->minimumSize().width()));
        const int h = std::min(hint.height(), rowHeight);
        item->setGeometry(QRect(x, y + (rowHeight - h) / 2, w, h));
        x += w + hSpacing_;
      }
    }
    if (inRow > 0) y += rowHeight + vSpacing_;
    i = rowEnd;
  }
  const int used = y > area.y() ? y - vSpacing_ - area.y() : 0;
  const QMargins m = contentsMargins();
  return used + m.top() + m.bottom();
}

}  // namespace shardscope::ui
