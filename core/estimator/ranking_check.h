#pragma once
// The estimate's ranking against the simulation's (docs/ESTIMATOR.md, "Estimate and simulation"):
// where the two order a pair of strategies differently, which component of the step moved the
// gap most — compute, exposed communication, or offload and the rest — from the numbers of both.
#include <string>
#include <vector>

#include "core/estimator/recommend.h"
#include "core/estimator/simulator.h"

namespace shardscope::core::estimator {

// A step split the same way for both models: compute, communication not hidden behind compute,
// and the rest (the estimate's offload; the simulation's step less its compute and exposed
// communication: idle waits, stragglers).
struct StepParts {
  double stepS = 0, computeS = 0, exposedCommS = 0, otherS = 0;
};
StepParts estimatedParts(const StrategyAssessment& a);
StepParts simulatedParts(const SimStepFigures& f);

struct StrategySteps {
  Strategy strategy = Strategy::Ddp;
  StepParts estimated, simulated;
};

enum class StepPart { Compute, ExposedComm, Other };
std::string stepPartName(StepPart p);  // "compute", "exposed communication", "offload and other"

// Two strategies the models order differently: `simFirst` is faster in the simulation, `estFirst`
// in the estimate. The gap sim(simFirst) - sim(estFirst) less est(simFirst) - est(estFirst) is the
// sum over the parts of how much more that part of simFirst moved than estFirst's; `part` is the
// part that moved most (`shiftS`, seconds, positive: in simFirst's favour).
struct RankingReversal {
  Strategy simFirst = Strategy::Ddp, estFirst = Strategy::Ddp;
  StepParts simFirstEst, simFirstSim, estFirstEst, estFirstSim;
  StepPart part = StepPart::Compute;
  double shiftS = 0;
  // "Simulation ranks zero3 ahead of fsdp (1.21 s vs 1.25 s) where the estimate ranks fsdp first
  // (1.10 s vs 1.12 s): exposed communication moved most — ..."
  std::string text;
};
// Every pair (in the order of `steps`) whose strict order differs between the models (steps within
// 0.1 % of each other are taken as tied).
std::vector<RankingReversal> rankingReversals(const std::vector<StrategySteps>& steps);

}  // namespace shardscope::core::estimator
