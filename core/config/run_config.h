#pragma once
// The configuration of one training run of the embedded LibTorch runtime (shardscope-worker): the
// strategy and its knobs, model, data, optimizer, precision, checkpointing and capture.
//
// Every knob is described once, in the key table of run_config.cpp (JSON key, flag, type, setter,
// check, help). JSON parsing (`parseRunConfigJson`), flag parsing (`applyFlag`), the help text
// (`runConfigHelp`), `toJson` and `validate` all walk that table, so a knob added there is
// parsed, stored, documented and checked everywhere. The meaning of the strategy knobs follows
// ../shared/docs/strategies.md §1.1–1.7 (DeepSpeed semantics for ZeRO: sizes are element counts).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/model/config_knobs.h"
#include "core/model/run_knobs.h"
#include "core/model/strategy.h"
#include "core/util/json.h"

namespace shardscope::core {

// The runtime's model presets (validate() refuses any other name).
const std::vector<std::string_view>& knownModelPresets();

struct RunConfig {
  Strategy strategy = Strategy::Ddp;
  std::string model = "tiny";  // runtime preset name (knownModelPresets())
  int layers = 0;              // 0 = preset depth; >0 cuts depth
  int worldSize = 2;
  int nnodes = 1;
  int nodeRank = 0;
  int nprocPerNode = 0;  // 0 = worldSize / nnodes
  int steps = 20;
  std::uint64_t seed = 0;
  int microBatch = 4;
  int seqLen = 128;
  int gradAccum = 1;
  std::string dataFile;                            // empty = synthetic tokens by seed; else a UTF-8 text file read as bytes
  OptimizerKind optimizer = OptimizerKind::AdamW;  // adamw | sgd
  double lr = 1e-3, weightDecay = 0.0, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, momentum = 0.9, gradClip = 0.0;
  // The set-valued knobs are enums of core/model/run_knobs.h (one name table each).
  Precision precision = Precision::Fp32;  // fp32 | bf16 | fp16 (fp16: dynamic loss scaling)
  // fp16 loss scaling (DeepSpeed's fp16 block; PyTorch's GradScaler is the same rule with window
  // 2000 and hysteresis 1): the loss is multiplied by the scale before backward; a step whose
  // gradients overflow (inf/NaN on any rank) is skipped by every rank and the scale halved once
  // `hysteresis` overflows have been seen (never below minLossScale); after lossScaleWindow steps
  // without overflow it doubles. lossScale > 0 is a static scale (no skipping, no growth).
  double lossScale = 0;
  int initialScalePower = 16;
  int lossScaleWindow = 1000;
  int hysteresis = 2;
  double minLossScale = 1;
  ReduceDtype reduceDtype = ReduceDtype::SameAsParams;  // "" = same as params | fp32 | bf16
  AttentionKernel attention = AttentionKernel::Auto;    // auto | sdpa | eager (auto: sdpa where LibTorch has it)
  ComputeDevice device = ComputeDevice::Auto;           // auto | cpu | cuda
  CommBackend backend = CommBackend::Auto;              // auto | gloo | nccl
  // DDP
  double bucketCapMb = 25.0;
  double firstBucketMb = 1.0;
  bool gradientAsBucketView = false;
  // ZeRO (DeepSpeed semantics; sizes are ELEMENT counts)
  std::int64_t reduceBucketSize = 500000000;
  std::int64_t allgatherBucketSize = 500000000;
  std::optional<bool> overlapComm;  // unset: true for stage 3, false otherwise (DeepSpeed's validator)
  bool contiguousGradients = true;
  std::int64_t prefetchBucketSize = 50000000;
  std::int64_t paramPersistenceThreshold = 100000;
  std::int64_t maxLiveParameters = 1000000000;
  std::int64_t maxReuseDistance = 1000000000;
  Offload offloadOptimizer = Offload::None;  // none | cpu (zero1/2/3)
  Offload offloadParam = Offload::None;      // none | cpu (zero3, fsdp, fsdp_grad_op, hsdp)
  // FSDP / HSDP
  BackwardPrefetch backwardPrefetch = BackwardPrefetch::Pre;  // pre | post | none
  bool forwardPrefetch = false;
  bool limitAllGathers = true;
  int shardGroupSize = 0;  // HSDP ranks per shard group; 0 = effectiveShardGroupSize() picks; must divide worldSize
  // LoRA fine-tuning (loraRank > 0): the base weights are frozen (no gradient, no optimizer state,
  // held in the compute dtype) and each target projection gets adapters A [r x in] (random) and
  // B [out x r] (zero), its output plus (alpha / r) · B·A·x. Targets: a comma list of q, k, v, o,
  // gate, up, down (the attention and MLP projections).
  int loraRank = 0;
  double loraAlpha = 16;
  std::string loraTargets = "q,k,v,o,gate,up,down";
  // Common
  bool activationCheckpointing = false;
  bool saveCheckpoint = false;
  bool consolidateCheckpoint = false;
  std::string checkpointDir;  // sharded save at the end (required with saveCheckpoint)
  bool capture = true;
  // Time all-gather, reduce-scatter and all-reduce at 4 KiB..largest message before the first step
  // (profiler/runtime/link_probe.h): the simulator's measured link. Multi-rank runs only.
  bool linkProbe = true;
  // What CUPTI records on CUDA runs with capture on: launches (kernels, copies, memsets, memory and
  // the API calls that launch or wait) | full (every CUDA runtime and driver call) | kernels (device
  // records only, no API calls) | off (no CUPTI: host spans and allocator statistics only).
  GpuTrace gpuTrace = GpuTrace::Launches;
  double hangTimeoutS = 300;
  double flushIntervalS = 0.5;

  friend bool operator==(const RunConfig&, const RunConfig&) = default;
};

// The LoRA target projections in `text` ("q,k,v,o,gate,up,down"; spaces ignored, "*_proj" accepted
// as PEFT spells them, "all-linear" = all seven), in that canonical order and without repeats.
// An unknown or empty list leaves `problem` saying so (when not null) and returns what parsed.
std::vector<std::string> loraTargetList(std::string_view text, std::string* problem = nullptr);

// One row of the key table, for help screens, completion and tests.
struct RunConfigKeyInfo {
  std::string key;                   // JSON key, snake_case ("world_size")
  std::string flag;                  // "--world-size"
  std::string group;                 // "Parallelism", ...
  std::string type;                  // "int", "size", "number", "bool", "bool|auto", "text", "path", or "a|b|c"
  std::string defaultText;           // the default as the flag would spell it
  std::string help;                  // one line
  std::vector<std::string> aliases;  // other accepted JSON keys (flags: the same with '-')
  bool isBool = false;               // a flag that may be given without a value
};
// Every knob, in table (and help) order.
std::vector<RunConfigKeyInfo> runConfigKeys();

// Reads our own run-config JSON (an object of snake_case keys, see runConfigKeys()). Keys that are
// absent keep their defaults. Unknown keys are reported in `warnings` (when not null) and ignored;
// a value of the wrong type or outside its allowed set throws Error("<label>: <key>: ...").
// Cross-field rules are validate()'s job.
RunConfig parseRunConfigJson(const JsonValue& json, const std::string& label, std::vector<std::string>* warnings);
// The same, applied over an existing config (keys that are absent keep their value in `cfg`).
void applyRunConfigJson(RunConfig& cfg, const JsonValue& json, const std::string& label, std::vector<std::string>* warnings);

// One CLI flag: `name` is "world-size" or "--world-size" (a snake_case key works too). Booleans
// accept true/false/1/0/on/off/yes/no (an empty value means true); integers and sizes accept
// 500000000, 5e8; numbers any finite decimal. Throws Error("--world-size: ...") when the name is
// unknown or the value does not parse.
void applyFlag(RunConfig& cfg, std::string_view name, std::string_view value);
// True when `name` is a known flag (same spellings as applyFlag).
bool isRunConfigFlag(std::string_view name);
// True when `name` is a known boolean flag (it may be given without a value).
bool isRunConfigBoolFlag(std::string_view name);

// The "Run configuration" help section: every knob, one line each (flag, type, default, meaning),
// grouped: Model & data, Parallelism, Optimizer, Precision, DDP, ZeRO, FSDP/HSDP,
// Checkpointing & capture.
std::string runConfigHelp();

// Throws Error("run config: <key> (--flag): <what is wrong>") for the first rule broken: ranges of
// every knob, allowed values, and the cross-field rules (nnodes divides world_size, node_rank <
// nnodes, nproc_per_node·nnodes = world_size, shard_group_size divides world_size and only with
// hsdp, offload_param only with zero3/fsdp/fsdp_grad_op/hsdp, offload_optimizer only with ZeRO,
// nccl needs cuda, checkpoint options, known model preset).
void validate(const RunConfig& cfg);

// A stored run's configuration with a change applied (a bottleneck's "try it", config_knobs.h):
// each key set as its flag would (applyFlag), then validate(). Throws Error naming the key when the
// change does not apply.
RunConfig withChange(RunConfig cfg, const KnobChange& change);

// Every key of the table, in table order: what gets stored with the run. parseRunConfigJson()
// reads it back to an equal RunConfig.
JsonValue toJson(const RunConfig& cfg);

// Maps a DeepSpeed config onto `base`. The file decides what DeepSpeed would decide: the strategy
// comes from zero_optimization.stage (no block or no stage = stage 0 = ddp) and precision is bf16
// exactly when bf16.enabled is true (fp32 otherwise); other knobs the file does not mention keep
// their value from `base`. Read: zero_optimization (stage → strategy, bucket sizes,
// overlap/contiguous, stage3_* knobs, offload devices; mics_shard_size > 0 with stage 3 → hsdp),
// batch sizes (train_batch_size must equal micro·accum·world_size; a missing micro batch or
// accumulation is derived from it as DeepSpeed does), gradient_clipping, bf16/fp16,
// communication_data_type, optimizer. Known DeepSpeed keys we do not implement are ignored with a
// warning (naming the value when it differs from DeepSpeed's default); unknown keys are warned
// about; a "shardscope" object (written by toDeepSpeedJson) is applied last with
// applyRunConfigJson. Refused with Error("<label>: <key path>: ..."): wrong types, negative or
// out-of-range values, stage 4, fp16, nvme offload, unsupported optimizers, Hugging Face "auto".
RunConfig fromDeepSpeedJson(const JsonValue& json, const std::string& label, RunConfig base, std::vector<std::string>* warnings);

// The DeepSpeed JSON that reproduces the run: batch sizes, gradient_clipping, bf16,
// communication_data_type, optimizer and a zero_optimization block with the stage and the keys
// that stage uses. FSDP/HSDP map to their closest DeepSpeed equivalent (fsdp → stage 3,
// fsdp_grad_op → stage 2, hsdp → stage 3 + mics_shard_size); every knob DeepSpeed does not carry
// goes into a "shardscope" object (run-config keys), so fromDeepSpeedJson(toDeepSpeedJson(c), ...,
// RunConfig{}, ...) == c.
JsonValue toDeepSpeedJson(const RunConfig& cfg);

// Ranks that share one copy of the sharded state. hsdp: shardGroupSize if set, else nprocPerNode
// when nnodes > 1, else worldSize/2 when worldSize is even and >= 4, else worldSize. ddp: 1 (nothing
// sharded). Every other strategy: worldSize. Replicas = worldSize / this.
int effectiveShardGroupSize(const RunConfig& cfg);
// nprocPerNode, or worldSize / nnodes when 0.
int effectiveNprocPerNode(const RunConfig& cfg);
// overlapComm if set, else DeepSpeed's default: true for zero3, false otherwise.
bool effectiveOverlapComm(const RunConfig& cfg);

}  // namespace shardscope::core
