#include "core/analysis/run_analysis.h"

#include <chrono>

#include "core/analysis/rank_scan.h"

namespace shardscope::core {
namespace {

using Clock = std::chrono::steady_clock;

double msBetween(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }

// Adds the time spent in an accumulator's endRank to `ms` (the rest of the scan is shared reading).
template <class A>
class Timed {
 public:
  Timed(A& a, double& ms) : a_(a), ms_(ms) {}
  void beginRank(const Rank& r) { a_.beginRank(r); }
  bool beginTrack(const TrackSummary& t) { return a_.beginTrack(t); }
  void onEvents(const EventChunk& c, std::size_t b, std::size_t e, Id chunkId) { a_.onEvents(c, b, e, chunkId); }
  void endRank(const Rank& r) {
    const auto t0 = Clock::now();
    a_.endRank(r);
    ms_ += msBetween(t0, Clock::now());
  }

 private:
  A& a_;
  double& ms_;
};

}  // namespace

RunAnalysis analyzeRun(TraceStore& store, RunId runId, const RunAnalysisOptions& options, const CancelToken* cancel) {
  RunAnalysis out;
  const auto t0 = Clock::now();
  ScanContext ctx(store, runId);
  HtaAccumulator hta(ctx);
  StepBreakdownAccumulator steps(ctx);
  CollectivesAccumulator collectives(ctx);
  BottleneckAccumulator bottlenecks(ctx);
  StragglerAccumulator stragglers(ctx);
  double htaMs = 0, stepsMs = 0, collMs = 0, bnMs = 0, stragMs = 0;
  Timed th(hta, htaMs);
  Timed ts(steps, stepsMs);
  Timed tc(collectives, collMs);
  Timed tb(bottlenecks, bnMs);
  Timed tst(stragglers, stragMs);
  scanRun(ctx, cancel, th, ts, tc, tb, tst);
  // The scan's wall time less the analyses' per-rank work: reading, decoding and handing over.
  const double scanMs = msBetween(t0, Clock::now()) - (htaMs + stepsMs + collMs + bnMs + stragMs);

  auto timed = [](double& ms, auto&& fn) {
    const auto a = Clock::now();
    fn();
    ms += msBetween(a, Clock::now());
  };
  timed(htaMs, [&] { out.hta = hta.finish(); });
  timed(stepsMs, [&] { out.steps = steps.finish(); });
  timed(collMs, [&] { out.collectives = collectives.finish(); });
  timed(stragMs, [&] { out.stragglers = stragglers.finish(); });
  timed(bnMs, [&] { out.bottlenecks = bottlenecks.finish(options.bottleneckLimit, &stragglers); });
  if (cancel) cancel->throwIfCancelled();
  double memMs = 0;
  timed(memMs, [&] {
    out.memorySnapshots = computeSnapshotFigures(store, runId);
    out.memoryPeaks = computeMemoryPeaks(store, runId, &out.memorySnapshots);
  });

  out.timings = {{"scan", scanMs},      {"hta", htaMs},          {"steps", stepsMs}, {"collectives", collMs},
                 {"bottlenecks", bnMs}, {"stragglers", stragMs}, {"memory", memMs}};
  return out;
}

}  // namespace shardscope::core
