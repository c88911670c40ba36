#pragma once
// The samples of one memory curve plus coarser copies, so that re-bucketing a window for the screen
// costs about the number of pixels, not the number of samples. Level k+1 keeps, of each run of kFanout
// consecutive level-k entries, the first largest one (its own time and value), so a level-k entry is
// the first maximum of a fixed block of kFanout^k raw samples. downsample() feeds core::downsampleMax
// with the raw samples of the window's partial blocks at both edges and the coarsest level's entries
// for the whole blocks between them (a level with at least kMinPerBucket entries per bucket): the
// maximum of the window, and so every peak, comes out at its exact time and value.
#include <cstddef>
#include <vector>

#include "core/model/types.h"

namespace shardscope::ui::charts {

class MaxPyramid {
 public:
  static constexpr std::size_t kFanout = 16;
  static constexpr std::size_t kMinPerBucket = 4;

  MaxPyramid() = default;
  // samples must be sorted by time.
  explicit MaxPyramid(std::vector<core::CounterSample> samples);

  const std::vector<core::CounterSample>& samples() const { return levels_.empty() ? empty_ : levels_.front(); }
  bool empty() const { return samples().empty(); }
  std::size_t size() const { return samples().size(); }
  std::size_t levelCount() const { return levels_.size(); }
  const std::vector<core::CounterSample>& level(std::size_t k) const { return levels_.at(k); }
  double maxValue() const;
  std::size_t bytes() const;

  // At most `buckets` samples over [t0, t1), each bucket's largest (as core::downsampleMax).
  std::vector<core::CounterSample> downsample(core::TimeNs t0, core::TimeNs t1, int buckets) const;
  // The level downsample() reads for a window of n raw samples.
  std::size_t levelFor(std::size_t n, int buckets) const;

 private:
  std::vector<std::vector<core::CounterSample>> levels_;  // [0]: every sample
  static const std::vector<core::CounterSample> empty_;
};

}  // namespace shardscope::ui::charts
