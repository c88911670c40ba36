#pragma once
// Interference of communication with compute (docs/ESTIMATOR.md, "Compute that follows the
// strategy"). A rank's collectives run on communication threads (Gloo) or kernels (NCCL) beside its
// compute; where they overlap, they share cores, memory bandwidth or SMs, and the compute runs
// slower. The same block measured under DDP (whose few all-reduces overlap little of the backward)
// and under ZeRO-3 or FSDP (whose all-gathers and reduce-scatters overlap most of both passes) takes
// different times, so a compute profile carried from one strategy to another must be taken apart:
//
//   duration = base · (1 + k · f)
//
// with f the fraction of the span during which one of the rank's collectives was in flight, base
// the span's time alone (one per block and pass) and k the slowdown per unit of overlap. k is
// fitted from the calibration run's own spans (least squares of relative error over k, each group's
// base solved for in closed form) where their overlaps differ enough to tell it; otherwise the
// measured default of the device class is used (kCpuGlooInterference, fitted on this project's
// validation runs). The simulator puts it back for the target: it runs the program, measures each
// compute op's overlap, stretches it, and runs again until the times settle.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/model/strategy.h"

namespace shardscope::core::estimator {

// A compute span of a measured run: its group (one per block and pass: spans of a group would take
// the same time alone), its overlap fraction with the rank's in-flight collectives, its duration.
struct InterferenceSample {
  int group = 0;
  double overlap = 0;
  double durS = 0;
};

struct InterferenceFit {
  double k = 0;             // slowdown per unit of overlap
  bool identified = false;  // fitted from the run (false: the default was used)
  std::int64_t samples = 0;
  double meanOverlap = 0;  // duration-weighted
  double spread = 0;       // the overlap spread within groups that made it identifiable (duration-weighted SD)
  double r2Gain = 0;       // relative reduction of the residual against k = 0
  std::string note;
};

// Measured on CPU ranks with Gloo (2 ranks on 2 cores), end to end: the k whose predictions come
// closest on six validation grids of one machine (docs/ESTIMATOR.md, "Compute that follows the
// strategy"; 0.5 before, from the sessions-1-9 machine, where it made the base compute of six
// strategies agree best). Turning overlap off makes blocks faster by less than 0.5 x their overlap:
// ZeRO-3's summed spans 0.8 % faster without prefetch (0.5 says 2.5 %), DDP's 1.4 % faster with
// 25 MiB buckets than with 5 MiB (0.5 says 3.2 %). Per run, k is rarely identifiable (the spans'
// overlaps do not spread). Used where a run cannot tell k itself.
constexpr double kCpuGlooInterference = 0.25;
// On GPUs (NCCL kernels beside compute kernels) the slowdown is smaller; without a measurement of
// ours, the run's own fit or 0.
constexpr double kGpuInterference = 0.0;

// Host work per step outside the blocks' compute and the waits (allocating and freeing gathered
// parameters, copying and accumulating gradient shards, hooks, issuing collectives), relative to
// DDP's, on CPU ranks with Gloo: the mean per strategy over the 2-rank small-model runs of three
// validation grids, 6-18 runs each (DDP 2.2 ms, ZeRO-1 2.3, ZeRO-2 3.3, ZeRO-3 6.5, FSDP 10.1,
// SHARD_GRAD_OP 7.9; docs/ESTIMATOR.md, "Compute that follows the strategy"). A prediction for
// another strategy scales the calibration run's overhead by the ratio of the two.
double cpuHostOverheadWeight(Strategy s);
// The share of a CPU optimizer step that follows the whole model's trainable parameters rather than
// the rank's shard: DDP's whole-model step against the sharded strategies' half (ZeRO-1/2, FSDP) on
// the same grids (sharded/DDP 0.62, 0.53 and 0.60: 0.24, 0.05 and 0.20, mean 0.16).
constexpr double kCpuOptimizerModelShare = 0.16;

// A fit that lowers the spans' residual (against k = 0) by less than this has not told k: its
// optimum sits where the spans say nothing, most often at the bound k = 0. On the validation grids
// val22-val24, 45 of the 54 runs whose spans spread enough to fit were such, 22 of them at k = 0
// (DDP with 1 MiB buckets, FSDP with forward prefetch, 4-rank FSDP and ZeRO-3, medium ZeRO-3: k
// 0.00-0.17, residual lowered by 0-10 %; 4-rank DDP: 0.42-0.58, 5-6 %), while eight ZeRO-3 runs
// without persistence and one medium ZeRO-3 run lowered it by 19-45 %. Taken as they were, the k 0
// fits left each span's slowdown in its "compute alone", and DDP with 1 MiB buckets predicted DDP's
// default buckets 2-6 % long
// (docs/ESTIMATOR.md, "Compute that follows the strategy").
constexpr double kMinInterferenceResidualGain = 0.10;

// Fits k in [0, 3]. With fewer than 20 samples, an overlap spread below 0.15 inside the groups, or
// a fit that lowers the residual by less than kMinInterferenceResidualGain, k = fallback and
// identified = false.
InterferenceFit fitInterference(const std::vector<InterferenceSample>& samples, double fallback);

// Each sample's duration alone (durS / (1 + k·overlap)).
double baseDuration(const InterferenceSample& s, double k);

// Sorted, merged [a, b) intervals.
std::vector<std::pair<double, double>> mergeIntervals(std::vector<std::pair<double, double>> iv);
// The fraction of [a, b) covered by `merged` (mergeIntervals' output); 0 for an empty span.
double overlapFraction(double a, double b, const std::vector<std::pair<double, double>>& merged);

}  // namespace shardscope::core::estimator
