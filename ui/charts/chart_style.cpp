#include "ui/charts/chart_style.h"

#include <QFontMetrics>
#include <QLocale>

#include <array>
#include <cmath>

#include "ui/charts/qcp.h"

#include "core/report/palette.h"
#include "core/util/units.h"

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

// The formats themselves are core's (core/util/units.h): one convention for the app, the CLI and
// the reports.
QString formatBytes(double bytes, int decimals) { return QString::fromStdString(core::formatBytes(bytes, decimals)); }

QString formatNumber(double v, int decimals) { return QString::fromStdString(core::formatGrouped(v, decimals)); }

QString formatMs(double ms) { return QString::fromStdString(core::formatMs(ms)); }

QString formatSeconds(double s) { return QString::fromStdString(core::formatSeconds(s)); }

QString formatPercent(double pct, int decimals) { return QString::fromStdString(core::formatPercent(pct, decimals)); }

// The colours are core's (core/report/palette.h): the reports draw with the same ones.
QColor seriesColor(int i) { return QColor::fromRgb(core::palette::series(static_cast<std::size_t>(i < 0 ? 0 : i))); }

QColor stepPartColor(core::palette::StepPart part) { return QColor::fromRgb(core::palette::stepPart(part)); }
QColor memoryCategoryColor(core::MemoryCategory c) { return QColor::fromRgb(core::palette::memoryCategory(c)); }
QColor barColor() { return QColor::fromRgb(core::palette::kBar); }
QColor bestBarColor() { return QColor::fromRgb(core::palette::kBestBar); }
QColor betterColor() { return QColor::fromRgb(core::palette::kBetter); }
QColor worseColor() { return QColor::fromRgb(core::palette::kWorse); }
QColor mutedTextColor() { return QColor::fromRgb(core::palette::kMutedText); }

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
