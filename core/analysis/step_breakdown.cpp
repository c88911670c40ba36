#include "core/analysis/step_breakdown.h"

#include "core/analysis/lanes.h"

#include <algorithm>

#include "core/analysis/intervals.h"
#include "core/analysis/rank_scan.h"

namespace shardscope::core {
namespace {

using intervals::Span;
using intervals::unite;

}  // namespace

StepBreakdownAccumulator::StepBreakdownAccumulator(ScanContext& ctx) : ctx_(ctx) {}
StepBreakdownAccumulator::~StepBreakdownAccumulator() = default;

void StepBreakdownAccumulator::beginRank(const Rank& rank) {
  hasGpu_ = rankHasGpuWork(ctx_.summary, rank.id);
  steps_.clear();
  last_ = nullptr;
}

bool StepBreakdownAccumulator::beginTrack(const TrackSummary& t) {
  kind_ = t.track.kind;
  lane_ = isDeviceLane(kind_, hasGpu_);
  const bool cpuSide = kind_ == TrackKind::CpuThread || kind_ == TrackKind::Python;
  return lane_ || cpuSide;
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
  if (!lane_ || (c.flags[i] & EventFlags::Instant)) return;
  // The annotation twins and step markers only bracket work; they are not work.
  if (ctx_.strings.bits(c.cat[i]) & (StringClasses::kUserAnnotation | StringClasses::kGpuUserAnnotation)) return;
  const auto category = static_cast<Category>(c.category[i]);
  const bool comm = category == Category::Communication ||
                    (static_cast<CollectiveOp>(c.collOp[i]) != CollectiveOp::None && kind_ != TrackKind::CpuThread);
  if (comm)
    l.comm.push_back({s, e});
  else if (category == Category::Computation)
    l.compute.push_back({s, e});
  l.all.push_back({s, e});
}

void StepBreakdownAccumulator::onEvents(const EventChunk& c, std::size_t begin, std::size_t end, Id chunkId) {
  for (std::size_t i = begin; i < end; ++i) onEvent(c, i, chunkId);
}

void StepBreakdownAccumulator::endRank(const Rank& rank) {
  for (auto& [step, l] : steps_) {
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
    out_.push_back(b);
  }
  steps_.clear();
  last_ = nullptr;
}

std::vector<StepBreakdown> computeStepBreakdown(TraceStore& store, Id runId, const CancelToken* cancel) {
  ScanContext ctx(store, runId);
  StepBreakdownAccumulator steps(ctx);
  scanRun(ctx, cancel, steps);
  return steps.finish();
}

}  // namespace shardscope::core
