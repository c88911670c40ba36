#include "core/report/csv_writer.h"

#include <cctype>
#include <algorithm>
#include <cmath>

#include "core/util/json.h"

namespace shardscope::core {
namespace {

constexpr const char* kEol = "\r\n";

void line(std::string& out, const std::vector<std::string>& cells) {
  for (std::size_t i = 0; i < cells.size(); ++i) out += (i ? "," : "") + cells[i];
  out += kEol;
}

std::string integer(std::int64_t v) { return std::to_string(v); }

}  // namespace

std::string csvNumber(double v) { return std::isfinite(v) ? formatDouble(v) : std::string(); }

std::string comparisonCsv(const Report& rep) {
  const Comparison& c = rep.comparison;
  std::string out;
  std::vector<std::string> head = {"key", "metric", "better"};
  for (const auto& r : rep.runs) head.push_back(csvText(reportRunLabel(r)));
  // Deltas against the baseline: percent, or percentage points for shares (keys ending in _pct: a
  // share going 0.1 -> 0.2 % is +0.1 pp, not +100 %), the unit in its own column.
  head.push_back("delta_unit");
  for (const auto& r : rep.runs) head.push_back(csvText("delta " + reportRunLabel(r)));
  head.push_back("best_run_id");
  head.push_back("best_run_name");
  line(out, head);
  for (const auto& row : c.rows) {
    bool any = false;
    for (const auto& v : row.values) any = any || v.has_value();
    if (!any) continue;
    std::vector<std::string> cells = {csvText(row.key), csvText(row.label), row.lowerIsBetter ? "lower" : "higher"};
    for (const auto& v : row.values) cells.push_back(v ? csvNumber(*v) : std::string());
    const bool points =
        !row.deltaPp.empty() && std::any_of(row.deltaPp.begin(), row.deltaPp.end(), [](const auto& d) { return d.has_value(); });
    cells.push_back(points ? "pp" : "%");
    const auto& deltas = points ? row.deltaPp : row.deltaPct;
    for (std::size_t i = 0; i < deltas.size(); ++i)
      cells.push_back(i != c.baseline && deltas[i] ? csvNumber(*deltas[i]) : std::string());
    cells.push_back(row.best ? integer(c.runs[*row.best].value()) : std::string());
    cells.push_back(row.best ? csvText(c.names[*row.best]) : std::string());
    line(out, cells);
  }
  return out;
}

std::string collectivesCsv(const Report& rep) {
  std::string out;
  line(out, {"run_id", "run_name", "operation", "process_group", "group_size", "count", "bytes", "total_ns", "mean_ns",
             "exposed_ns", "algbw_gbps", "busbw_gbps"});
  for (const auto& r : rep.runs)
    for (const auto& c : r.analysis.collectives)
      line(out, {integer(r.id.value()), csvText(r.name), csvText(std::string(toString(c.op))), csvText(c.processGroup),
                 integer(c.groupSize), integer(c.count), c.countWithBytes ? integer(c.bytes) : std::string(), integer(c.totalNs),
                 integer(c.meanNs), integer(c.exposedNs), c.algBwGBps ? csvNumber(*c.algBwGBps) : std::string(),
                 c.busBwGBps ? csvNumber(*c.busBwGBps) : std::string()});
  return out;
}

std::string strategiesCsv(const Report& rep) {
  std::string out;
  std::vector<std::string> head = {"run_id", "run_name"};
  for (const auto& c : strategyColumns()) head.emplace_back(c.key);
  head.emplace_back("not_known");
  line(out, head);
  for (const auto& r : rep.comparison.strategies.rows) {
    std::vector<std::string> cells = {integer(r.run.value()), csvText(r.name)};
    std::string why;
    for (const auto& c : strategyColumns()) {
      const StrategyCell& cell = r.at(c.column);
      if (!cell.known()) {
        cells.emplace_back();
        why += (why.empty() ? "" : "; ") + std::string(c.key) + ": " + cell.why;
      } else {
        cells.push_back(c.text ? csvText(cell.text) : csvNumber(*cell.value));
      }
    }
    cells.push_back(csvText(why));
    line(out, cells);
  }
  return out;
}

namespace {

std::string siblingCsv(const std::string& path, const char* suffix) {
  const std::string ext = ".csv";
  if (path.size() > ext.size()) {
    std::string tail = path.substr(path.size() - ext.size());
    for (auto& ch : tail) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (tail == ext) return path.substr(0, path.size() - ext.size()) + suffix;
  }
  return path + suffix;
}

}  // namespace

std::string collectivesCsvPath(const std::string& path) { return siblingCsv(path, ".collectives.csv"); }
std::string strategiesCsvPath(const std::string& path) { return siblingCsv(path, ".strategies.csv"); }

}  // namespace shardscope::core
