#pragma once
// The stacked-allocation layout of a memory snapshot's Active Memory Timeline, as PyTorch's memory_viz
// draws it: every allocation is a band whose bottom is its offset in the stack of live allocations.
// Allocations are stacked in the order they were made (the blocks alive before recording first, in
// SnapshotTimeline::allocations order, which is the stack order); when one is freed, every band above
// it slides down by its size at that moment. So at every point of the active curve the bands alive
// there tile [0, level) without gaps or overlaps, and the top of the stack is the active curve itself
// (tests/core/tst_snapshot_bands checks it at every point). memory_viz animates the slide over three
// time steps; here it happens at the free's own point.
//
// The x axis is the active curve's points (SnapshotTimeline::active: point 0 is the level before the
// first event, point i >= 1 the level after the i-th alloc/free_completed), so a band is a step
// polygon: from each step's point on, its bottom is the step's offset, its top offset + size.
//
// For drawing at a zoom, snapshotBandDetail (which sums the stack below each band with a Fenwick tree
// along the points instead of reading the steps, so it works whatever their number) keeps one point per pixel bucket (the highest
// level in the bucket, the rule of curveLevelOfDetail, counting the level in force when the bucket starts) and draws at that
// point every allocation of at least `minBytes` (a pixel's worth of bytes) as its own band; the allocations under that size lie
// in the gaps between the drawn bands and each gap becomes one "small allocations" piece (memory_viz draws its largest
// allocations and summarises the rest). The pieces of a bucket tile [0, the bucket's highest level), so the drawn top is the
// active curve's maximum per bucket at every zoom. The Memory page's snapshot view draws these pieces and hit-tests clicks with
// snapshotAllocationAt.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/analysis/memory_snapshot_analysis.h"

namespace shardscope::core {

// From the active curve's point `point` on (until the band's next step or its end), the band's bottom.
struct SnapshotBandStep {
  std::int32_t point = 0;
  std::int64_t offset = 0;
};

struct SnapshotBandLayout {
  // Per allocation, indexed like SnapshotTimeline::allocations (the stack order).
  std::vector<std::int32_t> allocPoint;  // its first point: the alloc's (0: alive before recording)
  std::vector<std::int32_t> freePoint;   // its free_completed's point; points() when alive at the dump
  std::vector<std::int64_t> size;        // its bytes
  // The steps are kept when there are at most maxSteps (layoutSnapshotBands): a free adds a step to
  // every band above it, so a trace that frees its oldest allocations first under a deep stack has
  // (frees x depth) of them. Without them offsetAt sums the stack below (O(allocations)); the level of
  // detail and the hit test never need them.
  std::int64_t stepCount = 0;           // the steps of the layout, kept or not
  std::vector<std::int64_t> stepBegin;  // its steps: steps[stepBegin[a], stepBegin[a + 1]); empty when not kept
  std::vector<SnapshotBandStep> steps;  // each allocation's in point order; the first at allocPoint
  // Per point of the active curve: the allocation its alloc or free_completed starts or ends (-1 for point 0).
  std::vector<std::int32_t> pointAllocation;

  std::int32_t points() const { return static_cast<std::int32_t>(pointAllocation.size()); }
  bool aliveAt(std::size_t allocation, std::int32_t point) const {
    return allocPoint[allocation] <= point && point < freePoint[allocation];
  }
  bool hasSteps() const { return !stepBegin.empty(); }
  // The allocation's bottom at `point` (which must lie in [allocPoint, freePoint)).
  std::int64_t offsetAt(std::size_t allocation, std::int32_t point) const;
  // Heap bytes held by the layout.
  std::size_t memoryBytes() const;
};

constexpr std::int64_t kMaxSnapshotBandSteps = 32'000'000;  // 512 MiB of steps
SnapshotBandLayout layoutSnapshotBands(const SnapshotTimeline& t, std::int64_t maxSteps = kMaxSnapshotBandSteps);

// The point in force at time `ns`: the last point of the active curve at or before it, -1 before the trace.
std::int32_t snapshotPointAt(const SnapshotTimeline& t, TimeNs ns);

// The allocation (index into t.allocations) whose band covers byte `offset` at `point`; -1 where no
// band does (above the stack's top, below 0, or no point).
std::int64_t snapshotAllocationAt(const SnapshotTimeline& t, const SnapshotBandLayout& layout, std::int32_t point,
                                  std::int64_t offset);

// One rectangle to draw: buckets [bucket0, bucket1) by bytes [bottom, top).
struct SnapshotBandPiece {
  std::int32_t allocation = -1;  // index into t.allocations; -1: allocations under minBytes, merged
  std::int32_t bucket0 = 0;
  std::int32_t bucket1 = 0;
  std::int64_t bottom = 0;
  std::int64_t top = 0;
};

struct SnapshotBandDetail {
  TimeNs t0 = 0;
  TimeNs t1 = 0;
  int buckets = 0;
  std::int64_t minBytes = 0;
  std::vector<std::int32_t> bucketPoint;  // the point drawn in each bucket; -1: outside the trace
  std::vector<std::int64_t> bucketTop;    // the level there: the curve's maximum over the bucket
  std::vector<SnapshotBandPiece> pieces;  // bucket by bucket, bottom to top; equal neighbours merged
  // Bucket b covers [bucketStart(b), bucketStart(b + 1)).
  TimeNs bucketStart(int b) const;
  int bucketOf(TimeNs ns) const;  // -1 outside [t0, t1)
};

// The bands of [t0, t1) in `buckets` buckets, each allocation of at least `minBytes` its own piece.
SnapshotBandDetail snapshotBandDetail(const SnapshotTimeline& t, const SnapshotBandLayout& layout, TimeNs t0, TimeNs t1,
                                      int buckets, std::int64_t minBytes);

// Each allocation's category (the rules of snapshotCategory: its stack and the annotations open when
// it was made; a block from before recording only by its stack), as an index into snapshotCategoryNames().
const std::vector<std::string_view>& snapshotCategoryNames();
std::vector<std::uint8_t> snapshotAllocationCategories(const MemorySnapshot& s, const SnapshotTimeline& t);

}  // namespace shardscope::core
