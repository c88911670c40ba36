#pragma once
// HTA-compatible figures (traces.md §5): the same inputs give the same numbers as Holistic Trace
// Analysis @f4d0062c with default settings, quirks included. Shardscope's own, better-defined metrics
// live elsewhere and are labelled as ours.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/model/types.h"
#include "core/storage/trace_store.h"
#include "core/util/progress.h"

namespace shardscope::core {

struct HtaRankFigures {
  int rank = 0;
  // Communication/computation overlap in percent, rounded half-even to 2 decimals; nullopt when the
  // rank has no communication kernel (HTA: NaN).
  std::optional<double> overlapPct;
  // Temporal breakdown, µs (integers after HTA's µs rounding), and percentages (2 decimals).
  std::int64_t idleUs = 0, computeUs = 0, nonComputeUs = 0, kernelTimeUs = 0;
  double idlePct = 0, computePct = 0, nonComputePct = 0;
  // Kernel-type breakdown of this rank: label -> µs.
  std::map<std::string, std::int64_t> kernelTypeUs;
  std::int64_t rowsKept = 0;             // rows after the last-iteration filter
  std::vector<std::int64_t> iterations;  // analysed iterations (sorted)
};

struct HtaKernelTypeRow {
  std::string label;  // "COMPUTATION", "COMPUTATION overlapping COMMUNICATION", ...
  std::int64_t sumUs = 0;
  double pct = 0;  // of the sum over all labels, rounded half-even to 1 decimal
};

struct HtaFigures {
  std::vector<HtaRankFigures> ranks;
  std::vector<HtaKernelTypeRow> kernelTypes;  // summed over ranks, sorted by sum descending
};

// Computes the figures for every rank of a run (traces.md §5.1-5.5).
HtaFigures computeHtaFigures(TraceStore& store, RunId runId, const CancelToken* cancel = nullptr);

struct ScanContext;

// The same computation fed by scanRank (rank_scan.h), one rank at a time: a rank's rows are condensed
// into its figures when the rank ends. Whether the last iteration is dropped depends on the step
// numbers of the whole run; while that is still open a rank's figures are kept both ways.
class HtaAccumulator {
 public:
  explicit HtaAccumulator(ScanContext& ctx);
  ~HtaAccumulator();
  void beginRank(const Rank& rank);
  bool beginTrack(const TrackSummary& t);
  void onEvents(const EventChunk& c, std::size_t begin, std::size_t end, Id chunkId);
  void onEvent(const EventChunk& c, std::size_t i, Id chunkId);
  void endRank(const Rank& rank);
  HtaFigures finish();

  struct Row;      // one row of HTA's table (hta_metrics.cpp)
  struct Scratch;  // buffers reused from rank to rank
  struct Window {
    std::int64_t s, e, step;
  };
  struct RankInput {              // gathered while a rank's rows come in
    std::vector<Window> windows;  // ProfilerStep rows, in row order
    std::int64_t minCorrelation = INT64_MAX, maxCorrelation = INT64_MIN;
    std::int64_t lastStepStart = INT64_MIN;  // latest start of a (non-kernel) ProfilerStep row
  };

 private:
  struct RankResult {
    HtaRankFigures dropped, whole;  // with the last iteration dropped / with every row
  };
  ScanContext& ctx_;
  const Rank* rank_ = nullptr;
  std::vector<Row> rows_;
  RankInput input_;
  std::vector<std::int64_t> stepNames_;  // distinct step numbers seen so far (run-wide)
  std::vector<RankResult> ranks_;
  std::unique_ptr<Scratch> scratch_;
};

// numpy's rounding: multiply, round half to even, divide.
double roundHalfEven(double x, int decimals);

}  // namespace shardscope::core
