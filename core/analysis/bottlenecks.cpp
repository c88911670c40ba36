#include "core/analysis/bottlenecks.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "core/analysis/collectives.h"
#include "core/analysis/intervals.h"
#include "core/analysis/lanes.h"
#include "core/analysis/rank_scan.h"
#include "core/analysis/step_breakdown.h"
#include "core/analysis/stragglers.h"
#include "core/model/config_knobs.h"
#include "core/util/units.h"

namespace shardscope::core {
namespace {

using intervals::coveredBy;
using intervals::Span;
using intervals::unite;

constexpr TimeNs kBackToBackNs = 5'000;  // a kernel starting within 5 µs of another's end was queued
constexpr TimeNs kNoLaunch = INT64_MIN;
constexpr std::size_t kKneeSamplesPerGroup = 1 << 16;  // enough for every size of any run; bounded for huge traces

std::string opName(CollectiveOp op) { return std::string(toString(op)); }

// Annotations that bracket communication itself or the step, never a module the user can change.
bool isTargetAnnotation(const std::string& name) {
  return !name.empty() && name.rfind("ProfilerStep", 0) != 0 && name.rfind("nccl:", 0) != 0 && name.rfind("gloo:", 0) != 0 &&
         name.rfind("record_param_comms", 0) != 0 && name.rfind("c10d::", 0) != 0;
}

double busBw(std::int64_t bytes, TimeNs dur, CollectiveOp op, int groupSize) {
  if (bytes <= 0 || dur <= 0) return 0;
  const double alg = static_cast<double>(bytes) / static_cast<double>(dur);  // bytes/ns = GB/s
  return alg * busBandwidthFactor(op, groupSize).value_or(1.0);
}

// ------------------------------------------------------------------------------------------------
// Advice worded by the run's own configuration (config_knobs.h): the strategy's own knob, never one
// already set, sized from what was measured. An imported trace (no configuration) gets each
// strategy's knob by name.

using Family = ConfigKnobs::Family;

std::string joinOr(const std::vector<std::string>& parts) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) out += (i == 0 ? "" : i + 1 == parts.size() ? " or " : ", ") + parts[i];
  return out;
}

std::string mib(double v) { return formatFixed(v, 0) + " MiB"; }

// What one piece of advice says and, where a knob of the run carries it out, that change.
struct Advice {
  std::string text;
  std::optional<KnobChange> change;
};

KnobChange change(std::string key, std::string value) { return KnobChange{{{std::move(key), std::move(value)}}}; }

// What is measured about the messages: their size and the link's knee on their process group.
struct Sizing {
  std::optional<std::int64_t> elements, bytes, kneeBytes;
  // The knee in the messages' elements (their dtype), when both are known.
  std::optional<std::int64_t> kneeElements() const {
    if (!kneeBytes || !elements || !bytes || *bytes <= 0) return std::nullopt;
    return std::max<std::int64_t>(1, static_cast<std::int64_t>(static_cast<double>(*kneeBytes) * static_cast<double>(*elements) /
                                                               static_cast<double>(*bytes)));
  }
  std::string kneeText() const {
    return kneeBytes ? " (the link's knee, where it reaches half its bandwidth, is " + formatBytes(*kneeBytes) + ")"
                     : std::string();
  }
};

// An all-gather issued too late (queued behind another collective, or with nothing left to hide it).
Advice allGatherAdvice(const ConfigKnobs& k, const Sizing& m, int worldSize, bool queued) {
  const std::string gathers = "each of the " + std::to_string(worldSize) + " ranks gathers " + std::to_string(worldSize - 1) +
                              "/" + std::to_string(worldSize) + " of the unit";
  if (k.family == Family::Fsdp) {
    std::vector<std::string> tries;
    std::optional<KnobChange> first;
    if (k.backwardPrefetch != BackwardPrefetch::Pre) {
      tries.push_back("backward_prefetch=pre (BACKWARD_PRE; post when memory is tight)");
      first = change(std::string(knob_key::kBackwardPrefetch), "pre");
    }
    if (k.forwardPrefetch != true) {
      tries.push_back("forward_prefetch=true");
      if (!first) first = change(std::string(knob_key::kForwardPrefetch), "true");
    }
    if (!tries.empty()) return {"issue it earlier: " + joinOr(tries) + "; " + gathers, first};
    return {
        "both prefetches are already on (backward_prefetch=pre, forward_prefetch=true): the unit's computation is too "
        "short to hide its gather; wrap coarser units (fewer, larger all-gathers) or use shard_grad_op / hsdp; " +
            gathers,
        std::nullopt};
  }
  if (k.family == Family::Zero && k.zeroStage == 3) {
    std::vector<std::string> tries;
    std::optional<KnobChange> first;
    if (k.overlapComm != true) {
      tries.push_back("overlap_comm=true");
      first = change(std::string(knob_key::kOverlapComm), "true");
    }
    std::string bucket = "a larger stage3_prefetch_bucket_size";
    if (k.prefetchBucketSize) {
      const std::int64_t want = std::max<std::int64_t>(2 * *k.prefetchBucketSize, m.elements ? 2 * *m.elements : 0);
      bucket += " (now " + formatElements(*k.prefetchBucketSize) + "; e.g. " + formatElements(want) + ")";
      if (!first) first = change(std::string(knob_key::kPrefetchBucketSize), std::to_string(want));
    }
    tries.push_back(bucket + " so the next unit's parameters are fetched ahead");
    return {
        (queued ? "fetch it before the collective it queues behind: " : "prefetch it earlier: ") + joinOr(tries) + "; " + gathers,
        first};
  }
  if (k.family == Family::Zero)
    return {
        "the all-gather of the updated parameters after the step has nothing to overlap: a larger allgather_bucket_size "
        "(fewer, larger gathers)",
        std::nullopt};
  return {queued ? std::string("issue the all-gather before the collective it queues behind: FSDP backward_prefetch=BACKWARD_PRE "
                               "(POST when memory is tight); ZeRO-3 overlap_comm=true")
                 : "prefetch it earlier so the previous unit's computation hides it: FSDP forward_prefetch=True / "
                   "backward_prefetch=BACKWARD_PRE, ZeRO-3 a larger stage3_prefetch_bucket_size; " +
                       gathers,
          std::nullopt};
}

// Gradient reduction that backward does not hide (or that queues on the stream): smaller buckets so
// the first starts while backward runs, with the run's own bucket knob and its value — no smaller
// than the link's knee, below which each message loses bandwidth.
Advice gradientReductionAdvice(const ConfigKnobs& k, CollectiveOp op, const Sizing& m) {
  const auto kneeElements = m.kneeElements();
  if (k.family == Family::Zero) {
    std::vector<std::string> parts;
    std::optional<KnobChange> first;
    if (k.overlapComm != true) {
      parts.push_back("overlap_comm=true, so the reduction runs during backward");
      first = change(std::string(knob_key::kOverlapComm), "true");
    }
    if (k.reduceBucketSize && m.elements && *k.reduceBucketSize >= *m.elements) {
      const std::int64_t want = std::max<std::int64_t>({*m.elements / 4, kneeElements.value_or(1), 1});
      if (want < *m.elements) {
        parts.push_back(
            "a smaller reduce_bucket_size: each reduction carries " + formatElements(*m.elements) + " and one bucket of " +
            formatElements(*k.reduceBucketSize) + " holds them all, so it starts only as backward ends; about " +
            formatElements(want) + " starts the first while backward still runs" +
            (kneeElements && want == *kneeElements ? ", and no smaller: that is the link's knee" + m.kneeText() : m.kneeText()));
        if (!first) first = change(std::string(knob_key::kReduceBucketSize), std::to_string(want));
      } else {
        parts.push_back("not a smaller reduce_bucket_size: its messages of " + formatElements(*m.elements) +
                        " are already near the link's knee" + m.kneeText() + ", where smaller ones lose bandwidth");
      }
    } else if (k.reduceBucketSize) {
      parts.push_back("a smaller reduce_bucket_size (now " + formatElements(*k.reduceBucketSize) +
                      ") so the first reduction starts earlier");
    } else {
      parts.push_back("a smaller reduce_bucket_size so the first reduction starts earlier");
    }
    return {"start it while backward still runs: " + joinOr(parts), first};
  }
  if (k.family == Family::Fsdp)
    return {"start it while backward still runs: finer wrapping (smaller units) makes the first reduce-scatter start earlier",
            std::nullopt};
  if (k.family == Family::Ddp || op == CollectiveOp::AllReduce) {
    std::string t = "let backward hide it: DDP buckets gradients in reverse order, so a smaller bucket_cap_mb";
    std::optional<KnobChange> first;
    if (k.bucketCapMb) {
      t += " (now " + mib(*k.bucketCapMb) + ")";
      // A quarter of the bucket, no smaller than the knee (in MiB, whole or halves).
      double want = *k.bucketCapMb / 4;
      if (m.kneeBytes) want = std::max(want, static_cast<double>(*m.kneeBytes) / (1024.0 * 1024.0));
      want = std::max(0.5, std::round(want * 2) / 2);
      if (k.family == Family::Ddp && want < *k.bucketCapMb) {
        t += ", e.g. " + formatFixed(want, want < 10 ? 1 : 0) + " MiB" + m.kneeText() + ",";
        first = change(std::string(knob_key::kBucketCapMb), formatFixed(want, 1));
      }
    }
    t += " starts the first all-reduce earlier";
    if (k.gradientAsBucketView != true) {
      t += "; gradient_as_bucket_view=true saves the copy into the bucket";
      if (!first && k.family == Family::Ddp) first = change(std::string(knob_key::kGradientAsBucketView), "true");
    }
    return {t + "; with accumulation, no_sync() on all but the last micro-batch", first};
  }
  return {
      "start it while backward still runs: smaller gradient buckets or units so the first reduce-scatter starts "
      "earlier (ZeRO reduce_bucket_size, overlap_comm=true; FSDP finer wrapping)",
      std::nullopt};
}

// Gloo's host-side transfer of messages below the link's bandwidth: larger messages only while they
// are below the link's knee; past it, larger ones move no faster, so hide the transfer instead.
Advice glooTransferAdvice(const ConfigKnobs& k, const Sizing& m, const std::string& bw) {
  const std::string head = "Gloo moves data through the host (" + bw + " GB/s here): ";
  const bool pastKnee = m.kneeBytes && m.bytes && *m.bytes >= *m.kneeBytes;
  if (k.family == Family::Zero && k.reduceBucketSize && m.elements && *k.reduceBucketSize >= *m.elements)
    return {
        head + "its messages are already as large as reduce_bucket_size allows (" + formatElements(*m.elements) +
            " in a bucket of " + formatElements(*k.reduceBucketSize) + "), so hide it instead: " +
            (k.overlapComm == true ? std::string("a smaller reduce_bucket_size")
                                   : std::string("overlap_comm=true with a smaller reduce_bucket_size")) +
            "; on GPUs use NCCL",
        k.overlapComm == true ? std::nullopt : std::optional<KnobChange>(change(std::string(knob_key::kOverlapComm), "true"))};
  if (pastKnee)
    return {head + "its messages of " + formatBytes(*m.bytes) + " are past the link's knee" + m.kneeText() +
                ": larger ones would move no faster, so hide the transfer behind computation instead; on GPUs use NCCL",
            std::nullopt};
  const std::string larger = m.kneeBytes ? " up to the link's knee" + m.kneeText() : std::string();
  if (k.family == Family::Ddp && k.bucketCapMb) {
    double want = 2 * *k.bucketCapMb;
    if (m.kneeBytes) want = std::max(want, std::ceil(static_cast<double>(*m.kneeBytes) / (1024.0 * 1024.0)));
    return {head + "fewer, larger messages (a larger bucket_cap_mb, now " + mib(*k.bucketCapMb) + ", e.g. " + mib(want) + ")" +
                larger + "; on GPUs use NCCL",
            change(std::string(knob_key::kBucketCapMb), formatFixed(want, 1))};
  }
  if (k.family == Family::Fsdp) return {head + "fewer, larger messages (coarser wrapping)" + larger + "; on GPUs use NCCL", {}};
  if (k.family == Family::Zero)
    return {head + "fewer, larger messages (a larger reduce_bucket_size)" + larger + "; on GPUs use NCCL", std::nullopt};
  return {head + "fewer, larger messages (bucket_cap_mb / reduce_bucket_size / coarser wrapping)" + larger + "; on GPUs use NCCL",
          std::nullopt};
}

}  // namespace

const char* toString(ExposedCause c) {
  switch (c) {
    case ExposedCause::LateRank:
      return "late_rank";
    case ExposedCause::Queued:
      return "queued";
    case ExposedCause::SlowTransfer:
      return "slow_transfer";
    case ExposedCause::NothingToOverlap:
      return "nothing_to_overlap";
  }
  return "nothing_to_overlap";
}

std::optional<std::int64_t> linkKnee(const std::vector<std::pair<std::int64_t, double>>& samples) {
  // Power-of-two bins: bin i holds sizes in [2^i, 2^(i+1)).
  std::map<int, std::vector<std::pair<std::int64_t, double>>> bins;
  for (const auto& [bytes, bw] : samples)
    if (bytes > 0 && bw > 0) bins[static_cast<int>(std::log2(static_cast<double>(bytes)))].emplace_back(bytes, bw);
  struct Bin {
    double bytes, bw;  // medians
  };
  std::vector<Bin> curve;  // ascending size
  for (auto& bin : bins) {
    const auto& v = bin.second;  // a named reference: lambdas cannot capture structured bindings in clang 14
    if (static_cast<int>(v.size()) < kKneeMinSamples) continue;
    auto median = [&](auto proj) {
      std::vector<double> x;
      x.reserve(v.size());
      for (const auto& sample : v) x.push_back(proj(sample));
      std::nth_element(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(x.size() / 2), x.end());
      return x[x.size() / 2];
    };
    curve.push_back(
        {median([](const auto& x) { return static_cast<double>(x.first); }), median([](const auto& x) { return x.second; })});
  }
  if (curve.size() < 2) return std::nullopt;
  double best = 0;
  for (const Bin& b : curve) best = std::max(best, b.bw);
  const double half = best / 2;
  for (std::size_t i = 1; i < curve.size(); ++i) {
    if (curve[i].bw < half || curve[i - 1].bw >= half) continue;
    // Interpolated in log size between the bin under half and the first at or above it.
    const double t = (half - curve[i - 1].bw) / (curve[i].bw - curve[i - 1].bw);
    const double lo = std::log(curve[i - 1].bytes), hi = std::log(curve[i].bytes);
    return static_cast<std::int64_t>(std::llround(std::exp(lo + t * (hi - lo))));
  }
  return std::nullopt;
}

BottleneckAccumulator::BottleneckAccumulator(ScanContext& ctx) : ctx_(ctx) {}
BottleneckAccumulator::~BottleneckAccumulator() = default;

void BottleneckAccumulator::beginRank(const Rank& rank) {
  const auto& ranks = ctx_.summary.ranks;
  rankIndex_ = 0;
  while (rankIndex_ < ranks.size() && ranks[rankIndex_].id != rank.id) ++rankIndex_;
  compute_.clear();
  comms_.clear();
  annotations_.clear();
  launches_.clear();
  hasGpu_ = rankHasGpuWork(ctx_.summary, rank.id);
}

bool BottleneckAccumulator::beginTrack(const TrackSummary& t) {
  // Device lanes (the step breakdown's: a GPU rank's streams, a CPU rank's threads and communication
  // lanes) for the collectives and the computation; CPU threads also for the launches and annotations
  // that name what a GPU collective belongs to.
  kind_ = t.track.kind;
  track_ = t.track.id;
  return kind_ == TrackKind::GpuStream || kind_ == TrackKind::Comm || kind_ == TrackKind::CpuThread;
}

void BottleneckAccumulator::onEvent(const EventChunk& c, std::size_t i, Id chunkId) {
  if (c.flags[i] & EventFlags::Instant) return;
  const std::uint8_t catBits = ctx_.strings.bits(c.cat[i]);
  if (kind_ == TrackKind::CpuThread) {
    if (c.correlation[i] != EventChunk::kNull) launches_.push_back({c.correlation[i], c.start[i]});
    if (catBits & StringClasses::kUserAnnotation) {
      auto it = annotationOk_.find(c.name[i]);
      if (it == annotationOk_.end())
        it = annotationOk_.emplace(c.name[i], isTargetAnnotation(ctx_.store.string(c.name[i]))).first;
      if (it->second) annotations_.push_back({c.start[i], c.end[i], c.name[i]});
    }
    if (hasGpu_) return;  // a GPU rank's CPU threads are not its device lanes
  }
  if (catBits & StringClasses::kGpuUserAnnotation) return;
  const auto op = static_cast<CollectiveOp>(c.collOp[i]);
  if (ctx_.strings.bits(c.name[i]) & StringClasses::kLinkProbe) {
    // Calibration, not the run's traffic: only the link's curve (the idle probe's sizes; the loaded
    // probe runs against compute on purpose) takes it.
    if (op == CollectiveOp::None || kind_ == TrackKind::CpuThread || c.bytes[i] == EventChunk::kNull || c.bytes[i] <= 0 ||
        c.end[i] <= c.start[i])
      return;
    auto it = loadedProbe_.find(c.name[i]);
    if (it == loadedProbe_.end()) it = loadedProbe_.emplace(c.name[i], isLoadedProbeName(ctx_.store.string(c.name[i]))).first;
    if (it->second) return;
    auto& v = sizeBusBw_[c.pg[i]];
    if (v.size() < kKneeSamplesPerGroup) v.emplace_back(c.bytes[i], busBw(c.bytes[i], c.end[i] - c.start[i], op, c.groupSize[i]));
    return;
  }
  const auto category = static_cast<Category>(c.category[i]);
  const bool comm = op != CollectiveOp::None && (category == Category::Communication || kind_ == TrackKind::Comm);
  if (comm) {
    if (kind_ == TrackKind::CpuThread) return;  // a CPU-side call (nccl:... annotation): the device has it
    const bool local = isLocalCollective(runOfOneRank(ctx_.summary.run), c.groupSize[i]);
    comms_.push_back({c.start[i], c.end[i], track_, EventChunk::eventId(chunkId, i), op, c.step[i], c.bytes[i], c.correlation[i],
                      c.name[i], c.pg[i], c.groupSize[i], local});
    if (kind_ == TrackKind::GpuStream) gpuComms_ = true;
  } else if (category == Category::Computation) {
    compute_.push_back({c.start[i], c.end[i]});
  }
}

void BottleneckAccumulator::onEvents(const EventChunk& c, std::size_t begin, std::size_t end, Id chunkId) {
  for (std::size_t i = begin; i < end; ++i) onEvent(c, i, chunkId);
}

std::uint32_t BottleneckAccumulator::internTarget(const std::string& t) {
  auto [it, fresh] = targetIds_.try_emplace(t, static_cast<std::uint32_t>(targets_.size()));
  if (fresh) targets_.push_back(t);
  return it->second;
}

void BottleneckAccumulator::endRank(const Rank&) {
  const auto P = unite(std::move(compute_));
  std::sort(comms_.begin(), comms_.end(),
            [](const Comm& a, const Comm& b) { return a.track != b.track ? a.track < b.track : a.s < b.s; });
  std::sort(launches_.begin(), launches_.end());
  std::sort(annotations_.begin(), annotations_.end(), [](const Annotation& a, const Annotation& b) { return a.s < b.s; });
  // The innermost annotation open at t: the latest-starting one that has not ended (nesting keeps
  // the candidates close before t; look back a bounded number).
  auto annotationAt = [&](TimeNs t) -> std::uint32_t {
    auto it =
        std::upper_bound(annotations_.begin(), annotations_.end(), t, [](TimeNs x, const Annotation& a) { return x < a.s; });
    int look = 0;
    while (it != annotations_.begin() && look++ < 256) {
      --it;
      if (it->e >= t) return it->name;
    }
    return 0;
  };
  for (std::size_t i = 0; i < comms_.size(); ++i) {
    const Comm& e = comms_[i];
    if (e.local) continue;  // a collective of one rank: local work, not a bottleneck
    const TimeNs dur = e.e - e.s;
    // The link's reference: what large messages reached on this group (exposed or not).
    if (e.bytes != EventChunk::kNull && e.bytes >= kLinkReferenceBytes && dur > 0)
      largeBusBw_[e.pg].push_back(busBw(e.bytes, dur, e.op, e.groupSize));
    if (e.bytes != EventChunk::kNull && e.bytes > 0 && dur > 0) {
      auto& v = sizeBusBw_[e.pg];
      if (v.size() < kKneeSamplesPerGroup) v.emplace_back(e.bytes, busBw(e.bytes, dur, e.op, e.groupSize));
    }
    const TimeNs exposed = dur - coveredBy(P, e.s, e.e);
    if (exposed <= 0) continue;
    Candidate c{};
    c.rankIndex = rankIndex_;
    c.eventId = e.eventId;
    c.s = e.s;
    c.e = e.e;
    c.exposed = exposed;
    c.op = e.op;
    c.step = e.step;
    c.bytes = e.bytes == EventChunk::kNull ? 0 : e.bytes;
    c.pg = e.pg;
    c.groupSize = e.groupSize;
    c.launch = kNoLaunch;
    if (i > 0 && comms_[i - 1].track == e.track) {
      c.hasPrevious = true;
      c.previousOp = comms_[i - 1].op;
      c.previousEnd = comms_[i - 1].e;
    }
    if (e.correlation != EventChunk::kNull) {
      auto it = std::lower_bound(launches_.begin(), launches_.end(), std::make_pair(e.correlation, INT64_MIN));
      // The latest CPU event of that correlation starting before the kernel (the launch call).
      for (; it != launches_.end() && it->first == e.correlation; ++it)
        if (it->second <= e.s) c.launch = std::max(c.launch, it->second);
    }
    // What the user can change: the collective's own name when it says it ("all_gather param
    // layers.0.mlp": the runtime names parameter, bucket or unit), else the annotation at its launch.
    auto named = nameTarget_.find(e.name);
    if (named == nameTarget_.end()) {
      const std::string name = ctx_.store.string(e.name);
      const std::string word = opName(e.op) + " ";
      std::uint32_t id = 0;
      if (name.size() > word.size() && name.compare(0, word.size(), word) == 0) id = internTarget(name.substr(word.size()));
      named = nameTarget_.emplace(e.name, id).first;
    }
    if (named->second) {
      c.target = named->second;
      c.targetFrom = 1;
    } else {
      const std::uint32_t ann = annotationAt(c.launch != kNoLaunch ? c.launch : e.s);
      if (ann) {
        c.target = internTarget(ctx_.store.string(ann));
        c.targetFrom = 2;
      }
    }
    candidates_.push_back(c);
  }
  compute_.clear();
  comms_.clear();
  annotations_.clear();
  launches_.clear();
}

std::vector<Bottleneck> BottleneckAccumulator::finish(std::size_t limit, const StragglerAccumulator* stragglers) {
  TraceStore& store = ctx_.store;
  const RunSummary& summary = ctx_.summary;
  const ConfigKnobs knobs = configKnobs(summary.run);
  // THE steady-state rule (step_breakdown.h, CountedSteps): only instances in counted steps, so a
  // runtime run's warm-up step and what runs outside any step (the link probe, initialisation) are
  // neither a bottleneck's instances nor its worst one; Compare and the step figures count the same.
  {
    std::vector<std::int64_t> numbers;
    for (const Candidate& c : candidates_) numbers.push_back(c.step == EventChunk::kNull ? -1 : c.step);
    for (const Step& st : ctx_.recordedSteps()) numbers.push_back(st.step);
    const CountedSteps counted = countedStepNumbers(numbers, summary.run.source);
    std::erase_if(candidates_, [&](const Candidate& c) { return !counted.counts(c.step == EventChunk::kNull ? -1 : c.step); });
  }
  std::map<Id, std::string> pgNames;
  for (const auto& pg : store.processGroups(summary.run.id)) pgNames[pg.id] = pg.name;
  // The link's reference bandwidth per process group: the p90 over its large messages.
  std::map<std::uint32_t, double> linkBw;
  for (auto& [pg, v] : largeBusBw_) {
    if (v.size() < 3) continue;
    std::sort(v.begin(), v.end());
    linkBw[pg] = v[std::min(v.size() - 1, static_cast<std::size_t>(0.9 * static_cast<double>(v.size())))];
  }

  std::map<std::uint32_t, std::int64_t> knee;  // process group -> the link's knee (linkKnee)
  for (const auto& [pg, v] : sizeBusBw_)
    if (auto k = linkKnee(v)) knee[pg] = *k;

  // Each instance's cause.
  struct Judged {
    ExposedCause cause = ExposedCause::NothingToOverlap;
    int lateRank = -1;
    std::size_t lateRankIndex = 0;
    TimeNs wait = 0;
  };
  std::vector<Judged> judged(candidates_.size());
  for (std::size_t i = 0; i < candidates_.size(); ++i) {
    const Candidate& c = candidates_[i];
    Judged& j = judged[i];
    const TimeNs dur = c.e - c.s;
    if (stragglers) {
      // A collective cannot complete before the last rank joins: time between this rank's arrival
      // and the last arrival is waiting. A wait longer than the instance means the match or the
      // clock alignment does not hold for it: no claim then.
      const auto a = stragglers->arrival(c.rankIndex, c.pg, c.op, c.s, c.e);
      const TimeNs wait = a ? a->lastArrivalNs - a->arrivalNs : 0;
      const bool plausible = static_cast<double>(wait) <= (1.0 + kSkewAlignmentSlack) * static_cast<double>(dur);
      if (a && a->lastRankIndex != c.rankIndex && wait > 0 && plausible &&
          static_cast<double>(wait) >= kSkewShareOfExposed * static_cast<double>(c.exposed)) {
        j.cause = ExposedCause::LateRank;
        j.lateRank = a->lastRank;
        j.lateRankIndex = a->lastRankIndex;
        j.wait = wait;
        continue;
      }
    }
    if (c.hasPrevious && c.s - c.previousEnd <= kBackToBackNs && c.s >= c.previousEnd - kBackToBackNs &&
        (c.launch == kNoLaunch || c.launch < c.previousEnd)) {
      j.cause = ExposedCause::Queued;
      continue;
    }
    if (auto it = linkBw.find(c.pg); it != linkBw.end() && c.bytes > 0) {
      const double bw = busBw(c.bytes, dur, c.op, c.groupSize);
      const double atLink = static_cast<double>(dur) * bw / it->second;  // its duration at the link's bandwidth
      if (bw < kSlowTransferShare * it->second && static_cast<double>(dur) - atLink >= 0.5 * static_cast<double>(c.exposed)) {
        j.cause = ExposedCause::SlowTransfer;
        continue;
      }
    }
  }

  // Groups: operation, target, process group (and the size when nothing names the target).
  struct Group {
    std::size_t worst = 0;
    std::int64_t instances = 0;
    TimeNs total = 0, dur = 0;
    std::int64_t bytes = 0;
    TimeNs bytesDur = 0;
    std::set<std::size_t> ranks;
    std::set<std::int64_t> steps;
    std::map<ExposedCause, std::pair<TimeNs, std::int64_t>> causes;
    std::map<int, TimeNs> lateRanks;
    std::optional<std::size_t> longestWait;  // the instance that waited longest for a late rank
  };
  using Key = std::tuple<int, std::uint32_t, std::uint32_t, std::int64_t>;
  std::map<Key, Group> groups;
  for (std::size_t i = 0; i < candidates_.size(); ++i) {
    const Candidate& c = candidates_[i];
    const Key key{static_cast<int>(c.op), c.target, c.pg, c.targetFrom == 0 ? c.bytes : -1};
    auto [it, fresh] = groups.try_emplace(key);
    Group& g = it->second;
    if (fresh) g.worst = i;
    if (!fresh && c.exposed > candidates_[g.worst].exposed) g.worst = i;
    ++g.instances;
    g.total += c.exposed;
    g.dur += c.e - c.s;
    if (c.bytes > 0) {
      g.bytes += c.bytes;
      g.bytesDur += c.e - c.s;
    }
    g.ranks.insert(c.rankIndex);
    if (c.step != EventChunk::kNull) g.steps.insert(c.step);
    auto& cs = g.causes[judged[i].cause];
    cs.first += c.exposed;
    ++cs.second;
    if (judged[i].lateRank >= 0) {
      g.lateRanks[judged[i].lateRank] += judged[i].wait;
      if (!g.longestWait || judged[i].wait > judged[*g.longestWait].wait) g.longestWait = i;
    }
  }
  std::vector<const Group*> ranked;
  ranked.reserve(groups.size());
  for (const auto& [key, g] : groups) ranked.push_back(&g);
  std::sort(ranked.begin(), ranked.end(), [&](const Group* a, const Group* b) {
    return a->total != b->total ? a->total > b->total : candidates_[a->worst].eventId < candidates_[b->worst].eventId;
  });
  if (ranked.size() > limit) ranked.resize(limit);

  const bool nccl = gpuComms_;
  const std::vector<Step> steps = stragglers ? store.steps(summary.run.id) : std::vector<Step>();
  auto stepStart = [&](RankId rankId, std::int64_t step) -> std::optional<TimeNs> {
    for (const Step& st : steps)
      if (st.rankId == rankId && st.step == step) return st.startNs;
    return std::nullopt;
  };
  const int worldSize = summary.run.worldSize > 0 ? summary.run.worldSize : static_cast<int>(summary.ranks.size());
  std::vector<Bottleneck> out;
  for (const Group* gp : ranked) {
    const Group& g = *gp;
    const Candidate& c = candidates_[g.worst];
    const Rank& rank = summary.ranks[c.rankIndex];
    const auto ev = store.event(c.eventId, false);
    if (!ev) continue;
    const Event& e = *ev;
    Bottleneck b;
    b.target = targets_[c.target];
    b.targetFrom = c.targetFrom == 1 ? "name" : c.targetFrom == 2 ? "annotation" : "size";
    if (c.targetFrom == 2) b.unit = b.target;
    b.instances = g.instances;
    b.ranks = static_cast<int>(g.ranks.size());
    b.stepsSeen = std::max<std::int64_t>(1, static_cast<std::int64_t>(g.steps.size()));
    b.totalExposedNs = g.total;
    b.meanExposedNs = g.total / std::max<std::int64_t>(1, g.instances);
    b.totalDurNs = g.dur;
    b.rank = rank.rank;
    b.op = e.collOp;
    b.step = e.step;
    b.startNs = e.startNs;
    b.durNs = e.endNs - e.startNs;
    b.exposedNs = c.exposed;
    b.bytes = e.bytes;
    if (e.bytes && dtypeSize(e.dtype) > 0) b.elements = *e.bytes / dtypeSize(e.dtype);
    if (e.processGroupId) b.processGroup = pgNames[*e.processGroupId];
    b.groupSize = c.groupSize;
    b.kernel = std::string(e.name);
    if (g.bytesDur > 0) b.busBwGBps = busBw(g.bytes, g.bytesDur, c.op, c.groupSize);
    if (auto it = linkBw.find(c.pg); it != linkBw.end()) b.linkBwGBps = it->second;
    if (auto it = knee.find(c.pg); it != knee.end()) b.linkKneeBytes = it->second;
    for (const auto& [cause, v] : g.causes) b.causes.push_back({cause, v.first, v.second});
    std::stable_sort(b.causes.begin(), b.causes.end(), [](const auto& x, const auto& y) { return x.exposedNs > y.exposedNs; });
    b.cause = b.causes.front().cause;
    if (!g.lateRanks.empty()) {
      const auto most = std::max_element(g.lateRanks.begin(), g.lateRanks.end(),
                                         [](const auto& x, const auto& y) { return x.second < y.second; });
      b.lateRank = most->first;
      for (const auto& [r, w] : g.lateRanks) b.waitForLateRankNs += w;
    }

    // Why, cause by cause (those with at least 10 % of the exposed time), the dominant first.
    const std::string what = opName(b.op);
    for (const auto& cs : b.causes) {
      const double share = g.total > 0 ? 100.0 * static_cast<double>(cs.exposedNs) / static_cast<double>(g.total) : 0;
      if (share < 10 && &cs != &b.causes.front()) continue;
      const std::string head = formatPercent(share, 0) + " of its exposed time (" + formatMsFromNs(cs.exposedNs) + ", " +
                               std::to_string(cs.instances) + " of " + std::to_string(g.instances) + " instances): ";
      switch (cs.cause) {
        case ExposedCause::LateRank:
          b.reasons.push_back(head + "waiting for a late rank" +
                              (b.lateRank ? ": rank " + std::to_string(*b.lateRank) + " arrived last, the others waited " +
                                                formatMsFromNs(b.waitForLateRankNs) + " for it"
                                          : std::string()));
          break;
        case ExposedCause::Queued:
          b.reasons.push_back(head +
                              "queued behind another collective on the same communication stream (it started as that one ended)");
          break;
        case ExposedCause::SlowTransfer:
          b.reasons.push_back(head + "slow transfer: " + (b.busBwGBps ? formatFixed(*b.busBwGBps, 2) : std::string("?")) +
                              " GB/s bus bandwidth against the " +
                              (b.linkBwGBps ? formatFixed(*b.linkBwGBps, 2) : std::string("?")) +
                              " GB/s this run's link reached on messages of 1 MiB or more");
          break;
        case ExposedCause::NothingToOverlap:
          b.reasons.push_back(head + "nothing was computing while it ran: it was issued when the computation already needed it");
          break;
      }
    }
    const bool small =
        b.elements && *b.elements < kEfficientCollectiveElements &&
        (b.op == CollectiveOp::AllGather || b.op == CollectiveOp::ReduceScatter || b.op == CollectiveOp::AllReduce);
    if (small)
      b.reasons.push_back("messages of " + std::to_string(*b.elements) + " elements: below the ~33M elements where " + what +
                          " reaches the link's bandwidth");

    // What to try, for the dominant cause, this operation, the backend and the world size; the
    // first suggestion's change of the run's configuration is its "try it".
    const std::string backend = nccl ? "NCCL" : "Gloo";
    const Sizing sizing{b.elements, b.bytes, b.linkKneeBytes};
    auto advise = [&](Advice a, const std::string& prefix = {}) {
      if (b.suggestions.empty() && a.change && knobs.known()) b.tryIt = std::move(a.change);
      b.suggestions.push_back(prefix + a.text);
    };
    switch (b.cause) {
      case ExposedCause::LateRank: {
        // Why is the late rank late? Its lateness relative to the waiting rank = how much later it began
        // the step + how much longer its work from the step start to this collective took.
        std::string why;
        if (g.longestWait && stragglers) {
          const Candidate& w = candidates_[*g.longestWait];
          const Judged& jw = judged[*g.longestWait];
          const Rank& waiting = summary.ranks[w.rankIndex];
          const Rank& lateR = summary.ranks[jw.lateRankIndex];
          const std::string late = "rank " + std::to_string(lateR.rank);
          std::optional<TimeNs> mine, theirs;
          if (w.step != EventChunk::kNull) {
            mine = stepStart(waiting.id, w.step);
            theirs = stepStart(lateR.id, w.step);
          }
          if (mine && theirs) {
            const TimeNs startDelay =
                (*theirs - stragglers->clockOffset(jw.lateRankIndex)) - (*mine - stragglers->clockOffset(w.rankIndex));
            if (static_cast<double>(startDelay) >= 0.5 * static_cast<double>(jw.wait))
              why = late + " started step " + std::to_string(w.step) + " " + formatMsFromNs(startDelay) + " later than rank " +
                    std::to_string(waiting.rank) +
                    ": look at what delays its step start (data loading, host-side work, the previous "
                    "step's tail)";
            else
              why = late + " took " + formatMsFromNs(jw.wait - startDelay) + " longer than rank " + std::to_string(waiting.rank) +
                    " from the step start to this collective: more or slower work before it there (load imbalance, a slower or "
                    "throttled GPU, host-side stalls)";
          } else {
            why = late + " reaches this collective later: compare its work before it with the other ranks'";
          }
        }
        // Worded by the run's straggler verdict (stragglers.h), so the two never contradict each other.
        const StragglerReport* verdict = stragglers ? stragglers->report() : nullptr;
        const std::string lateText =
            why.empty() ? "rank " + (b.lateRank ? std::to_string(*b.lateRank) : std::string("?")) + " arrives late" : why;
        if (verdict && verdict->straggler && b.lateRank && *verdict->straggler == *b.lateRank)
          b.suggestions.push_back("fix the straggler, not this collective: " + lateText +
                                  "; see Arrivals for how often it is last");
        else if (verdict && verdict->straggler)
          b.suggestions.push_back("a late rank, not this collective: " + lateText + "; the run's straggler is rank " +
                                  std::to_string(*verdict->straggler) + " (see Arrivals)");
        else
          b.suggestions.push_back("a late rank, not this collective: " + lateText +
                                  "; no rank is last much more often than chance, so what makes a rank late changes from "
                                  "step to step (input pipeline, host-side work, pauses): see Arrivals and the timeline");
        break;
      }
      case ExposedCause::Queued:
        if (b.op == CollectiveOp::AllGather)
          advise(allGatherAdvice(knobs, sizing, worldSize, true));
        else if (b.op == CollectiveOp::ReduceScatter || b.op == CollectiveOp::AllReduce)
          advise(gradientReductionAdvice(knobs, b.op, sizing),
                 "one " + backend + " stream per process group runs its collectives one after another: ");
        else
          b.suggestions.push_back("one " + backend +
                                  " stream per process group runs its collectives one after another: start this one earlier so "
                                  "it does not wait behind the previous one");
        break;
      case ExposedCause::SlowTransfer:
        if (!nccl)
          advise(glooTransferAdvice(knobs, sizing, b.busBwGBps ? formatFixed(*b.busBwGBps, 2) : std::string("?")));
        else
          // Large when past the link's knee where it is known; else when its messages are at least the
          // size the link's reference is measured on.
          b.suggestions.push_back(
              (b.linkKneeBytes ? b.bytes && *b.bytes >= *b.linkKneeBytes : !small && b.bytes && *b.bytes >= kLinkReferenceBytes)
                  ? "large messages below the link's bandwidth: look for concurrent collectives on the same link "
                    "(other process groups, NCCL_MAX_NCHANNELS), the topology (NVLink vs PCIe/network) and "
                    "NCCL_ALGO / NCCL_PROTO"
                  : "small, latency-bound messages: send fewer, bigger ones (coarser FSDP wrapping, larger ZeRO or DDP "
                    "buckets; for all-to-all, batch the exchanges of several features or tables)");
        break;
      case ExposedCause::NothingToOverlap:
        switch (b.op) {
          case CollectiveOp::AllGather:
            advise(allGatherAdvice(knobs, sizing, worldSize, false));
            break;
          case CollectiveOp::ReduceScatter:
          case CollectiveOp::AllReduce:
            advise(gradientReductionAdvice(knobs, b.op, sizing));
            break;
          case CollectiveOp::AllToAll:
            b.suggestions.push_back(
                "an all-to-all (embedding or expert exchange) with nothing to overlap: pipeline it with the dense "
                "computation of another batch (e.g. TorchRec's TrainPipelineSparseDist), or exchange less "
                "(smaller embedding dimension, fp16/bf16 communication)");
            break;
          case CollectiveOp::Broadcast:
            b.suggestions.push_back(
                "a broadcast every step: DDP broadcast_buffers=False when the buffers do not change across ranks");
            break;
          case CollectiveOp::Send:
          case CollectiveOp::Recv:
          case CollectiveOp::SendRecv:
            b.suggestions.push_back(
                "pipeline-parallel sends and receives waiting on the neighbour stage: more micro-batches per step or an "
                "interleaved schedule shrink the bubble");
            break;
          case CollectiveOp::Barrier:
            b.suggestions.push_back("an explicit barrier in the step: remove it, or move it out of the loop");
            break;
          default:
            b.suggestions.push_back("issue it earlier, while computation still runs, or make it smaller");
            break;
        }
        break;
    }
    out.push_back(std::move(b));
  }
  candidates_.clear();
  return out;
}

std::vector<Bottleneck> findCollectiveBottlenecks(TraceStore& store, RunId runId, std::size_t limit, const CancelToken* cancel) {
  ScanContext ctx(store, runId);
  BottleneckAccumulator bottlenecks(ctx);
  StragglerAccumulator stragglers(ctx);
  scanRun(ctx, cancel, bottlenecks, stragglers);
  stragglers.finish();
  return bottlenecks.finish(limit, &stragglers);
}

}  // namespace shardscope::core
