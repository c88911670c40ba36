#pragma once
// Strategy recommendation: every candidate strategy estimated (memory, communication), checked
// against the device memory with a headroom, given an expected step time from a simple overlap
// model, and ranked: strategies that fit first, then by expected step time, then by peak memory.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/estimator/calibration.h"
#include "core/estimator/comm_model.h"
#include "core/estimator/memory_estimator.h"

namespace shardscope::core::estimator {

struct RecommendInput {
  EstimateInput model;               // model, gpus, batch, precision, knobs
  std::vector<Strategy> candidates;  // empty = allStrategies() (hpZ/HSDP only when multi-node)
  std::int64_t deviceBytes = 80LL * 1024 * 1024 * 1024;
  double headroom = calib::kHeadroom;  // fraction of the device kept free
  LinkModel intraNode;                 // link inside a node
  LinkModel interNode;                 // link between nodes (used when gpus > gpusPerNode)
  CommOptions comm;
  double deviceTflops = 989;                           // dense peak of the compute dtype (H100 SXM bf16)
  double efficiency = calib::kEfficiency;              // achieved fraction of the peak (MFU)
  double hostLinkGBps = calib::kHostLinkGBps;          // device <-> host for offload (PCIe 4.0 x16 effective)
  double cpuOptimizerGBps = calib::kCpuOptimizerGBps;  // CPU Adam throughput over the optimizer state (bytes/s·1e-9)
  // Device memory bandwidth (GB/s): the simulator's memory-bound ops from FLOPs
  // (flopsComputeProfile: the optimizer step, the embedding); the estimate does not use it.
  double memBwGBps = 3350;
  // The device preset these figures are (scenarios.h, applyDevicePreset); empty: custom figures.
  std::string device;
};

// What a change asks of the user, cheapest first: the setup on the same GPUs, another training
// method, more GPUs of the same kind, another device.
enum class FitTier { Setup, Method, MoreGpus, Device };
std::string fitTierName(FitTier t);  // "setup", "method", "more_gpus", "device"

// A single change of the input that makes a strategy fit (fit_advice.h), re-estimated with the
// estimator: its step time and peak against the device.
struct FitChange {
  std::string change;  // "activation checkpointing", "micro-batch 2 with 2 accumulation steps", ...
  // activation_checkpointing | micro_batch | offload_optimizer | offload_param | qlora | lora | gpus
  // | gpu; `value` what it is set to ("on", "2", "16", "a100-80gb").
  std::string knob, value;
  FitTier tier = FitTier::Setup;
  bool changesMethod = false;  // LoRA instead of full fine-tuning: another training method
  // The step time for the original step's tokens (a smaller micro-batch: its accumulation steps
  // together), the peak per device and the memory the fit test allows (the device less the headroom).
  double stepS = 0;
  std::int64_t peakBytes = 0, usableBytes = 0, deviceBytes = 0;
};
// {change, knob, value, tier, changes_method, step_s, peak_bytes, usable_bytes, device_bytes}.
JsonValue toJson(const FitChange& c);

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
  // Where it does not fit: the cheapest single change that makes it fit (fit_advice.h), if any.
  std::optional<FitChange> toFit;
};
// {strategy, rank, the memory estimate's fields, fits, used_fraction, free_bytes, comm, compute_s,
//  exposed_comm_s, offload_s, step_s, relative_step_time, tokens_per_s_per_device, to_fit (a
//  FitChange or null), reasons, notes (the memory's, then the communication's)}: `shardscope-cli estimate --json`'s strategies.
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
// The forward FLOPs that checkpointing recomputes in backward, as a fraction of stepFlops' forward: 1
// with full checkpointing, the fully checkpointed blocks' share with Layers, the recomputed k, o and
// up projections (2·L·(h·kv + q·h + h·f) per token) with Ops, 0 without. Throws as
// checkCheckpointing.
double recomputedForwardFraction(const EstimateInput& in);

StrategyAssessment assess(const RecommendInput& in, Strategy s);
// A step time in prose: "2.07 s" from one second, else adaptive ms ("746.5 ms", "0.163 ms").
std::string formatStep(double seconds);
// Sorted best first (rank 1..n); strategies the input refuses (parameter offload with DDP, a group
// that does not divide the gpus) are left out. Each strategy that does not fit gets its toFit
// (cheapestFit, fit_advice.h).
std::vector<StrategyAssessment> recommend(const RecommendInput& in);

}  // namespace shardscope::core::estimator
