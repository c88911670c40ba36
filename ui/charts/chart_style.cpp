#include "ui/charts/chart_style.h"

#include <QFontMetrics>
#include <QLocale>

#include <array>
#include <cmath>

#include "ui/charts/qcp.h"

namespace shardscope::ui::charts {

ByteScale byteScaleFor(double maxBytes) {
  static const std::array<const char*, 5> kSuffix = {"B", "KiB", "MiB", "GiB", "TiB"};
  double factor = 1.0;
  std::size_t i = 0;
  const double v = std::abs(maxBytes);
  while (i + 1 < kSuffix.size() && v >= factor * 1024.0) {
    factor *= 1024.0;
    ++i;
  }
  return {factor, QString::fromLatin1(kSuffix[i])};
}

QString formatBytes(double bytes, int decimals) {
  const ByteScale s = byteScaleFor(bytes);
  if (s.factor == 1.0) return QStringLiteral("%1 B").arg(formatNumber(bytes, 0));
  return QStringLiteral("%1 %2").arg(formatNumber(bytes / s.factor, decimals), s.suffix);
}

QString formatNumber(double v, int decimals) {
  static const QLocale locale(QLocale::English, QLocale::UnitedStates);
  return locale.toString(v, 'f', decimals);
}

QString formatMs(double ms) {
  const double a = std::abs(ms);
  if (a >= 10'000.0) return QStringLiteral("%1 s").arg(formatNumber(ms / 1000.0, 2));
  if (a >= 100.0) return QStringLiteral("%1 ms").arg(formatNumber(ms, 1));
  if (a >= 1.0) return QStringLiteral("%1 ms").arg(formatNumber(ms, 2));
  if (a >= 0.01 || a == 0.0) return QStringLiteral("%1 ms").arg(formatNumber(ms, 3));
  return QStringLiteral("%1 µs").arg(formatNumber(ms * 1000.0, 2));
}

QString formatSeconds(double s) {
  if (std::abs(s) < 1.0) return QStringLiteral("%1 ms").arg(formatNumber(s * 1000.0, 0));
  return QStringLiteral("%1 s").arg(formatNumber(s, 2));
}

QString formatPercent(double pct, int decimals) { return QStringLiteral("%1 %").arg(formatNumber(pct, decimals)); }

QColor seriesColor(int i) {
  static const std::array<QRgb, 10> kTableau = {0x4e79a7, 0xf28e2b, 0xe15759, 0x76b7b2, 0x59a14f,
                                                0xedc948, 0xb07aa1, 0xff9da7, 0x9c755f, 0xbab0ac};
  return QColor::fromRgb(kTableau[static_cast<std::size_t>(i < 0 ? 0 : i) % kTableau.size()]);
}

QColor barColor() { return QColor::fromRgb(0x9fb4cc); }
QColor bestBarColor() { return QColor::fromRgb(0x2e7d32); }
QColor betterColor() { return QColor::fromRgb(0x1a7f37); }
QColor worseColor() { return QColor::fromRgb(0xc62828); }
QColor mutedTextColor() { return QColor::fromRgb(0x6a737d); }

void applyPlotStyle(QCustomPlot* plot) {
  QFont font = plot->font();
  font.setPointSizeF(9.0);
  QFont labelFont = font;
  labelFont.setPointSizeF(9.0);
  const QColor axisColor = QColor::fromRgb(0x57606a);
  const QColor gridColor = QColor::fromRgb(0xe4e7eb);
  for (QCPAxis* axis : {plot->xAxis, plot->yAxis}) {
    axis->setTickLabelFont(font);
    axis->setLabelFont(labelFont);
    axis->setTickLabelColor(axisColor);
    axis->setLabelColor(axisColor);
    axis->setBasePen(QPen(axisColor, 1));
    axis->setTickPen(QPen(axisColor, 1));
    axis->setSubTickPen(QPen(axisColor, 1));
    axis->grid()->setPen(QPen(gridColor, 1, Qt::SolidLine));
    axis->grid()->setSubGridVisible(false);
    axis->grid()->setZeroLinePen(Qt::NoPen);
  }
  plot->legend->setFont(font);
  plot->legend->setBorderPen(Qt::NoPen);
  plot->legend->setBrush(QBrush(QColor(255, 255, 255, 220)));
  plot->setBackground(QBrush(Qt::white));
  plot->setAntialiasedElements(QCP::aePlottables | QCP::aeItems);
}

void fitBarLabels(QCustomPlot* plot, const std::vector<QCPItemText*>& labels, bool allowed) {
  const double slot = std::abs(plot->xAxis->coordToPixel(1.0) - plot->xAxis->coordToPixel(0.0));
  for (QCPItemText* l : labels) {
    const QFontMetrics fm(l->font());
    int widest = 0;  // a label may have several lines
    for (const QString& line : l->text().split(QLatin1Char('\n'))) widest = std::max(widest, fm.horizontalAdvance(line));
    l->setVisible(allowed && widest + 6 <= slot);
  }
}

}  // namespace shardscope::ui::charts
