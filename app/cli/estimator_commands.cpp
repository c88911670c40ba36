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
#include "core/estimator/fit_advice.h"
#include "core/estimator/memory_estimator.h"
#include "core/estimator/recommend.h"
#include "core/estimator/scenarios.h"
#include "core/estimator/calibration.h"
#include "core/estimator/validation.h"
#include "core/storage/trace_store.h"
#include "core/report/csv_writer.h"
#include "core/util/csv.h"
#include "core/util/json.h"
#include "core/util/units.h"

namespace shardscope::cli {
using core::JsonValue;
namespace est = core::estimator;

namespace estargs {

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

void parseEstimatorInput(const Args& rawArgs, est::RecommendInput& ri, std::string& fitNote,
                         std::optional<est::LinkCalibration>* calibration) {
  est::applyEstimatorOptions(withScenario(rawArgs), ri, &fitNote, calibration);
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
    out.set("selective_checkpointing", est::selectiveName(in).empty() ? JsonValue() : JsonValue::string(est::selectiveName(in)));
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
    out.set("device", ri.device.empty() ? JsonValue() : JsonValue::string(ri.device));
    out.set("device_bytes", num(ri.deviceBytes));
    out.set("tflops", num(ri.deviceTflops));
    out.set("efficiency", num(ri.efficiency));
    out.set("mem_bw_gbps", num(ri.memBwGBps));
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
    {
      const std::string none = est::nothingFitsSummary(ranked, ri.deviceBytes);
      out.set("nothing_fits", none.empty() ? JsonValue() : JsonValue::string(none));
    }
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
     << (in.activationCheckpointing ? ", activation checkpointing" : "")
     << (est::selectiveName(in).empty() ? std::string() : ", selective checkpointing " + est::selectiveName(in))
     << (in.offloadOptimizer ? ", optimizer offload" : "") << (in.offloadParam ? ", parameter offload" : "") << "\n";
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
  os << "Device " << (ri.device.empty() ? std::string("custom") : ri.device) << ": memory "
     << est::formatBytes(static_cast<double>(ri.deviceBytes)) << ", headroom " << core::formatFixed(ri.headroom * 100, 0)
     << "%; link " << ri.intraNode.name << " (" << core::formatFixed(ri.intraNode.busBwGBps, 2) << " GB/s bus, "
     << core::formatFixed(ri.intraNode.alphaUs, 1) << " us)"
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
    if (!s.fit.fits)
      os << "       - to fit: " << (s.toFit ? est::describeFitChange(*s.toFit) : std::string("no single change fits")) << "\n";
    for (const auto& n : s.memory.notes) os << "       note: " << n << "\n";
  }
  if (const std::string none = est::nothingFitsSummary(ranked, ri.deviceBytes); !none.empty()) os << "\n" << none << ".\n";
  std::cout << os.str();
  return kOk;
}

// `validate`: published measurements against the estimate (core/estimator/validation.h).
std::string cell(const std::optional<double>& v, int decimals) {
  if (!v) return "-";
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", decimals, *v);
  return b;
}

std::string signedPct(const std::optional<double>& v) {
  if (!v) return "-";
  char b[64];
  std::snprintf(b, sizeof b, "%+.1f %%", *v);
  return b;
}

int cmdValidate(const Args& a, core::CancelToken& cancel) {
  if (!a.positional.empty()) throw std::invalid_argument("validate takes no positional arguments ('" + a.positional[0] + "')");
  if (!a.has("published")) throw std::invalid_argument("validate needs --published FILE.json (rows in the published schema)");
  const auto rows = est::readPublishedRows(a.get("published"));
  std::vector<est::RowPrediction> preds;
  preds.reserve(rows.size());
  for (const auto& r : rows) {
    cancel.throwIfCancelled();
    preds.push_back(est::predictRow(r));
  }
  if (a.has("calibrate")) {
    if (a.get("calibrate") != "leave-one-out")
      throw std::invalid_argument("--calibrate expects leave-one-out, got '" + a.get("calibrate") + "'");
    est::calibrateLeaveOneOut(preds);
  }
  const auto calibrated = est::calibratedSpeedErrorSummary(preds);
  int intervalRows = 0, intervalCovered = 0;  // the uncalibrated interval against the published tokens/s
  for (const auto& p : preds)
    if (p.publishedTokensPerSPerGpu && p.tokensIntervalLow) {
      ++intervalRows;
      intervalCovered += p.intervalCovers();
    }
  const auto memory = est::memoryErrorSummary(preds);
  const auto speed = est::speedErrorSummary(preds);
  const auto otherMeasure = est::memoryOtherMeasureSummary(preds);
  const auto orders = est::comparisonSetChecks(preds);
  const auto concepts = est::missingConcepts(preds);
  auto summaryJson = [](const std::vector<est::ErrorSummary>& v) {
    JsonValue arr = JsonValue::array();
    for (const auto& s : v) {
      JsonValue o = JsonValue::object();
      o.set("group", JsonValue::string(s.group));
      o.set("rows", num(std::int64_t{s.rows}));
      o.set("mean_abs_error_pct", num(s.meanAbsPct));
      o.set("mean_signed_error_pct", num(s.meanSignedPct));
      o.set("max_abs_error_pct", num(s.maxAbsPct));
      arr.push(std::move(o));
    }
    return arr;
  };
  if (a.has("json")) {
    JsonValue out = JsonValue::object();
    out.set("published", JsonValue::string(a.get("published")));
    JsonValue jr = JsonValue::array();
    for (const auto& p : preds) jr.push(est::toJson(p));
    out.set("rows", std::move(jr));
    out.set("memory_summary", summaryJson(memory));
    out.set("speed_summary", summaryJson(speed));
    out.set("memory_other_measure_summary", summaryJson(otherMeasure));
    out.set("calibrated_speed_summary", summaryJson(calibrated));
    JsonValue cov = JsonValue::object();
    cov.set("rows", num(std::int64_t{intervalRows}));
    cov.set("covered", num(std::int64_t{intervalCovered}));
    cov.set("efficiency_low", num(est::calib::kEfficiencyLow));
    cov.set("efficiency_high", num(est::calib::kEfficiencyHigh));
    out.set("interval_coverage", std::move(cov));
    JsonValue mc = JsonValue::array();
    for (const auto& [what, ids] : concepts) {
      JsonValue o = JsonValue::object();
      o.set("concept", JsonValue::string(what));
      JsonValue idl = JsonValue::array();
      for (const auto& id : ids) idl.push(JsonValue::string(id));
      o.set("rows", std::move(idl));
      mc.push(std::move(o));
    }
    out.set("missing_concepts", std::move(mc));
    JsonValue cs = JsonValue::array();
    for (const auto& c : orders) cs.push(est::toJson(c));
    out.set("comparison_sets", std::move(cs));
    std::cout << out.dump() << "\n";
    return kOk;
  }
  if (a.has("csv")) {
    std::cout
        << "id,source,model,gpus,gpu,strategy,finetune,expressible,published_peak_gib,measure,predicted_peak_gib_allocated,"
           "memory_error_pct,fits,published_tokens_per_s_per_gpu,predicted_tokens_per_s_per_gpu,speed_error_pct,missing\r\n";
    auto q = [](const std::string& t) { return core::csvText(t); };  // the one cell escaper
    auto n = [](const std::optional<double>& v) { return v ? core::csvNumber(*v) : std::string(); };
    for (const auto& p : preds) {
      std::string missing;
      for (const auto* l : {&p.missing, &p.memoryMissing, &p.speedMissing})
        for (const auto& m : *l) missing += (missing.empty() ? "" : "; ") + m;
      std::cout << q(p.id) << "," << q(p.source) << "," << q(p.model) << "," << p.gpus << "," << q(p.gpu) << "," << q(p.strategy)
                << "," << q(p.finetune) << "," << (p.expressible() ? "true" : "false") << "," << n(p.publishedPeakGib) << ","
                << q(p.measure) << "," << n(p.predictedPeakGib) << "," << n(p.memoryErrorPct) << ","
                << (p.fits ? (*p.fits ? "true" : "false") : "") << "," << n(p.publishedTokensPerSPerGpu) << ","
                << n(p.predictedTokensPerSPerGpu) << "," << n(p.speedErrorPct) << "," << q(missing) << "\r\n";
    }
    return kOk;
  }
  std::ostringstream os;
  int expressible = 0;
  for (const auto& p : preds) expressible += p.expressible();
  os << "Published measurements against the estimate: " << a.get("published") << "\n"
     << "  " << preds.size() << " rows, " << expressible
     << " expressible (the rest need a concept the estimator lacks: listed below, never approximated).\n"
     << "  Memory: the estimator's allocated peak against the published figure, compared only where the row\n"
     << "  publishes allocated memory; speed only where the device, its links and the step are expressible.\n\n";
  char line[512];
  // A paper's validation table: the row, its configuration, published, predicted (speed with its
  // interval, and calibrated when asked) and the error.
  std::snprintf(line, sizeof line, "  %-22s %-26s %9s %-9s %9s %8s %4s %10s %10s %-13s %8s %10s %8s\n", "row", "configuration",
                "pub GiB", "measure", "est GiB", "error", "fits", "pub tok/s", "est tok/s", "interval", "error", "cal tok/s",
                "error");
  os << line;
  for (const auto& p : preds) {
    const std::string config = std::to_string(p.gpus) + "x" + (p.gpu.empty() ? "?" : p.gpu) + " " + p.strategy + " " + p.finetune;
    const std::string interval =
        p.tokensIntervalLow && p.tokensIntervalHigh ? cell(p.tokensIntervalLow, 0) + "-" + cell(p.tokensIntervalHigh, 0) : "-";
    std::snprintf(line, sizeof line, "  %-22s %-26s %9s %-9s %9s %8s %4s %10s %10s %-13s %8s %10s %8s\n",
                  p.id.substr(0, 22).c_str(), config.substr(0, 26).c_str(), cell(p.publishedPeakGib, 1).c_str(),
                  p.measure.empty() ? "-" : p.measure.c_str(), cell(p.predictedPeakGib, 1).c_str(),
                  signedPct(p.memoryErrorPct).c_str(), p.fits ? (*p.fits ? "yes" : "no") : "-",
                  cell(p.publishedTokensPerSPerGpu, 0).c_str(), cell(p.predictedTokensPerSPerGpu, 0).c_str(), interval.c_str(),
                  signedPct(p.speedErrorPct).c_str(), cell(p.calibratedTokensPerSPerGpu, 0).c_str(),
                  signedPct(p.calibratedSpeedErrorPct).c_str());
    os << line;
  }
  auto printSummary = [&](const char* what, const std::vector<est::ErrorSummary>& v) {
    os << "\n  " << what << " (rows that compare it):\n";
    if (v.empty()) os << "    none\n";
    for (const auto& s : v) {
      std::snprintf(line, sizeof line, "    %-24s %4d rows  mean |error| %6.1f %%  mean signed %+7.1f %%  max %6.1f %%\n",
                    s.group.c_str(), s.rows, s.meanAbsPct, s.meanSignedPct, s.maxAbsPct);
      os << line;
    }
  };
  printSummary("Peak memory", memory);
  printSummary("Tokens/s per GPU", speed);
  std::snprintf(line, sizeof line,
                "    uncalibrated, the estimate is an interval (efficiency %.2f-%.2f, the band published runs reach): it covers "
                "the published figure in %d of %d rows\n",
                est::calib::kEfficiencyLow, est::calib::kEfficiencyHigh, intervalCovered, intervalRows);
  os << line;
  if (a.has("calibrate")) {
    printSummary(
        "Tokens/s per GPU, calibrated leave-one-out (the efficiency of the nearest other row of the same source and GPU)",
        calibrated);
    for (const auto& p : preds)
      if (p.calibratedTokensPerSPerGpu) {
        std::snprintf(line, sizeof line, "    %-24s from %-24s efficiency %.3f: %8.0f tok/s against %8s, %s\n", p.id.c_str(),
                      p.calibratedFrom.c_str(), *p.calibratedEfficiency, *p.calibratedTokensPerSPerGpu,
                      cell(p.publishedTokensPerSPerGpu, 0).c_str(), signedPct(p.calibratedSpeedErrorPct).c_str());
        os << line;
      }
  }
  printSummary("For reference: the allocated estimate against a reserved, system or unstated figure (another measure)",
               otherMeasure);
  os << "\n  Comparison sets (the published order against the estimate's, best first):\n";
  if (orders.empty()) os << "    none has two rows the estimate can predict\n";
  for (const auto& c : orders) {
    auto join = [](const std::vector<std::string>& v) {
      std::string t;
      for (const auto& x : v) t += (t.empty() ? "" : " > ") + x;
      return t;
    };
    os << "    "
       << (c.sameOrder()    ? "same "
           : c.predictedTie ? "TIES "
                            : "DIFFERS ")
       << c.set << " (" << c.figure << "): published " << join(c.publishedOrder) << "; estimate " << join(c.predictedOrder)
       << "\n";
  }
  os << "\n  What the rows need that the estimator lacks (rows needing each):\n";
  for (const auto& [what, ids] : concepts) {
    std::string list;
    for (std::size_t i = 0; i < ids.size() && i < 4; ++i) list += (i ? ", " : "") + ids[i];
    if (ids.size() > 4) list += ", ...";
    os << "    " << ids.size() << "  " << what << " (" << list << ")\n";
  }
  std::cout << os.str();
  return kOk;
}

}  // namespace

std::vector<Command> estimatorCommands() {
  return {
      {"estimate",
       "shardscope-cli estimate [--scenario NAME|list] --model llama3-8b|llama3-70b|llama2-7b|qwen3-8b|qwen2.5-7b|tiny|odd|small|"
       "medium|custom [--lora-rank R --lora-alpha A --lora-targets LIST --qlora] [--gpu a10|a100-40gb|a100-80gb|h100-sxm|h200] "
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
      {"validate",
       "shardscope-cli validate --published rows.json [--calibrate leave-one-out] [--json | --csv]",
       "Hold the estimate to published measurements: each row (../shared/published schema) mapped to the estimator's "
       "options or listed with the concepts it lacks; predicted peak memory and tokens/s per GPU against the published "
       "figures, the errors per strategy family, fine-tuning mode and memory measure",
       {{"published", true, "rows in the published-measurement schema (a JSON array)"},
        {"calibrate", true,
         "leave-one-out: calibrate each row's speed on the nearest other row of the same source and GPU type (its "
         "efficiency, found through the same estimate)"},
        {"json", false, "one JSON document: rows, memory_summary, speed_summary, missing_concepts"},
        {"csv", false, "one CSV line per row"}},
       cmdValidate},
  };
}

}  // namespace shardscope::cli
