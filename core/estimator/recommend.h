#pragma once
// Strategy recommendation: every candidate strategy estimated (memory, communication), checked
// against the device memory with a headroom, given an expected step time from a simple overlap
// model, and ranked: strategies that fit first, then by expected step time, then by peak memory.
#include <cstdint>
#include <string>
#include <vector>

#include "core/estimator/comm_model.h"
#include "core/estimator/memory_estimator.h"

namespace shardscope::core::estimator {

struct RecommendInput {
  EstimateInput model;               // model, gpus, batch, precision, knobs
  std::vector<Strategy> candidates;  // empty = allStrategies() (hpZ/HSDP only when multi-node)
  std::int64_t deviceBytes = 80LL * 1024 * 1024 * 1024;
  double headroom = 0.1;  // fraction of the device kept free
  LinkModel intraNode;    // link inside a node
  LinkModel interNode;    // link between nodes (used when gpus > gpusPerNode)
  CommOptions comm;
  double deviceTflops = 989;     // dense peak of the compute dtype (H100 SXM bf16)
  double efficiency = 0.4;       // achieved fraction of the peak (MFU)
  double hostLinkGBps = 25;      // device <-> host for offload (PCIe 4.0 x16 effective)
  double cpuOptimizerGBps = 10;  // CPU Adam throughput over the optimizer state (bytes/s·1e-9)
};

struct StrategyAssessment {
  Strategy strategy = Strategy::Ddp;
  MemoryEstimate memory;
  FitResult fit;
  CommEstimate comm;
  double computeS = 0;      // forward + backward (+ recompute) from FLOPs
  double exposedCommS = 0;  // communication not hidden behind compute
  double offloadS = 0;      // host transfers and the CPU optimizer step
  double stepS = 0;         // computeS + exposedCommS + offloadS
  double tokensPerSPerDevice = 0;
  double relativeStepTime = 0;  // stepS / the fastest fitting candidate's (the fastest one's when none fits)
  int rank = 0;                 // 1 = recommended
  std::vector<std::string> reasons;
};
// {strategy, rank, the memory estimate's fields, fits, used_fraction, free_bytes, comm, compute_s,
//  exposed_comm_s, offload_s, step_s, relative_step_time, tokens_per_s_per_device, reasons, notes
//  (the memory's, then the communication's)}: `shardscope-cli estimate --json`'s strategies.
JsonValue toJson(const StrategyAssessment& s);

// FLOPs of one training step per token: 6·Ψ_non-embedding + 6·L·heads·2·head_dim·s (the runtime's
// trainFlopsPerToken; strategies.md §5).
double trainFlopsPerToken(const ModelShape& m, std::int64_t seq);
// Forward and backward FLOPs of one micro-batch on one device. Full fine-tuning: a third and two
// thirds of trainFlopsPerToken x tokens. LoRA: per token forward 2·Ψ_ne + 2·A + 4·L·heads·d·s,
// backward 2·Ψ_ne (frozen weights: input gradients only) + 4·A + 8·L·heads·d·s, with A the adapter
// elements (docs/ESTIMATOR.md, "Fine-tuning: LoRA and QLoRA").
struct StepFlops {
  double forward = 0, backward = 0;
};
StepFlops stepFlops(const EstimateInput& in);

StrategyAssessment assess(const RecommendInput& in, Strategy s);
// Sorted best first (rank 1..n); strategies the input refuses (parameter offload with DDP, a group
// that does not divide the gpus) are left out.
std::vector<StrategyAssessment> recommend(const RecommendInput& in);

}  // namespace shardscope::core::estimator
