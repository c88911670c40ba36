#pragma once
// Chart data of a report and a small dependency-free SVG writer for it (line chart with a peak
// marker, stacked bars, grouped bars). The HTML report inlines the SVG; the PDF writer (ui/report)
// paints the same Chart with QPainter using the same axis ticks and colours, so both look alike.
// Every text in a chart (titles, run names, series names) is treated as untrusted and XML-escaped.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/report/palette.h"

namespace shardscope::core {

struct ChartSeries {
  std::string name;
  std::vector<double> x;                 // line charts: x of each point (same length as y)
  std::vector<std::optional<double>> y;  // line: y per point; bars: one value per category (nullopt: none)
  std::optional<palette::Rgb> color;     // default: palette::series(index of the series)
};

struct ChartMarker {
  std::size_t series = 0;
  double x = 0, y = 0;
  std::string label;  // e.g. "peak 3.2 GiB (rank 1)"
};

struct Chart {
  enum class Kind { Line, StackedBars, GroupedBars };
  Kind kind = Kind::Line;
  std::string id;  // stable, e.g. "step-breakdown", "memory-run-3"
  std::string title;
  std::string xLabel, yLabel;
  std::string note;                     // shown under the chart (e.g. what was downsampled)
  std::vector<std::string> categories;  // bars: one per bar group (usually one per run)
  std::vector<ChartSeries> series;      // line: lines; stacked: the stacked segments; grouped: bars per group
  std::optional<ChartMarker> marker;    // line charts: the peak
  // Grouped bars of one series, one figure per run: drawn as the app's bar charts draw them, every
  // bar in palette::kBar and the best run's (when the comparison names one) in palette::kBestBar.
  bool perRunBars = false;
  std::optional<std::size_t> best;
};

// Axis ticks: "nice" values (1, 2, 2.5, 5 x 10^k) covering [lo, hi] with about `target` intervals.
struct AxisTicks {
  double lo = 0, hi = 1, step = 1;
  std::vector<double> values;
};
AxisTicks niceTicks(double lo, double hi, int target = 5);
// Short tick label ("0", "2.5", "1200", "1.2e+07").
std::string tickLabel(double v);
// Data range of a chart: x (line charts) and y (0 included; stacked: the sums).
struct ChartRange {
  double x0 = 0, x1 = 1, y0 = 0, y1 = 1;
};
ChartRange chartRange(const Chart& chart);

// The series colour (hex "#rrggbb"): core/report/palette.h, the palette the app uses too (Okabe-Ito
// order, readable in print and for the common colour-vision deficiencies).
std::string chartColor(std::size_t index);
// The colour of series `series` in category `category` of `chart` (its own colour, the palette's, or
// the best/ordinary bar colour); the legend asks with category = npos.
palette::Rgb chartMarkColor(const Chart& chart, std::size_t series, std::size_t category);

// XML/HTML text escaping (& < > " ').
std::string xmlEscape(std::string_view s);
// Appends the entity for one of & < > " ' (true), or nothing (false): shared by the HTML and XML escapes.
bool appendMarkupEntity(std::string& out, char ch);

// The chart as a standalone <svg> element (no external references, no script), `width` x `height`
// user units, scaling to its container's width (viewBox + width 100%). Text is escaped. Inline (for
// HTML5) it carries no namespace; `standalone` adds the XML declaration and the SVG namespace for a
// .svg file.
std::string renderSvg(const Chart& chart, int width = 720, int height = 320, bool standalone = false);

}  // namespace shardscope::core
