#pragma once
// The estimator's options (the spelling of `shardscope-cli estimate` and `simulate`, without "--")
// and the one mapping from them to a RecommendInput: the CLI parses its command line with it, and a
// scenario (scenarios.h) is an options list read by the same function, so `estimate --scenario X`
// and the Estimator page's Scenario X get the same input. Usage errors throw std::invalid_argument
// naming the option.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/estimator/link_calibration.h"
#include "core/estimator/recommend.h"
#include "core/estimator/scenarios.h"
#include "core/util/args.h"

namespace shardscope::core::estimator {

// The options' specs (name, takes a value, help): the CLI's help and the names a scenario may use.
std::vector<ArgSpec> estimatorInputOptions();

// "--name expects an integer, got 'x'" / "--name must be at least MIN"; `def` when absent.
std::int64_t optionInt(const ParsedArgs& a, const std::string& name, std::int64_t def, std::int64_t min);
double optionDouble(const ParsedArgs& a, const std::string& name, double def);
// Every --strategy given (repeated or comma-separated), in order; empty when none.
std::vector<Strategy> optionStrategies(const ParsedArgs& a);

// The scenario's options as parsed arguments (a flag's value "true" is a flag). Throws
// std::invalid_argument for a key that is not one of estimatorInputOptions().
ParsedArgs scenarioArgs(const Scenario& s);
// --scenario NAME: the scenario's options added in front of those given, so that an explicit option
// overrides the scenario's value. An unknown name throws listing the scenarios. Without
// --scenario, `a` unchanged.
ParsedArgs withScenario(const ParsedArgs& a);
// "Scenarios (estimate --scenario NAME ...):" and one line each.
std::string scenarioList();

// The options (after withScenario) applied to `ri`: model (preset or custom shape), GPUs, tokens,
// precision, checkpointing, offload, knobs, LoRA/QLoRA, --gpu (applyDevicePreset) and what
// overrides it (--gpu-memory, --tflops, --link), headroom, efficiency, links, strategies. With
// --fit-run the run's link calibration (link_calibration.h, read from --db) is the link; its note
// goes to *fitNote and, when asked, the whole calibration to *calibration.
void applyEstimatorOptions(const ParsedArgs& a, RecommendInput& ri, std::string* fitNote = nullptr,
                           std::optional<LinkCalibration>* calibration = nullptr);
// A scenario's input: applyEstimatorOptions(scenarioArgs(s)) on a default RecommendInput.
RecommendInput scenarioInput(const Scenario& s);

// Whether a link preset implies Gloo's collectives (reduce-scatter emulated by all-reduce):
// gloo-cpu-local.
bool linkImpliesGloo(std::string_view linkName);

// The first field in which two inputs differ as an estimate sees them ("precision: bf16 vs fp32",
// "lora alpha: 16 vs 32"); empty when they are the same. What a form that shows an input checks
// after filling itself from one.
std::string firstInputDifference(const RecommendInput& a, const RecommendInput& b);

// A size that parseByteSize reads back exactly: "24GiB", "141GB", "123456".
std::string exactByteSize(std::int64_t bytes);

}  // namespace shardscope::core::estimator
