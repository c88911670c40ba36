#include "core/estimator/interference.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "core/util/units.h"

namespace shardscope::core::estimator {

std::vector<std::pair<double, double>> mergeIntervals(std::vector<std::pair<double, double>> iv) {
  std::sort(iv.begin(), iv.end());
  std::vector<std::pair<double, double>> out;
  for (const auto& [a, b] : iv) {
    if (!(b > a)) continue;
    if (!out.empty() && a <= out.back().second)
      out.back().second = std::max(out.back().second, b);
    else
      out.push_back({a, b});
  }
  return out;
}

double overlapFraction(double a, double b, const std::vector<std::pair<double, double>>& merged) {
  if (!(b > a)) return 0;
  // The first interval that ends after a.
  auto it = std::lower_bound(merged.begin(), merged.end(), a, [](const auto& iv, double t) { return iv.second <= t; });
  double covered = 0;
  for (; it != merged.end() && it->first < b; ++it) covered += std::min(b, it->second) - std::max(a, it->first);
  return std::clamp(covered / (b - a), 0.0, 1.0);
}

double cpuHostOverheadWeight(Strategy s) {
  switch (s) {
    case Strategy::Ddp:
      return 1.0;
    case Strategy::Zero1:
      return 1.07;
    case Strategy::Zero2:
      return 1.5;
    case Strategy::Zero3:
    case Strategy::ZeroPPHpz:
      return 3.0;
    case Strategy::FsdpFull:
    case Strategy::Hsdp:
      return 4.6;
    case Strategy::FsdpGradOp:
      return 3.6;
  }
  return 1.0;
}

double baseDuration(const InterferenceSample& s, double k) { return s.durS / (1.0 + k * s.overlap); }

namespace {

// Sum of squared relative residuals at k, each group's base in closed form: with x_i = 1 + k f_i,
// minimising sum ((b x_i - d_i) / d_i)^2 over b gives b = sum(x_i / d_i) / sum(x_i^2 / d_i^2).
double residual(const std::map<int, std::vector<const InterferenceSample*>>& groups, double k) {
  double sse = 0;
  for (const auto& [g, v] : groups) {
    double num = 0, den = 0;
    for (const auto* s : v) {
      const double x = 1.0 + k * s->overlap;
      num += x / s->durS;
      den += x * x / (s->durS * s->durS);
    }
    const double b = den > 0 ? num / den : 0;
    for (const auto* s : v) {
      const double r = (b * (1.0 + k * s->overlap) - s->durS) / s->durS;
      sse += r * r;
    }
  }
  return sse;
}

}  // namespace

InterferenceFit fitInterference(const std::vector<InterferenceSample>& samples, double fallback) {
  InterferenceFit f;
  f.k = fallback;
  std::map<int, std::vector<const InterferenceSample*>> groups;
  double w = 0, wf = 0;
  for (const auto& s : samples) {
    if (!(s.durS > 0) || !std::isfinite(s.overlap)) continue;
    groups[s.group].push_back(&s);
    w += s.durS;
    wf += s.durS * s.overlap;
    ++f.samples;
  }
  f.meanOverlap = w > 0 ? wf / w : 0;
  // The spread of overlap inside groups (what tells k apart from the groups' bases).
  double sw = 0, sv = 0;
  for (const auto& [g, v] : groups) {
    if (v.size() < 2) continue;
    double gw = 0, gm = 0;
    for (const auto* s : v) {
      gw += s->durS;
      gm += s->durS * s->overlap;
    }
    gm /= gw;
    for (const auto* s : v) {
      sv += s->durS * (s->overlap - gm) * (s->overlap - gm);
      sw += s->durS;
    }
  }
  f.spread = sw > 0 ? std::sqrt(sv / sw) : 0;
  const auto def = [&](const std::string& why) {
    f.note = "interference k " + formatFixed(f.k, 2) + " (the device class's measured default: " + why + ")";
    return f;
  };
  if (f.samples < 20) return def("fewer than 20 compute spans");
  if (f.spread < 0.15) return def("the run's spans overlap communication too evenly to tell, spread " + formatFixed(f.spread, 2));
  // Golden-section search of the residual over k in [0, 3] (it is smooth and, in practice, unimodal).
  double lo = 0, hi = 3;
  const double phi = (std::sqrt(5.0) - 1) / 2;
  double x1 = hi - phi * (hi - lo), x2 = lo + phi * (hi - lo);
  double f1 = residual(groups, x1), f2 = residual(groups, x2);
  for (int i = 0; i < 60; ++i) {
    if (f1 < f2) {
      hi = x2;
      x2 = x1;
      f2 = f1;
      x1 = hi - phi * (hi - lo);
      f1 = residual(groups, x1);
    } else {
      lo = x1;
      x1 = x2;
      f1 = f2;
      x2 = lo + phi * (hi - lo);
      f2 = residual(groups, x2);
    }
  }
  const double k = 0.5 * (lo + hi);
  const double r0 = residual(groups, 0.0), rk = residual(groups, k);
  f.r2Gain = r0 > 0 ? std::max(0.0, 1.0 - rk / r0) : 0;
  if (f.r2Gain < kMinInterferenceResidualGain)
    return def("a fit of " + std::to_string(f.samples) + " compute spans, k " + formatFixed(k, 2) +
               ", lowered their residual by only " + formatFixed(f.r2Gain * 100, 0) + " %");
  f.k = k;
  f.identified = true;
  f.note = "interference k " + formatFixed(f.k, 2) + " fitted from " + std::to_string(f.samples) +
           " compute spans (overlap spread " + formatFixed(f.spread, 2) + ", residual lowered by " +
           formatFixed(f.r2Gain * 100, 0) + " %)";
  return f;
}

}  // namespace shardscope::core::estimator
