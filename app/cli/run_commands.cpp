// `shardscope-cli run` and `shardscope-cli compare`: launch real sharded training runs of the
// embedded runtime (one shardscope-worker process per rank) into the trace store, then summarise.
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include "app/cli/command_table.h"
#include "app/cli/protocol.h"
#include "app/cli/terminal_progress.h"
#include "core/analysis/bottlenecks.h"
#include "core/analysis/comparison.h"
#include "core/analysis/run_figures.h"
#include "core/util/units.h"
#include "core/config/run_config.h"
#include "core/launch/launcher.h"
#include "core/storage/run_writer.h"
#include "core/storage/trace_store.h"
#include "core/util/error.h"
#include "core/util/json.h"

namespace shardscope::cli {
namespace {

namespace fs = std::filesystem;
using core::JsonValue;

// shardscope-worker: $SHARDSCOPE_WORKER, beside this executable, in the build tree, or on PATH.
std::string locateWorker() {
  if (const char* w = std::getenv("SHARDSCOPE_WORKER"); w && *w) return w;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (const fs::path& p :
         {self.parent_path() / "shardscope-worker", self.parent_path().parent_path() / "profiler" / "shardscope-worker"})
      if (fs::exists(p, ec)) return p.string();
  }
  return "shardscope-worker";  // the launcher searches PATH
}

std::vector<OptionSpec> runOptions(bool compare) {
  std::vector<OptionSpec> o;
  if (compare) o.push_back({"strategies", true, "strategies to compare, comma separated (default: ddp,fsdp,zero3)"});
  o.push_back({"config", true, "run configuration JSON (keys as the flags below, snake_case); - reads it from stdin"});
  o.push_back({"deepspeed", true, "DeepSpeed JSON config (zero_optimization etc. mapped onto the knobs)"});
  o.push_back({"like", true,
               "start from the stored configuration of run ID in --db, then apply the other options (a bottleneck's "
               "\"try it\": --like 7 --backward-prefetch pre)"});
  o.push_back({"name", true, "run name (compare: a prefix)"});
  if (compare)
    o.push_back({"repeats", true,
                 "run each configuration N times (interleaved: A B C A B C ...) and judge them by their run-to-run spread "
                 "and Welch's t-test (default 1)"});
  o.push_back({"master-addr", true, "rendezvous address for multi-node runs (default 127.0.0.1)"});
  o.push_back({"master-port", true, "rendezvous port (default: a free port)"});
  o.push_back({"dump-params", true,
               "rank 0 writes every full parameter after training (float32, model order) to FILE, and FILE.json naming them"});
  o.push_back({"dump-losses", true, "each rank writes its per-step losses to FILE.rank<R> (FILE when one rank)"});
  o.push_back({"progress", true,
               "json: one JSON event per line on stdout (progress per step, runs, warnings, errors with the key, "
               "done; the app's protocol); human output to stderr"});
  o.push_back({"progress-json", false, "echo the ranks' raw progress lines (@ss {...}) on stdout"});
  for (const auto& k : core::runConfigKeys()) {
    if (compare && k.key == "strategy") continue;
    std::string help = k.help + " [" + k.type + ", default " + k.defaultText + "]";
    o.push_back({k.flag.substr(2), !k.isBool, help});
    for (std::string alias : k.aliases) {  // DeepSpeed spellings: --stage3-param-persistence-threshold
      std::replace(alias.begin(), alias.end(), '_', '-');
      o.push_back({alias, !k.isBool, "same as " + k.flag});
    }
  }
  return o;
}

core::RunConfig configFrom(const Args& a, std::vector<std::string>& warnings) {
  core::RunConfig cfg;
  if (a.has("like")) {
    // A stored run's configuration (the run-config JSON our runtime stores with every run).
    const std::string db = a.get("db", "");
    if (db.empty()) throw std::invalid_argument("--like needs --db: the database that holds the run");
    const auto runId = parseRunId(a.get("like"));
    if (!runId) throw std::invalid_argument("--like expects a run id (a positive integer), got '" + a.get("like") + "'");
    const std::int64_t id = runId->value();
    core::TraceStore store(db, core::Database::Mode::ReadOnly);
    const auto run = store.run(*runId);
    if (!run) throw core::Error(db + ": no run with id " + std::to_string(id));
    if (run->source != core::RunSource::Runtime && run->source != core::RunSource::Simulated)
      throw core::Error(db + ": run " + std::to_string(id) + " is an imported trace: it has no configuration to start from");
    const std::string label = db + " run " + std::to_string(id);
    cfg = core::parseRunConfigJson(core::parseJson(run->configJson, label), label, &warnings);
  }
  if (a.has("deepspeed"))
    cfg = core::fromDeepSpeedJson(core::parseJsonFile(a.get("deepspeed")), a.get("deepspeed"), cfg, &warnings);
  if (a.has("config")) {
    const std::string path = a.get("config");
    if (path == "-") {  // the app passes its configuration on stdin
      std::ostringstream text;
      text << std::cin.rdbuf();
      core::applyRunConfigJson(cfg, core::parseJson(text.str(), "<stdin>"), "<stdin>", &warnings);
    } else {
      core::applyRunConfigJson(cfg, core::parseJsonFile(path), path, &warnings);
    }
  }
  for (const auto& [name, value] : a.options)
    if (core::isRunConfigFlag(name)) core::applyFlag(cfg, name, value);
  return cfg;
}

std::string rootCause(const core::LaunchResult& r, const std::map<int, std::string>& lastErr, int firstRank);

struct Launched {
  core::RunId runId;
  core::LaunchResult result;
};

Launched launchRun(const std::string& db, const core::RunConfig& cfg, const std::string& name, const Args& a,
                   core::CancelToken& cancel) {
  Launched out;
  {
    core::TraceStore store(db);
    core::Run run;
    run.name = name;
    run.source = core::RunSource::Runtime;
    run.strategy = std::string(core::toString(cfg.strategy));
    run.configJson = core::toJson(cfg).dump();
    run.worldSize = cfg.worldSize;
    run.status = core::RunStatus::Running;
    JsonValue meta = JsonValue::object();
    meta.set("launcher", JsonValue::string("shardscope-cli"));
    meta.set("nnodes", JsonValue::number(static_cast<std::int64_t>(cfg.nnodes)));
    meta.set("deepspeed_config", core::toDeepSpeedJson(cfg));
    run.metadataJson = meta.dump();
    out.runId = core::createRunRow(store, run);
  }
  const std::string strategy(core::toString(cfg.strategy));
  auto& events = EventStream::instance();
  events.run(out.runId, strategy, "running");
  // The worker reads the exact configuration from a file (nothing is lost in flag re-spelling).
  char tmpl[] = "/tmp/shardscope-run-XXXXXX.json";
  const int fd = mkstemps(tmpl, 5);
  if (fd < 0) throw core::Error("cannot create a temporary config file in /tmp");
  const std::string cfgPath = tmpl;
  {
    const std::string text = core::toJson(cfg).dump();
    if (write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
      close(fd);
      throw core::Error("cannot write " + cfgPath);
    }
    close(fd);
  }
  core::LaunchSpec spec;
  spec.program = locateWorker();
  spec.args = {"--db", db, "--run-id", std::to_string(out.runId.value()), "--config", cfgPath};
  for (const char* opt : {"dump-params", "dump-losses"})
    if (a.has(opt)) {
      spec.args.push_back(std::string("--") + opt);
      spec.args.push_back(a.get(opt));
    }
  spec.worldSize = cfg.worldSize;
  spec.nprocPerNode = core::effectiveNprocPerNode(cfg);
  spec.nodeRank = cfg.nodeRank;
  spec.masterAddr = a.get("master-addr", "127.0.0.1");
  spec.masterPort = a.has("master-port") ? std::stoi(a.get("master-port")) : 0;
  spec.hangTimeoutS = cfg.hangTimeoutS;
  spec.cancel = cancel.flag();
  // Ranks share this machine's cores: each gets its share of BLAS/OpenMP threads (torchrun sets
  // OMP_NUM_THREADS=1 likewise) unless the user chose.
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const std::string threads = std::to_string(std::max(1u, cores / static_cast<unsigned>(std::max(1, spec.nprocPerNode))));
  for (const char* var : {"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"})
    if (!std::getenv(var)) spec.env.emplace_back(var, threads);
  TerminalProgress bar;
  const bool echo = a.has("progress-json");
  std::map<int, std::string> lastErr;
  spec.onLine = [&](int rank, const std::string& line) {
    if (line.rfind("@ss ", 0) != 0) {
      std::cerr << "[rank " << rank << "] " << line << "\n";
      return;
    }
    if (echo) std::cout << line << std::endl;
    if (rank != 0) return;
    try {
      const JsonValue v = core::parseJson(line.substr(4), "progress line");
      const JsonValue* s = v.find("step");
      const JsonValue* n = v.find("steps");
      const JsonValue* ev = v.find("event");
      if (s && n && s->asInt() && n->asInt() && ev && ev->isString() && ev->asString() == "step")
        events.step(out.runId, strategy, static_cast<int>(*s->asInt()), static_cast<int>(*n->asInt()), v.find("loss"),
                    v.find("step_ms"));
      if (s && n && s->asInt() && n->asInt()) {
        core::Progress p;
        p.stage = std::string(core::toString(cfg.strategy)) + " steps";
        p.done = static_cast<std::uint64_t>(*s->asInt());
        p.total = static_cast<std::uint64_t>(*n->asInt());
        p.unit = "steps";
        bar.update(p);
      }
    } catch (const std::exception&) {
    }
  };
  spec.onErrLine = [&](int rank, const std::string& line) {
    lastErr[rank] = line;
    std::cerr << "[rank " << rank << "] " << line << "\n";
  };
  out.result = core::launchRanks(spec);
  bar.finish();
  std::error_code ec;
  fs::remove(cfgPath, ec);
  core::TraceStore store(db);
  if (out.result.ok) {
    // Rank 0 marks the run completed only when it creates the run itself; here the launcher does.
    core::setRunOutcome(store, out.runId, core::RunStatus::Completed);
  } else if (out.result.cancelled) {
    core::setRunOutcome(store, out.runId, core::RunStatus::Cancelled, "cancelled by user");
  } else {
    out.result.reason = rootCause(out.result, lastErr, cfg.nodeRank * spec.nprocPerNode);
    core::setRunOutcome(store, out.runId, core::RunStatus::Failed, out.result.reason);
  }
  events.run(out.runId, strategy, out.result.ok ? "completed" : (out.result.cancelled ? "cancelled" : "failed"));
  return out;
}

// The human summary of a run, on `os` (stderr when stdout carries --json).
void printRunSummary(std::ostream& os, core::TraceStore& store, core::RunId runId, const core::RunFigures& f) {
  auto run = store.run(runId);
  if (!run) return;
  os << "run " << runId.value() << " (" << run->name << "): " << core::toString(run->status);
  if (!run->failureReason.empty()) os << " - " << run->failureReason;
  os << "\n";
  // The figures as every surface shows them (core/analysis/run_figures.h, docs/METRICS.md).
  if (f.stepTimeMs) os << "  step time " << core::formatFixed(*f.stepTimeMs, 2) << " ms";
  if (f.tokensPerSecond) os << ", " << core::formatFixed(*f.tokensPerSecond, 0) << " tokens/s";
  if (f.initSeconds) os << ", init " << core::formatFixed(*f.initSeconds, 2) << " s";
  if (f.checkpointSaveSeconds) os << ", checkpoint save " << core::formatFixed(*f.checkpointSaveSeconds, 3) << " s";
  if (f.stepTimeMs) os << "\n  (" << core::describeStepTime(f) << ")";
  os << "\n";
  // What trained: LoRA's share of the model, fp16's skipped steps (the strategy table's figures).
  if (f.loraRank.value_or(0) > 0 && f.trainableParams.value && f.frozenParams.value)
    os << "  LoRA r=" << *f.loraRank << ": " << core::formatFixed(*f.trainableParams.value, 0) << " trainable parameters ("
       << core::formatFixed(100.0 * *f.trainableParams.value / (*f.trainableParams.value + *f.frozenParams.value), 3) << " % of "
       << core::formatFixed(*f.trainableParams.value + *f.frozenParams.value, 0) << "), the rest frozen\n";
  if (f.precision == "fp16" && f.skippedSteps.value)
    os << "  fp16: " << core::formatFixed(*f.skippedSteps.value, 0)
       << " step(s) skipped on overflow (loss_scale/step/N has the scale)\n";
  if (f.peakAllocatedBytes) {
    os << "  peak " << (f.peakDevice == "GPU" ? "GPU" : "host") << " memory "
       << core::formatBytes(static_cast<double>(*f.peakAllocatedBytes)) << " allocated";
    if (f.peakReservedBytes && *f.peakReservedBytes > 0)
      os << ", " << core::formatBytes(static_cast<double>(*f.peakReservedBytes)) << " reserved";
    os << " (largest rank)\n";
  }
  for (const auto& r : store.ranks(runId)) {
    auto rm = [&](const std::string& k) { return store.metric(runId, r.id, k); };
    os << "  rank " << r.rank << ":";
    const auto rankPeak = f.rankPeakAllocated(r.rank);
    if (rankPeak) os << " peak " << core::formatBytes(static_cast<double>(*rankPeak));
    if (auto p = rm("model_state.parameters_bytes"))
      os << " (params " << core::formatBytes(*p) << ", grads " << core::formatBytes(rm("model_state.gradients_bytes").value_or(0))
         << ", optimizer " << core::formatBytes(rm("model_state.optimizer_bytes").value_or(0)) << ")";
    auto first = rm("loss/step/1");
    int last = 0;
    for (int s = 1; s < 1000000; ++s)
      if (!rm("loss/step/" + std::to_string(s))) {
        last = s - 1;
        break;
      }
    if (first && last > 0)
      os << " loss " << core::formatFixed(*first, 4) << " -> " << core::formatFixed(*rm("loss/step/" + std::to_string(last)), 4);
    os << "\n";
  }
}

// The rank that caused a failure. When one rank dies, its peers fail too ("Connection closed by
// peer", timeouts) and may be reaped first: prefer a rank whose own error is not a peer's failure.
std::string rootCause(const core::LaunchResult& r, const std::map<int, std::string>& lastErr, int firstRank) {
  auto secondary = [](const std::string& e) { return core::isSecondaryFailure(e); };
  if (!secondary(r.reason)) return r.reason;
  for (std::size_t i = 0; i < r.exitCodes.size(); ++i) {
    const int rank = static_cast<int>(i) + firstRank;
    auto it = lastErr.find(rank);
    if (r.exitCodes[i] <= 0 || r.exitCodes[i] == 127 || it == lastErr.end() || secondary(it->second)) continue;
    return "rank " + std::to_string(rank) + " exited with code " + std::to_string(r.exitCodes[i]) + ": " + it->second;
  }
  return r.reason;
}

// A launched run for --json: its id, outcome and the figures the summary prints (`f`, computed once
// for both; docs/METRICS.md defines them).
core::JsonValue runJson(core::TraceStore& store, const Launched& l, const core::RunFigures& f) {
  core::JsonValue r = core::JsonValue::object();
  r.set("run_id", core::JsonValue::number(static_cast<std::int64_t>(l.runId.value())));
  r.set("ok", core::JsonValue::boolean(l.result.ok));
  if (const auto run = store.run(l.runId)) {
    r.set("name", core::JsonValue::string(run->name));
    r.set("strategy", core::JsonValue::string(run->strategy));
    r.set("status", core::JsonValue::string(std::string(core::toString(run->status))));
    if (!run->failureReason.empty()) r.set("failure_reason", core::JsonValue::string(run->failureReason));
    // The figures every surface shows (core/analysis/run_figures.h): the same as compare-runs.
    auto put = [&](const char* key, const std::optional<double>& v) {
      if (v) r.set(key, core::JsonValue::number(*v));
    };
    put("step_time_ms", f.stepTimeMs);
    put("tokens_per_s", f.tokensPerSecond);
    put("init_time_s", f.initSeconds);
    put("checkpoint_save_s", f.checkpointSaveSeconds);
    if (f.peakAllocatedBytes) r.set("peak_allocated_bytes", core::JsonValue::number(static_cast<double>(*f.peakAllocatedBytes)));
    if (f.peakReservedBytes) r.set("peak_reserved_bytes", core::JsonValue::number(static_cast<double>(*f.peakReservedBytes)));
    if (f.stepTimeMs) {
      r.set("steps_counted", core::JsonValue::number(static_cast<std::int64_t>(f.steps.count)));
      r.set("step_rule", core::JsonValue::string(core::describeStepRule(f.steps)));
      r.set("step_window", core::JsonValue::string(core::describeStepTime(f)));
    }
  }
  return r;
}

int finish(const Launched& l) {
  if (l.result.ok) return kOk;
  if (l.result.cancelled) {
    std::cerr << "shardscope-cli: cancelled; run " << l.runId.value() << " is stored as cancelled with what was captured\n";
    return kCancelled;
  }
  std::cerr << "error: run " << l.runId.value() << " failed: " << l.result.reason << " (events captured before are kept)\n";
  EventStream::instance().error("run " + std::to_string(l.runId.value()) + " failed: " + l.result.reason, {});
  return kFailed;
}

int cmdRun(const Args& a, core::CancelToken& cancel) {
  std::vector<std::string> warnings;
  core::RunConfig cfg = configFrom(a, warnings);
  core::validate(cfg);  // refused before anything launches, naming the key
  for (const auto& w : warnings) {
    std::cerr << "warning: " << w << "\n";
    EventStream::instance().warning(w);
  }
  const std::string db = a.get("db", "shardscope.db");
  const std::string name =
      a.get("name", std::string(core::toString(cfg.strategy)) + " " + cfg.model + " x" + std::to_string(cfg.worldSize));
  const Launched l = launchRun(db, cfg, name, a, cancel);
  const bool json = a.has("json");
  {
    core::TraceStore store(db, core::Database::Mode::ReadOnly);
    const core::RunFigures f = core::computeRunFigures(store, l.runId);  // once, for the summary and the JSON
    printRunSummary(json ? std::cerr : std::cout, store, l.runId, f);
    if (json) std::cout << runJson(store, l, f).dump() << "\n";  // stdout holds this one document only
  }
  return finish(l);
}

int cmdCompare(const Args& a, core::CancelToken& cancel) {
  std::vector<std::string> warnings;
  core::RunConfig base = configFrom(a, warnings);
  // The main job: without a model choice, compare on `small` (big enough for sharding to show).
  if (!a.has("model") && !a.has("config") && !a.has("deepspeed")) base.model = "small";
  std::vector<core::Strategy> strategies;
  const std::string list = a.get("strategies", "ddp,fsdp,zero3");
  for (std::size_t pos = 0; pos <= list.size();) {
    const std::size_t comma = std::min(list.find(',', pos), list.size());
    const std::string item = list.substr(pos, comma - pos);
    if (!item.empty()) {
      auto s = core::strategyFromString(item);
      if (!s) throw std::invalid_argument("--strategies: unknown strategy '" + item + "'");
      strategies.push_back(*s);
    }
    pos = comma + 1;
  }
  if (strategies.empty()) throw std::invalid_argument("--strategies: give at least one strategy");
  std::vector<core::RunConfig> cfgs;
  for (auto s : strategies) {
    core::RunConfig c = base;
    c.strategy = s;
    if (s != core::Strategy::Hsdp) c.shardGroupSize = 0;
    core::validate(c);  // every configuration is checked before the first launch
    cfgs.push_back(c);
  }
  for (const auto& w : warnings) {
    std::cerr << "warning: " << w << "\n";
    EventStream::instance().warning(w);
  }
  const std::string db = a.get("db", "shardscope.db");
  const bool json = a.has("json");
  const std::int64_t repeats = a.getInt("repeats", 1);
  if (repeats < 1 || repeats > 100) throw std::invalid_argument("--repeats: give 1 to 100 runs per configuration");
  // Repeats interleaved (A B C A B C): a drift of the machine over time spreads over every configuration.
  std::vector<std::pair<core::RunConfig, std::int64_t>> plan;
  for (std::int64_t r = 1; r <= repeats; ++r)
    for (const auto& c : cfgs) plan.emplace_back(c, r);
  core::JsonValue runs = core::JsonValue::array();
  std::vector<core::RunId> ids;
  int rc = kOk;
  for (const auto& [c, repeat] : plan) {
    const std::string name = (a.has("name") ? a.get("name") + " " : std::string()) + std::string(core::toString(c.strategy)) +
                             (repeats > 1 ? " (" + std::to_string(repeat) + "/" + std::to_string(repeats) + ")" : std::string());
    std::cerr << "== " << name << ": " << c.model << ", " << c.worldSize << " ranks, " << c.steps << " steps\n";
    const Launched l = launchRun(db, c, name, a, cancel);
    {
      core::TraceStore store(db, core::Database::Mode::ReadOnly);
      const core::RunFigures f = core::computeRunFigures(store, l.runId);  // once, for the summary and the JSON
      printRunSummary(json ? std::cerr : std::cout, store, l.runId, f);
      runs.push(runJson(store, l, f));
    }
    rc = finish(l);
    if (rc != kOk) break;  // a failure or Ctrl-C stops the comparison; what ran is kept
    ids.push_back(l.runId);
  }
  if (json) {
    // One document: every launched run, and the comparison as compare-runs --json gives it.
    core::JsonValue out = core::JsonValue::object();
    out.set("runs", std::move(runs));
    if (ids.size() >= 2) {
      core::TraceStore store(db, core::Database::Mode::ReadOnly);
      out.set("comparison", comparisonJson(core::compareRuns(store, ids, 0), ids, 0));
    }
    std::cout << out.dump() << "\n";
    return rc;
  }
  if (ids.size() >= 2) {
    core::TraceStore store(db, core::Database::Mode::ReadOnly);
    std::cout << "\n";
    const core::Comparison c = core::compareRuns(store, ids, 0);
    printStrategyTable(std::cout, c.strategies);
    printComparisonTable(std::cout, c);
    printVerdict(std::cout, c);
    std::cout << "\nmost exposed collective per run:\n";
    for (core::RunId id : ids) {
      const auto b = core::findCollectiveBottlenecks(store, id, 1);
      const auto run = store.run(id);
      std::cout << "  " << (run ? run->name : std::to_string(id.value())) << ": ";
      if (b.empty()) {
        std::cout << "no exposed all-gather or reduce-scatter\n";
        continue;
      }
      std::cout << core::toString(b[0].op) << " rank " << b[0].rank << " " << b[0].kernel
                << (b[0].unit.empty() ? "" : " in " + b[0].unit) << ", exposed "
                << core::formatFixed(static_cast<double>(b[0].totalExposedNs) / 1e6, 3) << " ms in " << b[0].instances
                << (b[0].instances == 1 ? " instance" : " instances (steps x ranks)") << " (worst "
                << core::formatFixed(static_cast<double>(b[0].exposedNs) / 1e6, 3) << " ms)";
      if (!b[0].suggestions.empty()) std::cout << " - " << b[0].suggestions[0];
      std::cout << "\n";
    }
  }
  return rc;
}

}  // namespace

std::vector<Command> runCommands() {
  return {
      {"run",
       "shardscope-cli run [--db F] [--strategy S] [--world-size N] [--steps K] [--model M] [--seed S] "
       "[--config run.json|- | --deepspeed ds.json] [--progress json] [knobs...]",
       "Launch a real sharded training run (one shardscope-worker process per rank, Gloo on CPU / NCCL on GPU) "
       "and capture it into the database",
       runOptions(false), cmdRun},
      {"compare", "shardscope-cli compare [--db F] [--strategies ddp,fsdp,zero3] [--repeats N] [same flags as run]",
       "Run several strategies one after another on the same model, data and seed (default: ddp, fsdp, zero3 on "
       "the small model, 2 ranks), then print the comparison and each run's most exposed collective",
       runOptions(true), cmdCompare},
  };
}

}  // namespace shardscope::cli
