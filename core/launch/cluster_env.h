#pragma once
// Where a rank stands in its job, read from the environment its launcher gave it, as torchrun, Slurm's
// srun and `shardscope-cli run` set it (docs/CLUSTER.md):
//
//   torchrun (--no-python) and our launcher: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
//     GROUP_RANK (the node), GROUP_WORLD_SIZE (nodes), MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RUN_ID;
//   srun: SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID, SLURM_STEP_NUM_NODES / SLURM_NNODES,
//     SLURM_STEP_TASKS_PER_NODE / SLURM_NTASKS_PER_NODE ("2(x3),1" lists), SLURM_STEP_NODELIST /
//     SLURM_JOB_NODELIST ("gpu[01-04]"), SLURM_JOB_ID, SLURM_STEP_ID.
//
// torchrun's names win where both are set (torchrun started inside an sbatch allocation). Under srun
// without MASTER_ADDR the first host of the step's node list is the rendezvous host, and without
// MASTER_PORT the port is 20000 + SLURM_JOB_ID mod 20000 (the same on every node of the job, and
// different for jobs sharing a node). Pure logic: the LibTorch runtime (profiler/runtime/comm.cpp)
// reads its DistEnv from here, and tests/core checks every rule.
#include <functional>
#include <string>
#include <string_view>

namespace shardscope::core {

struct ClusterEnv {
  int rank = 0;
  int worldSize = 1;
  int localRank = 0;
  int localWorldSize = 1;
  int nodeRank = 0;
  int nnodes = 1;
  std::string masterAddr = "127.0.0.1";
  int masterPort = 29500;
  std::string launcher = "env";  // "slurm", "torchrun", "shardscope-cli", "env"
  std::string schedulerId;       // "slurm:<job>.<step>", "torchrun:<run id>", "" (see job.h)

  // The global rank of this node's local rank 0 (ranks are laid out node by node).
  int firstRankOfNode() const { return rank - localRank; }
};

using EnvLookup = std::function<const char*(const char*)>;

// Throws core::Error naming the variable and what is wrong (not an integer, RANK outside the world,
// a node rank outside the node count, a world that the nodes do not divide).
ClusterEnv clusterEnvFrom(const EnvLookup& env);
ClusterEnv clusterEnvFromProcess();  // std::getenv

// The first host of a Slurm node list: "gpu[01-04,07],cpu3" -> "gpu01", "a,b" -> "a", "n7" -> "n7".
std::string firstSlurmHost(std::string_view nodelist);
// Tasks on node `node` from a Slurm tasks-per-node list: ("2(x3),1", 3) -> 1, ("4", 0) -> 4; 0 when
// the list does not say.
int slurmTasksOnNode(std::string_view list, int node);

// The scheduler part of the job id (job.h): "slurm:<id>[.<step>]", "torchrun:<id>" (not torchrun's
// default "none"), else "rdzv:<addr>:<port>".
std::string schedulerPartOfJobId(const std::string& schedulerId, const std::string& masterAddr, int masterPort);

// A fresh job token (16 hex digits from the system's random source and the clock): global rank 0
// draws it and hands it to every rank through the rendezvous store.
std::string newJobToken();

// The database a node writes (docs/CLUSTER.md): `db` with "{node}" replaced by the node rank; else,
// for a job over more than one node, `db` + ".node<N>"; else `db` itself.
std::string nodeDatabasePath(const std::string& db, int nodeRank, int nnodes);

}  // namespace shardscope::core
