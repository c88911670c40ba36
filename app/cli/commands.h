#pragma once
// shardscope-cli subcommands. Each returns the process exit code (see ExitCode).
#include <string>
#include <vector>

#include "core/util/args.h"
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

// A command's parsed arguments (core/util/args.h: the parser the worker and the benchmarks share).
using Args = core::ParsedArgs;

int runCli(int argc, char** argv, core::CancelToken& cancel);

}  // namespace shardscope::cli
