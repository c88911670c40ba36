#include "core/analysis/bottlenecks.h"

#include <algorithm>

#include "core/analysis/intervals.h"
#include <map>
#include <unordered_map>

namespace shardscope::core {
namespace {

using intervals::Span;
using intervals::coveredBy;
using intervals::unite;

struct Comm {
  Event e;
  Id track;
};

constexpr TimeNs kBackToBackNs = 5'000;   // a kernel starting within 5 µs of another's end was queued
constexpr TimeNs kPromptLaunchNs = 50'000;  // started within 50 µs of its launch: nothing was ahead

}  // namespace

std::vector<Bottleneck> findCollectiveBottlenecks(TraceStore& store, Id runId, std::size_t limit,
                                                  const CancelToken* cancel) {
  const RunSummary summary = store.summary(runId);
  std::map<Id, std::string> pgNames;
  for (const auto& pg : store.processGroups(runId)) pgNames[pg.id] = pg.name;

  // 1. Every exposed all-gather / reduce-scatter, from the device lanes only.
  struct Candidate {
    const Rank* rank;
    Event e;
    TimeNs exposed;
    std::optional<Event> previous;  // the collective just before it on the same stream
  };
  std::vector<Candidate> candidates;
  for (const Rank& rank : summary.ranks) {
    std::vector<Span> compute;
    std::vector<Comm> comms;
    for (const auto& t : summary.tracks) {
      if (t.track.rankId != rank.id) continue;
      const TrackKind k = t.track.kind;
      if (k != TrackKind::GpuStream && k != TrackKind::Comm) continue;
      store.forEachEvent(
          t.track.id,
          [&](const Event& e) {
            if ((e.flags & EventFlags::Instant) || e.cat == "gpu_user_annotation") return;
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
    std::sort(comms.begin(), comms.end(), [](const Comm& a, const Comm& b) {
      return a.track != b.track ? a.track < b.track : a.e.startNs < b.e.startNs;
    });
    for (std::size_t i = 0; i < comms.size(); ++i) {
      const Event& e = comms[i].e;
      if (e.collOp != CollectiveOp::AllGather && e.collOp != CollectiveOp::ReduceScatter) continue;
      const TimeNs exposed = (e.endNs - e.startNs) - coveredBy(P, e.startNs, e.endNs);
      if (exposed <= 0) continue;
      Candidate c{&rank, e, exposed, std::nullopt};
      if (i > 0 && comms[i - 1].track == comms[i].track) c.previous = comms[i - 1].e;
      candidates.push_back(std::move(c));
    }
  }
  // 2. The costliest ones; only they need their launch looked up on the CPU side.
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) { return a.exposed > b.exposed; });
  if (candidates.size() > limit) candidates.resize(limit);

  std::vector<Bottleneck> out;
  for (const Candidate& c : candidates) {
    const Event& e = c.e;
    Bottleneck b;
    b.rank = c.rank->rank;
    b.op = e.collOp;
    b.step = e.step;
    b.startNs = e.startNs;
    b.durNs = e.endNs - e.startNs;
    b.exposedNs = c.exposed;
    b.bytes = e.bytes;
    if (e.bytes && dtypeSize(e.dtype) > 0) b.elements = *e.bytes / dtypeSize(e.dtype);
    if (e.processGroupId) b.processGroup = pgNames[*e.processGroupId];
    b.kernel = std::string(e.name);
    // Its launch (same correlation, before it on a CPU thread) and the innermost layer/unit
    // annotation open at that moment.
    std::optional<TimeNs> launch;
    if (e.correlation) {
      // A launch more than this before its kernel was queued behind other work: rule 2 treats "not
      // found" that way, rule 3 (launched just in time) cannot apply, and the window stays small.
      constexpr TimeNs kLookBackNs = 5'000'000;
      std::vector<Event> cpu;
      for (const auto& t : summary.tracks) {
        if (t.track.rankId != c.rank->id || t.track.kind != TrackKind::CpuThread) continue;
        auto evs = store.eventsInWindow(t.track.id, e.startNs - kLookBackNs, e.startNs + 1);
        for (auto& ev : evs) {
          if (ev.correlation == e.correlation && ev.startNs <= e.startNs) launch = launch ? std::max(*launch, ev.startNs) : ev.startNs;
          cpu.push_back(std::move(ev));
        }
      }
      if (launch) {
        TimeNs bestStart = INT64_MIN;
        for (const auto& a : cpu) {
          if (a.cat != "user_annotation" || a.name.rfind("ProfilerStep", 0) == 0 || a.name.rfind("nccl:", 0) == 0 ||
              a.name.rfind("gloo:", 0) == 0)
            continue;
          if (a.startNs <= *launch && a.endNs >= *launch && a.startNs >= bestStart) {
            bestStart = a.startNs;
            b.unit = std::string(a.name);
          }
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
    if (c.previous && c.previous->collOp == CollectiveOp::ReduceScatter && e.collOp == CollectiveOp::AllGather &&
        e.startNs - c.previous->endNs <= kBackToBackNs && (!launch || *launch < c.previous->endNs)) {
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
    out.push_back(std::move(b));
  }
  return out;
}

}  // namespace shardscope::core
