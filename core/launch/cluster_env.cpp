#include "core/launch/cluster_env.h"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <optional>

#include "core/util/error.h"

namespace shardscope::core {
namespace {

std::optional<long long> parseInt(const char* v) {
  if (!v || !*v) return std::nullopt;
  char* endp = nullptr;
  const long long x = std::strtoll(v, &endp, 10);
  if (!endp || *endp != 0) return std::nullopt;
  return x;
}

// The first of the variables that is set; an error when it is set but not an integer.
std::optional<int> intVar(const EnvLookup& env, std::initializer_list<const char*> names, const char** which = nullptr) {
  for (const char* k : names) {
    const char* v = env(k);
    if (!v || !*v) continue;
    const auto x = parseInt(v);
    if (!x) throw Error(std::string("environment variable ") + k + "='" + v + "' is not an integer");
    if (which) *which = k;
    return static_cast<int>(*x);
  }
  return std::nullopt;
}

std::string strVar(const EnvLookup& env, const char* name) {
  const char* v = env(name);
  return v ? std::string(v) : std::string();
}

}  // namespace

std::string firstSlurmHost(std::string_view list) {
  std::string out;
  std::size_t i = 0;
  while (i < list.size() && list[i] != ',' && list[i] != '[') out += list[i++];
  if (i < list.size() && list[i] == '[') {
    ++i;  // the first number (or range start) inside the brackets, its zero padding kept
    while (i < list.size() && list[i] != ',' && list[i] != '-' && list[i] != ']') out += list[i++];
    // A suffix after the bracket ("n[1-2]-ib") belongs to every host.
    const std::size_t close = list.find(']', i);
    if (close != std::string_view::npos)
      for (std::size_t k = close + 1; k < list.size() && list[k] != ','; ++k) out += list[k];
  }
  return out;
}

int slurmTasksOnNode(std::string_view list, int node) {
  // "2(x3),1": 2 tasks on each of 3 nodes, then 1.
  int seen = 0;
  std::size_t i = 0;
  while (i < list.size()) {
    std::size_t j = i;
    while (j < list.size() && list[j] >= '0' && list[j] <= '9') ++j;
    if (j == i) return 0;
    const int tasks = std::atoi(std::string(list.substr(i, j - i)).c_str());
    int repeat = 1;
    if (j < list.size() && list[j] == '(') {
      if (j + 1 >= list.size() || list[j + 1] != 'x') return 0;
      std::size_t k = j + 2;
      std::size_t m = k;
      while (m < list.size() && list[m] >= '0' && list[m] <= '9') ++m;
      if (m == k || m >= list.size() || list[m] != ')') return 0;
      repeat = std::atoi(std::string(list.substr(k, m - k)).c_str());
      j = m + 1;
    }
    if (node < seen + repeat) return tasks;
    seen += repeat;
    if (j < list.size() && list[j] != ',') return 0;
    i = j + 1;
  }
  return 0;
}

ClusterEnv clusterEnvFrom(const EnvLookup& env) {
  ClusterEnv e;
  const bool torchrunNames = env("RANK") && *env("RANK");
  const bool slurm = env("SLURM_PROCID") && *env("SLURM_PROCID");
  if (!strVar(env, "SHARDSCOPE_LAUNCHER").empty())
    e.launcher = strVar(env, "SHARDSCOPE_LAUNCHER");
  else if (torchrunNames && env("TORCHELASTIC_RUN_ID"))
    e.launcher = "torchrun";
  else if (!torchrunNames && slurm)
    e.launcher = "slurm";

  e.rank = intVar(env, {"RANK", "SLURM_PROCID"}).value_or(0);
  e.worldSize = intVar(env, {"WORLD_SIZE", "SLURM_NTASKS"}).value_or(1);
  e.localRank = intVar(env, {"LOCAL_RANK", "SLURM_LOCALID"}).value_or(0);
  e.nodeRank = intVar(env, {"GROUP_RANK", "SLURM_NODEID"}).value_or(0);
  const auto nodes = intVar(env, {"GROUP_WORLD_SIZE", "SLURM_STEP_NUM_NODES", "SLURM_NNODES"});
  auto local = intVar(env, {"LOCAL_WORLD_SIZE"});
  if (!local) {
    for (const char* k : {"SLURM_STEP_TASKS_PER_NODE", "SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE"}) {
      const std::string v = strVar(env, k);
      if (v.empty()) continue;
      const int n = slurmTasksOnNode(v, e.nodeRank);
      if (n <= 0) throw Error(std::string("environment variable ") + k + "='" + v + "' is not a Slurm tasks-per-node list");
      local = n;
      break;
    }
  }
  if (e.worldSize < 1) throw Error("WORLD_SIZE must be at least 1 (got " + std::to_string(e.worldSize) + ")");
  if (e.rank < 0 || e.rank >= e.worldSize)
    throw Error("RANK " + std::to_string(e.rank) + " is outside 0.." + std::to_string(e.worldSize - 1));
  if (nodes && *nodes >= 1)
    e.nnodes = *nodes;
  else if (local && *local >= 1)
    e.nnodes = std::max(1, e.worldSize / *local);
  e.localWorldSize = local.value_or(e.worldSize / std::max(1, e.nnodes));
  if (e.localWorldSize < 1) throw Error("LOCAL_WORLD_SIZE must be at least 1 (got " + std::to_string(e.localWorldSize) + ")");
  if (e.localRank < 0 || e.localRank >= e.localWorldSize)
    throw Error("LOCAL_RANK " + std::to_string(e.localRank) + " is outside 0.." + std::to_string(e.localWorldSize - 1));
  if (e.nodeRank < 0 || e.nodeRank >= e.nnodes)
    throw Error("the node rank (GROUP_RANK / SLURM_NODEID) " + std::to_string(e.nodeRank) + " is outside 0.." +
                std::to_string(e.nnodes - 1));
  if (e.rank - e.localRank < 0)
    throw Error("RANK " + std::to_string(e.rank) + " is below LOCAL_RANK " + std::to_string(e.localRank));

  const std::string addr = strVar(env, "MASTER_ADDR");
  if (!addr.empty()) {
    e.masterAddr = addr;
  } else if (slurm) {
    for (const char* k : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"}) {
      const std::string list = strVar(env, k);
      if (!list.empty()) {
        e.masterAddr = firstSlurmHost(list);
        break;
      }
    }
  }
  if (auto port = intVar(env, {"MASTER_PORT"})) {
    e.masterPort = *port;
  } else if (slurm) {
    if (auto job = parseInt(env("SLURM_JOB_ID"))) e.masterPort = 20000 + static_cast<int>(*job % 20000);
  }
  if (e.masterPort <= 0 || e.masterPort > 65535)
    throw Error("MASTER_PORT " + std::to_string(e.masterPort) + " is not a TCP port");

  const std::string slurmJob = strVar(env, "SLURM_JOB_ID");
  const std::string torchrunId = strVar(env, "TORCHELASTIC_RUN_ID");
  if (!slurmJob.empty()) {
    e.schedulerId = "slurm:" + slurmJob;
    if (const std::string step = strVar(env, "SLURM_STEP_ID"); !step.empty()) e.schedulerId += "." + step;
  } else if (!torchrunId.empty() && torchrunId != "none") {
    e.schedulerId = "torchrun:" + torchrunId;
  }
  return e;
}

ClusterEnv clusterEnvFromProcess() {
  return clusterEnvFrom([](const char* k) { return static_cast<const char*>(std::getenv(k)); });
}

std::string schedulerPartOfJobId(const std::string& schedulerId, const std::string& masterAddr, int masterPort) {
  if (!schedulerId.empty()) return schedulerId;
  return "rdzv:" + masterAddr + ":" + std::to_string(masterPort);
}

std::string newJobToken() {
  std::random_device rd;
  std::uint64_t x = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  x ^= static_cast<std::uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(x));
  return buf;
}

std::string nodeDatabasePath(const std::string& db, int nodeRank, int nnodes) {
  const std::string key = "{node}";
  if (const auto p = db.find(key); p != std::string::npos) {
    std::string out = db;
    out.replace(p, key.size(), std::to_string(nodeRank));
    return out;
  }
  if (nnodes > 1) return db + ".node" + std::to_string(nodeRank);
  return db;
}

}  // namespace shardscope::core
