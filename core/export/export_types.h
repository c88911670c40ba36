#pragma once
// Options and results shared by the exporters (Kineto JSON per rank, merged Perfetto JSON).
#include <cstdint>
#include <string>
#include <vector>

#include "core/util/progress.h"

namespace shardscope::core {

struct ExportOptions {
  ProgressFn progress;                  // called from the calling thread; unit "events"
  const CancelToken* cancel = nullptr;  // checked every few thousand rows
  bool gzip = true;                     // Kineto only: the Perfetto exporter follows its path's ".gz"
  // zlib level. 1 is several times faster than 6 on trace JSON for ~25% larger files, and the
  // export is otherwise bound by compression.
  int gzipLevel = 1;
};

struct ExportResult {
  std::vector<std::string> files;  // the files written, in rank order
  std::uint64_t events = 0;        // rows of `events` written (flows, counters, metadata not counted)
  std::uint64_t bytes = 0;         // bytes on disk (compressed size when gzip)
};

}  // namespace shardscope::core
