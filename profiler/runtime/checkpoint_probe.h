#pragma once
// The checkpointing probe: before the first step, a run times one transformer block of its own
// model's shape (its micro-batch, sequence, dtype, LoRA adapters; a model of one layer with local
// parameters) trained plainly and with activation checkpointing, so that a prediction that turns
// checkpointing on or off uses what it costs on this machine instead of constants fitted on another
// (docs/ESTIMATOR.md, "Checkpointing"). What it measures is what the simulator needs:
//  - the checkpointed forward's share: the block's forward without autograd's graph over the same
//    forward with it;
//  - the recomputation's share: the checkpointed backward less the plain one, over the plain
//    forward (the recomputed activations are used at once, still in cache, so it is below 1 where
//    memory costs, and near 1 where arithmetic does).
#include <cstdint>

#include <torch/torch.h>

namespace shardscope::runtime {

struct ModelConfig;

struct CheckpointProbe {
  bool measured = false;      // false: the probe model would be too large, or a timing was degenerate
  double forwardShare = 0;    // checkpointed forward / plain forward of the block
  double recomputeShare = 0;  // (checkpointed backward − plain backward) / plain forward
  double plainForwardS = 0;   // the block's plain forward (mean over the timed rounds)
  int rounds = 0;             // timed rounds (one plain and one checkpointed iteration each)
  double seconds = 0;         // wall time of the probe, warm-up included
};

// Runs the probe on `device` in `dtype` for a micro-batch of `microBatch` x `seqLen` tokens. The
// model is `cfg` cut to one layer (vocabulary capped at 512: the head is timed in neither share);
// skipped (measured false) where its parameters would pass 64M elements on a CPU, 256M on a GPU.
// One untimed plain iteration, then rounds of one plain and one checkpointed iteration: five at least, more until
// 0.5 s have passed (at most 50), and only two past 1.5 s. Each share is the median over the rounds.
CheckpointProbe runCheckpointProbe(const ModelConfig& cfg, torch::Device device, torch::ScalarType dtype, bool sdpa,
                                   std::int64_t microBatch, std::int64_t seqLen, std::uint64_t seed);

}  // namespace shardscope::runtime
