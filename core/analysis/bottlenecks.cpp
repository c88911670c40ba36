#include "core/analysis/bottlenecks.h"

#include <algorithm>
#include <map>
#include <unordered_map>

namespace shardscope::core {
namespace {

struct Span {
  TimeNs s, e;
};

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

TimeNs coveredBy(const std::vector<Span>& u, TimeNs s, TimeNs e) {
  auto it = std::upper_bound(u.begin(), u.end(), s, [](TimeNs t, const Span& x) { return t < x.e; });
  TimeNs t = 0;
  for (; it != u.end() && it->s < e; ++it) t += std::min(e, it->e) - std::max(s, it->s);
  return t;
}

struct Comm {
  Event e;
  Id track;
};

constexpr TimeNs kBackToBackNs = 5'000;   // a kernel starting within 5 µs of another's end was queued
constexpr TimeNs kPromptLaunchNs = 50'000;  // started within 50 µs of its launch: nothing was ahead

}  // namespace

std::vector<Bottleneck> findCollectiveBottlenecks(TraceStore& store, Id runId, std::size_t limit,
                                                  const CancelToken* cancel) {
  std::vector<Bottleneck> all;
  const RunSummary summary = store.summary(runId);
  std::map<Id, std::string> pgNames;
  for (const auto& pg : store.processGroups(runId)) pgNames[pg.id] = pg.name;
  for (const Rank& rank : summary.ranks) {
    std::vector<Span> compute;
    std::vector<Comm> comms;
    std::unordered_map<std::int64_t, TimeNs> launchAt;   // correlation -> CPU launch start
    std::vector<Event> annotations;                      // CPU user annotations (layers, units)
    for (const auto& t : summary.tracks) {
      if (t.track.rankId != rank.id) continue;
      const TrackKind k = t.track.kind;
      if (k != TrackKind::GpuStream && k != TrackKind::CpuThread && k != TrackKind::Comm) continue;
      store.forEachEvent(
          t.track.id,
          [&](const Event& e) {
            if (e.flags & EventFlags::Instant) return;
            if (k == TrackKind::CpuThread) {
              if (e.correlation) launchAt.emplace(*e.correlation, e.startNs);
              // Layer / unit annotations; not the step markers nor the collectives' own "nccl:*" titles.
              if (e.cat == "user_annotation" && e.name.rfind("ProfilerStep", 0) != 0 && e.name.rfind("nccl:", 0) != 0 &&
                  e.name.rfind("gloo:", 0) != 0)
                annotations.push_back(e);
              return;
            }
            if (e.cat == "gpu_user_annotation") return;
            const bool comm = e.collOp != CollectiveOp::None && (e.category == Category::Communication || k == TrackKind::Comm);
            if (comm)
              comms.push_back({e, t.track.id});
            else if (e.category == Category::Computation)
              compute.push_back({e.startNs, e.endNs});
          },
          false);
      if (cancel) cancel->throwIfCancelled();
    }
    const auto P = unite(std::move(compute));
    // Per stream, in time order, to see what ran right before each collective.
    std::sort(comms.begin(), comms.end(), [](const Comm& a, const Comm& b) {
      return a.track != b.track ? a.track < b.track : a.e.startNs < b.e.startNs;
    });
    std::sort(annotations.begin(), annotations.end(), [](const Event& a, const Event& b) { return a.startNs < b.startNs; });
    for (std::size_t i = 0; i < comms.size(); ++i) {
      const Event& e = comms[i].e;
      if (e.collOp != CollectiveOp::AllGather && e.collOp != CollectiveOp::ReduceScatter) continue;
      Bottleneck b;
      b.rank = rank.rank;
      b.op = e.collOp;
      b.step = e.step;
      b.startNs = e.startNs;
      b.durNs = e.endNs - e.startNs;
      b.exposedNs = b.durNs - coveredBy(P, e.startNs, e.endNs);
      if (b.exposedNs <= 0) continue;
      b.bytes = e.bytes;
      if (e.bytes && dtypeSize(e.dtype) > 0) b.elements = *e.bytes / dtypeSize(e.dtype);
      if (e.processGroupId) b.processGroup = pgNames[*e.processGroupId];
      b.kernel = e.name;
      std::optional<TimeNs> launch;
      if (e.correlation)
        if (auto it = launchAt.find(*e.correlation); it != launchAt.end()) launch = it->second;
      if (launch) {
        // The innermost annotation open at the launch names the layer / unit.
        TimeNs bestStart = INT64_MIN;
        for (const auto& a : annotations) {
          if (a.startNs > *launch) break;
          if (a.endNs >= *launch && a.startNs >= bestStart) {
            bestStart = a.startNs;
            b.unit = a.name;
          }
        }
      }
      // Rule 1: small messages do not reach the link's bandwidth.
      if (b.elements && *b.elements < kEfficientCollectiveElements) {
        b.reasons.push_back("message of " + std::to_string(*b.elements) + " elements is below the ~33M elements an " +
                            "all-gather needs to be efficient");
        b.suggestions.push_back(e.collOp == CollectiveOp::AllGather
                                    ? "gather bigger pieces: coarser FSDP wrapping or a larger ZeRO-3 prefetch bucket "
                                      "(stage3_prefetch_bucket_size)"
                                    : "reduce bigger pieces: larger reduce buckets (reduce_bucket_size / coarser wrapping)");
      }
      // Rule 2: queued behind a reduce-scatter on the same stream (one NCCL stream per group).
      if (i > 0 && comms[i - 1].track == comms[i].track && comms[i - 1].e.collOp == CollectiveOp::ReduceScatter &&
          e.collOp == CollectiveOp::AllGather && e.startNs - comms[i - 1].e.endNs <= kBackToBackNs &&
          (!launch || *launch < comms[i - 1].e.endNs)) {
        b.reasons.push_back("waited for a reduce-scatter on the same communication stream");
        b.suggestions.push_back("issue the next all-gather before the gradient reduce-scatter: FSDP backward_prefetch="
                                "BACKWARD_PRE (or POST if memory is tight)");
      }
      // Rule 3: issued late: it started as soon as it was launched, yet computation had to wait for it.
      if (launch && e.startNs - *launch <= kPromptLaunchNs && b.exposedNs * 2 >= b.durNs && b.reasons.size() < 2) {
        b.reasons.push_back("launched just before it was needed: nothing was computing while it ran");
        b.suggestions.push_back(e.collOp == CollectiveOp::AllGather
                                    ? "prefetch earlier: FSDP forward_prefetch / backward_prefetch, or a larger "
                                      "ZeRO-3 prefetch bucket"
                                    : "overlap it with the next layer's backward (bucket gradients earlier)");
      }
      if (b.reasons.empty()) b.reasons.push_back("not overlapped with computation");
      all.push_back(std::move(b));
    }
  }
  std::sort(all.begin(), all.end(), [](const Bottleneck& a, const Bottleneck& b) { return a.exposedNs > b.exposedNs; });
  if (all.size() > limit) all.resize(limit);
  return all;
}

}  // namespace shardscope::core
