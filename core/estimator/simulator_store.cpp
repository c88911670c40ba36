#include "core/estimator/simulator_store.h"

#include "core/estimator/interference.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <tuple>
#include <numeric>
#include <set>

#include "core/analysis/step_breakdown.h"
#include "core/config/run_config.h"
#include "core/storage/store_transaction.h"
#include "core/util/error.h"
#include "core/util/json.h"
#include "core/util/units.h"

namespace shardscope::core::estimator {
namespace {

// n quantiles at probabilities (i + 0.5)/n of (value, weight) samples, centred so that their mean is
// 0 (a draw from them keeps the mean duration); empty with fewer than 16 samples.
std::vector<double> weightedQuantiles(std::vector<std::pair<double, double>> v, int n) {
  std::vector<double> q;
  if (v.size() < 16) return q;
  std::sort(v.begin(), v.end());
  double total = 0;
  for (const auto& x : v) total += x.second;
  if (!(total > 0)) return q;
  q.reserve(static_cast<std::size_t>(n));
  double acc = 0;
  std::size_t j = 0;
  for (int i = 0; i < n; ++i) {
    const double target = (i + 0.5) / n * total;
    while (j + 1 < v.size() && acc + v[j].second < target) acc += v[j++].second;
    q.push_back(v[j].first);
  }
  double mean = 0;
  for (double x : q) mean += x;
  mean /= n;
  for (double& x : q) x -= mean;
  return q;
}

// A simulated hpZ run is stored with the configuration of the ZeRO-3 run it refines.
Strategy runtimeStrategy(Strategy s) { return s == Strategy::ZeroPPHpz ? Strategy::Zero3 : s; }

// Block of a compute span's subject: "embed_tokens" 0, "layers.N..." N+1, "norm"/"lm_head" L+1.
int blockOf(std::string_view what, int layers) {
  if (what.rfind("embed_tokens", 0) == 0) return 0;
  if (what.rfind("layers.", 0) == 0) {
    int n = 0;
    std::size_t i = 7;
    if (i >= what.size() || what[i] < '0' || what[i] > '9') return -1;
    while (i < what.size() && what[i] >= '0' && what[i] <= '9') n = n * 10 + (what[i++] - '0');
    return n < layers ? n + 1 : -1;
  }
  if (what.rfind("lm_head", 0) == 0 || what == "norm") return layers + 1;
  return -1;
}

core::CollectiveOp collOp(CollKind k) {
  switch (k) {
    case CollKind::AllReduce:
      return core::CollectiveOp::AllReduce;
    case CollKind::AllGather:
      return core::CollectiveOp::AllGather;
    case CollKind::ReduceScatter:
      return core::CollectiveOp::ReduceScatter;
  }
  return core::CollectiveOp::None;
}

// Per rank, the merged intervals (seconds) of the events of `category` on its tracks of `kind`.
std::map<RankId, std::vector<std::pair<double, double>>> rankIntervals(TraceStore& store, const std::vector<Track>& tracks,
                                                                       TrackKind kind, Category category) {
  std::map<RankId, std::vector<std::pair<double, double>>> out;
  for (const auto& t : tracks) {
    if (t.kind != kind) continue;
    auto& iv = out[t.rankId];
    store.forEachEvent(
        t.id,
        [&](const Event& e) {
          if (e.category == category && e.endNs > e.startNs)
            iv.push_back({static_cast<double>(e.startNs) * 1e-9, static_cast<double>(e.endNs) * 1e-9});
        },
        false);
  }
  for (auto& [r, iv] : out) iv = mergeIntervals(std::move(iv));
  return out;
}

}  // namespace

SimTarget simTargetOf(const RunConfig& cfg) {
  SimTarget t;
  auto shape = modelShapePreset(cfg.model, cfg.layers);
  if (!shape) throw Error("unknown model '" + cfg.model + "'");
  t.strategy = cfg.strategy;
  EstimateInput& in = t.input;
  in.model = *shape;
  in.gpus = cfg.worldSize;
  in.gpusPerNode = cfg.nprocPerNode > 0 ? cfg.nprocPerNode : cfg.worldSize / std::max(1, cfg.nnodes);
  in.shardGroupSize = cfg.strategy == core::Strategy::Hsdp ? core::effectiveShardGroupSize(cfg) : 0;
  in.precision = cfg.precision;
  in.attention = AttentionKind::Eager;
  in.microBatch = cfg.microBatch;
  in.seqLen = cfg.seqLen;
  in.activationCheckpointing = cfg.activationCheckpointing;
  in.gradientAsBucketView = cfg.gradientAsBucketView;
  in.bucketCapMb = cfg.bucketCapMb;
  in.reduceBucketSize = cfg.reduceBucketSize;
  in.allgatherBucketSize = cfg.allgatherBucketSize;
  in.overlapComm = cfg.overlapComm;
  in.prefetchBucketSize = cfg.prefetchBucketSize;
  in.paramPersistenceThreshold = cfg.paramPersistenceThreshold;
  in.maxLiveParameters = cfg.maxLiveParameters;
  in.maxReuseDistance = cfg.maxReuseDistance;
  in.loraRank = cfg.loraRank;
  in.loraAlpha = cfg.loraAlpha;
  in.loraTargets = cfg.loraTargets;
  t.gloo = cfg.device != ComputeDevice::Cuda;
  t.backwardPrefetch = cfg.backwardPrefetch;
  t.forwardPrefetch = cfg.forwardPrefetch;
  t.limitAllGathers = cfg.limitAllGathers;
  t.steps = cfg.steps;
  return t;
}

MeasuredProfile measuredProfile(TraceStore& store, RunId runId, std::optional<double> interferenceK) {
  const auto run = store.run(runId);
  const std::string where = store.path() + ": run " + std::to_string(runId.value());
  if (!run) throw Error(store.path() + ": no run with id " + std::to_string(runId.value()));
  if (run->source != RunSource::Runtime)
    throw Error(where + " is " + std::string(toString(run->source)) +
                ", not a run of our runtime: a compute profile needs its configuration and per-block spans");
  RunConfig cfg;
  try {
    cfg = parseRunConfigJson(parseJson(run->configJson, "run config"), "run config", nullptr);
  } catch (const std::exception& e) {
    throw Error(where + ": unreadable configuration: " + e.what());
  }
  MeasuredProfile mp;
  mp.runId = runId;
  mp.runName = run->name;
  try {
    static_cast<SimTarget&>(mp) = simTargetOf(cfg);
  } catch (const Error& e) {
    throw Error(where + ": " + e.what());
  }
  const EstimateInput& in = mp.input;

  const int L = in.model.layers;
  std::vector<double> fwd(static_cast<std::size_t>(L + 2), 0.0), bwd(fwd.size(), 0.0), recomputed(fwd.size(), 0.0);
  double opt = 0, busy = 0;
  std::int64_t samples = 0;
  // Steady steps per rank: the steps core's rule counts for a runtime run (core/analysis/
  // step_breakdown.h: all but the rank's first). A profile is never taken from a warm-up step: a
  // rank whose only step is its warm-up contributes none.
  std::map<RankId, std::int64_t> firstStep;  // the rank's first step number: the ranks' steps align on it
  std::map<RankId, CountedSteps> counted;
  std::map<RankId, std::vector<std::pair<std::int64_t, double>>> stepTimes;
  for (const auto& s : store.steps(runId)) {
    auto it = firstStep.find(s.rankId);
    if (it == firstStep.end() || s.step < it->second) firstStep[s.rankId] = s.step;
    stepTimes[s.rankId].push_back({s.step, static_cast<double>(s.endNs - s.startNs) * 1e-9});
  }
  for (const auto& [rank, v] : stepTimes) {
    std::vector<std::int64_t> numbers;
    numbers.reserve(v.size());
    for (const auto& [n, d] : v) numbers.push_back(n);
    counted[rank] = countedStepNumbers(numbers, run->source);
  }
  auto steady = [&](RankId rankId, std::int64_t step) {
    const auto c = counted.find(rankId);
    return c != counted.end() && c->second.warmupLeftOut && c->second.counts(step);
  };
  std::set<std::int64_t> leftOutRel;  // disturbed steps, relative to each rank's first
  // The summed step time and the number of rank-steps that `keep` keeps.
  const auto sumSteps = [&](const auto& keep) {
    std::pair<double, std::int64_t> s{0.0, 0};
    for (const auto& [rank, v] : stepTimes)
      for (const auto& [n, d] : v)
        if (keep(rank, n)) {
          s.first += d;
          ++s.second;
        }
    return s;
  };
  const auto [stepSum, stepCount] = sumSteps(steady);
  if (stepCount == 0) throw Error(where + " has no step after the first (warm-up) one: run at least two steps");
  mp.stepS = stepSum / static_cast<double>(stepCount);
  mp.steadySteps = static_cast<int>(stepCount);
  {
    // Step-to-step spread: the relative SD over steady steps of the ranks' mean step time.
    std::map<std::int64_t, std::pair<double, int>> byStep;  // step relative to the rank's first -> (sum, ranks)
    for (const auto& [rank, v] : stepTimes)
      for (const auto& [n, d] : v)
        if (steady(rank, n)) {
          auto& e = byStep[n - firstStep[rank]];
          e.first += d;
          ++e.second;
        }
    if (byStep.size() >= 2) {
      double m = 0, m2 = 0;
      for (const auto& [k, e] : byStep) {
        const double x = e.first / e.second;
        m += x;
        m2 += x * x;
      }
      const double n = static_cast<double>(byStep.size());
      m /= n;
      mp.stepCv = m > 0 ? std::sqrt(std::max(0.0, (m2 / n - m * m) * n / (n - 1))) / m : 0.0;
    }
    // Disturbed steps (kDisturbedStep): left out of the profile, kept in the step time and its spread.
    std::vector<std::pair<std::int64_t, double>> means;
    means.reserve(byStep.size());
    for (const auto& [k, e] : byStep) means.push_back({k, e.first / e.second});
    const DisturbedSteps disturbed = disturbedSteps(means);
    leftOutRel.insert(disturbed.steps.begin(), disturbed.steps.end());
    if (!leftOutRel.empty()) {
      std::string which, took;
      for (const auto& [k, x] : means)
        if (leftOutRel.count(k)) {
          which += (which.empty() ? "" : ", ") + std::to_string(k + firstStep.begin()->second);
          took += (took.empty() ? "" : ", ") + formatDurationNs(x * 1e9);
        }
      for (const auto& [rank, first] : firstStep)
        for (const std::int64_t k : leftOutRel) mp.leftOutSteps.insert(k + first);
      mp.leftOutNote = "step" + std::string(leftOutRel.size() > 1 ? "s " : " ") + which + " of " + std::to_string(byStep.size()) +
                       " steady ones left out of the profile: " + took + " against a median of " +
                       formatDurationNs(disturbed.median * 1e9) + " (something else ran on the host?)";
    }
  }
  // The steps the profile is taken from: the steady ones less the disturbed ones.
  auto profiled = [&](RankId rankId, std::int64_t step) {
    const auto f = firstStep.find(rankId);
    return steady(rankId, step) && f != firstStep.end() && !leftOutRel.count(step - f->second);
  };
  const auto [profiledStepSum, profiledCount] = sumSteps(profiled);
  // What checkpointing costs here: the run's checkpointing probe (profiler/runtime/checkpoint_probe.h),
  // the mean over the ranks that measured it (each rank's is the median of its rounds).
  {
    double fs = 0, rs = 0;
    int n = 0;
    for (const auto& r : store.ranks(runId)) {
      const auto f = store.metric(runId, r.id, "ckpt_probe_forward_share");
      const auto c = store.metric(runId, r.id, "ckpt_probe_recompute_share");
      if (!f || !c || !(*f > 0) || !(*c > 0)) continue;
      fs += *f;
      rs += *c;
      ++n;
    }
    if (n > 0) {
      mp.compute.checkpointedForwardShare = fs / n;
      mp.compute.recomputeShare = rs / n;
      mp.compute.checkpointProbed = true;
    }
  }
  // The host it ran on (rank 0's metadata, written by our runtime since the link probe came) and
  // its compute probe.
  for (const auto& r : store.ranks(runId)) {
    if (r.rank != 0) continue;
    for (std::int64_t d = 64; d <= 65536; d *= 2)
      if (const auto g = store.metric(runId, r.id, "gemm_probe_gflops/" + std::to_string(d)); g && *g > 0)
        mp.gemmGflops.push_back({static_cast<double>(d), *g});
    for (std::int64_t d = 64; d <= 65536; d *= 2)
      if (const auto g = store.metric(runId, r.id, "gemm_probe_weight_gflops/" + std::to_string(d)); g && *g > 0)
        mp.gemmWeightGflops.push_back({static_cast<double>(d), *g});
    // A point dipping below both neighbours was timed during a disturbance (kGemmProbeDipShare).
    for (auto* curve : {&mp.gemmGflops, &mp.gemmWeightGflops})
      for (const auto& [width, rate] : smoothGemmDips(*curve))
        mp.gemmProbeNote += std::string(mp.gemmProbeNote.empty() ? "" : "; ") + (curve == &mp.gemmWeightGflops ? "weight " : "") +
                            "d " + formatFixed(width, 0) + " read " + formatFixed(rate, 1) +
                            " GFLOP/s, below both neighbours: interpolated";
    try {
      const JsonValue meta = parseJson(r.metadataJson, "rank metadata");
      const auto num = [&](const char* k, int def) {
        const JsonValue* v = meta.find(k);
        return v && v->asInt() ? static_cast<int>(*v->asInt()) : def;
      };
      if (meta.isObject() && meta.find("host_cpus")) {
        mp.host.known = true;
        mp.host.cpus = num("host_cpus", 0);
        mp.host.threadsPerRank = num("intra_op_threads", 1);
        mp.host.ranksOnHost = num("ranks_on_host", mp.input.gpusPerNode);
        mp.host.gpus = num("host_gpus", 0);
      }
    } catch (const std::exception&) {
      // Metadata of another writer: the host stays unknown.
    }
  }

  // Compute time per (step, span name) per rank, for the rank-to-rank variation.
  std::map<std::pair<std::int64_t, std::string>, std::map<RankId, double>> perSpan;
  // Each rank's collectives in flight (its communication lanes' spans), merged: the overlap of a
  // compute span with them is what interference.h relates its duration to.
  const auto tracks = store.tracks(runId);
  const auto inFlight = rankIntervals(store, tracks, TrackKind::Comm, Category::Communication);
  // Each rank's compute kernels on its GPU streams, merged: how much of a block's host time the
  // device was busy (MeasuredProfile::deviceBusyShare).
  const auto kernels = rankIntervals(store, tracks, TrackKind::GpuStream, Category::Computation);
  double passHostS = 0, passDeviceS = 0;
  struct PassSpan {
    bool forward = false;
    int block = 0;
    InterferenceSample s;
  };
  // One sample per rank, step, pass and block: a block's pass split into pieces by waits (ZeRO-3
  // waits for each parameter's all-gather inside the block) is summed first, its overlap the
  // duration-weighted one. The pieces are different operations of different lengths: taken one by
  // one they break the fit's premise that a group's spans would take the same time alone, and a
  // ZeRO-3 run's k came out at 0.09 where its whole blocks say 0.5.
  std::map<std::tuple<RankId, std::int64_t, bool, int>, PassSpan> passSpanOf;
  // A checkpointed block's recomputation inside its backward ("recompute <block>", our runtime since
  // session 15), per rank, step and block: kept apart from both passes and taken apart like them.
  std::map<std::tuple<RankId, std::int64_t, int>, PassSpan> recomputeSpanOf;
  for (const auto& t : tracks) {
    if (t.kind != TrackKind::CpuThread || t.name.rfind("compute", 0) != 0) continue;
    const auto fs = firstStep.find(t.rankId);
    if (fs == firstStep.end()) continue;
    store.forEachEvent(
        t.id,
        [&](const Event& e) {
          if (!e.step || !profiled(t.rankId, *e.step)) return;
          const double d = static_cast<double>(e.endNs - e.startNs) * 1e-9;
          if (e.cat == "wait") busy += d;
          if (e.category != Category::Computation) return;
          busy += d;
          perSpan[std::make_pair(static_cast<std::int64_t>(*e.step - fs->second), std::string(e.name))][t.rankId] += d;
          if (e.name == "optimizer step") {
            opt += d;
            return;
          }
          const bool f = e.name.rfind("forward ", 0) == 0, b = e.name.rfind("backward ", 0) == 0;
          const bool rc = e.name.rfind("recompute ", 0) == 0;
          if (!f && !b && !rc) return;
          const int blk = blockOf(e.name.substr(f ? 8 : b ? 9 : 10), L);
          if (blk < 0) return;
          const auto fl = inFlight.find(t.rankId);
          const auto overlapped = [&] {
            return fl == inFlight.end() ? 0.0
                                        : d * overlapFraction(static_cast<double>(e.startNs) * 1e-9,
                                                              static_cast<double>(e.endNs) * 1e-9, fl->second);
          };
          if (rc) {
            PassSpan& ps = recomputeSpanOf[{t.rankId, *e.step, blk}];
            ps.block = blk;
            ps.s.overlap += overlapped();
            ps.s.durS += d;
            return;
          }
          if (const auto k = kernels.find(t.rankId); k != kernels.end()) {
            passHostS += d;
            passDeviceS +=
                d * overlapFraction(static_cast<double>(e.startNs) * 1e-9, static_cast<double>(e.endNs) * 1e-9, k->second);
          }
          PassSpan& ps = passSpanOf[{t.rankId, *e.step, f, blk}];
          ps.forward = f;
          ps.block = blk;
          // Transformer blocks are alike: one group per pass for them, one per pass for the
          // embedding and for the head.
          ps.s.group = (f ? 0 : 3) + (blk == 0 ? 0 : blk <= L ? 1 : 2);
          // overlap holds the overlapped seconds until the pieces are all in.
          ps.s.overlap += overlapped();
          ps.s.durS += d;
        },
        false);
  }
  if (passHostS > 0) mp.deviceBusyShare = std::clamp(passDeviceS / passHostS, 0.0, 1.0);
  {
    // The compute alone: each span less the interference of the collectives it overlapped.
    std::vector<PassSpan> passSpans;
    passSpans.reserve(passSpanOf.size());
    for (auto& [key, ps] : passSpanOf) {
      if (ps.s.durS > 0) ps.s.overlap /= ps.s.durS;
      passSpans.push_back(ps);
    }
    std::vector<InterferenceSample> is;
    is.reserve(passSpans.size());
    for (const auto& p : passSpans) is.push_back(p.s);
    // The defaults are the device class's: a CUDA run sharing its GPU through Gloo is still a GPU run.
    mp.interference = fitInterference(is, ranOnCuda(store.ranks(runId)) ? kGpuInterference : kCpuGlooInterference);
    if (interferenceK) {
      mp.interference.k = *interferenceK;
      mp.interference.identified = false;
      mp.interference.note = "interference k " + formatFixed(*interferenceK, 2) + " (--interference)";
    }
    for (const auto& p : passSpans)
      (p.forward ? fwd : bwd)[static_cast<std::size_t>(p.block)] += baseDuration(p.s, mp.interference.k);
    for (auto& [key, p] : recomputeSpanOf) {
      if (p.s.durS > 0) p.s.overlap /= p.s.durS;
      recomputed[static_cast<std::size_t>(p.block)] += baseDuration(p.s, mp.interference.k);
    }
  }
  samples = profiledCount;
  for (auto& v : fwd) v /= static_cast<double>(samples);
  for (auto& v : bwd) v /= static_cast<double>(samples);
  opt /= static_cast<double>(samples);
  // A checkpointed run's forward spans ran without autograd's graph (checkpointedForwardShare of a
  // forward with it), and its backward spans include the recomputation (recomputeShare of that
  // forward): the profile holds the forward with the graph and the backward alone.
  // Where the run's spans measured the recomputation apart ("recompute <block>"), its backward
  // spans are the backward alone and the recomputation's share is measured, not the probe's: on
  // val19-val24 the probe said 1.00-1.05 of a plain forward where FSDP's steps took 0.97-1.01, and a
  // plain FSDP predicted from a checkpointed run came out 1.3-3.9 % short.
  if (in.activationCheckpointing) {
    double recomputeS = 0, plainForwardS = 0;
    for (int l = 1; l <= L; ++l) {
      recomputeS += recomputed[static_cast<std::size_t>(l)] / static_cast<double>(samples);
      plainForwardS += fwd[static_cast<std::size_t>(l)] / mp.compute.checkpointedForwardShare;
    }
    const bool measuredApart = recomputeS > 0 && plainForwardS > 0;
    if (measuredApart) {
      mp.compute.recomputeShare = recomputeS / plainForwardS;
      mp.compute.recomputeMeasured = true;
    }
    for (int l = 1; l <= L; ++l) {
      auto& f = fwd[static_cast<std::size_t>(l)];
      f /= mp.compute.checkpointedForwardShare;
      if (!measuredApart)
        bwd[static_cast<std::size_t>(l)] = std::max(0.0, bwd[static_cast<std::size_t>(l)] - f * mp.compute.recomputeShare);
    }
  }
  double total = 0;
  for (std::size_t i = 0; i < fwd.size(); ++i) total += fwd[i] + bwd[i];
  if (!(total > 0)) throw Error(where + " has no forward/backward compute spans on its compute lanes");
  // Elements the rank's optimizer updates: the whole model for DDP, its shard otherwise.
  const MemoryEstimate me = estimateMemory(in, mp.strategy);
  const std::int64_t P = parameterCount(in.model);
  const std::int64_t trainable = in.loraRank > 0 ? trainableParameterCount(in) : P;
  const std::int64_t elems = mp.strategy == Strategy::Ddp ? trainable : std::max<std::int64_t>(1, me.state.optimizer / 8);
  mp.compute.forwardS = std::move(fwd);
  mp.compute.backwardS = std::move(bwd);
  // On CPU part of the step follows the whole model, not the shard (a sharded optimizer updating
  // half the elements took 0.58 of DDP's whole-model step, not 0.5: interference.h,
  // kCpuOptimizerModelShare).
  const double modelPart = mp.gloo ? kCpuOptimizerModelShare * opt : 0.0;
  mp.compute.optimizerSPerModelElement = modelPart / static_cast<double>(std::max<std::int64_t>(1, trainable));
  mp.compute.optimizerSPerElement = (opt - modelPart) / static_cast<double>(elems);
  mp.compute.stepOverheadS = std::max(0.0, profiledStepSum / static_cast<double>(samples) - busy / static_cast<double>(samples));
  {
    const std::size_t nRanks = stepTimes.size();
    // Each rank's relative deviation from the span's mean over ranks, scaled to unit variance for
    // normal deviations (sqrt(n/(n-1))): 1.4826 x their median absolute value (weighted by the
    // span's duration) estimates the standard deviation without the stalls' tail.
    std::vector<std::pair<double, double>> all, byPhase[kComputePhases];   // (|relative deviation|, mean duration)
    std::vector<std::pair<double, double>> signedByPhase[kComputePhases];  // (relative deviation, mean duration)
    for (const auto& [key, byRank] : perSpan) {
      if (nRanks < 2 || byRank.size() != nRanks) continue;  // on every rank, or not comparable
      double m = 0;
      for (const auto& [r, d] : byRank) m += d;
      m /= static_cast<double>(nRanks);
      if (!(m > 0)) continue;
      const ComputePhase ph = computePhaseOf(key.second);
      const double scale = std::sqrt(static_cast<double>(nRanks) / static_cast<double>(nRanks - 1));
      for (const auto& [r, d] : byRank) {
        all.push_back({std::fabs(d - m) / m * scale, m});
        byPhase[static_cast<int>(ph)].push_back(all.back());
        signedByPhase[static_cast<int>(ph)].push_back({(d - m) / m * scale, m});
      }
    }
    auto robustSd = [](std::vector<std::pair<double, double>>& v) {
      if (v.empty()) return -1.0;
      std::sort(v.begin(), v.end());
      double weight = 0, acc = 0;
      for (const auto& x : v) weight += x.second;
      for (const auto& [dev, m] : v) {
        acc += m;
        if (acc >= weight / 2) return 1.4826 * dev;
      }
      return 1.4826 * v.back().first;
    };
    mp.computeJitter = std::max(0.0, robustSd(all));
    for (int p = 0; p < kComputePhases; ++p) mp.phaseJitter[p] = robustSd(byPhase[p]);
    for (int p = 0; p < kComputePhases; ++p)
      mp.jitterQuantiles[static_cast<std::size_t>(p)] = weightedQuantiles(signedByPhase[p], kJitterQuantiles);
  }
  {
    // The same steady steps (the breakdown names ranks by number, not by id).
    std::map<int, RankId> rankIdOf;
    for (const auto& r : store.ranks(runId)) rankIdOf[r.rank] = r.id;
    double c = 0, x = 0;
    int n = 0;
    for (const auto& b : computeStepBreakdown(store, runId)) {
      const auto id = rankIdOf.find(b.rank);
      if (b.step < 0 || id == rankIdOf.end() || !steady(id->second, b.step)) continue;
      c += static_cast<double>(b.commNs) * 1e-9;
      x += static_cast<double>(b.exposedCommNs) * 1e-9;
      ++n;
    }
    if (n > 0) {
      mp.commS = c / n;
      mp.exposedCommS = x / n;
    }
  }
  mp.compute.source = "run " + std::to_string(runId.value()) + " (" + in.model.name + ", " + strategyName(mp.strategy) + ", " +
                      std::to_string(in.gpus) + " ranks, " + std::to_string(stepCount) + " steady rank-steps)";
  return mp;
}

DisturbedSteps disturbedSteps(const std::vector<std::pair<std::int64_t, double>>& stepTimes) {
  DisturbedSteps out;
  if (static_cast<int>(stepTimes.size()) < kDisturbedStepMinSteps) return out;
  const auto medianOf = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  };
  std::vector<double> xs, dev;
  for (const auto& [k, x] : stepTimes) xs.push_back(x);
  const double median = medianOf(xs);
  out.median = median;
  // The spread from the steps at or below the median: disturbances only slow steps down, and
  // three disturbed steps of seven would otherwise widen the limit past themselves.
  for (double x : xs)
    if (x <= median) dev.push_back(median - x);
  const double sd = 1.4826 * medianOf(dev);
  const double limit = std::max(median * (1.0 + kDisturbedStepShare), median + kDisturbedStepSds * sd);
  for (const auto& [k, x] : stepTimes)
    if (x > limit) out.steps.push_back(k);
  return out;
}

double gemmRate(const std::vector<std::pair<double, double>>& curve, double d) {
  if (curve.empty() || !(d > 0)) return 0;
  return logLogBetween(curve, d);
}

std::vector<std::pair<double, double>> smoothGemmDips(std::vector<std::pair<double, double>>& curve) {
  std::vector<std::pair<double, double>> replaced;
  for (std::size_t i = 1; i + 1 < curve.size(); ++i) {
    const auto [d0, r0] = curve[i - 1];
    const auto [d, r] = curve[i];
    const auto [d1, r1] = curve[i + 1];
    if (!(r0 > 0 && r1 > 0 && d0 > 0 && d1 > d0) || !(r < (1.0 - kGemmProbeDipShare) * std::min(r0, r1))) continue;
    replaced.push_back(curve[i]);
    curve[i].second = logLogBetween({{d0, r0}, {d1, r1}}, d);
  }
  return replaced;
}

double layerGemmWidth(const ModelShape& m) { return std::sqrt(static_cast<double>(m.hidden) * static_cast<double>(m.ffn)); }
double headGemmWidth(const ModelShape& m) { return std::sqrt(static_cast<double>(m.hidden) * static_cast<double>(m.vocab)); }

void applyMeasuredProfile(SimulateInput& si, const MeasuredProfile& mp, bool keepJitter) {
  si.compute = scaleComputeProfile(mp.compute, mp.input, si.model);
  si.interference = mp.interference.k;
  const ModelShape& a = mp.input.model;
  const ModelShape& b = si.model.model;
  if (mp.gemmGflops.size() >= 2 && (a.hidden != b.hidden || a.ffn != b.ffn || a.vocab != b.vocab || a.layers != b.layers ||
                                    mp.input.microBatch != si.model.microBatch || mp.input.seqLen != si.model.seqLen)) {
    // Per-op cost instead of FLOPs alone: a block's time is its matrix products at the probe's
    // rate for their width, plus the rest (norms, activations, softmax, copies, the dispatch of
    // every op), which grows with the activations (tokens x hidden; tokens x vocab for the head)
    // rather than with FLOPs. The calibration's rest is its time less its products; the target's is
    // that rest scaled by the activations. On a small model the rest is half of the compute, so
    // FLOPs alone over-estimate a larger one (docs/ESTIMATOR.md, "Model size").
    const auto fm = blockTrainFlops(mp.input), ft = blockTrainFlops(si.model);
    const double Tm = static_cast<double>(mp.input.microBatch * mp.input.seqLen);
    const double Tt = static_cast<double>(si.model.microBatch * si.model.seqLen);
    const int Lm = a.layers, Lt = b.layers;
    // A phase's products at their rates: forward at the forward shape's; backward half input
    // gradients (the forward shape) and half weight gradients (their own shape, where probed).
    const auto& wcurve = mp.gemmWeightGflops.size() >= 2 ? mp.gemmWeightGflops : mp.gemmGflops;
    const auto gemmS = [&](double flops, bool backward, double width) {
      const double rf = gemmRate(mp.gemmGflops, width) * 1e9;
      if (!backward) return flops / rf;
      return flops / 2 / rf + flops / 2 / (gemmRate(wcurve, width) * 1e9);
    };
    // On a GPU whose device was idle for part of the blocks' host time (deviceBusyShare u < 1), that
    // part is the host launching ops and keeping their books: it follows the number of ops, which a
    // block of another width or token count has as many of, so it is carried unchanged; the busy
    // part is carried as above. A CPU run is all device (u = 1).
    const double u = mp.deviceBusyShare >= 0 ? mp.deviceBusyShare : 1.0;
    const auto carry = [&](double tMeasured, double flopsM, double flopsT, bool backward, double wm, double wt, double actRatio) {
      const double rest = std::max(0.0, tMeasured - gemmS(flopsM, backward, wm));
      return u * (gemmS(flopsT, backward, wt) + rest * actRatio) + (1 - u) * tMeasured;
    };
    const double rLm = gemmRate(mp.gemmGflops, layerGemmWidth(a)), rLt = gemmRate(mp.gemmGflops, layerGemmWidth(b));
    double fwd = 0, bwd = 0;
    for (int l = 1; l <= Lm; ++l) {
      fwd += mp.compute.forwardS[static_cast<std::size_t>(l)];
      bwd += mp.compute.backwardS[static_cast<std::size_t>(l)];
    }
    fwd /= Lm;
    bwd /= Lm;
    // The rest grows with the activations as kRestGrowthForward / kRestGrowthBackward say.
    const auto grow = [&](double from, double to, double e) { return std::pow(to / from, e); };
    const double ef = kRestGrowthForward, eb = kRestGrowthBackward;
    const double actLayer = grow(Tm * static_cast<double>(a.hidden), Tt * static_cast<double>(b.hidden), ef);
    const double actLayerB = grow(Tm * static_cast<double>(a.hidden), Tt * static_cast<double>(b.hidden), eb);
    const double actHead = grow(Tm * static_cast<double>(a.vocab), Tt * static_cast<double>(b.vocab), ef);
    const double actHeadB = grow(Tm * static_cast<double>(a.vocab), Tt * static_cast<double>(b.vocab), eb);
    const double flm = fm[1], flt = ft[static_cast<std::size_t>(std::min(1, Lt))];
    for (int l = 1; l <= Lt; ++l) {
      si.compute.forwardS[static_cast<std::size_t>(l)] =
          carry(fwd, flm / 3, flt / 3, false, layerGemmWidth(a), layerGemmWidth(b), actLayer);
      si.compute.backwardS[static_cast<std::size_t>(l)] =
          carry(bwd, 2 * flm / 3, 2 * flt / 3, true, layerGemmWidth(a), layerGemmWidth(b), actLayerB);
    }
    const auto hm = static_cast<std::size_t>(Lm + 1), ht = static_cast<std::size_t>(Lt + 1);
    si.compute.forwardS[ht] =
        carry(mp.compute.forwardS[hm], fm[hm] / 3, ft[ht] / 3, false, headGemmWidth(a), headGemmWidth(b), actHead);
    si.compute.backwardS[ht] =
        carry(mp.compute.backwardS[hm], 2 * fm[hm] / 3, 2 * ft[ht] / 3, true, headGemmWidth(a), headGemmWidth(b), actHeadB);
    // Host work outside the blocks (gradient copies into buckets, hooks, the optimizer's
    // bookkeeping) grows with the parameters: 1.7 ms on small, 14 ms on medium (8x for 7.4x the
    // parameters) in the validation's DDP runs. Where the device idles (u < 1) that part follows
    // the parameter tensors, one launch or more each (1.1 -> 2.3 ms for 39 -> 75 tensors on an H200).
    const double byElements =
        static_cast<double>(parameterCount(b)) / static_cast<double>(std::max<std::int64_t>(1, parameterCount(a)));
    const double byTensors = static_cast<double>(parameterTensorCount(b)) / static_cast<double>(parameterTensorCount(a));
    si.compute.stepOverheadS = mp.compute.stepOverheadS * (u * byElements + (1 - u) * byTensors);
    si.compute.source = mp.compute.source + ", carried by the measured GEMM rates (" + formatFixed(rLm, 0) + " -> " +
                        formatFixed(rLt, 0) + " GFLOP/s per block) and the activations (x" + formatFixed(actLayer, 2) + ")";
    if (!mp.gemmProbeNote.empty()) si.compute.source += " (compute probe: " + mp.gemmProbeNote + ")";
    if (u < 1)
      si.compute.source +=
          "; the GPU was busy " + formatFixed(u * 100, 0) + "% of the blocks' host time, the rest carried by op count";
  }
  if (keepJitter) return;
  si.jitter = std::min(0.9, mp.computeJitter);
  for (int p = 0; p < kComputePhases; ++p) {
    si.phaseJitter[p] = std::min(0.9, mp.phaseJitter[p]);
    si.jitterQuantiles[static_cast<std::size_t>(p)] = mp.jitterQuantiles[static_cast<std::size_t>(p)];
  }
}

RunId writeSimulatedRun(TraceStore& store, const SimulationResult& sim, const std::string& name, const CancelToken* cancel,
                        const ProgressFn& progress) {
  const SimulateInput& in = sim.input;
  const EstimateInput& em = in.model;
  const bool gloo = in.comm.emulatedReduceScatter;
  const std::string backend = gloo ? "gloo" : "nccl";

  // Configuration: the runtime's keys where they apply, and what only the simulation knows.
  RunConfig cfg;
  cfg.strategy = runtimeStrategy(in.strategy);
  cfg.model = em.model.name;
  cfg.worldSize = em.gpus;
  cfg.nnodes = std::max(1, nodeCount(em));
  cfg.nprocPerNode = em.gpus > em.gpusPerNode ? em.gpusPerNode : 0;
  if (cfg.nprocPerNode > 0 && cfg.nprocPerNode * cfg.nnodes != cfg.worldSize) cfg.nprocPerNode = 0;
  cfg.steps = in.steps;
  cfg.microBatch = static_cast<int>(em.microBatch);
  cfg.seqLen = static_cast<int>(em.seqLen);
  cfg.precision = em.precision;
  cfg.device = gloo ? ComputeDevice::Cpu : ComputeDevice::Cuda;
  cfg.backend = gloo ? CommBackend::Gloo : CommBackend::Nccl;
  cfg.bucketCapMb = em.bucketCapMb;
  cfg.gradientAsBucketView = em.gradientAsBucketView;
  cfg.reduceBucketSize = em.reduceBucketSize;
  cfg.allgatherBucketSize = em.allgatherBucketSize;
  cfg.overlapComm = em.overlapComm;
  cfg.prefetchBucketSize = em.prefetchBucketSize;
  cfg.paramPersistenceThreshold = em.paramPersistenceThreshold;
  cfg.maxLiveParameters = em.maxLiveParameters;
  cfg.maxReuseDistance = em.maxReuseDistance;
  cfg.backwardPrefetch = in.backwardPrefetch;
  cfg.forwardPrefetch = in.forwardPrefetch;
  cfg.limitAllGathers = in.limitAllGathers;
  if (in.strategy == Strategy::Hsdp) cfg.shardGroupSize = fsdpShardCount(em, in.strategy);
  cfg.activationCheckpointing = em.activationCheckpointing;
  cfg.loraRank = em.loraRank;
  cfg.loraAlpha = em.loraAlpha;
  cfg.loraTargets = em.loraTargets;
  JsonValue cj = toJson(cfg);
  JsonValue simj = JsonValue::object();
  simj.set("strategy", JsonValue::string(strategyName(in.strategy)));
  simj.set("model_shape",
           JsonValue::string(em.model.name + ": L=" + std::to_string(em.model.layers) + " h=" + std::to_string(em.model.hidden) +
                             " ffn=" + std::to_string(em.model.ffn) + " V=" + std::to_string(em.model.vocab)));
  simj.set("compute", JsonValue::string(in.compute.source));
  if (em.loraRank > 0) simj.set("fine_tuning", JsonValue::string(fineTuningName(fineTuning(em))));
  simj.set("link", JsonValue::string(in.intraNode.name));
  simj.set("link_bus_bw_gbps", JsonValue::number(in.intraNode.busBwGBps));
  simj.set("link_alpha_us", JsonValue::number(in.intraNode.alphaUs));
  simj.set("inter_node_link", JsonValue::string(in.interNode.name));
  simj.set("jitter", JsonValue::number(in.jitter));
  for (int p = 0; p < kComputePhases; ++p)
    if (in.phaseJitter[p] >= 0)
      simj.set(std::string("jitter_") + computePhaseName(static_cast<ComputePhase>(p)), JsonValue::number(in.phaseJitter[p]));
  simj.set("seed", JsonValue::number(static_cast<std::int64_t>(in.seed)));
  cj.set("simulation", std::move(simj));

  JsonValue meta = JsonValue::object();
  meta.set("simulated_world_size", JsonValue::number(static_cast<std::int64_t>(em.gpus)));
  meta.set("stored_ranks", JsonValue::number(static_cast<std::int64_t>(sim.ranks.size())));
  meta.set("step_s", JsonValue::number(sim.steady.stepS));
  meta.set("compute_s", JsonValue::number(sim.steady.computeS));
  meta.set("comm_s", JsonValue::number(sim.steady.commS));
  meta.set("exposed_comm_s", JsonValue::number(sim.steady.exposedCommS));
  meta.set("overlap", JsonValue::number(sim.steady.overlap()));
  meta.set("peak_bytes", JsonValue::number(sim.peakBytes));
  JsonValue notes = JsonValue::array();
  for (const auto& n : sim.notes) notes.push(JsonValue::string(n));
  meta.set("notes", std::move(notes));
  if (sim.prediction) meta.set("prediction", toJson(*sim.prediction));

  Run run;
  run.name = name;
  run.source = RunSource::Simulated;
  run.strategy = strategyName(in.strategy);
  run.configJson = cj.dump();
  run.worldSize = em.gpus;
  run.status = RunStatus::Completed;
  run.metadataJson = meta.dump();
  run.tags = "simulated";

  const TimeNs base =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  auto ns = [&](double s) { return base + static_cast<TimeNs>(std::llround(s * 1e9)); };

  RunId runId;
  writeInTransaction(store, [&] {
    runId = store.createRun(run);
    std::vector<Id> groupIds;
    for (const auto& g : sim.groups) {
      ProcessGroup pg;
      pg.runId = runId;
      pg.name = g.name;
      pg.backend = backend;
      pg.size = g.size;
      std::string rj = "[";
      for (std::size_t i = 0; i < g.ranks.size(); ++i) rj += (i ? "," : "") + std::to_string(g.ranks[i]);
      pg.ranksJson = rj + "]";
      pg.description = g.name + " (simulated)";
      groupIds.push_back(store.addProcessGroup(pg));
    }
    auto groupOf = [&](const std::string& kind, int rank) -> std::pair<std::string, Id> {
      for (std::size_t i = 0; i < sim.groups.size(); ++i) {
        const auto& g = sim.groups[i];
        if (g.name.rfind(kind, 0) != 0) continue;
        if (std::find(g.ranks.begin(), g.ranks.end(), rank) != g.ranks.end()) return {g.name, groupIds[i]};
      }
      return {kind, 0};
    };
    const Id catCpu = store.intern("cpu_op"), catAnn = store.intern("user_annotation"), catWait = store.intern("wait"),
             catColl = store.intern("collective");
    const Id dtype = store.intern(em.precision == Precision::Fp32 ? "float" : "c10::BFloat16");
    std::vector<Id> nameIds(sim.names.size());
    std::vector<Id> waitNameIds(sim.names.size(), 0);
    for (std::size_t i = 0; i < sim.names.size(); ++i) nameIds[i] = store.intern(sim.names[i]);

    std::int64_t doneRanks = 0;
    for (const auto& tr : sim.ranks) {
      if (cancel) cancel->throwIfCancelled();
      Rank rk;
      rk.runId = runId;
      rk.rank = tr.rank;
      rk.host = "simulated-node" + std::to_string(tr.rank / std::max(1, std::min(em.gpusPerNode, em.gpus)));
      rk.device = gloo ? "cpu" : "cuda:" + std::to_string(tr.rank % std::max(1, std::min(em.gpusPerNode, em.gpus)));
      rk.sourceFile = "simulated";
      const RankId rankId = store.addRank(rk);
      Track ct;
      ct.rankId = rankId;
      ct.kind = TrackKind::CpuThread;
      ct.name = "compute (main thread)";
      ct.pid = tr.rank;
      ct.tid = 0;
      ct.sortIndex = 0;
      const TrackId computeTrack = store.addTrack(ct);
      std::vector<TrackId> commTracks;
      std::vector<Id> commGroups;
      for (std::size_t k = 0; k < sim.laneGroupKind.size(); ++k) {
        const auto [gname, gid] = groupOf(sim.laneGroupKind[k], tr.rank);
        Track t;
        t.rankId = rankId;
        t.kind = TrackKind::Comm;
        t.name = "comm " + gname + " (" + backend + ")";
        t.pid = tr.rank;
        t.tid = static_cast<std::int64_t>(k + 1);
        t.sortIndex = 10 + static_cast<int>(k);
        commTracks.push_back(store.addTrack(t));
        commGroups.push_back(gid);
      }
      const int devType = gloo ? 0 : 1;
      const int devId = gloo ? 0 : static_cast<int>(tr.rank % std::max(1, std::min(em.gpusPerNode, em.gpus)));
      const auto [memA, memR] = store.addMemoryTracks(rankId, devType, devId);

      BulkWriter w(store);
      std::string args;
      for (const auto& sp : tr.spans) {
        EventRecord e;
        e.startNs = ns(sp.startS);
        e.endNs = std::max(e.startNs, ns(sp.endS));
        e.step = sp.step + 1;  // runtime steps count from 1
        switch (sp.kind) {
          case SimSpan::Kind::Compute:
            e.trackId = computeTrack;
            e.nameId = nameIds[static_cast<std::size_t>(sp.name)];
            e.catId = catCpu;
            e.category = Category::Computation;
            w.addEvent(e);
            break;
          case SimSpan::Kind::Annotation:
            e.trackId = computeTrack;
            e.nameId = nameIds[static_cast<std::size_t>(sp.name)];
            e.catId = catAnn;
            e.category = Category::Other;
            if (sim.names[static_cast<std::size_t>(sp.name)].rfind("ProfilerStep#", 0) == 0)
              e.nameId = store.intern("ProfilerStep#" + std::to_string(sp.step + 1));
            w.addEvent(e);
            break;
          case SimSpan::Kind::Wait: {
            auto& wid = waitNameIds[static_cast<std::size_t>(sp.name)];
            if (wid == 0) wid = store.intern("wait " + sim.names[static_cast<std::size_t>(sp.name)]);
            e.trackId = computeTrack;
            e.nameId = wid;
            e.catId = catWait;
            e.category = Category::Other;
            w.addEvent(e);
            break;
          }
          case SimSpan::Kind::Collective: {
            e.trackId = commTracks.at(static_cast<std::size_t>(sp.commLane));
            e.nameId = nameIds[static_cast<std::size_t>(sp.name)];
            e.catId = catColl;
            e.category = Category::Communication;
            e.collOp = collOp(sp.op);
            e.flags |= EventFlags::CollectiveMeta;
            if (commGroups[static_cast<std::size_t>(sp.commLane)] != 0)
              e.processGroupId = commGroups[static_cast<std::size_t>(sp.commLane)];
            e.bytes = sp.bytes;
            e.groupSize = sp.groupSize;
            e.dtypeId = dtype;
            const TimeNs issue = ns(sp.issueS);
            args = "{\"issue_ns\":" + std::to_string(issue) + ",\"queue_ns\":" + std::to_string(e.startNs - issue) +
                   ",\"wait_ns\":" + std::to_string(std::llround(sp.waitS * 1e9)) + ",\"simulated\":true" +
                   (sp.emulated ? ",\"emulated_by\":\"all_reduce\"" : "") + "}";
            w.addEvent(e, args);
            break;
          }
        }
      }
      for (const auto& m : tr.memory) {
        MemoryEvent me;
        me.rankId = rankId;
        me.tsNs = ns(m.tS);
        me.deviceType = devType;
        me.deviceId = devId;
        me.bytes = m.delta;
        me.totalAllocated = m.total;
        me.totalReserved = m.total;
        w.addMemoryEvent(me);
        w.noteSample(memA, me.tsNs);
        w.noteSample(memR, me.tsNs);
      }
      w.finish();
      for (std::size_t s = 0; s < tr.steps.size(); ++s)
        store.addStep(Step{rankId, static_cast<std::int64_t>(s + 1), ns(tr.steps[s].first), ns(tr.steps[s].second)});
      // Per-rank metrics, as a runtime rank stores them.
      std::int64_t peak = 0;
      for (const auto& m : tr.memory) peak = std::max(peak, m.total);
      store.setMetric(runId, rankId, "peak_allocated_bytes", static_cast<double>(peak));
      if (tr.rank == 0)
        for (int c = 0; c < kMemCats; ++c)
          store.setMetric(runId, rankId, std::string("peak_breakdown.") + memCatKey(static_cast<MemCat>(c)),
                          static_cast<double>(sim.peakByCategory[c]));
      std::map<std::string, double> bytesPerOp, countPerOp;
      // The rank's step_time_ms over the steps core's rule counts for a simulated run.
      std::vector<std::int64_t> stepNumbers(tr.steps.size());
      std::iota(stepNumbers.begin(), stepNumbers.end(), std::int64_t{0});
      const CountedSteps counted = countedStepNumbers(stepNumbers, RunSource::Simulated);
      double steadyStepS = 0;
      for (std::int64_t s = counted.first; s <= counted.last; ++s)
        steadyStepS += tr.steps[static_cast<std::size_t>(s)].second - tr.steps[static_cast<std::size_t>(s)].first;
      if (counted.count > 0) store.setMetric(runId, rankId, "step_time_ms", steadyStepS / static_cast<int>(counted.count) * 1e3);
      for (const auto& sp : tr.spans) {
        if (sp.kind != SimSpan::Kind::Collective || sp.step != static_cast<int>(tr.steps.size()) - 1) continue;
        const std::string op = collKindName(sp.op);
        bytesPerOp[op] += static_cast<double>(sp.bytes);
        countPerOp[op] += 1;
      }
      for (const auto& [op, v] : bytesPerOp) store.setMetric(runId, rankId, "comm.bytes_per_step." + op, v);
      for (const auto& [op, v] : countPerOp) store.setMetric(runId, rankId, "comm.count_per_step." + op, v);
      ++doneRanks;
      if (progress) progress({"store simulated ranks", static_cast<std::uint64_t>(doneRanks), sim.ranks.size(), "ranks"});
    }
    const MemoryEstimate me = estimateMemory(em, in.strategy);
    store.setMetric(runId, std::nullopt, "step_time_ms", sim.steady.stepS * 1e3);
    store.setMetric(runId, std::nullopt, "tokens_per_s", sim.tokensPerSPerDevice * em.gpus);
    store.setMetric(runId, std::nullopt, "params", static_cast<double>(parameterCount(em.model)));
    store.setMetric(runId, std::nullopt, "sim.compute_ms", sim.steady.computeS * 1e3);
    store.setMetric(runId, std::nullopt, "sim.comm_ms", sim.steady.commS * 1e3);
    store.setMetric(runId, std::nullopt, "sim.exposed_comm_ms", sim.steady.exposedCommS * 1e3);
    store.setMetric(runId, std::nullopt, "sim.overlap", sim.steady.overlap());
    store.setMetric(runId, std::nullopt, "sim.slowest_rank_step_ms", sim.slowestRankStepS * 1e3);
    store.setMetric(runId, std::nullopt, "sim.peak_bytes", static_cast<double>(sim.peakBytes));
    store.setMetric(runId, std::nullopt, "sim.wall_s", sim.wallS);
    store.setMetric(runId, std::nullopt, "comm.wire_bytes_per_step", sim.wireBytesPerStep);
    store.setMetric(runId, std::nullopt, "model_state.parameters_bytes", static_cast<double>(me.state.parameters));
    store.setMetric(runId, std::nullopt, "model_state.gradients_bytes", static_cast<double>(me.state.gradients));
    store.setMetric(runId, std::nullopt, "model_state.optimizer_bytes", static_cast<double>(me.state.optimizer));
    store.setMetric(runId, std::nullopt, "model_state.buffers_bytes", static_cast<double>(me.state.buffers));
  });
  return runId;
}

JsonValue toJson(const MeasuredProfile& m) {
  JsonValue o = JsonValue::object();
  o.set("run", JsonValue::number(m.runId.value()));
  o.set("strategy", JsonValue::string(strategyName(m.strategy)));
  o.set("step_s", JsonValue::number(m.stepS));
  o.set("comm_s", JsonValue::number(m.commS));
  o.set("exposed_comm_s", JsonValue::number(m.exposedCommS));
  o.set("overlap", JsonValue::number(m.overlap()));
  o.set("compute_jitter", JsonValue::number(m.computeJitter));
  for (int p = 0; p < kComputePhases; ++p)
    if (m.phaseJitter[p] >= 0)
      o.set(std::string("compute_jitter_") + computePhaseName(static_cast<ComputePhase>(p)), JsonValue::number(m.phaseJitter[p]));
  // The compute profile per step: forward and backward of every block (alone, interference taken
  // out), the optimizer step, the host work outside them.
  double fwd = 0, bwd = 0;
  for (double v : m.compute.forwardS) fwd += v;
  for (double v : m.compute.backwardS) bwd += v;
  o.set("forward_s", JsonValue::number(fwd));
  o.set("backward_s", JsonValue::number(bwd));
  JsonValue fb = JsonValue::array(), bb = JsonValue::array();
  for (double v : m.compute.forwardS) fb.push(JsonValue::number(v));
  for (double v : m.compute.backwardS) bb.push(JsonValue::number(v));
  o.set("forward_blocks_s", std::move(fb));  // per block: embedding, the transformer blocks, the head
  o.set("backward_blocks_s", std::move(bb));
  o.set("step_overhead_s", JsonValue::number(m.compute.stepOverheadS));
  o.set("device_busy_share", m.deviceBusyShare >= 0 ? JsonValue::number(m.deviceBusyShare) : JsonValue());
  if (!m.leftOutSteps.empty()) {
    JsonValue lo = JsonValue::array();
    for (std::int64_t s : m.leftOutSteps) lo.push(JsonValue::number(s));
    o.set("left_out_steps", std::move(lo));
    o.set("left_out_note", JsonValue::string(m.leftOutNote));
  }
  o.set("optimizer_s_per_model_element", JsonValue::number(m.compute.optimizerSPerModelElement));
  // What checkpointing costs a block on the run's machine (its probe) or the constants.
  JsonValue ck = JsonValue::object();
  ck.set("forward_share", JsonValue::number(m.compute.checkpointedForwardShare));
  ck.set("recompute_share", JsonValue::number(m.compute.recomputeShare));
  ck.set("source", JsonValue::string(m.compute.checkpointProbed ? "probe" : "constants"));
  // The recomputation's own source: "steps" where the run's spans measured it.
  ck.set("recompute_source", JsonValue::string(m.compute.recomputeMeasured  ? "steps"
                                               : m.compute.checkpointProbed ? "probe"
                                                                            : "constants"));
  o.set("checkpointing", std::move(ck));
  JsonValue inter = JsonValue::object();
  inter.set("k", JsonValue::number(m.interference.k));
  inter.set("fitted", JsonValue::boolean(m.interference.identified));
  inter.set("samples", JsonValue::number(m.interference.samples));
  inter.set("mean_overlap", JsonValue::number(m.interference.meanOverlap));
  inter.set("overlap_spread", JsonValue::number(m.interference.spread));
  inter.set("note", JsonValue::string(m.interference.note));
  o.set("interference", std::move(inter));
  o.set("step_cv", JsonValue::number(m.stepCv));
  if (!m.gemmGflops.empty()) {
    JsonValue g = JsonValue::array();
    for (const auto& [d, r] : m.gemmGflops) {
      JsonValue p = JsonValue::array();
      p.push(JsonValue::number(d));
      p.push(JsonValue::number(r));
      g.push(std::move(p));
    }
    o.set("gemm_gflops", std::move(g));
    if (!m.gemmProbeNote.empty()) o.set("gemm_probe_note", JsonValue::string(m.gemmProbeNote));
  }
  if (m.host.known) {
    JsonValue h = JsonValue::object();
    h.set("cpus", JsonValue::number(std::int64_t{m.host.cpus}));
    h.set("intra_op_threads", JsonValue::number(std::int64_t{m.host.threadsPerRank}));
    h.set("ranks_on_host", JsonValue::number(std::int64_t{m.host.ranksOnHost}));
    h.set("gpus", JsonValue::number(std::int64_t{m.host.gpus}));
    o.set("host", std::move(h));
  }
  return o;
}

}  // namespace shardscope::core::estimator
