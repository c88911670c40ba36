// `shardscope-cli simulate`: an event-driven simulation of training steps per strategy at N devices
// (core/estimator/simulator.h), compute from a measured run of our runtime or from FLOPs, written
// into the database as runs with source `simulated` (docs/ESTIMATOR.md, "Simulator").
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "app/cli/estimator_args.h"
#include "app/cli/terminal_progress.h"
#include "core/estimator/prediction.h"
#include "core/estimator/ranking_check.h"
#include "core/estimator/scenarios.h"
#include "core/estimator/simulator.h"
#include "core/estimator/simulator_store.h"
#include "core/storage/trace_store.h"
#include "core/util/json.h"
#include "core/util/units.h"

namespace shardscope::cli {
namespace {

using core::JsonValue;
namespace est = core::estimator;
using namespace estargs;

std::string boolText(bool b) { return b ? "true" : "false"; }

// The defaults of the simulation (any option given still wins): the model, scale, tokens and knobs of
// --config / --deepspeed when given (the configuration to predict), else of the --profile-run.
Args withTargetDefaults(const Args& a, const est::SimTarget& mp) {
  Args out = a;
  auto add = [&](const std::string& k, const std::string& v) {
    if (!out.has(k)) out.options.push_back({k, v});
  };
  const auto& in = mp.input;
  // Another model named: its preset's depth, not the run's.
  if (!out.has("model")) {
    add("model", in.model.name);
    add("layers", std::to_string(in.model.layers));
  }
  add("gpus", std::to_string(in.gpus));
  // One host calibrated, more ranks asked for: they are on that host too unless --gpus-per-node says
  // otherwise (the prediction then says whether the host can hold them).
  if (in.gpusPerNode >= in.gpus && out.has("gpus"))
    add("gpus-per-node", out.get("gpus"));
  else
    add("gpus-per-node", std::to_string(in.gpusPerNode));
  add("micro-batch", std::to_string(in.microBatch));
  add("seq-len", std::to_string(in.seqLen));
  add("precision", std::string(core::toString(in.precision)));
  add("reduce-bucket-size", std::to_string(in.reduceBucketSize));
  add("allgather-bucket-size", std::to_string(in.allgatherBucketSize));
  add("prefetch-bucket-size", std::to_string(in.prefetchBucketSize));
  add("param-persistence-threshold", std::to_string(in.paramPersistenceThreshold));
  add("max-live-parameters", std::to_string(in.maxLiveParameters));
  add("max-reuse-distance", std::to_string(in.maxReuseDistance));
  if (in.overlapComm) add("overlap-comm", boolText(*in.overlapComm));
  if (in.activationCheckpointing) add("activation-checkpointing", "");
  if (in.gradientAsBucketView) add("gradient-as-bucket-view", "");
  if (in.shardGroupSize > 0) add("shard-group-size", std::to_string(in.shardGroupSize));
  if (mp.gloo) add("gloo-reduce-scatter", "");
  if (in.bucketCapMb == static_cast<double>(static_cast<std::int64_t>(in.bucketCapMb)))
    add("bucket-cap-mb", std::to_string(static_cast<std::int64_t>(in.bucketCapMb)));
  add("backward-prefetch", std::string(core::toString(mp.backwardPrefetch)));
  add("forward-prefetch", boolText(mp.forwardPrefetch));
  add("limit-all-gathers", boolText(mp.limitAllGathers));
  // As many steps as the run.
  if (mp.steps >= 2) add("steps", std::to_string(mp.steps));
  add("strategy", std::string(core::toString(mp.strategy)));
  if (in.loraRank > 0) {  // the run's LoRA (the run config's lora_*)
    add("lora-rank", std::to_string(in.loraRank));
    add("lora-alpha", core::formatFixed(in.loraAlpha, 6));
    add("lora-targets", in.loraTargets);
  }
  return out;
}

// --config run.json / --deepspeed ds.json: the run configuration to predict.
std::optional<est::SimTarget> configTarget(const Args& a) {
  if (!a.has("config") && !a.has("deepspeed")) return std::nullopt;
  if (a.has("config") && a.has("deepspeed")) throw std::invalid_argument("give --config or --deepspeed, not both");
  const std::string path = a.has("config") ? a.get("config") : a.get("deepspeed");
  const core::JsonValue j = core::parseJsonFile(path);
  core::RunConfig cfg =
      a.has("config") ? core::parseRunConfigJson(j, path, nullptr) : core::fromDeepSpeedJson(j, path, core::RunConfig{}, nullptr);
  try {
    return est::simTargetOf(cfg);
  } catch (const core::Error& e) {
    throw core::Error(path + ": " + e.what());
  }
}

bool boolValue(const Args& a, const std::string& name, bool def) {
  if (!a.has(name)) return def;
  const std::string v = a.get(name);
  if (v.empty() || v == "true" || v == "1" || v == "on" || v == "yes") return true;
  if (v == "false" || v == "0" || v == "off" || v == "no") return false;
  throw std::invalid_argument("--" + name + " expects true or false, got '" + v + "'");
}

int cmdSimulate(const Args& rawArgs, core::CancelToken& cancel) {
  if (rawArgs.get("scenario") == "list") {
    std::cout << scenarioList();
    return kOk;
  }
  const Args args = withScenario(rawArgs);
  if (!args.positional.empty())
    throw std::invalid_argument("simulate takes no positional arguments ('" + args.positional[0] + "')");
  const std::string dbPath = args.get("db", "shardscope.db");
  std::optional<est::MeasuredProfile> measured;
  const std::optional<est::SimTarget> target = configTarget(args);
  Args a = target ? withTargetDefaults(args, *target) : args;
  if (args.has("profile-run")) {
    core::TraceStore store(dbPath, core::Database::Mode::ReadOnly);
    std::optional<double> k;
    if (args.has("interference")) {
      k = doubleOption(args, "interference", 0.0);
      if (!(*k >= 0 && *k <= 3)) throw std::invalid_argument("--interference must be in [0, 3] (0: none)");
    }
    measured = est::measuredProfile(store, core::RunId{intOption(args, "profile-run", 0, 1)}, k);
    if (!target) a = withTargetDefaults(args, *measured);
    // The run's own collectives give the link unless one is named.
    if (!a.has("link") && !a.has("fit-run")) a.options.push_back({"fit-run", a.get("profile-run")});
  }
  est::RecommendInput ri;
  std::string fitNote;
  std::optional<est::LinkCalibration> calibration;
  parseEstimatorInput(a, ri, fitNote, &calibration);
  est::EstimateInput& in = ri.model;
  in.allgatherBucketSize = intOption(a, "allgather-bucket-size", in.allgatherBucketSize, 1);
  in.prefetchBucketSize = intOption(a, "prefetch-bucket-size", in.prefetchBucketSize, 0);
  in.maxLiveParameters = intOption(a, "max-live-parameters", in.maxLiveParameters, 0);
  in.bucketCapMb = static_cast<double>(intOption(a, "bucket-cap-mb", static_cast<std::int64_t>(in.bucketCapMb), 1));
  if (a.has("overlap-comm")) in.overlapComm = boolValue(a, "overlap-comm", true);

  est::SimulateInput base;
  base.model = in;
  base.intraNode = ri.intraNode;
  base.interNode = ri.interNode;
  base.comm = ri.comm;
  const std::string bp = a.get("backward-prefetch", "pre");
  if (auto v = core::knobFromString<core::BackwardPrefetch>(bp))
    base.backwardPrefetch = *v;
  else
    throw std::invalid_argument("--backward-prefetch expects pre, post or none, got '" + bp + "'");
  base.forwardPrefetch = boolValue(a, "forward-prefetch", false);
  base.limitAllGathers = boolValue(a, "limit-all-gathers", true);
  base.steps = static_cast<int>(intOption(a, "steps", 2, 1));
  base.jitter = doubleOption(a, "jitter", 0.0);
  if (!(base.jitter >= 0 && base.jitter < 1)) throw std::invalid_argument("--jitter must be in [0, 1), e.g. 0.02");
  base.seed = static_cast<std::uint64_t>(intOption(a, "seed", 1, 0));
  base.keepRanks = static_cast<int>(intOption(a, "keep-ranks", 16, 0));
  for (const auto& [k, v] : a.options) {
    if (k != "slow-rank") continue;
    const auto colon = v.find(':');
    if (colon == std::string::npos) throw std::invalid_argument("--slow-rank expects RANK:FACTOR, e.g. 3:1.2, got '" + v + "'");
    try {
      std::size_t u1 = 0, u2 = 0;
      const int r = std::stoi(v.substr(0, colon), &u1);
      const double f = std::stod(v.substr(colon + 1), &u2);
      if (u1 != colon || u2 != v.size() - colon - 1) throw std::invalid_argument("");
      base.slowRanks.push_back({r, f});
    } catch (const std::exception&) {
      throw std::invalid_argument("--slow-rank expects RANK:FACTOR, e.g. 3:1.2, got '" + v + "'");
    }
  }
  const double memBw = doubleOption(a, "mem-bw", ri.memBwGBps);
  if (measured)
    est::applyMeasuredProfile(base, *measured, a.has("jitter"));  // the run's own jitter unless --jitter
  else
    base.compute = est::flopsComputeProfile(in, ri.deviceTflops, ri.efficiency, memBw);
  std::vector<est::Strategy> strategies = ri.candidates;
  if (strategies.empty()) {
    if (measured)
      strategies.push_back(measured->strategy);
    else
      throw std::invalid_argument(
          "give --strategy S (ddp, zero1, zero2, zero3, fsdp, fsdp_grad_op, hsdp, zeropp_hpz; comma-separated for several)");
  }
  const bool store = a.has("db") && !a.has("dry-run");
  // A prediction calibrated on the measured run: its compute, interference and link (the measured
  // one, or the preset named by --link), checked and given an interval (core/estimator/prediction.h).
  std::optional<est::Calibration> cal;
  if (measured) {
    cal.emplace();
    cal->profile = *measured;
    if (calibration) {
      cal->link = *calibration;
    } else {
      cal->link.link = ri.intraNode;
      cal->link.source = "preset";
      cal->link.wellConditioned = true;
      cal->link.note = "preset " + ri.intraNode.name + " (--link), not measured";
    }
  }

  TerminalProgress bar;
  std::vector<est::SimulationResult> results;
  std::vector<core::RunId> runIds;
  std::unique_ptr<core::TraceStore> ts;
  if (store) ts = std::make_unique<core::TraceStore>(dbPath);
  for (auto s : strategies) {
    est::SimulateInput si = base;
    si.strategy = s;
    std::optional<est::PredictionCheck> check;
    if (cal) check = est::applyCalibration(si, *cal, a.has("jitter"), a.has("allow-extrapolation"));
    results.push_back(est::simulate(si, &cancel, bar.callback()));
    if (cal) est::annotatePrediction(results.back(), *cal, *check);
    if (ts) {
      const std::string name = a.has("name")
                                   ? a.get("name") + (strategies.size() > 1 ? " " + est::strategyName(s) : "")
                                   : "sim " + est::strategyName(s) + " " + in.model.name + " x" + std::to_string(in.gpus);
      runIds.push_back(est::writeSimulatedRun(*ts, results.back(), name, &cancel, bar.callback()));
    }
  }
  bar.finish();

  // The estimate's order against the simulation's, in FLOPs mode (core/estimator/ranking_check.h).
  std::vector<est::RankingReversal> reversals;
  if (!measured && results.size() > 1) {
    std::vector<est::StrategySteps> steps;
    for (const auto& r : results) {
      try {
        steps.push_back(
            {r.input.strategy, est::estimatedParts(est::assess(ri, r.input.strategy)), est::simulatedParts(r.steady)});
      } catch (const std::invalid_argument&) {
      }
    }
    reversals = est::rankingReversals(steps);
  }

  if (a.has("json")) {
    JsonValue out = JsonValue::object();
    out.set("model", JsonValue::string(in.model.name));
    out.set("gpus", JsonValue::number(static_cast<std::int64_t>(in.gpus)));
    out.set("gpus_per_node", JsonValue::number(static_cast<std::int64_t>(std::min(in.gpus, in.gpusPerNode))));
    out.set("micro_batch", JsonValue::number(in.microBatch));
    out.set("seq_len", JsonValue::number(in.seqLen));
    out.set("compute", JsonValue::string(base.compute.source));
    out.set("steps", JsonValue::number(static_cast<std::int64_t>(base.steps)));
    out.set("jitter", JsonValue::number(base.jitter));
    for (int p = 0; p < est::kComputePhases; ++p)
      if (base.phaseJitter[p] >= 0)
        out.set(std::string("jitter_") + est::computePhaseName(static_cast<est::ComputePhase>(p)),
                JsonValue::number(base.phaseJitter[p]));
    out.set("seed", JsonValue::number(static_cast<std::int64_t>(base.seed)));
    out.set("link", JsonValue::string(ri.intraNode.name));
    if (!fitNote.empty()) out.set("link_fit", JsonValue::string(fitNote));
    if (calibration) out.set("link_calibration", est::toJson(*calibration));
    if (measured) out.set("profile_run", est::toJson(*measured));
    JsonValue arr = JsonValue::array();
    for (std::size_t i = 0; i < results.size(); ++i) {
      JsonValue o = est::toJson(results[i]);
      if (i < runIds.size()) o.set("run_id", JsonValue::number(static_cast<std::int64_t>(runIds[i].value())));
      arr.push(std::move(o));
    }
    out.set("simulations", std::move(arr));
    if (!measured && results.size() > 1) {
      JsonValue rev = JsonValue::array();
      for (const auto& r : reversals) rev.push(JsonValue::string(r.text));
      out.set("ranking_vs_estimate", std::move(rev));
    }
    std::cout << out.dump() << "\n";
    return kOk;
  }
  std::ostringstream os;
  os << "Simulated " << base.steps << " step" << (base.steps > 1 ? "s" : "") << " of " << in.model.name << " on " << in.gpus
     << " devices (" << std::min(in.gpus, in.gpusPerNode) << " per node), micro-batch " << in.microBatch << " x " << in.seqLen
     << " tokens" << (in.activationCheckpointing ? ", activation checkpointing" : "") << "\n";
  os << "  compute: " << base.compute.source << "\n";
  os << "  link: " << ri.intraNode.name << " (" << core::formatFixed(ri.intraNode.busBwGBps, 3) << " GB/s bus, "
     << core::formatFixed(ri.intraNode.alphaUs, 1) << " us)" << (fitNote.empty() ? "" : "; " + fitNote) << "\n";
  if (measured)
    os << "  measured run " << measured->runId.value() << " (" << est::strategyName(measured->strategy) << "): step "
       << core::formatFixed(measured->stepS * 1e3, 2) << " ms, communication " << core::formatFixed(measured->commS * 1e3, 2)
       << " ms, exposed " << core::formatFixed(measured->exposedCommS * 1e3, 2) << " ms, overlap "
       << core::formatFixed(measured->overlap() * 100, 1) << "%, compute varies "
       << core::formatFixed(measured->computeJitter * 100, 1) << "% across ranks\n";
  if (measured && !measured->leftOutNote.empty()) os << "  profile: " << measured->leftOutNote << "\n";
  if (base.jitter > 0 || !base.slowRanks.empty()) {
    os << "  per-rank variation: jitter";
    bool phases = false;
    for (int p = 0; p < est::kComputePhases; ++p)
      if (base.phaseJitter[p] >= 0) {
        os << (phases ? ", " : " ") << est::computePhaseName(static_cast<est::ComputePhase>(p)) << " "
           << core::formatFixed(base.phaseJitter[p] * 100, 1) << "%";
        phases = true;
      }
    if (!phases) os << " " << core::formatFixed(base.jitter * 100, 1) << "%";
    os << "; " << base.slowRanks.size() << " slow rank(s)\n";
  }
  char line[512];
  std::snprintf(line, sizeof line, "\n  %-13s %10s %10s %10s %10s %8s %12s %12s %8s %9s %8s %6s\n", "strategy", "step ms",
                "compute", "comm", "exposed", "overlap", "peak", "tokens/s/dev", "colls", "wire/step", "sim s", "run");
  os << line;
  for (std::size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    std::snprintf(line, sizeof line, "  %-13s %10s %10s %10s %10s %7s%% %12s %12s %8lld %9s %8s %6s\n",
                  est::strategyName(r.input.strategy).c_str(), core::formatFixed(r.steady.stepS * 1e3, 2).c_str(),
                  core::formatFixed(r.steady.computeS * 1e3, 2).c_str(), core::formatFixed(r.steady.commS * 1e3, 2).c_str(),
                  core::formatFixed(r.steady.exposedCommS * 1e3, 2).c_str(),
                  core::formatFixed(r.steady.overlap() * 100, 1).c_str(),
                  est::formatBytes(static_cast<double>(r.peakBytes)).c_str(), core::formatFixed(r.tokensPerSPerDevice, 0).c_str(),
                  static_cast<long long>(r.collectivesPerStep), est::formatBytes(r.wireBytesPerStep).c_str(),
                  core::formatFixed(r.wallS, 2).c_str(), i < runIds.size() ? std::to_string(runIds[i].value()).c_str() : "-");
    os << line;
    if (r.slowestRankStepS > r.steady.stepS * 1.0001)
      os << "      slowest rank " << r.slowestRank << ": " << core::formatFixed(r.slowestRankStepS * 1e3, 2) << " ms\n";
    if (r.prediction) {
      const auto& p = *r.prediction;
      os << "      predicted from run " << p.calibrationRun << " (" << p.change << "): step "
         << core::formatFixed(p.lowS * 1e3, 1) << " .. " << core::formatFixed(p.highS * 1e3, 1) << " ms (" << p.intervalBasis
         << ")\n";
      if (!p.checkpointing.empty()) os << "      checkpointing: " << p.checkpointing << "\n";
      for (const auto& e : p.extrapolation) os << "      EXTRAPOLATION: " << e << "\n";
    }
  }
  if (cal) os << "  " << cal->profile.interference.note << "\n";
  if (!measured && results.size() > 1) {
    if (reversals.empty()) os << "\nThe simulation ranks these strategies in the estimate's order.\n";
    for (const auto& r : reversals) os << "\n" << r.text << ".\n";
  }
  if (!runIds.empty()) os << "\nStored in " << dbPath << " as simulated runs (open them in the app, `analyze`, `report`).\n";
  std::cout << os.str();
  return kOk;
}

}  // namespace

std::vector<Command> simulatorCommands() {
  auto opts = estimatorInputOptions();
  for (OptionSpec o : std::vector<OptionSpec>{
           {"profile-run", true,
            "compute per block from this measured run of our runtime (with --db); its model, scale and knobs are the defaults, "
            "its collectives the link unless --link"},
           {"mem-bw", true,
            "FLOPs mode: device memory bandwidth in GB/s for the optimizer and embedding (default: the --gpu preset's, else "
            "3350, H100 SXM)"},
           {"allgather-bucket-size", true, "ZeRO-1/2 post-step all-gather bucket in elements (default 5e8)"},
           {"prefetch-bucket-size", true, "ZeRO-3 stage3_prefetch_bucket_size in elements (default 5e7)"},
           {"max-live-parameters", true, "ZeRO-3 stage3_max_live_parameters (default 1e9)"},
           {"overlap-comm", true, "ZeRO overlap_comm true|false (default: true for ZeRO-3, false otherwise)"},
           {"bucket-cap-mb", true, "DDP bucket size in MiB (default 25)"},
           {"backward-prefetch", true, "FSDP: pre (default) | post | none"},
           {"forward-prefetch", true, "FSDP forward prefetch true|false (default false)"},
           {"limit-all-gathers", true, "FSDP rate limiter true|false (default true)"},
           {"steps", true,
            "steps to simulate (default 2, or the --profile-run's: the first is the warm-up, as in a measured run)"},
           {"jitter", true,
            "per-rank compute variation: relative standard deviation, e.g. 0.02 (with --profile-run: the run's own)"},
           {"seed", true, "seed of the jitter (default 1)"},
           {"slow-rank", true, "RANK:FACTOR, a straggler whose compute takes FACTOR times longer; repeatable"},
           {"keep-ranks", true, "ranks stored in the database (default 16; 0 = all); slow ranks are always kept"},
           {"name", true, "name of the stored run(s)"},
           {"config", true,
            "a run configuration (JSON, as `run --config` takes) to predict: its model, scale and knobs are the "
            "defaults; with --profile-run, that run calibrates the prediction"},
           {"deepspeed", true, "the same from a DeepSpeed JSON config"},
           {"allow-extrapolation", false,
            "with --profile-run: predict even where ranks would share cores or GPUs differently from the calibration "
            "(its compute is scaled by the load; the result says so)"},
           {"interference", true,
            "with --profile-run: the slowdown of compute per unit of overlap with communication (0 = none; default: "
            "fitted from the run, or the device class's measured value)"},
           {"dry-run", false, "with --db: read the profile, store nothing"}})
    opts.push_back(std::move(o));
  return {
      {"simulate",
       "shardscope-cli simulate --model M --gpus N --strategy S[,S...] [estimate's model and link options] "
       "[--db F [--profile-run ID]] [--config run.json | --deepspeed ds.json] [--steps K] [--jitter X --seed N] [--slow-rank "
       "R:F] [--keep-ranks K] [--json]",
       "Simulate training steps event by event (compute per block, collectives on their own streams with the "
       "strategy's dependencies and prefetch rules, memory over time) and store them as simulated runs",
       opts, cmdSimulate},
  };
}

}  // namespace shardscope::cli
