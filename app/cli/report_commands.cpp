// `shardscope-cli report`: one run or a comparison as HTML, PDF, Markdown or CSV (docs/REPORTS.md).
// PDF needs Qt Gui: the CLI links ui/report's shardscope_report_qt when the GUI is built
// (SHARDSCOPE_CLI_HAS_PDF) and creates a QGuiApplication on the offscreen platform only for it.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <stdexcept>

#include "app/cli/command_table.h"
#include "app/cli/terminal_progress.h"
#include "core/storage/open_guard.h"
#include "core/report/csv_writer.h"
#include "core/report/html_writer.h"
#include "core/report/markdown_writer.h"
#include "core/report/report.h"
#include "core/storage/trace_store.h"
#include "core/util/error.h"
#include "core/util/json.h"

#ifdef SHARDSCOPE_CLI_HAS_PDF
#include <QByteArray>
#include <QGuiApplication>
#include <QString>

#include "ui/report/pdf_writer.h"
#endif

namespace shardscope::cli {
namespace {

namespace fs = std::filesystem;
using core::JsonValue;

std::vector<core::RunId> parseRunList(const std::string& list) {
  std::vector<core::RunId> ids;
  for (std::size_t pos = 0; pos <= list.size();) {
    const std::size_t comma = std::min(list.find(',', pos), list.size());
    const std::string item = list.substr(pos, comma - pos);
    if (!item.empty()) {
      std::size_t used = 0;
      long long v = 0;
      try {
        v = std::stoll(item, &used);
      } catch (...) {
        used = 0;
      }
      if (used != item.size() || v <= 0)
        throw std::invalid_argument("--runs expects run ids separated by commas, got '" + item + "'");
      ids.push_back(core::RunId{v});
    }
    pos = comma + 1;
  }
  return ids;
}

// Writes beside the target and renames, so a failed or cancelled report leaves no half file.
void writeFileAtomically(const std::string& path, const std::string& bytes) {
  core::refuseToReplaceDatabase(path, "writing the report there");
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw core::Error(path + ": cannot write (" + std::string(std::strerror(errno)) + ")");
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
      std::error_code ec;
      fs::remove(tmp, ec);
      throw core::Error(path + ": write failed (disk full?)");
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw core::Error(path + ": cannot write (" + ec.message() + ")");
  }
}

int cmdReport(const Args& a, core::CancelToken& cancel) {
  const std::string format = a.get("format", "html");
  const std::string out = a.get("o", a.get("output"));
  if (format != "html" && format != "pdf" && format != "md" && format != "csv")
    throw std::invalid_argument("--format must be html, pdf, md or csv, got '" + format + "'");
  if (out.empty()) throw std::invalid_argument("-o OUT is required");
  const std::string pageSize = a.get("page-size", "a4");
  if (pageSize != "a4" && pageSize != "letter" && pageSize != "A4" && pageSize != "Letter")
    throw std::invalid_argument("--page-size must be a4 or letter, got '" + pageSize + "'");
#ifndef SHARDSCOPE_CLI_HAS_PDF
  if (format == "pdf")
    throw std::invalid_argument(
        "--format pdf is not available: this shardscope-cli was built without Qt Gui (configure with "
        "-DSHARDSCOPE_BUILD_GUI=ON); use html and print it, or md/csv");
#endif
  const std::vector<core::RunId> requested = parseRunList(a.get("runs"));
  if (a.has("runs") && requested.empty()) throw std::invalid_argument("--runs expects at least one run id");
  if (!fs::exists(a.get("db", "shardscope.db")))
    throw core::DatabaseError(a.get("db", "shardscope.db") + ": no such database file");
  core::TraceStore store(a.get("db", "shardscope.db"), core::Database::Mode::ReadOnly);
  std::vector<core::RunId> ids = requested;
  if (ids.empty()) {
    auto latest = store.latestRunId();
    if (!latest) throw core::Error(store.path() + ": the database has no runs (import a trace first)");
    ids.push_back(*latest);
  }
  core::ReportOptions opt;
  opt.title = a.get("title");
  if (a.has("baseline")) {
    const auto b = parseRunList(a.get("baseline"));
    if (b.size() != 1) throw std::invalid_argument("--baseline expects one run id");
    if (std::find(ids.begin(), ids.end(), b[0]) == ids.end())
      throw std::invalid_argument("--baseline " + std::to_string(b[0].value()) + " is not one of --runs");
    opt.baseline = b[0];
  }
  const auto t0 = std::chrono::steady_clock::now();
  TerminalProgress bar;
  const core::Report report = core::buildReport(store, ids, opt, &cancel, bar.callback());
  bar.finish();
  cancel.throwIfCancelled();
  std::vector<std::pair<std::string, std::uint64_t>> files;
  int pages = 0;
  if (format == "html" || format == "md") {
    const std::string text = format == "html" ? core::writeHtml(report) : core::writeMarkdown(report);
    writeFileAtomically(out, text);
    files.emplace_back(out, text.size());
  } else if (format == "csv") {
    const std::string cmp = core::comparisonCsv(report), coll = core::collectivesCsv(report);
    const std::string collPath = core::collectivesCsvPath(out);
    writeFileAtomically(out, cmp);
    writeFileAtomically(collPath, coll);
    const std::string strat = core::strategiesCsv(report), stratPath = core::strategiesCsvPath(out);
    writeFileAtomically(stratPath, strat);
    files.emplace_back(out, cmp.size());
    files.emplace_back(collPath, coll.size());
    files.emplace_back(stratPath, strat.size());
  } else {
#ifdef SHARDSCOPE_CLI_HAS_PDF
    // Headless: the offscreen platform needs no display.
    qputenv("QT_QPA_PLATFORM", QByteArray("offscreen"));
    static int argc = 1;
    static char name[] = "shardscope-cli";
    static char* argv[] = {name, nullptr};
    QGuiApplication app(argc, argv);
    const auto size = *ui::reportPageSizeFromString(pageSize);
    const ui::PdfResult r = ui::writeReportPdf(report, QString::fromStdString(out), size);
    pages = r.pages;
    files.emplace_back(out, static_cast<std::uint64_t>(r.bytes));
#endif
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (a.has("json")) {
    JsonValue j = JsonValue::object();
    j.set("format", JsonValue::string(format));
    JsonValue runs = JsonValue::array();
    for (auto id : ids) runs.push(JsonValue::number(static_cast<std::int64_t>(id.value())));
    j.set("runs", std::move(runs));
    j.set("baseline", JsonValue::number(static_cast<std::int64_t>(ids[report.baseline].value())));
    JsonValue fl = JsonValue::array();
    for (const auto& [path, bytes] : files) {
      JsonValue f = JsonValue::object();
      f.set("path", JsonValue::string(path));
      f.set("bytes", JsonValue::number(static_cast<std::int64_t>(bytes)));
      fl.push(std::move(f));
    }
    j.set("files", std::move(fl));
    if (format == "pdf") j.set("pages", JsonValue::number(static_cast<std::int64_t>(pages)));
    const auto& rec = report.recommendation;
    j.set("recommended_run",
          rec.recommended ? JsonValue::number(static_cast<std::int64_t>((ids[*rec.recommended]).value())) : JsonValue());
    j.set("build_seconds", JsonValue::number(report.buildSeconds));
    j.set("seconds", JsonValue::number(seconds));
    std::cout << j.dump() << "\n";
    return kOk;
  }
  std::cout << "report of run" << (ids.size() > 1 ? "s" : "");
  for (std::size_t i = 0; i < ids.size(); ++i) std::cout << (i ? ", " : " ") << ids[i].value();
  char timing[96];
  std::snprintf(timing, sizeof timing, " (%s) in %.2f s (analysis %.2f s):\n", format.c_str(), seconds, report.buildSeconds);
  std::cout << timing;
  for (const auto& [path, bytes] : files)
    std::cout << "  " << path << "  " << core::reportBytes(static_cast<double>(bytes))
              << (format == "pdf" ? ", " + std::to_string(pages) + " page(s)" : "") << "\n";
  if (report.recommendation.recommended)
    std::cout << "  recommended: run " << (ids[*report.recommendation.recommended]).value() << " ("
              << report.runs[*report.recommendation.recommended].name << ")\n";
  return kOk;
}

}  // namespace

std::vector<Command> reportCommands() {
  return {
      {"report",
       "shardscope-cli report [--db F] [--runs ID,ID,...] [--baseline ID] --format html|pdf|md|csv -o OUT "
       "[--page-size a4|letter] [--title T] [--json]",
       "Write a report for people who will not install anything: one run (default: the latest) or a comparison, "
       "as one self-contained HTML file, a PDF, Markdown, or CSV (OUT, OUT.collectives.csv and OUT.strategies.csv)",
       {{"runs", true, "run ids, comma separated (default: the latest run); several make a comparison"},
        {"baseline", true, "the run the deltas refer to (default: the first of --runs)"},
        {"format", true, "html (default) | pdf | md | csv"},
        {"o", true,
         "output file (csv: the comparison; the collectives go to OUT.collectives.csv, the strategy table to "
         "OUT.strategies.csv)"},
        {"page-size", true, "pdf page size: a4 (default) | letter"},
        {"title", true, "report title (default: from the runs)"}},
       cmdReport},
  };
}

}  // namespace shardscope::cli
