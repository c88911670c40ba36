#include "core/analysis/run_figures.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "core/model/model_presets.h"
#include "core/util/error.h"
#include "core/util/json.h"

namespace shardscope::core {

StepMeans meanOverSteps(const std::vector<StepBreakdown>& steps, const CountedSteps& counted) {
  StepMeans m;
  for (const auto& b : steps) {
    if (!counted.counts(b.step)) continue;
    const double s = static_cast<double>(b.stepNs);
    m.minStepNs = m.rows == 0 ? s : std::min(m.minStepNs, s);
    m.maxStepNs = m.rows == 0 ? s : std::max(m.maxStepNs, s);
    m.stepNs += s;
    m.computeNs += static_cast<double>(b.computeNs);
    m.commNs += static_cast<double>(b.commNs);
    m.overlappedNs += static_cast<double>(b.overlappedCommNs);
    m.exposedNs += static_cast<double>(b.exposedCommNs);
    m.otherNs += static_cast<double>(b.otherBusyNs);
    m.idleNs += static_cast<double>(b.idleNs);
    ++m.rows;
  }
  if (m.rows > 0) {
    const double n = static_cast<double>(m.rows);
    for (double* v : {&m.stepNs, &m.computeNs, &m.commNs, &m.overlappedNs, &m.exposedNs, &m.otherNs, &m.idleNs}) *v /= n;
  }
  return m;
}

std::string deviceName(int deviceType, int deviceId) {
  switch (deviceType) {  // c10::DeviceType
    case 0:
      return "cpu";
    case 1:
      return "cuda:" + std::to_string(deviceId);
    case 6:
      return "hip:" + std::to_string(deviceId);
    default:
      return "device " + std::to_string(deviceType) + ":" + std::to_string(deviceId);
  }
}

namespace {

// Tokens a step of the run trains: from its config (micro_batch x seq_len x grad_accum x
// world_size), or, for a run that stored only its throughput, from that and its own step time.
std::optional<double> tokensPerStepOf(TraceStore& store, const Run& run, std::string& how) {
  if (auto v = store.metric(run.id, std::nullopt, "tokens_per_step")) {
    how = "stored tokens per step";
    return *v;
  }
  if (run.source == RunSource::Runtime) {
    try {
      const JsonValue cfg = parseJson(run.configJson, "config");
      auto num = [&](const char* k) -> std::optional<double> {
        const JsonValue* v = cfg.find(k);
        if (!v || !v->isNumber()) return std::nullopt;
        return v->asDouble();
      };
      const auto mb = num("micro_batch"), seq = num("seq_len"), ga = num("grad_accum"), ws = num("world_size");
      if (mb && seq && ws && *mb > 0 && *seq > 0 && *ws > 0) {
        how = "micro_batch x seq_len x grad_accum x world_size of the run's config";
        return *mb * *seq * (ga && *ga > 0 ? *ga : 1.0) * *ws;
      }
    } catch (const std::exception&) {
    }
  }
  const auto tps = store.metric(run.id, std::nullopt, "tokens_per_s");
  const auto ms = store.metric(run.id, std::nullopt, "step_time_ms");
  if (tps && ms && *ms > 0) {
    how = "the stored throughput times the stored step time";
    return *tps * *ms / 1000.0;
  }
  return std::nullopt;
}

// What was trained (strategy, precision, LoRA rank) and the parameter / skipped-step figures of the
// strategy table. A run of ours (runtime or simulated) carries its run-config JSON (every key of
// core/config's table, so an absent LoRA key means a config from before LoRA: full fine-tuning);
// an imported trace says none of it.
void fillTrained(TraceStore& store, const Run& run, RunFigures& f) {
  const bool ours = run.source != RunSource::Kineto;
  JsonValue cfg = JsonValue::object();
  try {
    cfg = parseJson(run.configJson.empty() ? "{}" : run.configJson, "config");
  } catch (const std::exception&) {
  }
  const bool hasConfig = ours && cfg.isObject() && cfg.find("strategy") != nullptr;
  auto text = [&](const char* k) -> std::string {
    const JsonValue* v = hasConfig ? cfg.find(k) : nullptr;
    return v && v->isString() ? v->asString() : std::string();
  };
  auto num = [&](const char* k) -> std::optional<double> {
    const JsonValue* v = hasConfig ? cfg.find(k) : nullptr;
    return v && v->isNumber() ? std::optional<double>(v->asDouble()) : std::nullopt;
  };
  f.worldSize = run.worldSize;
  f.strategy = !run.strategy.empty() ? run.strategy : text("strategy");
  f.precision = text("precision");
  if (hasConfig) f.loraRank = static_cast<int>(num("lora_rank").value_or(0));
  if (hasConfig)
    if (const JsonValue* v = cfg.find("save_checkpoint"); v && v->isBool()) f.savesCheckpoint = v->asBool();
  if (f.tokensPerSecond && f.worldSize > 0) f.tokensPerSecondPerGpu = *f.tokensPerSecond / f.worldSize;

  const std::string imported = "an imported trace does not say";
  // Trainable and frozen parameters.
  if (auto v = store.metric(run.id, std::nullopt, metric_keys::kTrainableParams)) {
    f.trainableParams = {v, "stored by the run (trainable_params)"};
  } else if (!hasConfig) {
    f.trainableParams.why =
        ours ? "the run stored neither trainable_params nor a readable configuration" : imported + " which parameters train";
  } else if (f.loraRank.value_or(0) > 0) {
    f.trainableParams.why = "a LoRA run that stored no trainable_params";
  } else {
    const std::string model = text("model");
    if (const ModelPreset* p = findModelPreset(model)) {
      const int layers = static_cast<int>(num("layers").value_or(0));
      f.trainableParams = {static_cast<double>(presetParameterCount(*p, layers)),
                           "full fine-tuning: every parameter of the " + model + " preset"};
    } else {
      f.trainableParams.why = "full fine-tuning of a model that is not a preset ('" + model + "'): its size is unknown";
    }
  }
  if (auto v = store.metric(run.id, std::nullopt, metric_keys::kFrozenParams)) {
    f.frozenParams = {v, "stored by the run (frozen_params)"};
  } else if (!hasConfig) {
    f.frozenParams.why = f.trainableParams.why;
  } else if (f.loraRank.value_or(0) > 0) {
    f.frozenParams.why = "a LoRA run that stored no frozen_params";
  } else {
    f.frozenParams = {0.0, "full fine-tuning: nothing is frozen"};
  }
  // Skipped steps: only fp16's dynamic loss scaling skips a step.
  if (auto v = store.metric(run.id, std::nullopt, metric_keys::kSkippedSteps)) {
    f.skippedSteps = {v, "stored by the run (skipped_steps)"};
  } else if (!ours) {
    f.skippedSteps.why = imported + " whether steps were skipped";
  } else if (f.precision == "fp32" || f.precision == "bf16") {
    f.skippedSteps = {0.0, f.precision + ": no loss scaling, so no step is skipped"};
  } else if (f.precision.empty()) {
    f.skippedSteps.why = "the run's precision is unknown";
  } else {
    f.skippedSteps.why = "an " + f.precision + " run that stored no skipped_steps";
  }
}

}  // namespace

RunFigures runFigures(TraceStore& store, RunId runId, const std::vector<StepBreakdown>& steps,
                      const std::vector<MemoryPeak>& peaks) {
  RunFigures f;
  f.runId = runId;
  const auto run = store.run(runId);
  if (!run) throw Error(store.path() + ": no run with id " + std::to_string(runId.value()));
  f.source = run->source;
  f.steps = countedSteps(steps, run->source);
  for (const auto& b : steps)
    if (f.steps.counts(b.step)) {
      f.window = b.window;
      break;
    }
  f.means = meanOverSteps(steps, f.steps);
  {
    std::vector<double> ms;
    for (const auto& b : steps)
      if (f.steps.counts(b.step) && b.stepNs > 0) ms.push_back(static_cast<double>(b.stepNs) / 1e6);
    if (!ms.empty()) {
      std::sort(ms.begin(), ms.end());
      auto pct = [&](double q) {  // nearest rank
        const auto k = static_cast<std::size_t>(std::ceil(q * static_cast<double>(ms.size())));
        return ms[std::min(ms.size() - 1, k == 0 ? 0 : k - 1)];
      };
      f.stepP10Ms = pct(0.10);
      f.stepP50Ms = pct(0.50);
      f.stepP90Ms = pct(0.90);
      if (*f.stepP50Ms > 0) f.stepSpreadPct = 100.0 * (*f.stepP90Ms - *f.stepP10Ms) / *f.stepP50Ms;
    }
  }
  if (f.means.rows > 0 && f.means.stepNs > 0) {
    const double d = f.means.stepNs;
    f.stepTimeMs = d / 1e6;
    f.computePct = 100.0 * f.means.computeNs / d;
    f.commPct = 100.0 * f.means.commNs / d;
    f.exposedCommPct = 100.0 * f.means.exposedNs / d;
    f.idlePct = 100.0 * f.means.idleNs / d;
    if (f.means.commNs > 0) f.overlapPct = 100.0 * f.means.overlappedNs / f.means.commNs;
  }
  if (!f.stepTimeMs) {
    // A run trained with capture off records no step windows: its runtime's own step timer (the same
    // windows, rank 0, steps after the first) is all there is.
    if (auto v = store.metric(runId, std::nullopt, "step_time_ms"); v && *v > 0) {
      f.stepTimeMs = *v;
      f.stepTimeFromTimer = true;
    }
  }
  f.tokensPerStep = tokensPerStepOf(store, *run, f.tokensHow);
  if (f.tokensPerStep && f.stepTimeMs) {
    f.tokensPerSecond = *f.tokensPerStep / (*f.stepTimeMs / 1000.0);
  } else if (auto tps = store.metric(runId, std::nullopt, "tokens_per_s")) {
    f.tokensPerSecond = *tps;  // a throughput stored without a step time to divide by
    f.tokensHow = "as stored with the run";
  }

  bool anyDevice = false;
  for (const auto& p : peaks) anyDevice = anyDevice || p.deviceType != 0;
  for (const auto& p : peaks) {
    DevicePeak d;
    d.rank = p.rank;
    d.device = deviceName(p.deviceType, p.deviceId);
    d.allocatedBytes = p.peakAllocatedBytes;
    d.reservedBytes = p.peakReservedBytes;
    d.fromCounter = p.allocatedFromCounter;
    f.peaks.push_back(d);
    const bool counts = anyDevice ? p.deviceType != 0 : true;
    if (counts) {
      f.peakAllocatedBytes = std::max(f.peakAllocatedBytes.value_or(0), p.peakAllocatedBytes);
      f.peakReservedBytes = std::max(f.peakReservedBytes.value_or(0), p.peakReservedBytes);
    } else {
      f.hostPeakBytes = std::max(f.hostPeakBytes.value_or(0), p.peakAllocatedBytes);
    }
  }
  if (f.peakAllocatedBytes) f.peakDevice = anyDevice ? "GPU" : "host";
  f.initSeconds = store.metric(runId, std::nullopt, "init_time_s");
  f.checkpointSaveSeconds = store.metric(runId, std::nullopt, "checkpoint_save_s");
  fillTrained(store, *run, f);
  return f;
}

std::string describeStepTime(const RunFigures& f) {
  if (!f.stepTimeMs) return "";
  if (f.stepTimeFromTimer) return "the runtime's step timer (capture was off: rank 0, steps after the first)";
  return std::string(describeStepRule(f.steps)) + "; " + describe(f.window);
}

JsonValue toJson(const RunFigures& f) {
  auto num = [](const std::optional<double>& v) { return v ? JsonValue::number(*v) : JsonValue(); };
  auto bytes = [](const std::optional<std::int64_t>& v) { return v ? JsonValue::number(*v) : JsonValue(); };
  JsonValue o = JsonValue::object();
  o.set("step_time_ms", num(f.stepTimeMs));
  o.set("steps_counted", JsonValue::number(f.steps.first >= 0 ? f.steps.count : 0));
  o.set("step_rule", JsonValue::string(describeStepRule(f.steps)));
  o.set("step_window", JsonValue::string(describeStepTime(f)));
  o.set("step_p50_ms", num(f.stepP50Ms));
  o.set("step_p90_ms", num(f.stepP90Ms));
  o.set("step_spread_pct", num(f.stepSpreadPct));
  o.set("tokens_per_step", num(f.tokensPerStep));
  o.set("tokens_per_s", num(f.tokensPerSecond));
  o.set("tokens_from", JsonValue::string(f.tokensHow));
  o.set("compute_pct", num(f.computePct));
  o.set("comm_pct", num(f.commPct));
  o.set("exposed_comm_pct", num(f.exposedCommPct));
  o.set("idle_pct", num(f.idlePct));
  o.set("overlap_pct", num(f.overlapPct));
  o.set("peak_allocated_bytes", bytes(f.peakAllocatedBytes));
  o.set("peak_reserved_bytes", bytes(f.peakReservedBytes));
  o.set("peak_device", JsonValue::string(f.peakDevice));
  o.set("host_peak_bytes", bytes(f.hostPeakBytes));
  JsonValue peaks = JsonValue::array();
  for (const auto& p : f.peaks) {
    JsonValue x = JsonValue::object();
    x.set("rank", JsonValue::number(static_cast<std::int64_t>(p.rank)));
    x.set("device", JsonValue::string(p.device));
    x.set("allocated_bytes", JsonValue::number(p.allocatedBytes));
    x.set("reserved_bytes", JsonValue::number(p.reservedBytes));
    x.set("from_allocator_counter", JsonValue::boolean(p.fromCounter));
    peaks.push(std::move(x));
  }
  o.set("peaks", std::move(peaks));
  o.set("init_time_s", num(f.initSeconds));
  o.set("checkpoint_save_s", num(f.checkpointSaveSeconds));
  o.set("world_size", JsonValue::number(static_cast<std::int64_t>(f.worldSize)));
  o.set("strategy", f.strategy.empty() ? JsonValue() : JsonValue::string(f.strategy));
  o.set("precision", f.precision.empty() ? JsonValue() : JsonValue::string(f.precision));
  o.set("lora_rank", f.loraRank ? JsonValue::number(static_cast<std::int64_t>(*f.loraRank)) : JsonValue());
  o.set("tokens_per_s_per_gpu", num(f.tokensPerSecondPerGpu));
  o.set("trainable_params", num(f.trainableParams.value));
  o.set("frozen_params", num(f.frozenParams.value));
  o.set("skipped_steps", num(f.skippedSteps.value));
  return o;
}

std::optional<std::int64_t> RunFigures::rankPeakAllocated(int rank) const {
  std::optional<std::int64_t> out;
  for (const auto& p : peaks)
    if (p.rank == rank && (peakDevice != "GPU" || p.device != "cpu")) out = std::max(out.value_or(0), p.allocatedBytes);
  return out;
}

RunFigures computeRunFigures(TraceStore& store, RunId runId, const CancelToken* cancel) {
  const auto steps = computeStepBreakdown(store, runId, cancel);
  return runFigures(store, runId, steps, computeMemoryPeaks(store, runId));
}

}  // namespace shardscope::core
