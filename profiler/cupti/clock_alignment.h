#pragma once
// GPU -> host clock alignment. CUPTI's timestamps (cuptiGetTimestamp, activity records) are on
// Linux interpolated into CLOCK_REALTIME, like our host spans (capture::nowNs), but not guaranteed
// to be the same reading: we sample pairs (cupti, host) at start and stop and map CUPTI time t to
// t + offset, offset = the median of (host - cupti) over the pairs with the shortest host round
// trips (Kineto's approach with its TSC converter: many paired samples, median). Pure maths.
#include <cstdint>
#include <vector>

#include "core/model/types.h"

namespace shardscope::cupti {

class ClockAlignment {
 public:
  // One pair: host time read before and after the CUPTI read (the round trip bounds the error).
  void addSample(core::TimeNs hostBefore, core::TimeNs cupti, core::TimeNs hostAfter);
  // CUPTI time + offset() = host time. 0 without samples.
  core::TimeNs offset() const;
  // Half of the median round trip of the kept samples: the alignment's uncertainty.
  core::TimeNs uncertainty() const;
  std::size_t samples() const { return samples_.size(); }
  core::TimeNs toHost(core::TimeNs cuptiNs) const { return cuptiNs + offset(); }

 private:
  struct Sample {
    core::TimeNs offset;     // (before + after) / 2 - cupti
    core::TimeNs roundTrip;  // after - before
  };
  std::vector<Sample> samples_;
};

}  // namespace shardscope::cupti
