#include "core/report/svg_chart.h"
#include "core/util/units.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace shardscope::core {
namespace {

std::string num(double v) { return formatFixed(v, 1); }

// Cuts a label to about `maxChars` characters (by bytes, never inside a UTF-8 sequence).
std::string shorten(const std::string& s, std::size_t maxChars) {
  if (s.size() <= maxChars || maxChars < 2) return s;
  std::size_t cut = maxChars - 1;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return s.substr(0, cut) + "\u2026";
}

struct Frame {
  double left = 64, top = 36, right = 16, bottom = 44;
  double width = 720, height = 320;
  double plotW() const { return width - left - right; }
  double plotH() const { return height - top - bottom; }
};

}  // namespace

AxisTicks niceTicks(double lo, double hi, int target) {
  AxisTicks t;
  if (!std::isfinite(lo) || !std::isfinite(hi)) lo = 0, hi = 1;
  if (hi < lo) std::swap(lo, hi);
  if (hi - lo < 1e-12) {
    const double pad = std::abs(hi) > 0 ? std::abs(hi) * 0.5 : 1.0;
    hi += pad;
    if (lo != 0) lo -= pad;
  }
  const double raw = (hi - lo) / std::max(1, target);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    step = m * mag;
    if (step >= raw) break;
  }
  t.step = step;
  t.lo = std::floor(lo / step + 1e-9) * step;
  t.hi = std::ceil(hi / step - 1e-9) * step;
  for (double v = t.lo; v <= t.hi + step * 1e-6; v += step) t.values.push_back(std::abs(v) < step * 1e-9 ? 0.0 : v);
  return t;
}

std::string tickLabel(double v) {
  char buf[32];
  const double a = std::abs(v);
  if (a != 0 && (a >= 1e7 || a < 1e-3))
    std::snprintf(buf, sizeof buf, "%.2g", v);
  else if (a >= 100 || v == std::round(v))
    std::snprintf(buf, sizeof buf, "%.0f", v);
  else if (a >= 1)
    std::snprintf(buf, sizeof buf, "%.1f", v);
  else
    std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

ChartRange chartRange(const Chart& c) {
  ChartRange r;
  bool anyX = false;
  double y1 = 0, y0 = 0;
  if (c.kind == Chart::Kind::StackedBars) {
    for (std::size_t k = 0; k < c.categories.size(); ++k) {
      double sum = 0;
      for (const auto& s : c.series)
        if (k < s.y.size() && s.y[k]) sum += std::max(0.0, *s.y[k]);
      y1 = std::max(y1, sum);
    }
  } else {
    for (const auto& s : c.series) {
      for (std::size_t i = 0; i < s.y.size(); ++i) {
        if (!s.y[i]) continue;
        y1 = std::max(y1, *s.y[i]);
        y0 = std::min(y0, *s.y[i]);
        if (c.kind == Chart::Kind::Line && i < s.x.size()) {
          if (!anyX) r.x0 = r.x1 = s.x[i];
          r.x0 = std::min(r.x0, s.x[i]);
          r.x1 = std::max(r.x1, s.x[i]);
          anyX = true;
        }
      }
    }
  }
  if (c.marker) y1 = std::max(y1, c.marker->y);
  if (anyX && r.x1 <= r.x0) r.x1 = r.x0 + 1;
  r.y0 = y0;
  r.y1 = y1 > y0 ? y1 : y0 + 1;
  return r;
}

std::string chartColor(std::size_t index) { return palette::hex(palette::series(index)); }

palette::Rgb chartMarkColor(const Chart& c, std::size_t series, std::size_t category) {
  if (c.perRunBars) return c.best && category == *c.best ? palette::kBestBar : palette::kBar;
  if (series < c.series.size() && c.series[series].color) return *c.series[series].color;
  return palette::series(series);
}

bool appendMarkupEntity(std::string& out, char ch) {
  switch (ch) {
    case '&':
      out += "&amp;";
      return true;
    case '<':
      out += "&lt;";
      return true;
    case '>':
      out += "&gt;";
      return true;
    case '"':
      out += "&quot;";
      return true;
    case '\'':
      out += "&#39;";
      return true;
    default:
      return false;
  }
}

std::string xmlEscape(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  for (char ch : s) {
    if (appendMarkupEntity(out, ch)) continue;
    // Control characters other than tab/newline are not allowed in XML 1.0.
    if (static_cast<unsigned char>(ch) < 0x20 && ch != '\t' && ch != '\n' && ch != '\r')
      out += ' ';
    else
      out += ch;
  }
  return out;
}

std::string renderSvg(const Chart& c, int width, int height, bool standalone) {
  Frame f;
  f.width = width;
  // Legend rows under the plot: items flow left to right.
  std::vector<std::pair<double, int>> legendPos;  // x, row
  {
    double x = f.left;
    int row = 0;
    for (const auto& s : c.series) {
      const double w = 26 + 7.0 * static_cast<double>(std::min<std::size_t>(s.name.size(), 40));
      if (x + w > f.width - f.right && x > f.left) {
        x = f.left;
        ++row;
      }
      legendPos.emplace_back(x, row);
      x += w + 12;
    }
    const int rows = c.series.empty() ? 0 : legendPos.back().second + 1;
    f.height = height + rows * 18 + 8;
    f.bottom += rows * 18 + 8;
  }
  const ChartRange range = chartRange(c);
  const AxisTicks yt = niceTicks(range.y0, range.y1, 5);
  auto yPix = [&](double v) { return f.top + f.plotH() * (1.0 - (v - yt.lo) / (yt.hi - yt.lo)); };

  std::string o;
  // Inline SVG in HTML5 needs no namespace (and the HTML report carries no URL at all).
  o += standalone ? "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\"" : "<svg";
  o += " role=\"img\" viewBox=\"0 0 " + num(f.width) + " " + num(f.height) +
       "\" width=\"100%\" preserveAspectRatio=\"xMidYMid meet\" font-family=\"sans-serif\" font-size=\"12\">";
  o += "<title>" + xmlEscape(c.title) + "</title>";
  o += "<rect x=\"0\" y=\"0\" width=\"" + num(f.width) + "\" height=\"" + num(f.height) + "\" fill=\"#ffffff\"/>";
  o += "<text x=\"" + num(f.left) + "\" y=\"20\" font-size=\"14\" font-weight=\"bold\" fill=\"#222\">" + xmlEscape(c.title) +
       "</text>";
  // Y grid and labels.
  for (double v : yt.values) {
    const double y = yPix(v);
    o += "<line x1=\"" + num(f.left) + "\" y1=\"" + num(y) + "\" x2=\"" + num(f.width - f.right) + "\" y2=\"" + num(y) +
         "\" stroke=\"#e3e3e3\" stroke-width=\"1\"/>";
    o += "<text x=\"" + num(f.left - 6) + "\" y=\"" + num(y + 4) + "\" text-anchor=\"end\" fill=\"#444\">" +
         xmlEscape(tickLabel(v)) + "</text>";
  }
  if (!c.yLabel.empty())
    o += "<text transform=\"translate(14," + num(f.top + f.plotH() / 2) +
         ") rotate(-90)\" text-anchor=\"middle\" fill=\"#444\">" + xmlEscape(c.yLabel) + "</text>";
  const double axisY = f.top + f.plotH();
  o += "<line x1=\"" + num(f.left) + "\" y1=\"" + num(axisY) + "\" x2=\"" + num(f.width - f.right) + "\" y2=\"" + num(axisY) +
       "\" stroke=\"#888\" stroke-width=\"1\"/>";

  if (c.kind == Chart::Kind::Line) {
    const AxisTicks xt = niceTicks(range.x0, range.x1, 6);
    const double x0 = range.x0, x1 = range.x1;
    auto xPix = [&](double v) { return f.left + f.plotW() * (x1 > x0 ? (v - x0) / (x1 - x0) : 0.5); };
    for (double v : xt.values) {
      if (v < x0 - 1e-9 * (x1 - x0) || v > x1 + 1e-9 * (x1 - x0)) continue;
      o += "<text x=\"" + num(xPix(v)) + "\" y=\"" + num(axisY + 16) + "\" text-anchor=\"middle\" fill=\"#444\">" +
           xmlEscape(tickLabel(v)) + "</text>";
    }
    for (std::size_t si = 0; si < c.series.size(); ++si) {
      const auto& s = c.series[si];
      std::string pts;
      auto flush = [&] {
        if (!pts.empty())
          o += "<polyline fill=\"none\" stroke=\"" + palette::hex(chartMarkColor(c, si, std::string::npos)) +
               "\" stroke-width=\"1.5\" points=\"" + pts + "\"/>";
        pts.clear();
      };
      const std::size_t n = std::min(s.x.size(), s.y.size());
      for (std::size_t i = 0; i < n; ++i) {
        if (!s.y[i]) {
          flush();
          continue;
        }
        pts += (pts.empty() ? "" : " ") + num(xPix(s.x[i])) + "," + num(yPix(*s.y[i]));
        if (n <= 40)
          o += "<circle cx=\"" + num(xPix(s.x[i])) + "\" cy=\"" + num(yPix(*s.y[i])) + "\" r=\"2.5\" fill=\"" +
               palette::hex(chartMarkColor(c, si, std::string::npos)) + "\"/>";
      }
      flush();
    }
    if (c.marker) {
      const double mx = xPix(c.marker->x), my = yPix(c.marker->y);
      o += "<circle cx=\"" + num(mx) + "\" cy=\"" + num(my) + "\" r=\"5\" fill=\"none\" stroke=\"#D00000\" stroke-width=\"2\"/>";
      const bool right = mx < f.left + f.plotW() * 0.6;
      o += "<text x=\"" + num(right ? mx + 8 : mx - 8) + "\" y=\"" + num(std::max(f.top + 10, my - 8)) + "\" text-anchor=\"" +
           (right ? "start" : "end") + "\" fill=\"#D00000\">" + xmlEscape(c.marker->label) + "</text>";
    }
  } else {
    const std::size_t groups = c.categories.size();
    const double slot = groups ? f.plotW() / static_cast<double>(groups) : f.plotW();
    const std::size_t maxChars = static_cast<std::size_t>(std::max(4.0, slot / 7.0));
    for (std::size_t k = 0; k < groups; ++k) {
      const double cx = f.left + slot * (static_cast<double>(k) + 0.5);
      o += "<text x=\"" + num(cx) + "\" y=\"" + num(axisY + 16) + "\" text-anchor=\"middle\" fill=\"#333\"><title>" +
           xmlEscape(c.categories[k]) + "</title>" + xmlEscape(shorten(c.categories[k], maxChars)) + "</text>";
      if (c.kind == Chart::Kind::StackedBars) {
        const double bw = std::min(80.0, slot * 0.6);
        double acc = 0;
        for (std::size_t si = 0; si < c.series.size(); ++si) {
          const auto& s = c.series[si];
          if (k >= s.y.size() || !s.y[k] || *s.y[k] <= 0) continue;
          const double yTop = yPix(acc + *s.y[k]), yBot = yPix(acc);
          o += "<rect x=\"" + num(cx - bw / 2) + "\" y=\"" + num(yTop) + "\" width=\"" + num(bw) + "\" height=\"" +
               num(std::max(0.0, yBot - yTop)) + "\" fill=\"" + palette::hex(chartMarkColor(c, si, k)) + "\"><title>" +
               xmlEscape(s.name) + ": " + xmlEscape(tickLabel(*s.y[k])) + "</title></rect>";
          acc += *s.y[k];
        }
        o += "<text x=\"" + num(cx) + "\" y=\"" + num(yPix(acc) - 4) + "\" text-anchor=\"middle\" fill=\"#222\">" +
             xmlEscape(tickLabel(acc)) + "</text>";
      } else {
        const std::size_t n = std::max<std::size_t>(1, c.series.size());
        const double bw = std::min(48.0, slot * 0.7 / static_cast<double>(n));
        for (std::size_t si = 0; si < c.series.size(); ++si) {
          const auto& s = c.series[si];
          if (k >= s.y.size() || !s.y[k]) continue;
          const double x = cx - bw * static_cast<double>(n) / 2 + bw * static_cast<double>(si);
          const double yv = yPix(*s.y[k]), y0 = yPix(std::max(0.0, yt.lo));
          o += "<rect x=\"" + num(x) + "\" y=\"" + num(std::min(yv, y0)) + "\" width=\"" + num(bw * 0.9) + "\" height=\"" +
               num(std::abs(y0 - yv)) + "\" fill=\"" + palette::hex(chartMarkColor(c, si, k)) + "\"><title>" + xmlEscape(s.name) +
               ": " + xmlEscape(tickLabel(*s.y[k])) + "</title></rect>";
          o += "<text x=\"" + num(x + bw * 0.45) + "\" y=\"" + num(std::min(yv, y0) - 4) +
               "\" text-anchor=\"middle\" font-size=\"10\" fill=\"#222\">" + xmlEscape(tickLabel(*s.y[k])) + "</text>";
        }
      }
    }
  }
  if (!c.xLabel.empty())
    o += "<text x=\"" + num(f.left + f.plotW() / 2) + "\" y=\"" + num(axisY + 34) + "\" text-anchor=\"middle\" fill=\"#444\">" +
         xmlEscape(c.xLabel) + "</text>";
  for (std::size_t si = 0; si < c.series.size(); ++si) {
    const double lx = legendPos[si].first;
    const double ly = height + 12 + legendPos[si].second * 18.0;
    o += "<rect x=\"" + num(lx) + "\" y=\"" + num(ly - 10) + "\" width=\"18\" height=\"10\" fill=\"" +
         palette::hex(chartMarkColor(c, si, std::string::npos)) + "\"/>";
    o += "<text x=\"" + num(lx + 24) + "\" y=\"" + num(ly) + "\" fill=\"#333\">" + xmlEscape(shorten(c.series[si].name, 40)) +
         "</text>";
  }
  o += "</svg>";
  return o;
}

}  // namespace shardscope::core
