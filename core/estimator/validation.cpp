#include "core/estimator/validation.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>

#include "core/estimator/calibration.h"
#include "core/estimator/estimator_options.h"
#include "core/estimator/recommend.h"
#include "core/estimator/scenarios.h"
#include "core/util/error.h"

namespace shardscope::core::estimator {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// ------------------------------------------------------------------------------------------------
// The schema (../shared/published/README.md, "Row fields"): every key present, its type, its enums.

enum class T { Str, StrOrNull, Int, IntOrNull, NumOrNull, Bool, BoolOrNull, ObjOrNull, Obj, Any };

struct Field {
  const char* path;  // "model.hidden"
  T type;
  std::vector<std::string> values;  // allowed strings (empty: any)
};

const std::vector<Field>& schema() {
  static const std::vector<Field> f = {
      {"id", T::Str, {}},
      {"source_id", T::Str, {}},
      {"model", T::Obj, {}},
      {"model.name", T::Str, {}},
      {"model.hidden", T::IntOrNull, {}},
      {"model.layers", T::IntOrNull, {}},
      {"model.heads", T::IntOrNull, {}},
      {"model.kv_heads", T::IntOrNull, {}},
      {"model.head_dim", T::IntOrNull, {}},
      {"model.ffn", T::IntOrNull, {}},
      {"model.vocab", T::IntOrNull, {}},
      {"model.tied_embeddings", T::BoolOrNull, {}},
      {"model.qkv_bias", T::Bool, {}},
      {"model.qk_norm", T::Bool, {}},
      {"model.moe", T::ObjOrNull, {}},
      {"parameters", T::IntOrNull, {}},
      {"gpu", T::Obj, {}},
      {"gpu.name",
       T::StrOrNull,
       {"h100-sxm", "h100", "h200", "a100-80gb", "a100-40gb", "a100", "a800-80gb", "a5000", "rtx6000-ada", "rtx3090", "rtx4090",
        "titan-rtx", "v100", "a10g", "gb200"}},
      {"gpu.memory_gib", T::NumOrNull, {}},
      {"gpus", T::Int, {}},
      {"nodes", T::IntOrNull, {}},
      {"gpus_per_node", T::IntOrNull, {}},
      {"interconnect", T::Obj, {}},
      {"interconnect.intra", T::StrOrNull, {"nvlink", "nvswitch", "pcie", "pcie4"}},
      {"interconnect.inter", T::StrOrNull, {"ib", "ib-ndr-400", "rdma-400", "net-400", "net-800", "efa"}},
      {"interconnect.nics_per_node", T::IntOrNull, {}},
      {"strategy", T::Str, {"ddp", "zero1", "zero2", "zero3", "fsdp", "fsdp2", "hsdp", "fsdp_grad_op", "zeropp", "none"}},
      {"parallel", T::Obj, {}},
      {"parallel.tp", T::Int, {}},
      {"parallel.pp", T::Int, {}},
      {"parallel.cp", T::Int, {}},
      {"parallel.ep", T::Int, {}},
      {"shard_group", T::IntOrNull, {}},
      {"replicate_group", T::IntOrNull, {}},
      {"precision", T::StrOrNull, {"fp32", "bf16_mixed", "bf16_pure", "fp16_mixed", "fp8_mixed"}},
      {"reduce_dtype", T::StrOrNull, {"fp32", "bf16"}},
      {"activation_checkpointing", T::StrOrNull, {"none", "full", "selective"}},
      {"compile", T::BoolOrNull, {}},
      {"fused_optimizer", T::BoolOrNull, {}},
      {"optimizer", T::StrOrNull, {"adamw", "adam", "sgd", "muon", "adafactor", "lion"}},
      {"finetune", T::Str, {"full", "lora", "qlora"}},
      {"lora", T::ObjOrNull, {}},
      {"quantization", T::StrOrNull, {"nf4", "int8", "fp4"}},
      {"offload", T::Obj, {}},
      {"offload.optimizer", T::BoolOrNull, {}},
      {"offload.params", T::BoolOrNull, {}},
      {"micro_batch", T::IntOrNull, {}},
      {"grad_accum", T::IntOrNull, {}},
      {"global_batch", T::IntOrNull, {}},
      {"seq_len", T::IntOrNull, {}},
      {"packed", T::BoolOrNull, {}},
      {"measured", T::Obj, {}},
      {"measured.peak_memory_gib", T::NumOrNull, {}},
      {"measured.peak_memory_measure", T::StrOrNull, {"allocated", "reserved", "system", "unstated"}},
      {"measured.tokens_per_s_per_gpu", T::NumOrNull, {}},
      {"measured.step_time_s", T::NumOrNull, {}},
      {"measured.mfu", T::NumOrNull, {}},
      {"measured.tokens_per_s_derived", T::Bool, {}},
      {"measured.notes", T::StrOrNull, {}},
      {"comparison_set", T::StrOrNull, {}},
      {"pure_dp", T::Bool, {}},
      {"source", T::Obj, {}},
  };
  return f;
}

const JsonValue* at(const JsonValue& row, std::string_view path) {
  const JsonValue* v = &row;
  while (v) {
    const std::size_t dot = path.find('.');
    v = v->isObject() ? v->find(path.substr(0, dot)) : nullptr;
    if (dot == std::string_view::npos) return v;
    path.remove_prefix(dot + 1);
  }
  return nullptr;
}

bool typeOk(const JsonValue& v, T t) {
  switch (t) {
    case T::Str:
      return v.isString();
    case T::StrOrNull:
      return v.isString() || v.isNull();
    case T::Int:
      return v.isNumber() && v.asInt().has_value();
    case T::IntOrNull:
      return v.isNull() || (v.isNumber() && v.asInt().has_value());
    case T::NumOrNull:
      return v.isNull() || v.isNumber();
    case T::Bool:
      return v.isBool();
    case T::BoolOrNull:
      return v.isBool() || v.isNull();
    case T::ObjOrNull:
      return v.isObject() || v.isNull();
    case T::Obj:
      return v.isObject();
    case T::Any:
      return true;
  }
  return true;
}

const char* typeName(T t) {
  switch (t) {
    case T::Str:
      return "a string";
    case T::StrOrNull:
      return "a string or null";
    case T::Int:
      return "an integer";
    case T::IntOrNull:
      return "an integer or null";
    case T::NumOrNull:
      return "a number or null";
    case T::Bool:
      return "true or false";
    case T::BoolOrNull:
      return "true, false or null";
    case T::ObjOrNull:
      return "an object or null";
    case T::Obj:
      return "an object";
    case T::Any:
      return "any value";
  }
  return "";
}

// Typed reads of a checked row.
std::string str(const JsonValue& row, std::string_view path) {
  const JsonValue* v = at(row, path);
  return v && v->isString() ? v->asString() : std::string();
}
std::optional<std::int64_t> integer(const JsonValue& row, std::string_view path) {
  const JsonValue* v = at(row, path);
  return v && v->isNumber() ? v->asInt() : std::nullopt;
}
std::optional<double> number(const JsonValue& row, std::string_view path) {
  const JsonValue* v = at(row, path);
  return v && v->isNumber() ? std::optional<double>(v->asDouble()) : std::nullopt;
}
std::optional<bool> boolean(const JsonValue& row, std::string_view path) {
  const JsonValue* v = at(row, path);
  return v && v->isBool() ? std::optional<bool>(v->asBool()) : std::nullopt;
}
bool isNull(const JsonValue& row, std::string_view path) {
  const JsonValue* v = at(row, path);
  return !v || v->isNull();
}

void add(std::vector<std::string>& list, std::string what) {
  if (std::find(list.begin(), list.end(), what) == list.end()) list.push_back(std::move(what));
}

std::string fmt(double v) {
  std::string s = formatDouble(std::round(v * 1000.0) / 1000.0);
  return s;
}

// The row's options for the estimator (estimator_options.h spelling), with what it cannot express.
void mapRow(const JsonValue& row, RowPrediction& p) {
  auto opt = [&](std::string k, std::string v) { p.options.emplace_back(std::move(k), std::move(v)); };
  auto flag = [&](std::string k) { p.options.emplace_back(std::move(k), "true"); };

  // Model: the row's own shape (a custom model), never a preset guessed from its name.
  if (!isNull(row, "model.moe")) add(p.missing, "mixture of experts");
  for (const char* k : {"model.hidden", "model.layers", "model.heads", "model.ffn", "model.vocab"})
    if (!integer(row, k)) add(p.missing, std::string("model shape: ") + (k + 6) + " not stated");
  if (p.missing.empty()) {
    opt("model", "custom");
    opt("layers", std::to_string(*integer(row, "model.layers")));
    opt("hidden", std::to_string(*integer(row, "model.hidden")));
    opt("heads", std::to_string(*integer(row, "model.heads")));
    if (auto kv = integer(row, "model.kv_heads")) opt("kv-heads", std::to_string(*kv));
    if (auto hd = integer(row, "model.head_dim")) opt("head-dim", std::to_string(*hd));
    opt("ffn", std::to_string(*integer(row, "model.ffn")));
    opt("vocab", std::to_string(*integer(row, "model.vocab")));
    if (boolean(row, "model.tied_embeddings").value_or(false)) flag("tied-embeddings");
    if (boolean(row, "model.qkv_bias").value_or(false)) flag("qkv-bias");
    if (boolean(row, "model.qk_norm").value_or(false)) flag("qk-norm");
  }

  // Parallelism: data parallel only.
  for (const auto& [k, name] : std::vector<std::pair<const char*, const char*>>{{"parallel.tp", "tensor parallel"},
                                                                                {"parallel.pp", "pipeline parallel"},
                                                                                {"parallel.cp", "context parallel"},
                                                                                {"parallel.ep", "expert parallel"}})
    if (integer(row, k).value_or(1) > 1) add(p.missing, name);
  const int gpus = static_cast<int>(integer(row, "gpus").value_or(1));
  opt("gpus", std::to_string(gpus));
  if (auto gpn = integer(row, "gpus_per_node")) opt("gpus-per-node", std::to_string(std::min<std::int64_t>(*gpn, gpus)));

  // Strategy.
  const std::string s = str(row, "strategy");
  std::string strategy = s;
  if (s == "none") {
    strategy = "ddp";
    if (gpus != 1) add(p.missing, "strategy none on more than one GPU");
    add(p.assumptions, "a single GPU as ddp on 1 GPU");
  } else if (s == "fsdp2") {
    const auto replicate = integer(row, "replicate_group");
    if (replicate && *replicate > 1) {
      strategy = "hsdp";
      add(p.assumptions, "fsdp2 with replicate groups as hsdp");
    } else {
      strategy = "fsdp";
      add(p.assumptions, "fsdp2 as fsdp full shard (the same sharding of parameters, gradients and optimizer state)");
    }
  } else if (s == "zeropp") {
    add(p.missing, "ZeRO++ (quantised weights and gradients)");
  }
  if (strategy == "hsdp") {
    if (auto g = integer(row, "shard_group"))
      opt("shard-group-size", std::to_string(*g));
    else
      add(p.missing, "hsdp shard group not stated");
  }
  opt("strategy", strategy);

  // Precision.
  const std::string prec = str(row, "precision");
  if (prec.empty())
    add(p.missing, "precision not stated");
  else if (prec == "bf16_mixed")
    opt("precision", "bf16");
  else if (prec == "fp32")
    opt("precision", "fp32");
  else if (prec == "fp16_mixed") {
    opt("precision", "bf16");
    add(p.assumptions, "fp16 mixed precision as bf16 mixed (the same bytes; the speed of fp16 tensor cores)");
  } else if (prec == "bf16_pure")
    add(p.missing, "pure bf16 (bf16 master weights and optimizer state)");
  else if (prec == "fp8_mixed")
    add(p.missing, "float8 training");

  // Activation checkpointing, compilation, optimizer.
  const std::string ac = str(row, "activation_checkpointing");
  if (ac.empty())
    add(p.missing, "activation checkpointing not stated");
  else if (ac == "full")
    flag("activation-checkpointing");
  else if (ac == "selective") {
    // The schema says only "selective"; which of torchtitan's policies, the source's own words say.
    const std::string said = at(row, "source") ? at(row, "source")->dump() : std::string();
    auto says = [&said](const char* w) { return said.find(w) != std::string::npos; };
    const bool layer = says("selective layer") || says("per-layer SAC") || says("layer SAC");
    const bool op = says("op policy") || says("selective op") || says("per-op") || says("per op SAC") || says("(op;") ||
                    says("(op,") || says("op-level");
    if (layer == op) {
      add(p.missing, "selective activation checkpointing policy not stated (op or layer)");
    } else if (op) {
      opt("selective-checkpointing", "op");
      add(p.assumptions, "selective checkpointing: torchtitan's op policy, as the source says");
    } else {
      opt("selective-checkpointing", "layer:2");
      add(p.assumptions, "selective checkpointing per layer: every 2nd block (torchtitan's default ac_freq)");
    }
  }
  if (boolean(row, "compile").value_or(false)) add(p.missing, "torch.compile");
  const std::string optimizer = str(row, "optimizer");
  if (!optimizer.empty() && optimizer != "adamw" && optimizer != "adam") add(p.missing, "optimizer " + optimizer);
  if (optimizer.empty()) add(p.assumptions, "optimizer not stated: Adam(W)");

  // Fine-tuning.
  const std::string ft = str(row, "finetune");
  if (ft == "lora" || ft == "qlora") {
    const auto rank = integer(row, "lora.rank");
    if (!rank)
      add(p.missing, "LoRA rank not stated");
    else
      opt("lora-rank", std::to_string(*rank));
    if (auto alpha = number(row, "lora.alpha")) opt("lora-alpha", fmt(*alpha));
    const JsonValue* targets = at(row, "lora.targets");
    if (!targets || targets->isNull()) {
      add(p.missing, "LoRA targets not stated");
    } else if (targets->isString() && targets->asString() == "all-linear") {
      opt("lora-targets", "all-linear");
    } else if (targets->isArray()) {
      std::string list;
      for (const auto& t : targets->items()) {
        std::string n = t.isString() ? t.asString() : std::string();
        const std::size_t proj = n.find("_proj");
        if (proj != std::string::npos) n = n.substr(0, proj);
        if (n != "q" && n != "k" && n != "v" && n != "o" && n != "gate" && n != "up" && n != "down") {
          add(p.missing, "LoRA target " + (t.isString() ? t.asString() : std::string("?")));
          continue;
        }
        list += (list.empty() ? "" : ",") + n;
      }
      if (!list.empty()) opt("lora-targets", list);
    }
    if (ft == "qlora") {
      if (str(row, "quantization") == "nf4")
        flag("qlora");
      else
        add(p.missing, "QLoRA base quantised as " + str(row, "quantization"));
    }
  }

  // Offload.
  if (boolean(row, "offload.optimizer").value_or(false)) flag("offload-optimizer");
  if (boolean(row, "offload.params").value_or(false)) flag("offload-param");

  // The batch.
  const auto micro = integer(row, "micro_batch");
  const auto seq = integer(row, "seq_len");
  if (!micro) add(p.missing, "micro-batch not stated");
  if (!seq) add(p.missing, "variable-length batches (no sequence length)");
  if (micro) opt("micro-batch", std::to_string(*micro));
  if (seq) opt("seq-len", std::to_string(*seq));
  if (boolean(row, "packed") == false) add(p.missing, "variable-length (unpacked) batches");
  if (integer(row, "grad_accum").value_or(1) > 1) add(p.speedMissing, "gradient accumulation");

  // The device: its memory as published; its speed from the device table where the type is in it.
  const std::string gpu = str(row, "gpu.name");
  const auto memGib = number(row, "gpu.memory_gib");
  std::string preset;
  if (devicePreset(gpu)) preset = gpu;  // a GPU type of the device table
  if (!preset.empty()) {
    opt("gpu", preset);
  } else {
    add(p.speedMissing, gpu.empty() ? std::string("GPU type not stated") : "GPU type " + gpu + " in the device table");
  }
  if (memGib)
    opt("gpu-memory", exactByteSize(static_cast<std::int64_t>(std::llround(*memGib * kGiB))));
  else if (preset.empty())
    add(p.missing, "GPU memory not stated");
  // Links: between nodes only where the fabric and its speed are stated.
  const auto nodes = integer(row, "nodes").value_or(1);
  const std::string intra = str(row, "interconnect.intra");
  if (intra == "pcie" || intra == "pcie4") {
    opt("link", "pcie4");
    if (intra == "pcie") add(p.assumptions, "PCIe of unstated generation as PCIe 4.0");
  } else if (intra.empty() && gpus > 1) {
    if (preset.empty())
      add(p.speedMissing, "intra-node link not stated");
    else
      add(p.assumptions, "intra-node link not stated: the " + preset + " server's own (" + devicePreset(preset)->link + ")");
  }
  if (nodes > 1) {
    const std::string inter = str(row, "interconnect.inter");
    if (inter == "ib-ndr-400" || inter == "rdma-400")
      opt("inter-link", "ib-ndr");
    else
      add(p.speedMissing, inter.empty() ? std::string("inter-node link not stated") : "inter-node link " + inter);
    const auto nics = integer(row, "interconnect.nics_per_node");
    const auto gpn = integer(row, "gpus_per_node");
    if (!nics || !gpn || *nics != *gpn) add(p.speedMissing, "inter-node NICs per node (rails) other than one per GPU");
  }

  // Memory: the estimator gives the allocated peak.
  const std::string measure = str(row, "measured.peak_memory_measure");
  if (!measure.empty() && measure != "allocated")
    add(p.memoryMissing, measure == "reserved" ? "reserved memory (the caching allocator)"
                         : measure == "system" ? "system memory (CUDA context, other processes)"
                                               : "the memory measure is not stated");
}

void summarise(std::vector<ErrorSummary>& out, const std::string& group, const std::vector<double>& errs) {
  if (errs.empty()) return;
  ErrorSummary s;
  s.group = group;
  s.rows = static_cast<int>(errs.size());
  for (double e : errs) {
    s.meanAbsPct += std::abs(e);
    s.meanSignedPct += e;
    s.maxAbsPct = std::max(s.maxAbsPct, std::abs(e));
  }
  s.meanAbsPct /= static_cast<double>(errs.size());
  s.meanSignedPct /= static_cast<double>(errs.size());
  out.push_back(s);
}

std::string family(const std::string& strategy) {
  if (strategy.rfind("zero", 0) == 0) return "zero";
  if (strategy.rfind("fsdp", 0) == 0 || strategy == "hsdp") return "fsdp";
  return "ddp";
}

enum class Figure { Memory, MemoryOtherMeasure, Speed, CalibratedSpeed };

std::vector<ErrorSummary> summaries(const std::vector<RowPrediction>& rows, Figure figure) {
  const bool memory = figure == Figure::Memory || figure == Figure::MemoryOtherMeasure;
  std::vector<ErrorSummary> out;
  std::map<std::string, std::vector<double>> by;
  std::vector<double> all;
  for (const auto& r : rows) {
    const auto& e = figure == Figure::Memory            ? r.memoryErrorPct
                    : figure == Figure::Speed           ? r.speedErrorPct
                    : figure == Figure::CalibratedSpeed ? r.calibratedSpeedErrorPct
                                                        : r.memoryOtherMeasurePct;
    if (!e) continue;
    all.push_back(*e);
    by["strategy " + family(r.strategy)].push_back(*e);
    by["fine-tuning " + r.finetune].push_back(*e);
    if (memory) by["measure " + r.measure].push_back(*e);
  }
  summarise(out, "all", all);
  for (const auto& [k, v] : by) summarise(out, k, v);
  return out;
}

}  // namespace

namespace {

std::vector<PublishedRow> checkRows(const JsonValue& doc, const std::string& label) {
  if (!doc.isArray()) throw Error(label + ": expected a JSON array of rows");
  std::vector<PublishedRow> out;
  std::set<std::string> ids;
  for (std::size_t i = 0; i < doc.items().size(); ++i) {
    const JsonValue& row = doc.items()[i];
    const std::string where = label + ": row " + std::to_string(i + 1);
    if (!row.isObject()) throw Error(where + ": expected an object");
    const std::string id = row.find("id") && row.find("id")->isString() ? row.find("id")->asString() : std::string();
    const std::string named = where + (id.empty() ? "" : " (" + id + ")");
    for (const Field& f : schema()) {
      const JsonValue* v = at(row, f.path);
      if (!v) throw Error(named + ": missing key '" + f.path + "'");
      if (!typeOk(*v, f.type)) throw Error(named + ": '" + f.path + "' must be " + typeName(f.type));
      if (!f.values.empty() && v->isString() && std::find(f.values.begin(), f.values.end(), v->asString()) == f.values.end()) {
        std::string allowed;
        for (const auto& a : f.values) allowed += (allowed.empty() ? "" : ", ") + a;
        throw Error(named + ": '" + f.path + "' is '" + v->asString() + "', not one of " + allowed);
      }
    }
    if (!ids.insert(id).second) throw Error(named + ": the id is used twice");
    out.push_back(PublishedRow{id, row});
  }
  return out;
}

}  // namespace

std::vector<PublishedRow> parsePublishedRows(const std::string& text, const std::string& label) {
  return checkRows(parseJson(text, label), label);
}

std::vector<PublishedRow> readPublishedRows(const std::string& path) { return checkRows(parseJsonFile(path), path); }

RowPrediction predictRow(const PublishedRow& pr) {
  const JsonValue& row = pr.json;
  RowPrediction p;
  p.id = pr.id;
  p.source = str(row, "source_id");
  p.model = str(row, "model.name");
  p.gpu = str(row, "gpu.name");
  p.strategy = str(row, "strategy");
  p.finetune = str(row, "finetune");
  p.measure = str(row, "measured.peak_memory_measure");
  p.comparisonSet = str(row, "comparison_set");
  p.gpus = static_cast<int>(integer(row, "gpus").value_or(0));
  p.publishedPeakGib = number(row, "measured.peak_memory_gib");
  p.publishedTokensPerSPerGpu = number(row, "measured.tokens_per_s_per_gpu");
  mapRow(row, p);
  if (!p.expressible()) return p;
  // The estimate itself: the options through the estimator's own mapping (as `estimate --scenario`),
  // one strategy assessed.
  RecommendInput ri;
  try {
    ri = scenarioInput(Scenario{p.id, "published row " + p.id, p.options});
  } catch (const std::exception& e) {
    add(p.missing, std::string("the estimator refuses the mapped options: ") + e.what());
    return p;
  }
  const auto strategy = strategyFromString(
      std::find_if(p.options.begin(), p.options.end(), [](const auto& o) { return o.first == "strategy"; })->second);
  if (!strategy) {
    add(p.missing, "strategy " + p.strategy);
    return p;
  }
  StrategyAssessment a;
  try {
    a = assess(ri, *strategy);
  } catch (const std::exception& e) {
    add(p.missing, std::string("the estimator refuses the mapped options: ") + e.what());
    return p;
  }
  p.input = ri;
  p.strategyAssessed = *strategy;
  p.predictedPeakGib = static_cast<double>(a.memory.peakBytes) / kGiB;
  p.deviceGib = static_cast<double>(a.fit.deviceBytes) / kGiB;
  p.fits = a.fit.fits;
  if (p.speedMissing.empty()) {
    p.predictedTokensPerSPerGpu = a.tokensPerSPerDevice;
    p.tokensIntervalLow = tokensPerSPerGpuAt(p, calib::kEfficiencyLow);
    p.tokensIntervalHigh = tokensPerSPerGpuAt(p, calib::kEfficiencyHigh);
  }
  if (p.publishedPeakGib && *p.publishedPeakGib > 0) {
    const double e = (*p.predictedPeakGib - *p.publishedPeakGib) / *p.publishedPeakGib * 100.0;
    if (p.memoryMissing.empty())
      p.memoryErrorPct = e;
    else
      p.memoryOtherMeasurePct = e;  // reserved, system or unstated: not the estimator's measure
  }
  if (p.publishedTokensPerSPerGpu && *p.publishedTokensPerSPerGpu > 0 && p.predictedTokensPerSPerGpu)
    p.speedErrorPct = (*p.predictedTokensPerSPerGpu - *p.publishedTokensPerSPerGpu) / *p.publishedTokensPerSPerGpu * 100.0;
  return p;
}

std::vector<ErrorSummary> memoryErrorSummary(const std::vector<RowPrediction>& rows) { return summaries(rows, Figure::Memory); }
std::vector<ErrorSummary> memoryOtherMeasureSummary(const std::vector<RowPrediction>& rows) {
  return summaries(rows, Figure::MemoryOtherMeasure);
}
std::vector<ErrorSummary> speedErrorSummary(const std::vector<RowPrediction>& rows) { return summaries(rows, Figure::Speed); }
std::vector<ErrorSummary> calibratedSpeedErrorSummary(const std::vector<RowPrediction>& rows) {
  return summaries(rows, Figure::CalibratedSpeed);
}

std::optional<double> tokensPerSPerGpuAt(const RowPrediction& row, double efficiency) {
  if (!row.predictedTokensPerSPerGpu || !row.input) return std::nullopt;
  RecommendInput ri = *row.input;  // the row's own estimate
  ri.efficiency = efficiency;
  return assess(ri, row.strategyAssessed).tokensPerSPerDevice;
}

std::optional<double> efficiencyMatching(const RowPrediction& row) {
  if (!row.publishedTokensPerSPerGpu || !row.predictedTokensPerSPerGpu) return std::nullopt;
  const double want = *row.publishedTokensPerSPerGpu;
  if (*tokensPerSPerGpuAt(row, 1.0) <= want) return 1.0;
  double lo = 1e-4, hi = 1.0;  // tokens/s rises with the efficiency
  for (int i = 0; i < 60; ++i) {
    const double mid = 0.5 * (lo + hi);
    (*tokensPerSPerGpuAt(row, mid) < want ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

void calibrateLeaveOneOut(std::vector<RowPrediction>& rows) {
  std::vector<std::optional<double>> eff(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) eff[i] = efficiencyMatching(rows[i]);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    RowPrediction& r = rows[i];
    if (!r.predictedTokensPerSPerGpu) continue;
    std::optional<std::size_t> best;
    int bestScore = -1;
    for (std::size_t j = 0; j < rows.size(); ++j) {
      const RowPrediction& o = rows[j];
      if (j == i || !eff[j] || o.source != r.source || o.gpu != r.gpu) continue;
      const int score = 8 * static_cast<int>(o.model == r.model) + 4 * static_cast<int>(o.strategy == r.strategy) +
                        2 * static_cast<int>(o.gpus == r.gpus) + static_cast<int>(o.finetune == r.finetune);
      if (score > bestScore) {
        bestScore = score;
        best = j;
      }
    }
    if (!best) continue;
    r.calibratedFrom = rows[*best].id;
    r.calibratedEfficiency = eff[*best];
    r.calibratedTokensPerSPerGpu = tokensPerSPerGpuAt(r, *eff[*best]);
    if (r.publishedTokensPerSPerGpu && *r.publishedTokensPerSPerGpu > 0)
      r.calibratedSpeedErrorPct =
          (*r.calibratedTokensPerSPerGpu - *r.publishedTokensPerSPerGpu) / *r.publishedTokensPerSPerGpu * 100.0;
  }
}

std::vector<std::pair<std::string, std::vector<std::string>>> missingConcepts(const std::vector<RowPrediction>& rows) {
  std::map<std::string, std::vector<std::string>> by;
  for (const auto& r : rows) {
    std::set<std::string> seen;
    for (const auto* list : {&r.missing, &r.memoryMissing, &r.speedMissing})
      for (const auto& m : *list)
        if (seen.insert(m).second) by[m].push_back(r.id);
  }
  std::vector<std::pair<std::string, std::vector<std::string>>> out(by.begin(), by.end());
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
  return out;
}

std::vector<ComparisonSetCheck> comparisonSetChecks(const std::vector<RowPrediction>& rows) {
  std::map<std::string, std::vector<const RowPrediction*>> sets;
  for (const auto& r : rows)
    if (!r.comparisonSet.empty()) sets[r.comparisonSet].push_back(&r);
  std::vector<ComparisonSetCheck> out;
  for (const auto& [name, members] : sets) {
    for (const bool speed : {false, true}) {
      ComparisonSetCheck c;
      c.set = name;
      c.figure = speed ? "tokens_per_s_per_gpu" : "peak_memory_gib";
      std::vector<std::pair<double, const RowPrediction*>> pub, pred;
      for (const RowPrediction* r : members) {
        const auto& published = speed ? r->publishedTokensPerSPerGpu : r->publishedPeakGib;
        const auto& predicted = speed ? r->predictedTokensPerSPerGpu : r->predictedPeakGib;
        if (!published || !predicted) {
          c.notCompared.push_back(r->id);
          continue;
        }
        pub.emplace_back(*published, r);
        pred.emplace_back(*predicted, r);
      }
      if (pub.size() < 2) continue;
      // Best first: more tokens/s, less memory; ties keep the rows' order.
      auto order = [speed](std::vector<std::pair<double, const RowPrediction*>> v) {
        std::stable_sort(v.begin(), v.end(),
                         [speed](const auto& a, const auto& b) { return speed ? a.first > b.first : a.first < b.first; });
        std::vector<std::string> ids;
        ids.reserve(v.size());
        for (const auto& x : v) ids.push_back(x.second->id);
        return ids;
      };
      c.publishedOrder = order(pub);
      c.predictedOrder = order(pred);
      for (std::size_t i = 0; i < pred.size(); ++i)
        for (std::size_t j = i + 1; j < pred.size(); ++j)
          if (std::abs(pred[i].first - pred[j].first) <= 0.005 * std::max(std::abs(pred[i].first), std::abs(pred[j].first)))
            c.predictedTie = true;
      out.push_back(std::move(c));
    }
  }
  return out;
}

JsonValue toJson(const ComparisonSetCheck& c) {
  auto list = [](const std::vector<std::string>& v) {
    JsonValue a = JsonValue::array();
    for (const auto& s : v) a.push(JsonValue::string(s));
    return a;
  };
  JsonValue o = JsonValue::object();
  o.set("set", JsonValue::string(c.set));
  o.set("figure", JsonValue::string(c.figure));
  o.set("same_order", JsonValue::boolean(c.sameOrder()));
  o.set("predicted_tie", JsonValue::boolean(c.predictedTie));
  o.set("published_order", list(c.publishedOrder));
  o.set("predicted_order", list(c.predictedOrder));
  o.set("not_compared", list(c.notCompared));
  return o;
}

JsonValue toJson(const RowPrediction& r) {
  auto list = [](const std::vector<std::string>& v) {
    JsonValue a = JsonValue::array();
    for (const auto& s : v) a.push(JsonValue::string(s));
    return a;
  };
  auto num = [](const std::optional<double>& v) { return v ? JsonValue::number(*v) : JsonValue(); };
  JsonValue o = JsonValue::object();
  o.set("id", JsonValue::string(r.id));
  o.set("source", JsonValue::string(r.source));
  o.set("expressible", JsonValue::boolean(r.expressible()));
  o.set("missing", list(r.missing));
  o.set("memory_missing", list(r.memoryMissing));
  o.set("speed_missing", list(r.speedMissing));
  o.set("assumptions", list(r.assumptions));
  JsonValue opts = JsonValue::object();
  for (const auto& [k, v] : r.options) opts.set(k, JsonValue::string(v));
  o.set("options", std::move(opts));
  JsonValue pub = JsonValue::object();
  pub.set("peak_memory_gib", num(r.publishedPeakGib));
  pub.set("measure", r.measure.empty() ? JsonValue() : JsonValue::string(r.measure));
  pub.set("tokens_per_s_per_gpu", num(r.publishedTokensPerSPerGpu));
  o.set("published", std::move(pub));
  JsonValue pred = JsonValue::object();
  pred.set("peak_memory_gib", num(r.predictedPeakGib));
  pred.set("measure", JsonValue::string("allocated"));
  pred.set("fits", r.fits ? JsonValue::boolean(*r.fits) : JsonValue());
  pred.set("device_gib", num(r.deviceGib));
  pred.set("tokens_per_s_per_gpu", num(r.predictedTokensPerSPerGpu));
  if (r.tokensIntervalLow && r.tokensIntervalHigh) {
    JsonValue iv = JsonValue::array();
    iv.push(JsonValue::number(*r.tokensIntervalLow));
    iv.push(JsonValue::number(*r.tokensIntervalHigh));
    pred.set("tokens_per_s_interval", std::move(iv));
  } else {
    pred.set("tokens_per_s_interval", JsonValue());
  }
  pred.set("tokens_per_s_per_gpu_calibrated", num(r.calibratedTokensPerSPerGpu));
  pred.set("calibrated_from", r.calibratedFrom.empty() ? JsonValue() : JsonValue::string(r.calibratedFrom));
  pred.set("calibrated_efficiency", num(r.calibratedEfficiency));
  o.set("predicted", std::move(pred));
  JsonValue err = JsonValue::object();
  err.set("peak_memory", num(r.memoryErrorPct));
  err.set("peak_memory_other_measure", num(r.memoryOtherMeasurePct));
  err.set("tokens_per_s", num(r.speedErrorPct));
  err.set("tokens_per_s_calibrated", num(r.calibratedSpeedErrorPct));
  o.set("error_pct", std::move(err));
  return o;
}

}  // namespace shardscope::core::estimator
