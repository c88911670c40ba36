#include "core/model/model_presets.h"

namespace shardscope::core {

namespace {

ModelPreset preset(std::string_view name, std::int64_t vocab, std::int64_t hidden, int layers, int heads, int kvHeads,
                   std::int64_t headDim, std::int64_t ffn, double ropeTheta, double normEps, bool qkNorm, bool qkvBias,
                   bool cpuSized, std::string_view note) {
  ModelPreset p;
  p.name = name;
  p.vocab = vocab;
  p.hidden = hidden;
  p.layers = layers;
  p.heads = heads;
  p.kvHeads = kvHeads;
  p.headDim = headDim;
  p.ffn = ffn;
  p.ropeTheta = ropeTheta;
  p.normEps = normEps;
  p.qkNorm = qkNorm;
  p.qkvBias = qkvBias;
  p.cpuSized = cpuSized;
  p.note = note;
  return p;
}

}  // namespace

const std::vector<ModelPreset>& modelPresets() {
  static const std::vector<ModelPreset> table = {
      preset("tiny", 256, 64, 2, 4, 2, 16, 176, 10000.0, 1e-5, false, false, true, "the smallest: tests and smoke runs"),
      preset("odd", 259, 48, 2, 3, 1, 16, 131, 10000.0, 1e-5, false, false, true,
             "odd sizes everywhere: padding and uneven shards (tests)"),
      preset("small", 2048, 256, 4, 8, 4, 32, 688, 10000.0, 1e-5, false, false, true, "the main job's model on CPU"),
      preset("medium", 8192, 512, 8, 8, 4, 64, 1376, 10000.0, 1e-5, false, false, true, "a longer CPU run"),
      preset("llama3-8b", 128256, 4096, 32, 32, 8, 128, 14336, 500000.0, 1e-5, false, false, false, "Llama 3 8B"),
      preset("llama3-70b", 128256, 8192, 80, 64, 8, 128, 28672, 500000.0, 1e-5, false, false, false, "Llama 3 70B"),
      preset("llama2-7b", 32000, 4096, 32, 32, 32, 128, 11008, 10000.0, 1e-5, false, false, false,
             "Llama 2 7B (multi-head attention, the classic 7B)"),
      preset("qwen3-8b", 151936, 4096, 36, 32, 8, 128, 12288, 1e6, 1e-6, true, false, false, "Qwen3 8B (q/k norm)"),
      preset("qwen2.5-7b", 152064, 3584, 28, 28, 4, 128, 18944, 1e6, 1e-6, false, true, false, "Qwen2.5 7B (q/k/v biases)"),
  };
  return table;
}

const ModelPreset* findModelPreset(std::string_view name) {
  for (const auto& p : modelPresets())
    if (p.name == name) return &p;
  return nullptr;
}

std::int64_t presetParameterCount(const ModelPreset& p, int layers) {
  const std::int64_t h = p.hidden, d = p.headDim > 0 ? p.headDim : (p.heads > 0 ? p.hidden / p.heads : 0);
  const std::int64_t q = p.heads * d, kv = p.kvHeads * d, f = p.ffn;
  std::int64_t block = 2 * h;           // input and post-attention RMSNorm
  block += q * h + 2 * kv * h + h * q;  // q, k, v, o projections
  if (p.qkvBias) block += q + 2 * kv;   // Qwen2.5's q/k/v biases
  if (p.qkNorm) block += 2 * d;         // Qwen3's per-head q/k RMSNorm
  block += 3 * f * h;                   // gate, up, down
  const std::int64_t depth = layers > 0 ? layers : p.layers;
  return p.vocab * h + depth * block + h + (p.tiedEmbeddings ? 0 : p.vocab * h);
}

const std::vector<std::string_view>& modelPresetNames() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> n;
    for (const auto& p : modelPresets()) n.push_back(p.name);
    return n;
  }();
  return names;
}

}  // namespace shardscope::core
