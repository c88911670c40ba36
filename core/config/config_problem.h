#pragma once
// What a refused run configuration names: the key that is wrong, the file it came from, and what is
// wrong with it, as data. The messages of run_config.h follow three documented forms —
// validate(): "run config: <key> (--flag): <what>", applyFlag(): "--flag: <what>", the JSON readers:
// "<file>: <key>: <what>" — and this is the one place that reads them, so the CLI's JSON-lines
// protocol ({"event":"error","key":..}) and the launch dialog (the field to mark) agree on the key.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/config/run_config.h"

namespace shardscope::core {

struct ConfigProblem {
  std::string key;      // the run-config key ("world_size"), a DeepSpeed key path, or empty when none is named
  std::string file;     // the config file the value came from, or empty
  std::string message;  // what is wrong, without the key and file prefixes
  std::string text;     // the whole message as thrown
};

// Reads the key and file out of an error thrown by run_config.h. `files` are the paths that were
// read (--config, --deepspeed, trace files): a message that starts with one of them names it.
ConfigProblem describeConfigError(std::string_view text, const std::vector<std::string>& files = {});

// validate() as a value: nullopt when the configuration is valid.
std::optional<ConfigProblem> checkRunConfig(const RunConfig& cfg);

}  // namespace shardscope::core
