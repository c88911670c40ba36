#pragma once
// Every fitted or assumed number of the estimator's speed and fit models, named once (issue 47,
// item 4): its value, unit, meaning, where it comes from and, for a fitted one, the published rows
// it was fitted on (../shared/published). RecommendInput's defaults, the simulator's FLOPs profile
// and `validate`'s uncalibrated interval read these; docs/ESTIMATOR.md lists the table and a test
// checks the two agree.
#include <string_view>
#include <vector>

namespace shardscope::core::estimator {

namespace calib {
// Achieved fraction of the dense peak (MFU) when nothing is measured: assumed.
constexpr double kEfficiency = 0.4;
// The band of achieved efficiency in published runs: the lowest and highest efficiency at which the
// estimate meets a published tokens/s (efficiencyMatching), over every row `validate` can compare.
constexpr double kEfficiencyLow = 0.35;
constexpr double kEfficiencyHigh = 0.70;
// Fraction of device memory kept free by the fit test (CUDA context, workspaces, fragmentation): assumed.
constexpr double kHeadroom = 0.1;
// Device <-> host bandwidth for offload (PCIe 4.0 x16, effective) and CPU Adam's throughput over the
// optimizer state: assumed.
constexpr double kHostLinkGBps = 25;
constexpr double kCpuOptimizerGBps = 10;
}  // namespace calib

struct CalibrationConstant {
  std::string_view name;  // "efficiency"
  double value = 0;
  std::string_view unit;      // "fraction of the dense peak"
  std::string_view meaning;   // one line
  std::string_view source;    // "assumed", "fitted", a datasheet ...
  std::string_view fittedOn;  // the rows (ids, comma separated) a fitted value comes from; "" assumed
};
// In the order docs/ESTIMATOR.md lists them.
const std::vector<CalibrationConstant>& calibrationTable();

}  // namespace shardscope::core::estimator
