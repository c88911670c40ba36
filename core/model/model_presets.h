#pragma once
// The model presets: one table for the runtime (profiler/runtime/model.cpp builds the LibTorch
// model from it), the estimator and simulator (their ModelShape), the run configuration (the names
// validate() accepts) and the app (the launch dialog's list). Llama-style decoders; the published
// configurations follow ../shared/docs/strategies.md §2.7.
#include <cstdint>
#include <string_view>
#include <vector>

namespace shardscope::core {

struct ModelPreset {
  std::string_view name;
  std::int64_t vocab = 0;
  std::int64_t hidden = 0;
  int layers = 0;
  int heads = 0;
  int kvHeads = 0;
  std::int64_t headDim = 0;
  std::int64_t ffn = 0;
  double ropeTheta = 10000.0;
  double normEps = 1e-5;
  bool qkNorm = false;          // Qwen3: RMSNorm on q and k per head
  bool qkvBias = false;         // Qwen2/2.5: biases on the q/k/v projections
  bool tiedEmbeddings = false;  // LM head shares the embedding
  // CPU-sized (tiny, odd, small, medium): trained in seconds by the embedded runtime; the others are
  // the published models, for the estimator and simulator and for GPU runs.
  bool cpuSized = false;
  std::string_view note;  // what it is for, one line
};

// Every preset: the CPU-sized ones first, then the published ones.
const std::vector<ModelPreset>& modelPresets();
// nullptr for an unknown name (exact, lower-case names).
const ModelPreset* findModelPreset(std::string_view name);
// The names, in table order.
const std::vector<std::string_view>& modelPresetNames();

// Parameter elements of the preset's model as the runtime builds it (profiler/runtime/model.cpp):
// embedding, per block two RMSNorms, q/k/v/o (GQA; q/k/v biases and per-head q/k norms where the
// preset has them) and the SwiGLU MLP, the final norm and the LM head (counted once when tied).
// `layers` > 0 replaces the depth (the run config's `layers`). What full fine-tuning trains; the
// estimator's parameterCount(ModelShape) counts the same modules (tst_comparison holds them equal).
std::int64_t presetParameterCount(const ModelPreset& preset, int layers = 0);

}  // namespace shardscope::core
