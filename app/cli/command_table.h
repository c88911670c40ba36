#pragma once
// The CLI's command table entries (shared by commands.cpp and run_commands.cpp).
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "app/cli/commands.h"
#include "core/analysis/comparison.h"
#include "core/util/json.h"

namespace shardscope::cli {

// An option of a command: name, whether it takes a value, help (core/util/args.h).
using OptionSpec = core::ArgSpec;

struct Command {
  std::string name;
  std::string usage;
  std::string summary;
  std::vector<OptionSpec> options;
  std::function<int(const Args&, core::CancelToken&)> run;
  bool positional = false;  // takes operands (import's FILE|DIR...); otherwise any is a usage error
};

// A run id as the options spell it: a positive integer; nullopt for anything else.
std::optional<core::RunId> parseRunId(const std::string& s);

// The strategy table (core/analysis/strategy_table.h) as aligned text, one row per run, then the
// reasons of its n/a cells.
void printStrategyTable(std::ostream& os, const core::StrategyTable& t);
// The comparison as a text table (baseline, values, deltas, best run per row marked).
void printComparisonTable(std::ostream& os, const core::Comparison& c);
// The verdict (core::judgeRuns): the winner or "no measurable difference", its reasons, and each
// repeated configuration's mean and run-to-run spread.
void printVerdict(std::ostream& os, const core::Comparison& c);
// The comparison as compare-runs --json prints it (runs, baseline, rows with values and deltas).
core::JsonValue comparisonJson(const core::Comparison& c, const std::vector<core::RunId>& ids, std::size_t baseline);

// compareCollectives as compare-runs --json prints it ("collectives") and as its text shows it.
core::JsonValue collectiveComparisonJson(const core::CollectiveComparison& cc);
void printCollectiveComparison(std::ostream& os, const core::CollectiveComparison& cc, const core::Comparison& c);

// `run` and `compare`: training runs of the embedded runtime (run_commands.cpp).
std::vector<Command> runCommands();

// `report`: HTML, PDF, Markdown and CSV reports of runs (report_commands.cpp).
std::vector<Command> reportCommands();

// `estimate`: pre-run memory, communication and strategy ranking (estimator_commands.cpp).
std::vector<Command> estimatorCommands();

// `simulate`: event-driven step simulation stored as simulated runs (simulator_commands.cpp).
std::vector<Command> simulatorCommands();

// `top`: top kernels and top operators of a run (top_commands.cpp).
std::vector<Command> topCommands();

}  // namespace shardscope::cli
