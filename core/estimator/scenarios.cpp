#include "core/estimator/scenarios.h"

#include "core/estimator/comm_model.h"

namespace shardscope::core::estimator {

namespace {
constexpr std::int64_t kGiB = 1024LL * 1024 * 1024;
}

const std::vector<std::string>& devicePresetNames() {
  static const std::vector<std::string> names = {"a10", "a100-40gb", "a100-80gb", "h100-sxm", "h200"};
  return names;
}

std::optional<DevicePreset> devicePreset(std::string_view name) {
  // NVIDIA's datasheets: dense (no sparsity) tensor-core bf16, fp32, memory and its bandwidth.
  if (name == "a10")
    return DevicePreset{"a10",
                        24 * kGiB,
                        125,
                        31.2,
                        600,
                        "pcie4",
                        "NVIDIA A10 datasheet: 24 GB GDDR6, 600 GB/s, bf16 tensor 125 TFLOPS dense (250 sparse), fp32 31.2; "
                        "PCIe 4.0 x16, no NVLink"};
  if (name == "a100-40gb")
    return DevicePreset{"a100-40gb",
                        40 * kGiB,
                        312,
                        19.5,
                        1555,
                        "nvlink-a100",
                        "NVIDIA A100 datasheet (40GB SXM): 40 GB HBM2, 1555 GB/s, bf16 tensor 312 TFLOPS dense, fp32 19.5; "
                        "NVLink 3 / NVSwitch"};
  if (name == "a100-80gb")
    return DevicePreset{"a100-80gb",
                        80 * kGiB,
                        312,
                        19.5,
                        2039,
                        "nvlink-a100",
                        "NVIDIA A100 datasheet (80GB SXM): 80 GB HBM2e, 2039 GB/s, bf16 tensor 312 TFLOPS dense, fp32 19.5; "
                        "NVLink 3 / NVSwitch"};
  if (name == "h100-sxm")
    return DevicePreset{"h100-sxm",
                        80 * kGiB,
                        989,
                        67,
                        3350,
                        "nvlink-h100",
                        "NVIDIA H100 SXM datasheet: 80 GB HBM3, 3.35 TB/s, bf16 tensor 989 TFLOPS dense, fp32 67"};
  if (name == "h200")
    return DevicePreset{"h200",
                        141LL * 1000 * 1000 * 1000,
                        989,
                        67,
                        4800,
                        "nvlink-h200",
                        "NVIDIA H200 datasheet: 141 GB HBM3e, 4.8 TB/s, bf16 tensor 989 TFLOPS dense, fp32 67"};
  return std::nullopt;
}

double presetTflops(const DevicePreset& d, Precision p) { return p == Precision::Fp32 ? d.fp32Tflops : d.bf16Tflops; }

void applyDevicePreset(const DevicePreset& d, RecommendInput& ri) {
  ri.device = d.name;
  ri.deviceBytes = d.memoryBytes;
  ri.deviceTflops = presetTflops(d, ri.model.precision);
  ri.memBwGBps = d.memBwGBps;
  if (auto l = linkPreset(d.link)) ri.intraNode = *l;
}

const std::vector<Scenario>& scenarios() {
  static const std::vector<Scenario> table = {
      // The seeds' setup (../shared/seeds/001: "4×A10 (24GB), Qwen3-7B, LoRA r=8 α=16, BF16, batch size
      // 64"). Qwen3 has no 7B: the dense Qwen3 between 4B and 14B is Qwen3-8B (qwen3-8b). The seeds
      // give no sequence length or micro-batch; ms-swift's defaults are a per-device batch of 1,
      // max_length 2048 and gradient checkpointing on (64 = 4 GPUs x 1 x 16 accumulation steps).
      {"qwen3-lora-4xa10",
       "the seeds' LoRA: Qwen3-8B (\"Qwen3-7B\"), r=8 alpha=16 on all projections, bf16, 4 x A10 24 GB over PCIe, 1 x 2048 "
       "tokens, checkpointing",
       {{"model", "qwen3-8b"},
        {"gpus", "4"},
        {"gpu", "a10"},
        {"precision", "bf16"},
        {"lora-rank", "8"},
        {"lora-alpha", "16"},
        {"lora-targets", "q,k,v,o,gate,up,down"},
        {"micro-batch", "1"},
        {"seq-len", "2048"},
        {"activation-checkpointing", "true"}}},
      {"qwen3-qlora-4xa10",
       "the same with QLoRA: NF4 base weights (double-quantised scales), bf16 compute",
       {{"model", "qwen3-8b"},
        {"gpus", "4"},
        {"gpu", "a10"},
        {"precision", "bf16"},
        {"lora-rank", "8"},
        {"lora-alpha", "16"},
        {"lora-targets", "q,k,v,o,gate,up,down"},
        {"qlora", "true"},
        {"micro-batch", "1"},
        {"seq-len", "2048"},
        {"activation-checkpointing", "true"}}},
      // The seeds' other setup: full fine-tuning of a 7B model on 8 x A100 80 GB (../shared/seeds/000).
      {"llama-7b-full-8xa100",
       "full fine-tuning of Llama-2-7B, bf16 + fp32 Adam, 8 x A100 80 GB over NVLink, 1 x 2048 tokens",
       {{"model", "llama2-7b"},
        {"gpus", "8"},
        {"gpu", "a100-80gb"},
        {"precision", "bf16"},
        {"micro-batch", "1"},
        {"seq-len", "2048"}}},
  };
  return table;
}

const Scenario* findScenario(std::string_view name) {
  for (const auto& s : scenarios())
    if (s.name == name) return &s;
  return nullptr;
}

}  // namespace shardscope::core::estimator
