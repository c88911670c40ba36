#include "core/analysis/bottlenecks.h"

#include <algorithm>
#include <cstdio>

#include "core/analysis/intervals.h"
#include "core/analysis/lanes.h"
#include "core/analysis/rank_scan.h"
#include "core/analysis/stragglers.h"
#include <map>
#include <set>
#include <tuple>

namespace shardscope::core {
namespace {

using intervals::Span;
using intervals::coveredBy;
using intervals::unite;

constexpr TimeNs kBackToBackNs = 5'000;   // a kernel starting within 5 µs of another's end was queued
constexpr TimeNs kPromptLaunchNs = 50'000;  // started within 50 µs of its launch: nothing was ahead

std::string ms(TimeNs ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f ms", static_cast<double>(ns) / 1e6);
  return buf;
}

}  // namespace

BottleneckAccumulator::BottleneckAccumulator(ScanContext& ctx) : ctx_(ctx) {}
BottleneckAccumulator::~BottleneckAccumulator() = default;

void BottleneckAccumulator::beginRank(const Rank& rank) {
  const auto& ranks = ctx_.summary.ranks;
  rankIndex_ = 0;
  while (rankIndex_ < ranks.size() && ranks[rankIndex_].id != rank.id) ++rankIndex_;
  compute_.clear();
  comms_.clear();
}

bool BottleneckAccumulator::beginTrack(const TrackSummary& t) {
  // Every exposed all-gather / reduce-scatter, from the device lanes only.
  kind_ = t.track.kind;
  track_ = t.track.id;
  return kind_ == TrackKind::GpuStream || kind_ == TrackKind::Comm;
}

void BottleneckAccumulator::onEvent(const EventChunk& c, std::size_t i, Id chunkId) {
  if ((c.flags[i] & EventFlags::Instant) || (ctx_.strings.bits(c.cat[i]) & StringClasses::kGpuUserAnnotation)) return;
  const auto op = static_cast<CollectiveOp>(c.collOp[i]);
  const auto category = static_cast<Category>(c.category[i]);
  const bool comm = op != CollectiveOp::None && (category == Category::Communication || kind_ == TrackKind::Comm);
  if (comm) {
    const bool local = isLocalCollective(runOfOneRank(ctx_.summary.run), c.groupSize[i]);
    comms_.push_back({c.start[i], c.end[i], track_, EventChunk::eventId(chunkId, i), op, c.step[i], c.bytes[i], c.name[i],
                      c.pg[i], local});
  }
  else if (category == Category::Computation)
    compute_.push_back({c.start[i], c.end[i]});
}

void BottleneckAccumulator::onEvents(const EventChunk& c, std::size_t begin, std::size_t end, Id chunkId) {
  for (std::size_t i = begin; i < end; ++i) onEvent(c, i, chunkId);
}

void BottleneckAccumulator::endRank(const Rank&) {
  const auto P = unite(std::move(compute_));
  std::sort(comms_.begin(), comms_.end(), [](const Comm& a, const Comm& b) {
    return a.track != b.track ? a.track < b.track : a.s < b.s;
  });
  // The ordinal of each collective among those of its step with the same op, group, bytes and name
  // (in time order across the rank's lanes): the same collective in every step gets the same key.
  std::vector<std::size_t> byTime(comms_.size());
  for (std::size_t i = 0; i < byTime.size(); ++i) byTime[i] = i;
  std::sort(byTime.begin(), byTime.end(), [&](std::size_t a, std::size_t b) { return comms_[a].s < comms_[b].s; });
  std::vector<std::uint64_t> keys(comms_.size());
  std::map<std::tuple<std::int64_t, int, std::uint32_t, std::int64_t, std::uint32_t>, std::uint32_t> ordinal;
  for (std::size_t i : byTime) {
    const Comm& e = comms_[i];
    const std::uint32_t k = ordinal[{e.step, static_cast<int>(e.op), e.pg, e.bytes, e.name}]++;
    std::uint64_t h = 1469598103934665603ull;
    for (std::uint64_t v : {static_cast<std::uint64_t>(rankIndex_), static_cast<std::uint64_t>(e.op), static_cast<std::uint64_t>(e.pg),
                            static_cast<std::uint64_t>(e.bytes), static_cast<std::uint64_t>(e.name), static_cast<std::uint64_t>(k)})
      h = (h ^ v) * 1099511628211ull;
    keys[i] = h;
  }
  for (std::size_t i = 0; i < comms_.size(); ++i) {
    const Comm& e = comms_[i];
    if (e.op != CollectiveOp::AllGather && e.op != CollectiveOp::ReduceScatter) continue;
    if (e.local) continue;  // a collective of one rank: local work, not a bottleneck
    const TimeNs exposed = (e.e - e.s) - coveredBy(P, e.s, e.e);
    if (exposed <= 0) continue;
    Candidate c{rankIndex_, e.eventId, exposed, false, CollectiveOp::None, 0, e.step, keys[i]};
    if (i > 0 && comms_[i - 1].track == e.track) {
      c.hasPrevious = true;
      c.previousOp = comms_[i - 1].op;
      c.previousEnd = comms_[i - 1].e;
    }
    candidates_.push_back(c);
  }
  compute_.clear();
  comms_.clear();
}

std::vector<Bottleneck> BottleneckAccumulator::finish(std::size_t limit, const StragglerAccumulator* stragglers) {
  TraceStore& store = ctx_.store;
  const RunSummary& summary = ctx_.summary;
  std::map<Id, std::string> pgNames;
  for (const auto& pg : store.processGroups(summary.run.id)) pgNames[pg.id] = pg.name;

  // Group the instances of the same collective of a rank over its steps; rank the groups by exposed
  // time summed over their instances. Each group is described by its worst instance; only those need
  // their launch looked up on the CPU side.
  struct Group {
    std::size_t worst;  // index into candidates_
    std::int64_t instances = 0;
    TimeNs total = 0;
    std::set<std::int64_t> steps;
  };
  std::map<std::uint64_t, Group> groups;
  for (std::size_t i = 0; i < candidates_.size(); ++i) {
    const Candidate& c = candidates_[i];
    auto [it, fresh] = groups.try_emplace(c.key, Group{i});
    Group& g = it->second;
    if (!fresh && c.exposed > candidates_[g.worst].exposed) g.worst = i;
    ++g.instances;
    g.total += c.exposed;
    if (c.step != EventChunk::kNull) g.steps.insert(c.step);
  }
  std::vector<const Group*> ranked;
  for (const auto& [key, g] : groups) ranked.push_back(&g);
  std::sort(ranked.begin(), ranked.end(), [&](const Group* a, const Group* b) {
    return a->total != b->total ? a->total > b->total : candidates_[a->worst].eventId < candidates_[b->worst].eventId;
  });
  if (ranked.size() > limit) ranked.resize(limit);
  std::vector<Candidate> worst;
  std::vector<const Group*> groupOf;
  for (const Group* g : ranked) {
    worst.push_back(candidates_[g->worst]);
    groupOf.push_back(g);
  }
  candidates_ = std::move(worst);
  const std::vector<Step> steps = stragglers ? store.steps(summary.run.id) : std::vector<Step>();
  auto stepStart = [&](Id rankId, std::int64_t step) -> std::optional<TimeNs> {
    for (const Step& s : steps)
      if (s.rankId == rankId && s.step == step) return s.startNs;
    return std::nullopt;
  };

  std::vector<Bottleneck> out;
  for (std::size_t ci = 0; ci < candidates_.size(); ++ci) {
    const Candidate& c = candidates_[ci];
    const Rank& rank = summary.ranks[c.rankIndex];
    const auto ev = store.event(c.eventId, false);
    if (!ev) continue;
    const Event& e = *ev;
    Bottleneck b;
    const Group& g = *groupOf[ci];
    b.instances = g.instances;
    b.stepsSeen = std::max<std::int64_t>(1, static_cast<std::int64_t>(g.steps.size()));
    b.totalExposedNs = g.total;
    b.meanExposedNs = g.total / std::max<std::int64_t>(1, g.instances);
    b.rank = rank.rank;
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
        if (t.track.rankId != rank.id || t.track.kind != TrackKind::CpuThread) continue;
        auto evs = store.eventsInWindow(t.track.id, e.startNs - kLookBackNs, e.startNs + 1);
        for (auto& x : evs) {
          if (x.correlation == e.correlation && x.startNs <= e.startNs) launch = launch ? std::max(*launch, x.startNs) : x.startNs;
          cpu.push_back(std::move(x));
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
      b.reasons.push_back("message of " + std::to_string(*b.elements) + " elements is below the ~33M elements " +
                          (e.collOp == CollectiveOp::AllGather ? "an all-gather" : "a reduce-scatter") +
                          " needs to be efficient");
      b.suggestions.push_back(e.collOp == CollectiveOp::AllGather
                                  ? "gather bigger pieces: coarser FSDP wrapping or a larger ZeRO-3 prefetch bucket "
                                    "(stage3_prefetch_bucket_size)"
                                  : "reduce bigger pieces: larger reduce buckets (reduce_bucket_size / coarser wrapping)");
    }
    // Rule 2: queued behind a reduce-scatter on the same stream (one NCCL stream per group).
    if (c.hasPrevious && c.previousOp == CollectiveOp::ReduceScatter && e.collOp == CollectiveOp::AllGather &&
        e.startNs - c.previousEnd <= kBackToBackNs && (!launch || *launch < c.previousEnd)) {
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
    // Rule 4: rank skew: a collective completes only when the last rank has joined; when this rank
    // spent most of its exposed time waiting for a later peer, the cause is on that peer.
    // A collective cannot finish on this rank before the last rank joined, so a wait longer than the
    // instance itself means the match or the clock alignment does not hold for it: no claim then.
    if (stragglers) {
      const auto a = stragglers->arrival(c.rankIndex, e.processGroupId.value_or(0), e.collOp, e.startNs, e.endNs);
      const TimeNs wait = a ? a->lastArrivalNs - a->arrivalNs : 0;
      const bool plausible = static_cast<double>(wait) <= (1.0 + kSkewAlignmentSlack) * static_cast<double>(b.durNs);
      if (a && a->lastRankIndex != c.rankIndex && wait > 0 && plausible &&
          static_cast<double>(wait) >= kSkewShareOfExposed * static_cast<double>(b.exposedNs)) {
        const std::string late = "rank " + std::to_string(a->lastRank);
        b.lateRank = a->lastRank;
        b.waitForLateRankNs = wait;
        b.reasons.push_back("waited " + ms(wait) + " for " + late + ", the last of " + std::to_string(a->peers) +
                            " ranks to arrive (clocks aligned): rank skew");
        // Why is the late rank late? Its lateness relative to this rank = how much later it began the
        // step + how much longer its work from the step start to this collective took.
        const Rank& lateRank = summary.ranks[a->lastRankIndex];
        std::optional<TimeNs> mine, theirs;
        if (e.step) {
          mine = stepStart(rank.id, *e.step);
          theirs = stepStart(lateRank.id, *e.step);
        }
        std::string why;
        if (mine && theirs) {
          const TimeNs startDelay = (*theirs - stragglers->clockOffset(a->lastRankIndex)) - (*mine - stragglers->clockOffset(c.rankIndex));
          if (static_cast<double>(startDelay) >= 0.5 * static_cast<double>(wait))
            why = late + " started step " + std::to_string(*e.step) + " " + ms(startDelay) +
                  " later than rank " + std::to_string(rank.rank) +
                  ": look at what delays its step start (data loading, host-side work, the previous step's tail)";
          else
            why = late + " took " + ms(wait - startDelay) + " longer than rank " + std::to_string(rank.rank) +
                  " from the step start to this collective: more or slower work before it there (load imbalance, "
                  "a slower or throttled GPU, host-side stalls)";
        } else {
          why = late + " reaches this collective later: compare its work before it with this rank's";
        }
        b.suggestions.push_back("fix the straggler, not this collective: " + why +
                                "; see the arrival table (stragglers) for how often it is last");
      }
    }
    if (b.reasons.empty()) b.reasons.push_back("not overlapped with computation");
    out.push_back(std::move(b));
  }
  candidates_.clear();
  return out;
}

std::vector<Bottleneck> findCollectiveBottlenecks(TraceStore& store, Id runId, std::size_t limit,
                                                  const CancelToken* cancel) {
  ScanContext ctx(store, runId);
  BottleneckAccumulator bottlenecks(ctx);
  StragglerAccumulator stragglers(ctx);
  scanRun(ctx, cancel, bottlenecks, stragglers);
  stragglers.finish();
  return bottlenecks.finish(limit, &stragglers);
}

}  // namespace shardscope::core
