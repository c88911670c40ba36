#pragma once
// A Llama-style decoder-only transformer written functionally against LibTorch: the model owns no
// tensors. It describes its parameters (ModelLayout) and computes the loss asking a ForwardHooks
// object for every parameter tensor and telling it where each module and block begins and ends.
// The strategy engines implement ForwardHooks: that is where parameters are gathered, released,
// prefetched and where gradients are taken (profiler/runtime/engine.h).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <torch/torch.h>

namespace shardscope::runtime {

struct ModelConfig {
  std::string name = "tiny";
  std::int64_t vocab = 256;
  std::int64_t hidden = 64;
  int layers = 2;
  int heads = 4;
  int kvHeads = 2;
  std::int64_t headDim = 16;
  std::int64_t ffn = 176;
  double ropeTheta = 10000.0;
  double normEps = 1e-5;
  bool qkNorm = false;   // Qwen3: RMSNorm on q and k per head
  bool qkvBias = false;  // Qwen2/2.5: biases on q/k/v projections
  // LoRA (rank > 0): every parameter of the model is frozen and each target projection ("q", "k",
  // "v", "o", "gate", "up", "down") gets trainable adapters lora_A [r x in] and lora_B [out x r]:
  // y = W·x (+ b) + (alpha / r) · B·A·x.
  int loraRank = 0;
  double loraAlpha = 16;
  std::vector<std::string> loraTargets;
};

// Presets: tiny, odd (odd sizes, for tests), small, medium (CPU-sized), llama3-8b, llama3-70b, qwen3-8b, qwen2.5-7b.
// layers > 0 cuts (or extends) the depth. Throws std::invalid_argument for an unknown name.
ModelConfig modelPreset(const std::string& name, int layers = 0);
std::vector<std::string> modelPresetNames();

enum class InitKind { Normal, Ones, Zeros };

struct ParamInfo {
  std::string name;  // "layers.3.attn.q_proj.weight"
  std::vector<std::int64_t> shape;
  std::int64_t numel = 0;
  int module = 0;  // index into ModelLayout::modules
  InitKind init = InitKind::Normal;
  double stdev = 0.02;
  // Frozen parameters (the base weights under LoRA) get no gradient and no optimizer state and are
  // held in the compute dtype.
  bool trainable = true;
  // What seeds its initial value: the parameter's index in the model without adapters, so the base
  // weights under LoRA are the full model's; adapters count from kAdapterInitBase.
  int initIndex = 0;
};
constexpr int kAdapterInitBase = 1 << 20;

// A module that owns parameters directly (DeepSpeed ZeRO-3's fetch unit).
struct ModuleInfo {
  std::string name;  // "layers.3.attn.q_proj"
  int block = 0;     // 0 = embedding, 1..L = transformer blocks, L+1 = final norm + lm head
  std::vector<int> params;
  std::int64_t numel = 0;
  // A projection's weight and bias (-1: none) and, under LoRA, its adapters (-1: not a target).
  int weight = -1, bias = -1, loraA = -1, loraB = -1;
};

struct ModelLayout {
  ModelConfig config;
  std::vector<ParamInfo> params;    // in model.parameters() order
  std::vector<ModuleInfo> modules;  // in forward order
  int blocks = 0;                   // L + 2 (embedding, L layers, head)
  std::int64_t totalNumel = 0;
  std::int64_t trainableNumel = 0;      // = totalNumel but under LoRA: the adapters
  std::int64_t largestModuleNumel = 0;  // LL of strategies.md (DeepSpeed's estimator)
  double loraScale = 0;                 // alpha / r under LoRA
  std::vector<int> blockOfParam() const;
};

ModelLayout buildLayout(const ModelConfig& cfg);

// A block's name in spans and fetch units: "embed_tokens", "layers.N", "lm_head".
std::string blockName(const ModelLayout& layout, int block);

// Fills `out` (a contiguous fp32/fp64 tensor of params[p].numel elements) with parameter p's
// initial value. Deterministic in (seed, p) and independent of sharding or world size.
void initParam(const ModelLayout& layout, int p, std::uint64_t seed, const torch::Tensor& out);

// What the engines implement (see the file comment). Calls come in this order per block:
// runBlock(b) { beginModule(m) param(p).. endModule(m, out) ... } ; with activation checkpointing
// the body of a block runs again during backward (ForwardHooks::recomputing() is then true).
class ForwardHooks {
 public:
  virtual ~ForwardHooks() = default;
  virtual void beginModule(int module) = 0;
  virtual torch::Tensor param(int p) = 0;
  virtual torch::Tensor endModule(int module, torch::Tensor out) = 0;
  virtual torch::Tensor runBlock(int block, torch::Tensor x, const std::function<torch::Tensor(torch::Tensor)>& body) = 0;
};

struct Batch {
  torch::Tensor tokens;   // [b, s] int64
  torch::Tensor targets;  // [b, s] int64
};

// Activation checkpointing of one block, reentrant like PyTorch's: the forward keeps only the
// block's input and runs `body` without autograd's graph; the backward runs it again with the graph
// and back-propagates through it. A floating input that needs no gradient (a frozen embedding's
// output under LoRA) is made a leaf that does (PEFT's enable_input_require_grads), or nothing would
// propagate. `*body` must live until the backward has run.
torch::Tensor checkpointedBlock(const torch::Tensor& x, const std::function<torch::Tensor(torch::Tensor)>* body);

// Whether this LibTorch has scaled_dot_product_attention (2.0 and later).
bool haveSdpa();

class Transformer {
 public:
  Transformer(ModelLayout layout, torch::Device device, torch::ScalarType computeDtype);
  const ModelLayout& layout() const { return layout_; }
  // Attention through scaled_dot_product_attention (causal; flash / memory-efficient kernels on GPU)
  // instead of the eager matmul-softmax-matmul. Throws when this LibTorch lacks it.
  void setSdpa(bool on);
  bool sdpa() const { return sdpa_; }
  // Mean token cross-entropy of the batch (fp32 scalar).
  torch::Tensor loss(const Batch& batch, ForwardHooks& hooks);

 private:
  torch::Tensor block(int layer, torch::Tensor x, ForwardHooks& h);
  torch::Tensor linear(int module, torch::Tensor x, ForwardHooks& h);
  torch::Tensor rmsnorm(int module, torch::Tensor x, ForwardHooks& h);
  void ensureRope(std::int64_t seq);

  ModelLayout layout_;
  torch::Device device_;
  torch::ScalarType dtype_;
  // module indices resolved once
  int embedModule_ = 0, finalNorm_ = 0, lmHead_ = 0;
  struct LayerModules {
    int attnNorm, q, k, v, qNorm = -1, kNorm = -1, o, mlpNorm, gate, up, down;
  };
  std::vector<LayerModules> layerModules_;
  torch::Tensor cos_, sin_;
  std::int64_t ropeLen_ = 0;
  bool sdpa_ = false;
};

// FLOPs of one training step per token, for MFU-like figures: forward 2·Ψ, the input gradient 2·Ψ
// and the weight gradient 2·Ψ of the trainable parameters only (Ψ without the embedding: 6·Ψ for
// full fine-tuning, 4·Ψ + 2·Ψ_adapters under LoRA), plus attention.
double trainFlopsPerToken(const ModelLayout& layout, std::int64_t seq);

}  // namespace shardscope::runtime
