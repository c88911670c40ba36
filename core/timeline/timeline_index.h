#pragma once
// The timeline's in-memory index of one run: everything the timeline draws, in a form a frame can
// search instead of walk (docs/ARCHITECTURE.md, "Timeline"). Pure data and maths, no Qt, no painting.
//
// Lanes. One lane per track of the run: GPU streams and CPU threads (nested spans: the depth of each
// event is computed from start/end), our runtime's communication lanes (one per process group),
// counters (memory curves), optionally the python_function tracks; plus, for ranks whose collectives
// run as kernels on GPU streams (imported traces), a derived communication lane per process group
// holding copies of those kernels (not made for collectives without a process group when the copy
// would repeat one stream event for event). Lanes are grouped per rank (RankInfo) in the same order on
// every rank: by kind (CPU threads, GPU streams, derived communication lanes, communication threads,
// python, counters), GPU streams by (device, stream id), the others in the store's order.
//
// Events of a lane are structure-of-arrays, grouped by depth, each depth sorted by start: lane index
// i in [depthBegin[d], depthBegin[d+1]) is an event at depth d. Depths come from a stack walk in
// (start, end desc) order: an event goes one level below the innermost open event that has not ended
// by its start. So the events of one depth never overlap, and their ends are sorted like their
// starts: the visible-window query per depth is a binary search on `end` (the per-depth trick; no
// max-duration bound is needed), and events that start before the window and overlap it are found.
// Improperly nested spans (partial overlaps) go one level deeper and keep that guarantee.
//
// Resident size (memoryBytes()): 30 bytes per event (start, end, id, name index, key, bits) plus a
// small summary per 64 events, the derived communication copies, 16 bytes per counter sample.
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/analysis/intervals.h"
#include "core/model/types.h"
#include "core/storage/trace_store.h"
#include "core/util/progress.h"

namespace shardscope::core::timeline {

// Colour key of an event: its category (bits 0-1) and collective operation (bits 2-5).
inline std::uint8_t makeKey(Category c, CollectiveOp op) {
  return static_cast<std::uint8_t>((static_cast<unsigned>(c) & 3u) | ((static_cast<unsigned>(op) & 15u) << 2));
}
inline Category keyCategory(std::uint8_t key) { return static_cast<Category>(key & 3u); }
inline CollectiveOp keyOp(std::uint8_t key) { return static_cast<CollectiveOp>((key >> 2) & 15u); }
// The key of a folded block whose events do not all share one key (the draw list colours such a
// block by its dominant key and flags it DrawFlags::Mixed; kept for callers that want "no one key").
constexpr std::uint8_t kMixedKey = 0xFF;
constexpr std::uint32_t kKeyCount = 64;  // makeKey values are 6 bits

// What an event is, as the analyses see it (docs/METRICS.md), decided once at build time.
namespace EventBits {
constexpr std::uint8_t Instant = 1;      // a ph:"i" instant
constexpr std::uint8_t Annotation = 2;   // cat user_annotation / gpu_user_annotation: brackets work, is not work
constexpr std::uint8_t Work = 4;         // device-lane work (step breakdown's "all")
constexpr std::uint8_t Compute = 8;      // device-lane computation
constexpr std::uint8_t Comm = 16;        // device-lane communication (step breakdown's definition)
constexpr std::uint8_t Collective = 32;  // a collective instance (the collectives table's definition)
constexpr std::uint8_t Exposed = 64;     // communication with some time while no computation runs on its rank
constexpr std::uint8_t HasBytes = 128;   // a message size is known (TimelineIndex::bytes)
}  // namespace EventBits

enum class LaneKind : std::uint8_t { GpuStream, CpuThread, Comm, CommGroup, Counter, Python };

// A union of spans (sorted, disjoint) with the time it covers up to each span's end, so the time of
// the union before any t is one binary search: a pixel column's share of it costs O(log n) at any
// zoom (the collapsed ranks' summary tracks). Span i is [start[i], start[i] + length(i)).
struct Coverage {
  std::vector<TimeNs> start;
  std::vector<TimeNs> cumEnd;  // time covered by spans [0, i]
  std::size_t size() const { return start.size(); }
  bool empty() const { return start.empty(); }
  TimeNs total() const { return cumEnd.empty() ? 0 : cumEnd.back(); }
  TimeNs length(std::size_t i) const { return cumEnd[i] - (i ? cumEnd[i - 1] : 0); }
  TimeNs end(std::size_t i) const { return start[i] + length(i); }
  // Time of the union before t; `hint` (in/out) is a span index to gallop from (columns in order).
  TimeNs coveredBefore(TimeNs t, std::size_t& hint) const;
  TimeNs coveredBefore(TimeNs t) const {
    std::size_t h = 0;
    return coveredBefore(t, h);
  }
  TimeNs covered(TimeNs a, TimeNs b) const { return b > a ? coveredBefore(b) - coveredBefore(a) : 0; }
  static Coverage of(const std::vector<intervals::Span>& unionSpans);
  std::size_t memoryBytes() const { return (start.capacity() + cumEnd.capacity()) * sizeof(TimeNs); }
};

struct Lane {
  TrackId trackId;  // 0 for a derived CommGroup lane
  LaneKind kind = LaneKind::CpuThread;
  int rankIndex = 0;  // into TimelineIndex::ranks()
  std::string name;
  int sortIndex = 0;
  std::optional<int> device;
  std::optional<std::int64_t> stream;
  Id processGroupId = 0;            // CommGroup lanes: the group (0: collectives without a group)
  bool deviceLane = false;          // counted by the range statistics (METRICS.md "device lanes")
  bool loaded = true;               // false: a python lane skipped at build (BuildOptions::withPython)
  TimeNs minStart = 0, maxEnd = 0;  // extent of the events / samples (0, 0 when empty)

  // Events (not Counter lanes), grouped by depth, each depth sorted by start.
  std::vector<TimeNs> start, end;
  std::vector<Id> eventId;                // the store's event id (chunk << 16 | index); copies keep the original's
  std::vector<std::uint32_t> nameIdx;     // index into TimelineIndex::names()
  std::vector<std::uint8_t> key;          // makeKey(category, collOp)
  std::vector<std::uint8_t> bits;         // EventBits
  std::vector<std::uint32_t> depthBegin;  // size depthCount() + 1

  // Level-of-detail summaries over the lane index, per block of 2^kBlockShift events: OR and AND of
  // the keys, OR of the bits (a folded block's colour), and the largest "reach" — max(duration, gap
  // to the previous event of the same depth; a depth's first event: kNoPrevious). A fold runs until
  // the first event whose reach is at least the fold width, so whole blocks (and blocks of
  // 2^kBlockShift blocks, reach2) below it are skipped without visiting their events.
  static constexpr std::uint32_t kBlockShift = 6;
  static constexpr TimeNs kNoPrevious = INT64_MAX;
  std::vector<std::uint8_t> blockKeyOr, blockKeyAnd, blockBitsOr;
  std::vector<TimeNs> reach1, reach2;
  // Per block too: the time its events cover (the events of one depth never overlap: a folded
  // block's density), and its dominant key — the key whose events cover the most time in the block —
  // with that time (a folded block's colour is the key covering the most time over its blocks).
  std::vector<TimeNs> blockDur;
  std::vector<std::uint8_t> blockTopKey;
  std::vector<TimeNs> blockTopDur;

  // Totals over the lane's events (nested ones counted each): time of its EventBits::Compute and
  // EventBits::Comm events (which lane is a rank's compute / communication lane in the compact
  // layout), and the keys present (bit k: makeKey value k; the legend).
  TimeNs computeNs = 0, commNs = 0;
  std::uint64_t keyMask = 0;

  // Message sizes of the events with EventBits::HasBytes: (lane index, bytes), sorted by index.
  std::vector<std::pair<std::uint32_t, std::int64_t>> bytes;

  // Counter lanes: samples by time, and a max pyramid over the values: sampleLevels[0][i] is the
  // largest of values [8i, 8i + 8), level k + 1 the same over level k (TimelineIndex::sampleMax).
  static constexpr std::uint32_t kSampleFanout = 8;
  std::vector<TimeNs> sampleTs;
  std::vector<double> sampleValue;
  std::vector<std::vector<double>> sampleLevels;
  double minValue = 0, maxValue = 0;

  bool isCounter() const { return kind == LaneKind::Counter; }
  std::uint32_t eventCount() const { return static_cast<std::uint32_t>(start.size()); }
  std::uint32_t depthCount() const { return depthBegin.empty() ? 0 : static_cast<std::uint32_t>(depthBegin.size() - 1); }
  std::uint32_t depthOf(std::uint32_t index) const;
  std::size_t memoryBytes() const;
};

struct RankInfo {
  RankId rankId;
  int rank = 0;
  std::string host, device;
  bool hasGpu = false;                   // device lanes are the GPU streams (else CPU threads + comm lanes)
  std::vector<std::uint32_t> lanes;      // into TimelineIndex::lanes(), display order
  std::vector<Step> steps;               // ProfilerStep#N / runtime steps, by step number
  std::vector<intervals::Span> exposed;  // exposed communication: comm union minus compute union (device lanes)
  // The largest gap before a span of `exposed` (to the previous one), per 64 and per 4096 spans: the
  // draw list merges sub-pixel gaps by skipping whole blocks (as Lane::reach1/reach2).
  std::vector<TimeNs> exposedGap1, exposedGap2;
  // For the summary track of a collapsed rank (busy / exposed communication / idle per pixel):
  // unions of the rank's computation and of all its work on the device lanes (range_stats'
  // definitions), and the exposed spans above, each with its covered time per span.
  Coverage computeCover, workCover, exposedCover;
  TimeNs minStart = 0, maxEnd = 0;
};

struct BuildOptions {
  bool withPython = false;     // python_function tracks (the store keeps them apart so they load lazily)
  bool withCounters = true;    // counter lanes (memory curves)
  bool commGroupLanes = true;  // a communication lane per process group derived from GPU collectives
};

// A half-open range of lane indices.
struct IndexRange {
  std::uint32_t begin = 0, end = 0;
  bool empty() const { return begin >= end; }
  std::uint32_t size() const { return end > begin ? end - begin : 0; }
};

class TimelineIndex {
 public:
  static constexpr std::uint32_t kNoEvent = 0xFFFFFFFFu;

  // Streams every track of the run (TraceStore::forEachEventRef) and builds the index. Meant for a
  // worker thread with its own TraceStore; progress counts events (and counter samples); throws
  // core::Cancelled when cancelled.
  static std::shared_ptr<const TimelineIndex> build(TraceStore& store, RunId runId, const BuildOptions& options = {},
                                                    const CancelToken* cancel = nullptr, const ProgressFn& progress = {});

  RunId runId() const { return runId_; }
  const std::vector<Lane>& lanes() const { return lanes_; }
  const Lane& lane(std::uint32_t i) const { return lanes_.at(i); }
  const std::vector<RankInfo>& ranks() const { return ranks_; }
  const std::vector<ProcessGroup>& processGroups() const { return groups_; }
  // Event names, by the index stored in Lane::nameIdx.
  const std::vector<std::string>& names() const { return names_; }
  std::string_view name(std::uint32_t nameIndex) const {
    return nameIndex < names_.size() ? names_[nameIndex] : std::string_view();
  }
  TimeNs minStart() const { return minStart_; }
  TimeNs maxEnd() const { return maxEnd_; }
  // The training steps of every rank (steps >= 0: not the initialisation or a trace's setup before
  // them): the first step's start to the last step's end; nullopt for a run without steps. What the
  // timeline frames first (docs/UI.md); the whole run is minStart()..maxEnd().
  std::optional<std::pair<TimeNs, TimeNs>> stepsExtent() const {
    std::optional<std::pair<TimeNs, TimeNs>> out;
    for (const auto& r : ranks_)
      for (const auto& s : r.steps) {
        if (s.step < 0 || s.endNs <= s.startNs) continue;
        if (!out) out = std::pair{s.startNs, s.endNs};
        out->first = std::min(out->first, s.startNs);
        out->second = std::max(out->second, s.endNs);
      }
    return out;
  }
  std::uint64_t eventCount() const { return eventCount_; }  // events of the track lanes (copies not counted)
  std::uint64_t sampleCount() const { return sampleCount_; }
  // Keys of the run's events (bit k: makeKey value k), counters excluded: what the legend lists.
  std::uint64_t keyMask() const {
    std::uint64_t m = 0;
    for (const auto& l : lanes_) m |= l.keyMask;
    return m;
  }
  std::size_t memoryBytes() const;  // everything this object holds

  // Events of depth `depth` of a lane overlapping [t0, t1): start < t1 and (end > t0, or a
  // zero-length event at or after t0) — the store's eventsInWindow rule. Two binary searches.
  IndexRange window(std::uint32_t lane, std::uint32_t depth, TimeNs t0, TimeNs t1) const;
  // The event of that depth whose span contains t (a zero-length event: t equals its time), or kNoEvent.
  std::uint32_t eventAt(std::uint32_t lane, std::uint32_t depth, TimeNs t) const;
  // The deepest event containing t.
  std::uint32_t innermostAt(std::uint32_t lane, TimeNs t) const;
  // Message size of a collective, when known.
  std::optional<std::int64_t> bytes(std::uint32_t lane, std::uint32_t index) const;

  // Samples of a counter lane with time in [t0, t1): a range of sample indices.
  IndexRange sampleWindow(std::uint32_t lane, TimeNs t0, TimeNs t1) const;
  // The largest sample value of [begin, end) of a counter lane (the pyramid for the whole blocks).
  double sampleMax(std::uint32_t lane, std::uint32_t begin, std::uint32_t end) const;

 private:
  friend class TimelineBuilder;
  RunId runId_;
  std::vector<Lane> lanes_;
  std::vector<RankInfo> ranks_;
  std::vector<ProcessGroup> groups_;
  std::vector<std::string> names_;
  TimeNs minStart_ = 0, maxEnd_ = 0;
  std::uint64_t eventCount_ = 0, sampleCount_ = 0;
};

// Parts of [s, e) of `spans` (sorted, disjoint) not covered by `cover` (sorted, disjoint).
std::vector<intervals::Span> subtract(const std::vector<intervals::Span>& spans, const std::vector<intervals::Span>& cover);

}  // namespace shardscope::core::timeline
