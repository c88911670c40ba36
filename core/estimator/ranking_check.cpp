#include "core/estimator/ranking_check.h"

#include <cmath>

#include "core/util/units.h"

namespace shardscope::core::estimator {

StepParts estimatedParts(const StrategyAssessment& a) { return {a.stepS, a.computeS, a.exposedCommS, a.offloadS}; }

StepParts simulatedParts(const SimStepFigures& f) {
  return {f.stepS, f.computeS, f.exposedCommS, std::max(0.0, f.stepS - f.computeS - f.exposedCommS)};
}

std::string stepPartName(StepPart p) {
  switch (p) {
    case StepPart::Compute:
      return "compute";
    case StepPart::ExposedComm:
      return "exposed communication";
    case StepPart::Other:
      return "offload and other";
  }
  return "compute";
}

namespace {

double partOf(const StepParts& s, StepPart p) {
  switch (p) {
    case StepPart::Compute:
      return s.computeS;
    case StepPart::ExposedComm:
      return s.exposedCommS;
    case StepPart::Other:
      return s.otherS;
  }
  return 0;
}

// -1, 0 (tied within 0.1 %), +1.
int order(double x, double y) {
  const double tol = 1e-3 * std::max(std::fabs(x), std::fabs(y));
  if (std::fabs(x - y) <= tol) return 0;
  return x < y ? -1 : 1;
}

std::string ms(double s) { return formatMs(s * 1e3); }

std::string why(const RankingReversal& r) {
  const std::string a = strategyName(r.simFirst), b = strategyName(r.estFirst);
  const double ea = partOf(r.simFirstEst, r.part), eb = partOf(r.estFirstEst, r.part);
  const double sa = partOf(r.simFirstSim, r.part), sb = partOf(r.estFirstSim, r.part);
  std::string figures = "the estimate puts " + a + "'s at " + ms(ea) + " and " + b + "'s at " + ms(eb) + ", the simulation at " +
                        ms(sa) + " and " + ms(sb);
  switch (r.part) {
    case StepPart::Compute:
      return "compute moved most (" + ms(r.shiftS) +
             "): the estimate's compute is the FLOPs at one rate, the simulation's runs block by block with the "
             "embedding and the optimizer step; " +
             figures;
    case StepPart::ExposedComm:
      return "exposed communication moved most (" + ms(r.shiftS) +
             "): the estimate's overlap model hides a phase's collectives behind that phase's compute but its first "
             "all-gather and last reduction, the simulation runs each on its stream after what it waits on; " +
             figures;
    case StepPart::Other:
      return "offload and other time moved most (" + ms(r.shiftS) +
             "): the estimate's offload is host transfers and the CPU optimizer, the simulation's rest is waits outside "
             "compute and communication; " +
             figures;
  }
  return figures;
}

}  // namespace

std::vector<RankingReversal> rankingReversals(const std::vector<StrategySteps>& steps) {
  std::vector<RankingReversal> out;
  for (std::size_t i = 0; i < steps.size(); ++i)
    for (std::size_t j = i + 1; j < steps.size(); ++j) {
      const int e = order(steps[i].estimated.stepS, steps[j].estimated.stepS);
      const int s = order(steps[i].simulated.stepS, steps[j].simulated.stepS);
      if (e == 0 || s == 0 || e == s) continue;
      const StrategySteps& sf = s < 0 ? steps[i] : steps[j];  // faster in the simulation
      const StrategySteps& ef = s < 0 ? steps[j] : steps[i];  // faster in the estimate
      RankingReversal r;
      r.simFirst = sf.strategy;
      r.estFirst = ef.strategy;
      r.simFirstEst = sf.estimated;
      r.simFirstSim = sf.simulated;
      r.estFirstEst = ef.estimated;
      r.estFirstSim = ef.simulated;
      // How much each part moved the gap in simFirst's favour: (est gap - sim gap) by part.
      double best = -1;
      for (StepPart p : {StepPart::Compute, StepPart::ExposedComm, StepPart::Other}) {
        const double shift =
            (partOf(sf.estimated, p) - partOf(ef.estimated, p)) - (partOf(sf.simulated, p) - partOf(ef.simulated, p));
        if (shift > best) {
          best = shift;
          r.part = p;
        }
      }
      r.shiftS = best;
      r.text = "Simulation ranks " + strategyName(r.simFirst) + " ahead of " + strategyName(r.estFirst) + " (" +
               formatStep(sf.simulated.stepS) + " vs " + formatStep(ef.simulated.stepS) + ") where the estimate ranks " +
               strategyName(r.estFirst) + " first (" + formatStep(ef.estimated.stepS) + " vs " + formatStep(sf.estimated.stepS) +
               "): " + why(r);
      out.push_back(std::move(r));
    }
  return out;
}

}  // namespace shardscope::core::estimator
