#pragma once
// The link probe: before the first step, a run times the collectives its strategy will issue
// (all-gather, reduce-scatter and all-reduce on the world group) at a geometric ladder of sizes from
// 4 KiB to the largest message the run can send, so that the simulator predicts other strategies
// from a measured link instead of a fit over the two bucket sizes a DDP run happens to use
// (docs/ESTIMATOR.md, "The link"). The collectives go through the communicator like any other, so
// they are recorded as spans on the group's lane, outside every step, named "<op> link probe <i>";
// core/estimator's probeSamples() reads them back.
#include <cstdint>
#include <utility>
#include <vector>

#include <torch/torch.h>

namespace shardscope::runtime {

class Group;

struct LinkProbePlan {
  std::vector<std::int64_t> bytes;  // message sizes (nccl-tests' S), ascending
  std::vector<int> repeats;         // recorded instances per size and op (same length as bytes)
  int warmups = 1;                  // untimed instances per size (connection set-up, first touch)
};

// Sizes from 4 KiB to maxBytes (at most `points` of them, geometric, each a multiple of
// 4·groupSize bytes so that every rank holds whole fp32 elements), `repeats` each, but fewer (at
// least one) where a size's repeats would send more than `budgetBytes` per op: the probe's cost is
// the large sizes', and this bounds it whatever the model.
LinkProbePlan planLinkProbe(std::int64_t maxBytes, int groupSize, int points = 7, int repeats = 10,
                            std::int64_t budgetBytes = std::int64_t{64} << 20);

// Runs the plan on `g` (every rank of g must call it with the same plan): for each size, all-gather,
// reduce-scatter and all-reduce, the warm-ups labelled "link probe warmup", the rest "link probe"
// (no warm-up past 1 MiB: connections are set up by then). All-gathers move fp32 (a link moves
// bytes; Gloo in LibTorch 1.13 cannot gather bf16); reductions are fp32 unless bf16Reduce (as the
// run's gradients are sent). Returns the wall time it took in seconds.
double runLinkProbe(Group& g, const LinkProbePlan& plan, torch::Device device, bool bf16Reduce);

// The loaded probe: all-gathers waited on at once, as a ZeRO-3 rank without prefetch waits on each
// module's parameters, each followed by that module's product. For each size (fp32 arrays of
// gatheredBytes; every rank contributes 1/n), after a barrier, a chain of `warmups` + `rounds`
// rounds as a forward without prefetch runs them: one rank (in turn) computes `leadS` seconds
// more, so it starts last; every rank all-gathers and, once it has the data, computes the
// module's product [tokens x in] @ [in x out] in `dtype`, then gathers again. The idle probe above
// has every rank idle after a collective; here the first rank to finish computes while the last
// one still completes the exchange, and on 2 Gloo ranks on 2 cores that last rank then ends late,
// by up to a scheduler time slice, for as long as the first one computes (docs/ESTIMATOR.md, "The
// link"). Recorded like the idle probe, named "<op> link probe loaded" ("... loaded warmup"
// untimed), outside every step. Returns the wall time in seconds.
struct LoadedProbeSize {
  std::int64_t gatheredBytes = 0;
  std::int64_t in = 0, out = 0;  // the module's product after the gather
  int rounds = 24;               // timed rounds (the same on every rank)
};
double runLoadedGatherProbe(Group& g, const std::vector<LoadedProbeSize>& sizes, torch::Device device, torch::Dtype dtype,
                            std::int64_t tokens, int warmups = 2, double leadS = 0.0005);
// Timed rounds for a module product of `flops`: 24, fewer for larger products (the products after
// the gathers of one size stay near 4.5 GFLOP: 24 rounds of `small`'s MLP at micro-batch 4 x 128),
// at least 8. The same on every rank, as the collectives must be.
int loadedProbeRounds(double flops);

// The compute probe: the FLOP rate of matrix products [tokens x d] @ [d x d] (a forward product,
// and the input gradient's shape) and [d x tokens] @ [tokens x d] (the weight gradient's: its
// inner dimension is the tokens) for d on a ladder of 64 ... maxDim (doubling), in the run's dtype,
// on this rank's device and threads. A model's blocks are mostly such products; their rate grows
// with d (small products are bound by overheads and memory, not arithmetic), so a compute profile
// carried to another model scales by this measured curve rather than by FLOPs alone
// (docs/ESTIMATOR.md, "Model size"). Each is repeated until ~20 ms have passed (at least twice, or
// once when one product takes longer, at most 8 times).
struct ComputeProbe {
  std::vector<std::pair<std::int64_t, double>> forward;  // (d, GFLOP/s), ascending
  std::vector<std::pair<std::int64_t, double>> weight;
};
ComputeProbe runComputeProbe(torch::Device device, torch::Dtype dtype, std::int64_t tokens, std::int64_t maxDim);

}  // namespace shardscope::runtime
