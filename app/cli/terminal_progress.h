#pragma once
// A progress bar on stderr when it is a terminal (nothing otherwise), throttled to ~10 redraws/s.
#include <chrono>
#include <string>

#include "core/util/progress.h"

namespace shardscope::cli {

class TerminalProgress {
 public:
  TerminalProgress();
  ~TerminalProgress();
  void update(const core::Progress& p);
  void finish();  // clears the bar line
  core::ProgressFn callback();

 private:
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_, last_;
};

}  // namespace shardscope::cli
