#include "core/estimator/prediction.h"

#include <algorithm>
#include <cmath>

#include "core/estimator/interference.h"
#include "core/util/error.h"
#include "core/util/units.h"

namespace shardscope::core::estimator {

double hostLoad(const MeasuredProfile::Host& h, int ranksOnHost, bool gpu) {
  if (!h.known) return 0;
  if (gpu) return h.gpus > 0 ? std::max(1.0, static_cast<double>(ranksOnHost) / h.gpus) : 0;
  if (h.cpus <= 0) return 0;
  return std::max(1.0, static_cast<double>(ranksOnHost) * std::max(1, h.threadsPerRank) / h.cpus);
}

namespace {

bool sameShape(const EstimateInput& a, const EstimateInput& b) {
  return a.model.name == b.model.name && a.model.layers == b.model.layers && a.model.hidden == b.model.hidden &&
         a.microBatch == b.microBatch && a.seqLen == b.seqLen && a.precision == b.precision;
}

bool sameKnobs(const EstimateInput& a, const EstimateInput& b) {
  return a.bucketCapMb == b.bucketCapMb && a.reduceBucketSize == b.reduceBucketSize &&
         a.allgatherBucketSize == b.allgatherBucketSize && a.overlapComm == b.overlapComm &&
         a.prefetchBucketSize == b.prefetchBucketSize && a.paramPersistenceThreshold == b.paramPersistenceThreshold &&
         a.maxLiveParameters == b.maxLiveParameters && a.maxReuseDistance == b.maxReuseDistance &&
         a.activationCheckpointing == b.activationCheckpointing && a.gradientAsBucketView == b.gradientAsBucketView &&
         a.shardGroupSize == b.shardGroupSize;
}

}  // namespace

PredictionCheck checkPrediction(const MeasuredProfile& mp, const SimulateInput& target, const LinkCalibration* link) {
  PredictionCheck c;
  const EstimateInput& t = target.model;
  const EstimateInput& m = mp.input;
  const bool gpu = !mp.gloo;
  if (t.gpus != m.gpus)
    c.change = "scale";
  else if (!sameShape(t, m))
    c.change = "model";
  else if (target.strategy != mp.strategy)
    c.change = "strategy";
  else if (!sameKnobs(t, m) || target.backwardPrefetch != mp.backwardPrefetch || target.forwardPrefetch != mp.forwardPrefetch ||
           target.limitAllGathers != mp.limitAllGathers)
    c.change = "knob";

  // The host: ranks per core (CPU) or per GPU. A calibration says nothing of a sharing it did not have.
  const int tOnHost = std::max(1, std::min(t.gpus, t.gpusPerNode));
  const int mOnHost =
      mp.host.known && mp.host.ranksOnHost > 0 ? mp.host.ranksOnHost : std::max(1, std::min(m.gpus, m.gpusPerNode));
  const double lt = hostLoad(mp.host, tOnHost, gpu), lm = hostLoad(mp.host, mOnHost, gpu);
  if (lt > 0 && lm > 0) {
    c.loadFactor = lt / lm;
    if (std::fabs(lt - lm) > 1e-9) {
      const std::string unit = gpu ? "GPU" : "core";
      const auto describe = [&](int ranks, double load) {
        return std::to_string(ranks) + " rank(s) on the host, " + formatFixed(load, 2) + " per " + unit;
      };
      c.sharing = describe(tOnHost, lt) + " against the calibration's " + describe(mOnHost, lm) + " (" +
                  (gpu ? std::to_string(mp.host.gpus) + " GPU(s)"
                       : std::to_string(mp.host.cpus) + " cores, " + std::to_string(mp.host.threadsPerRank) +
                             " intra-op thread(s) per rank") +
                  ")";
      c.refused.push_back(c.sharing + ": ranks would share " + (gpu ? "GPUs" : "cores") +
                          " differently, and nothing in the calibration measures that; calibrate on a run with the same "
                          "sharing, or pass --allow-extrapolation to scale its compute by the load (" +
                          formatFixed(c.loadFactor, 2) + "x)");
    }
  } else if (!mp.host.known) {
    c.extrapolation.push_back("the calibration run does not record its host (cores, GPUs): ranks per " +
                              std::string(gpu ? "GPU" : "core") + " cannot be checked");
  }
  if (t.gpus != m.gpus)
    c.extrapolation.push_back(
        std::to_string(t.gpus) + " ranks from a calibration at " + std::to_string(m.gpus) +
        ": the link is carried to the new group size by the ring factor" +
        (gpu ? std::string(" (its latency as measured)")
             : " and its latency by the ring's steps (x (n - 1) / " + std::to_string(std::max(1, m.gpus - 1)) + ", Gloo)") +
        ", compute per rank as measured");
  if (!sameShape(t, m))
    c.extrapolation.push_back(
        "model " + t.model.name + " (" + std::to_string(t.model.layers) + " layers, micro-batch " + std::to_string(t.microBatch) +
        " x " + std::to_string(t.seqLen) + ") from " + m.model.name + " (" + std::to_string(m.model.layers) + " layers, " +
        std::to_string(m.microBatch) + " x " + std::to_string(m.seqLen) + "): compute scaled by FLOPs per phase" +
        (mp.gemmGflops.size() >= 2 ? " and the measured GEMM rates" : " alone (the run has no compute probe)") +
        (mp.gemmGflops.size() >= 2 && mp.deviceBusyShare >= 0 && mp.deviceBusyShare < 1
             ? " for the " + formatFixed(mp.deviceBusyShare * 100, 0) +
                   "% of the blocks the GPU was busy, by op count for the rest"
             : ""));
  if (!sameShape(t, m) && std::min(t.model.hidden, m.model.hidden) < 256)
    c.extrapolation.push_back("a model narrower than 256 (hidden " + std::to_string(std::min(t.model.hidden, m.model.hidden)) +
                              "): its compute is bound by op dispatch, and the growth of the non-product work was measured "
                              "between hidden 256 and 512 (kRestGrowth)");
  if (!sameShape(t, m) && mp.gemmGflops.size() >= 2) {
    const double widest = std::max(layerGemmWidth(t.model), headGemmWidth(t.model));
    if (widest > mp.gemmGflops.back().first * 1.001 || layerGemmWidth(t.model) < mp.gemmGflops.front().first * 0.999)
      c.extrapolation.push_back("products " + formatFixed(widest, 0) + " wide: the compute probe measured " +
                                formatFixed(mp.gemmGflops.front().first, 0) + ".." + formatFixed(mp.gemmGflops.back().first, 0) +
                                ", the rate beyond is its end point's");
  }
  const int tNodes = (t.gpus + std::max(1, t.gpusPerNode) - 1) / std::max(1, t.gpusPerNode);
  const int mNodes = (m.gpus + std::max(1, m.gpusPerNode) - 1) / std::max(1, m.gpusPerNode);
  if (tNodes > 1 && mNodes == 1)
    c.extrapolation.push_back(std::to_string(tNodes) + " nodes from a one-node calibration: groups that span nodes use " +
                              (target.interNode.name.empty() ? std::string("a preset link") : target.interNode.name) +
                              ", not measured");
  if (link) {
    if (!link->wellConditioned) c.extrapolation.push_back("the link is poorly conditioned: " + link->note);
    if (link->groupSize > 0 && link->groupSize != t.gpus && t.gpus == m.gpus)
      c.extrapolation.push_back("link measured at " + std::to_string(link->groupSize) + " ranks");
  }
  return c;
}

double validationRmsError(const std::string& change, bool cpu) {
  if (cpu) {
    // The largest RMS of the relative errors per class over the five grids of
    // benchmarks/simulator_validation.sh made after the model's last change of them (val19-val23,
    // this project's 2-core CPU machine, Gloo), rounded up: strategy 3.2 %, knob 2.7 % (new knobs
    // 3.0 %), model 5.6 %; the model's raised to 8 %, as its largest over all twelve stored grids
    // was 12.6 % (val14, in a burst of load). Re-predicted, those twelve grids put 99.7 % of the strategy
    // predictions, 98-100 % of the knobs' and 99.1 % of the model's inside their intervals
    // (docs/ESTIMATOR.md, "Honesty"). Scale is refused on that machine and keeps 15 %.
    if (change == "strategy") return 0.04;
    if (change == "knob") return 0.04;
    if (change == "scale") return 0.15;
    if (change == "model") return 0.08;
    return 0.0;
  }
  // The same over four grids of benchmarks/simulator_validation_gpu.sh on one H200, two and four
  // ranks sharing it through Gloo: strategy 46.6 %, knob 16.1 %, model 65.5 % (docs/ESTIMATOR.md,
  // "On a GPU"). Scale was refused there; it takes the strategy's.
  if (change == "strategy" || change == "scale") return 0.47;
  if (change == "knob") return 0.17;
  if (change == "model") return 0.66;
  return 0.0;
}

PredictionInterval predictionInterval(const MeasuredProfile& mp, const SimulationResult& sim, const LinkCalibration* link,
                                      const PredictionCheck& check) {
  PredictionInterval p;
  const double step = sim.steady.stepS;
  const double commShare = step > 0 ? std::clamp(sim.steady.exposedCommS / step, 0.0, 1.0) : 0.0;
  const double linkErr = link ? link->relError : 0.0;
  const double cls = validationRmsError(check.change, mp.gloo);
  p.relSe = std::sqrt(mp.stepCv * mp.stepCv + (linkErr * commShare) * (linkErr * commShare) + cls * cls);
  p.lo = step * std::max(0.0, 1.0 - 2 * p.relSe);
  p.hi = step * (1.0 + 2 * p.relSe);
  p.basis = "±2 x " + formatFixed(p.relSe * 100, 1) + "%: step spread " + formatFixed(mp.stepCv * 100, 1) + "%, link fit " +
            formatFixed(linkErr * 100, 1) + "% x exposed share " + formatFixed(commShare * 100, 0) + "%, " + check.change +
            " changes " + formatFixed(cls * 100, 0) + "% (validation RMS" + (mp.gloo ? "" : ", on one GPU shared by Gloo ranks") +
            ")";
  return p;
}

Calibration calibrate(TraceStore& store, RunId runId) {
  Calibration c;
  c.profile = measuredProfile(store, runId);
  c.link = calibrateLink(store, runId, &c.profile.leftOutSteps);
  return c;
}

PredictionCheck applyCalibration(SimulateInput& si, const Calibration& c, bool keepJitter, bool allowExtrapolation) {
  applyMeasuredProfile(si, c.profile, keepJitter);
  // Host work outside the blocks follows the strategy (gathers' allocations, gradient copies and
  // accumulation, hooks): measured per strategy on CPU ranks; GPU runs keep the calibration's.
  if (c.profile.gloo && si.strategy != c.profile.strategy)
    si.compute.stepOverheadS *= cpuHostOverheadWeight(si.strategy) / cpuHostOverheadWeight(c.profile.strategy);
  // The run's own sizes stand for themselves only in groups of the size they were measured in, and
  // a Gloo link's latency grows with a ring's steps (LinkModel::measuredGroupSize, set by
  // calibrateLink).
  si.intraNode = c.link.link;
  si.commInterferenceAllReduce = c.link.commInterferenceAllReduce;
  si.commInterferenceOther = c.link.commInterferenceOther;
  si.lastLatenessAllReduce = c.link.lastLatenessAllReduce;
  si.lastLatenessOther = c.link.lastLatenessOther;
  for (int i = 0; i < 2; ++i)
    for (int w = 0; w < 2; ++w) si.lastLatenessByWait[i][w] = c.link.lastLatenessByWait[i][w];
  si.comm.emulatedReduceScatter = c.profile.gloo;
  PredictionCheck check = checkPrediction(c.profile, si, &c.link);
  if (!check.refused.empty()) {
    if (!allowExtrapolation) {
      std::string why;
      for (const auto& r : check.refused) why += (why.empty() ? "" : "; ") + r;
      throw Error("cannot predict " + strategyName(si.strategy) + " at " + std::to_string(si.model.gpus) + " ranks from run " +
                  std::to_string(c.profile.runId.value()) + ": " + why);
    }
    for (auto* v : {&si.compute.forwardS, &si.compute.backwardS})
      for (double& x : *v) x *= check.loadFactor;
    si.compute.optimizerSPerElement *= check.loadFactor;
    si.compute.optimizerSPerModelElement *= check.loadFactor;
    si.compute.stepOverheadS *= check.loadFactor;
    check.extrapolation.push_back("compute scaled by the host load, x" + formatFixed(check.loadFactor, 2) + " (" + check.sharing +
                                  ")");
  }
  return check;
}

void annotatePrediction(SimulationResult& r, const Calibration& c, const PredictionCheck& check) {
  const PredictionInterval iv = predictionInterval(c.profile, r, &c.link, check);
  PredictionNotes n;
  n.calibrationRun = c.profile.runId.value();
  n.change = check.change;
  n.extrapolation = check.extrapolation;
  n.loadFactor = check.loadFactor;
  n.lowS = iv.lo;
  n.highS = iv.hi;
  n.relSe = iv.relSe;
  n.intervalBasis = iv.basis;
  n.link = c.link.note;
  n.interference = c.profile.interference.note;
  // Where checkpointing is on either side: what it was taken to cost, and from where.
  if (r.input.model.activationCheckpointing || c.profile.input.activationCheckpointing) {
    const ComputeProfile& cp = r.input.compute;
    std::string source = cp.checkpointProbed ? "the run's checkpointing probe" : "constants: the run has no checkpointing probe";
    if (cp.recomputeMeasured)
      source = std::string("the recomputation measured in the run's steps, the forward by ") +
               (cp.checkpointProbed ? "its checkpointing probe" : "constants");
    n.checkpointing = "a checkpointed forward " + formatFixed(cp.checkpointedForwardShare, 2) + " and its recomputation " +
                      formatFixed(cp.recomputeShare, 2) + " of a plain forward (" + source + ")";
  }
  for (const auto& e : n.extrapolation) r.notes.push_back("extrapolation: " + e);
  if (!c.profile.leftOutSteps.empty()) r.notes.push_back("calibration: " + c.profile.leftOutNote);
  r.prediction = std::move(n);
}

}  // namespace shardscope::core::estimator
