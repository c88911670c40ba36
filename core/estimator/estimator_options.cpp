#include "core/estimator/estimator_options.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "core/config/run_config.h"
#include "core/model/model_presets.h"
#include "core/storage/trace_store.h"

namespace shardscope::core::estimator {

std::int64_t optionInt(const ParsedArgs& a, const std::string& name, std::int64_t def, std::int64_t min) {
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

double optionDouble(const ParsedArgs& a, const std::string& name, double def) {
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

std::vector<Strategy> optionStrategies(const ParsedArgs& a) {
  std::vector<Strategy> out;
  for (const auto& [k, v] : a.options) {
    if (k != "strategy") continue;
    std::size_t pos = 0;
    while (pos <= v.size()) {
      const std::size_t comma = std::min(v.find(',', pos), v.size());
      const std::string item = v.substr(pos, comma - pos);
      if (!item.empty()) {
        auto s = strategyFromString(item);
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

namespace {

bool isRuntimePreset(const std::string& n) {
  const ModelPreset* p = findModelPreset(n);
  return p && p->cpuSized;
}

ModelShape shapeFrom(const ParsedArgs& a) {
  const std::string name = a.get("model");
  if (name.empty())
    throw std::invalid_argument(
        "give --model (llama3-8b, llama3-70b, llama2-7b, qwen3-8b, qwen2.5-7b, tiny, odd, small, medium or custom) or "
        "--scenario NAME");
  static const char* shapeFlags[] = {"hidden", "heads", "kv-heads", "ffn", "vocab", "head-dim"};
  if (name == "custom") {
    ModelShape m;
    m.name = "custom";
    for (const char* f : {"layers", "hidden", "heads", "ffn", "vocab"})
      if (!a.has(f)) throw std::invalid_argument(std::string("--model custom needs --") + f);
    m.layers = static_cast<int>(optionInt(a, "layers", 0, 1));
    m.hidden = optionInt(a, "hidden", 0, 1);
    m.heads = static_cast<int>(optionInt(a, "heads", 0, 1));
    m.kvHeads = static_cast<int>(optionInt(a, "kv-heads", m.heads, 1));
    m.ffn = optionInt(a, "ffn", 0, 1);
    m.vocab = optionInt(a, "vocab", 0, 1);
    m.headDim = optionInt(a, "head-dim", 0, 1);
    m.tiedEmbeddings = a.has("tied-embeddings");
    m.qkNorm = a.has("qk-norm");
    m.qkvBias = a.has("qkv-bias");
    validateShape(m);
    return m;
  }
  for (const char* f : shapeFlags)
    if (a.has(f))
      throw std::invalid_argument(std::string("--") + f + " only goes with --model custom (a preset has its own shape)");
  auto m = modelShapePreset(name, static_cast<int>(optionInt(a, "layers", 0, 1)));
  if (!m) {
    std::string list;
    for (const auto& n : modelShapePresetNames()) list += (list.empty() ? "" : ", ") + n;
    throw std::invalid_argument("unknown model '" + name + "' (presets: " + list + ", or custom)");
  }
  return *m;
}

}  // namespace

ParsedArgs scenarioArgs(const Scenario& s) {
  const auto specs = estimatorInputOptions();
  ParsedArgs out;
  for (const auto& [k, v] : s.options) {
    const auto spec = std::find_if(specs.begin(), specs.end(), [&k = k](const ArgSpec& o) { return o.name == k; });
    if (spec == specs.end() || k == "scenario")
      throw std::invalid_argument("scenario " + s.name + ": '" + k + "' is not an estimator option");
    out.options.emplace_back(k, v);
    if (!spec->takesValue) out.flags.push_back(k);
  }
  return out;
}

ParsedArgs withScenario(const ParsedArgs& a) {
  if (!a.has("scenario")) return a;
  const std::string name = a.get("scenario");
  const Scenario* sc = findScenario(name);
  if (!sc) {
    std::string list;
    for (const auto& x : scenarios()) list += (list.empty() ? "" : ", ") + x.name;
    throw std::invalid_argument("unknown scenario '" + name + "' (" + list + "; --scenario list describes them)");
  }
  const ParsedArgs front = scenarioArgs(*sc);
  ParsedArgs out = a;
  for (const auto& f : front.flags)
    if (std::find(out.flags.begin(), out.flags.end(), f) == out.flags.end()) out.flags.push_back(f);
  out.options.insert(out.options.begin(), front.options.begin(), front.options.end());
  return out;
}

std::string scenarioList() {
  std::string s = "Scenarios (estimate --scenario NAME; flags given with it override its values):\n";
  for (const auto& x : scenarios()) {
    s += "  " + x.name + ": " + x.summary + "\n    ";
    for (const auto& [k, v] : x.options) s += " --" + k + (v == "true" ? std::string() : " " + v);
    s += "\n";
  }
  return s;
}

bool linkImpliesGloo(std::string_view linkName) { return linkName == "gloo-cpu-local"; }

void applyEstimatorOptions(const ParsedArgs& a, RecommendInput& ri, std::string* fitNote,
                           std::optional<LinkCalibration>* calibration) {
  EstimateInput& in = ri.model;
  in.model = shapeFrom(a);
  const bool runtimeModel = isRuntimePreset(in.model.name);
  if (!a.has("gpus")) throw std::invalid_argument("give --gpus N (the data-parallel world size)");
  in.gpus = static_cast<int>(optionInt(a, "gpus", 1, 1));
  in.gpusPerNode = static_cast<int>(optionInt(a, "gpus-per-node", std::min(in.gpus, 8), 1));
  in.shardGroupSize = static_cast<int>(optionInt(a, "shard-group-size", 0, 0));
  in.microBatch = optionInt(a, "micro-batch", runtimeModel ? 4 : 1, 1);
  in.seqLen = optionInt(a, "seq-len", runtimeModel ? 128 : 2048, 1);
  const std::string prec = a.get("precision", runtimeModel ? "fp32" : "bf16");
  if (auto p = knobFromString<Precision>(prec))
    in.precision = *p;
  else if (prec == "fp16")  // modelled as bf16: the same bytes per element
    in.precision = Precision::Bf16;
  else
    throw std::invalid_argument("--precision expects fp32, bf16 or fp16, got '" + prec + "'");
  if (a.has("attention")) {
    const std::string at = a.get("attention");
    if (at == "eager")
      in.attention = AttentionKind::Eager;
    else if (at == "flash")
      in.attention = AttentionKind::Flash;
    else
      throw std::invalid_argument("--attention expects eager or flash, got '" + at + "'");
  }
  in.activationCheckpointing = a.has("activation-checkpointing");
  if (a.has("selective-checkpointing")) {
    const std::string sac = a.get("selective-checkpointing");
    if (sac == "op") {
      in.selective = EstimateInput::Selective::Ops;
    } else if (sac == "layer" || sac.rfind("layer:", 0) == 0) {
      in.selective = EstimateInput::Selective::Layers;
      if (sac.size() > 6) {
        const std::string n = sac.substr(6);
        if (n.empty() || n.size() > 4 || !std::all_of(n.begin(), n.end(), ::isdigit) || std::stoi(n) < 1)
          throw std::invalid_argument("--selective-checkpointing layer:N expects a positive N, got '" + sac + "'");
        in.sacEvery = std::stoi(n);
      }
    } else {
      throw std::invalid_argument("--selective-checkpointing expects op, layer or layer:N, got '" + sac + "'");
    }
    if (in.activationCheckpointing)
      throw std::invalid_argument("--selective-checkpointing and --activation-checkpointing exclude each other");
  }
  in.offloadOptimizer = a.has("offload-optimizer");
  in.offloadParam = a.has("offload-param");
  in.gradientAsBucketView = a.has("gradient-as-bucket-view");
  in.reduceBucketSize = optionInt(a, "reduce-bucket-size", in.reduceBucketSize, 1);
  in.paramPersistenceThreshold = optionInt(a, "param-persistence-threshold", in.paramPersistenceThreshold, 0);
  in.maxReuseDistance = optionInt(a, "max-reuse-distance", in.maxReuseDistance, 0);

  // Fine-tuning: LoRA adapters on the target projections, QLoRA's NF4 base.
  in.loraRank = static_cast<int>(optionInt(a, "lora-rank", 0, 0));
  in.loraAlpha = optionDouble(a, "lora-alpha", in.loraAlpha);
  in.loraTargets = a.get("lora-targets", in.loraTargets);
  in.qlora = a.has("qlora");
  if (in.loraRank == 0 && (a.has("lora-alpha") || a.has("lora-targets") || in.qlora))
    throw std::invalid_argument("--lora-alpha, --lora-targets and --qlora go with --lora-rank R (R > 0)");
  if (in.qlora && a.has("precision") && in.precision == Precision::Fp32)
    throw std::invalid_argument("--qlora computes in bf16 (NF4 weights dequantised to 16 bits): drop --precision fp32");
  if (in.qlora) in.precision = Precision::Bf16;
  (void)moduleShapes(in);  // the LoRA settings checked here, before any strategy

  // A device preset: its memory, peak, bandwidth and link, unless given apart.
  std::optional<DevicePreset> device;
  if (a.has("gpu")) {
    device = devicePreset(a.get("gpu"));
    if (!device) {
      std::string list;
      for (const auto& n : devicePresetNames()) list += (list.empty() ? "" : ", ") + n;
      throw std::invalid_argument("unknown --gpu '" + a.get("gpu") + "' (" + list + ")");
    }
    applyDevicePreset(*device, ri);
  }
  if (a.has("gpu-memory")) {
    auto b = parseByteSize(a.get("gpu-memory"));
    if (!b)
      throw std::invalid_argument("--gpu-memory expects a size such as 80GiB, 141GB or 24GiB, got '" + a.get("gpu-memory") + "'");
    ri.deviceBytes = *b;
  }
  ri.headroom = optionDouble(a, "headroom", 0.1);
  if (!(ri.headroom >= 0 && ri.headroom < 1)) throw std::invalid_argument("--headroom must be in [0, 1), e.g. 0.1");
  ri.deviceTflops = optionDouble(a, "tflops", ri.deviceTflops);
  ri.efficiency = optionDouble(a, "efficiency", ri.efficiency);
  if (!(ri.deviceTflops > 0) || !(ri.efficiency > 0 && ri.efficiency <= 1))
    throw std::invalid_argument("--tflops must be positive and --efficiency in (0, 1]");
  // A preset's figures overridden: no longer that device.
  if (device && (a.has("gpu-memory") || a.has("tflops"))) ri.device.clear();

  const std::string linkName = a.get("link", ri.intraNode.name.empty() ? "nvlink-h100" : ri.intraNode.name);
  if (a.has("fit-run")) {
    TraceStore store(a.get("db", "shardscope.db"), Database::Mode::ReadOnly);
    const RunId id{optionInt(a, "fit-run", 0, 1)};
    auto cal = calibrateLink(store, id);
    ri.intraNode = cal.link;
    if (fitNote) *fitNote = cal.note;
    if (calibration) *calibration = std::move(cal);
  } else {
    auto l = linkPreset(linkName);
    if (!l) {
      std::string list;
      for (const auto& n : linkPresetNames()) list += (list.empty() ? "" : ", ") + n;
      throw std::invalid_argument("unknown link '" + linkName + "' (" + list + ")");
    }
    ri.intraNode = *l;
  }
  {
    const std::string interName = a.get("inter-link", "ib-ndr");
    auto l = linkPreset(interName);
    if (!l) throw std::invalid_argument("unknown --inter-link '" + interName + "'");
    ri.interNode = *l;
  }
  ri.comm.emulatedReduceScatter = a.has("gloo-reduce-scatter") || (!a.has("fit-run") && linkImpliesGloo(linkName));
  ri.candidates = optionStrategies(a);
}

RecommendInput scenarioInput(const Scenario& s) {
  RecommendInput ri;
  applyEstimatorOptions(scenarioArgs(s), ri);
  return ri;
}

namespace {

std::string num(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%.12g", v);
  return b;
}

}  // namespace

std::string firstInputDifference(const RecommendInput& a, const RecommendInput& b) {
  std::string d;
  auto cmp = [&d](const char* what, const std::string& x, const std::string& y) {
    if (d.empty() && x != y) d = std::string(what) + ": " + x + " vs " + y;
  };
  auto cmpN = [&cmp](const char* what, double x, double y) {
    if (x != y) cmp(what, num(x), num(y));
  };
  auto cmpB = [&cmp](const char* what, bool x, bool y) { cmp(what, x ? "on" : "off", y ? "on" : "off"); };
  const ModelShape &ma = a.model.model, &mb = b.model.model;
  cmp("model", ma.name, mb.name);
  cmpN("vocabulary", static_cast<double>(ma.vocab), static_cast<double>(mb.vocab));
  cmpN("hidden size", static_cast<double>(ma.hidden), static_cast<double>(mb.hidden));
  cmpN("layers", ma.layers, mb.layers);
  cmpN("attention heads", ma.heads, mb.heads);
  cmpN("KV heads", ma.kvHeads, mb.kvHeads);
  auto headDim = [](const ModelShape& m) { return m.headDim > 0 ? m.headDim : m.hidden / std::max(1, m.heads); };
  cmpN("head dimension", static_cast<double>(headDim(ma)), static_cast<double>(headDim(mb)));
  cmpN("FFN size", static_cast<double>(ma.ffn), static_cast<double>(mb.ffn));
  cmpB("q/k norm", ma.qkNorm, mb.qkNorm);
  cmpB("q/k/v bias", ma.qkvBias, mb.qkvBias);
  cmpB("tied embeddings", ma.tiedEmbeddings, mb.tiedEmbeddings);
  const EstimateInput &x = a.model, &y = b.model;
  cmpN("GPUs", x.gpus, y.gpus);
  cmpN("GPUs per node", std::min(x.gpus, x.gpusPerNode), std::min(y.gpus, y.gpusPerNode));
  cmpN("shard group size", x.shardGroupSize, y.shardGroupSize);
  cmp("precision", std::string(toString(x.precision)), std::string(toString(y.precision)));
  cmp("attention", effectiveAttention(x) == AttentionKind::Eager ? "eager" : "flash",
      effectiveAttention(y) == AttentionKind::Eager ? "eager" : "flash");
  cmpN("micro-batch", static_cast<double>(x.microBatch), static_cast<double>(y.microBatch));
  cmpN("sequence length", static_cast<double>(x.seqLen), static_cast<double>(y.seqLen));
  cmpB("activation checkpointing", x.activationCheckpointing, y.activationCheckpointing);
  cmp("selective checkpointing", selectiveName(x), selectiveName(y));
  cmpB("optimizer offload", x.offloadOptimizer, y.offloadOptimizer);
  cmpB("parameter offload", x.offloadParam, y.offloadParam);
  cmpB("gradient as bucket view", x.gradientAsBucketView, y.gradientAsBucketView);
  cmpN("bucket cap MB", x.bucketCapMb, y.bucketCapMb);
  cmpN("reduce bucket size", static_cast<double>(x.reduceBucketSize), static_cast<double>(y.reduceBucketSize));
  cmpN("all-gather bucket size", static_cast<double>(x.allgatherBucketSize), static_cast<double>(y.allgatherBucketSize));
  cmp("overlap comm", x.overlapComm ? (*x.overlapComm ? "on" : "off") : "default",
      y.overlapComm ? (*y.overlapComm ? "on" : "off") : "default");
  cmpN("prefetch bucket size", static_cast<double>(x.prefetchBucketSize), static_cast<double>(y.prefetchBucketSize));
  cmpN("param persistence threshold", static_cast<double>(x.paramPersistenceThreshold),
       static_cast<double>(y.paramPersistenceThreshold));
  cmpN("max live parameters", static_cast<double>(x.maxLiveParameters), static_cast<double>(y.maxLiveParameters));
  cmpN("max reuse distance", static_cast<double>(x.maxReuseDistance), static_cast<double>(y.maxReuseDistance));
  cmp("fine-tuning", fineTuningName(fineTuning(x)), fineTuningName(fineTuning(y)));
  if (x.loraRank > 0 || y.loraRank > 0) {
    cmpN("LoRA rank", x.loraRank, y.loraRank);
    cmpN("LoRA alpha", x.loraAlpha, y.loraAlpha);
    cmp("LoRA targets", x.loraTargets, y.loraTargets);
  }
  // The devices, links and candidates.
  cmp("device", a.device.empty() ? "custom" : a.device, b.device.empty() ? "custom" : b.device);
  cmpN("device memory", static_cast<double>(a.deviceBytes), static_cast<double>(b.deviceBytes));
  cmpN("headroom", a.headroom, b.headroom);
  cmpN("TFLOPS", a.deviceTflops, b.deviceTflops);
  cmpN("efficiency", a.efficiency, b.efficiency);
  cmpN("memory bandwidth GB/s", a.memBwGBps, b.memBwGBps);
  cmpN("host link GB/s", a.hostLinkGBps, b.hostLinkGBps);
  cmpN("CPU optimizer GB/s", a.cpuOptimizerGBps, b.cpuOptimizerGBps);
  cmp("link in a node", a.intraNode.name, b.intraNode.name);
  cmp("link between nodes", a.interNode.name, b.interNode.name);
  cmpB("Gloo collectives", a.comm.emulatedReduceScatter, b.comm.emulatedReduceScatter);
  std::string ca, cb;
  for (Strategy s : a.candidates) ca += (ca.empty() ? "" : ",") + strategyName(s);
  for (Strategy s : b.candidates) cb += (cb.empty() ? "" : ",") + strategyName(s);
  cmp("strategies", ca.empty() ? "all" : ca, cb.empty() ? "all" : cb);
  return d;
}

std::string exactByteSize(std::int64_t bytes) {
  constexpr std::int64_t kGiB = 1024LL * 1024 * 1024, kGB = 1000LL * 1000 * 1000;
  if (bytes > 0 && bytes % kGiB == 0) return std::to_string(bytes / kGiB) + "GiB";
  if (bytes > 0 && bytes % kGB == 0) return std::to_string(bytes / kGB) + "GB";
  return std::to_string(bytes);
}

std::vector<ArgSpec> estimatorInputOptions() {
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
      {"selective-checkpointing", true,
       "torchtitan's selective checkpointing: op (keep attention and every other matmul's output) or layer[:N] "
       "(checkpoint every N-th block, default 2)"},
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
       "device preset: a10 | a100-40gb | a100-80gb | h100-sxm | h200 (its memory, dense peak of the precision, bandwidth and "
       "link "
       "unless --gpu-memory, --tflops, --link)"},
      {"lora-rank", true, "LoRA rank r: freeze the base, train adapters A [r x in], B [out x r] (default 0: full fine-tuning)"},
      {"lora-alpha", true, "LoRA alpha (adapter scale alpha/r; default 16)"},
      {"lora-targets", true, "LoRA target projections, comma list of q,k,v,o,gate,up,down or all-linear (default all)"},
      {"qlora", false, "QLoRA: the frozen projections in NF4 with double-quantised scales, bf16 compute (needs --lora-rank)"},
      {"scenario", true,
       "a preset setup (qwen3-lora-4xa10, qwen3-qlora-4xa10, llama-7b-full-8xa100; list: describe them); flags given "
       "override it"}};
}

}  // namespace shardscope::core::estimator
