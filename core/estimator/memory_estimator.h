#pragma once
// Pre-run memory estimator: per-device bytes of parameters, gradients, optimizer state, activations
// and communication buffers / gathered units for every sharding strategy, before anything runs.
//
// Formulas: ../shared/docs/strategies.md §2 (ZeRO paper, DeepSpeed's estimators, FSDP, activations)
// and docs/RUNTIME.md (what our runtime really allocates); docs/ESTIMATOR.md lists them with the
// assumptions and the measured accuracy. Pure arithmetic: no Qt, no LibTorch.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/model/run_knobs.h"
#include "core/model/strategy.h"
#include "core/util/json.h"

namespace shardscope::core::estimator {

// A Llama-style decoder (the runtime's model, profiler/runtime/model.cpp): embedding, L blocks of
// RMSNorm, q/k/v/o projections (GQA, optional q/k/v biases, optional per-head q/k RMSNorm), RMSNorm,
// SwiGLU MLP, then a final RMSNorm and the LM head (tied to the embedding or not).
struct ModelShape {
  std::string name = "custom";
  std::int64_t vocab = 0;
  std::int64_t hidden = 0;
  int layers = 0;
  int heads = 0;
  int kvHeads = 0;
  std::int64_t headDim = 0;  // 0 = hidden / heads
  std::int64_t ffn = 0;
  bool qkNorm = false;   // Qwen3
  bool qkvBias = false;  // Qwen2.5
  bool tiedEmbeddings = false;
};

// llama3-8b, llama3-70b, qwen3-8b, qwen2.5-7b (published configs) and the runtime's tiny, odd,
// small, medium. layers > 0 replaces the depth (as the runtime's --layers).
std::optional<ModelShape> modelShapePreset(std::string_view name, int layers = 0);
const std::vector<std::string>& modelShapePresetNames();
// Throws std::invalid_argument naming the first bad field (non-positive sizes, heads not a
// multiple of kv heads, ...).
void validateShape(const ModelShape& m);

// A module that owns parameters directly (DeepSpeed's fetch unit), in forward order, with the
// element count of each of its parameters. `block`: 0 embedding, 1..L layers, L+1 norm + head.
struct ModuleShape {
  std::string name;
  int block = 0;
  std::vector<std::int64_t> params;
  // A linear projection: its LoRA target name (q, k, v, o, gate, up, down) and its weight's shape
  // [out x in] (params[0]); empty / 0 for embeddings, norms and the head.
  std::string proj;
  std::int64_t in = 0, out = 0;
  // Fine-tuning (moduleShapes(EstimateInput)): `frozen` when the module's params are the frozen base
  // (LoRA), `adapters` its trainable LoRA tensors A [r x in] and B [out x r] (element counts),
  // `quantised` when its weight (params[0]) is stored in NF4 (QLoRA; biases stay 16-bit).
  bool frozen = false;
  bool quantised = false;
  std::vector<std::int64_t> adapters;
  std::int64_t numel() const;
};
std::vector<ModuleShape> moduleShapes(const ModelShape& m);

std::int64_t parameterCount(const ModelShape& m);           // Ψ, a tied weight counted once
std::int64_t blockParameterCount(const ModelShape& m);      // one transformer block
std::int64_t parameterTensorCount(const ModelShape& m);     // parameter tensors (weights, biases, norms)
std::int64_t largestModuleParameters(const ModelShape& m);  // LL: direct parameters of one module
// FSDP units (auto-wrap at the block): embedding, each block, final norm + head. Element counts.
std::vector<std::int64_t> fsdpUnitSizes(const ModelShape& m);

// The strategies are core's (core/model/strategy.h): one enum, one set of names.
using core::allStrategies;
using core::shardsParameters;
using core::Strategy;
using core::strategyFromString;
using core::strategyName;

// The run config's precision (core/model/run_knobs.h). Here bf16 = bf16/fp16 compute with fp32
// master weights and Adam.
using core::Precision;
// Eager: our runtime's attention (the a·s² score tensor is materialised, logits in fp32).
// Flash: fused attention (no score tensor), the saved-tensor count of strategies.md §2.6.
enum class AttentionKind { Eager, Flash };

struct EstimateInput {
  ModelShape model;
  int gpus = 1;            // data-parallel world size W
  int gpusPerNode = 8;     // ranks per node (hierarchical groups, DeepSpeed's gpn)
  int shardGroupSize = 0;  // HSDP shard group / hpZ secondary group; 0 = gpusPerNode (capped at gpus)
  Precision precision = Precision::Bf16;
  std::optional<AttentionKind> attention;  // unset: Eager for tiny/odd/small/medium, Flash otherwise
  std::int64_t microBatch = 1;
  std::int64_t seqLen = 2048;
  bool activationCheckpointing = false;
  // Selective activation checkpointing (torchtitan's two policies; not with full checkpointing):
  //  Ops: each block keeps its input, the fused attention's output (and its log-sum-exp) and every
  //       other matmul's output in forward order (q, v, gate, down), recomputing the rest (the k, o
  //       and up projections and the element-wise ops) in its backward;
  //  Layers: every sacEvery-th block is fully checkpointed (blocks 0, N, 2N, ...), the others keep
  //       everything.
  enum class Selective { None, Ops, Layers };
  Selective selective = Selective::None;
  int sacEvery = 2;
  bool offloadOptimizer = false;  // ZeRO / FSDP: optimizer state (and the fp32 master) on the CPU
  bool offloadParam = false;      // parameter-sharding strategies: parameter shards (and grads) on the CPU
  // Strategy knobs (docs/RUNTIME.md defaults; DeepSpeed sizes are element counts)
  bool gradientAsBucketView = false;
  double bucketCapMb = 25.0;
  std::int64_t reduceBucketSize = 500000000;
  std::int64_t allgatherBucketSize = 500000000;
  std::optional<bool> overlapComm;  // unset: true for ZeRO-3 (and hpZ), false otherwise
  std::int64_t prefetchBucketSize = 50000000;
  std::int64_t paramPersistenceThreshold = 100000;
  std::int64_t maxLiveParameters = 1000000000;
  std::int64_t maxReuseDistance = 1000000000;
  // Fine-tuning (docs/ESTIMATOR.md "Fine-tuning: LoRA and QLoRA"; the run config's lora_* keys).
  // loraRank > 0: every base parameter is frozen (stored in the compute dtype, no gradient, no
  // optimizer state) and each target projection [out x in] gets trainable adapters A [r x in] and
  // B [out x r], fp32 masters like any trainable parameter. qlora (needs loraRank > 0 and bf16):
  // the frozen projection weights, targets or not, in NF4 with double-quantised block scales.
  int loraRank = 0;
  double loraAlpha = 16;
  std::string loraTargets = "q,k,v,o,gate,up,down";
  bool qlora = false;
};

// full | lora | qlora.
enum class FineTuning { Full, Lora, Qlora };
FineTuning fineTuning(const EstimateInput& in);
std::string fineTuningName(FineTuning f);  // "full", "lora", "qlora"
// The modules of the input's model with the fine-tuning applied (frozen, adapters, quantised);
// moduleShapes(in.model) for full fine-tuning. Throws std::invalid_argument for bad LoRA settings
// (an unknown target, QLoRA without LoRA or in fp32).
std::vector<ModuleShape> moduleShapes(const EstimateInput& in);
// Trainable parameter elements: Ψ for full fine-tuning; Σ over layers and targets r·(in + out) with LoRA.
std::int64_t trainableParameterCount(const EstimateInput& in);
// Frozen base elements: 0 for full fine-tuning, Ψ with LoRA.
std::int64_t frozenParameterCount(const EstimateInput& in);
// Bytes of one tensor of n elements in NF4 with QLoRA's double quantisation (blocksize 64, the
// absmax of each block quantised to 8 bits in blocks of 256 with an fp32 scale each):
// ceil(n/2) + ceil(n/64) + 4·ceil(ceil(n/64)/256), about 0.5159 bytes per element.
std::int64_t nf4Bytes(std::int64_t n);
// 0.5 + 1/64 + 4/(64·256): the asymptotic bytes per NF4 parameter.
constexpr double kNf4BytesPerParam = 0.5 + 1.0 / 64.0 + 4.0 / (64.0 * 256.0);
// Bytes the frozen base of a module takes whole: NF4 weight (QLoRA) plus 16-bit biases, or every
// param in the compute dtype. 0 for a module that is not frozen.
std::int64_t frozenBytes(const ModuleShape& mod, std::int64_t computeBytes);
// The whole frozen base, unsharded (what DDP and ZeRO-1/2 replicate on every device).
std::int64_t frozenBaseBytes(const EstimateInput& in);

AttentionKind effectiveAttention(const EstimateInput& in);
// G for HSDP and hpZ: shardGroupSize when set; otherwise the GPUs of a node (capped at gpus), except
// HSDP on a single node of 4 or more (even) devices, which uses gpus/2 (two replicas, as the runtime).
int effectiveShardGroup(const EstimateInput& in, Strategy s);
int nodeCount(const EstimateInput& in);  // ceil(gpus / gpusPerNode)
// The ranks an FSDP flat parameter is sharded over: every GPU, or HSDP's shard group (which must
// divide the GPUs; std::invalid_argument otherwise).
int fsdpShardCount(const EstimateInput& in, Strategy s);

// Bytes on one device. `parameters` = the trainable parameters' own copy (the adapters under
// LoRA), `frozen` = the frozen base weights this device holds (0 for full fine-tuning; whole under
// DDP and ZeRO-1/2, a shard under ZeRO-3/FSDP), `gradients` and `optimizer` those of the trainable
// parameters; `buffers` = communication buffers (DDP param.grad copies are gradients, not buffers;
// QLoRA's transient dequantised projection is a buffer); `gathered` = unsharded parameters
// materialised at the peak (ZeRO-3/FSDP units, frozen base included).
struct MemoryBreakdown {
  std::int64_t parameters = 0;
  std::int64_t frozen = 0;
  std::int64_t gradients = 0;
  std::int64_t optimizer = 0;
  std::int64_t buffers = 0;
  std::int64_t gathered = 0;
  std::int64_t activations = 0;
  std::int64_t modelStates() const { return parameters + frozen + gradients + optimizer + buffers; }
};
// {parameters, frozen_base, gradients, optimizer, buffers, gathered, activations, model_states} in bytes.
JsonValue toJson(const MemoryBreakdown& b);

struct MemoryEstimate {
  Strategy strategy = Strategy::Ddp;
  // What the engine owns for the whole run (the runtime's model_state.* metrics).
  MemoryBreakdown state;
  // The estimated peak, the highest of three moments (four with checkpointing): the start of
  // backward (model states without DDP's param.grad copies, gathered units, transient gradient
  // buffers, activations), with checkpointing a block's recomputed backward (the gradient copies
  // made so far, a unit's weight gradients, ActivationMoments::blockBackward), the end of
  // backward (every gradient copy, no activations) and, for ZeRO-1/2, the all-gather after the step
  // (its output and input buffers). Sum of its fields = peakBytes.
  MemoryBreakdown atPeak;
  std::int64_t peakBytes = 0;
  std::int64_t cpuBytes = 0;  // host memory for offloaded state
  std::vector<std::string> notes;
};
// {model_state, at_peak, peak_bytes, cpu_bytes}; the strategy and the notes are left to the holder
// (an assessment lists the memory's notes with the communication's).
JsonValue toJson(const MemoryEstimate& m);

// Throws std::invalid_argument for an impossible input (gpus < 1, a group that does not divide
// gpus, offload of parameters with a strategy that replicates them, ...).
MemoryEstimate estimateMemory(const EstimateInput& in, Strategy s);

// Activations alive on one device at the two moments that can peak (docs/ESTIMATOR.md):
//  * headBackward: the start of backward (the head's: logits, their log-softmax and its gradient):
//    every block's saved tensors, or with checkpointing each block's input;
//  * blockBackward (checkpointing only, else 0): a block recomputed for its backward: the inputs
//    kept, that block's saved tensors and the gradients flowing through it (two hidden-sized
//    rows and, with eager attention, the attention probabilities' gradient); the head's
//    activations are gone by then.
struct ActivationMoments {
  std::int64_t headBackward = 0;
  std::int64_t blockBackward = 0;
};
ActivationMoments activationMoments(const EstimateInput& in);
// Throws std::invalid_argument for selective with full checkpointing, Ops with eager attention, or
// sacEvery < 1 (activationMoments and recomputedForwardFraction call it).
void checkCheckpointing(const EstimateInput& in);
// "op" / "layer:N" / "" (what --selective-checkpointing takes).
std::string selectiveName(const EstimateInput& in);
// The larger of the two.
std::int64_t activationBytes(const EstimateInput& in);

// ---------------------------------------------------------------------------------------------
// DeepSpeed's estimators, reproduced exactly (strategies.md §2.2; deepspeed/runtime/zero/
// stage_1_and_2.py and stage3.py). Results are DeepSpeed's int() truncations.
struct DeepSpeedEstimate {
  std::int64_t gpuBytes = 0;
  std::int64_t cpuBytes = 0;
  std::int64_t largestLayerBytes = 0;  // ZeRO-3 only: 4·LL
};
// {gpu_bytes, cpu_bytes, largest_layer_bytes (ZeRO-3's only)}.
JsonValue toJson(const DeepSpeedEstimate& d);
DeepSpeedEstimate deepspeedZero2(std::int64_t totalParams, int gpusPerNode, int nodes, bool cpuOffload,
                                 double additionalBufferFactor = 1.5);
DeepSpeedEstimate deepspeedZero3(std::int64_t totalParams, std::int64_t largestLayerParams, int gpusPerNode, int nodes,
                                 bool cpuOffload, bool cpuOffloadParams, bool zeroInit = true,
                                 double additionalBufferFactor = 1.5);

// ---------------------------------------------------------------------------------------------
struct FitResult {
  bool fits = false;
  std::int64_t deviceBytes = 0;
  std::int64_t usableBytes = 0;  // deviceBytes·(1 − headroom)
  std::int64_t freeBytes = 0;    // usable − needed (negative when it does not fit)
  double usedFraction = 0;       // needed / deviceBytes
};
// headroom: the fraction of the device kept free (CUDA context, fragmentation); 0 ≤ headroom < 1.
FitResult checkFit(std::int64_t neededBytes, std::int64_t deviceBytes, double headroom);

// "80GiB", "80 GB", "1.5TiB", "123456" (bytes); binary and decimal units. nullopt when malformed.
std::optional<std::int64_t> parseByteSize(std::string_view text);
// "15.02 GiB", "512.0 KiB", "100 B".
std::string formatBytes(double bytes);

}  // namespace shardscope::core::estimator
