#include "app/cli/terminal_progress.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace shardscope::cli {

TerminalProgress::TerminalProgress()
    : enabled_(isatty(STDERR_FILENO) == 1 && std::getenv("SHARDSCOPE_NO_PROGRESS") == nullptr),
      start_(std::chrono::steady_clock::now()),
      last_() {}

TerminalProgress::~TerminalProgress() { finish(); }

core::ProgressFn TerminalProgress::callback() {
  return [this](const core::Progress& p) { update(p); };
}

void TerminalProgress::update(const core::Progress& p) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (drawn_ && now - last_ < std::chrono::milliseconds(100) && !(p.total && p.done >= p.total)) return;
  last_ = now;
  const double secs = std::chrono::duration<double>(now - start_).count();
  constexpr int kWidth = 30;
  char line[256];
  if (p.total > 0) {
    const double frac = std::min(1.0, static_cast<double>(p.done) / static_cast<double>(p.total));
    const int fill = static_cast<int>(frac * kWidth);
    char bar[kWidth + 1];
    for (int i = 0; i < kWidth; ++i) bar[i] = i < fill ? '#' : '.';
    bar[kWidth] = 0;
    if (p.unit == "bytes")
      std::snprintf(line, sizeof line, "\r%-28.28s [%s] %5.1f%% %8.1f/%.1f MB %6.1fs", p.stage.c_str(), bar, frac * 100,
                    static_cast<double>(p.done) / 1e6, static_cast<double>(p.total) / 1e6, secs);
    else
      std::snprintf(line, sizeof line, "\r%-28.28s [%s] %5.1f%% %llu/%llu %s %6.1fs", p.stage.c_str(), bar, frac * 100,
                    static_cast<unsigned long long>(p.done), static_cast<unsigned long long>(p.total), p.unit.c_str(), secs);
  } else {
    std::snprintf(line, sizeof line, "\r%-28.28s %llu %s %6.1fs", p.stage.c_str(), static_cast<unsigned long long>(p.done),
                  p.unit.c_str(), secs);
  }
  std::fputs(line, stderr);
  std::fflush(stderr);
  drawn_ = true;
}

void TerminalProgress::finish() {
  if (enabled_ && drawn_) {
    std::fputs("\r\033[K", stderr);
    std::fflush(stderr);
    drawn_ = false;
  }
}

}  // namespace shardscope::cli
