#pragma once
// Level of detail for the timeline: what to draw for a viewport, as plain rectangles in pixels, and
// which rectangle is under the mouse. Pure functions of a TimelineIndex and a Viewport; no Qt.
//
// Per depth row of each visible lane, the events overlapping [t0, t1) are found with two binary
// searches (TimelineIndex::window). An event at least `minPx` wide is one rectangle (clipped to the
// window; a zero-length or sub-pixel one is widened to 1 px). A run of consecutive events of the row
// that are each narrower than `minPx`, with gaps narrower than `minPx` between them, is folded into
// one block "N events" (Tracy's rule). The run's end is found with the lane's reach summaries
// (Lane::reach1/reach2: the largest duration or gap per 64 / 4096 events), not by visiting its
// events, and its colour, density and bits from the summaries per 64 events: the key covering the
// most time in the block (each whole block adds its own dominant key's time, the events at its
// edges their own), the share of the block's span its events cover, Exposed if any event is. So a
// frame costs about (drawn rectangles) x (log(events) + 64) plus (folded events) / 64 summary reads:
// a zoomed-out frame does not touch every event.
//
// A collapsed rank is drawn as a summary track (RankSummary): per pixel column the shares of its time
// spent computing, in exposed communication, in other work and idle (range_stats' definitions), from
// the rank's coverage unions (RankInfo::computeCover / workCover / exposedCover): O(log) per column.
#include <cstdint>
#include <limits>
#include <vector>

#include "core/timeline/timeline_index.h"

namespace shardscope::core::timeline {

struct ViewLane {
  std::uint32_t lane = 0;  // into TimelineIndex::lanes()
  float y = 0;             // top of depth row 0 (a counter lane: top of its curve), px
  float rowHeight = 16;    // height of one depth row (a counter lane: of the whole curve), px
  std::uint32_t maxDepth = std::numeric_limits<std::uint32_t>::max();  // rows drawn: min(maxDepth, depthCount)
};

struct Viewport {
  TimeNs t0 = 0, t1 = 1;  // the visible time window [t0, t1)
  int widthPx = 1;
  std::vector<ViewLane> lanes;    // the visible lanes (any order; y decides where they are)
  float minPx = 3;                // narrower events fold with their neighbours
  float charWidthPx = 7;          // average glyph width, for "text fits"
  float textPaddingPx = 3;        // on each side of a label
  int minTextChars = 3;           // an elided label needs room for this many characters and "…"
  bool exposedSpans = true;       // compute DrawList::exposed
  std::vector<int> summaryRanks;  // ranks drawn as summary tracks (DrawList::summaries, same order)
  unsigned threads = 1;           // lanes are split among this many threads; 0 = one per hardware thread
};

namespace DrawFlags {
constexpr std::uint8_t Folded = 1;         // a block of `count` events
constexpr std::uint8_t TextFull = 2;       // the whole label fits (the name; "N events" for a block)
constexpr std::uint8_t TextElided = 4;     // an elided label fits
constexpr std::uint8_t ClippedLeft = 8;    // starts before the window
constexpr std::uint8_t ClippedRight = 16;  // ends after the window
constexpr std::uint8_t Widened = 32;       // drawn 1 px wide although shorter (zero-length, sub-pixel)
constexpr std::uint8_t Mixed = 64;         // a block whose events have several keys (key: the dominant one)
}  // namespace DrawFlags

struct DrawRect {
  float x0 = 0, x1 = 0;        // px, within [0, widthPx]
  std::uint32_t viewLane = 0;  // into Viewport::lanes
  std::uint32_t depth = 0;
  std::uint32_t first = 0;     // lane index of the event, or of the block's first event
  std::uint32_t count = 1;     // 1, or the events of a folded block ([first, first + count) of the lane)
  std::uint8_t key = 0;        // makeKey(category, op); a block: the key covering the most time in it
  std::uint8_t bits = 0;       // EventBits; a block ORs its events' bits
  std::uint8_t flags = 0;      // DrawFlags
  std::uint8_t density = 255;  // a block: share of its span covered by its events, in 1/255 (an event: 255)
};

// The rectangles of one depth row of a view lane, by x: DrawList::rects[begin, end).
struct DrawRow {
  std::uint32_t viewLane = 0, depth = 0, begin = 0, end = 0;
};

// Exposed communication of a rank (RankInfo::exposed), merged where gaps are under a pixel.
struct ExposedSpan {
  int rankIndex = 0;
  float x0 = 0, x1 = 0;
};

struct StepMark {
  int rankIndex = 0;
  std::int64_t step = 0;
  float x0 = 0, x1 = 0;  // clipped to the window
  bool clippedLeft = false, clippedRight = false;
};

// A step curve: points[i].value holds from points[i].x to points[i + 1].x (the last one to xEnd).
// Each pixel column carries the largest sample in it, or the value held from before (heaptrack's
// max-per-bucket: peaks survive any zoom).
struct CounterPoint {
  float x = 0;
  double value = 0;
};
struct CounterLine {
  std::uint32_t viewLane = 0;
  std::vector<CounterPoint> points;
  float xEnd = 0;
  double windowMax = 0;  // largest value drawn
};

// One pixel column of a summary track: shares of the column's time, in 1/255, spent computing (any
// computation on the rank's device lanes, communication overlapped with it included), in exposed
// communication (communication while no computation runs) and in other work (neither: copies,
// memsets, ...); the rest is idle. compute + exposed + other <= 255.
struct SummaryColumn {
  std::uint8_t compute = 0, exposed = 0, other = 0;
};
struct RankSummary {
  int rankIndex = 0;
  std::vector<SummaryColumn> columns;  // widthPx columns, column c = [t0 + c * nsPerPx, t0 + (c + 1) * nsPerPx)
};
// The summary track of one rank over [t0, t1) at widthPx columns.
RankSummary buildRankSummary(const TimelineIndex& index, int rankIndex, TimeNs t0, TimeNs t1, int widthPx);

struct DrawList {
  TimeNs t0 = 0, t1 = 0;
  int widthPx = 0;
  double nsPerPx = 1;
  std::vector<DrawRect> rects;          // by view lane, then depth, then x
  std::vector<DrawRow> rows;            // every drawn depth row, empty ones included
  std::vector<std::uint32_t> rowBegin;  // rows of view lane v: [rowBegin[v], rowBegin[v + 1])
  std::vector<ExposedSpan> exposed;     // per rank with a visible lane
  std::vector<StepMark> steps;          // per rank with a visible lane
  std::vector<CounterLine> counters;    // one per visible counter lane
  std::vector<RankSummary> summaries;   // one per Viewport::summaryRanks, same order
  std::uint64_t eventsInView = 0;       // events covered by the rectangles (folded ones included)

  float px(TimeNs t) const { return static_cast<float>(static_cast<double>(t - t0) / nsPerPx); }
  TimeNs timeAt(float x) const { return t0 + static_cast<TimeNs>(static_cast<double>(x) * nsPerPx); }
};

DrawList buildDrawList(const TimelineIndex& index, const Viewport& view);

struct Hit {
  enum class Kind { None, Event, Folded, Counter };
  Kind kind = Kind::None;
  std::uint32_t viewLane = 0, lane = 0, depth = 0;
  std::uint32_t index = 0;  // Event: lane index; Folded: first event of the block; Counter: point index
  std::uint32_t count = 0;  // events of a block
  DrawRect rect;            // the rectangle hit (Event, Folded)
  double value = 0;         // Counter: the value drawn at x
};

// What is drawn at (x, y): y picks the view lane and depth row, x the rectangle of that row that
// contains it (or the nearest within slackPx). With events one depth row each, this is the innermost
// event drawn there at that depth.
Hit hitTest(const DrawList& list, const Viewport& view, float x, float y, float slackPx = 1.0f);

}  // namespace shardscope::core::timeline
