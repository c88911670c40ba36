#pragma once
// What `estimate` and `simulate` share: the model, parallelism, precision, knob and link options
// and their parsing (estimator_commands.cpp). Usage errors throw std::invalid_argument.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "app/cli/command_table.h"
#include "core/estimator/link_calibration.h"
#include "core/estimator/recommend.h"

namespace shardscope::cli {

namespace estargs {
std::int64_t intOption(const Args& a, const std::string& name, std::int64_t def, std::int64_t min);
double doubleOption(const Args& a, const std::string& name, double def);
std::vector<core::estimator::Strategy> strategiesFrom(const Args& a);
std::string groupDigits(std::int64_t v);
}  // namespace estargs

// --scenario NAME (core/estimator/scenarios.h): the scenario's options added in front of those
// given, so that an explicit flag overrides the scenario's value. An unknown name throws
// std::invalid_argument listing the scenarios. Without --scenario, `a` unchanged.
Args withScenario(const Args& a);
// "Scenarios (estimate --scenario NAME):" and one line each.
std::string scenarioList();

// --model (+ custom shape), --gpus, --gpus-per-node, precision, tokens, checkpointing, offload, the
// ZeRO/DDP knobs, --gpu-memory/--headroom, --tflops/--efficiency, --link/--inter-link or
// --db/--fit-run, --strategy.
// With --fit-run, the run's link calibration (core/estimator/link_calibration.h) is the link, its
// note goes to fitNote and, when asked, the whole calibration to *calibration.
void parseEstimatorInput(const Args& a, core::estimator::RecommendInput& ri, std::string& fitNote,
                         std::optional<core::estimator::LinkCalibration>* calibration = nullptr);
// Their option specs (help), shared by both commands.
std::vector<OptionSpec> estimatorInputOptions();

}  // namespace shardscope::cli
