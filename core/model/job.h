#pragma once
// A job: one training launch over one or more nodes (torchrun, srun, or `shardscope-cli run` on each
// node). On a cluster every node writes its own database (nothing safe is shared between nodes:
// SQLite's WAL needs shared memory, which a network file system does not give), so each node's
// database holds one run that is that node's *part* of the job. The part records, in its run's
// metadata (runs.metadata_json "job"), what joins it to the others: the job id, identical on every
// node, and where the node stands. `shardscope-cli merge` (core/merge/job_merge.h) makes the parts one
// run again.
//
// The job id is "<scheduler>/<token>": the scheduler part is Slurm's "slurm:<SLURM_JOB_ID>.<step>",
// torchrun's "torchrun:<TORCHELASTIC_RUN_ID>" (when the user named the rendezvous) or the rendezvous
// endpoint "rdzv:<MASTER_ADDR>:<MASTER_PORT>"; the token is drawn by global rank 0 at start and
// handed to every rank through the rendezvous store, so two launches with the same Slurm id (a
// requeued job, a restarted torchrun) are never taken for one.
#include <optional>
#include <string>
#include <string_view>

#include "core/util/json.h"

namespace shardscope::core {

struct JobPart {
  std::string id;           // "<scheduler>/<token>": equal on every node of the job, unique per launch
  std::string schedulerId;  // "slurm:4242.0", "torchrun:my-run", "rdzv:10.0.0.1:29500"
  std::string launcher;     // "slurm", "torchrun", "shardscope-cli", "env" (variables set by hand)
  int nnodes = 1;
  int nodeRank = 0;
  int firstRank = 0;    // global rank of the node's local rank 0
  int ranksOnNode = 1;  // local world size
  std::string host;     // the node's host name
  std::string master;   // "addr:port" of the rendezvous

  bool multiNode() const { return nnodes > 1; }
  JsonValue toJson() const;
  // The "job" member of a run's metadata JSON; nullopt when the run has none (an import, a run made
  // before jobs were recorded) or it is malformed.
  static std::optional<JobPart> fromRunMetadata(std::string_view metadataJson);
};

}  // namespace shardscope::core
