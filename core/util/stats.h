#pragma once
// Small statistics the analyses share: sample mean and variance, and Welch's two-sample t-test (the
// significance test of a comparison with repeated runs: comparison.h's verdict).
#include <optional>
#include <vector>

namespace shardscope::core {

double mean(const std::vector<double>& x);  // 0 for an empty sample
// The unbiased sample variance (n - 1 in the denominator); 0 with fewer than two values.
double sampleVariance(const std::vector<double>& x);

struct TTest {
  double t = 0;   // (mean a - mean b) / its standard error
  double df = 0;  // Welch-Satterthwaite degrees of freedom
  double p = 1;   // two-sided p-value
};
// Welch's t-test of "a and b have the same mean" (unequal variances). nullopt when either sample has
// fewer than two values or both have no variance at all (equal means then read as p = 1, different
// ones as p = 0: the test cannot tell, the caller decides).
std::optional<TTest> welchTTest(const std::vector<double>& a, const std::vector<double>& b);

// Two-sided tail probability of Student's t distribution: P(|T| >= |t|) with `df` degrees of freedom.
double studentTwoSidedP(double t, double df);
// The regularised incomplete beta function I_x(a, b), 0 <= x <= 1, a, b > 0.
double incompleteBeta(double a, double b, double x);

}  // namespace shardscope::core
