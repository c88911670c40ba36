#pragma once
// Analysis of a PyTorch memory snapshot (core/model/memory_snapshot.h), by memory_viz's definitions
// (docs/METRICS.md, "Memory snapshots"): the active-memory curve (blocks alive before recording, then
// the running sum of alloc and free_completed), the reserved curve (segments alive before recording,
// then segment_alloc/map and segment_free/unmap), their peaks with their times, the allocations alive
// at the active peak grouped by stack with their owner frame and category, fragmentation at the peak,
// a max-preserving level of detail of the curves for drawing, and the comparison of two snapshots.
// The GUI's Memory and Compare pages and the reports read these; nothing recomputes them.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/model/memory_snapshot.h"
#include "core/storage/trace_store.h"
#include "core/util/json.h"

namespace shardscope::core {

// One allocation's life on a device: from its alloc (or from before recording: allocSeq -1) to its
// free_completed (or past the dump: freeSeq -1). What the stacked timeline draws.
struct SnapshotAllocation {
  std::uint64_t addr = 0;
  std::int64_t size = 0;
  StackId stack = -1;
  std::int64_t allocSeq = -1;  // trace position of the alloc; -1: alive before recording
  std::int64_t freeSeq = -1;   // trace position of the free_completed; -1: alive at the dump
  TimeNs allocNs = 0;          // for prior blocks, the first event's time
  TimeNs freeNs = 0;           // for blocks alive at the dump, the last event's time
};

// A point of a curve: the level after the event at trace position `seq` (seq -1: before the first).
struct SnapshotCurvePoint {
  std::int64_t seq = -1;
  TimeNs tsNs = 0;
  std::int64_t bytes = 0;
};

// One device's memory over the trace.
struct SnapshotTimeline {
  int device = 0;
  std::vector<SnapshotAllocation> allocations;  // in order of their start (prior blocks first)
  std::vector<SnapshotCurvePoint> active;       // first point: the prior level; then one per alloc/free_completed
  std::vector<SnapshotCurvePoint> reserved;     // first point: the prior level; then one per segment event
  std::int64_t priorActiveBytes = 0;
  std::int64_t priorReservedBytes = 0;
};

SnapshotTimeline buildSnapshotTimeline(const MemorySnapshot& s, int device);

// The points of `curve` within [t0, t1) thinned to at most `buckets`, each bucket keeping its
// highest point, so no peak is lost at any zoom (the rule of downsampleMax).
std::vector<SnapshotCurvePoint> curveLevelOfDetail(const std::vector<SnapshotCurvePoint>& curve, TimeNs t0, TimeNs t1,
                                                   int buckets);

// The allocations alive at the peak with the same stack.
struct SnapshotStackGroup {
  StackId stack = -1;
  std::int64_t bytes = 0;
  std::int64_t count = 0;
  std::string owner;     // first frame of user code ("file:line:function"), else the first Python frame
  std::string site;      // first Python frame (the library call that allocated, e.g. FSDP's alloc_storage)
  std::string category;  // parameters, gradients, optimizer_state, activations, comm_buffers, unknown
  bool prior = false;    // allocated before recording started (no alloc stack)
};

// Figures of one device of one snapshot.
struct SnapshotFigures {
  int rank = 0;
  int device = 0;
  std::int64_t events = 0;
  std::int64_t peakActiveBytes = 0;  // memory_viz's Active Memory Timeline maximum
  TimeNs peakActiveNs = 0;
  std::int64_t peakActiveSeq = -1;
  std::int64_t peakReservedBytes = 0;
  TimeNs peakReservedNs = 0;
  std::int64_t reservedAtPeakBytes = 0;  // reserved when active peaked
  std::int64_t fragmentationBytes = 0;   // reservedAtPeakBytes - peakActiveBytes
  std::int64_t priorActiveBytes = 0;     // alive before recording
  std::int64_t allocationsAtPeak = 0;
  std::vector<SnapshotStackGroup> topAtPeak;                     // by bytes, at most topN
  std::vector<std::pair<std::string, std::int64_t>> categories;  // bytes at the peak per category (all allocations)
  JsonValue toJson() const;
};

SnapshotFigures snapshotFigures(const MemorySnapshot& s, const SnapshotTimeline& t, int topN = 20);

// Owner and category of a stack (rules in docs/METRICS.md), `tsNs` the allocation's time for the
// annotations (FSDP::..., Optimizer.step) that were open then.
std::string snapshotOwnerFrame(const MemorySnapshot& s, StackId stack);
std::string snapshotCategory(const MemorySnapshot& s, StackId stack, const std::vector<std::string>& openAnnotations);

// Every snapshot of a run: one entry per rank with a snapshot and device, in rank then device order.
std::vector<SnapshotFigures> computeSnapshotFigures(TraceStore& store, RunId runId, int topN = 20);

// Snapshot against snapshot (two strategies, two runs): b relative to a.
struct SnapshotStackDelta {
  std::string owner;
  std::string site;
  std::string category;
  std::int64_t bytesA = 0;
  std::int64_t bytesB = 0;
};
struct SnapshotComparison {
  SnapshotFigures a;
  SnapshotFigures b;
  std::int64_t peakActiveDelta = 0;
  std::int64_t peakReservedDelta = 0;
  std::int64_t fragmentationDelta = 0;
  std::vector<SnapshotStackDelta> grew;  // groups at the peak matched by owner+site, largest growth first (at most topN)
  JsonValue toJson() const;
};
SnapshotComparison compareSnapshots(const SnapshotFigures& a, const SnapshotFigures& b, int topN = 10);

}  // namespace shardscope::core
