// `shardscope-cli estimate`: per-device memory (by category), communication per step and its
// alpha-beta time, fits / does not fit, and the strategies ranked, before anything runs
// (core/estimator, docs/ESTIMATOR.md).
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <stdexcept>

#include "app/cli/estimator_args.h"
#include "core/config/run_config.h"
#include "core/model/model_presets.h"
#include "core/estimator/comm_model.h"
#include "core/estimator/memory_estimator.h"
#include "core/estimator/recommend.h"
#include "core/estimator/scenarios.h"
#include "core/storage/trace_store.h"
#include "core/util/json.h"
#include "core/util/units.h"

namespace shardscope::cli {
using core::JsonValue;
namespace est = core::estimator;

namespace estargs {

std::int64_t intOption(const Args& a, const std::string& name, std::int64_t def, std::int64_t min) {
  if (!a.has(name)) return def;
  const std::string s = a.get(name);
  std::size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(s, &used);
  } catch (...) {
    used = 0;
  }
  if (used != s.size() || s.empty()) throw std::invalid_argument("--" + name + " expects an integer, got '" + s + "'");
  if (v < min) throw std::invalid_argument("--" + name + " must be at least " + std::to_string(min) + ", got " + s);
  return v;
}

double doubleOption(const Args& a, const std::string& name, double def) {
  if (!a.has(name)) return def;
  const std::string s = a.get(name);
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (...) {
    used = 0;
  }
  if (used != s.size() || s.empty()) throw std::invalid_argument("--" + name + " expects a number, got '" + s + "'");
  return v;
}

bool isRuntimePreset(const std::string& n) {
  const core::ModelPreset* p = core::findModelPreset(n);
  return p && p->cpuSized;
}

est::ModelShape shapeFrom(const Args& a) {
  const std::string name = a.get("model");
  if (name.empty())
    throw std::invalid_argument(
        "give --model (llama3-8b, llama3-70b, llama2-7b, qwen3-8b, qwen2.5-7b, tiny, odd, small, medium or custom) or "
        "--scenario NAME");
  static const char* shapeFlags[] = {"hidden", "heads", "kv-heads", "ffn", "vocab", "head-dim"};
  if (name == "custom") {
    est::ModelShape m;
    m.name = "custom";
    for (const char* f : {"layers", "hidden", "heads", "ffn", "vocab"})
      if (!a.has(f)) throw std::invalid_argument(std::string("--model custom needs --") + f);
    m.layers = static_cast<int>(intOption(a, "layers", 0, 1));
    m.hidden = intOption(a, "hidden", 0, 1);
    m.heads = static_cast<int>(intOption(a, "heads", 0, 1));
    m.kvHeads = static_cast<int>(intOption(a, "kv-heads", m.heads, 1));
    m.ffn = intOption(a, "ffn", 0, 1);
    m.vocab = intOption(a, "vocab", 0, 1);
    m.headDim = intOption(a, "head-dim", 0, 1);
    m.tiedEmbeddings = a.has("tied-embeddings");
    m.qkNorm = a.has("qk-norm");
    m.qkvBias = a.has("qkv-bias");
    est::validateShape(m);
    return m;
  }
  for (const char* f : shapeFlags)
    if (a.has(f))
      throw std::invalid_argument(std::string("--") + f + " only goes with --model custom (a preset has its own shape)");
  auto m = est::modelShapePreset(name, static_cast<int>(intOption(a, "layers", 0, 1)));
  if (!m) {
    std::string list;
    for (const auto& n : est::modelShapePresetNames()) list += (list.empty() ? "" : ", ") + n;
    throw std::invalid_argument("unknown model '" + name + "' (presets: " + list + ", or custom)");
  }
  return *m;
}

std::vector<est::Strategy> strategiesFrom(const Args& a) {
  std::vector<est::Strategy> out;
  for (const auto& [k, v] : a.options) {
    if (k != "strategy") continue;
    std::size_t pos = 0;
    while (pos <= v.size()) {
      const std::size_t comma = std::min(v.find(',', pos), v.size());
      const std::string item = v.substr(pos, comma - pos);
      if (!item.empty()) {
        auto s = est::strategyFromString(item);
        if (!s)
          throw std::invalid_argument("unknown strategy '" + item +
                                      "' (ddp, zero1, zero2, zero3, fsdp, fsdp_grad_op, hsdp, zeropp_hpz)");
        out.push_back(*s);
      }
      pos = comma + 1;
    }
  }
  return out;
}

std::string groupDigits(std::int64_t v) {
  std::string s = std::to_string(v < 0 ? -v : v), out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i > 0 && (s.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(s[i]);
  }
  return (v < 0 ? "-" : "") + out;
}

JsonValue num(std::int64_t v) { return JsonValue::number(v); }
JsonValue num(double v) { return JsonValue::number(v); }

}  // namespace estargs

using namespace estargs;

Args withScenario(const Args& a) {
  if (!a.has("scenario")) return a;
  const std::string name = a.get("scenario");
  const est::Scenario* sc = est::findScenario(name);
  if (!sc) {
    std::string list;
    for (const auto& x : est::scenarios()) list += (list.empty() ? "" : ", ") + x.name;
    throw std::invalid_argument("unknown scenario '" + name + "' (" + list + "; --scenario list describes them)");
  }
  Args out = a;
  std::vector<std::pair<std::string, std::string>> front;
  for (const auto& [k, v] : sc->options) {
    front.emplace_back(k, v);
    if (v == "true" && std::find(out.flags.begin(), out.flags.end(), k) == out.flags.end()) out.flags.push_back(k);
  }
  out.options.insert(out.options.begin(), front.begin(), front.end());
  return out;
}

std::string scenarioList() {
  std::string s = "Scenarios (estimate --scenario NAME; flags given with it override its values):\n";
  for (const auto& x : est::scenarios()) {
    s += "  " + x.name + ": " + x.summary + "\n    ";
    for (const auto& [k, v] : x.options) s += " --" + k + (v == "true" ? std::string() : " " + v);
    s += "\n";
  }
  return s;
}

void parseEstimatorInput(const Args& rawArgs, est::RecommendInput& ri, std::string& fitNote,
                         std::optional<est::LinkCalibration>* calibration) {
  const Args a = withScenario(rawArgs);
  est::EstimateInput& in = ri.model;
  in.model = shapeFrom(a);
  const bool runtimeModel = isRuntimePreset(in.model.name);
  if (!a.has("gpus")) throw std::invalid_argument("give --gpus N (the data-parallel world size)");
  in.gpus = static_cast<int>(intOption(a, "gpus", 1, 1));
  in.gpusPerNode = static_cast<int>(intOption(a, "gpus-per-node", std::min(in.gpus, 8), 1));
  in.shardGroupSize = static_cast<int>(intOption(a, "shard-group-size", 0, 0));
  in.microBatch = intOption(a, "micro-batch", runtimeModel ? 4 : 1, 1);
  in.seqLen = intOption(a, "seq-len", runtimeModel ? 128 : 2048, 1);
  const std::string prec = a.get("precision", runtimeModel ? "fp32" : "bf16");
  if (auto p = core::knobFromString<core::Precision>(prec))
    in.precision = *p;
  else if (prec == "fp16")  // modelled as bf16: the same bytes per element
    in.precision = core::Precision::Bf16;
  else
    throw std::invalid_argument("--precision expects fp32, bf16 or fp16, got '" + prec + "'");
  if (a.has("attention")) {
    const std::string at = a.get("attention");
    if (at == "eager")
      in.attention = est::AttentionKind::Eager;
    else if (at == "flash")
      in.attention = est::AttentionKind::Flash;
    else
      throw std::invalid_argument("--attention expects eager or flash, got '" + at + "'");
  }
  in.activationCheckpointing = a.has("activation-checkpointing");
  in.offloadOptimizer = a.has("offload-optimizer");
  in.offloadParam = a.has("offload-param");
  in.gradientAsBucketView = a.has("gradient-as-bucket-view");
  in.reduceBucketSize = intOption(a, "reduce-bucket-size", in.reduceBucketSize, 1);
  in.paramPersistenceThreshold = intOption(a, "param-persistence-threshold", in.paramPersistenceThreshold, 0);
  in.maxReuseDistance = intOption(a, "max-reuse-distance", in.maxReuseDistance, 0);

  // Fine-tuning: LoRA adapters on the target projections, QLoRA's NF4 base.
  in.loraRank = static_cast<int>(intOption(a, "lora-rank", 0, 0));
  in.loraAlpha = doubleOption(a, "lora-alpha", in.loraAlpha);
  in.loraTargets = a.get("lora-targets", in.loraTargets);
  in.qlora = a.has("qlora");
  if (in.loraRank == 0 && (a.has("lora-alpha") || a.has("lora-targets") || in.qlora))
    throw std::invalid_argument("--lora-alpha, --lora-targets and --qlora go with --lora-rank R (R > 0)");
  if (in.qlora && a.has("precision") && in.precision == core::Precision::Fp32)
    throw std::invalid_argument("--qlora computes in bf16 (NF4 weights dequantised to 16 bits): drop --precision fp32");
  if (in.qlora) in.precision = core::Precision::Bf16;
  (void)est::moduleShapes(in);  // the LoRA settings checked here, before any strategy

  // A device preset: its memory, peak and link, unless given apart.
  std::optional<est::DevicePreset> device;
  if (a.has("gpu")) {
    device = est::devicePreset(a.get("gpu"));
    if (!device) {
      std::string list;
      for (const auto& n : est::devicePresetNames()) list += (list.empty() ? "" : ", ") + n;
      throw std::invalid_argument("unknown --gpu '" + a.get("gpu") + "' (" + list + ")");
    }
    ri.deviceBytes = device->memoryBytes;
  }
  if (a.has("gpu-memory")) {
    auto b = est::parseByteSize(a.get("gpu-memory"));
    if (!b)
      throw std::invalid_argument("--gpu-memory expects a size such as 80GiB, 141GB or 24GiB, got '" + a.get("gpu-memory") + "'");
    ri.deviceBytes = *b;
  }
  ri.headroom = doubleOption(a, "headroom", 0.1);
  if (!(ri.headroom >= 0 && ri.headroom < 1)) throw std::invalid_argument("--headroom must be in [0, 1), e.g. 0.1");
  ri.deviceTflops =
      doubleOption(a, "tflops", device ? (in.precision == core::Precision::Fp32 ? device->fp32Tflops : device->bf16Tflops) : 989);
  ri.efficiency = doubleOption(a, "efficiency", 0.4);
  if (!(ri.deviceTflops > 0) || !(ri.efficiency > 0 && ri.efficiency <= 1))
    throw std::invalid_argument("--tflops must be positive and --efficiency in (0, 1]");

  const std::string linkName = a.get("link", device ? device->link : "nvlink-h100");
  if (a.has("fit-run")) {
    core::TraceStore store(a.get("db", "shardscope.db"), core::Database::Mode::ReadOnly);
    const core::RunId id{intOption(a, "fit-run", 0, 1)};
    auto cal = est::calibrateLink(store, id);
    ri.intraNode = cal.link;
    fitNote = cal.note;
    if (calibration) *calibration = std::move(cal);
  } else {
    auto l = est::linkPreset(linkName);
    if (!l) {
      std::string list;
      for (const auto& n : est::linkPresetNames()) list += (list.empty() ? "" : ", ") + n;
      throw std::invalid_argument("unknown link '" + linkName + "' (" + list + ")");
    }
    ri.intraNode = *l;
  }
  {
    const std::string interName = a.get("inter-link", "ib-ndr");
    auto l = est::linkPreset(interName);
    if (!l) throw std::invalid_argument("unknown --inter-link '" + interName + "'");
    ri.interNode = *l;
  }
  ri.comm.emulatedReduceScatter = a.has("gloo-reduce-scatter") || (!a.has("fit-run") && linkName == "gloo-cpu-local");
  ri.candidates = strategiesFrom(a);
}

namespace {

int cmdEstimate(const Args& rawArgs, core::CancelToken&) {
  if (!rawArgs.positional.empty())
    throw std::invalid_argument("estimate takes no positional arguments ('" + rawArgs.positional[0] + "')");
  if (rawArgs.get("scenario") == "list") {
    std::cout << scenarioList();
    return kOk;
  }
  const Args a = withScenario(rawArgs);
  est::RecommendInput ri;
  est::EstimateInput& in = ri.model;
  std::string fitNote;
  parseEstimatorInput(a, ri, fitNote);

  const auto ranked = est::recommend(ri);
  if (ranked.empty())
    throw std::invalid_argument("no strategy applies to these options (parameter offload needs a sharding strategy)");
  const std::int64_t P = est::parameterCount(in.model);
  const std::int64_t LL = est::largestModuleParameters(in.model);
  const int nodes = est::nodeCount(in);
  const int gpn = std::min(in.gpus, in.gpusPerNode);
  const bool dsMode = a.has("deepspeed-formulas");
  // DeepSpeed's own estimators: model states only, 16-bit params + fp32 Adam, its offload settings.
  const auto ds2 = est::deepspeedZero2(P, gpn, nodes, in.offloadOptimizer);
  const auto ds3 = est::deepspeedZero3(P, LL, gpn, nodes, in.offloadOptimizer || in.offloadParam, in.offloadParam);

  if (a.has("json")) {
    JsonValue out = JsonValue::object();
    JsonValue model = JsonValue::object();
    model.set("name", JsonValue::string(in.model.name));
    model.set("parameters", num(P));
    model.set("largest_module_parameters", num(LL));
    model.set("layers", num(std::int64_t{in.model.layers}));
    model.set("hidden", num(in.model.hidden));
    model.set("heads", num(std::int64_t{in.model.heads}));
    model.set("kv_heads", num(std::int64_t{in.model.kvHeads}));
    model.set("ffn", num(in.model.ffn));
    model.set("vocab", num(in.model.vocab));
    model.set("tied_embeddings", JsonValue::boolean(in.model.tiedEmbeddings));
    out.set("model", std::move(model));
    out.set("gpus", num(std::int64_t{in.gpus}));
    out.set("gpus_per_node", num(std::int64_t{gpn}));
    out.set("nodes", num(std::int64_t{nodes}));
    out.set("precision", JsonValue::string(std::string(core::toString(in.precision))));
    out.set("attention", JsonValue::string(est::effectiveAttention(in) == est::AttentionKind::Eager ? "eager" : "flash"));
    out.set("micro_batch", num(in.microBatch));
    out.set("seq_len", num(in.seqLen));
    out.set("activation_checkpointing", JsonValue::boolean(in.activationCheckpointing));
    out.set("offload_optimizer", JsonValue::boolean(in.offloadOptimizer));
    out.set("offload_param", JsonValue::boolean(in.offloadParam));
    {
      JsonValue ft = JsonValue::object();
      ft.set("mode", JsonValue::string(est::fineTuningName(est::fineTuning(in))));
      ft.set("trainable_params", num(est::trainableParameterCount(in)));
      ft.set("frozen_params", num(est::frozenParameterCount(in)));
      if (in.loraRank > 0) {
        ft.set("lora_rank", num(std::int64_t{in.loraRank}));
        ft.set("lora_alpha", num(in.loraAlpha));
        JsonValue targets = JsonValue::array();
        for (const auto& t : core::loraTargetList(in.loraTargets)) targets.push(JsonValue::string(t));
        ft.set("lora_targets", std::move(targets));
        ft.set("frozen_base_bytes", num(est::frozenBaseBytes(in)));
      }
      if (in.qlora) ft.set("nf4_bytes_per_param", num(est::kNf4BytesPerParam));
      out.set("fine_tuning", std::move(ft));
    }
    if (a.has("scenario")) out.set("scenario", JsonValue::string(a.get("scenario")));
    out.set("device_bytes", num(ri.deviceBytes));
    out.set("headroom", num(ri.headroom));
    JsonValue link = JsonValue::object();
    link.set("name", JsonValue::string(ri.intraNode.name));
    link.set("bus_bw_gbps", num(ri.intraNode.busBwGBps));
    link.set("all_reduce_bus_bw_gbps", num(ri.intraNode.arBw()));
    link.set("alpha_us", num(ri.intraNode.alphaUs));
    if (!fitNote.empty()) link.set("fit", JsonValue::string(fitNote));
    out.set("link", std::move(link));
    out.set("inter_node_link", JsonValue::string(ri.interNode.name));
    JsonValue arr = JsonValue::array();
    for (const auto& s : ranked) arr.push(est::toJson(s));
    out.set("strategies", std::move(arr));
    if (dsMode) {
      JsonValue ds = JsonValue::object();
      auto dsj = [&](const est::DeepSpeedEstimate& d) {
        JsonValue o = est::toJson(d);
        const auto f = est::checkFit(d.gpuBytes, ri.deviceBytes, ri.headroom);
        o.set("fits", JsonValue::boolean(f.fits));
        return o;
      };
      ds.set("zero2", dsj(ds2));
      ds.set("zero3", dsj(ds3));
      ds.set("num_gpus_per_node", num(std::int64_t{gpn}));
      ds.set("num_nodes", num(std::int64_t{nodes}));
      out.set("deepspeed", std::move(ds));
    }
    std::cout << out.dump() << "\n";
    return kOk;
  }

  auto gib = [](std::int64_t b) { return core::formatFixed(static_cast<double>(b) / (1024.0 * 1024 * 1024), 2); };
  const bool small = ranked.front().memory.peakBytes < 64LL * 1024 * 1024 * 1024 / 64;  // < 1 GiB: MiB columns
  auto col = [&](std::int64_t b) { return small ? core::formatFixed(static_cast<double>(b) / (1024.0 * 1024), 2) : gib(b); };
  std::ostringstream os;
  os << "Model " << in.model.name << ": " << groupDigits(P) << " parameters, " << in.model.layers << " layers, hidden "
     << in.model.hidden << ", heads " << in.model.heads << "/" << in.model.kvHeads << ", ffn " << in.model.ffn << ", vocab "
     << in.model.vocab << (in.model.tiedEmbeddings ? " (tied)" : "") << "; largest module " << groupDigits(LL) << "\n";
  os << in.gpus << " devices (" << gpn << " per node, " << nodes << " node" << (nodes > 1 ? "s" : "") << "), "
     << (in.precision == est::Precision::Fp32 ? "fp32 (params, grads, Adam)" : "bf16 compute, fp32 master + Adam")
     << ", micro-batch " << in.microBatch << " x " << in.seqLen << " tokens, "
     << (est::effectiveAttention(in) == est::AttentionKind::Eager ? "eager" : "flash") << " attention"
     << (in.activationCheckpointing ? ", activation checkpointing" : "") << (in.offloadOptimizer ? ", optimizer offload" : "")
     << (in.offloadParam ? ", parameter offload" : "") << "\n";
  const bool lora = in.loraRank > 0;
  if (a.has("scenario")) os << "Scenario " << a.get("scenario") << "\n";
  if (lora) {
    const std::int64_t T = est::trainableParameterCount(in);
    os << (in.qlora ? "QLoRA" : "LoRA") << " r=" << in.loraRank << " alpha=" << core::formatFixed(in.loraAlpha, 0) << " on "
       << in.loraTargets << ": " << groupDigits(T) << " trainable parameters ("
       << core::formatFixed(100.0 * static_cast<double>(T) / static_cast<double>(P), 3) << "%), frozen base "
       << est::formatBytes(static_cast<double>(est::frozenBaseBytes(in)))
       << (in.qlora ? " (NF4 projections, " + core::formatFixed(est::kNf4BytesPerParam, 4) +
                          " B/param; embeddings, norms, head 16-bit)"
                    : " in the compute dtype")
       << "\n";
  }
  os << "Device memory " << est::formatBytes(static_cast<double>(ri.deviceBytes)) << ", headroom "
     << core::formatFixed(ri.headroom * 100, 0) << "%; link " << ri.intraNode.name << " ("
     << core::formatFixed(ri.intraNode.busBwGBps, 2) << " GB/s bus, " << core::formatFixed(ri.intraNode.alphaUs, 1) << " us)"
     << (nodes > 1 ? ", between nodes " + ri.interNode.name : std::string()) << "\n";
  if (!fitNote.empty()) os << "  link " << fitNote << "\n";
  os << "\nPer device (" << (small ? "MiB" : "GiB") << "): model states, then the estimated peak"
     << (lora ? " (params, grads, optimizer: the adapters'; frozen: the base this device holds)" : "") << "\n";
  char line[512];
  if (lora)
    std::snprintf(line, sizeof line, "  %-13s %10s %10s %10s %10s %10s %10s %10s %10s %10s  %-4s %12s %10s\n", "strategy",
                  "frozen", "adapters", "grads", "optimizer", "buffers", "states", "gathered", "activ.", "peak", "fits",
                  "wire/step", "comm time");
  else
    std::snprintf(line, sizeof line, "  %-13s %10s %10s %10s %10s %10s %10s %10s %10s  %-4s %12s %10s\n", "strategy", "params",
                  "grads", "optimizer", "buffers", "states", "gathered", "activ.", "peak", "fits", "wire/step", "comm time");
  os << line;
  for (const auto& s : ranked) {
    const auto& st = s.memory.state;
    const auto& pk = s.memory.atPeak;
    const std::string tail = std::string(s.fit.fits ? "yes" : "NO");
    if (lora)
      std::snprintf(line, sizeof line, "  %-13s %10s %10s %10s %10s %10s %10s %10s %10s %10s  %-4s %12s %10s\n",
                    est::strategyName(s.strategy).c_str(), col(st.frozen).c_str(), col(st.parameters).c_str(),
                    col(st.gradients).c_str(), col(st.optimizer).c_str(), col(st.buffers).c_str(), col(st.modelStates()).c_str(),
                    col(pk.gathered).c_str(), col(pk.activations).c_str(), col(s.memory.peakBytes).c_str(), tail.c_str(),
                    est::formatBytes(s.comm.wireBytes).c_str(), (core::formatFixed(s.comm.timeS * 1e3, 2) + " ms").c_str());
    else
      std::snprintf(line, sizeof line, "  %-13s %10s %10s %10s %10s %10s %10s %10s %10s  %-4s %12s %10s\n",
                    est::strategyName(s.strategy).c_str(), col(st.parameters).c_str(), col(st.gradients).c_str(),
                    col(st.optimizer).c_str(), col(st.buffers).c_str(), col(st.modelStates()).c_str(), col(pk.gathered).c_str(),
                    col(pk.activations).c_str(), col(s.memory.peakBytes).c_str(), tail.c_str(),
                    est::formatBytes(s.comm.wireBytes).c_str(), (core::formatFixed(s.comm.timeS * 1e3, 2) + " ms").c_str());
    os << line;
  }
  if (lora) {
    os << "\nCommunication per step and device by kind (message bytes S):\n";
    for (const auto& s : ranked) {
      std::int64_t by[3] = {0, 0, 0};
      for (const auto& c : s.comm.collectives) by[static_cast<int>(c.kind)] += c.messageBytes;
      os << "  " << est::strategyName(s.strategy) << ": all-reduce " << est::formatBytes(static_cast<double>(by[0]))
         << ", all-gather " << est::formatBytes(static_cast<double>(by[1])) << ", reduce-scatter "
         << est::formatBytes(static_cast<double>(by[2])) << "\n";
    }
  }
  os << "\nCommunication per step and device:\n";
  for (const auto& s : ranked) {
    os << "  " << est::strategyName(s.strategy) << ":\n";
    if (s.comm.collectives.empty()) os << "    (none: one device)\n";
    for (const auto& c : s.comm.collectives)
      os << "    " << c.what << ": " << est::collKindName(c.kind) << (c.emulatedReduceScatter ? " (emulated by all_reduce)" : "")
         << " x" << c.count << " over " << c.groupSize << (c.interNode ? " (across nodes)" : "") << ", S "
         << est::formatBytes(static_cast<double>(c.messageBytes)) << ", wire " << est::formatBytes(c.wireBytes()) << ", "
         << core::formatFixed(c.timeS * 1e3, 3) << " ms, " << est::phaseName(c.phase) << "\n";
  }
  if (dsMode) {
    os << "\nDeepSpeed's estimators (model states only; " << gpn << " GPUs per node, " << nodes << " node"
       << (nodes > 1 ? "s" : "") << ", additional_buffer_factor 1.5):\n";
    os << "  estimate_zero2_model_states_mem_needs (cpu_offload=" << (in.offloadOptimizer ? "True" : "False") << "): GPU "
       << gib(ds2.gpuBytes) << " GiB, CPU " << gib(ds2.cpuBytes) << " GiB\n";
    os << "  estimate_zero3_model_states_mem_needs (cpu_offload=" << (in.offloadOptimizer || in.offloadParam ? "True" : "False")
       << ", cpu_offload_params=" << (in.offloadParam ? "True" : "False") << ", zero_init=True): GPU " << gib(ds3.gpuBytes)
       << " GiB, CPU " << gib(ds3.cpuBytes) << " GiB, largest layer " << gib(ds3.largestLayerBytes) << " GiB\n";
    for (const auto& s : ranked)
      if (s.strategy == est::Strategy::Zero2 || s.strategy == est::Strategy::Zero3)
        os << "  ours, " << est::strategyName(s.strategy) << " model states: " << gib(s.memory.state.modelStates())
           << " GiB (peak with activations " << gib(s.memory.peakBytes) << " GiB)\n";
  }
  os << "\nRanking (fits first, then expected step time; compute from " << core::formatFixed(ri.deviceTflops, 0) << " TFLOPS x "
     << core::formatFixed(ri.efficiency, 2) << "):\n";
  for (const auto& s : ranked) {
    os << "  " << s.rank << ". " << est::strategyName(s.strategy) << "\n";
    for (const auto& r : s.reasons) os << "       - " << r << "\n";
    for (const auto& n : s.memory.notes) os << "       note: " << n << "\n";
  }
  std::cout << os.str();
  return kOk;
}

}  // namespace

std::vector<OptionSpec> estimatorInputOptions() {
  return {
      {"model", true, "model preset, or custom with the shape flags below"},
      {"layers", true, "transformer blocks (custom; with a preset: cut the depth)"},
      {"hidden", true, "hidden size (custom)"},
      {"heads", true, "attention heads (custom)"},
      {"kv-heads", true, "key/value heads (custom; default: heads)"},
      {"head-dim", true, "head dimension (custom; default hidden/heads)"},
      {"ffn", true, "SwiGLU intermediate size (custom)"},
      {"vocab", true, "vocabulary size (custom)"},
      {"tied-embeddings", false, "custom: the LM head shares the embedding"},
      {"qk-norm", false, "custom: per-head q/k RMSNorm (Qwen3)"},
      {"qkv-bias", false, "custom: q/k/v biases (Qwen2.5)"},
      {"gpus", true, "data-parallel devices (world size)"},
      {"gpus-per-node", true, "devices per node (default min(gpus, 8))"},
      {"shard-group-size", true, "HSDP shard group / hpZ partition size (default: gpus per node)"},
      {"gpu-memory", true, "device memory, e.g. 80GiB (default), 141GB, 24GiB"},
      {"headroom", true, "fraction of the device kept free (default 0.1)"},
      {"strategy", true,
       "ddp|zero1|zero2|zero3|fsdp|fsdp_grad_op|hsdp|zeropp_hpz; repeat or comma-separate "
       "(default: all; hsdp and zeropp_hpz only across nodes)"},
      {"micro-batch", true, "sequences per device per step (default 1; runtime presets 4)"},
      {"seq-len", true, "tokens per sequence (default 2048; runtime presets 128)"},
      {"precision", true, "fp32 | bf16 (fp32 master weights and Adam; default bf16, runtime presets fp32)"},
      {"attention", true, "eager (our runtime: s x s scores) | flash (default for the published models)"},
      {"activation-checkpointing", false, "keep only each block's input; recompute in backward"},
      {"offload-optimizer", false, "optimizer state on the CPU (ZeRO / FSDP)"},
      {"offload-param", false, "parameter shards on the CPU (zero3, fsdp, hsdp, zeropp_hpz)"},
      {"gradient-as-bucket-view", false, "DDP: gradients are views into the buckets (no second copy)"},
      {"reduce-bucket-size", true, "ZeRO reduce bucket in elements (default 5e8 = 500000000)"},
      {"param-persistence-threshold", true, "ZeRO-3: parameters below this many elements stay whole (default 100000)"},
      {"max-reuse-distance", true, "ZeRO-3 stage3_max_reuse_distance in elements (default 1000000000)"},
      {"link", true,
       "nvlink-h100 (default) | nvlink-h200 | pcie4 | pcie5 | ib-ndr | ib-hdr | eth-100g | eth-25g | "
       "gloo-cpu-local"},
      {"inter-link", true, "link between nodes (default ib-ndr)"},
      {"fit-run", true, "fit alpha and bandwidth from this run's collectives (with --db) instead of --link"},
      {"gloo-reduce-scatter", false,
       "Gloo collectives: reduce-scatter emulated by all-reduce, all-gather staged through a full-size copy (implied by "
       "gloo-cpu-local)"},
      {"tflops", true, "device dense peak for the compute dtype (default 989, H100 SXM bf16)"},
      {"efficiency", true, "achieved fraction of the peak (default 0.4)"},
      {"gpu", true,
       "device preset: a10 | a100-80gb | h100-sxm | h200 (its memory, dense peak and link unless --gpu-memory, "
       "--tflops, --link)"},
      {"lora-rank", true, "LoRA rank r: freeze the base, train adapters A [r x in], B [out x r] (default 0: full fine-tuning)"},
      {"lora-alpha", true, "LoRA alpha (adapter scale alpha/r; default 16)"},
      {"lora-targets", true, "LoRA target projections, comma list of q,k,v,o,gate,up,down or all-linear (default all)"},
      {"qlora", false, "QLoRA: the frozen projections in NF4 with double-quantised scales, bf16 compute (needs --lora-rank)"},
      {"scenario", true,
       "a preset setup (qwen3-lora-4xa10, qwen3-qlora-4xa10, llama-7b-full-8xa100; list: describe them); flags given "
       "override it"}};
}

std::vector<Command> estimatorCommands() {
  return {
      {"estimate",
       "shardscope-cli estimate [--scenario NAME|list] --model llama3-8b|llama3-70b|llama2-7b|qwen3-8b|qwen2.5-7b|tiny|odd|small|"
       "medium|custom [--lora-rank R --lora-alpha A --lora-targets LIST --qlora] [--gpu a10|a100-80gb|h100-sxm|h200] "
       "[--layers --hidden --heads --kv-heads --ffn --vocab] --gpus N [--gpus-per-node G] [--gpu-memory 80GiB] "
       "[--strategy S ...] [--micro-batch B --seq-len L --precision fp32|bf16 --activation-checkpointing "
       "--offload-optimizer --offload-param] [--deepspeed-formulas] [--link L | --db F --fit-run ID] [--json]",
       "Estimate per-device memory, communication and step time for each strategy before running, and rank them "
       "(fits, headroom, exposed communication, expected throughput)",
       [] {
         auto o = estimatorInputOptions();
         o.push_back({"deepspeed-formulas", false, "also print DeepSpeed's estimate_zero2/zero3_model_states_mem_needs"});
         return o;
       }(),
       cmdEstimate},
  };
}

}  // namespace shardscope::cli
