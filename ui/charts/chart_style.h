#pragma once
// Shared look and number formatting of Shardscope's charts and tables: one palette, one font size,
// byte/time units chosen from the data's magnitude.
#include <QColor>
#include <QString>

#include <vector>

#include "core/report/palette.h"

class QCustomPlot;
class QCPItemText;

namespace shardscope::ui::charts {

// A byte unit for an axis: values are divided by `factor` and labelled with `suffix`.
struct ByteScale {
  double factor = 1.0;
  QString suffix = QStringLiteral("B");
};
// The largest binary unit (B, KiB, MiB, GiB, TiB) in which maxBytes is at least 1.
ByteScale byteScaleFor(double maxBytes);

QString formatBytes(double bytes, int decimals = 1);  // "127.9 MiB"
QString formatMs(double ms);                          // "0.85 ms", "605.2 ms", "12.35 s"
QString formatSeconds(double s);                      // "312 ms", "1.82 s"
QString formatNumber(double v, int decimals = 0);     // "1,710"
QString formatPercent(double pct, int decimals = 1);  // "18.2 %"

// Colour of the i-th series (ranks, runs): core::palette::series (Okabe-Ito), the reports' colours too.
QColor seriesColor(int i);
// Colour of a part of the step (compute, exposed communication, other device work, idle).
QColor stepPartColor(core::palette::StepPart part);
// Colour of a memory category (core::palette::memoryCategory).
QColor memoryCategoryColor(core::MemoryCategory c);
// Colours for the chart's states (core::palette).
QColor barColor();      // an ordinary bar
QColor bestBarColor();  // the best run's bar
QColor betterColor();   // a delta in the good direction
QColor worseColor();    // a delta in the bad direction
QColor mutedTextColor();

// Fonts, grid and margins shared by every plot.
void applyPlotStyle(QCustomPlot* plot);

// Shows each of the labels written above bars one key unit apart only when its text fits in the
// bar's slot (so neighbours never overlap); call after the layout (QCustomPlot::afterLayout).
void fitBarLabels(QCustomPlot* plot, const std::vector<QCPItemText*>& labels, bool allowed = true);

}  // namespace shardscope::ui::charts
