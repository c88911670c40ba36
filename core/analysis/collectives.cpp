#include "core/analysis/collectives.h"

#include "core/analysis/step_breakdown.h"

#include "core/analysis/lanes.h"

#include <algorithm>

#include "core/analysis/intervals.h"
#include "core/analysis/rank_scan.h"

namespace shardscope::core {
namespace {

using intervals::coveredBy;
using intervals::Span;
using intervals::unite;

}  // namespace

std::optional<double> busBandwidthFactor(CollectiveOp op, int n) {
  if (n <= 0) return std::nullopt;
  const double d = static_cast<double>(n);
  switch (op) {
    case CollectiveOp::AllReduce:
      return 2.0 * (d - 1.0) / d;
    case CollectiveOp::AllGather:
    case CollectiveOp::ReduceScatter:
    case CollectiveOp::AllToAll:
      return (d - 1.0) / d;
    case CollectiveOp::Broadcast:
    case CollectiveOp::Reduce:
    case CollectiveOp::Send:
    case CollectiveOp::Recv:
    case CollectiveOp::SendRecv:
      return 1.0;
    default:
      return std::nullopt;
  }
}

CollectivesAccumulator::CollectivesAccumulator(ScanContext& ctx) : ctx_(ctx) {
  for (const auto& pg : ctx.store.processGroups(ctx.summary.run.id)) groups_[pg.id] = {pg.name, pg.size};
}
CollectivesAccumulator::~CollectivesAccumulator() = default;

void CollectivesAccumulator::beginRank(const Rank& rank) {
  hasGpu_ = rankHasGpuWork(ctx_.summary, rank.id);
  compute_.clear();
  instances_.clear();
}

bool CollectivesAccumulator::beginTrack(const TrackSummary& t) {
  kind_ = t.track.kind;
  return isDeviceLane(kind_, hasGpu_);
}

void CollectivesAccumulator::onEvent(const EventChunk& c, std::size_t i, Id) {
  if (c.flags[i] & EventFlags::Instant) return;
  if (ctx_.strings.bits(c.cat[i]) & (StringClasses::kUserAnnotation | StringClasses::kGpuUserAnnotation)) return;
  if (ctx_.strings.bits(c.name[i]) & StringClasses::kLinkProbe) return;  // calibration, not the run's traffic
  const auto op = static_cast<CollectiveOp>(c.collOp[i]);
  const auto category = static_cast<Category>(c.category[i]);
  const bool comm = op != CollectiveOp::None && (category == Category::Communication || kind_ == TrackKind::Comm);
  if (comm) {
    instances_.push_back(Instance{c.start[i], c.end[i], op, static_cast<Id>(c.pg[i]), c.groupSize[i],
                                  c.bytes[i] != EventChunk::kNull ? std::optional<std::int64_t>(c.bytes[i]) : std::nullopt,
                                  c.step[i] == EventChunk::kNull || c.step[i] < 0 ? -1 : c.step[i]});
  } else if (category == Category::Computation) {
    compute_.push_back(Span{c.start[i], c.end[i]});
  }
}

void CollectivesAccumulator::onEvents(const EventChunk& c, std::size_t begin, std::size_t end, Id chunkId) {
  for (std::size_t i = begin; i < end; ++i) onEvent(c, i, chunkId);
}

void CollectivesAccumulator::endRank(const Rank&) {
  const auto P = unite(std::move(compute_));
  for (const auto& in : instances_) {
    std::string pgName;
    int n = in.groupSize;
    if (auto it = groups_.find(in.pg); it != groups_.end()) {
      pgName = it->second.first;
      if (n == 0) n = it->second.second;
    }
    // No group named (a default-group collective of an older trace): the default group is the world.
    if (n == 0 && pgName.empty() && ctx_.summary.run.worldSize > 1) n = ctx_.summary.run.worldSize;
    const std::tuple<int, std::string> key{static_cast<int>(in.op), pgName};
    CollectiveStats& c = table_[key];
    c.op = in.op;
    c.processGroup = pgName;
    if (n > 0) c.groupSize = n;
    ++c.count;
    const TimeNs dur = std::max<TimeNs>(0, in.e - in.s);
    const TimeNs exposed = dur - coveredBy(P, in.s, in.e);
    c.totalNs += dur;
    c.exposedNs += exposed;
    if (in.bytes) {
      c.bytes += *in.bytes;
      ++c.countWithBytes;
    }
    StepPart& part = byStep_[key][in.step];
    ++part.count;
    part.ns += dur;
    part.exposedNs += exposed;
    if (in.bytes) {
      part.bytes += *in.bytes;
      ++part.withBytes;
    }
  }
  compute_.clear();
  instances_.clear();
}

std::vector<CollectiveStats> CollectivesAccumulator::finish() {
  // The counted steps: the rule over every step number the run has (its recorded windows and the
  // steps its collectives fell in).
  std::vector<std::int64_t> numbers;
  for (const Step& st : ctx_.recordedSteps()) numbers.push_back(st.step);
  for (const auto& [key, steps] : byStep_)
    for (const auto& [step, part] : steps) numbers.push_back(step);
  const CountedSteps counted = countedStepNumbers(numbers, ctx_.summary.run.source);
  // Bandwidth from the instances that have a size: bytes / their time.
  std::vector<CollectiveStats> out;
  for (auto& [key, c] : table_) {
    for (const auto& [step, part] : byStep_[key]) {
      if (!counted.counts(step)) continue;
      c.countedCount += part.count;
      c.countedBytes += part.bytes;
      c.countedWithBytes += part.withBytes;
      c.countedNs += part.ns;
      c.countedExposedNs += part.exposedNs;
    }
    c.meanNs = c.count ? c.totalNs / c.count : 0;
    if (c.countWithBytes == c.count && c.totalNs > 0 && c.bytes > 0) {
      c.algBwGBps = static_cast<double>(c.bytes) / static_cast<double>(c.totalNs);  // bytes/ns == GB/s
      if (auto f = busBandwidthFactor(c.op, c.groupSize)) c.busBwGBps = *c.algBwGBps * *f;
    }
    out.push_back(c);
  }
  std::sort(out.begin(), out.end(), [](const CollectiveStats& a, const CollectiveStats& b) { return a.totalNs > b.totalNs; });
  return out;
}

std::vector<CollectiveStats> computeCollectives(TraceStore& store, RunId runId, const CancelToken* cancel) {
  ScanContext ctx(store, runId);
  CollectivesAccumulator acc(ctx);
  scanRun(ctx, cancel, acc);
  return acc.finish();
}

}  // namespace shardscope::core
