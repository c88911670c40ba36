#pragma once
// The link a prediction uses, and how it was obtained (docs/ESTIMATOR.md, "The link"). A run of our
// runtime probes its link before the first step (profiler/runtime/link_probe.h): every collective
// kind at a ladder of sizes, so latency and bandwidth are both determined. The collectives of the
// run's own steps then say how much slower the link is while the training runs beside it (the
// communication threads share the cores, the memory bus or the SMs with compute): the contention
// factor, a least-squares ratio of their times to the probe's curve at the same sizes. At the
// sizes the steps used three times or more, their own mean time stands instead: one factor cannot
// carry a probe's curve to the run's small collectives, whose in-run time over the probe's was 0.9
// at 1 KiB in one ZeRO-3 run and 6.6 in its repeat. A run without a probe (an imported trace, an
// older run) falls back to the alpha-beta fit of its own collectives, whose quality (R², size
// range, kinds seen) is reported with it.
#include <cstdint>
#include <optional>
#include <set>
#include <string>

#include "core/estimator/comm_model.h"
#include "core/util/json.h"

namespace shardscope::core::estimator {

struct LinkCalibration {
  LinkModel link;  // what the simulation uses
  // "probe" (the run's probe × its contention), "run-fit" (the run's collectives), "none".
  std::string source = "none";
  std::optional<LinkFit> probe;  // the probe's fit, when the run has one
  std::optional<LinkFit> run;    // the fit of the run's own collectives, when it has two or more
  // In-run transfer time over the probe's prediction at the same size: all-reduce-like (all-reduce
  // and Gloo's emulated reduce-scatter) and the others; 1 where the run has none of the kind.
  double contentionAllReduce = 1, contentionOther = 1;
  std::int64_t contentionSamples = 0;
  // How much more a kind slows down per unit of the time its rank computes beside it:
  // time = probe · contention · (1 + commInterference · g). Fitted where the run's instances
  // spread in g, else the device class's default (kCpuGlooCommInterference).
  double commInterferenceAllReduce = 0, commInterferenceOther = 0;
  bool commInterferenceFittedAllReduce = false, commInterferenceFittedOther = false;
  // The last rank to start a collective sees it end later than the others: the lateness over the
  // instance's time (last start to the ranks' mean end), Σ lateness / Σ time over the run's
  // matched instances, all-reduce-like and the others (docs/ESTIMATOR.md, "Completion").
  double lastLatenessAllReduce = 0, lastLatenessOther = 0;
  // The same apart by how the ranks waited (WaitKind): [all-reduce-like 0, other 1][ahead 0, on
  // demand 1]; -1 where the run had no instance of the class. Without prefetch a ZeRO-3 run's
  // all-gathers had 0.28-0.33, with it 0.08-0.17 (validation grid val15).
  double lastLatenessByWait[2][2] = {{-1, -1}, {-1, -1}};
  // Sizes whose collectives waited on at once take the loaded probe's time and lateness
  // (profiler/runtime/link_probe.h, runLoadedGatherProbe): all-gathers waited on at once, one rank
  // late in turn, every rank computing right after. On 2 Gloo ranks on 2 cores the last starter then
  // ends up to a scheduler time slice late, the first finisher's compute holding the core its
  // communication thread needs, which the idle probe never shows (docs/ESTIMATOR.md, "The link").
  // How many: the sizes of link.*InRunByWait[1] marked fromLoadedProbe.
  int loadedProbeSizes() const;
  // The sizes the link was measured over (message bytes) and at which group size: a prediction
  // outside them extrapolates.
  std::int64_t minBytes = 0, maxBytes = 0;
  int groupSize = 0;
  // Well conditioned: from a probe, or from a run fit with both kinds at two or more sizes and R² >= 0.8.
  bool wellConditioned = false;
  // The link's relative error on the run's own collectives (probe: after the contention factor,
  // of their total time, |Σ predicted - Σ measured| / Σ measured; run fit: the fit's mean
  // |relative error| per instance).
  double relError = 0;
  std::string note;  // one line for the CLI and reports
};
// {source, name, alpha_us, bus_bw_gbps, all_reduce_alpha_us, all_reduce_bus_bw_gbps,
//  contention_all_reduce, contention_other, contention_samples, comm_interference_*, in_run_sizes,
//  last_lateness_all_reduce, last_lateness_other, in_run_sizes_on_demand, in_run_sizes_ahead,
//  last_lateness_{on_demand,ahead}_{all_reduce,other} (null: none of the class),
//  loaded_probe_sizes, in_run [{kind, waited: any|ahead|on_demand, wire_bytes, time_s, last_lateness,
//  source: steps|loaded_probe, instances}], min_bytes, max_bytes, group_size,
//  latency_by_ring_steps (LinkModel::ringLatency), well_conditioned, rel_error, probe_r2, probe_samples, run_r2, run_samples,
//  note}.
JsonValue toJson(const LinkCalibration& c);

// The link of a stored run as above. Throws core::Error naming the store and run when the run has
// neither a probe nor two collectives with a size.
LinkCalibration calibrateLink(TraceStore& store, RunId runId, const std::set<std::int64_t>* leftOutSteps = nullptr);

// Pure: the same from the samples (probe and loaded may be empty).
LinkCalibration calibrateLink(const std::vector<CollectiveSample>& probe, const std::vector<CollectiveSample>& steps,
                              const std::string& name, double defaultCommInterference = 0,
                              const std::vector<CollectiveSample>& loaded = {});

// Measured default of the communication's slowdown beside compute on CPU ranks with Gloo (2 ranks
// on 2 cores): the median of the values fitted on the validation runs (docs/ESTIMATOR.md).
constexpr double kCpuGlooCommInterference = 0.68;
// On GPUs: none known of ours; the run's own fit or 0.
constexpr double kGpuCommInterference = 0.0;

}  // namespace shardscope::core::estimator
