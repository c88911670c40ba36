#pragma once
// What `estimate` and `simulate` share: the model, parallelism, precision, knob and link options
// and their parsing — core's (core/estimator/estimator_options.h), which the Estimator page's
// scenarios read too. Usage errors throw std::invalid_argument.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "app/cli/command_table.h"
#include "core/estimator/estimator_options.h"
#include "core/estimator/link_calibration.h"
#include "core/estimator/recommend.h"

namespace shardscope::cli {

namespace estargs {
inline std::int64_t intOption(const Args& a, const std::string& name, std::int64_t def, std::int64_t min) {
  return core::estimator::optionInt(a, name, def, min);
}
inline double doubleOption(const Args& a, const std::string& name, double def) {
  return core::estimator::optionDouble(a, name, def);
}
inline std::vector<core::estimator::Strategy> strategiesFrom(const Args& a) { return core::estimator::optionStrategies(a); }
std::string groupDigits(std::int64_t v);
}  // namespace estargs

// --scenario NAME (core/estimator/scenarios.h): core::estimator::withScenario.
using core::estimator::scenarioList;
using core::estimator::withScenario;

// The options (after --scenario) applied by core::estimator::applyEstimatorOptions.
void parseEstimatorInput(const Args& a, core::estimator::RecommendInput& ri, std::string& fitNote,
                         std::optional<core::estimator::LinkCalibration>* calibration = nullptr);
// Their option specs (help), shared by both commands: core::estimator::estimatorInputOptions.
using core::estimator::estimatorInputOptions;

}  // namespace shardscope::cli
