#include "core/util/stats.h"

#include <cmath>
#include <limits>
#include <numeric>

namespace shardscope::core {
namespace {

// The continued fraction of the incomplete beta function (modified Lentz's method), valid for
// x < (a + 1) / (a + b + 2); incompleteBeta uses the symmetry I_x(a, b) = 1 - I_{1-x}(b, a) otherwise.
double betaContinuedFraction(double a, double b, double x) {
  constexpr int kMaxIterations = 300;
  constexpr double kEpsilon = 1e-15, kTiny = 1e-300;
  const double qab = a + b, qap = a + 1, qam = a - 1;
  double c = 1, d = 1 - qab * x / qap;
  if (std::abs(d) < kTiny) d = kTiny;
  d = 1 / d;
  double h = d;
  for (int m = 1; m <= kMaxIterations; ++m) {
    const double m2 = 2.0 * m;
    double aa = m * (b - m) * x / ((qam + m2) * (a + m2));  // the even step
    d = 1 + aa * d;
    if (std::abs(d) < kTiny) d = kTiny;
    c = 1 + aa / c;
    if (std::abs(c) < kTiny) c = kTiny;
    d = 1 / d;
    h *= d * c;
    aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));  // the odd step
    d = 1 + aa * d;
    if (std::abs(d) < kTiny) d = kTiny;
    c = 1 + aa / c;
    if (std::abs(c) < kTiny) c = kTiny;
    d = 1 / d;
    const double delta = d * c;
    h *= delta;
    if (std::abs(delta - 1) < kEpsilon) break;
  }
  return h;
}

}  // namespace

double mean(const std::vector<double>& x) {
  return x.empty() ? 0.0 : std::accumulate(x.begin(), x.end(), 0.0) / static_cast<double>(x.size());
}

double sampleVariance(const std::vector<double>& x) {
  if (x.size() < 2) return 0;
  const double m = mean(x);
  double ss = 0;
  for (double v : x) ss += (v - m) * (v - m);
  return ss / static_cast<double>(x.size() - 1);
}

double incompleteBeta(double a, double b, double x) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const double front = std::exp(std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x));
  if (x < (a + 1) / (a + b + 2)) return front * betaContinuedFraction(a, b, x) / a;
  return 1 - front * betaContinuedFraction(b, a, 1 - x) / b;
}

double studentTwoSidedP(double t, double df) {
  if (!(df > 0) || !std::isfinite(t)) return std::isfinite(t) ? 1.0 : 0.0;
  return incompleteBeta(df / 2, 0.5, df / (df + t * t));
}

std::optional<TTest> welchTTest(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() < 2 || b.size() < 2) return std::nullopt;
  const double na = static_cast<double>(a.size()), nb = static_cast<double>(b.size());
  const double va = sampleVariance(a) / na, vb = sampleVariance(b) / nb;
  const double se2 = va + vb;
  if (!(se2 > 0)) return std::nullopt;
  TTest r;
  r.t = (mean(a) - mean(b)) / std::sqrt(se2);
  r.df = se2 * se2 / ((va * va) / (na - 1) + (vb * vb) / (nb - 1));
  r.p = studentTwoSidedP(r.t, r.df);
  return r;
}

}  // namespace shardscope::core
