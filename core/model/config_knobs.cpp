#include "core/model/config_knobs.h"

#include <cstdlib>

#include "core/util/json.h"

namespace shardscope::core {
namespace {

ConfigKnobs::Family familyOf(const std::string& s, int& stage) {
  if (s == "ddp") return ConfigKnobs::Family::Ddp;
  if (s == "zero1" || s == "zero2" || s == "zero3") {
    stage = s.back() - '0';
    return ConfigKnobs::Family::Zero;
  }
  if (s == "fsdp" || s == "fsdp_grad_op" || s == "hsdp") return ConfigKnobs::Family::Fsdp;
  return ConfigKnobs::Family::Unknown;
}

const JsonValue* member(const JsonValue& o, std::string_view key) { return o.isObject() ? o.find(std::string(key)) : nullptr; }

std::optional<double> number(const JsonValue& o, std::string_view key) {
  const JsonValue* v = member(o, key);
  if (!v) return std::nullopt;
  if (v->isNumber()) return v->asDouble();
  if (v->isString()) {
    char* end = nullptr;
    const double d = std::strtod(v->asString().c_str(), &end);
    if (end && *end == '\0' && end != v->asString().c_str()) return d;
  }
  return std::nullopt;
}

std::optional<bool> boolean(const JsonValue& o, std::string_view key) {
  const JsonValue* v = member(o, key);
  if (!v || !v->isBool()) return std::nullopt;
  return v->asBool();
}

}  // namespace

ConfigKnobs configKnobs(const Run& run) {
  ConfigKnobs k;
  JsonValue cfg = JsonValue::object();
  try {
    if (!run.configJson.empty()) cfg = parseJson(run.configJson, "run config");
  } catch (const std::exception&) {
    cfg = JsonValue::object();
  }
  if (const JsonValue* s = member(cfg, knob_key::kStrategy); s && s->isString()) k.strategy = s->asString();
  if (k.strategy.empty()) k.strategy = run.strategy;
  k.family = familyOf(k.strategy, k.zeroStage);
  if (!k.known()) return k;
  k.bucketCapMb = number(cfg, knob_key::kBucketCapMb);
  k.gradientAsBucketView = boolean(cfg, knob_key::kGradientAsBucketView);
  if (auto v = number(cfg, knob_key::kReduceBucketSize)) k.reduceBucketSize = static_cast<std::int64_t>(*v);
  if (auto v = number(cfg, knob_key::kPrefetchBucketSize)) k.prefetchBucketSize = static_cast<std::int64_t>(*v);
  k.forwardPrefetch = boolean(cfg, knob_key::kForwardPrefetch);
  if (auto v = number(cfg, knob_key::kMicroBatch)) k.microBatch = static_cast<std::int64_t>(*v);
  if (auto v = number(cfg, knob_key::kSeqLen)) k.seqLen = static_cast<std::int64_t>(*v);
  if (auto v = number(cfg, knob_key::kMaxLiveParameters)) k.maxLiveParameters = static_cast<std::int64_t>(*v);
  if (auto v = number(cfg, knob_key::kWorldSize)) k.worldSize = static_cast<std::int64_t>(*v);
  k.activationCheckpointing = boolean(cfg, knob_key::kActivationCheckpointing);
  if (const JsonValue* v = member(cfg, knob_key::kOptimizer); v && v->isString()) k.optimizer = v->asString();
  if (const JsonValue* v = member(cfg, knob_key::kOffloadOptimizer); v && v->isString()) k.offloadOptimizer = v->asString();
  if (const JsonValue* v = member(cfg, knob_key::kBackwardPrefetch); v && v->isString())
    k.backwardPrefetch = knobFromString<BackwardPrefetch>(v->asString());
  // overlap_comm: true, false, or null/absent = auto (on for ZeRO-3, as DeepSpeed), when a ZeRO run.
  if (k.family == ConfigKnobs::Family::Zero) {
    k.overlapComm = boolean(cfg, knob_key::kOverlapComm);
    if (!k.overlapComm && member(cfg, knob_key::kStrategy)) k.overlapComm = k.zeroStage == 3;
  }
  return k;
}

std::string KnobChange::text() const {
  std::string out;
  for (const auto& [key, value] : set) out += (out.empty() ? "" : ", ") + key + "=" + value;
  return out;
}

}  // namespace shardscope::core
