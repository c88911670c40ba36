#include "profiler/runtime/model.h"

#include <torch/version.h>
#ifdef SHARDSCOPE_WITH_CUDA
#include <ATen/cuda/CUDAGeneratorImpl.h>
#endif

#if TORCH_VERSION_MAJOR >= 2
#define SHARDSCOPE_HAVE_SDPA 1
#else
#define SHARDSCOPE_HAVE_SDPA 0
#endif

#include <algorithm>
#include <atomic>
#include <cmath>
#include <thread>
#include <stdexcept>

#include "core/model/model_presets.h"

namespace shardscope::runtime {

namespace {}  // namespace

std::vector<std::string> modelPresetNames() {
  std::vector<std::string> names;
  for (const auto n : core::modelPresetNames()) names.emplace_back(n);
  return names;
}

ModelConfig modelPreset(const std::string& name, int layers) {
  const core::ModelPreset* p = core::findModelPreset(name);
  if (!p) throw std::invalid_argument("unknown model preset '" + name + "'");
  ModelConfig c;
  c.name = std::string(p->name);
  c.vocab = p->vocab;
  c.hidden = p->hidden;
  c.layers = p->layers;
  c.heads = p->heads;
  c.kvHeads = p->kvHeads;
  c.headDim = p->headDim;
  c.ffn = p->ffn;
  c.ropeTheta = p->ropeTheta;
  c.normEps = p->normEps;
  c.qkNorm = p->qkNorm;
  c.qkvBias = p->qkvBias;
  if (layers > 0) c.layers = layers;
  return c;
}

std::string blockName(const ModelLayout& layout, int block) {
  if (block == 0) return "embed_tokens";
  if (block == layout.config.layers + 1) return "lm_head";
  return "layers." + std::to_string(block - 1);
}

std::vector<int> ModelLayout::blockOfParam() const {
  std::vector<int> out(params.size());
  for (std::size_t p = 0; p < params.size(); ++p) out[p] = modules[static_cast<std::size_t>(params[p].module)].block;
  return out;
}

ModelLayout buildLayout(const ModelConfig& cfg) {
  ModelLayout L;
  L.config = cfg;
  L.blocks = cfg.layers + 2;
  const std::int64_t h = cfg.hidden, q = cfg.heads * cfg.headDim, kv = cfg.kvHeads * cfg.headDim;
  const double projStd = 0.02 / std::sqrt(2.0 * cfg.layers);
  auto addModule = [&](std::string name, int block) {
    ModuleInfo m;
    m.name = std::move(name);
    m.block = block;
    L.modules.push_back(std::move(m));
    return static_cast<int>(L.modules.size() - 1);
  };
  const bool lora = cfg.loraRank > 0;
  int baseParams = 0, adapterParams = 0;
  if (lora) L.loraScale = cfg.loraAlpha / cfg.loraRank;
  auto addParam = [&](int module, const std::string& leaf, std::vector<std::int64_t> shape, InitKind init, double stdev = 0.02) {
    ParamInfo p;
    p.trainable = !lora;
    p.initIndex = baseParams++;
    p.name = L.modules[static_cast<std::size_t>(module)].name + "." + leaf;
    p.shape = std::move(shape);
    p.numel = 1;
    for (auto d : p.shape) p.numel *= d;
    p.module = module;
    p.init = init;
    p.stdev = stdev;
    L.modules[static_cast<std::size_t>(module)].params.push_back(static_cast<int>(L.params.size()));
    L.modules[static_cast<std::size_t>(module)].numel += p.numel;
    L.totalNumel += p.numel;
    if (p.trainable) L.trainableNumel += p.numel;
    L.params.push_back(std::move(p));
    return static_cast<int>(L.params.size() - 1);
  };
  auto isTarget = [&](const std::string& t) {
    return std::find(cfg.loraTargets.begin(), cfg.loraTargets.end(), t) != cfg.loraTargets.end();
  };
  // A projection [out x in]: weight, optional bias, and under LoRA (a target) its adapters. A is
  // drawn like PEFT's kaiming-uniform A (the same variance, 1 / (3·in)), B starts at zero, so the
  // adapted model starts as the base model.
  auto addLinear = [&](int module, std::int64_t out, std::int64_t in, bool bias, double stdev, const std::string& target) {
    auto& m = L.modules[static_cast<std::size_t>(module)];
    m.weight = addParam(module, "weight", {out, in}, InitKind::Normal, stdev);
    if (bias) L.modules[static_cast<std::size_t>(module)].bias = addParam(module, "bias", {out}, InitKind::Zeros);
    if (lora && isTarget(target)) {
      const int a = addParam(module, "lora_A.weight", {cfg.loraRank, in}, InitKind::Normal, 1.0 / std::sqrt(3.0 * in));
      const int b = addParam(module, "lora_B.weight", {out, cfg.loraRank}, InitKind::Zeros);
      --baseParams;  // the two adapters took base indices: give them back
      --baseParams;
      for (int p : {a, b}) {
        L.params[static_cast<std::size_t>(p)].initIndex = kAdapterInitBase + adapterParams++;
        L.params[static_cast<std::size_t>(p)].trainable = true;
        L.trainableNumel += L.params[static_cast<std::size_t>(p)].numel;
      }
      L.modules[static_cast<std::size_t>(module)].loraA = a;
      L.modules[static_cast<std::size_t>(module)].loraB = b;
    }
  };
  addParam(addModule("embed_tokens", 0), "weight", {cfg.vocab, h}, InitKind::Normal);
  for (int l = 0; l < cfg.layers; ++l) {
    const std::string pre = "layers." + std::to_string(l) + ".";
    const int b = l + 1;
    addParam(addModule(pre + "input_layernorm", b), "weight", {h}, InitKind::Ones);
    addLinear(addModule(pre + "self_attn.q_proj", b), q, h, cfg.qkvBias, 0.02, "q");
    addLinear(addModule(pre + "self_attn.k_proj", b), kv, h, cfg.qkvBias, 0.02, "k");
    addLinear(addModule(pre + "self_attn.v_proj", b), kv, h, cfg.qkvBias, 0.02, "v");
    if (cfg.qkNorm) {
      addParam(addModule(pre + "self_attn.q_norm", b), "weight", {cfg.headDim}, InitKind::Ones);
      addParam(addModule(pre + "self_attn.k_norm", b), "weight", {cfg.headDim}, InitKind::Ones);
    }
    addLinear(addModule(pre + "self_attn.o_proj", b), h, q, false, projStd, "o");
    addParam(addModule(pre + "post_attention_layernorm", b), "weight", {h}, InitKind::Ones);
    addLinear(addModule(pre + "mlp.gate_proj", b), cfg.ffn, h, false, 0.02, "gate");
    addLinear(addModule(pre + "mlp.up_proj", b), cfg.ffn, h, false, 0.02, "up");
    addLinear(addModule(pre + "mlp.down_proj", b), h, cfg.ffn, false, projStd, "down");
  }
  addParam(addModule("norm", cfg.layers + 1), "weight", {h}, InitKind::Ones);
  addLinear(addModule("lm_head", cfg.layers + 1), cfg.vocab, h, false, 0.02, "lm_head");
  for (const auto& m : L.modules) L.largestModuleNumel = std::max(L.largestModuleNumel, m.numel);
  return L;
}

void initParam(const ModelLayout& layout, int p, std::uint64_t seed, const torch::Tensor& out) {
  const auto& info = layout.params[static_cast<std::size_t>(p)];
  torch::NoGradGuard ng;
  switch (info.init) {
    case InitKind::Ones:
      out.fill_(1.0);
      return;
    case InitKind::Zeros:
      out.zero_();
      return;
    case InitKind::Normal: {
      // A generator per parameter: the value never depends on how the model is sharded. Drawn in
      // fp32 where the tensor lives (LibTorch's vectorised normal fill on CPU, Philox on CUDA):
      // deterministic for a seed and a device type, and ~10x faster than the fp64 draw on the CPU it
      // replaces (a 1.3B-parameter model: 46.6 s -> docs/RUNTIME.md).
      const std::uint64_t s = seed * 1000003ULL + static_cast<std::uint64_t>(info.initIndex) * 7919ULL + 17ULL;
      torch::Tensor dst = out;
      if (out.scalar_type() != torch::kFloat32 || !out.is_contiguous())
        dst = torch::empty({info.numel}, torch::TensorOptions().dtype(torch::kFloat32).device(out.device()));
      auto flat = dst.view({info.numel});
#ifdef SHARDSCOPE_WITH_CUDA
      if (out.is_cuda()) {
        auto gen = at::cuda::detail::createCUDAGenerator(out.device().index());
        gen.set_current_seed(s);
        flat.normal_(0.0, info.stdev, gen);
      }
#endif
      if (!out.is_cuda()) {
        // On the CPU the draw itself is serial (one Mersenne twister): blocks of 4M elements, each
        // with its own generator, are drawn on all cores. The values depend on (seed, p, block)
        // only, never on the number of threads.
        constexpr std::int64_t kBlock = std::int64_t{1} << 22;
        const std::int64_t blocks = (info.numel + kBlock - 1) / kBlock;
        auto drawBlock = [&](std::int64_t b) {
          auto g = at::detail::createCPUGenerator(s * 0x9E3779B97F4A7C15ULL + static_cast<std::uint64_t>(b) + 1);
          flat.narrow(0, b * kBlock, std::min(kBlock, info.numel - b * kBlock)).normal_(0.0, info.stdev, g);
        };
        const std::int64_t threads = std::min<std::int64_t>(blocks, std::max(1u, std::thread::hardware_concurrency()));
        if (threads <= 1) {
          for (std::int64_t b = 0; b < blocks; ++b) drawBlock(b);
        } else {
          std::atomic<std::int64_t> next{0};
          std::vector<std::thread> pool;
          for (std::int64_t t = 0; t < threads; ++t)
            pool.emplace_back([&] {
              for (std::int64_t b; (b = next++) < blocks;) drawBlock(b);
            });
          for (auto& t : pool) t.join();
        }
      }
      if (!dst.is_same(out)) out.copy_(dst.view(out.sizes()));
      return;
    }
  }
}

Transformer::Transformer(ModelLayout layout, torch::Device device, torch::ScalarType computeDtype)
    : layout_(std::move(layout)), device_(device), dtype_(computeDtype) {
  auto find = [&](const std::string& name) {
    for (std::size_t m = 0; m < layout_.modules.size(); ++m)
      if (layout_.modules[m].name == name) return static_cast<int>(m);
    throw std::logic_error("model module missing: " + name);
  };
  embedModule_ = find("embed_tokens");
  finalNorm_ = find("norm");
  lmHead_ = find("lm_head");
  for (int l = 0; l < layout_.config.layers; ++l) {
    const std::string pre = "layers." + std::to_string(l) + ".";
    LayerModules lm{};
    lm.attnNorm = find(pre + "input_layernorm");
    lm.q = find(pre + "self_attn.q_proj");
    lm.k = find(pre + "self_attn.k_proj");
    lm.v = find(pre + "self_attn.v_proj");
    if (layout_.config.qkNorm) {
      lm.qNorm = find(pre + "self_attn.q_norm");
      lm.kNorm = find(pre + "self_attn.k_norm");
    }
    lm.o = find(pre + "self_attn.o_proj");
    lm.mlpNorm = find(pre + "post_attention_layernorm");
    lm.gate = find(pre + "mlp.gate_proj");
    lm.up = find(pre + "mlp.up_proj");
    lm.down = find(pre + "mlp.down_proj");
    layerModules_.push_back(lm);
  }
}

void Transformer::ensureRope(std::int64_t seq) {
  if (ropeLen_ >= seq) return;
  const auto half = layout_.config.headDim / 2;
  auto opts = torch::TensorOptions().dtype(torch::kFloat64);
  auto idx = torch::arange(0, half, opts);
  auto invFreq = torch::pow(layout_.config.ropeTheta, -idx * 2.0 / static_cast<double>(layout_.config.headDim));
  auto pos = torch::arange(0, seq, opts);
  auto freqs = torch::outer(pos, invFreq);    // [s, d/2]
  auto emb = torch::cat({freqs, freqs}, -1);  // [s, d]
  cos_ = emb.cos().to(torch::TensorOptions().dtype(dtype_).device(device_));
  sin_ = emb.sin().to(torch::TensorOptions().dtype(dtype_).device(device_));
  ropeLen_ = seq;
}

namespace {
torch::Tensor rotateHalf(const torch::Tensor& x) {
  const auto half = x.size(-1) / 2;
  auto x1 = x.narrow(-1, 0, half);
  auto x2 = x.narrow(-1, half, half);
  return torch::cat({-x2, x1}, -1);
}
}  // namespace

torch::Tensor Transformer::linear(int module, torch::Tensor x, ForwardHooks& h) {
  h.beginModule(module);
  const auto& m = layout_.modules[static_cast<std::size_t>(module)];
  auto w = h.param(m.weight);
  torch::Tensor b;
  if (m.bias >= 0) b = h.param(m.bias);
  auto y = b.defined() ? torch::nn::functional::linear(x, w, b) : torch::nn::functional::linear(x, w);
  if (m.loraA >= 0) {
    // The adapters' path: (x·Aᵀ)·Bᵀ scaled, never the [out x in] product B·A.
    auto a = h.param(m.loraA);
    auto bb = h.param(m.loraB);
    y = y + torch::nn::functional::linear(torch::nn::functional::linear(x, a), bb) * layout_.loraScale;
  }
  return h.endModule(module, y);
}

torch::Tensor Transformer::rmsnorm(int module, torch::Tensor x, ForwardHooks& h) {
  h.beginModule(module);
  const auto& m = layout_.modules[static_cast<std::size_t>(module)];
  auto w = h.param(m.params[0]);
  // The mean of squares accumulates in fp32 (and the small [.., 1] scale stays fp32 until applied);
  // the [.., hidden] tensors autograd keeps are in the compute dtype, so bf16 halves them.
  const auto scale = torch::rsqrt(x.pow(2).mean({-1}, true, torch::kFloat32) + layout_.config.normEps);
  return h.endModule(module, x * scale.to(x.scalar_type()) * w);
}

torch::Tensor Transformer::block(int layer, torch::Tensor x, ForwardHooks& h) {
  const auto& lm = layerModules_[static_cast<std::size_t>(layer)];
  const auto& c = layout_.config;
  const auto B = x.size(0), S = x.size(1);
  auto hn = rmsnorm(lm.attnNorm, x, h);
  auto q = linear(lm.q, hn, h).view({B, S, c.heads, c.headDim});
  auto k = linear(lm.k, hn, h).view({B, S, c.kvHeads, c.headDim});
  auto v = linear(lm.v, hn, h).view({B, S, c.kvHeads, c.headDim});
  if (c.qkNorm) {
    q = rmsnorm(lm.qNorm, q, h);
    k = rmsnorm(lm.kNorm, k, h);
  }
  q = q.transpose(1, 2);  // [B, H, S, D]
  k = k.transpose(1, 2);
  v = v.transpose(1, 2);
  auto cosv = cos_.narrow(0, 0, S);
  auto sinv = sin_.narrow(0, 0, S);
  q = q * cosv + rotateHalf(q) * sinv;
  k = k * cosv + rotateHalf(k) * sinv;
  const auto rep = c.heads / c.kvHeads;
  if (rep > 1) {
    k = k.repeat_interleave(rep, 1);
    v = v.repeat_interleave(rep, 1);
  }
  torch::Tensor ctx;
#if SHARDSCOPE_HAVE_SDPA
  if (sdpa_) ctx = at::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true);
#endif
  if (!ctx.defined()) {
    auto scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(c.headDim));
    auto mask = torch::ones({S, S}, torch::TensorOptions().dtype(torch::kBool).device(x.device())).triu(1);
    scores = scores.masked_fill(mask, -std::numeric_limits<float>::infinity());
    // Softmax in the compute dtype (its kernels accumulate in fp32): what backward keeps is bf16 under
    // --precision bf16, as PyTorch's eager attention does.
    auto probs = torch::softmax(scores, -1);
    ctx = torch::matmul(probs, v);
  }
  auto attn = ctx.transpose(1, 2).reshape({B, S, c.heads * c.headDim});
  x = x + linear(lm.o, attn, h);
  auto hm = rmsnorm(lm.mlpNorm, x, h);
  auto g = linear(lm.gate, hm, h);
  auto u = linear(lm.up, hm, h);
  return x + linear(lm.down, torch::silu(g) * u, h);
}

bool haveSdpa() { return SHARDSCOPE_HAVE_SDPA != 0; }

void Transformer::setSdpa(bool on) {
  if (on && !haveSdpa())
    throw std::invalid_argument("--attention sdpa needs LibTorch 2.0 or later (this build has " TORCH_VERSION
                                "); use --attention eager or auto");
  sdpa_ = on;
}

torch::Tensor Transformer::loss(const Batch& batch, ForwardHooks& h) {
  ensureRope(batch.tokens.size(1));
  auto x = h.runBlock(0, batch.tokens, [&](torch::Tensor tokens) {
    h.beginModule(embedModule_);
    auto w = h.param(layout_.modules[static_cast<std::size_t>(embedModule_)].params[0]);
    return h.endModule(embedModule_, torch::embedding(w, tokens));
  });
  for (int l = 0; l < layout_.config.layers; ++l) x = h.runBlock(l + 1, x, [&, l](torch::Tensor in) { return block(l, in, h); });
  return h.runBlock(layout_.config.layers + 1, x, [&](torch::Tensor in) {
    auto y = rmsnorm(finalNorm_, in, h);
    auto logits = linear(lmHead_, y, h);
    return torch::nn::functional::cross_entropy(logits.reshape({-1, layout_.config.vocab}).to(torch::kFloat32),
                                                batch.targets.reshape({-1}));
  });
}

namespace {

using BlockBody = std::function<torch::Tensor(torch::Tensor)>;

struct ReentrantCheckpoint : public torch::autograd::Function<ReentrantCheckpoint> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor x, std::int64_t body) {
    ctx->saved_data["body"] = body;
    ctx->save_for_backward({x});
    return (*reinterpret_cast<const BlockBody*>(body))(x);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list g) {
    const auto* body = reinterpret_cast<const BlockBody*>(ctx->saved_data["body"].toInt());
    torch::Tensor x = ctx->get_saved_variables()[0].detach();
    const bool floating = x.is_floating_point();
    if (floating) x.requires_grad_(true);
    torch::Tensor y;
    {
      torch::AutoGradMode on(true);
      y = (*body)(x);
    }
    torch::autograd::backward({y}, {g[0]});
    return {floating ? x.grad() : torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor checkpointedBlock(const torch::Tensor& x, const BlockBody* body) {
  const torch::Tensor in = x.is_floating_point() && !x.requires_grad() ? x.detach().requires_grad_(true) : x;
  return ReentrantCheckpoint::apply(in, reinterpret_cast<std::int64_t>(body));
}

double trainFlopsPerToken(const ModelLayout& layout, std::int64_t seq) {
  const auto& c = layout.config;
  const double nonEmbed = static_cast<double>(layout.totalNumel - c.vocab * c.hidden);
  double trainableNonEmbed = 0;
  for (const auto& p : layout.params)
    if (p.trainable && p.module != 0) trainableNonEmbed += static_cast<double>(p.numel);
  return 4.0 * nonEmbed + 2.0 * trainableNonEmbed + 6.0 * c.layers * c.heads * (2.0 * c.headDim) * static_cast<double>(seq);
}

}  // namespace shardscope::runtime
