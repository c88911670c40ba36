#include "core/analysis/step_breakdown.h"

#include <algorithm>
#include <map>

namespace shardscope::core {
namespace {

struct Span {
  TimeNs s, e;
};

// Union of intervals (positive lengths only; zero-length events occupy no time).
std::vector<Span> unite(std::vector<Span> v) {
  v.erase(std::remove_if(v.begin(), v.end(), [](const Span& x) { return x.e <= x.s; }), v.end());
  std::sort(v.begin(), v.end(), [](const Span& a, const Span& b) { return a.s < b.s; });
  std::vector<Span> out;
  for (const auto& x : v) {
    if (out.empty() || x.s > out.back().e)
      out.push_back(x);
    else
      out.back().e = std::max(out.back().e, x.e);
  }
  return out;
}

TimeNs length(const std::vector<Span>& v) {
  TimeNs t = 0;
  for (const auto& x : v) t += x.e - x.s;
  return t;
}

TimeNs overlapOf(const std::vector<Span>& a, const std::vector<Span>& b) {
  TimeNs t = 0;
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const TimeNs s = std::max(a[i].s, b[j].s), e = std::min(a[i].e, b[j].e);
    if (e > s) t += e - s;
    (a[i].e < b[j].e) ? ++i : ++j;
  }
  return t;
}

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
    bool hasGpu = false;
    for (const auto& t : summary.tracks)
      if (t.track.rankId == rank.id && t.track.kind == TrackKind::GpuStream && t.eventCount > 0) hasGpu = true;
    std::map<std::int64_t, StepLists> steps;
    for (const auto& t : summary.tracks) {
      if (t.track.rankId != rank.id) continue;
      const TrackKind k = t.track.kind;
      const bool lane = hasGpu ? k == TrackKind::GpuStream : (k == TrackKind::CpuThread || k == TrackKind::Comm);
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
      b.computeNs = length(P);
      b.commNs = length(C);
      b.overlappedCommNs = overlapOf(C, P);
      b.exposedCommNs = b.commNs - b.overlappedCommNs;
      const TimeNs busy = length(A);
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
