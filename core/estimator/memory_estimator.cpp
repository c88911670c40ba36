#include "core/estimator/memory_estimator.h"
#include "core/config/run_config.h"
#include "core/model/model_presets.h"
#include "core/util/units.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace shardscope::core::estimator {
namespace {

std::int64_t roundUp(std::int64_t n, std::int64_t m) { return m <= 1 ? n : (n + m - 1) / m * m; }

ModelShape make(std::string name, std::int64_t vocab, std::int64_t hidden, int layers, int heads, int kv, std::int64_t headDim,
                std::int64_t ffn, bool qkNorm, bool qkvBias) {
  ModelShape m;
  m.name = std::move(name);
  m.vocab = vocab;
  m.hidden = hidden;
  m.layers = layers;
  m.heads = heads;
  m.kvHeads = kv;
  m.headDim = headDim;
  m.ffn = ffn;
  m.qkNorm = qkNorm;
  m.qkvBias = qkvBias;
  return m;
}

std::int64_t headDimOf(const ModelShape& m) { return m.headDim > 0 ? m.headDim : m.hidden / std::max(1, m.heads); }

// A module with one parameter that is not a projection (embedding, norm, head).
ModuleShape plain(std::string name, int block, std::int64_t numel) {
  ModuleShape s;
  s.name = std::move(name);
  s.block = block;
  s.params = {numel};
  return s;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Model shapes

const std::vector<std::string>& modelShapePresetNames() {
  // The published models first, then the runtime's CPU-sized ones (core/model/model_presets.h).
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const bool cpu : {false, true})
      for (const auto& p : modelPresets())
        if (p.cpuSized == cpu) n.emplace_back(p.name);
    return n;
  }();
  return names;
}

std::optional<ModelShape> modelShapePreset(std::string_view name, int layers) {
  const ModelPreset* p = findModelPreset(name);
  if (!p) return std::nullopt;
  ModelShape m =
      make(std::string(p->name), p->vocab, p->hidden, p->layers, p->heads, p->kvHeads, p->headDim, p->ffn, p->qkNorm, p->qkvBias);
  m.tiedEmbeddings = p->tiedEmbeddings;
  if (layers > 0) m.layers = layers;
  return m;
}

void validateShape(const ModelShape& m) {
  auto bad = [&](const std::string& what) { throw std::invalid_argument("model " + m.name + ": " + what); };
  if (m.vocab <= 0) bad("vocab must be positive");
  if (m.hidden <= 0) bad("hidden must be positive");
  if (m.layers <= 0) bad("layers must be positive");
  if (m.heads <= 0) bad("heads must be positive");
  if (m.kvHeads <= 0) bad("kv heads must be positive");
  if (m.heads % m.kvHeads != 0)
    bad("heads (" + std::to_string(m.heads) + ") must be a multiple of kv heads (" + std::to_string(m.kvHeads) + ")");
  if (m.ffn <= 0) bad("ffn must be positive");
  if (m.headDim < 0) bad("head dim must not be negative");
  if (headDimOf(m) <= 0) bad("head dim is zero (hidden smaller than heads)");
}

std::int64_t ModuleShape::numel() const {
  std::int64_t n = 0;
  for (auto p : params) n += p;
  return n;
}

std::vector<ModuleShape> moduleShapes(const ModelShape& m) {
  const std::int64_t h = m.hidden, d = headDimOf(m), q = m.heads * d, kv = m.kvHeads * d, f = m.ffn;
  std::vector<ModuleShape> out;
  out.push_back(plain("embed_tokens", 0, m.vocab * h));
  for (int l = 0; l < m.layers; ++l) {
    const std::string pre = "layers." + std::to_string(l) + ".";
    const int b = l + 1;
    out.push_back(plain(pre + "input_layernorm", b, h));
    // A linear [out x in] named `kind` (its LoRA target name), with a bias when `bias`.
    auto linear = [&](const std::string& n, const char* kind, std::int64_t o, std::int64_t i, bool bias) {
      ModuleShape s;
      s.name = pre + n;
      s.block = b;
      s.params = {o * i};
      if (bias) s.params.push_back(o);
      s.proj = kind;
      s.in = i;
      s.out = o;
      out.push_back(std::move(s));
    };
    linear("self_attn.q_proj", "q", q, h, m.qkvBias);
    linear("self_attn.k_proj", "k", kv, h, m.qkvBias);
    linear("self_attn.v_proj", "v", kv, h, m.qkvBias);
    if (m.qkNorm) {
      out.push_back(plain(pre + "self_attn.q_norm", b, d));
      out.push_back(plain(pre + "self_attn.k_norm", b, d));
    }
    linear("self_attn.o_proj", "o", h, q, false);
    out.push_back(plain(pre + "post_attention_layernorm", b, h));
    linear("mlp.gate_proj", "gate", f, h, false);
    linear("mlp.up_proj", "up", f, h, false);
    linear("mlp.down_proj", "down", h, f, false);
  }
  out.push_back(plain("norm", m.layers + 1, h));
  if (!m.tiedEmbeddings) out.push_back(plain("lm_head", m.layers + 1, m.vocab * h));
  return out;
}

// ---------------------------------------------------------------------------------------------
// Fine-tuning

FineTuning fineTuning(const EstimateInput& in) {
  if (in.loraRank <= 0) return FineTuning::Full;
  return in.qlora ? FineTuning::Qlora : FineTuning::Lora;
}

std::string fineTuningName(FineTuning f) {
  switch (f) {
    case FineTuning::Full:
      return "full";
    case FineTuning::Lora:
      return "lora";
    case FineTuning::Qlora:
      return "qlora";
  }
  return "?";
}

std::vector<ModuleShape> moduleShapes(const EstimateInput& in) {
  auto mods = moduleShapes(in.model);
  if (in.loraRank < 0) throw std::invalid_argument("LoRA rank must not be negative");
  if (in.loraRank == 0) {
    if (in.qlora) throw std::invalid_argument("QLoRA trains LoRA adapters: give a LoRA rank (--lora-rank R)");
    return mods;
  }
  if (in.qlora && in.precision == Precision::Fp32)
    throw std::invalid_argument("QLoRA computes in bf16 (NF4 weights dequantised to 16 bits): use --precision bf16");
  if (!(in.loraAlpha > 0) || !std::isfinite(in.loraAlpha)) throw std::invalid_argument("LoRA alpha must be a positive number");
  std::string problem;
  const auto targets = loraTargetList(in.loraTargets, &problem);
  if (!problem.empty()) throw std::invalid_argument("LoRA targets: " + problem);
  const std::int64_t r = in.loraRank;
  for (auto& mod : mods) {
    mod.frozen = true;
    if (mod.proj.empty()) continue;
    mod.quantised = in.qlora;
    if (std::find(targets.begin(), targets.end(), mod.proj) != targets.end()) mod.adapters = {r * mod.in, mod.out * r};
  }
  return mods;
}

std::int64_t trainableParameterCount(const EstimateInput& in) {
  if (in.loraRank <= 0) return parameterCount(in.model);
  std::int64_t n = 0;
  for (const auto& mod : moduleShapes(in))
    for (auto a : mod.adapters) n += a;
  return n;
}

std::int64_t frozenParameterCount(const EstimateInput& in) { return in.loraRank > 0 ? parameterCount(in.model) : 0; }

std::int64_t nf4Bytes(std::int64_t n) {
  if (n <= 0) return 0;
  const std::int64_t blocks = (n + 63) / 64;  // one 8-bit absmax per 64 weights
  return (n + 1) / 2 + blocks + 4 * ((blocks + 255) / 256);
}

std::int64_t frozenBytes(const ModuleShape& mod, std::int64_t computeBytes) {
  if (!mod.frozen) return 0;
  std::int64_t b = 0;
  for (std::size_t i = 0; i < mod.params.size(); ++i)
    b += mod.quantised && i == 0 ? nf4Bytes(mod.params[i]) : computeBytes * mod.params[i];
  return b;
}

std::int64_t frozenBaseBytes(const EstimateInput& in) {
  const std::int64_t c = in.precision == Precision::Fp32 ? 4 : 2;
  std::int64_t b = 0;
  for (const auto& mod : moduleShapes(in)) b += frozenBytes(mod, c);
  return b;
}

std::int64_t parameterCount(const ModelShape& m) {
  std::int64_t n = 0;
  for (const auto& s : moduleShapes(m)) n += s.numel();
  return n;
}

std::int64_t parameterTensorCount(const ModelShape& m) {
  std::int64_t n = 0;
  for (const auto& s : moduleShapes(m)) n += static_cast<std::int64_t>(s.params.size());
  return std::max<std::int64_t>(1, n);
}

std::int64_t blockParameterCount(const ModelShape& m) {
  std::int64_t n = 0;
  for (const auto& s : moduleShapes(m))
    if (s.block == 1) n += s.numel();
  return n;
}

std::int64_t largestModuleParameters(const ModelShape& m) {
  std::int64_t ll = 0;
  for (const auto& s : moduleShapes(m)) ll = std::max(ll, s.numel());
  return ll;
}

std::vector<std::int64_t> fsdpUnitSizes(const ModelShape& m) {
  std::vector<std::int64_t> units(static_cast<std::size_t>(m.layers + 2), 0);
  for (const auto& s : moduleShapes(m)) units[static_cast<std::size_t>(s.block)] += s.numel();
  return units;
}

// ---------------------------------------------------------------------------------------------
// Strategies

AttentionKind effectiveAttention(const EstimateInput& in) {
  if (in.attention) return *in.attention;
  // The CPU-sized presets run on the runtime's CPU path (eager attention); the published ones on GPUs.
  const ModelPreset* p = findModelPreset(in.model.name);
  return (p && p->cpuSized) ? AttentionKind::Eager : AttentionKind::Flash;
}

int nodeCount(const EstimateInput& in) {
  const int gpn = std::max(1, in.gpusPerNode);
  return (in.gpus + gpn - 1) / gpn;
}

int effectiveShardGroup(const EstimateInput& in, Strategy s) {
  if (in.shardGroupSize > 0) return in.shardGroupSize;
  if (s == Strategy::Hsdp && in.gpus <= in.gpusPerNode && in.gpus >= 4 && in.gpus % 2 == 0) return in.gpus / 2;
  return std::max(1, std::min(in.gpus, in.gpusPerNode));
}

int fsdpShardCount(const EstimateInput& in, Strategy s) {
  const int W = in.gpus;
  const int N = s == Strategy::Hsdp ? effectiveShardGroup(in, s) : W;
  if (N < 1 || W % N != 0)
    throw std::invalid_argument("shard group size " + std::to_string(N) + " must divide gpus " + std::to_string(W));
  return N;
}

// ---------------------------------------------------------------------------------------------
// Activations

ActivationMoments activationMoments(const EstimateInput& in) {
  const ModelShape& m = in.model;
  const std::int64_t a = in.precision == Precision::Fp32 ? 4 : 2;  // compute dtype bytes
  const std::int64_t T = in.microBatch * in.seqLen, s = in.seqLen, h = m.hidden, f = m.ffn, d = headDimOf(m);
  const std::int64_t q = m.heads * d, kv = m.kvHeads * d, V = m.vocab;
  const std::int64_t L = m.layers;
  std::int64_t perLayer = 0, base = 0, keptPerLayer = 0, flowing = 0;
  if (effectiveAttention(in) == AttentionKind::Eager) {
    // Our runtime (saved-tensor count of profiler/runtime/model.cpp, checked against the counting
    // allocator): per token 12 hidden-sized tensors (norm outputs, rotated q, repeated k/v, attention
    // output, residual, MLP input), 4 ffn-sized ones (gate, up, silu, product), two fp32 rsqrt
    // statistics, one heads·s softmax probability row, and the s×s causal mask (bool) per layer.
    perLayer = T * (a * (12 * h + 4 * f) + 8) + T * a * m.heads * s + s * s;
    if (m.qkNorm) perLayer += T * a * 2 * (q + kv);  // q/k norm inputs and outputs
    if (m.qkvBias) perLayer += T * a * (q + 2 * kv);
    // Head and loss: logits, their fp32 log-softmax and its gradient (3 V-sized fp32 rows per token),
    // four hidden-sized rows (embedding output, final norm), the int64 tokens and targets, and the
    // rotary cos/sin tables.
    base = T * (V * (a + 8) + 4 * h * a + 4 + 16) + 2 * s * d * a;
    keptPerLayer = T * h * a;  // checkpointing keeps each block's input
    // A block's backward: the gradient of its output and of the attention output, and of the
    // softmax probabilities (heads·s per token).
    flowing = T * a * (2 * h + m.heads * s);
  } else {
    // Fused attention, bf16: strategies.md §2.6 (12h + 4·kv_dim + 8f bytes at 2 B per element).
    perLayer = T * a * (6 * h + 2 * kv + 4 * f);
    if (m.qkNorm) perLayer += T * a * (q + kv);
    base = T * (V * 8 + 2 * h * a + 16);  // fp32 logits and their gradient, embedding output, tokens
    keptPerLayer = T * h * a;
    flowing = T * a * 2 * h;  // the fused kernel keeps no probabilities
  }
  if (in.loraRank > 0) {
    // LoRA: each target projection also saves its low-rank intermediate x·Aᵀ (r per token) for B's
    // gradient; the input x is saved as before (A's gradient needs it).
    const auto targets = loraTargetList(in.loraTargets);
    perLayer += T * a * in.loraRank * static_cast<std::int64_t>(targets.size());
  }
  ActivationMoments am;
  checkCheckpointing(in);
  if (in.selective == EstimateInput::Selective::Ops) {
    // Kept per block: its input, the attention output and its fp32 log-sum-exp (heads per token),
    // and the q, v, gate and down projections' outputs; the block recomputed in its backward holds
    // at most a whole block's tensors again (an upper bound: the kept ones are not recomputed).
    const std::int64_t kept = T * (a * (h + q + q + kv + f + h) + 4 * m.heads);
    am.headBackward = L * kept + base;
    am.blockBackward = L * kept + perLayer + flowing;
    return am;
  }
  if (in.selective == EstimateInput::Selective::Layers) {
    const std::int64_t every = in.sacEvery;
    const std::int64_t checkpointed = (L + every - 1) / every;  // blocks 0, N, 2N, ...
    const std::int64_t kept = (L - checkpointed) * perLayer + checkpointed * keptPerLayer;
    am.headBackward = kept + base;
    am.blockBackward = kept + perLayer + flowing;
    return am;
  }
  if (!in.activationCheckpointing) {
    am.headBackward = L * perLayer + base;
    return am;
  }
  am.headBackward = L * keptPerLayer + base;
  am.blockBackward = L * keptPerLayer + perLayer + flowing;
  return am;
}

void checkCheckpointing(const EstimateInput& in) {
  using S = EstimateInput::Selective;
  if (in.selective != S::None && in.activationCheckpointing)
    throw std::invalid_argument("selective activation checkpointing and full activation checkpointing exclude each other");
  if (in.selective == S::Layers && in.sacEvery < 1)
    throw std::invalid_argument("selective checkpointing every N layers needs N >= 1");
  if (in.selective == S::Ops && effectiveAttention(in) == AttentionKind::Eager)
    throw std::invalid_argument("selective op checkpointing is modelled with fused attention (--attention flash)");
}

std::string selectiveName(const EstimateInput& in) {
  switch (in.selective) {
    case EstimateInput::Selective::Ops:
      return "op";
    case EstimateInput::Selective::Layers:
      return "layer:" + std::to_string(in.sacEvery);
    case EstimateInput::Selective::None:
      break;
  }
  return "";
}

std::int64_t activationBytes(const EstimateInput& in) {
  const auto am = activationMoments(in);
  return std::max(am.headBackward, am.blockBackward);
}

// ---------------------------------------------------------------------------------------------
// Model states

MemoryEstimate estimateMemory(const EstimateInput& in, Strategy s) {
  validateShape(in.model);
  if (in.gpus < 1) throw std::invalid_argument("gpus must be at least 1");
  if (in.gpusPerNode < 1) throw std::invalid_argument("gpus per node must be at least 1");
  if (in.microBatch < 1 || in.seqLen < 1) throw std::invalid_argument("micro-batch and sequence length must be positive");
  if (in.offloadParam && !shardsParameters(s))
    throw std::invalid_argument(
        "parameter offload needs a strategy that shards parameters (zero3, fsdp, "
        "fsdp_grad_op, hsdp, zeropp_hpz), not " +
        strategyName(s));
  const bool fp32 = in.precision == Precision::Fp32;
  const std::int64_t w = fp32 ? 4 : 2;       // 16-bit (or fp32) parameter copy; frozen weights in this dtype too
  const std::int64_t g = fp32 ? 4 : 2;       // gradients in the compute dtype
  const std::int64_t master = fp32 ? 0 : 4;  // fp32 master weights beside 16-bit parameters
  const std::int64_t adam = 8;               // fp32 exp_avg + exp_avg_sq
  const std::int64_t W = in.gpus;
  const std::int64_t P = parameterCount(in.model);
  // Fine-tuning: the trainable tensors of each module (every parameter for full fine-tuning, the
  // adapters with LoRA) follow the strategy's rules as before; the frozen base is held in the
  // compute dtype (NF4 projections with QLoRA), whole or sharded, and has no gradient or state.
  const auto mods = moduleShapes(in);
  const bool lora = in.loraRank > 0;
  auto trainableOf = [&](const ModuleShape& m) -> const std::vector<std::int64_t>& { return lora ? m.adapters : m.params; };
  const std::int64_t T = lora ? trainableParameterCount(in) : P;
  std::vector<std::int64_t> tUnits(static_cast<std::size_t>(in.model.layers + 2), 0), fUnits(tUnits.size(), 0);
  std::int64_t largestQuantised = 0;
  for (const auto& mod : mods) {
    for (auto n : trainableOf(mod)) tUnits[static_cast<std::size_t>(mod.block)] += n;
    fUnits[static_cast<std::size_t>(mod.block)] += frozenBytes(mod, w);
    if (mod.quantised) largestQuantised = std::max(largestQuantised, mod.params.front());
  }

  MemoryEstimate e;
  e.strategy = s;
  MemoryBreakdown st, pk;
  std::int64_t peakOnlyGathered = 0, peakOnlyBuffers = 0, gradCopies = 0, afterStepBuffers = 0;
  // With checkpointing, the weight gradients autograd produces for one unit before the engine
  // copies them into its reduce-scatter buffer (FSDP).
  std::int64_t unitWeightGrads = 0;
  const ActivationMoments acts = activationMoments(in);

  auto moveOptimizer = [&](std::int64_t bytes) {
    if (in.offloadOptimizer) {
      e.cpuBytes += bytes;
      return std::int64_t{0};
    }
    return bytes;
  };

  switch (s) {
    case Strategy::Ddp:
    case Strategy::Zero1:
    case Strategy::Zero2: {
      const int stage = s == Strategy::Ddp ? 0 : s == Strategy::Zero1 ? 1 : 2;
      if (stage == 0 && in.offloadOptimizer)
        throw std::invalid_argument("optimizer offload needs a ZeRO or FSDP strategy, not ddp");
      const std::int64_t padded = stage == 0 ? T : roundUp(T, W);
      st.parameters = w * padded;
      st.frozen = frozenBaseBytes(in);  // replicated on every device
      if (stage == 0) {
        st.gradients = g * T;
        if (!in.gradientAsBucketView) gradCopies = g * T;  // param.grad beside the bucket storage
        st.optimizer = (master + adam) * T;
      } else {
        st.gradients = stage == 1 ? g * padded : g * padded / W;
        st.optimizer = moveOptimizer((master + adam) * padded / W);
        if (stage == 2) {
          const bool overlap = in.overlapComm.value_or(false);
          st.buffers = std::max<std::int64_t>(1, std::min(in.reduceBucketSize, padded)) * g * (overlap ? 2 : 1);
        }
      }
      if (stage == 0 && !in.gradientAsBucketView)
        e.notes.push_back("DDP keeps param.grad beside its gradient buckets (+" + formatBytes(static_cast<double>(gradCopies)) +
                          " at the end of backward; --gradient-as-bucket-view removes it)");
      st.gradients += gradCopies;
      if (stage > 0) {
        // The all-gather of the updated partitions, allgather_bucket_size elements per rank at a time,
        // into the flat parameters (each rank's piece a view): only the backend's flat staging
        // buffer of one piece from every rank (Gloo's and NCCL's for outputs that are not one
        // contiguous tensor).
        const std::int64_t chunk = std::max<std::int64_t>(1, std::min(in.allgatherBucketSize, padded / W));
        afterStepBuffers = w * chunk * W;
      }
      break;
    }
    case Strategy::Zero3:
    case Strategy::ZeroPPHpz: {
      // Fetch unit = module; parameters below the persistence threshold stay whole on every rank.
      // The frozen base (LoRA) splits the same way: large tensors sharded (their bytes padded to
      // the ranks), small ones (norms, biases) whole; it has no gradient and no optimizer state.
      std::int64_t shards = 0, persistentFull = 0, nonPersistent = 0, groupsPadded = 0;
      std::int64_t frozenShard = 0, frozenWhole = 0, frozenGathered = 0, largestGathered = 0;
      for (const auto& mod : mods) {
        std::int64_t big = 0, small = 0;
        for (auto n : trainableOf(mod)) (n < in.paramPersistenceThreshold ? small : big) += n;
        for (int k = 0; k < 2; ++k) {
          const std::int64_t part = k == 0 ? big : small;
          if (part == 0) continue;
          const std::int64_t padded = roundUp(part, W);
          shards += padded / W;
          groupsPadded += padded;
          if (k == 1) persistentFull += padded;  // kept whole on every rank
        }
        nonPersistent += roundUp(big, W) * (big > 0 ? 1 : 0);
        std::int64_t gathered = w * roundUp(big, W);
        if (mod.frozen) {
          std::int64_t fBig = 0, fSmall = 0;
          for (std::size_t i = 0; i < mod.params.size(); ++i) {
            const std::int64_t n = mod.params[i];
            const std::int64_t bytes = mod.quantised && i == 0 ? nf4Bytes(n) : w * n;
            (n < in.paramPersistenceThreshold ? fSmall : fBig) += bytes;
          }
          const std::int64_t padded = roundUp(fBig, w * W);
          frozenShard += padded / W;
          frozenGathered += padded;
          frozenWhole += fSmall;
          gathered += padded;
        }
        largestGathered = std::max(largestGathered, gathered);
      }
      st.parameters = w * (shards + persistentFull);
      st.frozen = frozenShard + frozenWhole;
      st.gradients = g * shards;
      st.optimizer = moveOptimizer((master + adam) * shards);
      const bool overlap = in.overlapComm.value_or(true);
      const std::int64_t ipg = roundUp(std::max<std::int64_t>(1, std::min(in.reduceBucketSize, groupsPadded)), W);
      st.buffers = ipg * g * (overlap ? 2 : 1);
      if (s == Strategy::ZeroPPHpz) {
        const std::int64_t G = effectiveShardGroup(in, s);
        if (G < 1 || W % G != 0)
          throw std::invalid_argument("hpZ partition size " + std::to_string(G) + " must divide gpus " + std::to_string(W));
        // Secondary 16-bit partition inside the node (of the frozen base too: it is gathered in backward).
        const std::int64_t secondary =
            lora ? w * roundUp(T, G) / G + roundUp(frozenBaseBytes(in), w * G) / G : w * roundUp(P, G) / G;
        st.parameters += secondary;
        e.notes.push_back("hpZ secondary partition: " + formatBytes(static_cast<double>(secondary)) + " (2Ψ/" +
                          std::to_string(G) + ")");
      }
      if (in.offloadParam) {
        e.cpuBytes += w * shards + g * shards + frozenShard;
        st.parameters -= w * shards;
        st.frozen -= frozenShard;
        st.gradients = 0;
      }
      // Gathered at the peak: with a reuse distance longer than a whole step's fetches, every module
      // stays gathered from its forward to its backward; otherwise the live set is bounded by the
      // largest module plus the prefetch bucket (and max_live_parameters).
      if (2 * P <= in.maxReuseDistance) {
        peakOnlyGathered = w * nonPersistent + frozenGathered;
        if (nonPersistent + frozenGathered > 0)
          e.notes.push_back("stage3_max_reuse_distance (" + std::to_string(in.maxReuseDistance) +
                            ") exceeds 2Ψ: gathered modules stay resident from forward to backward");
      } else if (!lora) {
        peakOnlyGathered = w * std::min(in.maxLiveParameters, largestModuleParameters(in.model) + in.prefetchBucketSize);
      } else {
        peakOnlyGathered = std::min(w * in.maxLiveParameters, largestGathered + w * in.prefetchBucketSize);
      }
      break;
    }
    case Strategy::FsdpFull:
    case Strategy::FsdpGradOp:
    case Strategy::Hsdp: {
      const std::int64_t N = fsdpShardCount(in, s);
      // Flat parameter per unit, padded to the shard count; the shards are fp32 (they are the
      // optimizer's master copy), only the gathered copy is in the compute dtype. The frozen base
      // (LoRA) is a flat buffer of its own per unit in the compute dtype (NF4 bytes with QLoRA),
      // padded to the shard count, gathered with the unit.
      std::int64_t shards = 0, frozenShard = 0, maxBlockGathered = 0, maxBlockT = 0, maxUnitT = 0, all = 0;
      for (std::size_t u = 0; u < tUnits.size(); ++u) {
        const std::int64_t tp = roundUp(tUnits[u], N), fp = roundUp(fUnits[u], w * N);
        shards += tp / N;
        frozenShard += fp / N;
        all += w * tp + fp;
        maxUnitT = std::max(maxUnitT, tp);
        if (u > 0 && u + 1 < tUnits.size()) {
          maxBlockGathered = std::max(maxBlockGathered, w * tp + fp);
          maxBlockT = std::max(maxBlockT, tp);
        }
      }
      const std::int64_t head = w * roundUp(tUnits.back(), N) + roundUp(fUnits.back(), w * N);
      st.parameters = 4 * shards;
      st.frozen = frozenShard;
      st.gradients = 4 * shards;
      st.optimizer = moveOptimizer(adam * shards);
      if (in.offloadParam) {
        e.cpuBytes += st.parameters + st.gradients + st.frozen;
        st.parameters = 0;
        st.gradients = 0;
        st.frozen = 0;
      }
      // At the start of backward: the root (head) unit kept from forward, the next unit prefetched
      // (BACKWARD_PRE: the last block); SHARD_GRAD_OP keeps every unit gathered until the end of
      // backward. One unit's unsharded gradient (the largest) is the reduce-scatter input.
      peakOnlyGathered = s == Strategy::FsdpGradOp ? all : head + maxBlockGathered;
      peakOnlyBuffers = g * maxUnitT;
      unitWeightGrads = g * maxBlockT;
      if (s == Strategy::Hsdp)
        e.notes.push_back("HSDP: sharded over groups of " + std::to_string(N) + ", replicated across " + std::to_string(W / N));
      break;
    }
  }
  if (largestQuantised > 0) {
    // QLoRA dequantises each NF4 projection to 16 bits for its matmul: one transient copy of the largest.
    peakOnlyBuffers += 2 * largestQuantised;
    e.notes.push_back("QLoRA: NF4 weights dequantised per use, a transient 16-bit copy of the largest projection (" +
                      formatBytes(2.0 * static_cast<double>(largestQuantised)) + ")");
  }

  e.state = st;
  // Peak, phase A (start of backward): persistent state without DDP's param.grad copies, plus the
  // gathered units, transient buffers and the activations.
  pk = st;
  pk.gradients -= gradCopies;
  pk.gathered = peakOnlyGathered;
  pk.buffers += peakOnlyBuffers;
  pk.activations = acts.headBackward;
  std::int64_t peakA = pk.modelStates() + pk.gathered + pk.activations;
  // Phase R (checkpointing: a block recomputed for its backward, the last one at worst): the head's
  // activations gone, one block's and what flows through it instead; DDP's param.grad copies of
  // every block but that one and the embedding made; FSDP's unit weight gradients beside its
  // reduce-scatter buffer.
  if (acts.blockBackward > 0) {
    MemoryBreakdown r = st;
    r.gradients -= std::min(gradCopies, g * (tUnits.front() + (tUnits.size() > 2 ? tUnits[1] : 0)));
    r.gathered = peakOnlyGathered;
    r.buffers += peakOnlyBuffers;
    r.activations = acts.blockBackward + unitWeightGrads;
    const std::int64_t peakR = r.modelStates() + r.gathered + r.activations;
    if (peakR > peakA) {
      pk = r;
      peakA = peakR;
    }
  }
  // Phase B (end of backward): every gradient copy, activations gone.
  const std::int64_t peakB = st.modelStates() + pk.gathered;
  if (peakB > peakA) {
    pk = st;
    pk.gathered = peakOnlyGathered;
    peakA = peakB;
  }
  // Phase C (ZeRO-1/2, the all-gather after the step): no activations, the all-gather buffers.
  const std::int64_t peakC = afterStepBuffers > 0 ? st.modelStates() + afterStepBuffers : 0;
  if (peakC > peakA) {
    pk = st;
    pk.buffers += afterStepBuffers;
    peakA = peakC;
  }
  e.atPeak = pk;
  e.peakBytes = peakA;
  if (in.offloadOptimizer) e.notes.push_back("optimizer state on the CPU: " + formatBytes(static_cast<double>(e.cpuBytes)));
  return e;
}

// ---------------------------------------------------------------------------------------------
// DeepSpeed's estimators (verbatim arithmetic, int() truncation like Python's)

DeepSpeedEstimate deepspeedZero2(std::int64_t totalParams, int gpusPerNode, int nodes, bool cpuOffload,
                                 double additionalBufferFactor) {
  const std::int64_t totalGpus = static_cast<std::int64_t>(nodes) * gpusPerNode;
  if (totalGpus < 1) throw std::invalid_argument("DeepSpeed estimator: at least one GPU");
  DeepSpeedEstimate r;
  const double P = static_cast<double>(totalParams);
  if (cpuOffload) {
    r.gpuBytes = 2 * totalParams;
    r.cpuBytes =
        static_cast<std::int64_t>(P * static_cast<double>(std::max<std::int64_t>(4 * totalGpus, 16)) * additionalBufferFactor);
  } else {
    // GPU's total_params multipliers: 2 = params_16bit,
    // 18 = 2_grads_16bit + 4_grads_32bit + 4_params_32bit + 8_optimizer_states_32bit
    r.gpuBytes = 2 * totalParams + static_cast<std::int64_t>(18.0 * P / static_cast<double>(totalGpus));
    r.cpuBytes = static_cast<std::int64_t>(P * 4 * gpusPerNode * additionalBufferFactor);
  }
  return r;
}

DeepSpeedEstimate deepspeedZero3(std::int64_t totalParams, std::int64_t largestLayerParams, int gpusPerNode, int nodes,
                                 bool cpuOffload, bool cpuOffloadParams, bool zeroInit, double additionalBufferFactor) {
  const std::int64_t totalGpus = static_cast<std::int64_t>(nodes) * gpusPerNode;
  if (totalGpus < 1) throw std::invalid_argument("DeepSpeed estimator: at least one GPU");
  const double P = static_cast<double>(totalParams), gpusFactor = 1.0 / nodes, abf = additionalBufferFactor;
  DeepSpeedEstimate r;
  r.largestLayerBytes = 4 * largestLayerParams;
  if (cpuOffload) {
    if (cpuOffloadParams) {
      r.gpuBytes = r.largestLayerBytes;
      r.cpuBytes = static_cast<std::int64_t>(zeroInit ? P * 18 * gpusFactor * abf
                                                      : P * std::max(4.0 * gpusPerNode, 18 * gpusFactor) * abf);
    } else {
      r.gpuBytes = r.largestLayerBytes + static_cast<std::int64_t>(2.0 * P / static_cast<double>(totalGpus));
      r.cpuBytes = static_cast<std::int64_t>(zeroInit ? P * 16 * gpusFactor * abf
                                                      : P * std::max(4.0 * gpusPerNode, 16 * gpusFactor) * abf);
    }
  } else {
    r.gpuBytes = r.largestLayerBytes + static_cast<std::int64_t>(18.0 * P / static_cast<double>(totalGpus));
    r.cpuBytes = static_cast<std::int64_t>(zeroInit ? static_cast<double>(largestLayerParams) * 4 * gpusPerNode * abf
                                                    : P * 4 * gpusPerNode * abf);
  }
  return r;
}

// ---------------------------------------------------------------------------------------------

FitResult checkFit(std::int64_t neededBytes, std::int64_t deviceBytes, double headroom) {
  if (deviceBytes <= 0) throw std::invalid_argument("device memory must be positive");
  if (!(headroom >= 0 && headroom < 1)) throw std::invalid_argument("headroom must be in [0, 1)");
  FitResult f;
  f.deviceBytes = deviceBytes;
  f.usableBytes = static_cast<std::int64_t>(std::floor(static_cast<double>(deviceBytes) * (1.0 - headroom)));
  f.freeBytes = f.usableBytes - neededBytes;
  f.fits = neededBytes <= f.usableBytes;
  f.usedFraction = static_cast<double>(neededBytes) / static_cast<double>(deviceBytes);
  return f;
}

std::optional<std::int64_t> parseByteSize(std::string_view text) {
  std::string t;
  for (char c : text)
    if (!std::isspace(static_cast<unsigned char>(c))) t.push_back(c);
  if (t.empty()) return std::nullopt;
  std::size_t i = 0;
  while (i < t.size() && (std::isdigit(static_cast<unsigned char>(t[i])) || t[i] == '.')) ++i;
  if (i == 0) return std::nullopt;
  double v = 0;
  try {
    std::size_t used = 0;
    v = std::stod(t.substr(0, i), &used);
    if (used != i) return std::nullopt;
  } catch (...) {
    return std::nullopt;
  }
  std::string unit;
  for (std::size_t k = i; k < t.size(); ++k) unit.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(t[k]))));
  double mult = 0;
  if (unit.empty() || unit == "b")
    mult = 1;
  else if (unit == "k" || unit == "kb")
    mult = 1e3;
  else if (unit == "m" || unit == "mb")
    mult = 1e6;
  else if (unit == "g" || unit == "gb")
    mult = 1e9;
  else if (unit == "t" || unit == "tb")
    mult = 1e12;
  else if (unit == "kib")
    mult = 1024.0;
  else if (unit == "mib")
    mult = 1024.0 * 1024;
  else if (unit == "gib")
    mult = 1024.0 * 1024 * 1024;
  else if (unit == "tib")
    mult = 1024.0 * 1024 * 1024 * 1024;
  else
    return std::nullopt;
  const double bytes = v * mult;
  if (!(bytes > 0) || bytes > 9.0e18) return std::nullopt;
  return static_cast<std::int64_t>(std::llround(bytes));
}

std::string formatBytes(double bytes) { return core::formatBytes(bytes); }  // core/util/units.h

// ---------------------------------------------------------------------------------------------
// JSON

JsonValue toJson(const MemoryBreakdown& b) {
  JsonValue o = JsonValue::object();
  o.set("parameters", JsonValue::number(b.parameters));
  o.set("frozen_base", JsonValue::number(b.frozen));
  o.set("gradients", JsonValue::number(b.gradients));
  o.set("optimizer", JsonValue::number(b.optimizer));
  o.set("buffers", JsonValue::number(b.buffers));
  o.set("gathered", JsonValue::number(b.gathered));
  o.set("activations", JsonValue::number(b.activations));
  o.set("model_states", JsonValue::number(b.modelStates()));
  return o;
}

JsonValue toJson(const MemoryEstimate& m) {
  JsonValue o = JsonValue::object();
  o.set("model_state", toJson(m.state));
  o.set("at_peak", toJson(m.atPeak));
  o.set("peak_bytes", JsonValue::number(m.peakBytes));
  o.set("cpu_bytes", JsonValue::number(m.cpuBytes));
  return o;
}

JsonValue toJson(const DeepSpeedEstimate& d) {
  JsonValue o = JsonValue::object();
  o.set("gpu_bytes", JsonValue::number(d.gpuBytes));
  o.set("cpu_bytes", JsonValue::number(d.cpuBytes));
  if (d.largestLayerBytes > 0) o.set("largest_layer_bytes", JsonValue::number(d.largestLayerBytes));
  return o;
}

}  // namespace shardscope::core::estimator
