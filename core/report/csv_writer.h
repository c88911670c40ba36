#pragma once
// CSV of a report (RFC 4180: comma separated, CRLF line ends, fields with , " CR LF quoted, quotes
// doubled). Three tables, three files: the comparison (OUT), the collectives of every run
// (collectivesCsvPath(OUT): "out.csv" -> "out.collectives.csv") and the strategy table
// (strategiesCsvPath(OUT): "out.strategies.csv").
//
// Formula injection: a TEXT cell that starts with = + - @ TAB or CR gets a leading single quote, so a
// spreadsheet shows it as text instead of evaluating it. Numeric cells are written by us from numbers
// (shortest round-trip form, '.' decimal point) and are never prefixed, so -12.5 stays a number.
#include <string>
#include <string_view>

#include "core/report/report.h"
#include "core/util/csv.h"  // csvText: the one cell escaper

namespace shardscope::core {

// key, metric, better (lower|higher), one value column per run, one delta-% column per run (empty for
// the baseline's own and where undefined), best_run_id, best_run_name.
std::string comparisonCsv(const Report& report);
// run_id, run_name, operation, process_group, group_size, count, bytes, total_ns, mean_ns, exposed_ns,
// algbw_gbps, busbw_gbps: one row per collective (operation, group) of each run.
std::string collectivesCsv(const Report& report);
std::string collectivesCsvPath(const std::string& comparisonPath);

// run_id, run_name, then every strategy-table column by its key (strategy_table.h; raw numbers, text
// for the text columns, empty where n/a), then not_known: "key: why; key: why" for the n/a cells.
std::string strategiesCsv(const Report& report);
std::string strategiesCsvPath(const std::string& comparisonPath);

std::string csvNumber(double v);  // a numeric cell ("" for NaN/inf)

}  // namespace shardscope::core
