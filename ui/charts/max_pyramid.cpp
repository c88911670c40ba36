#include "ui/charts/max_pyramid.h"

#include <algorithm>

#include "core/analysis/memory_peaks.h"

namespace shardscope::ui::charts {

const std::vector<core::CounterSample> MaxPyramid::empty_;

MaxPyramid::MaxPyramid(std::vector<core::CounterSample> samples) {
  samples.shrink_to_fit();
  levels_.push_back(std::move(samples));
  // Coarser levels while they still hold more than a screen's worth.
  while (levels_.back().size() > kFanout * 256) {
    const auto& below = levels_.back();
    std::vector<core::CounterSample> up;
    up.reserve((below.size() + kFanout - 1) / kFanout);
    for (std::size_t i = 0; i < below.size(); i += kFanout) {
      const std::size_t end = std::min(below.size(), i + kFanout);
      std::size_t best = i;
      for (std::size_t j = i + 1; j < end; ++j)
        if (below[j].value > below[best].value) best = j;  // strict: the first maximum
      up.push_back(below[best]);
    }
    levels_.push_back(std::move(up));
  }
}

double MaxPyramid::maxValue() const {
  if (levels_.empty() || levels_.back().empty()) return 0.0;
  double m = levels_.back().front().value;
  for (const auto& s : levels_.back()) m = std::max(m, s.value);
  return m;
}

std::size_t MaxPyramid::bytes() const {
  std::size_t n = 0;
  for (const auto& l : levels_) n += l.capacity() * sizeof(core::CounterSample);
  return n;
}

std::size_t MaxPyramid::levelFor(std::size_t n, int buckets) const {
  const std::size_t want = kMinPerBucket * static_cast<std::size_t>(std::max(1, buckets));
  std::size_t k = 0, block = 1;
  while (k + 1 < levels_.size() && n / (block * kFanout) >= want) {
    ++k;
    block *= kFanout;
  }
  return k;
}

std::vector<core::CounterSample> MaxPyramid::downsample(core::TimeNs t0, core::TimeNs t1, int buckets) const {
  const auto& raw = samples();
  if (raw.empty() || buckets <= 0 || t1 <= t0) return {};
  auto before = [](const core::CounterSample& s, core::TimeNs t) { return s.tsNs < t; };
  const std::size_t lo = static_cast<std::size_t>(std::lower_bound(raw.begin(), raw.end(), t0, before) - raw.begin());
  const std::size_t hi = static_cast<std::size_t>(
      std::lower_bound(raw.begin() + static_cast<std::ptrdiff_t>(lo), raw.end(), t1, before) - raw.begin());
  const std::size_t k = levelFor(hi - lo, buckets);
  if (k == 0) {
    if (lo == 0 && hi == raw.size()) return core::downsampleMax(raw, t0, t1, buckets);
    return core::downsampleMax(std::vector<core::CounterSample>(raw.begin() + static_cast<std::ptrdiff_t>(lo),
                                                                raw.begin() + static_cast<std::ptrdiff_t>(hi)),
                               t0, t1, buckets);
  }
  std::size_t block = 1;
  for (std::size_t i = 0; i < k; ++i) block *= kFanout;
  const std::size_t a = (lo + block - 1) / block;  // first whole block
  const std::size_t b = hi / block;                // end of the whole blocks
  const auto& level = levels_[k];
  std::vector<core::CounterSample> merged;
  merged.reserve((a * block - lo) + (b - a) + (hi - b * block));
  merged.insert(merged.end(), raw.begin() + static_cast<std::ptrdiff_t>(lo),
                raw.begin() + static_cast<std::ptrdiff_t>(a * block));
  merged.insert(merged.end(), level.begin() + static_cast<std::ptrdiff_t>(a), level.begin() + static_cast<std::ptrdiff_t>(b));
  merged.insert(merged.end(), raw.begin() + static_cast<std::ptrdiff_t>(b * block),
                raw.begin() + static_cast<std::ptrdiff_t>(hi));
  return core::downsampleMax(merged, t0, t1, buckets);
}

}  // namespace shardscope::ui::charts
