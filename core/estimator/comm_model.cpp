#include "core/estimator/comm_model.h"

#include "core/estimator/interference.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <optional>

#include "core/analysis/step_breakdown.h"
#include "core/util/error.h"

namespace shardscope::core::estimator {
namespace {

std::int64_t roundUp(std::int64_t n, std::int64_t m) { return m <= 1 ? n : (n + m - 1) / m * m; }
std::int64_t ceilDiv(std::int64_t n, std::int64_t d) { return d <= 0 ? 0 : (n + d - 1) / d; }

}  // namespace

std::string collKindName(CollKind k) {
  switch (k) {
    case CollKind::AllReduce:
      return "all_reduce";
    case CollKind::AllGather:
      return "all_gather";
    case CollKind::ReduceScatter:
      return "reduce_scatter";
  }
  return "?";
}

double ringFactor(CollKind k, int n) {
  if (n <= 1) return 0.0;
  const double d = static_cast<double>(n);
  return k == CollKind::AllReduce ? 2.0 * (d - 1.0) / d : (d - 1.0) / d;
}

std::string phaseName(CommPhase p) {
  switch (p) {
    case CommPhase::Forward:
      return "forward";
    case CommPhase::Backward:
      return "backward";
    case CommPhase::AfterStep:
      return "outside compute";
  }
  return "?";
}

double Collective::wireFactor() const {
  return ringFactor(kind == CollKind::ReduceScatter && emulatedReduceScatter ? CollKind::AllReduce : kind, groupSize);
}

const std::vector<std::string>& linkPresetNames() {
  static const std::vector<std::string> names = {"nvlink-h100", "nvlink-h200", "nvlink-a100", "pcie4",   "pcie5",
                                                 "ib-ndr",      "ib-hdr",      "eth-100g",    "eth-25g", "gloo-cpu-local"};
  return names;
}

std::optional<LinkModel> linkPreset(std::string_view name) {
  // Bus bandwidths (nccl-tests' busBw) and per-collective latencies. Sources and reasoning in
  // docs/ESTIMATOR.md; the NVLink figures are the NCCL maintainer's 8×H100/H200 numbers
  // (strategies.md §3.3), the network ones line rate less protocol overhead.
  if (name == "nvlink-h100") return LinkModel{"nvlink-h100", 370, 480, 15, "8xH100 NVSwitch: AG/RS 370 GB/s, AR (NVLS) 480 GB/s"};
  if (name == "nvlink-h200") return LinkModel{"nvlink-h200", 370, 475, 15, "8xH200 NVSwitch: AG/RS 370 GB/s, AR 475 GB/s"};
  if (name == "nvlink-a100")
    return LinkModel{"nvlink-a100", 230, 0, 15,
                     "8xA100 SXM NVSwitch (NVLink 3, 300 GB/s per direction): ~230 GB/s bus bandwidth, an assumption"};
  if (name == "pcie4") return LinkModel{"pcie4", 20, 0, 20, "PCIe 4.0 x16 (32 GB/s line), ring through the host bridge"};
  if (name == "pcie5") return LinkModel{"pcie5", 40, 0, 20, "PCIe 5.0 x16 (64 GB/s line), ring through the host bridge"};
  if (name == "ib-ndr") return LinkModel{"ib-ndr", 45, 0, 30, "InfiniBand NDR 400 Gb/s, one NIC per GPU, ~90% of line rate"};
  if (name == "ib-hdr") return LinkModel{"ib-hdr", 22.5, 0, 30, "InfiniBand HDR 200 Gb/s, one NIC per GPU, ~90% of line rate"};
  if (name == "eth-100g") return LinkModel{"eth-100g", 10, 0, 50, "100 GbE (RoCE/TCP), ~80% of line rate"};
  if (name == "eth-25g") return LinkModel{"eth-25g", 2.5, 0, 60, "25 GbE, ~80% of line rate"};
  if (name == "gloo-cpu-local")
    return LinkModel{"gloo-cpu-local", 0.8, 0, 150,
                     "Gloo over loopback TCP between CPU ranks on one machine (order of magnitude of this project's "
                     "2-core runs; fit your own with --fit-run)"};
  return std::nullopt;
}

CommEstimate commVolume(const EstimateInput& in, Strategy s, const CommOptions& opt) {
  validateShape(in.model);
  if (in.gpus < 1) throw std::invalid_argument("gpus must be at least 1");
  const bool fp32 = in.precision == Precision::Fp32;
  const std::int64_t w = fp32 ? 4 : 2, g = fp32 ? 4 : 2;
  const std::int64_t W = in.gpus, gpn = std::max(1, in.gpusPerNode);
  // Fine-tuning: gradients and the post-step all-gathers carry the trainable tensors only (the
  // adapters with LoRA); the parameter all-gathers of ZeRO-3 and FSDP carry the frozen base too, in
  // the compute dtype (NF4 bytes with QLoRA).
  const auto mods = moduleShapes(in);
  const bool lora = in.loraRank > 0;
  auto trainableOf = [&](const ModuleShape& m) -> const std::vector<std::int64_t>& { return lora ? m.adapters : m.params; };
  const std::int64_t P = lora ? trainableParameterCount(in) : parameterCount(in.model);
  const bool multiNode = W > gpn;
  CommEstimate c;
  c.strategy = s;
  auto add = [&](std::string what, CollKind k, CommPhase ph, std::int64_t n, bool inter, std::int64_t count, std::int64_t bytes) {
    if (bytes <= 0 || count <= 0 || n <= 1) return;
    Collective col;
    col.what = std::move(what);
    col.kind = k;
    col.phase = ph;
    col.groupSize = static_cast<int>(n);
    col.interNode = inter;
    col.count = count;
    col.messageBytes = bytes;
    col.emulatedReduceScatter = k == CollKind::ReduceScatter && opt.emulatedReduceScatter;
    c.collectives.push_back(std::move(col));
  };
  switch (s) {
    case Strategy::Ddp: {
      const std::int64_t S = g * P;
      const auto first = static_cast<std::int64_t>(1.0 * 1024 * 1024),
                 cap = static_cast<std::int64_t>(in.bucketCapMb * 1024 * 1024);
      const std::int64_t buckets = S <= first ? 1 : 1 + ceilDiv(S - first, std::max<std::int64_t>(1, cap));
      add("gradient all-reduce (buckets)", CollKind::AllReduce, CommPhase::Backward, W, multiNode, buckets, S);
      break;
    }
    case Strategy::Zero1:
    case Strategy::Zero2: {
      // DeepSpeed's default (use_multi_rank_bucket_allreduce): the gradient buckets are all-reduced
      // and each rank keeps its slice; the updated partitions are all-gathered after the step.
      const std::int64_t Pp = roundUp(P, W);
      add(s == Strategy::Zero1 ? "gradient all-reduce (after backward)" : "gradient all-reduce (IPG buckets)",
          CollKind::AllReduce, s == Strategy::Zero1 ? CommPhase::AfterStep : CommPhase::Backward, W, multiNode,
          ceilDiv(Pp, std::max<std::int64_t>(1, in.reduceBucketSize)), g * Pp);
      add("updated parameter all-gather", CollKind::AllGather, CommPhase::AfterStep, W, multiNode,
          ceilDiv(Pp, std::max<std::int64_t>(1, in.allgatherBucketSize)), w * Pp);
      c.notes.push_back("DeepSpeed ZeRO-1/2 all-reduce gradient buckets (3(n-1)/n·S), not the paper's reduce-scatter");
      break;
    }
    case Strategy::Zero3:
    case Strategy::ZeroPPHpz: {
      std::int64_t nonPersistent = 0, persistent = 0, modules = 0, frozenGathered = 0, frozenBig = 0;
      for (const auto& mod : mods) {
        std::int64_t big = 0, small = 0, fBig = 0;
        for (auto n : trainableOf(mod)) (n < in.paramPersistenceThreshold ? small : big) += n;
        if (mod.frozen)
          for (std::size_t i = 0; i < mod.params.size(); ++i)
            if (mod.params[i] >= in.paramPersistenceThreshold)
              fBig += mod.quantised && i == 0 ? nf4Bytes(mod.params[i]) : w * mod.params[i];
        if (big > 0 || fBig > 0) ++modules;
        if (big > 0) nonPersistent += roundUp(big, W);
        if (small > 0) persistent += roundUp(small, W);
        frozenGathered += roundUp(fBig, w * W);
        frozenBig += fBig;
      }
      const std::int64_t all = nonPersistent + persistent;
      const bool released = 2 * parameterCount(in.model) > in.maxReuseDistance;
      add("forward parameter all-gather (per module)", CollKind::AllGather, CommPhase::Forward, W, multiNode, modules,
          w * nonPersistent + frozenGathered);
      if (released) {
        if (s == Strategy::ZeroPPHpz) {
          const std::int64_t G = effectiveShardGroup(in, s);
          add("backward parameter all-gather (hpZ, inside the node)", CollKind::AllGather, CommPhase::Backward, G, G > gpn,
              modules, w * roundUp(nonPersistent, G) + (lora ? roundUp(frozenBig, w * G) : 0));
        } else {
          add("backward parameter all-gather (per module)", CollKind::AllGather, CommPhase::Backward, W, multiNode, modules,
              w * nonPersistent + frozenGathered);
        }
      } else {
        c.notes.push_back("2Ψ within stage3_max_reuse_distance: modules stay gathered, no backward all-gather");
      }
      const std::int64_t ipg = std::max<std::int64_t>(1, std::min(in.reduceBucketSize, all));
      add("gradient reduce-scatter (IPG buckets)", CollKind::ReduceScatter, CommPhase::Backward, W, multiNode, ceilDiv(all, ipg),
          g * all);
      add("persistent parameter all-gather (after the step)", CollKind::AllGather, CommPhase::AfterStep, W, multiNode, 1,
          w * persistent);
      break;
    }
    case Strategy::FsdpFull:
    case Strategy::FsdpGradOp:
    case Strategy::Hsdp: {
      const std::int64_t N = fsdpShardCount(in, s);
      const bool shardInter = N > gpn;
      // Per unit (embedding, blocks, head): trainable elements and frozen bytes.
      std::vector<std::int64_t> tUnits(static_cast<std::size_t>(in.model.layers + 2), 0), fUnits(tUnits.size(), 0);
      for (const auto& mod : mods) {
        for (auto n : trainableOf(mod)) tUnits[static_cast<std::size_t>(mod.block)] += n;
        fUnits[static_cast<std::size_t>(mod.block)] += frozenBytes(mod, w);
      }
      std::int64_t all = 0, gathered = 0, reduced = 0;
      for (std::size_t u = 0; u < tUnits.size(); ++u) {
        all += roundUp(tUnits[u], N);
        gathered += w * roundUp(tUnits[u], N) + roundUp(fUnits[u], w * N);
        reduced += tUnits[u] > 0 ? 1 : 0;  // units without trainable parameters reduce nothing
      }
      const std::int64_t head = w * roundUp(tUnits.back(), N) + roundUp(fUnits.back(), w * N);
      const auto nu = static_cast<std::int64_t>(tUnits.size());
      add("forward unit all-gather", CollKind::AllGather, CommPhase::Forward, N, shardInter, nu, gathered);
      if (s != Strategy::FsdpGradOp)
        add("backward unit all-gather (root kept)", CollKind::AllGather, CommPhase::Backward, N, shardInter, nu - 1,
            gathered - head);
      add("gradient reduce-scatter (per unit)", CollKind::ReduceScatter, CommPhase::Backward, N, shardInter, reduced, g * all);
      if (s == Strategy::Hsdp)
        add("gradient shard all-reduce across replicas", CollKind::AllReduce, CommPhase::Backward, W / N, multiNode, reduced,
            g * all / N);
      break;
    }
  }
  for (const auto& col : c.collectives) {
    c.messageBytes += col.messageBytes;
    c.wireBytes += col.wireBytes();
  }
  if (opt.emulatedReduceScatter)
    c.notes.push_back("reduce-scatter emulated by an all-reduce (Gloo in LibTorch 1.13): 2(n-1)/n on the wire");
  return c;
}

const LinkModel::InRunSize* LinkModel::inRunSize(bool allReduceLike, double wireBytes, WaitKind waited, int groupSize) const {
  if (groupSize > 0 && measuredGroupSize > 0 && groupSize != measuredGroupSize) return nullptr;
  const auto atSize = [&](const std::vector<InRunSize>& inRun) -> const InRunSize* {
    if (inRun.empty() || !(wireBytes > 0)) return nullptr;
    const auto it = std::lower_bound(inRun.begin(), inRun.end(), wireBytes * (1 - 1e-9),
                                     [](const InRunSize& p, double v) { return p.wireBytes < v; });
    return it != inRun.end() && it->wireBytes <= wireBytes * (1 + 1e-9) ? &*it : nullptr;
  };
  if (waited != WaitKind::Unknown) {
    const int k = waited == WaitKind::OnDemand ? 1 : 0;
    if (const auto* s = atSize(allReduceLike ? allReduceInRunByWait[k] : otherInRunByWait[k])) return s;
  }
  return atSize(allReduceLike ? allReduceInRun : otherInRun);
}

double LinkModel::ringStepsS(bool allReduceLike, int groupSize) const {
  if (!ringLatency || measuredGroupSize < 2 || groupSize < 2 || groupSize == measuredGroupSize) return 0.0;
  return (allReduceLike ? arAlphaUs() : alphaUs) * 1e-6 * static_cast<double>(groupSize - measuredGroupSize) /
         static_cast<double>(measuredGroupSize - 1);
}

double LinkModel::instanceS(bool allReduceLike, double wireBytes, WaitKind waited, int groupSize) const {
  const double bw = (allReduceLike ? arBw() : busBwGBps) * 1e9;
  const auto line = [&](double x) { return (allReduceLike ? arAlphaUs() : alphaUs) * 1e-6 + (bw > 0 ? x / bw : 0.0); };
  if (const auto* s = inRunSize(allReduceLike, wireBytes, waited, groupSize)) return s->timeS;
  const auto measured = [&]() {
    const auto& pts = allReduceLike ? allReducePoints : otherPoints;
    if (pts.size() < 2 || !(wireBytes > 0)) return line(std::max(0.0, wireBytes));
    if (wireBytes <= pts.front().first) {
      const double l0 = line(pts.front().first);
      return l0 > 0 ? pts.front().second * line(wireBytes) / l0 : pts.front().second;
    }
    if (wireBytes >= pts.back().first) {
      const double l1 = line(pts.back().first);
      return l1 > 0 ? pts.back().second * line(wireBytes) / l1 : pts.back().second;
    }
    return logLogBetween(pts, wireBytes);
  };
  const double t = measured();
  const double steps = ringStepsS(allReduceLike, groupSize);
  if (steps >= 0) return t + steps;
  // Fewer ranks than measured: never below the time were all of it latency.
  return std::max(t + steps, t * static_cast<double>(groupSize - 1) / static_cast<double>(measuredGroupSize - 1));
}

double logLogBetween(const std::vector<std::pair<double, double>>& pts, double x) {
  if (x <= pts.front().first) return pts.front().second;
  if (x >= pts.back().first) return pts.back().second;
  const auto hi = std::lower_bound(pts.begin(), pts.end(), x, [](const auto& p, double v) { return p.first < v; });
  const auto lo = hi - 1;
  const double f = std::log(x / lo->first) / std::log(hi->first / lo->first);
  return std::exp(std::log(lo->second) + f * (std::log(hi->second) - std::log(lo->second)));
}

void commTime(CommEstimate& c, const LinkModel& intra, const LinkModel& inter) {
  c.timeS = 0;
  for (auto& col : c.collectives) {
    const LinkModel& l = col.interNode ? (inter.busBwGBps < intra.busBwGBps ? inter : intra) : intra;
    const bool ar = col.kind == CollKind::AllReduce || col.emulatedReduceScatter;
    const double n = static_cast<double>(std::max<std::int64_t>(1, col.count));
    col.timeS = col.count > 0 ? n * l.instanceS(ar, col.wireBytes() / n, WaitKind::Unknown, col.groupSize) : 0.0;
    c.timeS += col.timeS;
  }
}

namespace {

// A numeric field of an event's args ("wait_ns":123).
std::optional<double> argNumber(std::string_view args, std::string_view key) {
  const std::string k = "\"" + std::string(key) + "\":";
  const auto at = args.find(k);
  if (at == std::string_view::npos) return std::nullopt;
  const std::string_view rest = args.substr(at + k.size());
  double v = 0;
  const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), v);
  if (ec != std::errc() || end == rest.data()) return std::nullopt;
  return v;
}

// A collective is on demand (WaitKind) where its ranks computed, on average, less than this share
// of the time from its issue to its end before they began to wait on it: the rank had nothing to
// do but wait (the simulator's rule: no compute between the issue and the wait).
constexpr double kOnDemandBusyShare = 0.1;

// When a collective was issued and when its rank began to wait on it (our runtime's and the
// simulator's args: queue_ns from issue to start, wait_ns up to its end); nullopt without them.
std::optional<std::pair<double, double>> issueAndWaitStart(const Event& e) {
  const auto wait = argNumber(e.argsJson, "wait_ns");
  const auto queue = argNumber(e.argsJson, "queue_ns");
  if (!wait || !queue) return std::nullopt;
  const double issue = static_cast<double>(e.startNs) - std::max(0.0, *queue);
  const double waitStart = std::max(issue, static_cast<double>(e.endNs) - std::max(0.0, *wait));
  return std::pair{issue, waitStart};
}

struct KindFit {
  bool ok = false, twoSizes = false;
  double alpha = 0, slope = 0;  // s, s per wire byte
};

// Weighted least squares on relative error, so microsecond collectives weigh as much as long
// ones. The weights are 1/prediction², refitted a few times (iteratively reweighted), starting from
// 1/y²: weighting by the observations themselves would favour the instances that happened to run
// fast, and under noise that stretches durations (a descheduled rank, a busy core) the fit would
// come out below the mean duration at every size. With one size only, the slope through `alpha0`.
KindFit fitKind(const std::vector<std::pair<double, double>>& xy, std::optional<double> alpha0) {
  KindFit f;
  if (xy.empty()) return f;
  // Weighted least squares; false when duration does not grow with size.
  auto solve = [&](const auto& weight, double& alpha, double& slope) {
    double sw = 0, mx = 0, my = 0;
    for (auto [x, y] : xy) {
      const double w = weight(x, y);
      sw += w;
      mx += w * x;
      my += w * y;
    }
    mx /= sw;
    my /= sw;
    double sxx = 0, sxy = 0;
    for (auto [x, y] : xy) {
      const double w = weight(x, y);
      sxx += w * (x - mx) * (x - mx);
      sxy += w * (x - mx) * (y - my);
    }
    if (!(sxx > 0 && sxy > 0)) return false;
    slope = sxy / sxx;
    alpha = my - slope * mx;
    if (alpha < 0) {
      // A negative latency is noise over a narrow range of sizes: the best line through the
      // origin instead (clipping alpha and keeping the slope would overshoot every collective).
      double swxx = 0, swxy = 0;
      for (auto [x, y] : xy) {
        const double w = weight(x, y);
        swxx += w * x * x;
        swxy += w * x * y;
      }
      alpha = 0;
      slope = swxy / swxx;
    }
    return true;
  };
  bool sizes = false;
  for (auto [x, y] : xy) sizes = sizes || x != xy.front().first;
  double alpha = 0, slope = 0;
  // One size: no line through the points (rounding would make one up).
  if (sizes && solve([](double, double y) { return 1.0 / (y * y); }, alpha, slope)) {
    for (int it = 0; it < 8; ++it) {
      const double a0 = alpha, s0 = slope;
      const double floorY = 1e-9;
      if (!solve(
              [&](double x, double) {
                const double p = std::max(floorY, a0 + s0 * x);
                return 1.0 / (p * p);
              },
              alpha, slope)) {
        alpha = a0;
        slope = s0;
        break;
      }
      if (std::fabs(alpha - a0) <= 1e-4 * std::max(a0, 1e-9) && std::fabs(slope - s0) <= 1e-4 * s0) break;
    }
    f.slope = slope;
    f.alpha = alpha;
    f.ok = f.twoSizes = true;
    return f;
  }
  // One size, or sizes whose duration does not grow with them (noise over a narrow range): no
  // latency can be told from the data; the bandwidth through `alpha0` (the mean of the ratios).
  const double a = alpha0.value_or(0.0);
  double s = 0;
  for (auto [x, y] : xy) s += std::max(0.0, y - a) / x;
  s /= static_cast<double>(xy.size());
  if (!(s > 0)) return f;
  f.alpha = a;
  f.slope = s;
  f.ok = true;
  return f;
}

}  // namespace

LinkFit fitLink(const std::vector<CollectiveSample>& samples, const std::string& name) {
  std::vector<std::pair<double, double>> ar, ag, all;
  for (const auto& s : samples) {
    const bool arLike = s.kind == CollKind::AllReduce || (s.kind == CollKind::ReduceScatter && s.emulatedReduceScatter);
    const double x = static_cast<double>(s.messageBytes) * ringFactor(arLike ? CollKind::AllReduce : s.kind, s.groupSize);
    if (!(x > 0) || !(s.durationS > 0)) continue;
    (arLike ? ar : ag).emplace_back(x, s.durationS);
    all.emplace_back(x, s.durationS);
  }
  if (all.size() < 2) throw Error("alpha-beta fit: fewer than two collectives with a size and a duration");
  // The kind with two sizes first: its latency anchors the other.
  KindFit fag = fitKind(ag, std::nullopt), far = fitKind(ar, std::nullopt);
  if (!far.twoSizes) far = fitKind(ar, fag.twoSizes ? std::optional<double>(fag.alpha) : std::nullopt);
  if (!fag.twoSizes) fag = fitKind(ag, far.twoSizes ? std::optional<double>(far.alpha) : std::nullopt);
  if (!fag.ok && !far.ok) throw Error("alpha-beta fit: duration does not grow with size");
  const KindFit& main = fag.ok ? fag : far;
  LinkFit f;
  f.link.name = name;
  f.link.busBwGBps = 1.0 / main.slope / 1e9;
  f.link.alphaUs = main.alpha * 1e6;
  if (far.ok && fag.ok) {
    f.link.allReduceBusBwGBps = 1.0 / far.slope / 1e9;
    f.link.allReduceAlphaUs = far.alpha * 1e6;
  }
  f.link.note = "fitted from " + std::to_string(all.size()) + " collectives (" + std::to_string(ag.size()) +
                " all-gather/reduce-scatter, " + std::to_string(ar.size()) + " all-reduce)";
  if (!fag.twoSizes && !far.twoSizes)
    f.link.note += "; no latency could be told from them (one size, or durations not growing with size): bandwidth only";
  f.samples = static_cast<std::int64_t>(all.size());
  double sse = 0, rel = 0, ym = 0;
  for (auto [x, y] : all) ym += y;
  ym /= static_cast<double>(all.size());
  double syy = 0;
  for (const auto& [set, kf] : {std::pair{&ag, &fag}, std::pair{&ar, &far}}) {
    for (auto [x, y] : *set) {
      const KindFit& k = kf->ok ? *kf : main;
      const double pred = k.alpha + k.slope * x;
      sse += (y - pred) * (y - pred);
      rel += std::fabs(pred - y) / y;
      syy += (y - ym) * (y - ym);
    }
  }
  f.r2 = syy > 0 ? 1.0 - sse / syy : 1.0;
  f.meanAbsRelError = rel / static_cast<double>(all.size());
  return f;
}

LinkFit fitRunLink(TraceStore& store, RunId runId) {
  return fitLink(collectiveSamples(store, runId), "fitted:run" + std::to_string(runId.value()));
}

RunCollectiveSamples runCollectiveSamples(TraceStore& store, RunId runId, const std::set<std::int64_t>* leftOut) {
  // Per lane name (one per process group and rank, or a GPU stream), each rank's collectives in
  // order, the step's and the link probe's apart. When the ranks share a clock and every rank of a
  // lane has the same sequence, the k-th instances are one collective: its time is from the last
  // rank's start to the ranks' mean end (the transfer once everyone has arrived: the waiting of
  // early ranks for late ones is skew, not link time). Otherwise (a single rank, uneven sequences)
  // each instance's own duration is used. Every track is read once.
  struct Inst {
    CollectiveSample s;
    TimeNs start = 0, end = 0;
    std::optional<std::pair<double, double>> issueAndWait;  // issueAndWaitStart
    // Of the time from its issue to its end, the share its rank computed before it began to wait on
    // it; nullopt without issue and wait times.
    std::optional<double> busyBeforeWait;
  };
  using Lanes = std::map<std::string, std::map<RankId, std::vector<Inst>>>;
  Lanes lanes[3];  // [SampleSet::Steps, SampleSet::LinkProbe, the loaded probe]
  // Each rank's compute (its compute lanes' spans, or its GPU streams' compute kernels), merged
  // once every track is read: a collective's compute overlap is taken against it.
  std::map<RankId, std::vector<std::pair<double, double>>> computing;
  // Only our runtime's ranks share one clock (one machine's CLOCK_REALTIME, or the simulation's);
  // imported traces keep per-instance durations.
  const auto run = store.run(runId);
  const bool ours = run && (run->source == RunSource::Runtime || run->source == RunSource::Simulated);
  // Our runs' first step is the warm-up (first use of every buffer and connection: its
  // collectives run several times slower); it is left out by core's steady-state rule
  // (core/analysis/step_breakdown.h), as the step figures leave it out.
  std::map<RankId, CountedSteps> counted;  // rank -> the steps the rule counts
  if (run && leavesOutWarmup(run->source)) {
    std::map<RankId, std::vector<std::int64_t>> numbers;
    for (const auto& s : store.steps(runId)) numbers[s.rankId].push_back(s.step);
    for (const auto& [rank, n] : numbers) counted[rank] = countedStepNumbers(n, run->source);
  }
  for (const auto& t : store.tracks(runId)) {
    const bool computeLane = t.kind == TrackKind::CpuThread && t.name.rfind("compute", 0) == 0;
    const bool commLane = t.kind == TrackKind::Comm || t.kind == TrackKind::GpuStream;
    if (!computeLane && !commLane) continue;
    auto& busy = computing[t.rankId];
    const auto cs = counted.find(t.rankId);
    // The first counted step when a warm-up was left out: step samples before it (and outside any
    // step) are dropped.
    const std::optional<std::int64_t> firstCounted =
        cs != counted.end() && cs->second.warmupLeftOut ? std::optional<std::int64_t>(cs->second.first) : std::nullopt;
    store.forEachEvent(
        t.id,
        [&](const Event& e) {
          if (e.category == Category::Computation && e.endNs > e.startNs && (computeLane || t.kind == TrackKind::GpuStream))
            busy.push_back({static_cast<double>(e.startNs), static_cast<double>(e.endNs)});
          if (!commLane || !e.bytes || *e.bytes <= 0 || e.endNs <= e.startNs) return;
          const bool probe = isLinkProbeName(e.name);
          if (probe && e.name.find("warmup") != std::string_view::npos) return;
          if (!probe && firstCounted && (!e.step || *e.step < *firstCounted)) return;
          if (!probe && leftOut && e.step && leftOut->count(*e.step)) return;
          if (t.kind == TrackKind::GpuStream && e.category != Category::Communication) return;
          CollectiveSample s;
          switch (e.collOp) {
            case CollectiveOp::AllReduce:
              s.kind = CollKind::AllReduce;
              break;
            case CollectiveOp::AllGather:
              s.kind = CollKind::AllGather;
              break;
            case CollectiveOp::ReduceScatter:
              s.kind = CollKind::ReduceScatter;
              break;
            default:
              return;
          }
          s.groupSize = e.groupSize.value_or(0);
          if (s.groupSize <= 1) return;
          s.messageBytes = *e.bytes;
          s.emulatedReduceScatter = e.argsJson.find("\"emulated_by\":\"all_reduce\"") != std::string::npos;
          s.durationS = static_cast<double>(e.endNs - e.startNs) / 1e9;
          lanes[!probe                      ? 0
                : isLoadedProbeName(e.name) ? 2
                                            : 1][t.name][t.rankId]
              .push_back({s, e.startNs, e.endNs, issueAndWaitStart(e), std::nullopt});
        },
        /*withArgs=*/commLane);
  }
  for (auto& [r, iv] : computing) iv = mergeIntervals(std::move(iv));
  const auto collect = [&](Lanes& set) {
    std::vector<CollectiveSample> out;
    for (auto& [name, ranks] : set) {
      for (auto& [r, seq] : ranks) {
        const auto& busy = computing[r];
        for (auto& i : seq) {
          i.s.computeOverlap = overlapFraction(static_cast<double>(i.start), static_cast<double>(i.end), busy);
          if (!i.issueAndWait) continue;
          const auto [issue, waitStart] = *i.issueAndWait;
          const double span = static_cast<double>(i.end) - issue;
          i.busyBeforeWait = span > 0 ? overlapFraction(issue, waitStart, busy) * (waitStart - issue) / span : 0.0;
          i.s.waited = *i.busyBeforeWait < kOnDemandBusyShare ? WaitKind::OnDemand : WaitKind::Ahead;
        }
      }
      bool matched = ours && ranks.size() >= 2;
      const std::size_t n = ranks.begin()->second.size();
      for (const auto& [r, seq] : ranks) {
        if (seq.size() != n) matched = false;
        for (std::size_t k = 0; matched && k < n; ++k)
          if (seq[k].s.kind != ranks.begin()->second[k].s.kind ||
              seq[k].s.messageBytes != ranks.begin()->second[k].s.messageBytes)
            matched = false;
      }
      if (!matched) {
        for (const auto& [r, seq] : ranks)
          for (const auto& i : seq) out.push_back(i.s);
        continue;
      }
      for (std::size_t k = 0; k < n; ++k) {
        TimeNs lastStart = 0;
        double endSum = 0, overlapSum = 0, lastEnd = 0, busySum = 0;
        bool waitKnown = true;
        for (const auto& [r, seq] : ranks) {
          waitKnown = waitKnown && seq[k].busyBeforeWait.has_value();
          busySum += seq[k].busyBeforeWait.value_or(0);
          if (seq[k].start >= lastStart) {
            lastStart = seq[k].start;
            lastEnd = static_cast<double>(seq[k].end);
          }
          endSum += static_cast<double>(seq[k].end);
          overlapSum += seq[k].s.computeOverlap;
        }
        const double nr = static_cast<double>(ranks.size());
        const double d = (endSum / nr - static_cast<double>(lastStart)) / 1e9;
        if (!(d > 0)) continue;
        CollectiveSample s = ranks.begin()->second[k].s;
        s.durationS = d;
        s.matched = true;
        s.lastLatenessS = (lastEnd - (endSum - lastEnd) / (nr - 1)) / 1e9;
        s.computeOverlap = overlapSum / static_cast<double>(ranks.size());
        s.waited = !waitKnown ? WaitKind::Unknown : busySum / nr < kOnDemandBusyShare ? WaitKind::OnDemand : WaitKind::Ahead;
        out.push_back(s);
      }
    }
    return out;
  };
  RunCollectiveSamples out;
  out.steps = collect(lanes[0]);
  out.probe = collect(lanes[1]);
  out.loaded = collect(lanes[2]);
  return out;
}

bool ranOnCuda(const std::vector<Rank>& ranks) {
  return std::any_of(ranks.begin(), ranks.end(), [](const Rank& r) { return r.device.rfind("cuda", 0) == 0; });
}

std::vector<CollectiveSample> collectiveSamples(TraceStore& store, RunId runId, SampleSet which) {
  RunCollectiveSamples all = runCollectiveSamples(store, runId);
  return which == SampleSet::LinkProbe ? std::move(all.probe) : std::move(all.steps);
}

JsonValue toJson(const Collective& c) {
  JsonValue o = JsonValue::object();
  o.set("what", JsonValue::string(c.what));
  o.set("op", JsonValue::string(collKindName(c.kind)));
  o.set("phase", JsonValue::string(phaseName(c.phase)));
  o.set("group_size", JsonValue::number(std::int64_t{c.groupSize}));
  o.set("inter_node", JsonValue::boolean(c.interNode));
  o.set("count", JsonValue::number(c.count));
  o.set("message_bytes", JsonValue::number(c.messageBytes));
  o.set("wire_bytes", JsonValue::number(c.wireBytes()));
  o.set("emulated_by_all_reduce", JsonValue::boolean(c.emulatedReduceScatter));
  o.set("time_s", JsonValue::number(c.timeS));
  return o;
}

JsonValue toJson(const CommEstimate& c) {
  JsonValue o = JsonValue::object();
  o.set("message_bytes", JsonValue::number(c.messageBytes));
  o.set("wire_bytes", JsonValue::number(c.wireBytes));
  o.set("time_s", JsonValue::number(c.timeS));
  JsonValue cols = JsonValue::array();
  for (const auto& x : c.collectives) cols.push(toJson(x));
  o.set("collectives", std::move(cols));
  return o;
}

}  // namespace shardscope::core::estimator
