#include "core/analysis/top_ops.h"

#include <algorithm>

#include "core/analysis/lanes.h"
#include "core/analysis/rank_scan.h"

namespace shardscope::core {

TopOpsAccumulator::TopOpsAccumulator(ScanContext& ctx) : ctx_(ctx) {
  // Our runtime (and the simulator) record the CPU's compute and communication as device work; an
  // imported trace's CPU threads hold operators, not device work.
  cpuKernels_ = ctx.summary.run.source != RunSource::Kineto;
  // The steps a run of ours recorded decide what counts, as for every per-step figure; an imported
  // trace (no recorded steps) counts its whole extent, as the profiler's schedule chose it.
  std::vector<std::int64_t> numbers;
  for (const Step& st : ctx.recordedSteps()) numbers.push_back(st.step);
  if (!numbers.empty()) {
    counted_ = countedStepNumbers(numbers, ctx.summary.run.source);
    byCountedSteps_ = counted_.count > 0;
  }
}
TopOpsAccumulator::~TopOpsAccumulator() = default;

void TopOpsAccumulator::beginRank(const Rank& rank) {
  hasGpu_ = rankHasGpuWork(ctx_.summary, rank.id);
  if (hasGpu_)
    anyGpuRank_ = true;
  else if (cpuKernels_)
    anyCpuRank_ = true;
  rankIndex_ = ranks_.size();
  ranks_.push_back(rank.rank);
  kernelRank_.push_back(0);
  opRank_.push_back(0);
  stack_.clear();
  lane_ = Lane::None;
  cpuThread_ = false;
}

bool TopOpsAccumulator::beginTrack(const TrackSummary& t) {
  closeAllOps();  // the previous track's open operators
  const TrackKind k = t.track.kind;
  cpuThread_ = k == TrackKind::CpuThread;
  lane_ = Lane::None;
  if (hasGpu_) {
    if (k == TrackKind::GpuStream) lane_ = Lane::GpuStream;
  } else if (cpuKernels_ && isDeviceLane(k, false)) {
    lane_ = k == TrackKind::Comm ? Lane::CpuComm : Lane::CpuCompute;
  }
  return lane_ != Lane::None || cpuThread_;
}

void TopOpsAccumulator::add(std::unordered_map<std::uint32_t, Acc>& table, std::vector<TimeNs>& rankTotals, std::uint32_t name,
                            std::uint8_t category, TimeNs time, TimeNs total) {
  Acc& a = table[name];
  if (a.count == 0) a.category = category;
  ++a.count;
  a.time += time;
  a.total += total;
  a.max = std::max(a.max, time);
  if (a.perRank.size() <= rankIndex_) a.perRank.resize(rankIndex_ + 1, 0);
  a.perRank[rankIndex_] += time;
  rankTotals[rankIndex_] += time;
}

void TopOpsAccumulator::closeOp() {
  const OpenOp o = stack_.back();
  stack_.pop_back();
  const TimeNs dur = std::max<TimeNs>(0, o.e - o.s);
  add(ops_, opRank_, o.name, 0, std::max<TimeNs>(0, dur - o.child), dur);
}

void TopOpsAccumulator::closeAllOps() {
  while (!stack_.empty()) closeOp();
}

void TopOpsAccumulator::onEvent(const EventChunk& c, std::size_t i, Id) {
  if (c.flags[i] & EventFlags::Instant) return;
  if (ctx_.strings.bits(c.name[i]) & StringClasses::kLinkProbe) return;  // calibration, not the run's work
  if (byCountedSteps_ && !counted_.counts(c.step[i] == EventChunk::kNull ? -1 : c.step[i])) return;
  const std::uint8_t bits = ctx_.strings.bits(c.cat[i]);
  if (bits & (StringClasses::kUserAnnotation | StringClasses::kGpuUserAnnotation | StringClasses::kTrace)) return;
  const TimeNs s = c.start[i], e = c.end[i];
  const auto category = static_cast<Category>(c.category[i]);
  bool kernel = false;
  switch (lane_) {
    case Lane::GpuStream:
      kernel = true;
      break;
    case Lane::CpuCompute:
      kernel = category == Category::Computation;
      break;
    case Lane::CpuComm:
      kernel = category == Category::Communication || static_cast<CollectiveOp>(c.collOp[i]) != CollectiveOp::None;
      break;
    case Lane::None:
      break;
  }
  if (kernel) {
    const TimeNs dur = std::max<TimeNs>(0, e - s);
    add(kernels_, kernelRank_, c.name[i], c.category[i], dur, dur);
  }
  if (cpuThread_ && (bits & StringClasses::kCpuOp)) {
    // Events come by (start, end desc): an operator's nested operators follow it. Close those that
    // ended before this one starts; what remains on top (if anything) is its parent.
    while (!stack_.empty() && stack_.back().e <= s) closeOp();
    if (!stack_.empty()) {
      OpenOp& parent = stack_.back();
      parent.child += std::max<TimeNs>(0, std::min(e, parent.e) - s);
    }
    stack_.push_back(OpenOp{s, e, c.name[i], 0});
  }
}

void TopOpsAccumulator::onEvents(const EventChunk& c, std::size_t begin, std::size_t end, Id chunkId) {
  for (std::size_t i = begin; i < end; ++i) onEvent(c, i, chunkId);
}

void TopOpsAccumulator::endRank(const Rank&) { closeAllOps(); }

TopOpsTable TopOpsAccumulator::table(std::unordered_map<std::uint32_t, Acc>& accs, std::vector<TimeNs>& rankTotals,
                                     std::size_t limit) {
  TopOpsTable t;
  t.perRankNs = rankTotals;
  t.distinctNames = static_cast<std::int64_t>(accs.size());
  std::vector<TopOpRow> rows;
  rows.reserve(accs.size());
  for (auto& [name, a] : accs) {
    TopOpRow r;
    r.name = std::string(ctx_.store.stringView(name));
    r.category = static_cast<Category>(a.category);
    r.count = a.count;
    r.timeNs = a.time;
    r.totalNs = a.total;
    r.maxNs = a.max;
    r.perRankNs = std::move(a.perRank);
    r.perRankNs.resize(ranks_.size(), 0);
    t.timeNs += a.time;
    t.count += a.count;
    rows.push_back(std::move(r));
  }
  std::sort(rows.begin(), rows.end(), [](const TopOpRow& a, const TopOpRow& b) {
    if (a.timeNs != b.timeNs) return a.timeNs > b.timeNs;
    if (a.count != b.count) return a.count > b.count;
    return a.name < b.name;
  });
  if (limit > 0 && rows.size() > limit) {
    TopOpRow o;
    o.name = "other";
    o.other = true;
    o.names = static_cast<std::int64_t>(rows.size() - limit);
    o.perRankNs.assign(ranks_.size(), 0);
    for (std::size_t k = limit; k < rows.size(); ++k) {
      const TopOpRow& r = rows[k];
      o.count += r.count;
      o.timeNs += r.timeNs;
      o.totalNs += r.totalNs;
      o.maxNs = std::max(o.maxNs, r.maxNs);
      for (std::size_t j = 0; j < o.perRankNs.size(); ++j) o.perRankNs[j] += r.perRankNs[j];
    }
    rows.resize(limit);
    rows.push_back(std::move(o));
  }
  for (auto& r : rows) {
    r.meanNs = r.count ? r.timeNs / r.count : 0;
    r.share = t.timeNs > 0 ? static_cast<double>(r.timeNs) / static_cast<double>(t.timeNs) : 0.0;
  }
  t.rows = std::move(rows);
  accs.clear();
  return t;
}

TopOps TopOpsAccumulator::finish(std::size_t limit) {
  TopOps out;
  out.runId = ctx_.summary.run.id;
  out.ranks = ranks_;
  out.limit = limit;
  if (anyGpuRank_ && anyCpuRank_)
    out.deviceLanes = "GPU streams; CPU compute and communication lanes (ranks without GPU work)";
  else if (anyGpuRank_)
    out.deviceLanes = "GPU streams";
  else if (anyCpuRank_)
    out.deviceLanes = "CPU compute and communication lanes (no GPU)";
  else
    out.deviceLanes = "none";
  out.measuredOver = byCountedSteps_ ? std::string(describeStepRule(counted_)) + "; the link probe left out" : "the whole trace";
  out.kernels = table(kernels_, kernelRank_, limit);
  out.operators = table(ops_, opRank_, limit);
  return out;
}

TopOps computeTopOps(TraceStore& store, RunId runId, std::size_t limit, const CancelToken* cancel) {
  ScanContext ctx(store, runId);
  TopOpsAccumulator acc(ctx);
  scanRun(ctx, cancel, acc);
  return acc.finish(limit);
}

namespace {

JsonValue rowsJson(const TopOpsTable& t, bool operators) {
  JsonValue rows = JsonValue::array();
  for (const auto& r : t.rows) {
    JsonValue o = JsonValue::object();
    o.set("name", JsonValue::string(r.name));
    o.set("other", JsonValue::boolean(r.other));
    o.set("names", JsonValue::number(r.names));
    if (!operators) o.set("category", JsonValue::string(r.other ? std::string() : std::string(toString(r.category))));
    o.set("count", JsonValue::number(r.count));
    o.set("time_ns", JsonValue::number(r.timeNs));
    if (operators) o.set("self_ns", JsonValue::number(r.timeNs));
    o.set("total_ns", JsonValue::number(r.totalNs));
    o.set("mean_ns", JsonValue::number(r.meanNs));
    o.set("max_ns", JsonValue::number(r.maxNs));
    o.set("share", JsonValue::number(r.share));
    JsonValue pr = JsonValue::array();
    for (TimeNs v : r.perRankNs) pr.push(JsonValue::number(v));
    o.set("per_rank_ns", std::move(pr));
    rows.push(std::move(o));
  }
  return rows;
}

JsonValue perRank(const std::vector<TimeNs>& v) {
  JsonValue a = JsonValue::array();
  for (TimeNs x : v) a.push(JsonValue::number(x));
  return a;
}

}  // namespace

JsonValue toJson(const TopOps& t) {
  JsonValue j = JsonValue::object();
  j.set("run", JsonValue::number(t.runId.value()));
  JsonValue ranks = JsonValue::array();
  for (int r : t.ranks) ranks.push(JsonValue::number(static_cast<std::int64_t>(r)));
  j.set("ranks", std::move(ranks));
  j.set("device_lanes", JsonValue::string(t.deviceLanes));
  j.set("measured_over", JsonValue::string(t.measuredOver));
  j.set("limit", JsonValue::number(static_cast<std::int64_t>(t.limit)));
  j.set("device_time_ns", JsonValue::number(t.kernels.timeNs));
  j.set("device_time_per_rank_ns", perRank(t.kernels.perRankNs));
  j.set("kernel_count", JsonValue::number(t.kernels.count));
  j.set("kernel_names", JsonValue::number(t.kernels.distinctNames));
  j.set("cpu_op_self_ns", JsonValue::number(t.operators.timeNs));
  j.set("cpu_op_self_per_rank_ns", perRank(t.operators.perRankNs));
  j.set("operator_count", JsonValue::number(t.operators.count));
  j.set("operator_names", JsonValue::number(t.operators.distinctNames));
  j.set("kernels", rowsJson(t.kernels, false));
  j.set("operators", rowsJson(t.operators, true));
  return j;
}

}  // namespace shardscope::core
