#include "core/timeline/range_stats.h"

#include <algorithm>
#include <map>

#include "core/analysis/intervals.h"

namespace shardscope::core::timeline {

RangeStats rangeStatistics(const TimelineIndex& index, int rankIndex, TimeNs t0, TimeNs t1) {
  RangeStats r;
  r.rankIndex = rankIndex;
  r.t0 = t0;
  r.t1 = std::max(t0, t1);
  r.rangeNs = r.t1 - r.t0;
  if (rankIndex < 0 || static_cast<std::size_t>(rankIndex) >= index.ranks().size()) return r;
  std::vector<intervals::Span> compute, comm, all;
  std::map<int, RangeCollectives> ops;
  for (std::uint32_t li : index.ranks()[static_cast<std::size_t>(rankIndex)].lanes) {
    const Lane& l = index.lane(li);
    if (!l.deviceLane) continue;
    for (std::uint32_t d = 0; d < l.depthCount(); ++d) {
      const IndexRange w = index.window(li, d, r.t0, r.t1);
      for (std::uint32_t i = w.begin; i < w.end; ++i) {
        const std::uint8_t bits = l.bits[i];
        if (!(bits & EventBits::Work)) continue;
        const intervals::Span s{std::max(l.start[i], r.t0), std::min(l.end[i], r.t1)};
        all.push_back(s);
        if (bits & EventBits::Comm)
          comm.push_back(s);
        else if (bits & EventBits::Compute)
          compute.push_back(s);
        if (bits & EventBits::Collective) {
          RangeCollectives& c = ops[static_cast<int>(keyOp(l.key[i]))];
          c.op = keyOp(l.key[i]);
          ++c.count;
          if (bits & EventBits::HasBytes) {
            ++c.countWithBytes;
            c.bytes += index.bytes(li, i).value_or(0);
          }
        }
      }
    }
  }
  const auto P = intervals::unite(std::move(compute));
  const auto C = intervals::unite(std::move(comm));
  const auto A = intervals::unite(std::move(all));
  r.computeNs = intervals::length(P);
  r.commNs = intervals::length(C);
  r.overlappedCommNs = intervals::overlap(C, P);
  r.exposedCommNs = r.commNs - r.overlappedCommNs;
  r.busyNs = intervals::length(A);
  r.otherBusyNs = r.busyNs - r.computeNs - r.exposedCommNs;
  r.idleNs = r.rangeNs - r.busyNs;
  if (r.commNs > 0) r.overlap = static_cast<double>(r.overlappedCommNs) / static_cast<double>(r.commNs);
  for (const auto& [op, c] : ops) {
    r.collectives += c.count;
    r.collectivesWithBytes += c.countWithBytes;
    r.bytes += c.bytes;
    r.byOp.push_back(c);
  }
  return r;
}

}  // namespace shardscope::core::timeline
