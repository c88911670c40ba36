// shardscope-worker: one rank of a training run. Started N times by `shardscope-cli run` (or by
// torchrun --no-python / srun); the rank, world size and rendezvous come from the environment
// (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT, or Slurm's SLURM_*).
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/config/run_config.h"
#include "core/util/error.h"
#include "core/util/json.h"
#include "profiler/capture/recorder.h"
#include "profiler/runtime/trainer.h"

using namespace shardscope;

namespace {
void usage() {
  std::printf(
      "usage: shardscope-worker --db FILE [--run-id ID] [--run-name NAME] [--config run.json]\n"
      "                         [--deepspeed ds.json] [--dump-params FILE] [--dump-losses FILE]\n"
      "                         [--no-progress] [run configuration flags]\n\n"
      "One rank of a run; the environment gives RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT.\n\n%s",
      core::runConfigHelp().c_str());
}
}  // namespace

int main(int argc, char** argv) {
  const auto start = capture::nowNs();
  runtime::WorkerOptions opts;
  opts.processStartNs = start;
  std::string configPath, dsPath;
  std::vector<std::pair<std::string, std::string>> flags;
  try {
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      auto value = [&]() -> std::string {
        if (auto eq = a.find('='); eq != std::string::npos) {
          std::string v = a.substr(eq + 1);
          a = a.substr(0, eq);
          return v;
        }
        if (i + 1 >= argc) throw core::Error(a + ": missing value");
        return argv[++i];
      };
      const std::string name = a.substr(0, a.find('='));
      if (name == "--help" || name == "-h") {
        usage();
        return 0;
      } else if (name == "--db") {
        opts.dbPath = value();
      } else if (name == "--run-id") {
        opts.runId = std::stoll(value());
      } else if (name == "--run-name") {
        opts.runName = value();
      } else if (name == "--config") {
        configPath = value();
      } else if (name == "--deepspeed") {
        dsPath = value();
      } else if (name == "--dump-params") {
        opts.dumpParamsPath = value();
      } else if (name == "--dump-losses") {
        opts.dumpLossesPath = value();
      } else if (name == "--no-progress") {
        opts.progressLines = false;
      } else if (core::isRunConfigFlag(name)) {
        if (a.find('=') == std::string::npos && core::isRunConfigBoolFlag(name) &&
            (i + 1 >= argc || std::strncmp(argv[i + 1], "--", 2) == 0)) {
          flags.emplace_back(name, "");
        } else {
          const std::string v = value();
          flags.emplace_back(name, v);
        }
      } else {
        throw core::Error("unknown option " + name + " (see --help)");
      }
    }
    if (opts.dbPath.empty()) throw core::Error("--db FILE is required");
    core::RunConfig cfg;
    std::vector<std::string> warnings;
    if (!dsPath.empty()) cfg = core::fromDeepSpeedJson(core::parseJsonFile(dsPath), dsPath, cfg, &warnings);
    if (!configPath.empty()) core::applyRunConfigJson(cfg, core::parseJsonFile(configPath), configPath, &warnings);
    for (const auto& [k, v] : flags) core::applyFlag(cfg, k, v);
    for (const auto& w : warnings) std::fprintf(stderr, "shardscope-worker: warning: %s\n", w.c_str());
    return runtime::runRank(cfg, opts);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "shardscope-worker: %s\n", e.what());
    return 2;
  }
}
