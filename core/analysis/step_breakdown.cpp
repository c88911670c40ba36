#include "core/analysis/step_breakdown.h"

#include "core/analysis/lanes.h"

#include <algorithm>

#include "core/analysis/intervals.h"
#include <map>

namespace shardscope::core {
namespace {

using intervals::Span;
using intervals::unite;

struct StepLists {
  TimeNs start = 0, end = 0;
  bool any = false;
  std::vector<Span> compute, comm, all;
};

}  // namespace

std::vector<StepBreakdown> computeStepBreakdown(TraceStore& store, Id runId, const CancelToken* cancel) {
  std::vector<StepBreakdown> out;
  const RunSummary summary = store.summary(runId);
  for (const Rank& rank : summary.ranks) {
    const bool hasGpu = rankHasGpuWork(summary, rank.id);
    std::map<std::int64_t, StepLists> steps;
    for (const auto& t : summary.tracks) {
      if (t.track.rankId != rank.id) continue;
      const TrackKind k = t.track.kind;
      const bool lane = isDeviceLane(k, hasGpu);
      const bool cpuSide = k == TrackKind::CpuThread || k == TrackKind::Python;
      if (!lane && !cpuSide) continue;
      store.forEachEvent(
          t.track.id,
          [&](const Event& e) {
            const std::int64_t step = e.step.value_or(-1);
            StepLists& l = steps[step];
            // The step's extent covers its CPU side too (the launches start it).
            if (!l.any || e.startNs < l.start) l.start = e.startNs;
            if (!l.any || e.endNs > l.end) l.end = e.endNs;
            l.any = true;
            if (!lane || (e.flags & EventFlags::Instant)) return;
            // The annotation twins and step markers only bracket work; they are not work.
            if (e.cat == "gpu_user_annotation" || e.cat == "user_annotation") return;
            const Span s{e.startNs, e.endNs};
            const bool comm = e.category == Category::Communication || (e.collOp != CollectiveOp::None && k != TrackKind::CpuThread);
            if (comm)
              l.comm.push_back(s);
            else if (e.category == Category::Computation)
              l.compute.push_back(s);
            l.all.push_back(s);
          },
          false);
      if (cancel) cancel->throwIfCancelled();
    }
    for (auto& [step, l] : steps) {
      StepBreakdown b;
      b.rank = rank.rank;
      b.step = step;
      b.startNs = l.start;
      b.endNs = l.end;
      b.stepNs = l.end - l.start;
      const auto P = unite(std::move(l.compute));
      const auto C = unite(std::move(l.comm));
      const auto A = unite(std::move(l.all));
      b.computeNs = intervals::length(P);
      b.commNs = intervals::length(C);
      b.overlappedCommNs = intervals::overlap(C, P);
      b.exposedCommNs = b.commNs - b.overlappedCommNs;
      const TimeNs busy = intervals::length(A);
      b.otherBusyNs = busy - b.computeNs - b.exposedCommNs;
      b.idleNs = b.stepNs - busy;
      if (b.stepNs > 0) {
        const double d = static_cast<double>(b.stepNs);
        b.computeShare = static_cast<double>(b.computeNs) / d;
        b.commShare = static_cast<double>(b.commNs) / d;
        b.exposedShare = static_cast<double>(b.exposedCommNs) / d;
        b.idleShare = static_cast<double>(b.idleNs) / d;
      }
      if (b.commNs > 0) b.overlap = static_cast<double>(b.overlappedCommNs) / static_cast<double>(b.commNs);
      out.push_back(b);
    }
  }
  return out;
}

}  // namespace shardscope::core
