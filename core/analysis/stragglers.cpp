#include "core/analysis/stragglers.h"

#include "core/analysis/lanes.h"
#include "core/analysis/rank_scan.h"
#include "core/util/units.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>

namespace shardscope::core {
namespace {

using Inst = StragglerAccumulator::Inst;

TimeNs median(std::vector<TimeNs> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

}  // namespace

double binomialUpperTail(std::int64_t k, std::int64_t m, double p) {
  if (k <= 0) return 1.0;
  if (k > m || p <= 0) return 0.0;
  if (p >= 1) return 1.0;
  // Σ_{i=k}^{m} C(m,i) p^i (1-p)^(m-i), in logs; terms fall fast past the mean.
  const double lp = std::log(p), lq = std::log1p(-p);
  const double lm = std::lgamma(static_cast<double>(m) + 1);
  double sum = 0;
  for (std::int64_t i = k; i <= m; ++i) {
    const double lt = lm - std::lgamma(static_cast<double>(i) + 1) - std::lgamma(static_cast<double>(m - i) + 1) +
                      static_cast<double>(i) * lp + static_cast<double>(m - i) * lq;
    const double t = std::exp(lt);
    sum += t;
    if (i > static_cast<double>(m) * p && t < sum * 1e-17) break;
  }
  return std::min(1.0, sum);
}

StragglerAccumulator::StragglerAccumulator(ScanContext& ctx) : ctx_(ctx) {
  for (const auto& pg : ctx.store.processGroups(ctx.summary.run.id)) pgNames_[pg.id] = pg.name;
}
StragglerAccumulator::~StragglerAccumulator() = default;

void StragglerAccumulator::beginRank(const Rank& rank) {
  const auto& ranks = ctx_.summary.ranks;
  rankIndex_ = 0;
  while (rankIndex_ < ranks.size() && ranks[rankIndex_].id != rank.id) ++rankIndex_;
  hasGpu_ = rankHasGpuWork(ctx_.summary, rank.id);
}

bool StragglerAccumulator::beginTrack(const TrackSummary& t) {
  kind_ = t.track.kind;
  return hasGpu_ ? kind_ == TrackKind::GpuStream : kind_ == TrackKind::Comm;
}

void StragglerAccumulator::onEvent(const EventChunk& c, std::size_t i, Id) {
  if (c.flags[i] & EventFlags::Instant) return;
  const auto op = static_cast<CollectiveOp>(c.collOp[i]);
  if (op == CollectiveOp::None || (static_cast<Category>(c.category[i]) != Category::Communication && kind_ != TrackKind::Comm))
    return;
  if (ctx_.strings.bits(c.cat[i]) & StringClasses::kGpuUserAnnotation) return;
  if (ctx_.strings.bits(c.name[i]) & StringClasses::kLinkProbe) return;  // calibration, not the run's traffic

  std::string pg;
  if (c.pg[i])
    if (auto it = pgNames_.find(static_cast<Id>(c.pg[i])); it != pgNames_.end()) pg = it->second;
  auto& v = byKey_[{std::move(pg), static_cast<int>(op)}];
  v.resize(ctx_.summary.ranks.size());
  v[rankIndex_].push_back({c.start[i], c.end[i]});
}

void StragglerAccumulator::onEvents(const EventChunk& c, std::size_t begin, std::size_t end, Id chunkId) {
  for (std::size_t i = begin; i < end; ++i) onEvent(c, i, chunkId);
}

TimeNs StragglerAccumulator::clockOffset(std::size_t rankIndex) const {
  return rankIndex < offsets_.size() ? offsets_[rankIndex] : 0;
}

StragglerReport StragglerAccumulator::finish() {
  report_ = judge();
  return report_;
}

StragglerReport StragglerAccumulator::judge() {
  StragglerReport report;
  const auto& ranks = ctx_.summary.ranks;
  const std::size_t nRanks = ranks.size();
  finished_ = true;
  offsets_.assign(nRanks, 0);
  report.ranks.resize(nRanks);
  for (std::size_t ri = 0; ri < nRanks; ++ri) report.ranks[ri].rank = ranks[ri].rank;
  if (nRanks < 2) return report;
  for (auto& [key, v] : byKey_)
    for (auto& list : v) std::sort(list.begin(), list.end(), [](const Inst& a, const Inst& b) { return a.s < b.s; });

  // Clock offsets: a collective ends at (nearly) the same moment on every rank.
  std::vector<std::vector<TimeNs>> endDiffs(nRanks);
  for (const auto& [key, v] : byKey_) {
    const std::size_t ref = 0;
    if (v[ref].empty()) continue;
    for (std::size_t ri = 1; ri < nRanks; ++ri) {
      const std::size_t n = std::min(v[ref].size(), v[ri].size());
      for (std::size_t k = 0; k < n; ++k) endDiffs[ri].push_back(v[ri][k].e - v[ref][k].e);
    }
  }
  for (std::size_t ri = 1; ri < nRanks; ++ri) offsets_[ri] = report.ranks[ri].clockOffsetNs = median(std::move(endDiffs[ri]));

  for (const auto& [key, v] : byKey_) {
    std::size_t count = 0;
    for (const auto& list : v) count = std::max(count, list.size());
    ArrivalGroup g;
    g.processGroup = key.first;
    g.op = static_cast<CollectiveOp>(key.second);
    for (const auto& list : v) g.ranks += list.empty() ? 0 : 1;
    std::vector<std::int64_t> lastCounts(nRanks, 0);
    TimeNs skewSum = 0;
    for (std::size_t k = 0; k < count; ++k) {
      std::vector<std::pair<std::size_t, TimeNs>> arrivals;  // (rank index, aligned start)
      for (std::size_t ri = 0; ri < nRanks; ++ri)
        if (k < v[ri].size()) arrivals.push_back({ri, v[ri][k].s - offsets_[ri]});
      if (arrivals.size() < 2) continue;
      ++report.matched;
      ++g.matched;
      auto [firstIt, lastIt] =
          std::minmax_element(arrivals.begin(), arrivals.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
      const TimeNs first = firstIt->second, last = lastIt->second;
      report.maxSkewNs = std::max(report.maxSkewNs, last - first);
      g.maxSkewNs = std::max(g.maxSkewNs, last - first);
      skewSum += last - first;
      RankArrival& late = report.ranks[lastIt->first];
      if (last > first) {
        ++late.lastCount;
        ++lastCounts[lastIt->first];
      }
      for (const auto& [ri, t] : arrivals) {
        ++report.ranks[ri].instances;
        report.ranks[ri].lateNs += t - first;
        late.causedWaitNs += last - t;
        g.waitNs += last - t;
        report.totalWaitNs += last - t;
      }
    }
    if (g.matched == 0) continue;
    g.meanSkewNs = skewSum / g.matched;
    const auto most = std::max_element(lastCounts.begin(), lastCounts.end());
    if (*most > 0) {
      g.mostOftenLast = ranks[static_cast<std::size_t>(most - lastCounts.begin())].rank;
      g.mostOftenLastCount = *most;
    }
    report.groups.push_back(std::move(g));
  }
  std::stable_sort(report.groups.begin(), report.groups.end(),
                   [](const ArrivalGroup& a, const ArrivalGroup& b) { return a.waitNs > b.waitNs; });
  const RankArrival* worst = nullptr;
  for (const auto& r : report.ranks)
    if (r.causedWaitNs > 0 && (!worst || r.causedWaitNs > worst->causedWaitNs)) worst = &r;
  if (!worst) {
    report.evidence = report.matched ? "no rank kept the others waiting" : "no collective was matched across ranks";
    return report;
  }
  // Named only when the evidence says so (stragglers.h): more often last than chance, significantly,
  // and the main cause of the waiting.
  report.mostWaitedFor = worst->rank;
  const double n = static_cast<double>(nRanks);
  const double share = worst->instances ? static_cast<double>(worst->lastCount) / static_cast<double>(worst->instances) : 0;
  report.stragglerPValue = binomialUpperTail(worst->lastCount, worst->instances, 1.0 / n);
  const double waitShare =
      report.totalWaitNs > 0 ? static_cast<double>(worst->causedWaitNs) / static_cast<double>(report.totalWaitNs) : 0;
  const bool often = share >= std::min(1.0, kStragglerMinShareOverChance / n);
  const bool significant = report.stragglerPValue < kStragglerMaxPValue;
  const bool dominant = waitShare >= kStragglerMinShareOfWait;
  const std::string who = "rank " + std::to_string(worst->rank);
  const std::string facts = who + " arrived last at " + std::to_string(worst->lastCount) + " of " +
                            std::to_string(worst->instances) + " matched collectives (" + formatPercent(100.0 * share, 1) +
                            "; chance with " + std::to_string(nRanks) + " ranks: " + formatPercent(100.0 / n, 1) +
                            ") and the others waited " + formatMsFromNs(worst->causedWaitNs) + " for it (" +
                            formatPercent(100.0 * waitShare, 1) + " of all waiting)";
  if (often && significant && dominant) {
    report.straggler = worst->rank;
    report.evidence = facts + ": the straggler";
  } else {
    report.evidence = facts + ": no straggler (" +
                      std::string(!often         ? "not last much more often than chance"
                                  : !significant ? "too few collectives to tell from chance"
                                                 : "it causes less than half of the waiting") +
                      ")";
  }
  return report;
}

std::optional<InstanceArrival> StragglerAccumulator::arrival(std::size_t rankIndex, Id processGroupId, CollectiveOp op,
                                                             TimeNs startNs, TimeNs endNs) const {
  const auto& ranks = ctx_.summary.ranks;
  if (!finished_ || ranks.size() < 2 || rankIndex >= ranks.size()) return std::nullopt;
  std::string pg;
  if (processGroupId)
    if (auto it = pgNames_.find(processGroupId); it != pgNames_.end()) pg = it->second;
  auto kv = byKey_.find({pg, static_cast<int>(op)});
  if (kv == byKey_.end()) return std::nullopt;
  const auto& v = kv->second;
  const auto& mine = v[rankIndex];
  auto it = std::lower_bound(mine.begin(), mine.end(), startNs, [](const Inst& a, TimeNs t) { return a.s < t; });
  while (it != mine.end() && it->s == startNs && it->e != endNs) ++it;
  if (it == mine.end() || it->s != startNs) return std::nullopt;
  const std::size_t k = static_cast<std::size_t>(it - mine.begin());
  std::vector<std::pair<std::size_t, TimeNs>> arrivals;  // as in finish()
  for (std::size_t ri = 0; ri < ranks.size(); ++ri)
    if (k < v[ri].size()) arrivals.push_back({ri, v[ri][k].s - offsets_[ri]});
  if (arrivals.size() < 2) return std::nullopt;
  auto [firstIt, lastIt] =
      std::minmax_element(arrivals.begin(), arrivals.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  InstanceArrival a;
  a.matchIndex = k;
  a.peers = static_cast<int>(arrivals.size());
  a.arrivalNs = startNs - offsets_[rankIndex];
  a.firstArrivalNs = firstIt->second;
  a.lastArrivalNs = lastIt->second;
  a.lastRankIndex = lastIt->first;
  a.lastRank = ranks[lastIt->first].rank;
  return a;
}

StragglerReport detectStragglers(TraceStore& store, RunId runId, const CancelToken* cancel) {
  ScanContext ctx(store, runId);
  StragglerAccumulator acc(ctx);
  scanRun(ctx, cancel, acc);
  return acc.finish();
}

}  // namespace shardscope::core
