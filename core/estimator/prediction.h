#pragma once
// A prediction's honesty (docs/ESTIMATOR.md, "Predictions"): what a simulation calibrated on one
// measured run may claim about another configuration. It refuses what the calibration cannot say
// (more ranks per core or per GPU than the calibration ran with: time-slicing and shared devices
// are not in its compute or link), marks what it extrapolates (another world size, model, message
// sizes outside the measured link, a poorly conditioned link), and gives an interval from the
// calibration run's step-to-step spread, the link's fit error and the error this kind of change
// showed in the validation (benchmarks/simulator_validation.sh).
#include <string>
#include <vector>

#include "core/estimator/link_calibration.h"
#include "core/estimator/simulator.h"
#include "core/estimator/simulator_store.h"

namespace shardscope::core::estimator {

// How a host's cores or GPUs are shared: ranks × intra-op threads per core on CPU (1 when each has
// its own), ranks per GPU on GPUs; 0 when unknown.
double hostLoad(const MeasuredProfile::Host& h, int ranksOnHost, bool gpu);

struct PredictionCheck {
  std::vector<std::string> refused;        // why the calibration cannot predict this target
  std::vector<std::string> extrapolation;  // what the prediction extrapolates
  // What changes between calibration and target: "replay", "strategy", "knob", "scale", "model"
  // (the first that applies, in the order scale, model, strategy, knob).
  std::string change = "replay";
  double loadFactor = 1;  // target host load / calibration's (> 1: compute time-sliced more)
  // Where the load differs: the target's ranks per core or GPU against the calibration's, in words.
  std::string sharing;
};

// `target` is the simulation input (its model, strategy and knobs); `link` the calibration used
// (nullptr: a preset, not measured).
PredictionCheck checkPrediction(const MeasuredProfile& mp, const SimulateInput& target, const LinkCalibration* link);

// The relative standard error of a prediction of this change: the validation's RMS error of the class
// (0 for a replay), combined with the calibration's step spread and the link's fit error weighted by
// the simulated communication share.
struct PredictionInterval {
  double lo = 0, hi = 0;  // step time, seconds (about 95 %: ±2 relative standard errors)
  double relSe = 0;
  std::string basis;
};
PredictionInterval predictionInterval(const MeasuredProfile& mp, const SimulationResult& sim, const LinkCalibration* link,
                                      const PredictionCheck& check);

// The validation's RMS relative error of each kind of change (docs/ESTIMATOR.md, "Validation"),
// used for the interval: the largest of the grids measured on this project's CPU machine, or, for a
// calibration run on a GPU, of the grids measured on one H200 shared by Gloo ranks (the only GPU
// validation there is: NCCL on several GPUs is not validated).
double validationRmsError(const std::string& change, bool cpu = true);

// A measured run as a calibration: its compute profile and its link.
struct Calibration {
  MeasuredProfile profile;
  LinkCalibration link;
};
// measuredProfile + calibrateLink; throws core::Error naming the store and run.
Calibration calibrate(TraceStore& store, RunId runId);

// Calibrates `si` (its model, strategy and knobs are the target) by the run: compute per block
// carried to the target's model, interference, the link (intra-node; between nodes only when the
// caller has none measured), Gloo's emulated reduce-scatter, the run's jitter unless keepJitter.
// Refuses with core::Error listing the reasons when the calibration cannot say (checkPrediction),
// unless allowExtrapolation: the compute is then scaled by the host load and that is marked.
PredictionCheck applyCalibration(SimulateInput& si, const Calibration& c, bool keepJitter, bool allowExtrapolation);

// Fills r.prediction: what changed, what is extrapolated, the interval.
void annotatePrediction(SimulationResult& r, const Calibration& c, const PredictionCheck& check);

}  // namespace shardscope::core::estimator
