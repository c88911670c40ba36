#pragma once
// One unit convention for every surface (docs/METRICS.md, "Units"): memory in binary units (B, KiB,
// MiB, GiB, TiB), labelled; bandwidth in GB/s (1e9 B/s, as nccl-tests prints it).
#include <string>

namespace shardscope::core {

// "512 B", "1.50 KiB", "38.84 GiB" (two decimals above bytes).
std::string formatBytes(double bytes, int decimals = 2);

}  // namespace shardscope::core
