#pragma once
// The strategy table (docs/METRICS.md "Strategy table"): the table users compare strategies by when
// they fine-tune — the one of the articles this product grew from (FSDP vs FSDP2 vs ZeRO-3 vs DDP
// for LoRA on 4 × A10): one row per run with what it trained (strategy, precision, LoRA rank or
// full fine-tuning, ranks) and its peak memory per GPU, initialisation time, tokens/s (total and per
// GPU), communication and exposed communication share, checkpoint save time, trainable and frozen
// parameters and skipped steps. Every value is a RunFigures field (run_figures.h); a cell is a value
// or n/a with the reason, for runtime, simulated and imported runs alike. The Compare page,
// `compare-runs` (text and JSON) and every report format show this one table.
#include <string>
#include <string_view>
#include <vector>

#include "core/analysis/run_figures.h"
#include "core/util/json.h"

namespace shardscope::core {

enum class StrategyColumn : int {
  Strategy,
  Precision,
  Tuning,  // "full" or "LoRA r=8"
  Ranks,
  PeakMemoryGib,  // max over ranks of the peak allocated (GiB): GPU memory where the run has any, else host
  PeakMemoryOf,   // "GPU" or "host": which memory PeakMemoryGib is
  InitSeconds,
  TokensPerSecond,
  TokensPerSecondPerGpu,
  CommPct,
  ExposedCommPct,
  CheckpointSaveSeconds,
  TrainableParams,
  FrozenParams,
  SkippedSteps,
};

struct StrategyColumnInfo {
  StrategyColumn column = StrategyColumn::Strategy;
  std::string_view key;     // the JSON key ("peak_memory_gib")
  std::string_view header;  // short, for a table header ("peak GiB/GPU"; strategyColumnHeader in a table)
  std::string_view label;   // what it is, with its unit (tooltips, report captions)
  bool text = false;        // a text column (strategy, precision, tuning, memory kind)
  bool optional = false;    // shown only when at least one run knows it (trainable, frozen, skipped)
};
// Every column, in display order.
const std::vector<StrategyColumnInfo>& strategyColumns();
const StrategyColumnInfo& strategyColumn(StrategyColumn c);

struct StrategyCell {
  std::optional<double> value;  // number columns
  std::string text;             // text columns
  std::string why;              // known: how it was obtained (may be ""); n/a: why it cannot be known
  bool known() const { return value.has_value() || !text.empty(); }
};

struct StrategyRow {
  RunId run;
  std::string name;
  std::vector<StrategyCell> cells;  // one per strategyColumns() entry, in that order
  const StrategyCell& at(StrategyColumn c) const { return cells[static_cast<std::size_t>(c)]; }
};

struct StrategyTable {
  std::vector<StrategyRow> rows;
  // The columns surfaces show: every column but an optional one no run knows.
  std::vector<StrategyColumn> columns;
};

// A column's header in this table: its own, except that the per-device columns say "rank" instead of
// "GPU" when no run of the table has GPU memory ("peak GiB/rank", "tokens/s/rank": CPU ranks).
std::string strategyColumnHeader(const StrategyTable& t, StrategyColumn c);

StrategyRow strategyRow(const std::string& name, const RunFigures& figures);
// `names` and `figures` in the same (run) order.
StrategyTable strategyTable(const std::vector<std::string>& names, const std::vector<RunFigures>& figures);

// A cell as every text surface shows it: "n/a" when not known, else the value in its column's unit
// (GiB and seconds with 2 decimals, shares with 1, tokens/s and counts grouped: "1,850").
std::string strategyCellText(StrategyColumn c, const StrategyCell& cell);

// The n/a cells' reasons, one line per run and reason: "run 3 (imported): init s, ckpt save s: an
// imported trace does not record ..." (shown columns only).
std::vector<std::string> strategyTableNotes(const StrategyTable& t);

// An array of one object per run: run_id, name, then every column's key (all columns, shown or not)
// with its value (string for text columns), null when n/a, and "not_known": {key: why} for those.
JsonValue toJson(const StrategyTable& t);

}  // namespace shardscope::core
