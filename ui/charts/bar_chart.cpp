#include "ui/charts/bar_chart.h"

#include <QFontMetrics>
#include <QMouseEvent>
#include <QToolTip>

#include <algorithm>
#include <cmath>

#include "ui/charts/chart_style.h"

namespace shardscope::ui::charts {
namespace {

// Run names can be long ("zero3 bs8 seq2048 ckpt"): break them at spaces and elide each line.
QString tickLabel(const QString& name, const QFontMetrics& fm, int width) {
  const QStringList words = name.split(QLatin1Char(' '), Qt::SkipEmptyParts);
  QStringList lines;
  QString line;
  for (const QString& w : words) {
    const QString candidate = line.isEmpty() ? w : line + QLatin1Char(' ') + w;
    if (!line.isEmpty() && fm.horizontalAdvance(candidate) > width) {
      lines << line;
      line = w;
    } else {
      line = candidate;
    }
  }
  if (!line.isEmpty()) lines << line;
  if (lines.size() > 2) {
    lines[1] = lines.mid(1).join(QLatin1Char(' '));
    lines = lines.mid(0, 2);
  }
  for (QString& l : lines) l = fm.elidedText(l, Qt::ElideRight, width);
  return lines.join(QLatin1Char('\n'));
}

}  // namespace

BarChart::BarChart(QWidget* parent) : QCustomPlot(parent) {
  applyPlotStyle(this);
  plotLayout()->insertRow(0);
  title_ = new QCPTextElement(this, QString(), QFont(font().family(), 10, QFont::DemiBold));
  title_->setTextColor(QColor::fromRgb(0x24292f));
  plotLayout()->addElement(0, 0, title_);
  bars_ = new QCPBars(xAxis, yAxis);
  bestBars_ = new QCPBars(xAxis, yAxis);
  for (QCPBars* b : {bars_, bestBars_}) {
    b->setWidth(0.6);
    b->setAntialiased(false);
  }
  bars_->setPen(QPen(barColor().darker(115), 1));
  bars_->setBrush(barColor());
  bestBars_->setPen(QPen(bestBarColor().darker(115), 1));
  bestBars_->setBrush(bestBarColor());
  empty_ = new QCPItemText(this);
  empty_->position->setType(QCPItemPosition::ptAxisRectRatio);
  empty_->position->setCoords(0.5, 0.45);
  empty_->setColor(mutedTextColor());
  empty_->setTextAlignment(Qt::AlignCenter);
  empty_->setVisible(false);
  xAxis->grid()->setVisible(false);
  xAxis->setTickLength(0, 0);
  xAxis->setSubTicks(false);
  yAxis->setPadding(4);
  yAxis->ticker()->setTickCount(4);
  setMinimumSize(220, 180);
  connect(this, &QCustomPlot::afterLayout, this, [this] { fitBarLabels(this, labels_, !empty_->visible()); });
}

QString BarChart::title() const { return title_->text(); }

void BarChart::clearBars(const QString& title, const QString& emptyText) {
  setBars(
      title, {}, {}, std::nullopt, [](double v) { return QString::number(v); }, QString(), 1.0, emptyText);
}

QString BarChart::emptyNote() const { return empty_->visible() ? empty_->text() : QString(); }

void BarChart::setBars(const QString& title, const QStringList& labels, const std::vector<std::optional<double>>& values,
                       std::optional<std::size_t> best, const std::function<QString(double)>& valueText, const QString& axisLabel,
                       double axisScale, const QString& emptyText) {
  title_->setText(title);
  for (QCPItemText* l : labels_) removeItem(l);
  labels_.clear();
  values_.clear();
  valueTexts_.clear();
  best_ = best;
  QVector<double> keys, vals, bestKeys, bestVals;
  names_ = labels;
  double maxV = 0;
  for (std::size_t i = 0; i < static_cast<std::size_t>(labels.size()); ++i) {
    const double key = static_cast<double>(i + 1);
    std::optional<double> v;
    if (i < values.size() && values[i]) v = *values[i] * axisScale;
    values_.push_back(v);
    if (v) {
      maxV = std::max(maxV, *v);
      if (best && *best == i) {
        bestKeys << key;
        bestVals << *v;
      } else {
        keys << key;
        vals << *v;
      }
    }
  }
  bars_->setData(keys, vals, true);
  bestBars_->setData(bestKeys, bestVals, true);
  rebuildTicker();
  xAxis->setRange(0.4, static_cast<double>(labels.size()) + 0.6);
  const double top = maxV > 0 ? maxV * 1.22 : 1.0;
  yAxis->setRange(0, top);
  yAxis->setLabel(axisLabel);
  QFont labelFont = xAxis->tickLabelFont();
  for (std::size_t i = 0; i < values_.size(); ++i) {
    auto* t = new QCPItemText(this);
    t->setClipToAxisRect(false);
    t->position->setType(QCPItemPosition::ptPlotCoords);
    t->setPositionAlignment(Qt::AlignHCenter | Qt::AlignBottom);
    t->position->setCoords(static_cast<double>(i + 1), values_[i].value_or(0.0));
    t->setPadding(QMargins(0, 0, 0, 3));
    QFont f = labelFont;
    if (best && *best == i) f.setBold(true);
    t->setFont(f);
    if (values_[i]) {
      t->setText(valueText(*values_[i] / axisScale));
      t->setColor(best && *best == i ? bestBarColor().darker(120) : QColor::fromRgb(0x24292f));
    } else {
      t->setText(QStringLiteral("n/a"));
      t->setColor(mutedTextColor());
    }
    labels_.push_back(t);
    valueTexts_ << t->text();
  }
  // No value at all: a note instead of empty bars and a meaningless axis.
  const bool none = std::none_of(values_.begin(), values_.end(), [](const auto& v) { return v.has_value(); });
  empty_->setVisible(none);
  empty_->setText(emptyText.isEmpty() ? tr("No value for these runs") : emptyText);
  yAxis->setVisible(!none);
  replot(QCustomPlot::rpQueuedReplot);
}

void BarChart::rebuildTicker() {
  auto ticker = QSharedPointer<QCPAxisTickerText>::create();
  const QFontMetrics fm(xAxis->tickLabelFont());
  const int slot = std::max(60, (width() - 80) / std::max<int>(1, static_cast<int>(names_.size())));
  for (int i = 0; i < names_.size(); ++i) ticker->addTick(static_cast<double>(i + 1), tickLabel(names_[i], fm, slot - 8));
  xAxis->setTicker(ticker);
}

void BarChart::mouseMoveEvent(QMouseEvent* event) {
  QCustomPlot::mouseMoveEvent(event);
  const QPointF pos = event->position();
  const double key = xAxis->pixelToCoord(pos.x());
  const long i = std::lround(key) - 1;
  if (axisRect()->rect().contains(pos.toPoint()) && i >= 0 && i < static_cast<long>(values_.size()) &&
      std::abs(key - static_cast<double>(i + 1)) <= 0.3) {
    QToolTip::showText(event->globalPosition().toPoint(),
                       QStringLiteral("%1\n%2").arg(names_.value(static_cast<int>(i)), valueTexts_.value(static_cast<int>(i))),
                       this);
  } else {
    QToolTip::hideText();
  }
}

void BarChart::resizeEvent(QResizeEvent* event) {
  QCustomPlot::resizeEvent(event);
  rebuildTicker();
  replot(QCustomPlot::rpQueuedReplot);
}

std::optional<double> BarChart::plottedValue(std::size_t i) const {
  const double key = static_cast<double>(i + 1);
  for (QCPBars* b : {bars_, bestBars_}) {
    auto it = b->data()->findBegin(key, false);
    if (it != b->data()->constEnd() && it->key == key) return it->value;
  }
  return std::nullopt;
}

QString BarChart::valueLabel(std::size_t i) const { return i < labels_.size() ? labels_[i]->text() : QString(); }

}  // namespace shardscope::ui::charts
