#pragma once
// One command-line parser for shardscope-cli, shardscope-worker and the benchmarks: a table of
// options (name, whether it takes a value, help), then `--name VALUE`, `--name=VALUE`, `-n VALUE`,
// flags (`--flag`, `--flag=false`, `--flag false`), repeated options, positionals and `--` (the rest
// is positional). The help lines come from the same table. Errors are ArgError (a usage error) with
// a message that names the option: "unknown option '--x'", "option '--steps' needs a value",
// "--steps: expected an integer, got 'ten'".
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace shardscope::core {

// A usage error: the caller prints it and exits with its usage code (2 everywhere).
class ArgError : public std::invalid_argument {
 public:
  explicit ArgError(const std::string& message) : std::invalid_argument(message) {}
};

struct ArgSpec {
  std::string name;  // "db" for --db, "o" for -o (one letter: one dash)
  bool takesValue = false;
  std::string help;
  std::string valueName = "VALUE";  // in the help line: --db FILE
};

struct ParsedArgs {
  std::vector<std::string> positional;
  // Every option given, in order (a repeated option appears each time); a flag's value is "true" or
  // "false".
  std::vector<std::pair<std::string, std::string>> options;
  std::vector<std::string> flags;  // names of the options that are flags

  // Whether the option was given; for a flag, whether its last value is true.
  bool has(const std::string& name) const;
  // The last value given, or `def`.
  std::string get(const std::string& name, const std::string& def = {}) const;
  // Every value of a repeated option, in order.
  std::vector<std::string> all(const std::string& name) const;
  // The last value as a number; `def` when absent. ArgError "--name: expected an integer, got 'x'"
  // when it does not parse or is below `min`.
  std::int64_t getInt(const std::string& name, std::int64_t def, std::int64_t min = INT64_MIN) const;
  double getDouble(const std::string& name, double def) const;
  // A count with an optional k/M suffix (1000, 5k, 2M) within [min, max]: ArgError "--events:
  // expected a count (1000, 5k, 2M) from 1 to 1024, got 'x'". `list` variants split at commas.
  std::uint64_t getCount(const std::string& name, std::uint64_t def, std::uint64_t min = 0, std::uint64_t max = UINT64_MAX) const;
  std::vector<std::uint64_t> getCounts(const std::string& name, std::vector<std::uint64_t> def, std::uint64_t min = 0,
                                       std::uint64_t max = UINT64_MAX) const;
};

struct ArgParseOptions {
  bool allowPositional = true;
  // Options outside the table that are accepted anyway (the run-config knobs): returns nullopt for
  // unknown names, else whether the option is a flag (it may be given without a value).
  std::function<std::optional<bool>(std::string_view name)> extra;
  // "-h" is "--help" (a flag) when the table has "help".
  bool shortHelp = true;

  // Options only: any positional is an error ("unexpected argument 'x'").
  static ArgParseOptions optionsOnly() {
    ArgParseOptions o;
    o.allowPositional = false;
    return o;
  }
};

// Parses `args` (the words after the program and command name). Throws ArgError.
ParsedArgs parseArgs(const std::vector<std::string>& args, const std::vector<ArgSpec>& specs,
                     const ArgParseOptions& options = {});
ParsedArgs parseArgs(int argc, char** argv, const std::vector<ArgSpec>& specs, const ArgParseOptions& options = {});

// One help line per option ("  --db FILE            database file"), the help column at `column`.
std::string argsHelp(const std::vector<ArgSpec>& specs, std::size_t column = 22);

// The spellings of a flag's value: true/1/on/yes, false/0/off/no.
std::optional<bool> parseFlagValue(std::string_view v);

}  // namespace shardscope::core
