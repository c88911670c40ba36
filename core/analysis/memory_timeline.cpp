#include "core/analysis/memory_timeline.h"

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>

namespace shardscope::core {

namespace {

std::size_t indexAtOrBefore(const std::vector<TimeNs>& times, TimeNs t) {
  // times is ascending: the last index whose time is <= t; times.size() when there is none.
  const auto it = std::upper_bound(times.begin(), times.end(), t);
  return it == times.begin() ? times.size() : static_cast<std::size_t>(it - times.begin()) - 1;
}

std::vector<MemoryCategoryTimeline> read(TraceStore& store, RunId runId, std::optional<int> onlyRank, const CancelToken* cancel) {
  std::map<std::int64_t, int> rankOf;  // RankId value -> rank number
  for (const Rank& r : store.ranks(runId)) rankOf[r.id.value()] = r.rank;
  // (rank, device type, device id) -> (category, its track)
  std::map<std::tuple<int, int, int>, std::vector<std::pair<MemoryCategory, TrackId>>> groups;
  for (const Track& t : store.tracks(runId)) {
    if (t.kind != TrackKind::Counter || !t.derivedFrom.empty()) continue;
    const auto parsed = parseMemoryCategoryTrackName(t.name);
    if (!parsed) continue;
    const auto r = rankOf.find(t.rankId.value());
    if (r == rankOf.end() || (onlyRank && *onlyRank != r->second)) continue;
    groups[{r->second, parsed->deviceType, parsed->deviceId}].emplace_back(parsed->category, t.id);
  }
  std::vector<MemoryCategoryTimeline> out;
  for (auto& [key, tracks] : groups) {
    if (cancel) cancel->throwIfCancelled();
    MemoryCategoryTimeline tl;
    std::tie(tl.rank, tl.deviceType, tl.deviceId) = key;
    std::sort(tracks.begin(), tracks.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    // Every sample of every category, merged on one axis: (time, category index, value).
    struct Sample {
      TimeNs ts;
      std::size_t category;
      double value;
    };
    std::vector<Sample> samples;
    for (const auto& [cat, trackId] : tracks) {
      const std::size_t ci = tl.categories.size();
      tl.categories.push_back(cat);
      store.forEachCounterSample(trackId, [&](TimeNs ts, double v) { samples.push_back({ts, ci, v}); });
    }
    // Stable: of one track's samples at one time, the last stored is the value from then on.
    std::stable_sort(samples.begin(), samples.end(), [](const Sample& a, const Sample& b) { return a.ts < b.ts; });
    std::vector<double> live(tl.categories.size(), 0.0);
    tl.bytes.assign(tl.categories.size(), {});
    for (std::size_t i = 0; i < samples.size();) {
      const TimeNs ts = samples[i].ts;
      for (; i < samples.size() && samples[i].ts == ts; ++i) live[samples[i].category] = samples[i].value;
      tl.times.push_back(ts);
      for (std::size_t c = 0; c < live.size(); ++c) tl.bytes[c].push_back(live[c]);
    }
    out.push_back(std::move(tl));
  }
  return out;
}

}  // namespace

std::vector<std::pair<MemoryCategory, std::int64_t>> MemoryCategoryTimeline::at(TimeNs t) const {
  std::vector<std::pair<MemoryCategory, std::int64_t>> out;
  const std::size_t i = indexAtOrBefore(times, t);
  for (std::size_t c = 0; c < categories.size(); ++c)
    out.emplace_back(categories[c], i < times.size() ? static_cast<std::int64_t>(bytes[c][i]) : 0);
  return out;
}

std::int64_t MemoryCategoryTimeline::totalAt(TimeNs t) const {
  std::int64_t sum = 0;
  for (const auto& [c, b] : at(t)) sum += b;
  return sum;
}

std::vector<MemoryCategoryTimeline> memoryCategoryTimelines(TraceStore& store, RunId runId, const CancelToken* cancel) {
  return read(store, runId, std::nullopt, cancel);
}

std::vector<MemoryCategoryTimeline> memoryCategoryTimelines(TraceStore& store, RunId runId, int rank, const CancelToken* cancel) {
  return read(store, runId, rank, cancel);
}

}  // namespace shardscope::core
