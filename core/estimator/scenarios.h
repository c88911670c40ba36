#pragma once
// Device presets (memory, dense peak FLOPS, memory bandwidth, the link between its GPUs in a
// typical server) and `estimate --scenario` presets: the setups users ask about, as estimator
// options (docs/ESTIMATOR.md, "Fine-tuning: LoRA and QLoRA"). One table each, read by the CLI
// and the Estimator page.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/estimator/recommend.h"

namespace shardscope::core::estimator {

struct DevicePreset {
  std::string name;
  std::int64_t memoryBytes = 0;
  double bf16Tflops = 0;  // dense bf16 tensor-core peak
  double fp32Tflops = 0;  // dense fp32 (no TF32) peak
  double memBwGBps = 0;   // device memory bandwidth
  std::string link;       // link preset between the GPUs of a typical server (comm_model.h)
  std::string source;     // where the numbers come from
};
// a10, a100-40gb, a100-80gb, h100-sxm, h200.
std::optional<DevicePreset> devicePreset(std::string_view name);
const std::vector<std::string>& devicePresetNames();
// The dense peak of the compute dtype: fp32 for Precision::Fp32, bf16 otherwise.
double presetTflops(const DevicePreset& d, Precision p);
// What `--gpu NAME` sets, for the CLI and the Estimator page alike: the device's memory, the dense
// peak of ri.model.precision (set the precision first), its memory bandwidth, its link preset
// inside a node and its name (ri.device).
void applyDevicePreset(const DevicePreset& d, RecommendInput& ri);

struct Scenario {
  std::string name;
  std::string summary;  // one line
  // Estimator options (the CLI's spelling, without "--"; a flag's value is "true"). Options given
  // explicitly override these.
  std::vector<std::pair<std::string, std::string>> options;
};
// qwen3-lora-4xa10, qwen3-qlora-4xa10, llama-7b-full-8xa100.
const std::vector<Scenario>& scenarios();
const Scenario* findScenario(std::string_view name);

}  // namespace shardscope::core::estimator
