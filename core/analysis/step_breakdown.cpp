#include "core/analysis/step_breakdown.h"

#include "core/analysis/lanes.h"

#include <algorithm>
#include <set>

#include "core/analysis/intervals.h"
#include "core/analysis/rank_scan.h"

namespace shardscope::core {
namespace {

using intervals::Span;
using intervals::unite;

}  // namespace

StepBreakdownAccumulator::StepBreakdownAccumulator(ScanContext& ctx) : ctx_(ctx) {}
StepBreakdownAccumulator::~StepBreakdownAccumulator() = default;

const char* describe(StepWindow w) {
  switch (w) {
    case StepWindow::Recorded:
      return "step windows recorded by the runtime";
    case StepWindow::DevicePeriod:
      return "GPU work of each step (from its first kernel to the next step's first)";
    case StepWindow::Events:
      return "step spans of the trace";
  }
  return "";
}

void StepBreakdownAccumulator::beginRank(const Rank& rank) {
  hasGpu_ = rankHasGpuWork(ctx_.summary, rank.id);
  deviceComm_ = false;
  worldOfOne_ = runOfOneRank(ctx_.summary.run);
  steps_.clear();
  last_ = nullptr;
}

bool StepBreakdownAccumulator::beginTrack(const TrackSummary& t) {
  kind_ = t.track.kind;
  lane_ = isDeviceLane(kind_, hasGpu_);
  hostCommLane_ = hasGpu_ && kind_ == TrackKind::Comm;
  const bool cpuSide = kind_ == TrackKind::CpuThread || kind_ == TrackKind::Python;
  return lane_ || cpuSide || hostCommLane_;
}

void StepBreakdownAccumulator::onEvent(const EventChunk& c, std::size_t i, Id) {
  const std::int64_t step = c.step[i] != EventChunk::kNull ? c.step[i] : -1;
  if (!last_ || step != lastStep_) {
    last_ = &steps_[step];
    lastStep_ = step;
  }
  Lists& l = *last_;
  const TimeNs s = c.start[i], e = c.end[i];
  // The step's extent covers its CPU side too (the launches start it).
  if (!l.any || s < l.start) l.start = s;
  if (!l.any || e > l.end) l.end = e;
  l.any = true;
  if ((!lane_ && !hostCommLane_) || (c.flags[i] & EventFlags::Instant)) return;
  // The annotation twins and step markers only bracket work; they are not work.
  if (ctx_.strings.bits(c.cat[i]) & (StringClasses::kUserAnnotation | StringClasses::kGpuUserAnnotation)) return;
  if (ctx_.strings.bits(c.name[i]) & StringClasses::kLinkProbe) return;  // calibration, not the run's traffic

  const auto category = static_cast<Category>(c.category[i]);
  const bool collective = static_cast<CollectiveOp>(c.collOp[i]) != CollectiveOp::None;
  bool comm = category == Category::Communication || (collective && kind_ != TrackKind::CpuThread);
  // A collective among one rank moves nothing between ranks: local work, not communication.
  if (comm && isLocalCollective(worldOfOne_, c.groupSize[i])) comm = false;
  if (hostCommLane_) {
    if (comm) l.hostComm.push_back({s, e});
    return;
  }
  if (!l.anyDev || s < l.devStart) l.devStart = s;
  if (!l.anyDev || e > l.devEnd) l.devEnd = e;
  l.anyDev = true;
  if (comm) {
    l.comm.push_back({s, e});
    if (hasGpu_) deviceComm_ = true;
  } else if (category == Category::Computation) {
    l.compute.push_back({s, e});
  }
  l.all.push_back({s, e});
}

void StepBreakdownAccumulator::onEvents(const EventChunk& c, std::size_t begin, std::size_t end, Id chunkId) {
  for (std::size_t i = begin; i < end; ++i) onEvent(c, i, chunkId);
}

void StepBreakdownAccumulator::endRank(const Rank& rank) {
  // The windows (docs/METRICS.md, "Step time"): what the runtime or the simulator recorded; on a
  // trace with GPU work, the device's period of each step; else the step's events.
  const RunSource source = ctx_.summary.run.source;
  std::map<std::int64_t, std::pair<TimeNs, TimeNs>> recorded;
  if (source == RunSource::Runtime || source == RunSource::Simulated)
    for (const Step& st : ctx_.recordedSteps())
      if (st.rankId == rank.id) recorded[st.step] = {st.startNs, st.endNs};
  // Collectives on host threads count as communication where the GPU has none of its own.
  const bool hostComm = hasGpu_ && !deviceComm_;
  for (auto it = steps_.begin(); it != steps_.end(); ++it) {
    const std::int64_t step = it->first;
    Lists& l = it->second;
    StepBreakdown b;
    b.rank = rank.rank;
    b.step = step;
    b.startNs = l.start;
    b.endNs = l.end;
    b.window = StepWindow::Events;
    if (auto r = recorded.find(step); step >= 0 && r != recorded.end() && r->second.second > r->second.first) {
      b.window = StepWindow::Recorded;
      b.startNs = r->second.first;
      b.endNs = r->second.second;
    } else if (step >= 0 && hasGpu_ && l.anyDev && recorded.empty()) {
      b.window = StepWindow::DevicePeriod;
      b.startNs = l.devStart;
      b.endNs = l.devEnd;
      for (auto nx = std::next(it); nx != steps_.end(); ++nx)
        if (nx->first >= 0 && nx->second.anyDev) {
          if (nx->second.devStart > b.startNs) b.endNs = nx->second.devStart;
          break;
        }
    }
    b.stepNs = b.endNs - b.startNs;
    if (hostComm) {
      l.comm.insert(l.comm.end(), l.hostComm.begin(), l.hostComm.end());
      l.all.insert(l.all.end(), l.hostComm.begin(), l.hostComm.end());
    }
    if (b.window != StepWindow::Events) {
      for (auto* v : {&l.compute, &l.comm, &l.all}) intervals::clip(*v, b.startNs, b.endNs);
    }
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
    out_.push_back(b);
  }
  steps_.clear();
  last_ = nullptr;
}

std::vector<StepBreakdown> computeStepBreakdown(TraceStore& store, RunId runId, const CancelToken* cancel) {
  ScanContext ctx(store, runId);
  StepBreakdownAccumulator steps(ctx);
  scanRun(ctx, cancel, steps);
  return steps.finish();
}

bool leavesOutWarmup(RunSource source) { return source == RunSource::Runtime || source == RunSource::Simulated; }

CountedSteps countedStepNumbers(const std::vector<std::int64_t>& stepNumbers, RunSource source) {
  CountedSteps c;
  std::set<std::int64_t> numbers;
  bool stepless = false;
  for (const std::int64_t n : stepNumbers) {
    if (n >= 0)
      numbers.insert(n);
    else
      stepless = true;
  }
  if (numbers.empty()) {
    // A trace without steps: its whole extent (the one "step -1" row) is what there is.
    if (stepless) {
      c.first = c.last = -1;
      c.count = 1;
    }
    return c;
  }
  c.first = *numbers.begin();
  c.last = *numbers.rbegin();
  if (leavesOutWarmup(source) && numbers.size() > 1) {
    numbers.erase(numbers.begin());
    c.first = *numbers.begin();
    c.warmupLeftOut = true;
  }
  c.count = static_cast<std::int64_t>(numbers.size());
  return c;
}

CountedSteps countedSteps(const std::vector<StepBreakdown>& steps, RunSource source) {
  std::vector<std::int64_t> numbers;
  numbers.reserve(steps.size());
  for (const auto& b : steps) numbers.push_back(b.step);
  return countedStepNumbers(numbers, source);
}

const char* describeStepRule(const CountedSteps& c) {
  if (c.count == 0) return "no steps";
  if (c.first < 0) return "the whole trace (it has no steps)";
  return c.warmupLeftOut ? "steps after the first (warm-up) step, mean over ranks" : "every step, mean over ranks";
}

}  // namespace shardscope::core
