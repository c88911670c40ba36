#pragma once
// shardscope-cli subcommands. Each returns the process exit code (see ExitCode).
#include <string>
#include <vector>

#include "core/util/progress.h"

namespace shardscope::cli {

// Documented in README.md and `shardscope-cli --help`.
enum ExitCode : int {
  kOk = 0,
  kFailed = 1,      // bad input (trace, config), failed operation
  kUsage = 2,       // unknown command or option, missing argument
  kDatabase = 3,    // the database cannot be opened or written (not SQLite, read-only, newer schema, disk full)
  kCancelled = 130  // interrupted (Ctrl-C); nothing half-written is kept
};

struct Args {
  std::vector<std::string> positional;
  // --name value; a flag (an option without a value) is "true" or "false": --flag, --flag=false
  // and --flag false all parse.
  std::vector<std::pair<std::string, std::string>> options;
  std::vector<std::string> flags;  // names of the options that are flags
  // Whether the option was given; for a flag, whether its last value is true.
  bool has(const std::string& name) const;
  std::string get(const std::string& name, const std::string& def = {}) const;
};

int runCli(int argc, char** argv, core::CancelToken& cancel);

}  // namespace shardscope::cli
