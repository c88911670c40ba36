#pragma once
// Which tracks of a rank are its "device lanes": the GPU streams, or, for a CPU run without any, its
// CPU threads and communication lanes (docs/METRICS.md).
#include "core/storage/trace_store.h"

namespace shardscope::core {

inline bool rankHasGpuWork(const RunSummary& summary, RankId rankId) {
  for (const auto& t : summary.tracks)
    if (t.track.rankId == rankId && t.track.kind == TrackKind::GpuStream && t.eventCount > 0) return true;
  return false;
}

// A collective among one rank moves nothing between ranks: local work, not communication (docs/
// METRICS.md). A run we trained or simulated knows its world size; an imported trace may be one rank's
// file of a larger job, so there only the event's group size (1) says so.
inline bool runOfOneRank(const Run& run) {
  return (run.source == RunSource::Runtime || run.source == RunSource::Simulated) && run.worldSize == 1;
}
inline bool isLocalCollective(bool runOfOne, std::int32_t groupSize) { return runOfOne || groupSize == 1; }

inline bool isDeviceLane(TrackKind k, bool rankHasGpu) {
  return rankHasGpu ? k == TrackKind::GpuStream : (k == TrackKind::CpuThread || k == TrackKind::Comm);
}

}  // namespace shardscope::core
