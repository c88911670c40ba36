#pragma once
// What a rank's memory holds over time, by category (issue 46): the runtime's counting allocator
// records each category's live bytes as a counter track (core::memoryCategoryTrackName); this reads
// them back as one step function per category on a shared time axis, so that the Memory page can
// stack them and anyone can ask what the memory held at a moment (the peak's breakdown included).
// Imported traces have no such tracks: their timelines are empty.
#include <cstdint>
#include <utility>
#include <vector>

#include "core/model/memory_category.h"
#include "core/storage/trace_store.h"
#include "core/util/progress.h"

namespace shardscope::core {

struct MemoryCategoryTimeline {
  int rank = 0;
  int deviceType = 0;
  int deviceId = 0;
  std::vector<MemoryCategory> categories;  // those with a track, in display order (memoryCategories())
  std::vector<TimeNs> times;               // every time a category changed, ascending, distinct
  // bytes[c][i]: the live bytes of categories[c] from times[i] until times[i + 1] (a step function;
  // 0 before a category's first sample).
  std::vector<std::vector<double>> bytes;

  // Live bytes per category at t (the last change at or before t), in `categories` order; zeros
  // before the first change.
  std::vector<std::pair<MemoryCategory, std::int64_t>> at(TimeNs t) const;
  // Their sum at t.
  std::int64_t totalAt(TimeNs t) const;
};

// One timeline per (rank, device) with category tracks, ordered by rank then device type and id.
std::vector<MemoryCategoryTimeline> memoryCategoryTimelines(TraceStore& store, RunId runId, const CancelToken* cancel = nullptr);
// The same for one rank.
std::vector<MemoryCategoryTimeline> memoryCategoryTimelines(TraceStore& store, RunId runId, int rank,
                                                            const CancelToken* cancel = nullptr);

}  // namespace shardscope::core
