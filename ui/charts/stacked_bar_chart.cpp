#include "ui/charts/stacked_bar_chart.h"

#include <algorithm>

namespace shardscope::ui::charts {

StackedBarChart::StackedBarChart(QWidget* parent) : QCustomPlot(parent) {
  applyPlotStyle(this);
  plotLayout()->insertRow(0);
  title_ = new QCPTextElement(this, QString(), QFont(font().family(), 10, QFont::DemiBold));
  title_->setTextColor(QColor::fromRgb(0x24292f));
  plotLayout()->addElement(0, 0, title_);
  // Legend in a column right of the axis rect, at the top (an empty element takes the height below).
  auto* legendColumn = new QCPLayoutGrid;
  plotLayout()->addElement(1, 1, legendColumn);
  plotLayout()->setColumnStretchFactor(1, 0.001);
  legendColumn->setMinimumMargins(QMargins(0, 0, 0, 0));
  axisRect()->insetLayout()->take(legend);
  legendColumn->addElement(0, 0, legend);
  legendColumn->addElement(1, 0, new QCPLayoutElement(this));
  legendColumn->setRowStretchFactor(0, 0.001);
  legendColumn->setRowStretchFactor(1, 1.0);
  legend->setMargins(QMargins(6, 4, 6, 4));
  legend->setVisible(true);
  xAxis->grid()->setVisible(false);
  xAxis->setTickLength(0, 0);
  xAxis->setSubTicks(false);
  yAxis->setNumberFormat(QStringLiteral("g"));  // ticks keep their decimals (2.5, 12.5), no trailing zeros
  yAxis->setNumberPrecision(4);
  yAxis->ticker()->setTickCount(4);
  setMinimumSize(260, 200);
  connect(this, &QCustomPlot::afterLayout, this, [this] { fitBarLabels(this, labels_); });
}

void StackedBarChart::clearStacks(const QString& title) { setStacks(title, {}, {}); }

void StackedBarChart::setStacks(const QString& title, const QStringList& groups, const std::vector<Category>& categories) {
  title_->setText(title);
  clearPlottables();
  bars_.clear();
  for (QCPItemText* t : labels_) removeItem(t);
  labels_.clear();
  if (limitLine_) removeItem(limitLine_);
  if (limitText_) removeItem(limitText_);
  limitLine_ = nullptr;
  limitText_ = nullptr;
  limit_.reset();
  const auto n = static_cast<std::size_t>(groups.size());
  totals_.assign(n, 0);
  for (const auto& c : categories)
    for (std::size_t g = 0; g < n && g < c.bytes.size(); ++g) totals_[g] += c.bytes[g];
  const std::int64_t maxTotal = totals_.empty() ? 0 : *std::max_element(totals_.begin(), totals_.end());
  if (unit_ == Unit::Nanoseconds) {
    scale_.factor = 1e6;
    scale_.suffix = QStringLiteral("ms");
  } else {
    scale_ = byteScaleFor(static_cast<double>(maxTotal));
  }
  yAxis->setLabel(scale_.suffix);

  auto ticker = QSharedPointer<QCPAxisTickerText>::create();
  for (std::size_t g = 0; g < n; ++g) ticker->addTick(static_cast<double>(g + 1), groups[static_cast<int>(g)]);
  xAxis->setTicker(ticker);
  xAxis->setRange(0.4, static_cast<double>(n) + 0.6);
  yAxis->setRange(0, maxTotal > 0 ? static_cast<double>(maxTotal) / scale_.factor * 1.18 : 1.0);

  QCPBars* below = nullptr;
  for (const auto& c : categories) {
    auto* b = new QCPBars(xAxis, yAxis);
    b->setName(c.name);
    b->setWidth(n > 12 ? 0.8 : 0.55);
    b->setPen(QPen(c.color.darker(120), 1));
    b->setBrush(c.color);
    b->setAntialiased(false);
    QVector<double> keys, values;
    for (std::size_t g = 0; g < n; ++g) {
      keys << static_cast<double>(g + 1);
      values << (g < c.bytes.size() ? static_cast<double>(c.bytes[g]) / scale_.factor : 0.0);
    }
    b->setData(keys, values, true);
    if (below) b->moveAbove(below);
    below = b;
    bars_.push_back(b);
  }
  // QCPLegend lists plottables in creation order; the stack reads bottom-up, so reverse it.
  legend->clearItems();
  for (auto it = bars_.rbegin(); it != bars_.rend(); ++it) (*it)->addToLegend();
  legend->setVisible(!bars_.empty());

  for (std::size_t g = 0; g < n; ++g) {
    auto* t = new QCPItemText(this);
    t->position->setType(QCPItemPosition::ptPlotCoords);
    t->position->setCoords(static_cast<double>(g + 1), static_cast<double>(totals_[g]) / scale_.factor);
    t->setPositionAlignment(Qt::AlignHCenter | Qt::AlignBottom);
    t->setPadding(QMargins(0, 0, 0, 3));
    t->setFont(xAxis->tickLabelFont());
    t->setColor(QColor::fromRgb(0x24292f));
    t->setText(unit_ == Unit::Nanoseconds ? formatMs(static_cast<double>(totals_[g]) / 1e6)
                                          : formatBytes(static_cast<double>(totals_[g])));
    t->setClipToAxisRect(false);
    labels_.push_back(t);
  }
  replot(QCustomPlot::rpQueuedReplot);
}

void StackedBarChart::setLimit(std::optional<std::int64_t> amount, const QString& label, const QString& overNote) {
  if (limitLine_) removeItem(limitLine_);
  if (limitText_) removeItem(limitText_);
  limitLine_ = nullptr;
  limitText_ = nullptr;
  limit_ = amount;
  const std::size_t n = totals_.size();
  for (std::size_t g = 0; g < n && g < labels_.size(); ++g) {
    const bool over = amount && totals_[g] > *amount;
    QString text = unit_ == Unit::Nanoseconds ? formatMs(static_cast<double>(totals_[g]) / 1e6)
                                              : formatBytes(static_cast<double>(totals_[g]));
    if (over && !overNote.isEmpty()) text += QStringLiteral("\n") + overNote;
    labels_[g]->setText(text);
    labels_[g]->setColor(over ? QColor::fromRgb(0xc6, 0x28, 0x28) : QColor::fromRgb(0x24292f));
  }
  if (amount && *amount > 0) {
    const double y = static_cast<double>(*amount) / scale_.factor;
    if (yAxis->range().upper < y * 1.12) yAxis->setRangeUpper(y * 1.12);
    limitLine_ = new QCPItemLine(this);
    limitLine_->start->setCoords(0.4, y);
    limitLine_->end->setCoords(static_cast<double>(n) + 0.6, y);
    limitLine_->setPen(QPen(QColor::fromRgb(0xc6, 0x28, 0x28), 1.5, Qt::DashLine));
    limitText_ = new QCPItemText(this);
    limitText_->position->setType(QCPItemPosition::ptPlotCoords);
    limitText_->position->setCoords(0.45, y);
    limitText_->setPositionAlignment(Qt::AlignLeft | Qt::AlignBottom);
    limitText_->setColor(QColor::fromRgb(0xc6, 0x28, 0x28));
    limitText_->setFont(xAxis->tickLabelFont());
    limitText_->setText(label);
  }
  replot(QCustomPlot::rpQueuedReplot);
}

QString StackedBarChart::totalLabel(int group) const {
  return group >= 0 && static_cast<std::size_t>(group) < labels_.size() ? labels_[static_cast<std::size_t>(group)]->text()
                                                                        : QString();
}

double StackedBarChart::plottedTotal(int group) const {
  const double key = static_cast<double>(group + 1);
  double sum = 0;
  for (QCPBars* b : bars_) {
    auto it = b->data()->findBegin(key, false);
    if (it != b->data()->constEnd() && it->key == key) sum += it->value;
  }
  return sum;
}

}  // namespace shardscope::ui::charts
