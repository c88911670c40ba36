#pragma once
// The CLI's command table entries (shared by commands.cpp and run_commands.cpp).
#include <functional>
#include <string>
#include <vector>

#include "app/cli/commands.h"

namespace shardscope::cli {

struct OptionSpec {
  std::string name;
  bool takesValue;
  std::string help;
};

struct Command {
  std::string name;
  std::string usage;
  std::string summary;
  std::vector<OptionSpec> options;
  std::function<int(const Args&, core::CancelToken&)> run;
};

// `run` and `compare`: training runs of the embedded runtime (run_commands.cpp).
std::vector<Command> runCommands();

}  // namespace shardscope::cli
