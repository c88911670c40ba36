#pragma once
// The simulator's parts, private to core/estimator. simulate() (simulator.cpp) runs them in turn:
//  check   the input is refused with a clear message, or completed (compute profile, link);
//  build   the program every rank runs, replayed from the strategy's rules (simulator_schedule.cpp);
//  run     the program on every rank, event by event, one stream per process group
//          (simulator_engine.cpp, which also lays out the groups);
//  collect the step figures, the memory peak and the traffic from what the run recorded.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/estimator/simulator.h"

namespace shardscope::core::estimator::detail {

// Process-group kinds: every rank is in one group of each kind it uses.
enum GroupKind : int { kWorld = 0, kShard = 1, kReplica = 2, kNode = 3, kGroupKinds = 4 };

// The process groups of a run: the size of each kind, whether it spans nodes, how many groups of
// the kind there are, and which ranks each holds (the runtime's layout: shard groups and node
// groups are consecutive ranks, replica groups every G-th).
struct GroupLayout {
  int world = 1;
  int shardGroup = 1;  // G: HSDP's shard group, hpZ's secondary group; the world otherwise
  int size[kGroupKinds] = {1, 1, 1, 1};
  bool inter[kGroupKinds] = {false, false, false, false};
  int instances[kGroupKinds] = {1, 0, 0, 0};  // 0: the kind is not used
  int instanceOf(int kind, int rank) const;
  void membersOf(int kind, int instance, std::vector<int>& out) const;
};
GroupLayout groupLayout(const SimulateInput& in);

struct CompDef {
  int name = 0;
  double durS = 0;
  ComputePhase phase = ComputePhase::Other;
};
struct CollDef {
  int name = 0;
  CollKind kind = CollKind::AllReduce;
  int group = kWorld;
  std::int64_t bytes = 0;
  bool emulated = false;
  int dep = -1;  // a collective (same rank) that must have completed before this one starts
  double durS = 0;
  int step = 0;
  // Waited on at once: its issue is followed by its wait with nothing computed between (WaitKind).
  bool onDemand = false;
  // Its last starter's lateness where the link measured its size (LinkModel::InRunSize), else < 0.
  double lastLateness = -1;
};
struct Op {
  enum Kind : std::uint8_t { Compute, Issue, Wait, Mem, AnnBegin, AnnEnd, StepBegin, StepEnd } kind;
  int a = 0;  // compute, collective, memory category or name index
  std::int64_t b = 0;
};

// The program every rank runs (identical on every rank), with the compute and collectives it
// names and the memory every rank holds throughout.
class Program {
 public:
  std::vector<std::string> names;
  std::vector<CompDef> comps;
  std::vector<CollDef> colls;
  std::vector<Op> ops;
  GroupLayout layout;
  // What every rank holds for the whole run (the estimator's model states; DDP's param.grad copies
  // and ZeRO-3's gathered modules come and go in the program).
  std::int64_t baseline[kMemCats] = {};
  // The group kinds the collectives use, ascending; each one is a comm lane (its index here).
  std::vector<int> kindsUsed;
  int laneOfKind[kGroupKinds] = {-1, -1, -1, -1};
  int step = 0;  // the step being built
  const SimulateInput* in = nullptr;

  int name(const std::string& s);
  void compute(const std::string& n, double durS);
  int issue(const std::string& n, CollKind k, int group, std::int64_t bytes, int dep = -1);
  void wait(int coll) { ops.push_back({Op::Wait, coll, 0}); }
  void mem(MemCat c, std::int64_t delta) {
    if (delta != 0) ops.push_back({Op::Mem, static_cast<int>(c), delta});
  }
  void begin(const std::string& n) { ops.push_back({Op::AnnBegin, name(n), 0}); }
  void end() { ops.push_back({Op::AnnEnd, 0, 0}); }
  // The alpha-beta time of one instance of a collective on its group's link.
  double instanceTime(const CollDef& c) const;
  // The run's own size it matches on that link, if any (LinkModel::inRunSize).
  const LinkModel::InRunSize* inRunSize(const CollDef& c) const;

 private:
  std::map<std::string, int> nameIdx_;
};

// The sizes a program is built from: modules and blocks, bytes per element, activations per block.
struct Shape {
  int L = 0;
  std::vector<ModuleShape> modules;
  std::vector<std::int64_t> blockNumel;  // L+2
  std::int64_t P = 0;
  // Fine-tuning (moduleShapes(EstimateInput)): the trainable elements (P for full fine-tuning, the
  // adapters with LoRA) and, per block, the trainable elements and the frozen base's bytes.
  bool lora = false;
  std::int64_t T = 0;
  std::vector<std::int64_t> blockTrainable, blockFrozenBytes;  // L+2
  const std::vector<std::int64_t>& trainable(const ModuleShape& m) const { return lora ? m.adapters : m.params; }
  std::int64_t w = 4, g = 4;
  // activations kept per block after its forward (without checkpointing: everything the block
  // saves; with: the block input), and one block's full set (recomputed in backward)
  std::vector<std::int64_t> actKept;
  std::int64_t actFullLayer = 0;
  std::int64_t actFlowing = 0;  // checkpointing: gradients flowing through a block in its backward
};
Shape shapeOf(const EstimateInput& in);

// Build: `in.steps` steps of the strategy's program (in checked and completed; `me` its memory
// estimate, the baseline).
Program buildProgram(const SimulateInput& in, const Shape& sh, const MemoryEstimate& me, const CancelToken* cancel);

// What one rank's run leaves for the figures.
struct RankRun {
  std::vector<std::pair<double, double>> steps;  // [start, end) per step
  std::int64_t peak = 0;
  std::int64_t atPeak[kMemCats] = {};  // the categories at the peak
};

// What the run recorded: per rank, and per (operation, rank) at index op · world + rank.
struct RunRecord {
  int world = 0;
  std::vector<RankRun> ranks;
  std::vector<double> collStart, collDone;  // when a collective's stream started it, when it completed
  std::vector<double> compStart, compDur;   // a compute op's start and length (jitter, straggler factor applied)
  std::uint64_t totalOps = 0;               // ops × ranks
  std::size_t at(std::size_t op, int rank) const { return op * static_cast<std::size_t>(world) + static_cast<std::size_t>(rank); }
};

// Run: the program on every rank, event by event. The kept ranks' spans and memory samples go into
// `kept` (keptIndex[rank] >= 0: the rank's trace there). Throws core::Error when cancelled,
// std::logic_error when a rank never gets past a wait.
RunRecord runProgram(const Program& prog, const SimulateInput& in, const std::vector<int>& keptIndex,
                     std::vector<SimRankTrace>& kept, const CancelToken* cancel, const ProgressFn& progress);

}  // namespace shardscope::core::estimator::detail
