// shardscope-worker: one rank of a training run. Started N times by `shardscope-cli run` (or by
// torchrun --no-python / srun); the rank, world size and rendezvous come from the environment
// (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT, or Slurm's SLURM_*).
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "core/config/run_config.h"
#include "core/util/args.h"
#include "core/util/error.h"
#include "core/util/json.h"
#include "profiler/capture/recorder.h"
#include "profiler/runtime/trainer.h"
#include "shardscope/build_info.h"

using namespace shardscope;

namespace {

const std::vector<core::ArgSpec> kOptions = {
    {"db", true, "the database the rank records into (required)", "FILE"},
    {"run-id", true, "the run row to record into (created by the launcher)", "ID"},
    {"run-name", true, "the run's name when this rank creates it", "NAME"},
    {"config", true, "run configuration JSON", "run.json"},
    {"deepspeed", true, "DeepSpeed JSON config", "ds.json"},
    {"same-db", false,
     "every node of a multi-node job writes --db itself (default: one database per node, FILE.node<N>, or \"{node}\" in FILE)"},
    {"dump-params", true, "rank 0 writes every full parameter after training to FILE (FILE.json names them)", "FILE"},
    {"dump-losses", true, "this rank writes its per-step losses to FILE", "FILE"},
    {"no-progress", false, "no @ss progress lines on stdout"},
    {"help", false, "show this help"},
    {"version", false, "show the version (and the LibTorch and CUDA it is built with)"},
};

void usage() {
  std::printf(
      "Usage: shardscope-worker --db FILE [options] [run configuration flags]\n"
      "  or:  shardscope-worker --help | --version\n\n"
      "One rank of a run; the environment gives RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT\n"
      "(torchrun --no-python, our launcher) or SLURM_PROCID, SLURM_NTASKS, SLURM_NODEID... (srun).\n"
      "A job over several nodes writes one database per node; `shardscope-cli merge` joins them.\n\n%s\n%s",
      core::argsHelp(kOptions).c_str(), core::runConfigHelp().c_str());
}

void version() {
  std::printf("shardscope-worker " SHARDSCOPE_VERSION "\nLibTorch %s (%s)\n", SHARDSCOPE_BUILD_TORCH_VERSION,
              SHARDSCOPE_BUILD_TORCH_CUDA ? "CUDA" : "CPU");
  if (*SHARDSCOPE_BUILD_CUDA_VERSION)
    std::printf("CUDA %s, CUPTI API %s\n", SHARDSCOPE_BUILD_CUDA_VERSION, SHARDSCOPE_BUILD_CUPTI_API);
}

}  // namespace

int main(int argc, char** argv) {
  const auto start = capture::nowNs();
  runtime::WorkerOptions opts;
  opts.processStartNs = start;
  try {
    core::ArgParseOptions po;
    po.allowPositional = false;
    // Every run-config knob is a flag too (--world-size 4, --overlap-comm).
    po.extra = [](std::string_view name) -> std::optional<bool> {
      if (!core::isRunConfigFlag(name)) return std::nullopt;
      return core::isRunConfigBoolFlag(name);
    };
    const core::ParsedArgs args = core::parseArgs(argc, argv, kOptions, po);
    if (args.has("help")) {
      usage();
      return 0;
    }
    if (args.has("version")) {
      version();
      return 0;
    }
    opts.dbPath = args.get("db");
    if (args.has("run-id")) opts.runId = core::RunId{args.getInt("run-id", 0, 1)};
    opts.runName = args.get("run-name");
    opts.dumpParamsPath = args.get("dump-params");
    opts.dumpLossesPath = args.get("dump-losses");
    if (args.has("no-progress")) opts.progressLines = false;
    if (args.has("same-db")) opts.sameDatabase = true;
    const std::string configPath = args.get("config"), dsPath = args.get("deepspeed");
    if (opts.dbPath.empty()) throw core::Error("--db FILE is required");
    core::RunConfig cfg;
    std::vector<std::string> warnings;
    if (!dsPath.empty()) cfg = core::fromDeepSpeedJson(core::parseJsonFile(dsPath), dsPath, cfg, &warnings);
    if (!configPath.empty()) core::applyRunConfigJson(cfg, core::parseJsonFile(configPath), configPath, &warnings);
    for (const auto& [k, v] : args.options)
      if (core::isRunConfigFlag(k)) core::applyFlag(cfg, k, v);
    for (const auto& w : warnings) std::fprintf(stderr, "shardscope-worker: warning: %s\n", w.c_str());
    return runtime::runRank(cfg, opts);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "shardscope-worker: %s\n", e.what());
    return 2;
  }
}
