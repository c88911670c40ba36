#include "core/analysis/stragglers.h"

#include "core/analysis/lanes.h"

#include <algorithm>
#include <map>
#include <string>

namespace shardscope::core {
namespace {

struct Inst {
  TimeNs s, e;
};

TimeNs median(std::vector<TimeNs> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

}  // namespace

StragglerReport detectStragglers(TraceStore& store, Id runId, const CancelToken* cancel) {
  StragglerReport report;
  const RunSummary summary = store.summary(runId);
  std::map<Id, std::string> pgNames;
  for (const auto& pg : store.processGroups(runId)) pgNames[pg.id] = pg.name;
  // (group, op) -> rank index -> instances in time order
  std::map<std::pair<std::string, int>, std::vector<std::vector<Inst>>> byKey;
  const std::size_t nRanks = summary.ranks.size();
  for (std::size_t ri = 0; ri < nRanks; ++ri) {
    const Rank& rank = summary.ranks[ri];
    const bool hasGpu = rankHasGpuWork(summary, rank.id);
    for (const auto& t : summary.tracks) {
      if (t.track.rankId != rank.id) continue;
      const TrackKind k = t.track.kind;
      const bool lane = hasGpu ? k == TrackKind::GpuStream : k == TrackKind::Comm;
      if (!lane) continue;
      store.forEachEvent(
          t.track.id,
          [&](const Event& e) {
            if (e.flags & EventFlags::Instant || e.cat == "gpu_user_annotation") return;
            if (e.collOp == CollectiveOp::None || (e.category != Category::Communication && k != TrackKind::Comm)) return;
            const std::string pg = e.processGroupId ? pgNames[*e.processGroupId] : std::string();
            auto& v = byKey[{pg, static_cast<int>(e.collOp)}];
            v.resize(nRanks);
            v[ri].push_back({e.startNs, e.endNs});
          },
          false);
      if (cancel) cancel->throwIfCancelled();
    }
  }
  report.ranks.resize(nRanks);
  for (std::size_t ri = 0; ri < nRanks; ++ri) report.ranks[ri].rank = summary.ranks[ri].rank;
  if (nRanks < 2) return report;
  for (auto& [key, v] : byKey)
    for (auto& list : v) std::sort(list.begin(), list.end(), [](const Inst& a, const Inst& b) { return a.s < b.s; });

  // Clock offsets: a collective ends at (nearly) the same moment on every rank.
  std::vector<std::vector<TimeNs>> endDiffs(nRanks);
  for (const auto& [key, v] : byKey) {
    const std::size_t ref = 0;
    if (v[ref].empty()) continue;
    for (std::size_t ri = 1; ri < nRanks; ++ri) {
      const std::size_t n = std::min(v[ref].size(), v[ri].size());
      for (std::size_t k = 0; k < n; ++k) endDiffs[ri].push_back(v[ri][k].e - v[ref][k].e);
    }
  }
  for (std::size_t ri = 1; ri < nRanks; ++ri) report.ranks[ri].clockOffsetNs = median(endDiffs[ri]);

  for (const auto& [key, v] : byKey) {
    std::size_t count = 0;
    for (const auto& list : v) count = std::max(count, list.size());
    for (std::size_t k = 0; k < count; ++k) {
      std::vector<std::pair<std::size_t, TimeNs>> arrivals;  // (rank index, aligned start)
      for (std::size_t ri = 0; ri < nRanks; ++ri)
        if (k < v[ri].size()) arrivals.push_back({ri, v[ri][k].s - report.ranks[ri].clockOffsetNs});
      if (arrivals.size() < 2) continue;
      ++report.matched;
      auto [firstIt, lastIt] = std::minmax_element(arrivals.begin(), arrivals.end(),
                                                   [](const auto& a, const auto& b) { return a.second < b.second; });
      const TimeNs first = firstIt->second, last = lastIt->second;
      report.maxSkewNs = std::max(report.maxSkewNs, last - first);
      RankArrival& late = report.ranks[lastIt->first];
      if (last > first) ++late.lastCount;
      for (const auto& [ri, t] : arrivals) {
        ++report.ranks[ri].instances;
        report.ranks[ri].lateNs += t - first;
        late.causedWaitNs += last - t;
      }
    }
  }
  TimeNs worst = 0;
  for (const auto& r : report.ranks)
    if (r.causedWaitNs > worst) {
      worst = r.causedWaitNs;
      report.straggler = r.rank;
    }
  return report;
}

}  // namespace shardscope::core
