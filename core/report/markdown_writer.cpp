#include "core/report/markdown_writer.h"

#include "core/report/snapshot_report.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

namespace shardscope::core {
namespace {

// A code span: only when the text has no backtick and no < > & (else escaped plain text, so no
// untrusted string ever reaches the output as raw markup, even inside a span). Inside a span Markdown
// processes nothing but GFM's table split on |, which \| prevents.
std::string codeSpan(std::string_view s) {
  if (s.find_first_of("`<>&") != std::string_view::npos || s.empty()) return markdownEscape(s);
  std::string out = "`";
  for (char ch : s) {
    if (ch == '|')
      out += "\\|";
    else if (ch == '\n' || ch == '\r' || ch == '\t')
      out += ' ';
    else if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f)
      continue;
    else
      out += ch;
  }
  return out + "`";
}

std::string cellText(const ReportCell& c) {
  std::string body = c.style == ReportCell::Style::Code ? codeSpan(c.text) : markdownEscape(c.text);
  if (c.strong && !body.empty()) body = "**" + body + "**";
  if (!c.note.empty()) body += " (" + markdownEscape(c.note) + ")";
  return body.empty() ? " " : body;
}

void table(std::string& o, const ReportTable& t) {
  if (t.rows.empty()) {
    if (!t.emptyText.empty()) o += "_" + markdownEscape(t.emptyText) + "_\n\n";
    return;
  }
  if (!t.caption.empty()) o += markdownEscape(t.caption) + "\n\n";
  o += "|";
  for (const auto& h : t.header) o += " " + markdownEscape(h) + " |";
  o += "\n|";
  // Alignment from the first row's cells: numbers right-aligned.
  for (std::size_t i = 0; i < t.header.size(); ++i) {
    const bool num = !t.rows.empty() && i < t.rows[0].size() && t.rows[0][i].style == ReportCell::Style::Number;
    o += num ? " ---: |" : " --- |";
  }
  o += "\n";
  for (const auto& row : t.rows) {
    o += "|";
    for (const auto& c : row) o += " " + cellText(c) + " |";
    o += "\n";
  }
  o += "\n";
}

std::string fence(const std::string& body) {
  std::size_t longest = 0, run = 0;
  for (char ch : body) {
    run = ch == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  return std::string(std::max<std::size_t>(3, longest + 1), '`');
}

ReportCell num(std::string t) { return ReportCell{std::move(t), ReportCell::Style::Number, false, {}, 0}; }
ReportCell txt(std::string t) { return ReportCell{std::move(t), ReportCell::Style::Text, false, {}, 0}; }

// A chart's data as a table: bars as one row per category, lines as one row per x (at most 60 rows).
ReportTable chartTable(const Chart& c) {
  ReportTable t;
  t.caption = c.title + (c.yLabel.empty() ? "" : " (" + c.yLabel + ")");
  if (c.kind != Chart::Kind::Line) {
    t.header.push_back("run");
    for (const auto& s : c.series) t.header.push_back(s.name);
    if (c.kind == Chart::Kind::StackedBars) t.header.push_back("total");
    for (std::size_t k = 0; k < c.categories.size(); ++k) {
      std::vector<ReportCell> row{txt(c.categories[k])};
      double sum = 0;
      bool any = false;
      for (const auto& s : c.series) {
        const bool has = k < s.y.size() && s.y[k];
        row.push_back(num(has ? reportNumber(*s.y[k], 3) : "\u2013"));
        if (has) sum += *s.y[k], any = true;
      }
      if (c.kind == Chart::Kind::StackedBars) row.push_back(num(any ? reportNumber(sum, 3) : "\u2013"));
      t.rows.push_back(std::move(row));
    }
    return t;
  }
  std::set<double> xs;
  for (const auto& s : c.series) xs.insert(s.x.begin(), s.x.end());
  t.header.push_back(c.xLabel.empty() ? "x" : c.xLabel);
  for (const auto& s : c.series) t.header.push_back(s.name);
  std::size_t rows = 0;
  for (double x : xs) {
    if (++rows > 60) {
      t.caption += "; first 60 rows of " + std::to_string(xs.size());
      break;
    }
    std::vector<ReportCell> row{num(reportNumber(x, x == static_cast<double>(static_cast<long long>(x)) ? 0 : 3))};
    for (const auto& s : c.series) {
      std::string v = "\u2013";
      for (std::size_t i = 0; i < s.x.size() && i < s.y.size(); ++i)
        if (s.x[i] == x && s.y[i]) v = reportNumber(*s.y[i], 2);
      row.push_back(num(v));
    }
    t.rows.push_back(std::move(row));
  }
  return t;
}

}  // namespace

std::string markdownEscape(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  for (char ch : s) {
    switch (ch) {
      case '\\':
      case '`':
      case '*':
      case '_':
      case '[':
      case ']':
      case '|':
      case '~':
      case '#':
        out += '\\';
        out += ch;
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '\n':
      case '\r':
      case '\t':
        out += ' ';
        break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) break;
        out += ch;
    }
  }
  return out;
}

std::string writeMarkdown(const Report& rep) {
  std::string o;
  o += "# " + markdownEscape(rep.title) + "\n\n";
  o += "_Generated " + markdownEscape(rep.generatedAt) + " by Shardscope " + markdownEscape(rep.toolVersion) +
       " from the database " + markdownEscape(rep.database) + "._\n\n";
  for (std::size_t i = 0; i < rep.runs.size(); ++i) {
    const auto& r = rep.runs[i];
    o += "- " + markdownEscape(reportRunLabel(r)) + (r.strategy.empty() ? "" : ", " + markdownEscape(r.strategy)) + ", " +
         markdownEscape(r.source) + ", " + markdownEscape(r.status) +
         (rep.runs.size() > 1 && i == rep.baseline ? " (baseline)" : "") + "\n";
  }
  o += "\n";
  auto perRun = [&](const std::string& title, const std::function<void(const ReportRun&)>& body) {
    o += "## " + title + "\n\n";
    for (const auto& r : rep.runs) {
      if (rep.runs.size() > 1) o += "### " + markdownEscape(reportRunLabel(r)) + "\n\n";
      body(r);
    }
  };

  o += std::string("## ") + (rep.runs.size() > 1 ? "Recommendation" : "Summary") + "\n\n";
  std::string para;
  for (const auto& s : rep.recommendation.sentences) para += (para.empty() ? "" : " ") + s;
  o += "> " + markdownEscape(para) + "\n\n**Reasons**\n\n";
  for (const auto& r : rep.recommendation.reasons) o += "- " + markdownEscape(r) + "\n";
  o += "\n";

  o += "## Environment\n\n";
  table(o, environmentTable(rep));
  o += "## Strategy table\n\n";
  table(o, strategyReportTable(rep));
  o += std::string("## ") + (rep.runs.size() > 1 ? "Comparison" : "Figures") + "\n\n";
  table(o, comparisonTable(rep));
  o += "## Charts\n\n";
  if (rep.charts.empty()) o += "_No chart: the runs have no steps, throughput or memory records._\n\n";
  for (const auto& c : rep.charts) {
    if (c.id.rfind("memory-", 0) == 0) {
      // Curves of hundreds of points do not make a table: the peak says what matters.
      o += markdownEscape(c.title) + ": " + (c.marker ? markdownEscape(c.marker->label) : std::string("no peak")) +
           " (the curve is in the HTML and PDF reports).\n\n";
      continue;
    }
    table(o, chartTable(c));
    if (!c.note.empty()) o += "_" + markdownEscape(c.note) + "_\n\n";
  }
  perRun("Collective bottlenecks", [&](const ReportRun& r) { table(o, bottleneckTable(r)); });
  perRun("Arrivals and stragglers", [&](const ReportRun& r) {
    o += markdownEscape(stragglerSummary(r)) + "\n\n";
    if (r.analysis.stragglers.matched > 0) {
      table(o, stragglerTable(r));
      table(o, arrivalGroupTable(r));
    }
  });
  perRun("Memory peaks", [&](const ReportRun& r) { table(o, memoryPeakTable(r)); });
  if (reportHasMemorySnapshots(rep))
    perRun("Memory snapshots", [&](const ReportRun& r) {
      table(o, memorySnapshotTable(r));
      table(o, memorySnapshotTopTable(r));
    });
  perRun("Collectives", [&](const ReportRun& r) { table(o, collectivesTable(r)); });
  auto json = [&](const ReportRun& r) {
    const std::string f = fence(r.deepSpeedJson);
    o += "DeepSpeed-style JSON that reproduces this run:\n\n" + f + "json\n" + r.deepSpeedJson + "\n" + f + "\n\n";
  };
  if (!reportComparesKnobs(rep)) {
    perRun("Configuration", [&](const ReportRun& r) {
      if (r.hasRunConfig) table(o, knobTable(r));
      if (!r.knownConfig.empty()) table(o, knownConfigTable(r));
      if (!r.deepSpeedJson.empty()) json(r);
    });
  } else {
    // Several runs with a configuration: their knobs side by side, then each run's own part.
    o += "## Configuration\n\n";
    table(o, knobComparisonTable(rep));
    for (const auto& r : rep.runs) {
      if (r.knownConfig.empty() && r.deepSpeedJson.empty()) continue;
      o += "### " + markdownEscape(reportRunLabel(r)) + "\n\n";
      if (!r.knownConfig.empty()) table(o, knownConfigTable(r));
      if (!r.deepSpeedJson.empty()) json(r);
    }
  }
  o += "_Definitions: docs/METRICS.md and docs/REPORTS.md of Shardscope._\n";
  return o;
}

}  // namespace shardscope::core
