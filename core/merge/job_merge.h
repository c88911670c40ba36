#pragma once
// `shardscope-cli merge --db OUT IN.db...` (docs/CLUSTER.md): the per-node databases of multi-node
// jobs become one database in which every job is one run with all its ranks.
//
// * The parts of a job are the runs whose metadata records the same job id (core/model/job.h), from
//   any of the inputs (each node's file, or one file several nodes wrote). They must agree on the
//   world size, the strategy and the configuration (bar the node rank), and every node must be
//   there (`partial`: the run is made anyway and failed, naming the missing nodes); a node given
//   twice is taken once when both copies are the same run, refused otherwise.
// * The merged run: node 0's run row; its status combined (a failed node fails the run with that
//   node's reason, then cancelled, then running); every rank with its tracks, events (names
//   re-interned), args, counters, flows, memory records, steps, metrics and snapshot; process groups
//   joined by name; run-level metrics of node 0 first; the import log of every part; the metadata's
//   "job" lists the nodes (source file and run, host, status, clock offset).
// * Clocks: nodes on different hosts have different clocks. Each node's offset is estimated as the
//   straggler analysis does (core/analysis/stragglers.h: the median difference of matched collective
//   ends, which end together on every rank), the median over the node's ranks, relative to node 0;
//   the node's events, counters, flows, memory records and steps are shifted by it and the offsets
//   are stored. Nodes on node 0's host share its clock and are not shifted (ClockAlign::Auto).
// * Every other run of the inputs (single-node runs, imports, simulations) is copied as a run of its
//   own.
// * Idempotent: a job already merged into OUT (same job id) and a run already copied (same identity:
//   metadata "uid", else a fingerprint of its row and counts) are skipped, so merging again, or
//   merging more files into the same OUT, adds only what is new.
// * All or nothing: one transaction; a failure or Cancelled leaves OUT as it was (a new OUT is
//   removed).
#include <cstdint>
#include <string>
#include <vector>

#include "core/model/ids.h"
#include "core/model/types.h"
#include "core/util/progress.h"

namespace shardscope::core {

enum class ClockAlign { Auto, Collectives, None };
const char* toString(ClockAlign a);
ClockAlign clockAlignFromString(const std::string& s);  // throws core::Error

struct MergeOptions {
  ClockAlign align = ClockAlign::Auto;
  bool partial = false;  // merge a job even when some of its nodes are missing (the run is failed)
};

struct MergedNode {
  int nodeRank = 0;
  std::string sourceFile;
  RunId sourceRun;
  std::string host;
  RunStatus status = RunStatus::Completed;
  int ranks = 0;
  TimeNs clockOffsetNs = 0;  // subtracted from the node's times
  std::string offsetMethod;  // "reference" (node 0), "same host", "collectives (N matched)", "none"
};

struct MergedJob {
  std::string jobId;
  RunId run;  // in OUT (the existing run when skipped)
  bool skipped = false;
  int nnodes = 0;
  int ranks = 0;
  RunStatus status = RunStatus::Completed;
  std::string failureReason;
  std::vector<MergedNode> nodes;
  std::vector<int> missingNodes;
  std::int64_t events = 0;
};

struct CopiedRun {
  std::string sourceFile;
  RunId sourceRun;
  RunId run;  // in OUT
  bool skipped = false;
  std::int64_t events = 0;
};

struct MergeResult {
  std::vector<MergedJob> jobs;
  std::vector<CopiedRun> copied;
  std::int64_t events = 0;  // events written
  double seconds = 0;
};

// Throws core::Error naming the file, run or node and what is wrong (nothing written), Cancelled.
MergeResult mergeDatabases(const std::string& out, const std::vector<std::string>& inputs, const MergeOptions& options = {},
                           const CancelToken* cancel = nullptr, const ProgressFn& progress = {});

}  // namespace shardscope::core
