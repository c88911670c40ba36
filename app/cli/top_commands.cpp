// `shardscope-cli top`: the top kernels and top operators of a run (core/analysis/top_ops.h,
// docs/METRICS.md "Top kernels and operators"), as two text tables, JSON or CSV.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string>

#include "app/cli/command_table.h"
#include "core/analysis/top_ops.h"
#include "core/report/csv_writer.h"
#include "core/storage/trace_store.h"
#include "core/util/error.h"
#include "core/util/json.h"
#include "core/util/units.h"

namespace shardscope::cli {
namespace {

// Per-rank columns in the text tables up to this many ranks; past it, the lightest and heaviest rank.
constexpr std::size_t kMaxRankColumns = 8;
constexpr std::size_t kNameWidth = 56;

std::optional<long long> positiveInt(const std::string& s, bool allowZero) {
  try {
    std::size_t used = 0;
    const long long v = std::stoll(s, &used);
    if (used != s.size() || v < (allowZero ? 0 : 1)) return std::nullopt;
    return v;
  } catch (...) {
    return std::nullopt;
  }
}

std::string ms(core::TimeNs ns) { return core::formatFixed(static_cast<double>(ns) / 1e6, 3); }

std::string pct(double share) { return core::formatFixed(share * 100.0, 1); }

// A UTF-8-safe cut to `width` bytes with "..." (kernel names run to hundreds of characters).
std::string cut(const std::string& s, std::size_t width) {
  if (s.size() <= width) return s;
  std::size_t n = width - 3;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n) + "...";
}

std::string pad(const std::string& s, std::size_t w, bool right) {
  if (s.size() >= w) return s;
  return right ? std::string(w - s.size(), ' ') + s : s + std::string(w - s.size(), ' ');
}

void printTable(std::ostream& os, const char* title, const char* timeWhat, const core::TopOpsTable& t,
                const std::vector<int>& ranks, bool kernels) {
  os << title << ": " << t.distinctNames << " name(s), " << t.count << " instance(s), " << ms(t.timeNs) << " ms " << timeWhat
     << "\n";
  if (t.rows.empty()) {
    os << "  (none)\n\n";
    return;
  }
  const bool rankColumns = ranks.size() > 1 && ranks.size() <= kMaxRankColumns;
  const bool spread = ranks.size() > kMaxRankColumns;
  std::string head = "  " + pad("#", 4, true) + "  " + pad("name", kNameWidth, false) + "  ";
  if (kernels) head += pad("class", 13, false) + "  ";
  head += pad("count", 9, true) + "  " + pad(kernels ? "total ms" : "self ms", 12, true) + "  " + pad("mean ms", 10, true) +
          "  " + pad("max ms", 10, true) + "  " + pad("share %", 7, true);
  if (!kernels) head += "  " + pad("incl. ms", 12, true);
  if (rankColumns)
    for (int r : ranks) head += "  " + pad("rank " + std::to_string(r) + " ms", 12, true);
  if (spread) head += "  " + pad("lightest rank ms", 18, true) + "  " + pad("heaviest rank ms", 18, true);
  os << head << "\n";
  int n = 0;
  for (const auto& r : t.rows) {
    ++n;
    const std::string name = r.other ? "other (" + std::to_string(r.names) + " names)" : r.name;
    std::string line =
        "  " + pad(r.other ? "" : std::to_string(n), 4, true) + "  " + pad(cut(name, kNameWidth), kNameWidth, false) + "  ";
    if (kernels) line += pad(r.other ? "" : std::string(core::toString(r.category)), 13, false) + "  ";
    line += pad(std::to_string(r.count), 9, true) + "  " + pad(ms(r.timeNs), 12, true) + "  " + pad(ms(r.meanNs), 10, true) +
            "  " + pad(ms(r.maxNs), 10, true) + "  " + pad(pct(r.share), 7, true);
    if (!kernels) line += "  " + pad(ms(r.totalNs), 12, true);
    if (rankColumns)
      for (core::TimeNs v : r.perRankNs) line += "  " + pad(ms(v), 12, true);
    if (spread && !r.perRankNs.empty()) {
      const auto [lo, hi] = std::minmax_element(r.perRankNs.begin(), r.perRankNs.end());
      const auto rankOf = [&](auto it) { return ranks[static_cast<std::size_t>(it - r.perRankNs.begin())]; };
      line += "  " + pad(ms(*lo) + " (r" + std::to_string(rankOf(lo)) + ")", 18, true) + "  " +
              pad(ms(*hi) + " (r" + std::to_string(rankOf(hi)) + ")", 18, true);
    }
    os << line << "\n";
  }
  if (ranks.size() > 1) {
    os << "  per rank (" << timeWhat << "):";
    for (std::size_t i = 0; i < ranks.size() && i < t.perRankNs.size(); ++i)
      os << "  rank " << ranks[i] << " " << ms(t.perRankNs[i]) << " ms";
    os << "\n";
  }
  os << "\n";
}

void printCsv(std::ostream& os, const core::TopOps& t) {
  os << "table,position,name,other,names,category,count,time_ns,total_ns,mean_ns,max_ns,share";
  for (int r : t.ranks) os << ",rank_" << r << "_ns";
  os << "\r\n";
  auto rows = [&](const char* table, const core::TopOpsTable& tt, bool kernels) {
    int n = 0;
    for (const auto& r : tt.rows) {
      ++n;
      os << table << "," << n << "," << core::csvText(r.name) << "," << (r.other ? "true" : "false") << "," << r.names << ","
         << (kernels && !r.other ? std::string(core::toString(r.category)) : std::string()) << "," << r.count << "," << r.timeNs
         << "," << r.totalNs << "," << r.meanNs << "," << r.maxNs << "," << core::csvNumber(r.share);
      for (core::TimeNs v : r.perRankNs) os << "," << v;
      os << "\r\n";
    }
  };
  rows("kernel", t.kernels, true);
  rows("operator", t.operators, false);
}

int cmdTop(const Args& a, core::CancelToken& cancel) {
  if (a.has("json") && a.has("csv")) throw std::invalid_argument("--json and --csv exclude each other");
  std::size_t limit = core::kTopOpsDefaultLimit;
  if (a.has("limit")) {
    const auto v = positiveInt(a.get("limit"), true);
    if (!v) throw std::invalid_argument("--limit expects a number of rows (0: every name), got '" + a.get("limit") + "'");
    limit = static_cast<std::size_t>(*v);
  }
  core::TraceStore store(a.get("db", "shardscope.db"), core::Database::Mode::ReadOnly);
  core::RunId runId;
  if (a.has("run")) {
    const auto v = positiveInt(a.get("run"), false);
    if (!v) throw core::Error("--run expects a run id (a positive integer), got '" + a.get("run") + "'");
    runId = core::RunId{*v};
    if (!store.run(runId)) throw core::Error(store.path() + ": no run with id " + std::to_string(*v));
  } else {
    const auto latest = store.latestRunId();
    if (!latest) throw core::Error(store.path() + ": the database has no runs (import a trace first)");
    runId = *latest;
  }
  const core::TopOps t = core::computeTopOps(store, runId, limit, &cancel);
  if (a.has("json")) {
    std::cout << core::toJson(t).dump() << "\n";
    return kOk;
  }
  if (a.has("csv")) {
    printCsv(std::cout, t);
    return kOk;
  }
  const auto run = store.run(runId);
  std::cout << "run " << runId.value() << "  " << (run ? run->name : std::string()) << "  (" << t.ranks.size()
            << " rank(s); kernels: " << t.deviceLanes << ")\n\n";
  printTable(std::cout, "Top kernels", "device time", t.kernels, t.ranks, true);
  printTable(std::cout, "Top operators (cpu_op, by self time)", "operator self time", t.operators, t.ranks, false);
  return kOk;
}

}  // namespace

std::vector<Command> topCommands() {
  return {
      {"top",
       "shardscope-cli top [--db F] [--run ID] [--limit N] [--json | --csv]",
       "Top kernels (device lanes) and top CPU operators (by self time) of a run (default: the latest): "
       "count, time, mean, max, share and time per rank",
       {{"run", true, "run id (default: the latest run)"},
        {"limit", true, "rows per table before the rest is summed into 'other' (default 50; 0: every name)"},
        {"csv", false, "CSV on stdout (RFC 4180): both tables, one row per name"}},
       cmdTop},
  };
}

}  // namespace shardscope::cli
