#include "core/util/units.h"

#include <cmath>
#include <cstdio>

namespace shardscope::core {

std::string formatFixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string formatGrouped(double v, int decimals) {
  std::string s = formatFixed(v, decimals);
  const std::size_t sign = (!s.empty() && s[0] == '-') ? 1 : 0;
  std::size_t end = s.find('.');
  if (end == std::string::npos) end = s.size();
  if (end - sign <= 3 || s.find_first_not_of("-0123456789.") != std::string::npos) return s;  // small, or inf/nan
  std::string out = s.substr(0, sign);
  const std::size_t digits = end - sign;
  for (std::size_t i = 0; i < digits; ++i) {
    if (i > 0 && (digits - i) % 3 == 0) out += ',';
    out += s[sign + i];
  }
  out += s.substr(end);
  return out;
}

std::string formatCount(std::int64_t n) { return formatGrouped(static_cast<double>(n), 0); }

std::string formatElements(std::int64_t n) {
  char buf[32];
  if (n >= 1000000)
    std::snprintf(buf, sizeof buf, "%.1fM", static_cast<double>(n) / 1e6);
  else if (n >= 1000)
    std::snprintf(buf, sizeof buf, "%.0fk", static_cast<double>(n) / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(n));
  return std::string(buf) + " elements";
}

std::string formatBytes(double bytes, int decimals) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  double v = bytes;
  while (std::fabs(v) >= 1024.0 && u < 5) {
    v /= 1024.0;
    ++u;
  }
  char buf[48];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%.0f B", v);
  else
    std::snprintf(buf, sizeof buf, "%.*f %s", decimals, v, units[u]);
  return buf;
}

std::string formatMsFromNs(std::int64_t ns, int decimals) { return formatFixed(static_cast<double>(ns) / 1e6, decimals) + " ms"; }

std::string formatMs(double ms) {
  const double a = std::fabs(ms);
  if (a >= 10'000.0) return formatGrouped(ms / 1000.0, 2) + " s";
  if (a >= 100.0) return formatGrouped(ms, 1) + " ms";
  if (a >= 1.0) return formatGrouped(ms, 2) + " ms";
  if (a >= 0.01 || a == 0.0) return formatGrouped(ms, 3) + " ms";
  return formatGrouped(ms * 1000.0, 2) + " \u00b5s";
}

std::string formatDurationNs(double ns) {
  const double a = std::fabs(ns);
  if (a < 1e3) return formatFixed(ns, 0) + " ns";
  if (a < 1e6) return formatFixed(ns / 1e3, a < 1e4 ? 2 : 1) + " \u00b5s";
  if (a < 1e9) return formatFixed(ns / 1e6, a < 1e7 ? 3 : (a < 1e8 ? 2 : 1)) + " ms";
  return formatFixed(ns / 1e9, 3) + " s";
}

std::string formatSeconds(double s) {
  if (std::fabs(s) < 1.0) return formatGrouped(s * 1000.0, 0) + " ms";
  return formatGrouped(s, 2) + " s";
}

std::string formatPercent(double pct, int decimals) { return formatGrouped(pct, decimals) + " %"; }

std::string formatSi(double v, const char* unit) {
  char buf[64];
  if (v >= 1e9)
    std::snprintf(buf, sizeof buf, "%.2f G%s", v / 1e9, unit);
  else if (v >= 1e6)
    std::snprintf(buf, sizeof buf, "%.2f M%s", v / 1e6, unit);
  else if (v >= 1e3)
    std::snprintf(buf, sizeof buf, "%.1f k%s", v / 1e3, unit);
  else
    std::snprintf(buf, sizeof buf, "%.0f %s", v, unit);
  return buf;
}

}  // namespace shardscope::core
