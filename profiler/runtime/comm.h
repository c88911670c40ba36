#pragma once
// The only place that talks to c10d (LibTorch's distributed layer): rendezvous over a TCPStore,
// process groups (Gloo on CPU; NCCL where the LibTorch found has it), and asynchronous collectives.
//
// Each process group has one communication thread that runs its collectives in issue order, the
// way NCCL serialises a group's collectives on one stream: an all-gather issued after a
// reduce-scatter waits for it. Every collective is recorded as a span on the group's lane (from the
// moment the communication thread starts it to its completion) with its op, message bytes, group
// size and the time the compute thread waited for it.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <torch/torch.h>

#include "core/launch/cluster_env.h"
#include "core/model/types.h"

namespace shardscope::capture {
class Recorder;
}

namespace shardscope::runtime {

class GroupImpl;

// Completion of one asynchronous collective.
class CommHandle {
 public:
  CommHandle() = default;
  bool valid() const { return static_cast<bool>(state_); }
  // Blocks until done; rethrows the collective's error. The wait is recorded on the collective.
  void wait();
  bool done() const;

 private:
  friend class GroupImpl;
  struct State;
  std::shared_ptr<State> state_;
};

struct CollectiveInfo {
  std::string label;  // what it is for: "fwd gather layers.3", "grad bucket 2"
  std::int64_t step = -1;
  // A sum (all-reduce, reduce-scatter) of an fp32 tensor sent in bf16 (--reduce-dtype bf16): cast,
  // reduce, cast back into the tensor on the communication thread. Half the bytes on the wire.
  bool bf16Reduce = false;
};

class Group {
 public:
  virtual ~Group() = default;
  virtual const std::string& name() const = 0;
  virtual int rank() const = 0;  // rank inside the group
  virtual int size() const = 0;
  virtual const std::vector<int>& globalRanks() const = 0;
  // Sum in place.
  virtual CommHandle allReduce(torch::Tensor t, const CollectiveInfo& info) = 0;
  // out (size·n elements) = concatenation of every rank's `in` (n elements), in group-rank order.
  virtual CommHandle allGather(torch::Tensor out, torch::Tensor in, const CollectiveInfo& info) = 0;
  // The same into size() separate tensors of n elements (views into a larger buffer, e.g. each
  // rank's piece of a flat parameter buffer); `in` may be outs[rank()] itself (in place), so a
  // gather into the parameters allocates nothing of ours that could outlive the call.
  virtual CommHandle allGatherInto(std::vector<torch::Tensor> outs, torch::Tensor in, const CollectiveInfo& info) = 0;
  // out (n elements) = sum over ranks of chunk rank() of `in` (size·n elements). `in` is clobbered.
  // Gloo in LibTorch 1.13 has no reduce-scatter: it runs as an all-reduce of `in` (same data, twice
  // the wire volume of a ring reduce-scatter); the span says so in its args.
  virtual CommHandle reduceScatter(torch::Tensor out, torch::Tensor in, const CollectiveInfo& info) = 0;
  virtual CommHandle broadcast(torch::Tensor t, int rootGroupRank, const CollectiveInfo& info) = 0;
  virtual void barrier() = 0;
};

// Where this rank stands in its job: core's reading of the environment torchrun, srun and our
// launcher set (core/launch/cluster_env.h has the rules), the one definition of these fields.
using DistEnv = core::ClusterEnv;

class Communicator {
 public:
  // Rendezvous: rank 0 hosts the TCPStore. Throws core::Error naming what failed.
  Communicator(const DistEnv& env, const std::string& backend, torch::Device device, double timeoutS,
               capture::Recorder* recorder);
  // Creates the world process group (and records its lane when a recorder is given).
  void start(capture::Recorder* recorder);
  ~Communicator();
  const DistEnv& env() const { return env_; }
  const std::string& backend() const { return backend_; }
  Group& world();
  // A subgroup; every rank of the world must call this with the same arguments in the same order
  // (the c10d rule). Returns nullptr on ranks that are not members.
  Group* newGroup(const std::string& name, const std::vector<int>& ranks);
  // Bytes moved so far by this rank's collectives, per op name ("all_gather", ...): message bytes (the
  // nccl-tests S) and wire bytes per rank under the ring model of what was really sent (a Gloo
  // reduce-scatter is an all-reduce: 2(n-1)/n·S instead of (n-1)/n·S).
  struct Volume {
    std::map<std::string, double> messageBytes;
    std::map<std::string, double> wireBytes;
    std::map<std::string, std::int64_t> count;
  };
  Volume volume() const;
  // Store helpers for small control messages (run id, failure notes).
  void storeSet(const std::string& key, const std::string& value);
  std::string storeGet(const std::string& key);
  static bool backendAvailable(const std::string& backend);
  // The compute thread's lane: waits for collectives are recorded there.
  void setComputeLane(int lane) { computeLane = lane; }
  int computeLane = -1;

 private:
  std::unique_ptr<GroupImpl> makeGroup(const std::string& name, const std::vector<int>& ranks, int groupRank);
  DistEnv env_;
  std::string backend_;
  torch::Device device_;
  double timeoutS_;
  capture::Recorder* recorder_;
  struct StoreHolder;
  std::unique_ptr<StoreHolder> store_;
  std::unique_ptr<GroupImpl> world_;
  std::vector<std::unique_ptr<GroupImpl>> groups_;
  int laneCounter_ = 0;
};

}  // namespace shardscope::runtime
