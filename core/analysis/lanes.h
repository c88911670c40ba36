#pragma once
// Which tracks of a rank are its "device lanes": the GPU streams, or, for a CPU run without any, its
// CPU threads and communication lanes (docs/METRICS.md).
#include "core/storage/trace_store.h"

namespace shardscope::core {

inline bool rankHasGpuWork(const RunSummary& summary, Id rankId) {
  for (const auto& t : summary.tracks)
    if (t.track.rankId == rankId && t.track.kind == TrackKind::GpuStream && t.eventCount > 0) return true;
  return false;
}

inline bool isDeviceLane(TrackKind k, bool rankHasGpu) {
  return rankHasGpu ? k == TrackKind::GpuStream : (k == TrackKind::CpuThread || k == TrackKind::Comm);
}

}  // namespace shardscope::core
