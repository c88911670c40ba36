#pragma once
// Memory peaks per rank and device, with their moment, step and the operation running then, and a
// downsampled curve that keeps each bucket's maximum so peaks survive (heaptrack's rule).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/analysis/memory_snapshot_analysis.h"
#include "core/model/config_knobs.h"
#include "core/storage/trace_store.h"

namespace shardscope::core {

struct MemoryPeak {
  int rank = 0;
  int deviceType = 0;  // c10::DeviceType: 0 CPU, 1 CUDA
  int deviceId = 0;
  std::int64_t peakAllocatedBytes = 0;
  TimeNs allocatedAtNs = 0;
  std::int64_t peakReservedBytes = 0;
  TimeNs reservedAtNs = 0;
  // The peak is the allocator's own counter, higher than any memory record (it fell between two
  // samples): allocatedAtNs, step and operation are then those of the highest record, not of the peak.
  bool allocatedFromCounter = false;
  bool reservedFromCounter = false;
  // The peaks are a memory snapshot's (memory_viz's definitions, SnapshotFigures): a rank with a
  // snapshot of a device takes its peaks from there, the allocator's record of every event.
  bool fromSnapshot = false;
  std::optional<std::int64_t> step;  // the rank's step window containing the allocated peak
  std::string operation;             // innermost CPU operation running at the allocated peak (or the wait;
                                     // where neither ran, "between A and B" of its neighbours)
  std::string annotation;            // innermost user annotation (e.g. "## forward ##") at that moment
  // Runtime runs: live bytes per category at the allocated peak, as the runtime's counting allocator
  // measured them (parameters, gradients, optimizer_state, activations, comm_buffers, other; they sum
  // to peakAllocatedBytes). Empty for imported traces.
  std::vector<std::pair<std::string, std::int64_t>> breakdown;
};

// Why a peak is as high as it is (issue 46), from the breakdown the runtime measured and the run's own
// configuration: the category that holds the most (or, against another run, the one that grew the
// most) and the knob of the run's configuration that sizes it, in words that never suggest what the
// run already has set.
struct PeakExplanation {
  std::string category;    // its key (core/model/memory_category.h)
  std::int64_t bytes = 0;  // what it holds at the peak (explainPeak), or how much more (explainPeakDifference)
  std::string knob;        // the knob that sizes it (a run-config key, "" when no knob does)
  std::string text;        // one line for people, figures included
};
// The largest category at `peak`; nullopt without a breakdown.
std::optional<PeakExplanation> explainPeak(const MemoryPeak& peak, const ConfigKnobs& knobs);
// `other` against `base`, each at its own peak: the category that grew the most; nullopt without a
// breakdown on either side or when no category is higher in `other`.
std::optional<PeakExplanation> explainPeakDifference(const MemoryPeak& base, const std::string& baseName, const MemoryPeak& other,
                                                     const std::string& otherName, const ConfigKnobs& otherKnobs);

// One entry per (rank, device) with memory records, ordered by rank then device.
// Snapshot figures (computeSnapshotFigures) are computed here unless `snapshots` gives them.
std::vector<MemoryPeak> computeMemoryPeaks(TraceStore& store, RunId runId,
                                           const std::vector<SnapshotFigures>* snapshots = nullptr);

// At most `buckets` samples over [t0, t1): for each bucket the sample with the largest value (its own
// time), so no peak is lost however far the curve is zoomed out. Samples must be sorted by time.
std::vector<CounterSample> downsampleMax(const std::vector<CounterSample>& samples, TimeNs t0, TimeNs t1, int buckets);

}  // namespace shardscope::core
