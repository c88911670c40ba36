#pragma once
// Dynamic loss scaling for fp16 training, DeepSpeed's DynamicLossScaler rule (PyTorch's GradScaler
// is the same rule with hysteresis 1 and a growth interval of 2000): the loss is multiplied by
// scale() before backward; after the gradients are reduced, every rank reports whether any of its
// gradients is inf or NaN and all ranks take the same decision (update(overflow) with the flag
// all-reduced):
//  - overflow: the step is skipped; the scale is divided by 2 (never below the minimum) once
//    `hysteresis` overflows have been seen since the scale last grew, else the hysteresis counter
//    drops by one;
//  - no overflow: after `window` steps since the last overflow (or since the start) the scale doubles
//    and the hysteresis counter is reset.
// A static scale (> 0) never changes and never skips (DeepSpeed's static loss scaling).
// Pure C++: tests drive it without LibTorch.
#include <algorithm>
#include <cmath>
#include <cstdint>

namespace shardscope::runtime {

class LossScaler {
 public:
  LossScaler(double staticScale, int initialScalePower, int window, int hysteresis, double minScale)
      : dynamic_(!(staticScale > 0)),
        scale_(staticScale > 0 ? staticScale : std::ldexp(1.0, initialScalePower)),
        window_(std::max(1, window)),
        hysteresis_(std::max(1, hysteresis)),
        curHysteresis_(std::max(1, hysteresis)),
        minScale_(minScale) {}

  bool dynamic() const { return dynamic_; }
  double scale() const { return scale_; }

  // Decides the step just computed; returns true when it must be skipped. Call once per optimizer
  // step on every rank with the same (all-reduced) flag.
  bool update(bool overflow) {
    if (!dynamic_) return false;
    bool skip = false;
    if (overflow) {
      skip = true;
      if (hysteresis_ == 1 || curHysteresis_ == 1)
        scale_ = std::max(scale_ / 2.0, minScale_);
      else
        --curHysteresis_;
      lastOverflowIter_ = iter_;
    } else if ((iter_ - lastOverflowIter_) % window_ == 0) {
      curHysteresis_ = hysteresis_;
      scale_ *= 2.0;
    }
    ++iter_;
    return skip;
  }

 private:
  bool dynamic_;
  double scale_;
  int window_;
  int hysteresis_;
  int curHysteresis_;
  double minScale_;
  std::int64_t iter_ = 0;
  std::int64_t lastOverflowIter_ = -1;
};

}  // namespace shardscope::runtime
