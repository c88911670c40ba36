#pragma once
// One rank of a run: rendezvous, model and strategy set-up, the training loop with capture, metrics,
// checkpointing. shardscope-worker's main() is a thin wrapper around runRank().
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "core/config/run_config.h"
#include "core/model/types.h"

namespace shardscope::runtime {

struct WorkerOptions {
  std::string dbPath;  // the trace store (created if missing); see sameDatabase
  core::RunId runId;   // 0: each node's local rank 0 creates the node's run and shares its id through the store
  // Without runId, a job over several nodes writes one database per node (core::nodeDatabasePath:
  // "{node}" in dbPath, else dbPath.node<N>); true: every node writes dbPath itself.
  bool sameDatabase = false;
  std::string runName;
  std::string dumpParamsPath;  // rank 0 writes every full parameter (float32, model order) here
  std::string dumpLossesPath;  // each rank writes its per-step losses (one per line) here (+ ".rank<R>" when world > 1)
  bool progressLines = true;   // "@ss {...}" JSON lines on stdout for the launcher
  std::int64_t processStartNs = 0;
};

// Returns the process exit code (0 ok). Errors are printed to stderr naming the rank and reason.
int runRank(const core::RunConfig& cfg, const WorkerOptions& opts);

// Synthetic token batch of `rows` rows starting at global row `firstRow` of step `step`: each row is
// generated from (seed, step, global row) alone, so a rank's rows equal the same rows of a
// single-process run with the concatenated global batch.
struct TokenSource {
  std::uint64_t seed = 0;
  std::int64_t vocab = 256;
  std::int64_t seq = 128;
  std::string text;  // when not empty: bytes of a UTF-8 text file
  void fill(std::int64_t step, std::int64_t firstRow, std::int64_t rows, std::vector<std::int64_t>& tokens,
            std::vector<std::int64_t>& targets) const;
};

}  // namespace shardscope::runtime
