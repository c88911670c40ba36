#include "core/estimator/recommend.h"

#include "core/estimator/fit_advice.h"
#include "core/util/units.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace shardscope::core::estimator {
double trainFlopsPerToken(const ModelShape& m, std::int64_t seq) {
  const std::int64_t d = m.headDim > 0 ? m.headDim : m.hidden / std::max(1, m.heads);
  const double nonEmbed = static_cast<double>(parameterCount(m) - m.vocab * m.hidden);
  return 6.0 * nonEmbed + 6.0 * m.layers * m.heads * (2.0 * static_cast<double>(d)) * static_cast<double>(seq);
}

StepFlops stepFlops(const EstimateInput& in) {
  const double tokens = static_cast<double>(in.microBatch * in.seqLen);
  StepFlops f;
  if (in.loraRank <= 0) {
    const double flops = trainFlopsPerToken(in.model, in.seqLen) * tokens;
    f.forward = flops / 3.0;
    f.backward = 2.0 * flops / 3.0;
    return f;
  }
  const ModelShape& m = in.model;
  const std::int64_t d = m.headDim > 0 ? m.headDim : m.hidden / std::max(1, m.heads);
  const double nonEmbed = static_cast<double>(parameterCount(m) - m.vocab * m.hidden);
  const double adapters = static_cast<double>(trainableParameterCount(in));
  const double attention = 2.0 * m.layers * m.heads * (2.0 * static_cast<double>(d)) * static_cast<double>(in.seqLen);
  f.forward = (2.0 * nonEmbed + 2.0 * adapters + attention) * tokens;
  f.backward = (2.0 * nonEmbed + 4.0 * adapters + 2.0 * attention) * tokens;
  return f;
}

double recomputedForwardFraction(const EstimateInput& in) {
  checkCheckpointing(in);
  if (in.activationCheckpointing) return 1.0;
  const ModelShape& m = in.model;
  const double L = m.layers;
  if (in.selective == EstimateInput::Selective::Layers) return std::ceil(L / in.sacEvery) / L;
  if (in.selective == EstimateInput::Selective::Ops) {
    // The k, o and up projections' matmuls (forward order q, k, v, o, gate, up, down: every other
    // one is recomputed), against the forward's FLOPs as the step time counts them.
    const double h = static_cast<double>(m.hidden), f = static_cast<double>(m.ffn);
    const double d = static_cast<double>(m.headDim > 0 ? m.headDim : m.hidden / std::max(1, m.heads));
    const double recomputedPerToken = 2.0 * L * (h * m.kvHeads * d + m.heads * d * h + h * f);
    return recomputedPerToken * static_cast<double>(in.microBatch * in.seqLen) / stepFlops(in).forward;
  }
  return 0.0;
}

StrategyAssessment assess(const RecommendInput& in, Strategy s) {
  StrategyAssessment a;
  a.strategy = s;
  a.memory = estimateMemory(in.model, s);
  a.fit = checkFit(a.memory.peakBytes, in.deviceBytes, in.headroom);
  a.comm = commVolume(in.model, s, in.comm);
  commTime(a.comm, in.intraNode, in.interNode);

  // Compute: forward one third, backward two thirds; checkpointing adds the forward it recomputes.
  const double tokens = static_cast<double>(in.model.microBatch * in.model.seqLen);
  const StepFlops flops = stepFlops(in.model);
  const double rate = in.deviceTflops * 1e12 * in.efficiency;
  if (!(rate > 0)) throw std::invalid_argument("device TFLOPS and efficiency must be positive");
  const double fwd = flops.forward / rate, bwd = flops.backward / rate;
  const double recompute = fwd * recomputedForwardFraction(in.model);  // full, selective or none
  a.computeS = fwd + bwd + recompute;

  // Exposure: collectives of a phase overlap that phase's compute (the comm stream runs beside it);
  // the first all-gather of the forward and the last reduction of the backward cannot, and what runs
  // outside compute (ZeRO-1's reduction, the post-step all-gather) is exposed whole.
  double fwdComm = 0, bwdComm = 0, outside = 0, firstFwd = 0, lastBwd = 0;
  for (const auto& c : a.comm.collectives) {
    const double one = c.count > 0 ? c.timeS / static_cast<double>(c.count) : 0.0;
    switch (c.phase) {
      case CommPhase::Forward:
        fwdComm += c.timeS;
        firstFwd = std::max(firstFwd, one);
        break;
      case CommPhase::Backward:
        bwdComm += c.timeS;
        lastBwd = std::max(lastBwd, one);
        break;
      case CommPhase::AfterStep:
        outside += c.timeS;
        break;
    }
  }
  const double fwdExposed = fwdComm > 0 ? std::max(firstFwd, fwdComm - fwd) : 0.0;
  const double bwdExposed = bwdComm > 0 ? std::max(lastBwd, bwdComm - (bwd + recompute)) : 0.0;
  a.exposedCommS = fwdExposed + bwdExposed + outside;

  // Offload: gradients down and parameters up over the host link, the optimizer step on the CPU.
  const std::int64_t P = trainableParameterCount(in.model);  // what the optimizer updates
  const double perRank = static_cast<double>(P) / in.model.gpus;
  const double w = in.model.precision == Precision::Fp32 ? 4.0 : 2.0;
  if (in.model.offloadOptimizer || in.model.offloadParam) {
    const double shard = shardsParameters(s) ? perRank : static_cast<double>(P);
    a.offloadS = 2.0 * w * shard / (in.hostLinkGBps * 1e9) + 16.0 * perRank / (in.cpuOptimizerGBps * 1e9);
  }
  a.stepS = a.computeS + a.exposedCommS + a.offloadS;
  a.tokensPerSPerDevice = a.stepS > 0 ? tokens / a.stepS : 0.0;
  return a;
}

std::string formatStep(double seconds) { return seconds >= 1.0 ? formatFixed(seconds, 2) + " s" : formatMs(seconds * 1e3); }

namespace {

// Why LoRA / QLoRA fits or not with this strategy: where the frozen base lives and what the
// adapters cost.
std::string fineTuningReason(const EstimateInput& in, const StrategyAssessment& a) {
  const std::int64_t T = trainableParameterCount(in), P = parameterCount(in.model);
  const std::int64_t base = frozenBaseBytes(in);
  const auto& st = a.memory.state;
  char share[32];
  std::snprintf(share, sizeof share, "%.2f%%", 100.0 * static_cast<double>(T) / static_cast<double>(P));
  std::string r = (in.qlora ? "QLoRA r=" : "LoRA r=") + std::to_string(in.loraRank) + ": " + formatCount(T) +
                  " trainable parameters (" + share + " of " + formatCount(P) + "; adapters, grads and Adam " +
                  formatBytes(static_cast<double>(st.parameters + st.gradients + st.optimizer)) + " per GPU); the " +
                  formatBytes(static_cast<double>(base)) + (in.qlora ? " NF4/16-bit" : "") + " frozen base ";
  if (!shardsParameters(a.strategy))
    r += "is replicated on every GPU";
  else
    r += "is sharded: " + formatBytes(static_cast<double>(st.frozen)) + " per GPU, gathered per unit";
  if (!a.fit.fits && base > a.fit.usableBytes) r += ", and alone exceeds the usable memory";
  return r;
}

}  // namespace

std::vector<StrategyAssessment> recommend(const RecommendInput& in) {
  std::vector<Strategy> cands = in.candidates;
  const bool multiNode = in.model.gpus > in.model.gpusPerNode;
  if (cands.empty())
    for (Strategy s : allStrategies())
      if ((s != Strategy::Hsdp && s != Strategy::ZeroPPHpz) || multiNode) cands.push_back(s);
  std::vector<StrategyAssessment> out;
  for (Strategy s : cands) {
    if (in.model.offloadParam && !shardsParameters(s)) continue;
    if (in.model.offloadOptimizer && s == Strategy::Ddp) continue;
    try {
      out.push_back(assess(in, s));
    } catch (const std::invalid_argument&) {
      if (!in.candidates.empty()) throw;  // asked for explicitly: say why
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const StrategyAssessment& x, const StrategyAssessment& y) {
    if (x.fit.fits != y.fit.fits) return x.fit.fits;
    if (x.stepS != y.stepS) return x.stepS < y.stepS;
    return x.memory.peakBytes < y.memory.peakBytes;
  });
  double best = 0;
  for (const auto& a : out)
    if (a.fit.fits) {
      best = a.stepS;
      break;
    }
  const bool anyFits = best > 0;
  if (best <= 0 && !out.empty()) best = out.front().stepS;
  int r = 0;
  for (auto& a : out) {
    a.rank = ++r;
    a.relativeStepTime = best > 0 ? a.stepS / best : 0.0;
    if (in.model.loraRank > 0) a.reasons.push_back(fineTuningReason(in.model, a));
    if (a.fit.fits)
      a.reasons.push_back("fits: peak " + formatBytes(static_cast<double>(a.memory.peakBytes)) + " = " +
                          formatPercent(100.0 * (a.fit.usedFraction), 0) + " of the device, " +
                          formatBytes(static_cast<double>(a.fit.freeBytes)) + " left after the headroom");
    else
      a.reasons.push_back("does not fit: peak " + formatBytes(static_cast<double>(a.memory.peakBytes)) + " > " +
                          formatBytes(static_cast<double>(a.fit.usableBytes)) + " usable (" +
                          formatBytes(static_cast<double>(-a.fit.freeBytes)) + " short)");
    a.reasons.push_back("communication " + formatBytes(a.comm.wireBytes) + " on the wire per step, " +
                        formatFixed(1e3 * (a.comm.timeS), 1) + " ms" + " (" + formatFixed(1e3 * (a.exposedCommS), 1) + " ms" +
                        " exposed)");
    if (a.offloadS > 0)
      a.reasons.push_back("offload: " + formatFixed(1e3 * (a.offloadS), 1) + " ms" + " of host transfers and CPU optimizer");
    char buf[96];
    std::snprintf(buf, sizeof buf, "expected step %.1f ms (%.2fx the fastest %s), %.0f tokens/s per device", a.stepS * 1e3,
                  a.relativeStepTime, anyFits ? "fitting strategy" : "strategy (none fits)", a.tokensPerSPerDevice);
    a.reasons.push_back(buf);
    if (!a.fit.fits) a.toFit = cheapestFit(in, a.strategy);
  }
  return out;
}

std::string fitTierName(FitTier t) {
  switch (t) {
    case FitTier::Setup:
      return "setup";
    case FitTier::Method:
      return "method";
    case FitTier::MoreGpus:
      return "more_gpus";
    case FitTier::Device:
      return "device";
  }
  return "setup";
}

JsonValue toJson(const FitChange& c) {
  JsonValue o = JsonValue::object();
  o.set("change", JsonValue::string(c.change));
  o.set("knob", JsonValue::string(c.knob));
  o.set("value", JsonValue::string(c.value));
  o.set("tier", JsonValue::string(fitTierName(c.tier)));
  o.set("changes_method", JsonValue::boolean(c.changesMethod));
  o.set("step_s", JsonValue::number(c.stepS));
  o.set("peak_bytes", JsonValue::number(c.peakBytes));
  o.set("usable_bytes", JsonValue::number(c.usableBytes));
  o.set("device_bytes", JsonValue::number(c.deviceBytes));
  return o;
}

JsonValue toJson(const StrategyAssessment& s) {
  JsonValue o = JsonValue::object();
  o.set("strategy", JsonValue::string(strategyName(s.strategy)));
  o.set("rank", JsonValue::number(std::int64_t{s.rank}));
  const JsonValue memory = toJson(s.memory);
  for (const auto& [k, v] : memory.members()) o.set(k, v);
  o.set("fits", JsonValue::boolean(s.fit.fits));
  o.set("used_fraction", JsonValue::number(s.fit.usedFraction));
  o.set("free_bytes", JsonValue::number(s.fit.freeBytes));
  o.set("comm", toJson(s.comm));
  o.set("compute_s", JsonValue::number(s.computeS));
  o.set("exposed_comm_s", JsonValue::number(s.exposedCommS));
  o.set("offload_s", JsonValue::number(s.offloadS));
  o.set("step_s", JsonValue::number(s.stepS));
  o.set("relative_step_time", JsonValue::number(s.relativeStepTime));
  o.set("tokens_per_s_per_device", JsonValue::number(s.tokensPerSPerDevice));
  o.set("to_fit", s.toFit ? toJson(*s.toFit) : JsonValue());
  JsonValue reasons = JsonValue::array();
  for (const auto& r : s.reasons) reasons.push(JsonValue::string(r));
  o.set("reasons", std::move(reasons));
  JsonValue notes = JsonValue::array();
  for (const auto& n : s.memory.notes) notes.push(JsonValue::string(n));
  for (const auto& n : s.comm.notes) notes.push(JsonValue::string(n));
  o.set("notes", std::move(notes));
  return o;
}

}  // namespace shardscope::core::estimator
