#include "core/analysis/collectives.h"

#include "core/analysis/lanes.h"

#include <algorithm>

#include "core/analysis/intervals.h"
#include <map>
#include <tuple>

namespace shardscope::core {
namespace {

using intervals::Span;
using intervals::coveredBy;
using intervals::unite;

struct Instance {
  TimeNs s, e;
  CollectiveOp op;
  Id pg;
  int groupSize;
  std::optional<std::int64_t> bytes;
};

}  // namespace

std::optional<double> busBandwidthFactor(CollectiveOp op, int n) {
  if (n <= 0) return std::nullopt;
  const double d = static_cast<double>(n);
  switch (op) {
    case CollectiveOp::AllReduce: return 2.0 * (d - 1.0) / d;
    case CollectiveOp::AllGather:
    case CollectiveOp::ReduceScatter:
    case CollectiveOp::AllToAll: return (d - 1.0) / d;
    case CollectiveOp::Broadcast:
    case CollectiveOp::Reduce:
    case CollectiveOp::Send:
    case CollectiveOp::Recv:
    case CollectiveOp::SendRecv: return 1.0;
    default: return std::nullopt;
  }
}

std::vector<CollectiveStats> computeCollectives(TraceStore& store, Id runId, const CancelToken* cancel) {
  const RunSummary summary = store.summary(runId);
  std::map<Id, std::pair<std::string, int>> groups;  // pg id -> (name, size)
  for (const auto& pg : store.processGroups(runId)) groups[pg.id] = {pg.name, pg.size};

  std::map<std::tuple<int, std::string>, CollectiveStats> table;
  for (const Rank& rank : summary.ranks) {
    const bool hasGpu = rankHasGpuWork(summary, rank.id);
    std::vector<Span> compute;
    std::vector<Instance> instances;
    for (const auto& t : summary.tracks) {
      if (t.track.rankId != rank.id) continue;
      const TrackKind k = t.track.kind;
      const bool lane = isDeviceLane(k, hasGpu);
      if (!lane) continue;
      store.forEachEvent(
          t.track.id,
          [&](const Event& e) {
            if (e.flags & EventFlags::Instant) return;
            if (e.cat == "gpu_user_annotation" || e.cat == "user_annotation") return;
            const bool comm = e.collOp != CollectiveOp::None &&
                              (e.category == Category::Communication || k == TrackKind::Comm);
            if (comm) {
              instances.push_back(Instance{e.startNs, e.endNs, e.collOp, e.processGroupId.value_or(0),
                                           e.groupSize.value_or(0), e.bytes});
            } else if (e.category == Category::Computation) {
              compute.push_back(Span{e.startNs, e.endNs});
            }
          },
          false);
      if (cancel) cancel->throwIfCancelled();
    }
    const auto P = unite(std::move(compute));
    for (const auto& in : instances) {
      std::string pgName;
      int n = in.groupSize;
      if (auto it = groups.find(in.pg); it != groups.end()) {
        pgName = it->second.first;
        if (n == 0) n = it->second.second;
      }
      CollectiveStats& c = table[{static_cast<int>(in.op), pgName}];
      c.op = in.op;
      c.processGroup = pgName;
      if (n > 0) c.groupSize = n;
      ++c.count;
      const TimeNs dur = std::max<TimeNs>(0, in.e - in.s);
      c.totalNs += dur;
      c.exposedNs += dur - coveredBy(P, in.s, in.e);
      if (in.bytes) {
        c.bytes += *in.bytes;
        ++c.countWithBytes;
      }
    }
  }

  // Bandwidth from the instances that have a size: bytes / their time.
  std::vector<CollectiveStats> out;
  for (auto& [key, c] : table) {
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

}  // namespace shardscope::core
