#include "core/estimator/calibration.h"

namespace shardscope::core::estimator {

const std::vector<CalibrationConstant>& calibrationTable() {
  // The efficiency band: efficiencyMatching on the rows validate compares (2026-12-02): TT-8B-8G-1
  // 0.367, TT-8B-128G-1 0.360 (H100, selective op AC) ... TT-A100-L3-70B 0.683 (A100), rounded out.
  static const std::vector<CalibrationConstant> table = {
      {"efficiency", calib::kEfficiency, "fraction of the dense peak",
       "achieved fraction of the device's dense peak when nothing is measured (estimate --efficiency)", "assumed", ""},
      {"efficiency_low", calib::kEfficiencyLow, "fraction of the dense peak",
       "the low end of validate's uncalibrated interval: the lowest efficiency a published run reached", "fitted",
       "TT-8B-8G-1,TT-8B-128G-1"},
      {"efficiency_high", calib::kEfficiencyHigh, "fraction of the dense peak",
       "the high end of validate's uncalibrated interval: the highest efficiency a published run reached", "fitted",
       "TT-A100-L3-70B,TT-A100-L2-5"},
      {"headroom", calib::kHeadroom, "fraction of device memory",
       "memory the fit test keeps free (CUDA context, workspaces, fragmentation) (estimate --headroom)", "assumed", ""},
      {"host_link_gbps", calib::kHostLinkGBps, "GB/s", "device <-> host bandwidth for offload (PCIe 4.0 x16, effective)",
       "assumed", ""},
      {"cpu_optimizer_gbps", calib::kCpuOptimizerGBps, "GB/s", "CPU Adam's throughput over the optimizer state (offload)",
       "assumed", ""},
  };
  return table;
}

}  // namespace shardscope::core::estimator
