#pragma once
// One pass over a rank's events shared by several analyses (docs/ARCHITECTURE.md): each track of the
// rank is read once, in TraceStore::forEachEvent order, and every event is handed to the analyses
// that asked for that track as a column view (EventChunk + index; strings as ids). The analyses keep
// per-rank state and condense it when the rank ends, so one rank's events are in memory at a time.
//
// An analysis taking part ("accumulator") provides:
//   void beginRank(const Rank&);
//   bool beginTrack(const TrackSummary&);   // does it want this track's events?
//   void onEvents(const EventChunk&, std::size_t begin, std::size_t end, Id chunkId);  // events
//       [begin, end) of the chunk, next in the track's order
//   void endRank(const Rank&);
#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/storage/trace_store.h"
#include "core/util/progress.h"

namespace shardscope::core {

// What the analyses ask of a name or category string, computed once per string id.
class StringClasses {
 public:
  enum Bits : std::uint8_t {
    kEmpty = 1,               // ""
    kTrace = 2,               // cat "Trace"
    kCpuOp = 4,               // cat "cpu_op"
    kUserAnnotation = 8,      // cat "user_annotation"
    kGpuUserAnnotation = 16,  // cat "gpu_user_annotation"
    kSyncName = 32,           // name "Event Sync" / "Context Sync"
    kLinkProbe = 64,          // a collective of our runtime's link probe (isLinkProbeName)
  };
  explicit StringClasses(TraceStore& store) : store_(store) {}

  std::uint8_t bits(std::uint32_t id) { return entry(id).bits; }
  // N of a "ProfilerStep#N" name, else -1.
  std::int64_t stepNumber(std::uint32_t id) { return entry(id).step; }

 private:
  struct Entry {
    bool known = false;
    std::uint8_t bits = 0;
    std::int64_t step = -1;
  };
  const Entry& entry(std::uint32_t id) {
    if (id < cache_.size() && cache_[id].known) return cache_[id];
    return fill(id);
  }
  const Entry& fill(std::uint32_t id);

  TraceStore& store_;
  std::vector<Entry> cache_;  // by id (ids are dense)
  Entry spare_;               // for an id too large to cache
};

// The run being analysed: its summary and the string classes shared by the accumulators.
struct ScanContext {
  ScanContext(TraceStore& s, RunId runId) : store(s), summary(s.summary(runId)), strings(s), runId_(runId) {}
  TraceStore& store;
  RunSummary summary;
  StringClasses strings;
  // The run's stored step windows (every rank), read once when first asked for.
  const std::vector<Step>& recordedSteps() {
    if (!stepsRead_) {
      steps_ = store.steps(runId_);
      stepsRead_ = true;
    }
    return steps_;
  }

 private:
  RunId runId_;
  bool stepsRead_ = false;
  std::vector<Step> steps_;
};

// Reads every track of `rank` that at least one accumulator wants, once.
template <class... A>
void scanRank(ScanContext& ctx, const Rank& rank, const CancelToken* cancel, A&... acc) {
  (acc.beginRank(rank), ...);
  for (const TrackSummary& t : ctx.summary.tracks) {
    if (t.track.rankId != rank.id) continue;
    const std::array<bool, sizeof...(A)> want{acc.beginTrack(t)...};
    bool any = false;
    for (bool w : want) any = any || w;
    if (!any) continue;
    ctx.store.forEachEventRef(t.track.id, [&](const EventChunk& c, std::size_t begin, std::size_t end, Id chunkId) {
      std::size_t k = 0;
      ((want[k++] ? acc.onEvents(c, begin, end, chunkId) : void()), ...);
    });
    if (cancel) cancel->throwIfCancelled();
  }
  (acc.endRank(rank), ...);
}

// Every rank of the run, one after the other.
template <class... A>
void scanRun(ScanContext& ctx, const CancelToken* cancel, A&... acc) {
  for (const Rank& rank : ctx.summary.ranks) scanRank(ctx, rank, cancel, acc...);
}

}  // namespace shardscope::core
