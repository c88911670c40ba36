#pragma once
// What would make a strategy fit: every single change of the input that applies to it and is not
// already set, each re-estimated with the estimator (assess), and the cheapest that fits
// (docs/ESTIMATOR.md, "What would fit"): the least one must buy or give up first — a change of the
// setup on the same GPUs, then another training method, then more GPUs of the same kind, then
// another device — and within that the lowest estimated step time (a faster device would
// otherwise always win over any change on the GPUs one has). The candidates:
// activation checkpointing; a smaller micro-batch (halved down to 1, the same global batch in
// accumulation steps); optimizer offload (not DDP); parameter offload (strategies that shard
// parameters); QLoRA (from LoRA); LoRA (from full fine-tuning: another training method); more GPUs
// (the smallest count that fits, whole nodes of the same size); a larger device (the smallest
// preset of scenarios.h that fits).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/estimator/recommend.h"

namespace shardscope::core::estimator {

// The LoRA a full fine-tuning is offered (rank, alpha; all projections).
constexpr int kSuggestedLoraRank = 8;
constexpr double kSuggestedLoraAlpha = 16;
// More GPUs are searched up to this many.
constexpr int kMaxSuggestedGpus = 16384;

struct FitCandidate {
  FitChange change;
  bool fits = false;
};
// Every candidate change that applies to `s` under `in` and is not already set, re-estimated, in
// the order above (the micro-batch: the largest halving that fits, else 1; more GPUs: the smallest
// count that fits, else the largest tried; a device: the smallest larger preset that fits, else the
// largest).
std::vector<FitCandidate> fitCandidates(const RecommendInput& in, Strategy s);
// The candidate that fits in the cheapest tier, with the lowest step time there (the first of
// equals); nullopt when none fits.
std::optional<FitChange> cheapestFit(const RecommendInput& in, Strategy s);

// "activation checkpointing: peak 21.30 GiB of 21.60 GiB usable, 2.07 s/step".
std::string describeFitChange(const FitChange& c);
// When no strategy of `ranked` (recommend's result) fits: "Nothing fits in 24.00 GiB: zero3 fits
// with activation checkpointing (peak 21.30 GiB of 21.60 GiB usable, 2.07 s/step)" — the strategy
// whose cheapest change is the fastest —, or that no single change does. Empty when one fits.
std::string nothingFitsSummary(const std::vector<StrategyAssessment>& ranked, std::int64_t deviceBytes);

}  // namespace shardscope::core::estimator
