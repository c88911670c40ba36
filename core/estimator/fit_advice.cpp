#include "core/estimator/fit_advice.h"

#include <algorithm>
#include <stdexcept>

#include "core/estimator/scenarios.h"
#include "core/util/units.h"

namespace shardscope::core::estimator {

namespace {

// The strategy under a changed input, or nullopt where the input refuses it (as recommend does).
std::optional<StrategyAssessment> tryAssess(const RecommendInput& x, Strategy s) {
  if (x.model.offloadParam && !shardsParameters(s)) return std::nullopt;
  if (x.model.offloadOptimizer && s == Strategy::Ddp) return std::nullopt;
  try {
    return assess(x, s);
  } catch (const std::invalid_argument&) {
    return std::nullopt;
  }
}

FitCandidate candidate(const StrategyAssessment& a, FitTier tier, std::string change, std::string knob, std::string value,
                       double stepScale = 1.0) {
  FitCandidate c;
  c.change.tier = tier;
  c.fits = a.fit.fits;
  c.change.change = std::move(change);
  c.change.knob = std::move(knob);
  c.change.value = std::move(value);
  c.change.stepS = a.stepS * stepScale;
  c.change.peakBytes = a.memory.peakBytes;
  c.change.usableBytes = a.fit.usableBytes;
  c.change.deviceBytes = a.fit.deviceBytes;
  return c;
}

// The cheaper tier, then the faster step.
bool cheaper(const FitChange& x, const FitChange& y) {
  if (x.tier != y.tier) return x.tier < y.tier;
  return x.stepS < y.stepS;
}

}  // namespace

std::vector<FitCandidate> fitCandidates(const RecommendInput& in, Strategy s) {
  std::vector<FitCandidate> out;
  const EstimateInput& m = in.model;
  auto add = [&](const RecommendInput& x, FitTier tier, std::string change, std::string knob, std::string value) {
    if (auto a = tryAssess(x, s)) out.push_back(candidate(*a, tier, std::move(change), std::move(knob), std::move(value)));
  };
  if (!m.activationCheckpointing) {
    RecommendInput x = in;
    x.model.activationCheckpointing = true;
    add(x, FitTier::Setup, "activation checkpointing", "activation_checkpointing", "on");
  }
  if (m.microBatch > 1) {
    // Halved down to 1: the largest that fits, the global batch kept by accumulation steps.
    std::optional<FitCandidate> last;
    for (std::int64_t mb = m.microBatch / 2; mb >= 1; mb /= 2) {
      RecommendInput x = in;
      x.model.microBatch = mb;
      const std::int64_t steps = (m.microBatch + mb - 1) / mb;
      auto a = tryAssess(x, s);
      if (!a) continue;
      last = candidate(*a, FitTier::Setup,
                       "micro-batch " + std::to_string(mb) + " with " + std::to_string(steps) + " accumulation steps",
                       "micro_batch", std::to_string(mb), static_cast<double>(steps));
      if (last->fits) break;
    }
    if (last) out.push_back(*last);
  }
  if (!m.offloadOptimizer && s != Strategy::Ddp) {
    RecommendInput x = in;
    x.model.offloadOptimizer = true;
    add(x, FitTier::Setup, "optimizer offload to the CPU", "offload_optimizer", "on");
  }
  if (!m.offloadParam && shardsParameters(s)) {
    RecommendInput x = in;
    x.model.offloadParam = true;
    add(x, FitTier::Setup, "parameter offload to the CPU", "offload_param", "on");
  }
  if (m.loraRank > 0 && !m.qlora) {
    RecommendInput x = in;
    x.model.qlora = true;
    if (x.model.precision != Precision::Bf16) {
      x.model.precision = Precision::Bf16;
      if (auto d = devicePreset(in.device)) x.deviceTflops = presetTflops(*d, Precision::Bf16);
    }
    add(x, FitTier::Setup, m.precision == Precision::Bf16 ? "QLoRA (NF4 base)" : "QLoRA (NF4 base, bf16 compute)", "qlora", "on");
  }
  if (m.loraRank == 0) {
    RecommendInput x = in;
    x.model.loraRank = kSuggestedLoraRank;
    x.model.loraAlpha = kSuggestedLoraAlpha;
    x.model.loraTargets = EstimateInput{}.loraTargets;
    const std::size_t before = out.size();
    add(x, FitTier::Method,
        "LoRA r=" + std::to_string(kSuggestedLoraRank) + " instead of full fine-tuning (another training method)", "lora",
        std::to_string(kSuggestedLoraRank));
    if (out.size() > before) out.back().change.changesMethod = true;  // FitTier::Method
  }
  {
    // More GPUs: whole nodes of the same size, the smallest count that fits (the peak falls with
    // the count: an exponential search, then a binary one).
    const int gpn = std::max(1, std::min(m.gpus, m.gpusPerNode));
    auto at = [&](int nodes) {
      RecommendInput x = in;
      x.model.gpus = nodes * gpn;
      x.model.gpusPerNode = gpn;
      return tryAssess(x, s);
    };
    const int first = (m.gpus + gpn - 1) / gpn + 1;
    int lo = first - 1, hi = first;  // lo nodes: known not to fit (the input itself)
    std::optional<StrategyAssessment> fit, tried;
    int triedNodes = 0;
    for (; hi * gpn <= kMaxSuggestedGpus; hi *= 2) {
      auto a = at(hi);
      if (a) {
        tried = a;
        triedNodes = hi;
      }
      if (a && a->fit.fits) {
        fit = a;
        break;
      }
      lo = hi;
    }
    if (fit) {
      while (hi - lo > 1) {
        const int mid = lo + (hi - lo) / 2;
        auto a = at(mid);
        if (a && a->fit.fits) {
          hi = mid;
          fit = a;
        } else {
          lo = mid;
        }
      }
      tried = fit;
      triedNodes = hi;
    }
    if (tried) {
      const int gpus = triedNodes * gpn;
      out.push_back(
          candidate(*tried, FitTier::MoreGpus,
                    std::to_string(gpus) + " GPUs" +
                        (triedNodes > 1 ? " (" + std::to_string(triedNodes) + " nodes of " + std::to_string(gpn) + ")" : ""),
                    "gpus", std::to_string(gpus)));
    }
  }
  {
    // A larger device: the presets with more memory, smallest first (the table's order among equals).
    std::vector<DevicePreset> larger;
    for (const auto& n : devicePresetNames())
      if (auto d = devicePreset(n); d && d->memoryBytes > in.deviceBytes) larger.push_back(*d);
    std::stable_sort(larger.begin(), larger.end(),
                     [](const DevicePreset& x, const DevicePreset& y) { return x.memoryBytes < y.memoryBytes; });
    std::optional<FitCandidate> last;
    for (const auto& d : larger) {
      RecommendInput x = in;
      applyDevicePreset(d, x);
      auto a = tryAssess(x, s);
      if (!a) continue;
      last = candidate(*a, FitTier::Device, d.name + " (" + formatBytes(static_cast<double>(d.memoryBytes)) + ")", "gpu", d.name);
      if (last->fits) break;
    }
    if (last) out.push_back(*last);
  }
  return out;
}

std::optional<FitChange> cheapestFit(const RecommendInput& in, Strategy s) {
  const FitCandidate* best = nullptr;
  const auto all = fitCandidates(in, s);
  for (const auto& c : all)
    if (c.fits && (!best || cheaper(c.change, best->change))) best = &c;
  if (!best) return std::nullopt;
  return best->change;
}

std::string describeFitChange(const FitChange& c) {
  return c.change + ": peak " + formatBytes(static_cast<double>(c.peakBytes)) + " of " +
         formatBytes(static_cast<double>(c.usableBytes)) + " usable, " + formatStep(c.stepS) + "/step";
}

std::string nothingFitsSummary(const std::vector<StrategyAssessment>& ranked, std::int64_t deviceBytes) {
  const StrategyAssessment* best = nullptr;
  for (const auto& a : ranked) {
    if (a.fit.fits) return {};
    if (!a.toFit) continue;
    if (!best || cheaper(*a.toFit, *best->toFit)) best = &a;
  }
  const std::string head = "Nothing fits in " + formatBytes(static_cast<double>(deviceBytes));
  if (!best)
    return head + ", and no single change (checkpointing, a smaller micro-batch, offload, QLoRA or LoRA, more GPUs up to " +
           std::to_string(kMaxSuggestedGpus) + ", a larger device) makes a strategy fit";
  const FitChange& c = *best->toFit;
  return head + ": " + strategyName(best->strategy) + " fits with " + c.change + " (peak " +
         formatBytes(static_cast<double>(c.peakBytes)) + " of " + formatBytes(static_cast<double>(c.usableBytes)) + " usable, " +
         formatStep(c.stepS) + "/step)";
}

}  // namespace shardscope::core::estimator
