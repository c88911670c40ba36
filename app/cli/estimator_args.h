#pragma once
// What `estimate` and `simulate` share: the model, parallelism, precision, knob and link options
// and their parsing (estimator_commands.cpp). Usage errors throw std::invalid_argument.
#include <cstdint>
#include <string>
#include <vector>

#include "app/cli/command_table.h"
#include "core/estimator/recommend.h"

namespace shardscope::cli {

namespace estargs {
std::int64_t intOption(const Args& a, const std::string& name, std::int64_t def, std::int64_t min);
double doubleOption(const Args& a, const std::string& name, double def);
std::vector<core::estimator::Strategy> strategiesFrom(const Args& a);
std::string groupDigits(std::int64_t v);
}  // namespace estargs

// --model (+ custom shape), --gpus, --gpus-per-node, precision, tokens, checkpointing, offload, the
// ZeRO/DDP knobs, --gpu-memory/--headroom, --tflops/--efficiency, --link/--inter-link or
// --db/--fit-run, --strategy.
void parseEstimatorInput(const Args& a, core::estimator::RecommendInput& ri, std::string& fitNote);
// Their option specs (help), shared by both commands.
std::vector<OptionSpec> estimatorInputOptions();

}  // namespace shardscope::cli
