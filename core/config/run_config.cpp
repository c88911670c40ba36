#include "core/config/run_config.h"

#include "core/model/config_knobs.h"

#include <algorithm>
#include <charconv>
#include <cctype>
#include <cmath>
#include <set>
#include <variant>

#include "core/model/model_presets.h"
#include "core/util/error.h"

namespace shardscope::core {

// ---------------------------------------------------------------------------------------------
// Names

namespace {

std::string lowerUnderscore(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c == '-')
      c = '_';
    else if (c >= 'A' && c <= 'Z')
      c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

const std::vector<std::string_view>& knownModelPresets() { return modelPresetNames(); }

std::vector<std::string> loraTargetList(std::string_view text, std::string* problem) {
  static constexpr std::string_view kAll[] = {"q", "k", "v", "o", "gate", "up", "down"};
  bool seen[std::size(kAll)] = {};
  std::string bad;
  std::size_t pos = 0;
  bool any = false;
  while (pos <= text.size()) {
    std::size_t end = text.find(',', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string item;
    for (char ch : text.substr(pos, end - pos))
      if (ch != ' ' && ch != '\t') item += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    pos = end + 1;
    if (item.empty()) continue;
    any = true;
    if (item == "all-linear" || item == "all") {
      for (bool& b : seen) b = true;
      continue;
    }
    if (item.size() > 5 && item.ends_with("_proj")) item.resize(item.size() - 5);
    bool found = false;
    for (std::size_t i = 0; i < std::size(kAll); ++i)
      if (item == kAll[i]) seen[i] = found = true;
    if (!found) bad += (bad.empty() ? "" : ", ") + item;
  }
  std::vector<std::string> out;
  for (std::size_t i = 0; i < std::size(kAll); ++i)
    if (seen[i]) out.emplace_back(kAll[i]);
  if (problem) {
    if (!bad.empty())
      *problem = "unknown projection " + bad + " (known: q, k, v, o, gate, up, down, all-linear)";
    else if (!any)
      *problem = "must name at least one projection (q, k, v, o, gate, up, down)";
    else
      problem->clear();
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Value parsing shared by flags and JSON

namespace {

std::optional<std::int64_t> parseInteger(std::string_view s) {
  s = trim(s);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty()) return std::nullopt;
  const char* b = s.data();
  const char* e = b + s.size();
  std::int64_t i = 0;
  if (auto [p, ec] = std::from_chars(b, e, i); ec == std::errc() && p == e) return i;
  double d = 0;  // 5e8, 1e9, 2.0
  if (auto [p, ec] = std::from_chars(b, e, d);
      ec == std::errc() && p == e && std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.2e18)
    return static_cast<std::int64_t>(d);
  return std::nullopt;
}

std::optional<std::uint64_t> parseUnsigned(std::string_view s) {
  s = trim(s);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty() || s.front() == '-') return std::nullopt;
  const char* b = s.data();
  const char* e = b + s.size();
  std::uint64_t u = 0;
  if (auto [p, ec] = std::from_chars(b, e, u); ec == std::errc() && p == e) return u;
  double d = 0;
  if (auto [p, ec] = std::from_chars(b, e, d);
      ec == std::errc() && p == e && std::isfinite(d) && d >= 0 && d == std::floor(d) && d < 1.8e19)
    return static_cast<std::uint64_t>(d);
  return std::nullopt;
}

std::optional<double> parseNumber(std::string_view s) {
  s = trim(s);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty()) return std::nullopt;
  const char* b = s.data();
  const char* e = b + s.size();
  double d = 0;
  if (auto [p, ec] = std::from_chars(b, e, d); ec == std::errc() && p == e && std::isfinite(d)) return d;
  return std::nullopt;
}

std::optional<bool> parseBool(std::string_view s) {
  const std::string v = lowerUnderscore(trim(s));
  if (v.empty() || v == "true" || v == "1" || v == "on" || v == "yes") return true;
  if (v == "false" || v == "0" || v == "off" || v == "no") return false;
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// The key table

// Choice: a std::string from a fixed list (the model preset); Enum: one of the set-valued knobs of
// core/model/run_knobs.h, spelled by its name table.
enum class Kind { Bool, OptBool, Int, Size, Seed, Number, Text, Path, Choice, Strat, Enum };

using Member = std::variant<bool RunConfig::*, std::optional<bool> RunConfig::*, int RunConfig::*, std::int64_t RunConfig::*,
                            std::uint64_t RunConfig::*, double RunConfig::*, std::string RunConfig::*, Strategy RunConfig::*,
                            Precision RunConfig::*, ReduceDtype RunConfig::*, AttentionKernel RunConfig::*,
                            ComputeDevice RunConfig::*, CommBackend RunConfig::*, OptimizerKind RunConfig::*,
                            Offload RunConfig::*, BackwardPrefetch RunConfig::*, GpuTrace RunConfig::*>;

template <class M>
using MemberType = std::remove_cvref_t<decltype(std::declval<RunConfig&>().*std::declval<M>())>;

// A check of the knob's own value: "" when fine, else what is wrong ("must be at least 1 (got 0)").
using Check = std::string (*)(const RunConfig&);

struct Knob {
  std::string_view key;
  std::string_view group;
  Kind kind;
  Member member;
  std::string_view help;
  std::vector<std::string_view> choices = {};  // Kind::Choice only ("" allowed when listed)
  std::vector<std::string_view> aliases = {};
  Check check = nullptr;
};

constexpr std::string_view kModel = "Model & data";
constexpr std::string_view kLora = "Fine-tuning (LoRA)";
constexpr std::string_view kPar = "Parallelism";
constexpr std::string_view kOpt = "Optimizer";
constexpr std::string_view kPrec = "Precision";
constexpr std::string_view kDdp = "DDP";
constexpr std::string_view kZero = "ZeRO";
constexpr std::string_view kFsdp = "FSDP/HSDP";
constexpr std::string_view kCkpt = "Checkpointing & capture";
constexpr std::string_view kGroups[] = {kModel, kLora, kPar, kOpt, kPrec, kDdp, kZero, kFsdp, kCkpt};

std::string num(double v) { return formatDouble(v); }
std::string num(std::int64_t v) { return std::to_string(v); }
std::string num(int v) { return std::to_string(v); }

std::string atLeast(std::int64_t v, std::int64_t min) {
  return v >= min ? std::string() : "must be at least " + num(min) + " (got " + num(v) + ")";
}
std::string positive(double v) { return v > 0 ? std::string() : "must be greater than 0 (got " + num(v) + ")"; }
std::string nonNegative(double v) { return v >= 0 ? std::string() : "must be at least 0 (got " + num(v) + ")"; }
std::string unitInterval(double v) {  // [0, 1)
  return (v >= 0 && v < 1) ? std::string() : "must be in [0, 1) (got " + num(v) + ")";
}
std::string finite(double v) { return std::isfinite(v) ? std::string() : "must be a finite number"; }
std::string firstOf(const std::string& a, const std::string& b) { return a.empty() ? b : a; }

const std::vector<Knob>& knobs() {
  static const std::vector<Knob> table = {
      // Model & data
      {.key = "model",
       .group = kModel,
       .kind = Kind::Choice,
       .member = &RunConfig::model,
       .help = "runtime model preset",
       .choices = knownModelPresets()},
      {.key = "layers",
       .group = kModel,
       .kind = Kind::Int,
       .member = &RunConfig::layers,
       .help = "transformer blocks to build (0 = the preset's depth; a smaller number cuts the model)",
       .check = [](const RunConfig& c) { return atLeast(c.layers, 0); }},
      {.key = "steps",
       .group = kModel,
       .kind = Kind::Int,
       .member = &RunConfig::steps,
       .help = "optimizer steps to run",
       .check = [](const RunConfig& c) { return atLeast(c.steps, 1); }},
      {.key = "seed",
       .group = kModel,
       .kind = Kind::Seed,
       .member = &RunConfig::seed,
       .help = "seed of the initial weights and of the synthetic tokens"},
      {.key = knob_key::kMicroBatch,
       .group = kModel,
       .kind = Kind::Int,
       .member = &RunConfig::microBatch,
       .help = "sequences per rank per micro-step (DeepSpeed train_micro_batch_size_per_gpu)",
       .check = [](const RunConfig& c) { return atLeast(c.microBatch, 1); }},
      {.key = knob_key::kSeqLen,
       .group = kModel,
       .kind = Kind::Int,
       .member = &RunConfig::seqLen,
       .help = "tokens per sequence",
       .check = [](const RunConfig& c) { return atLeast(c.seqLen, 2); }},
      {.key = "grad_accum",
       .group = kModel,
       .kind = Kind::Int,
       .member = &RunConfig::gradAccum,
       .help = "micro-steps per optimizer step (gradient accumulation)",
       .check = [](const RunConfig& c) { return atLeast(c.gradAccum, 1); }},
      {.key = "data_file",
       .group = kModel,
       .kind = Kind::Path,
       .member = &RunConfig::dataFile,
       .help = "UTF-8 text file whose bytes are the tokens (empty = synthetic tokens from the seed)"},
      // Fine-tuning (LoRA)
      {.key = "lora_rank",
       .group = kLora,
       .kind = Kind::Int,
       .member = &RunConfig::loraRank,
       .help = "LoRA rank r: freeze the base weights and train adapters A [r x in], B [out x r] on the target "
               "projections (0 = full fine-tuning)",
       .check = [](const RunConfig& c) { return atLeast(c.loraRank, 0); }},
      {.key = "lora_alpha",
       .group = kLora,
       .kind = Kind::Number,
       .member = &RunConfig::loraAlpha,
       .help = "LoRA alpha: the adapters' output is scaled by alpha / r",
       .check = [](const RunConfig& c) { return firstOf(finite(c.loraAlpha), positive(c.loraAlpha)); }},
      {.key = "lora_targets",
       .group = kLora,
       .kind = Kind::Text,
       .member = &RunConfig::loraTargets,
       .help = "projections that get adapters: a comma list of q, k, v, o, gate, up, down",
       .check =
           [](const RunConfig& c) {
             std::string problem;
             (void)loraTargetList(c.loraTargets, &problem);
             return problem;
           }},
      {.key = knob_key::kActivationCheckpointing,
       .group = kModel,
       .kind = Kind::Bool,
       .member = &RunConfig::activationCheckpointing,
       .help = "recompute each block's activations in backward instead of keeping them"},
      // Parallelism
      {.key = knob_key::kStrategy,
       .group = kPar,
       .kind = Kind::Strat,
       .member = &RunConfig::strategy,
       .help = "sharding strategy (aliases: fsdp_full, full_shard, shard_grad_op, hybrid_shard)"},
      {.key = knob_key::kWorldSize,
       .group = kPar,
       .kind = Kind::Int,
       .member = &RunConfig::worldSize,
       .help = "rank processes in the whole job",
       .check = [](const RunConfig& c) { return atLeast(c.worldSize, 1); }},
      {.key = "nnodes",
       .group = kPar,
       .kind = Kind::Int,
       .member = &RunConfig::nnodes,
       .help = "nodes the job spans (must divide world_size)",
       .check = [](const RunConfig& c) { return atLeast(c.nnodes, 1); }},
      {.key = "node_rank",
       .group = kPar,
       .kind = Kind::Int,
       .member = &RunConfig::nodeRank,
       .help = "index of this node, 0 .. nnodes-1",
       .check = [](const RunConfig& c) { return atLeast(c.nodeRank, 0); }},
      {.key = "nproc_per_node",
       .group = kPar,
       .kind = Kind::Int,
       .member = &RunConfig::nprocPerNode,
       .help = "ranks started on this node (0 = world_size / nnodes)",
       .check = [](const RunConfig& c) { return atLeast(c.nprocPerNode, 0); }},
      {.key = "device",
       .group = kPar,
       .kind = Kind::Enum,
       .member = &RunConfig::device,
       .help = "where the ranks compute (auto = cuda when a GPU is available, else cpu)"},
      {.key = "backend",
       .group = kPar,
       .kind = Kind::Enum,
       .member = &RunConfig::backend,
       .help = "collective backend (auto = nccl on cuda, gloo on cpu)"},
      // Optimizer
      {.key = knob_key::kOptimizer,
       .group = kOpt,
       .kind = Kind::Enum,
       .member = &RunConfig::optimizer,
       .help = "AdamW (decoupled weight decay) or SGD with momentum"},
      {.key = "lr",
       .group = kOpt,
       .kind = Kind::Number,
       .member = &RunConfig::lr,
       .help = "learning rate",
       .check = [](const RunConfig& c) { return firstOf(finite(c.lr), positive(c.lr)); }},
      {.key = "weight_decay",
       .group = kOpt,
       .kind = Kind::Number,
       .member = &RunConfig::weightDecay,
       .help = "weight decay (AdamW: decoupled; SGD: added to the gradient)",
       .check = [](const RunConfig& c) { return firstOf(finite(c.weightDecay), nonNegative(c.weightDecay)); }},
      {.key = "beta1",
       .group = kOpt,
       .kind = Kind::Number,
       .member = &RunConfig::beta1,
       .help = "AdamW decay of the first moment",
       .check = [](const RunConfig& c) { return unitInterval(c.beta1); }},
      {.key = "beta2",
       .group = kOpt,
       .kind = Kind::Number,
       .member = &RunConfig::beta2,
       .help = "AdamW decay of the second moment",
       .check = [](const RunConfig& c) { return unitInterval(c.beta2); }},
      {.key = "eps",
       .group = kOpt,
       .kind = Kind::Number,
       .member = &RunConfig::eps,
       .help = "AdamW epsilon added to the denominator",
       .check = [](const RunConfig& c) { return firstOf(finite(c.eps), positive(c.eps)); }},
      {.key = "momentum",
       .group = kOpt,
       .kind = Kind::Number,
       .member = &RunConfig::momentum,
       .help = "SGD momentum (0 = plain SGD)",
       .check = [](const RunConfig& c) { return unitInterval(c.momentum); }},
      {.key = "grad_clip",
       .group = kOpt,
       .kind = Kind::Number,
       .member = &RunConfig::gradClip,
       .help = "clip the global gradient norm to this value (0 = no clipping)",
       .check = [](const RunConfig& c) { return firstOf(finite(c.gradClip), nonNegative(c.gradClip)); }},
      // Precision
      {.key = "precision",
       .group = kPrec,
       .kind = Kind::Enum,
       .member = &RunConfig::precision,
       .help = "dtype of parameters and activations in compute"},
      {.key = "loss_scale",
       .group = kPrec,
       .kind = Kind::Number,
       .member = &RunConfig::lossScale,
       .help = "fp16: a static loss scale (0 = dynamic loss scaling, DeepSpeed's default)",
       .check = [](const RunConfig& c) { return firstOf(finite(c.lossScale), nonNegative(c.lossScale)); }},
      {.key = "initial_scale_power",
       .group = kPrec,
       .kind = Kind::Int,
       .member = &RunConfig::initialScalePower,
       .help = "fp16 dynamic loss scaling: the first scale is 2^this",
       .check =
           [](const RunConfig& c) {
             return c.initialScalePower >= 0 && c.initialScalePower <= 64
                        ? std::string()
                        : "must be in [0, 64] (got " + num(c.initialScalePower) + ")";
           }},
      {.key = "loss_scale_window",
       .group = kPrec,
       .kind = Kind::Int,
       .member = &RunConfig::lossScaleWindow,
       .help = "fp16 dynamic loss scaling: steps without overflow before the scale doubles",
       .check = [](const RunConfig& c) { return atLeast(c.lossScaleWindow, 1); }},
      {.key = "hysteresis",
       .group = kPrec,
       .kind = Kind::Int,
       .member = &RunConfig::hysteresis,
       .help = "fp16 dynamic loss scaling: overflows tolerated before the scale is halved (each skips its step)",
       .check = [](const RunConfig& c) { return atLeast(c.hysteresis, 1); }},
      {.key = "min_loss_scale",
       .group = kPrec,
       .kind = Kind::Number,
       .member = &RunConfig::minLossScale,
       .help = "fp16 dynamic loss scaling: the scale never goes below this",
       .check = [](const RunConfig& c) { return firstOf(finite(c.minLossScale), positive(c.minLossScale)); }},
      {.key = "reduce_dtype",
       .group = kPrec,
       .kind = Kind::Enum,
       .member = &RunConfig::reduceDtype,
       .help =
           "dtype gradients are reduced in (empty = the parameters' dtype, as FSDP's MixedPrecision; fp32 avoids bf16 drift)"},
      {.key = "attention",
       .group = kPrec,
       .kind = Kind::Enum,
       .member = &RunConfig::attention,
       .help = "attention kernel: sdpa (scaled_dot_product_attention, flash / memory-efficient kernels on GPU; "
               "LibTorch >= 2.0), eager (matmul, softmax, matmul), auto (sdpa where this LibTorch has it)"},
      // DDP
      {.key = knob_key::kBucketCapMb,
       .group = kDdp,
       .kind = Kind::Number,
       .member = &RunConfig::bucketCapMb,
       .help = "gradient all-reduce bucket cap in MiB",
       .check = [](const RunConfig& c) { return firstOf(finite(c.bucketCapMb), positive(c.bucketCapMb)); }},
      {.key = "first_bucket_mb",
       .group = kDdp,
       .kind = Kind::Number,
       .member = &RunConfig::firstBucketMb,
       .help = "cap of the first (deliberately small) bucket in MiB",
       .check = [](const RunConfig& c) { return firstOf(finite(c.firstBucketMb), positive(c.firstBucketMb)); }},
      {.key = knob_key::kGradientAsBucketView,
       .group = kDdp,
       .kind = Kind::Bool,
       .member = &RunConfig::gradientAsBucketView,
       .help = "make each .grad a view into its bucket (saves one gradient copy)"},
      // ZeRO
      {.key = knob_key::kReduceBucketSize,
       .group = kZero,
       .kind = Kind::Size,
       .member = &RunConfig::reduceBucketSize,
       .help = "elements per gradient reduce(-scatter) bucket (zero1/2/3)",
       .check = [](const RunConfig& c) { return atLeast(c.reduceBucketSize, 1); }},
      {.key = "allgather_bucket_size",
       .group = kZero,
       .kind = Kind::Size,
       .member = &RunConfig::allgatherBucketSize,
       .help = "elements per all-gather of the updated parameters after the step (zero1/2)",
       .check = [](const RunConfig& c) { return atLeast(c.allgatherBucketSize, 1); }},
      {.key = knob_key::kOverlapComm,
       .group = kZero,
       .kind = Kind::OptBool,
       .member = &RunConfig::overlapComm,
       .help = "overlap gradient reduction with backward (auto = on for zero3, off otherwise)"},
      {.key = "contiguous_gradients",
       .group = kZero,
       .kind = Kind::Bool,
       .member = &RunConfig::contiguousGradients,
       .help = "copy gradients into one contiguous buffer as they are produced"},
      {.key = knob_key::kPrefetchBucketSize,
       .group = kZero,
       .kind = Kind::Size,
       .member = &RunConfig::prefetchBucketSize,
       .help = "zero3: most elements fetched ahead of use",
       .aliases = {"stage3_prefetch_bucket_size"},
       .check = [](const RunConfig& c) { return atLeast(c.prefetchBucketSize, 0); }},
      {.key = "param_persistence_threshold",
       .group = kZero,
       .kind = Kind::Size,
       .member = &RunConfig::paramPersistenceThreshold,
       .help = "zero3: parameters with fewer elements are never partitioned",
       .aliases = {"stage3_param_persistence_threshold"},
       .check = [](const RunConfig& c) { return atLeast(c.paramPersistenceThreshold, 0); }},
      {.key = knob_key::kMaxLiveParameters,
       .group = kZero,
       .kind = Kind::Size,
       .member = &RunConfig::maxLiveParameters,
       .help = "zero3: most gathered elements resident per rank before releasing",
       .aliases = {"stage3_max_live_parameters"},
       .check = [](const RunConfig& c) { return atLeast(c.maxLiveParameters, 0); }},
      {.key = "max_reuse_distance",
       .group = kZero,
       .kind = Kind::Size,
       .member = &RunConfig::maxReuseDistance,
       .help = "zero3: keep a gathered parameter that is used again within this many elements",
       .aliases = {"stage3_max_reuse_distance"},
       .check = [](const RunConfig& c) { return atLeast(c.maxReuseDistance, 0); }},
      {.key = knob_key::kOffloadOptimizer,
       .group = kZero,
       .kind = Kind::Enum,
       .member = &RunConfig::offloadOptimizer,
       .help = "keep optimizer state and run the step on the CPU (zero1/2/3)"},
      {.key = "offload_param",
       .group = kZero,
       .kind = Kind::Enum,
       .member = &RunConfig::offloadParam,
       .help = "keep parameters on the CPU between uses (zero3, fsdp, fsdp_grad_op, hsdp)"},
      // FSDP / HSDP
      {.key = knob_key::kBackwardPrefetch,
       .group = kFsdp,
       .kind = Kind::Enum,
       .member = &RunConfig::backwardPrefetch,
       .help = "issue the next unit's backward all-gather before (pre) or after (post) this unit's gradients"},
      {.key = knob_key::kForwardPrefetch,
       .group = kFsdp,
       .kind = Kind::Bool,
       .member = &RunConfig::forwardPrefetch,
       .help = "issue the next unit's forward all-gather before this unit's forward compute"},
      {.key = "limit_all_gathers",
       .group = kFsdp,
       .kind = Kind::Bool,
       .member = &RunConfig::limitAllGathers,
       .help = "rate limiter: at most two units' gathered parameters in flight"},
      {.key = "shard_group_size",
       .group = kFsdp,
       .kind = Kind::Int,
       .member = &RunConfig::shardGroupSize,
       .help = "hsdp: ranks per shard group, divides world_size (0 = ranks per node; one node: world/2 if even and >= 4)",
       .check = [](const RunConfig& c) { return atLeast(c.shardGroupSize, 0); }},
      // Checkpointing & capture
      {.key = "save_checkpoint",
       .group = kCkpt,
       .kind = Kind::Bool,
       .member = &RunConfig::saveCheckpoint,
       .help = "save a sharded checkpoint at the end (needs checkpoint_dir)"},
      {.key = "consolidate_checkpoint",
       .group = kCkpt,
       .kind = Kind::Bool,
       .member = &RunConfig::consolidateCheckpoint,
       .help = "also write the consolidated full weights (needs save_checkpoint)"},
      {.key = "checkpoint_dir",
       .group = kCkpt,
       .kind = Kind::Path,
       .member = &RunConfig::checkpointDir,
       .help = "directory the checkpoint is written to"},
      {.key = "capture",
       .group = kCkpt,
       .kind = Kind::Bool,
       .member = &RunConfig::capture,
       .help = "record host spans, memory counters and (on GPU) kernels into the run"},
      {.key = "link_probe",
       .group = kCkpt,
       .kind = Kind::Bool,
       .member = &RunConfig::linkProbe,
       .help = "before the first step, time the collectives at 4 KiB..the largest message (the simulator's "
               "measured link; a fraction of a second, recorded outside the steps)"},
      {.key = "gpu_trace",
       .group = kCkpt,
       .kind = Kind::Enum,
       .member = &RunConfig::gpuTrace,
       .help = "what CUPTI records on CUDA: launches (kernels, copies, memory and the API calls that launch or "
               "wait), full (every CUDA runtime and driver call: more host overhead per launch), kernels (device "
               "records only), off (no CUPTI)"},
      {.key = "hang_timeout_s",
       .group = kCkpt,
       .kind = Kind::Number,
       .member = &RunConfig::hangTimeoutS,
       .help = "seconds a rank may stay silent before the run is stopped as hung",
       .check = [](const RunConfig& c) { return firstOf(finite(c.hangTimeoutS), positive(c.hangTimeoutS)); }},
      {.key = "flush_interval_s",
       .group = kCkpt,
       .kind = Kind::Number,
       .member = &RunConfig::flushIntervalS,
       .help = "seconds between flushes of the captured records",
       .check = [](const RunConfig& c) { return firstOf(finite(c.flushIntervalS), positive(c.flushIntervalS)); }},
  };
  return table;
}

std::string flagOf(std::string_view key) {
  std::string f = "--";
  for (char c : key) f.push_back(c == '_' ? '-' : c);
  return f;
}

// "world-size", "--world-size", "world_size" and aliases all find the same knob.
const Knob* findKnob(std::string_view name) {
  while (!name.empty() && name.front() == '-') name.remove_prefix(1);
  std::string key(name);
  std::replace(key.begin(), key.end(), '-', '_');
  for (const Knob& k : knobs()) {
    if (k.key == key) return &k;
    for (auto a : k.aliases)
      if (a == key) return &k;
  }
  return nullptr;
}

const Knob& knob(std::string_view key) {
  const Knob* k = findKnob(key);
  if (!k) throw Error("internal: no run-config key " + std::string(key));
  return *k;
}

// The spellings a Choice or Enum knob accepts, in table order (an Enum's come from its name table).
std::vector<std::string_view> choicesOf(const Knob& k) {
  if (k.kind != Kind::Enum) return k.choices;
  return std::visit(
      [](auto m) -> std::vector<std::string_view> {
        using T = MemberType<decltype(m)>;
        std::vector<std::string_view> out;
        if constexpr (KnobEnum<T>)
          for (const auto& n : knobNames<T>()) out.push_back(n.name);
        return out;
      },
      k.member);
}

// Sets an Enum knob from its spelling; false when the name table has no such name.
bool setEnumFromText(const Knob& k, RunConfig& c, std::string_view name) {
  return std::visit(
      [&](auto m) {
        using T = MemberType<decltype(m)>;
        if constexpr (KnobEnum<T>) {
          if (auto v = knobFromString<T>(name)) {
            c.*m = *v;
            return true;
          }
        }
        return false;
      },
      k.member);
}

// An Enum knob whose value is not in its name table (only a cast can make one): the number.
std::optional<int> unnamedEnumValue(const Knob& k, const RunConfig& c) {
  return std::visit(
      [&](auto m) -> std::optional<int> {
        using T = MemberType<decltype(m)>;
        if constexpr (KnobEnum<T>) {
          for (const auto& n : knobNames<T>())
            if (n.value == c.*m) return std::nullopt;
          return static_cast<int>(c.*m);
        }
        return std::nullopt;
      },
      k.member);
}

std::string typeName(const Knob& k) {
  switch (k.kind) {
    case Kind::Bool:
      return "bool";
    case Kind::OptBool:
      return "bool|auto";
    case Kind::Int:
      return "int";
    case Kind::Size:
      return "size";
    case Kind::Seed:
      return "int";
    case Kind::Number:
      return "number";
    case Kind::Text:
      return "text";
    case Kind::Path:
      return "path";
    case Kind::Choice:
    case Kind::Enum: {
      std::string s;
      for (auto c : choicesOf(k)) {
        if (c.empty()) continue;  // "" is the default spelled as an absent value
        if (!s.empty()) s += '|';
        s += c;
      }
      return s;
    }
    case Kind::Strat: {
      std::string s;
      for (Strategy st : runtimeStrategies()) {
        if (!s.empty()) s += '|';
        s += toString(st);
      }
      return s;
    }
  }
  return "";
}

std::string expectedWhat(Kind kind) {
  switch (kind) {
    case Kind::Bool:
      return "true or false";
    case Kind::OptBool:
      return "true, false or auto";
    case Kind::Int:
      return "an integer";
    case Kind::Size:
      return "an element count (integer, e.g. 500000000 or 5e8)";
    case Kind::Seed:
      return "a non-negative integer";
    case Kind::Number:
      return "a number";
    case Kind::Text:
    case Kind::Path:
    case Kind::Choice:
    case Kind::Strat:
    case Kind::Enum:
      return "a string";
  }
  return "a value";
}

std::string listChoices(const std::vector<std::string_view>& choices) {
  std::string s;
  for (std::size_t i = 0; i < choices.size(); ++i) {
    if (i) s += (i + 1 == choices.size()) ? " or " : ", ";
    s += choices[i].empty() ? std::string("\"\"") : std::string(choices[i]);
  }
  return s;
}

// The knob's value in `c`, spelled the way a flag takes it.
std::string valueText(const Knob& k, const RunConfig& c) {
  return std::visit(
      [&](auto m) -> std::string {
        using T = std::decay_t<decltype(c.*m)>;
        const T& v = c.*m;
        if constexpr (std::is_same_v<T, bool>)
          return v ? "true" : "false";
        else if constexpr (std::is_same_v<T, std::optional<bool>>)
          return v ? (*v ? "true" : "false") : "auto";
        else if constexpr (std::is_same_v<T, double>)
          return formatDouble(v);
        else if constexpr (std::is_same_v<T, std::string>)
          return v;
        else if constexpr (std::is_same_v<T, Strategy> || KnobEnum<T>)
          return std::string(toString(v));
        else
          return std::to_string(v);
      },
      k.member);
}

JsonValue valueJson(const Knob& k, const RunConfig& c) {
  return std::visit(
      [&](auto m) -> JsonValue {
        using T = std::decay_t<decltype(c.*m)>;
        const T& v = c.*m;
        if constexpr (std::is_same_v<T, bool>)
          return JsonValue::boolean(v);
        else if constexpr (std::is_same_v<T, std::optional<bool>>)
          return v ? JsonValue::boolean(*v) : JsonValue();
        else if constexpr (std::is_same_v<T, double>)
          return JsonValue::number(v);
        else if constexpr (std::is_same_v<T, std::string>)
          return JsonValue::string(v);
        else if constexpr (std::is_same_v<T, Strategy> || KnobEnum<T>)
          return JsonValue::string(std::string(toString(v)));
        else if constexpr (std::is_same_v<T, std::uint64_t>)
          return JsonValue::number(std::to_string(v));
        else
          return JsonValue::number(static_cast<std::int64_t>(v));
      },
      k.member);
}

// The rule of the knob's own value (allowed choices, then its check); "" when fine.
std::string ownProblem(const Knob& k, const RunConfig& c) {
  if (k.kind == Kind::Choice) {
    const std::string& v = c.*std::get<std::string RunConfig::*>(k.member);
    if (std::find(k.choices.begin(), k.choices.end(), v) == k.choices.end())
      return "must be " + listChoices(k.choices) + " (got \"" + v + "\")";
  }
  if (k.kind == Kind::Enum) {
    if (auto bad = unnamedEnumValue(k, c)) return "must be " + listChoices(choicesOf(k)) + " (got " + std::to_string(*bad) + ")";
  }
  return k.check ? k.check(c) : std::string();
}

// Sets the knob from its textual form (a flag value, or a JSON number's raw text / string value).
// `where` starts every message ("--world-size" or "cfg.json: world_size"); `shown` is the value as
// the user wrote it.
void setFromText(const Knob& k, RunConfig& c, std::string_view text, const std::string& where, const std::string& shown) {
  auto bad = [&]() -> Error { return Error(where + ": expected " + expectedWhat(k.kind) + " (got " + shown + ")"); };
  switch (k.kind) {
    case Kind::Bool: {
      auto b = parseBool(text);
      if (!b) throw bad();
      c.*std::get<bool RunConfig::*>(k.member) = *b;
      break;
    }
    case Kind::OptBool: {
      const std::string v = lowerUnderscore(trim(text));
      if (v == "auto" || v == "default" || v == "none" || v == "null") {
        c.*std::get<std::optional<bool> RunConfig::*>(k.member) = std::nullopt;
        break;
      }
      auto b = parseBool(text);
      if (!b) throw bad();
      c.*std::get<std::optional<bool> RunConfig::*>(k.member) = *b;
      break;
    }
    case Kind::Int: {
      auto i = parseInteger(text);
      if (!i || *i < INT32_MIN || *i > INT32_MAX) throw bad();
      c.*std::get<int RunConfig::*>(k.member) = static_cast<int>(*i);
      break;
    }
    case Kind::Size: {
      auto i = parseInteger(text);
      if (!i) throw bad();
      c.*std::get<std::int64_t RunConfig::*>(k.member) = *i;
      break;
    }
    case Kind::Seed: {
      auto u = parseUnsigned(text);
      if (!u) throw bad();
      c.*std::get<std::uint64_t RunConfig::*>(k.member) = *u;
      break;
    }
    case Kind::Number: {
      auto d = parseNumber(text);
      if (!d) throw bad();
      c.*std::get<double RunConfig::*>(k.member) = *d;
      break;
    }
    case Kind::Text:
    case Kind::Path:
      c.*std::get<std::string RunConfig::*>(k.member) = std::string(text);
      break;
    case Kind::Choice: {
      const std::string v(trim(text));
      if (std::find(k.choices.begin(), k.choices.end(), v) == k.choices.end())
        throw Error(where + ": must be " + listChoices(k.choices) + " (got " + shown + ")");
      c.*std::get<std::string RunConfig::*>(k.member) = v;
      break;
    }
    case Kind::Strat: {
      auto s = strategyFromString(text);
      if (!s) throw Error(where + ": must be one of " + typeName(k) + " (got " + shown + ")");
      if (!isRuntimeStrategy(*s))
        throw Error(where + ": " + strategyName(*s) + " is modelled by estimate and simulate only; the runtime trains " +
                    typeName(k));
      c.*std::get<Strategy RunConfig::*>(k.member) = *s;
      break;
    }
    case Kind::Enum: {
      if (!setEnumFromText(k, c, trim(text)))
        throw Error(where + ": must be " + listChoices(choicesOf(k)) + " (got " + shown + ")");
      break;
    }
  }
  if (const std::string p = k.check ? k.check(c) : std::string(); !p.empty()) throw Error(where + ": " + p);
}

void setFromJson(const Knob& k, RunConfig& c, const JsonValue& v, const std::string& where) {
  const std::string shown = v.dump();
  auto wrongType = [&]() -> Error { return Error(where + ": expected " + expectedWhat(k.kind) + " (got " + shown + ")"); };
  switch (k.kind) {
    case Kind::Bool:
      if (!v.isBool()) throw wrongType();
      setFromText(k, c, v.asBool() ? "true" : "false", where, shown);
      return;
    case Kind::OptBool:
      if (v.isNull()) {
        setFromText(k, c, "auto", where, shown);
        return;
      }
      if (!v.isBool()) throw wrongType();
      setFromText(k, c, v.asBool() ? "true" : "false", where, shown);
      return;
    case Kind::Int:
    case Kind::Size:
    case Kind::Seed:
    case Kind::Number:
      if (!v.isNumber()) throw wrongType();
      setFromText(k, c, v.asString(), where, shown);  // asString() is the number's raw text
      return;
    case Kind::Text:
    case Kind::Path:
    case Kind::Choice:
    case Kind::Strat:
    case Kind::Enum:
      if (!v.isString()) throw wrongType();
      setFromText(k, c, v.asString(), where, shown);
      return;
  }
}

void applyJsonImpl(RunConfig& cfg, const JsonValue& json, const std::string& label, const std::string& prefix,
                   std::vector<std::string>* warnings) {
  if (!json.isObject())
    throw Error(label + ": " + (prefix.empty() ? std::string("the run config") : prefix.substr(0, prefix.size() - 1)) +
                " must be a JSON object");
  for (const auto& [key, value] : json.members()) {
    const Knob* k = nullptr;
    for (const Knob& cand : knobs()) {
      if (cand.key == key || std::find(cand.aliases.begin(), cand.aliases.end(), key) != cand.aliases.end()) {
        k = &cand;
        break;
      }
    }
    if (!k) {
      if (warnings) warnings->push_back(label + ": unknown key " + prefix + key + " (ignored)");
      continue;
    }
    setFromJson(*k, cfg, value, label + ": " + prefix + key);
  }
}

[[noreturn]] void invalid(std::string_view key, const std::string& what) {
  throw Error("run config: " + std::string(key) + " (" + flagOf(key) + "): " + what);
}

bool isZero(Strategy s) { return s == Strategy::Zero1 || s == Strategy::Zero2 || s == Strategy::Zero3; }

}  // namespace

// ---------------------------------------------------------------------------------------------
// Public: table, JSON, flags, help

std::vector<RunConfigKeyInfo> runConfigKeys() {
  const RunConfig defaults;
  std::vector<RunConfigKeyInfo> out;
  for (const Knob& k : knobs()) {
    RunConfigKeyInfo info;
    info.key = k.key;
    info.flag = flagOf(k.key);
    info.group = k.group;
    info.type = typeName(k);
    info.defaultText = valueText(k, defaults);
    info.help = k.help;
    for (auto a : k.aliases) info.aliases.emplace_back(a);
    info.isBool = k.kind == Kind::Bool || k.kind == Kind::OptBool;
    out.push_back(std::move(info));
  }
  return out;
}

void applyRunConfigJson(RunConfig& cfg, const JsonValue& json, const std::string& label, std::vector<std::string>* warnings) {
  applyJsonImpl(cfg, json, label, "", warnings);
}

RunConfig parseRunConfigJson(const JsonValue& json, const std::string& label, std::vector<std::string>* warnings) {
  RunConfig cfg;
  applyJsonImpl(cfg, json, label, "", warnings);
  return cfg;
}

void applyFlag(RunConfig& cfg, std::string_view name, std::string_view value) {
  const Knob* k = findKnob(name);
  std::string_view bare = name;
  while (!bare.empty() && bare.front() == '-') bare.remove_prefix(1);
  if (!k) throw Error("unknown option --" + std::string(bare));
  setFromText(*k, cfg, value, flagOf(bare), "'" + std::string(value) + "'");
}

RunConfig withChange(RunConfig cfg, const KnobChange& change) {
  for (const auto& [key, value] : change.set) applyFlag(cfg, key, value);
  validate(cfg);
  return cfg;
}

bool isRunConfigFlag(std::string_view name) { return findKnob(name) != nullptr; }

bool isRunConfigBoolFlag(std::string_view name) {
  const Knob* k = findKnob(name);
  return k && (k->kind == Kind::Bool || k->kind == Kind::OptBool);
}

std::string runConfigHelp() {
  const RunConfig defaults;
  std::string out =
      "Run configuration (each flag is also a key of the run-config JSON: --world-size <-> \"world_size\";\n"
      "sizes are element counts and accept 5e8; booleans accept true/false/1/0/on/off):\n";
  for (std::string_view group : kGroups) {
    out += "\n";
    out += group;
    out += ":\n";
    for (const Knob& k : knobs()) {
      if (k.group != group) continue;
      std::string left = "  " + flagOf(k.key) + " <" + typeName(k) + ">";
      if (left.size() < 40)
        left.resize(40, ' ');
      else
        left += ' ';
      std::string dflt = valueText(k, defaults);
      if (dflt.empty()) dflt = "none";
      out += left;
      out += k.help;
      out += " [default: " + dflt + "]";
      if (!k.aliases.empty()) {
        out += " (JSON also ";
        for (std::size_t i = 0; i < k.aliases.size(); ++i) out += (i ? ", " : "") + std::string(k.aliases[i]);
        out += ")";
      }
      out += "\n";
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Derived values and validation

int effectiveNprocPerNode(const RunConfig& cfg) {
  if (cfg.nprocPerNode > 0) return cfg.nprocPerNode;
  return cfg.nnodes > 0 ? std::max(1, cfg.worldSize / cfg.nnodes) : cfg.worldSize;
}

int effectiveShardGroupSize(const RunConfig& cfg) {
  switch (cfg.strategy) {
    case Strategy::Ddp:
      return 1;
    case Strategy::Hsdp:
      if (cfg.shardGroupSize > 0) return cfg.shardGroupSize;
      if (cfg.nnodes > 1) return effectiveNprocPerNode(cfg);
      if (cfg.worldSize >= 4 && cfg.worldSize % 2 == 0) return cfg.worldSize / 2;
      return cfg.worldSize;
    default:
      return cfg.worldSize;
  }
}

bool effectiveOverlapComm(const RunConfig& cfg) { return cfg.overlapComm.value_or(cfg.strategy == Strategy::Zero3); }

void validate(const RunConfig& cfg) {
  for (const Knob& k : knobs())
    if (const std::string p = ownProblem(k, cfg); !p.empty()) invalid(k.key, p);

  const int w = cfg.worldSize;
  if (w % cfg.nnodes != 0)
    invalid("nnodes", "must divide world_size (" + num(w) + " ranks cannot be spread evenly over " + num(cfg.nnodes) + " nodes)");
  if (cfg.nodeRank >= cfg.nnodes)
    invalid("node_rank", "must be less than nnodes (" + num(cfg.nnodes) + "; got " + num(cfg.nodeRank) + ")");
  if (cfg.nprocPerNode > 0 && cfg.nprocPerNode * cfg.nnodes != w)
    invalid("nproc_per_node", "nproc_per_node x nnodes must equal world_size (" + num(cfg.nprocPerNode) + " x " +
                                  num(cfg.nnodes) + " != " + num(w) + ")");
  if (cfg.shardGroupSize != 0 && cfg.strategy != Strategy::Hsdp)
    invalid("shard_group_size", "only applies to strategy hsdp (strategy is " + std::string(toString(cfg.strategy)) + ")");
  if (cfg.strategy == Strategy::Hsdp) {
    const int g = effectiveShardGroupSize(cfg);
    if (g > w || w % g != 0)
      invalid("shard_group_size", "must divide world_size (" + num(g) + " does not divide " + num(w) + ")");
  }
  if (cfg.offloadParam != Offload::None && !shardsParameters(cfg.strategy))
    invalid("offload_param",
            "only with zero3, fsdp, fsdp_grad_op or hsdp (strategy is " + std::string(toString(cfg.strategy)) + ")");
  if (cfg.offloadOptimizer != Offload::None && !isZero(cfg.strategy))
    invalid("offload_optimizer",
            "only with zero1, zero2 or zero3 (strategy is " + std::string(toString(cfg.strategy)) +
                (shardsParameters(cfg.strategy) ? "; FSDP moves the optimizer step to the CPU with offload_param cpu)" : ")"));
  if (cfg.backend == CommBackend::Nccl && cfg.device == ComputeDevice::Cpu)
    invalid("backend", "nccl needs device cuda or auto (device is cpu); use gloo on the CPU");
  if (cfg.consolidateCheckpoint && !cfg.saveCheckpoint) invalid("consolidate_checkpoint", "needs save_checkpoint");
  if (cfg.saveCheckpoint && cfg.checkpointDir.empty()) invalid("checkpoint_dir", "must be set when save_checkpoint is on");
}

JsonValue toJson(const RunConfig& cfg) {
  JsonValue out = JsonValue::object();
  for (const Knob& k : knobs()) out.set(std::string(k.key), valueJson(k, cfg));
  return out;
}

// ---------------------------------------------------------------------------------------------
// DeepSpeed

namespace {

// A DeepSpeed key we know but do not implement, with DeepSpeed's default as JSON text (nullptr:
// no simple default; any value is reported as-is).
struct IgnoredKey {
  std::string_view key;
  const char* dflt;
};

constexpr IgnoredKey kIgnoredZeroKeys[] = {
    {"reduce_scatter", "true"},
    {"use_multi_rank_bucket_allreduce", "true"},
    {"allgather_partitions", "true"},
    {"load_from_fp32_weights", "true"},
    {"elastic_checkpoint", "false"},
    {"sub_group_size", "1e9"},
    {"stage3_model_persistence_threshold", "9223372036854775807"},
    {"model_persistence_threshold", "9223372036854775807"},
    {"stage3_module_granularity_threshold", "0"},
    {"module_granularity_threshold", "0"},
    {"stage3_use_all_reduce_for_fetch_params", "false"},
    {"use_all_reduce_for_fetch_params", "false"},
    {"stage3_gather_16bit_weights_on_model_save", "false"},
    {"gather_16bit_weights_on_model_save", "false"},
    {"stage3_gather_fp16_weights_on_model_save", "false"},
    {"ignore_unused_parameters", "true"},
    {"legacy_stage1", "false"},
    {"round_robin_gradients", "false"},
    {"zero_hpz_partition_size", "1"},
    {"zero_quantized_weights", "false"},
    {"zero_quantized_nontrainable_weights", "false"},
    {"zero_quantized_gradients", "false"},
    {"zeropp_loco_param", "null"},
    {"mics_hierarchical_params_gather", "false"},
    {"memory_efficient_linear", "true"},
    {"pipeline_loading_checkpoint", "false"},
    {"override_module_apply", "true"},
    {"log_trace_cache_warnings", "false"},
    {"cpu_offload_use_pin_memory", "null"},
};

constexpr IgnoredKey kIgnoredTopKeys[] = {
    {"scheduler", nullptr},
    {"prescale_gradients", "false"},
    {"gradient_predivide_factor", "1.0"},
    {"sparse_gradients", "false"},
    {"activation_checkpointing", nullptr},
    {"aio", nullptr},
    {"checkpoint", nullptr},
    {"data_types", nullptr},
    {"elasticity", nullptr},
    {"compression_training", nullptr},
    {"pipeline", nullptr},
    {"autotuning", nullptr},
    {"data_efficiency", nullptr},
    {"curriculum_learning", nullptr},
    {"sequence_parallel_size", "1"},
    {"hybrid_engine", nullptr},
    {"nebula", nullptr},
    {"torch_autocast", nullptr},
    {"compile", nullptr},
    {"load_universal_checkpoint", "false"},
    {"disable_allgather", "false"},
    {"dataloader_drop_last", "false"},
    {"zero_force_ds_cpu_optimizer", "true"},
    {"graph_harvesting", "false"},
    {"use_data_before_expert_parallel_", "false"},
};

// Logging and monitoring: nothing to do with what the run computes or sends; accepted silently.
constexpr std::string_view kSilentTopKeys[] = {
    "steps_per_print",  "wall_clock_breakdown",
    "memory_breakdown", "dump_state",
    "tensorboard",      "wandb",
    "csv_monitor",      "comet",
    "flops_profiler",   "comms_logger",
    "timers",           "zero_allow_untested_optimizer",
};

constexpr IgnoredKey kIgnoredOffloadKeys[] = {
    {"pin_memory", "false"}, {"buffer_count", nullptr},  {"buffer_size", "1e8"},      {"max_in_cpu", "1e9"},
    {"fast_init", "false"},  {"pipeline_read", "false"}, {"pipeline_write", "false"}, {"pipeline", "false"},
    {"ratio", "1.0"},        {"nvme_path", "null"},
};

constexpr IgnoredKey kIgnoredOptimizerParams[] = {
    {"adam_w_mode", "true"}, {"torch_adam", "false"}, {"amsgrad", "false"},        {"bias_correction", "true"},
    {"nesterov", "false"},   {"dampening", "0"},      {"maximize", "false"},       {"foreach", "null"},
    {"fused", "null"},       {"capturable", "false"}, {"differentiable", "false"},
};

bool sameJson(const JsonValue& a, const JsonValue& b) {
  if (a.isNumber() && b.isNumber()) return a.asDouble() == b.asDouble();
  return a.dump() == b.dump();
}

const IgnoredKey* findIgnored(std::string_view key, const IgnoredKey* begin, const IgnoredKey* end) {
  for (auto* p = begin; p != end; ++p)
    if (p->key == key) return p;
  return nullptr;
}

class DeepSpeedReader {
 public:
  DeepSpeedReader(const std::string& label, RunConfig& cfg, std::vector<std::string>* warnings)
      : label_(label), cfg_(cfg), warnings_(warnings) {}

  void read(const JsonValue& root) {
    if (!root.isObject()) throw Error(label_ + ": a DeepSpeed config must be a JSON object");
    const JsonValue* shardscope = nullptr;
    bool sawZero = false;
    for (const auto& [key, v] : root.members()) {
      if (key != "shardscope") refuseAuto(key, v);  // our own keys have real "auto" values (device, backend)
      if (key == "zero_optimization") {
        sawZero = true;
        readZero(v);
      } else if (key == "train_micro_batch_size_per_gpu") {
        setKnob("micro_batch", key, v);
        microSet_ = true;
      } else if (key == "gradient_accumulation_steps") {
        setKnob("grad_accum", key, v);
        accumSet_ = true;
      } else if (key == "train_batch_size") {
        trainBatch_ = integer(key, v, 1);
      } else if (key == "gradient_clipping") {
        setKnob("grad_clip", key, v);
      } else if (key == "bf16" || key == "bfloat16") {
        readBf16(key, v);
      } else if (key == "fp16") {
        readFp16(key, v);
      } else if (key == "lora" || key == "peft") {
        readLora(key, v);
      } else if (key == "amp") {
        const JsonValue* en = v.isObject() ? v.find("enabled") : nullptr;
        if (en && en->isBool() && en->asBool())
          fail("amp.enabled", "apex AMP is not supported; use bf16 (\"bf16\": {\"enabled\": true})");
      } else if (key == "communication_data_type") {
        readCommDtype(key, v);
      } else if (key == "optimizer") {
        readOptimizer(v);
      } else if (key == "shardscope") {
        shardscope = &v;
      } else if (std::find(std::begin(kSilentTopKeys), std::end(kSilentTopKeys), key) != std::end(kSilentTopKeys)) {
        // logging only
      } else if (const IgnoredKey* ig = findIgnored(key, std::begin(kIgnoredTopKeys), std::end(kIgnoredTopKeys))) {
        ignored(key, v, ig->dflt);
      } else {
        warn("unknown key " + key + " (ignored)");
      }
    }
    if (!sawZero) cfg_.strategy = Strategy::Ddp;           // DeepSpeed's default stage is 0
    if (!precisionSet_) cfg_.precision = Precision::Fp32;  // neither bf16 nor fp16: DeepSpeed trains in fp32

    if (shardscope) {
      JsonValue rest = JsonValue::object();
      if (!shardscope->isObject()) fail("shardscope", "must be a JSON object");
      for (const auto& [k, val] : shardscope->members())
        if (k != "note") rest.set(k, val);
      applyJsonImpl(cfg_, rest, label_, "shardscope.", warnings_);
    }
    checkBatch();
  }

 private:
  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    throw Error(label_ + ": " + path + ": " + what);
  }
  void warn(const std::string& what) const {
    if (warnings_) warnings_->push_back(label_ + ": " + what);
  }

  // Hugging Face's integration replaces "auto" with values derived from the model and trainer
  // arguments before DeepSpeed sees the file; we are handed the file itself, so nothing fills them.
  void refuseAuto(const std::string& path, const JsonValue& v) const {
    if (v.isString() && v.asString() == "auto")
      fail(path,
           "\"auto\" must be resolved first: it is a Hugging Face Trainer/Accelerate placeholder, not a "
           "DeepSpeed value; write the number (or true/false) you want");
    if (v.isObject())
      for (const auto& [k, sub] : v.members()) refuseAuto(path + "." + k, sub);
    if (v.isArray())
      for (std::size_t i = 0; i < v.items().size(); ++i) refuseAuto(path + "[" + std::to_string(i) + "]", v.items()[i]);
  }

  std::int64_t integer(const std::string& path, const JsonValue& v, std::int64_t min) const {
    std::optional<std::int64_t> i;
    if (v.isNumber()) i = parseInteger(v.asString());
    if (!i) fail(path, "expected an integer (got " + v.dump() + ")");
    if (*i < min) fail(path, "must be at least " + std::to_string(min) + " (got " + v.dump() + ")");
    return *i;
  }

  bool boolean(const std::string& path, const JsonValue& v) const {
    if (!v.isBool()) fail(path, "expected true or false (got " + v.dump() + ")");
    return v.asBool();
  }

  void setKnob(std::string_view knobKey, const std::string& path, const JsonValue& v) {
    setFromJson(knob(knobKey), cfg_, v, label_ + ": " + path);
  }

  void ignored(const std::string& path, const JsonValue& v, const char* dflt) const {
    if (dflt) {
      const JsonValue d = parseJson(dflt, "default");
      if (sameJson(v, d)) {
        warn(path + " is not implemented by Shardscope and is ignored (" + v.dump() +
             " is DeepSpeed's default, so nothing changes)");
        return;
      }
      warn(path + " is not implemented by Shardscope and is ignored: the value " + v.dump() +
           " changes DeepSpeed's behaviour (default " + dflt + "), so this run will differ from DeepSpeed's");
      return;
    }
    warn(path + " is not implemented by Shardscope and is ignored (value " + v.dump() + ")");
  }

  void readZero(const JsonValue& z) {
    if (z.isBool()) {  // deprecated form: true = stage 1
      cfg_.strategy = z.asBool() ? Strategy::Zero1 : Strategy::Ddp;
      warn("zero_optimization: true/false is DeepSpeed's deprecated form; read as stage " + std::string(z.asBool() ? "1" : "0"));
      return;
    }
    if (!z.isObject()) fail("zero_optimization", "must be a JSON object (got " + z.dump() + ")");
    int stage = 0;
    std::optional<std::int64_t> mics;
    for (const auto& [key, v] : z.members()) {
      const std::string path = "zero_optimization." + key;
      if (key == "stage") {
        const std::optional<std::int64_t> s = v.isNumber() ? parseInteger(v.asString()) : std::nullopt;
        if (!s || *s < 0 || *s > 3) fail(path, "must be 0, 1, 2 or 3 (got " + v.dump() + ")");
        stage = static_cast<int>(*s);
      } else if (key == "reduce_bucket_size" || key == "allgather_bucket_size" || key == "overlap_comm" ||
                 key == "contiguous_gradients") {
        setKnob(key, path, v);
      } else if (key == "stage3_prefetch_bucket_size" || key == "prefetch_bucket_size" ||
                 key == "stage3_param_persistence_threshold" || key == "param_persistence_threshold" ||
                 key == "stage3_max_live_parameters" || key == "max_live_parameters" || key == "stage3_max_reuse_distance" ||
                 key == "max_reuse_distance") {
        setKnob(key, path, v);  // findKnob() knows the stage3_ aliases
      } else if (key == "offload_optimizer") {
        readOffload(path, v, "offload_optimizer");
      } else if (key == "offload_param") {
        readOffload(path, v, "offload_param");
      } else if (key == "cpu_offload") {
        if (boolean(path, v)) cfg_.offloadOptimizer = Offload::Cpu;
        warn(path + " is deprecated in DeepSpeed; read as offload_optimizer.device = " + (v.asBool() ? "cpu" : "none"));
      } else if (key == "cpu_offload_param") {
        if (boolean(path, v)) cfg_.offloadParam = Offload::Cpu;
        warn(path + " is deprecated in DeepSpeed; read as offload_param.device = " + (v.asBool() ? "cpu" : "none"));
      } else if (key == "mics_shard_size") {
        mics = integer(path, v, -1);
      } else if (const IgnoredKey* ig = findIgnored(key, std::begin(kIgnoredZeroKeys), std::end(kIgnoredZeroKeys))) {
        if ((key == "stage3_gather_16bit_weights_on_model_save" || key == "gather_16bit_weights_on_model_save" ||
             key == "stage3_gather_fp16_weights_on_model_save") &&
            v.isBool() && v.asBool()) {
          warn(path +
               " is ignored: Shardscope saves consolidated weights with --save-checkpoint "
               "--consolidate-checkpoint (or \"save_checkpoint\"/\"consolidate_checkpoint\" in the shardscope "
               "object)");
          continue;
        }
        ignored(path, v, ig->dflt);
      } else {
        warn("unknown key " + path + " (ignored)");
      }
    }
    static constexpr Strategy kByStage[] = {Strategy::Ddp, Strategy::Zero1, Strategy::Zero2, Strategy::Zero3};
    cfg_.strategy = kByStage[stage];
    if (mics && *mics > 0) {
      if (stage != 3) {
        warn("zero_optimization.mics_shard_size applies to stage 3 only; ignored");
      } else {
        // MiCS shards inside groups of mics_shard_size ranks and replicates across them: HSDP.
        cfg_.strategy = Strategy::Hsdp;
        if (*mics > INT32_MAX) fail("zero_optimization.mics_shard_size", "too large (got " + std::to_string(*mics) + ")");
        cfg_.shardGroupSize = static_cast<int>(*mics);
      }
    }
  }

  void readOffload(const std::string& path, const JsonValue& v, std::string_view knobKey) {
    Offload& target = cfg_.*std::get<Offload RunConfig::*>(knob(knobKey).member);
    if (v.isNull()) {
      target = Offload::None;
      return;
    }
    if (!v.isObject()) fail(path, "must be a JSON object such as {\"device\": \"cpu\"} (got " + v.dump() + ")");
    std::string device = "none";
    if (const JsonValue* d = v.find("device")) {
      if (d->isNull())
        device = "none";
      else if (!d->isString())
        fail(path + ".device", "expected \"none\", \"cpu\" or \"nvme\" (got " + d->dump() + ")");
      else
        device = d->asString();
      if (device == "nvme")
        fail(path + ".device", "NVMe offload (ZeRO-Infinity) is not supported by Shardscope; use \"cpu\" or \"none\"");
      if (device != "none" && device != "cpu")
        fail(path + ".device", "must be \"none\", \"cpu\" or \"nvme\" (got " + d->dump() + ")");
    }
    target = device == "cpu" ? Offload::Cpu : Offload::None;
    for (const auto& [key, sub] : v.members()) {
      if (key == "device") continue;
      const std::string subPath = path + "." + key;
      if (const IgnoredKey* ig = findIgnored(key, std::begin(kIgnoredOffloadKeys), std::end(kIgnoredOffloadKeys))) {
        if (device != "none") ignored(subPath, sub, ig->dflt);  // tuning of an offload that is off: moot
      } else {
        warn("unknown key " + subPath + " (ignored)");
      }
    }
  }

  void readBf16(const std::string& key, const JsonValue& v) {
    if (!v.isObject()) fail(key, "must be a JSON object such as {\"enabled\": true} (got " + v.dump() + ")");
    for (const auto& [sub, val] : v.members()) {
      const std::string path = key + "." + sub;
      if (sub == "enabled") {
        if (boolean(path, val)) {
          if (precisionSet_ && cfg_.precision == Precision::Fp16)
            fail(path, "bf16 and fp16 cannot both be enabled (DeepSpeed refuses it too)");
          cfg_.precision = Precision::Bf16;
          precisionSet_ = true;
        }
      } else if (sub == "immediate_grad_update" || sub == "check_grad_overflow" || sub == "bf16_master_weights_and_grads" ||
                 sub == "bf16_optimizer_states") {
        ignored(path, val, sub == "immediate_grad_update" ? "true" : "false");
      } else {
        warn("unknown key " + path + " (ignored)");
      }
    }
  }

  // DeepSpeed's fp16 block: fp16 compute with fp32 master weights and (dynamic) loss scaling.
  void readFp16(const std::string& key, const JsonValue& v) {
    if (!v.isObject()) fail(key, "must be a JSON object (got " + v.dump() + ")");
    const JsonValue* en = v.find("enabled");
    const bool on = en && boolean(key + ".enabled", *en);
    if (on) {
      if (precisionSet_ && cfg_.precision == Precision::Bf16)
        fail(key + ".enabled", "bf16 and fp16 cannot both be enabled (DeepSpeed refuses it too)");
      cfg_.precision = Precision::Fp16;
      precisionSet_ = true;
    }
    for (const auto& [sub, val] : v.members()) {
      const std::string path = key + "." + sub;
      if (sub == "enabled") continue;
      if (sub == "loss_scale" || sub == "initial_scale_power" || sub == "loss_scale_window" || sub == "hysteresis" ||
          sub == "min_loss_scale") {
        if (on) setKnob(sub, path, val);  // fp16 off: the loss-scaling keys have no effect
      } else if (sub == "consecutive_hysteresis" || sub == "auto_cast" || sub == "fp16_master_weights_and_grads") {
        ignored(path, val, "false");
      } else {
        warn("unknown key " + path + " (ignored)");
      }
    }
  }

  // A LoRA block in PEFT's LoraConfig spelling ("lora": {"r": 8, "lora_alpha": 16, "target_modules":
  // ["q_proj", ...]}): DeepSpeed itself leaves adapters to PEFT, whose config travels beside it.
  void readLora(const std::string& key, const JsonValue& v) {
    if (!v.isObject()) fail(key, "must be a JSON object such as {\"r\": 8, \"lora_alpha\": 16} (got " + v.dump() + ")");
    for (const auto& [sub, val] : v.members()) {
      const std::string path = key + "." + sub;
      if (sub == "r" || sub == "rank") {
        setKnob("lora_rank", path, val);
      } else if (sub == "lora_alpha" || sub == "alpha") {
        setKnob("lora_alpha", path, val);
      } else if (sub == "target_modules") {
        std::string list;
        if (val.isString()) {
          list = val.asString();
        } else if (val.isArray()) {
          for (const auto& item : val.items()) {
            if (!item.isString()) fail(path, "must be a list of projection names (got " + val.dump() + ")");
            list += (list.empty() ? "" : ",") + item.asString();
          }
        } else {
          fail(path, "must be a list of projection names or \"all-linear\" (got " + val.dump() + ")");
        }
        std::string problem;
        std::string canonical;
        for (const auto& t : loraTargetList(list, &problem)) canonical += (canonical.empty() ? "" : ",") + t;
        if (!problem.empty()) fail(path, problem);
        setKnob("lora_targets", path, JsonValue::string(canonical));
      } else if (sub == "lora_dropout") {
        ignored(path, val, "0");
      } else if (sub == "bias") {
        if (!val.isString() || val.asString() != "none") fail(path, "only \"none\" is supported (got " + val.dump() + ")");
      } else if (sub == "task_type" || sub == "peft_type" || sub == "inference_mode") {
        // PEFT bookkeeping: nothing to train differently
      } else {
        warn("unknown key " + path + " (ignored)");
      }
    }
  }

  void readCommDtype(const std::string& key, const JsonValue& v) {
    if (v.isNull()) {
      cfg_.reduceDtype = ReduceDtype::SameAsParams;
      return;
    }
    if (!v.isString()) fail(key, "expected \"fp32\" or \"bf16\" (got " + v.dump() + ")");
    const std::string s = lowerUnderscore(v.asString());
    if (s == "fp32" || s == "float32" || s == "float")
      cfg_.reduceDtype = ReduceDtype::Fp32;
    else if (s == "bf16" || s == "bfloat16")
      cfg_.reduceDtype = ReduceDtype::Bf16;
    else if (s == "fp16" || s == "float16" || s == "half")
      fail(key, "fp16 reduction is not supported by Shardscope; use \"fp32\" or \"bf16\"");
    else
      fail(key, "must be \"fp32\" or \"bf16\" (got " + v.dump() + ")");
  }

  void readOptimizer(const JsonValue& o) {
    if (!o.isObject()) fail("optimizer", "must be a JSON object (got " + o.dump() + ")");
    const JsonValue* type = o.find("type");
    bool adam = cfg_.optimizer == OptimizerKind::AdamW;
    if (type) {
      if (!type->isString()) fail("optimizer.type", "expected a string (got " + type->dump() + ")");
      const std::string t = lowerUnderscore(type->asString());
      if (t == "adam" || t == "adamw" || t == "fusedadam") {
        cfg_.optimizer = OptimizerKind::AdamW;  // DeepSpeed's Adam runs in AdamW mode unless adam_w_mode is false
        adam = true;
      } else if (t == "sgd") {
        cfg_.optimizer = OptimizerKind::Sgd;
        adam = false;
      } else {
        fail("optimizer.type", "Shardscope implements Adam/AdamW and SGD only (got " + type->dump() + ")");
      }
    }
    for (const auto& [key, v] : o.members()) {
      if (key == "type") continue;
      if (key != "params") {
        warn("unknown key optimizer." + key + " (ignored)");
        continue;
      }
      if (!v.isObject()) fail("optimizer.params", "must be a JSON object (got " + v.dump() + ")");
      for (const auto& [p, pv] : v.members()) {
        const std::string path = "optimizer.params." + p;
        if (p == "lr" || p == "weight_decay") {
          setKnob(p, path, pv);
        } else if (p == "eps" && adam) {
          setKnob("eps", path, pv);
        } else if (p == "betas" && adam) {
          if (!pv.isArray() || pv.items().size() != 2 || !pv.items()[0].isNumber() || !pv.items()[1].isNumber())
            fail(path, "expected two numbers [beta1, beta2] (got " + pv.dump() + ")");
          setKnob("beta1", path + "[0]", pv.items()[0]);
          setKnob("beta2", path + "[1]", pv.items()[1]);
        } else if (p == "momentum" && !adam) {
          setKnob("momentum", path, pv);
        } else if (p == "eps" || p == "betas" || p == "momentum") {
          warn(path + " does not apply to " + std::string(toString(cfg_.optimizer)) + " and is ignored");
        } else if (const IgnoredKey* ig =
                       findIgnored(p, std::begin(kIgnoredOptimizerParams), std::end(kIgnoredOptimizerParams))) {
          ignored(path, pv, ig->dflt);
        } else {
          warn("unknown key " + path + " (ignored)");
        }
      }
    }
  }

  void checkBatch() {
    if (!trainBatch_) return;
    const std::int64_t tbs = *trainBatch_;
    const std::int64_t w = cfg_.worldSize;
    auto deriveFail = [&](const std::string& what) {
      fail("train_batch_size", what + " (world_size " + std::to_string(w) + ")");
    };
    if (microSet_ && accumSet_) {
      const std::int64_t want = std::int64_t(cfg_.microBatch) * cfg_.gradAccum * w;
      if (tbs != want)
        fail("train_batch_size",
             "must equal train_micro_batch_size_per_gpu x gradient_accumulation_steps x world "
             "size = " +
                 std::to_string(cfg_.microBatch) + " x " + std::to_string(cfg_.gradAccum) + " x " + std::to_string(w) + " = " +
                 std::to_string(want) + " (got " + std::to_string(tbs) + ")");
    } else if (microSet_) {
      const std::int64_t per = std::int64_t(cfg_.microBatch) * w;
      if (tbs % per != 0)
        deriveFail("is not a multiple of train_micro_batch_size_per_gpu x world size = " + std::to_string(per) + " (got " +
                   std::to_string(tbs) + ")");
      cfg_.gradAccum = static_cast<int>(tbs / per);
    } else if (accumSet_) {
      const std::int64_t per = std::int64_t(cfg_.gradAccum) * w;
      if (tbs % per != 0)
        deriveFail("is not a multiple of gradient_accumulation_steps x world size = " + std::to_string(per) + " (got " +
                   std::to_string(tbs) + ")");
      cfg_.microBatch = static_cast<int>(tbs / per);
    } else {
      if (tbs % w != 0) deriveFail("is not a multiple of the world size (got " + std::to_string(tbs) + ")");
      cfg_.microBatch = static_cast<int>(tbs / w);
      cfg_.gradAccum = 1;
    }
  }

  const std::string& label_;
  RunConfig& cfg_;
  std::vector<std::string>* warnings_;
  std::optional<std::int64_t> trainBatch_;
  bool microSet_ = false;
  bool accumSet_ = false;
  bool precisionSet_ = false;
};

}  // namespace

RunConfig fromDeepSpeedJson(const JsonValue& json, const std::string& label, RunConfig base, std::vector<std::string>* warnings) {
  DeepSpeedReader(label, base, warnings).read(json);
  return base;
}

JsonValue toDeepSpeedJson(const RunConfig& cfg) {
  std::set<std::string> carried;  // run-config keys the DeepSpeed part expresses exactly
  JsonValue ds = JsonValue::object();
  const std::int64_t tbs = std::int64_t(cfg.microBatch) * cfg.gradAccum * cfg.worldSize;
  ds.set("train_batch_size", JsonValue::number(tbs));
  ds.set("train_micro_batch_size_per_gpu", JsonValue::number(std::int64_t(cfg.microBatch)));
  ds.set("gradient_accumulation_steps", JsonValue::number(std::int64_t(cfg.gradAccum)));
  ds.set("gradient_clipping", JsonValue::number(cfg.gradClip));
  carried.insert({"micro_batch", "grad_accum", "grad_clip"});
  if (cfg.precision == Precision::Bf16 || cfg.precision == Precision::Fp32) {
    JsonValue bf16 = JsonValue::object();
    bf16.set("enabled", JsonValue::boolean(cfg.precision == Precision::Bf16));
    ds.set("bf16", std::move(bf16));
    carried.insert("precision");
  } else {
    JsonValue fp16 = JsonValue::object();
    fp16.set("enabled", JsonValue::boolean(true));
    fp16.set("loss_scale", JsonValue::number(cfg.lossScale));
    fp16.set("initial_scale_power", JsonValue::number(std::int64_t(cfg.initialScalePower)));
    fp16.set("loss_scale_window", JsonValue::number(std::int64_t(cfg.lossScaleWindow)));
    fp16.set("hysteresis", JsonValue::number(std::int64_t(cfg.hysteresis)));
    fp16.set("min_loss_scale", JsonValue::number(cfg.minLossScale));
    ds.set("fp16", std::move(fp16));
    carried.insert({"precision", "loss_scale", "initial_scale_power", "loss_scale_window", "hysteresis", "min_loss_scale"});
  }
  if (cfg.loraRank > 0) {
    JsonValue lora = JsonValue::object();
    lora.set("r", JsonValue::number(std::int64_t(cfg.loraRank)));
    lora.set("lora_alpha", JsonValue::number(cfg.loraAlpha));
    JsonValue targets = JsonValue::array();
    for (const auto& t : loraTargetList(cfg.loraTargets)) targets.push(JsonValue::string(t + "_proj"));
    lora.set("target_modules", std::move(targets));
    ds.set("lora", std::move(lora));
    carried.insert({"lora_rank", "lora_alpha", "lora_targets"});
  }
  if (cfg.reduceDtype != ReduceDtype::SameAsParams) {
    ds.set("communication_data_type", JsonValue::string(std::string(toString(cfg.reduceDtype))));
    carried.insert("reduce_dtype");
  }

  JsonValue opt = JsonValue::object();
  JsonValue params = JsonValue::object();
  params.set("lr", JsonValue::number(cfg.lr));
  params.set("weight_decay", JsonValue::number(cfg.weightDecay));
  if (cfg.optimizer == OptimizerKind::Sgd) {
    opt.set("type", JsonValue::string("SGD"));
    params.set("momentum", JsonValue::number(cfg.momentum));
    carried.insert({"optimizer", "lr", "weight_decay", "momentum"});
  } else if (cfg.optimizer == OptimizerKind::AdamW) {
    opt.set("type", JsonValue::string("AdamW"));
    JsonValue betas = JsonValue::array();
    betas.push(JsonValue::number(cfg.beta1));
    betas.push(JsonValue::number(cfg.beta2));
    params.set("betas", std::move(betas));
    params.set("eps", JsonValue::number(cfg.eps));
    carried.insert({"optimizer", "lr", "weight_decay", "beta1", "beta2", "eps"});
  }
  if (carried.count("optimizer")) {
    opt.set("params", std::move(params));
    ds.set("optimizer", std::move(opt));
  }

  int stage = 0;
  std::string note;
  switch (cfg.strategy) {
    case Strategy::Ddp:
      stage = 0;
      break;
    case Strategy::Zero1:
      stage = 1;
      break;
    case Strategy::Zero2:
      stage = 2;
      break;
    case Strategy::Zero3:
      stage = 3;
      break;
    case Strategy::FsdpFull:
      stage = 3;
      note = "fsdp (FSDP FULL_SHARD) has no exact DeepSpeed equivalent; the closest is ZeRO stage 3";
      break;
    case Strategy::FsdpGradOp:
      stage = 2;
      note =
          "fsdp_grad_op (FSDP SHARD_GRAD_OP: parameters stay gathered from forward to backward) has no exact "
          "DeepSpeed equivalent; the closest is ZeRO stage 2";
      break;
    case Strategy::ZeroPPHpz:  // never in a RunConfig (refused when parsed); DeepSpeed's own spelling
      stage = 3;
      note = "zeropp_hpz is ZeRO stage 3 with zero_hpz_partition_size (ZeRO++)";
      break;
    case Strategy::Hsdp:
      stage = 3;
      note = "hsdp (FSDP HYBRID_SHARD) is closest to DeepSpeed MiCS: ZeRO stage 3 with mics_shard_size = " +
             std::to_string(effectiveShardGroupSize(cfg)) + " (shard inside groups, replicate across them)";
      break;
  }
  if (note.empty()) carried.insert("strategy");

  JsonValue zero = JsonValue::object();
  zero.set("stage", JsonValue::number(std::int64_t(stage)));
  auto put = [&](std::string_view dsKey, std::string_view key) {
    zero.set(std::string(dsKey), valueJson(knob(key), cfg));
    carried.insert(std::string(key));
  };
  if (stage >= 1) {
    put("reduce_bucket_size", "reduce_bucket_size");
    if (stage < 3) put("allgather_bucket_size", "allgather_bucket_size");
    if (cfg.overlapComm) put("overlap_comm", "overlap_comm");
    put("contiguous_gradients", "contiguous_gradients");
  }
  if (stage == 3) {
    put("stage3_prefetch_bucket_size", "prefetch_bucket_size");
    put("stage3_param_persistence_threshold", "param_persistence_threshold");
    put("stage3_max_live_parameters", "max_live_parameters");
    put("stage3_max_reuse_distance", "max_reuse_distance");
  }
  if (stage >= 1 && isZero(cfg.strategy)) {
    JsonValue off = JsonValue::object();
    off.set("device", JsonValue::string(std::string(toString(cfg.offloadOptimizer))));
    zero.set("offload_optimizer", std::move(off));
    carried.insert("offload_optimizer");
  }
  if (stage == 3) {
    JsonValue off = JsonValue::object();
    off.set("device", JsonValue::string(std::string(toString(cfg.offloadParam))));
    zero.set("offload_param", std::move(off));
    carried.insert("offload_param");
  }
  if (cfg.strategy == Strategy::Hsdp) zero.set("mics_shard_size", JsonValue::number(std::int64_t(effectiveShardGroupSize(cfg))));
  ds.set("zero_optimization", std::move(zero));

  JsonValue rest = JsonValue::object();
  if (!note.empty()) rest.set("note", JsonValue::string(note));
  const JsonValue all = toJson(cfg);
  for (const auto& [key, value] : all.members())
    if (!carried.count(key)) rest.set(key, value);
  ds.set("shardscope", std::move(rest));
  return ds;
}

}  // namespace shardscope::core
