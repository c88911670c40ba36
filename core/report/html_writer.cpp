#include "core/report/html_writer.h"

#include <algorithm>
#include <functional>
#include <initializer_list>
#include <utility>
#include <vector>

#include "core/report/snapshot_report.h"
#include "core/report/svg_chart.h"

namespace shardscope::core {
namespace {

// The page's only styling. No url(), no @import, no web fonts: nothing is fetched.
const char* kCss = R"CSS(
:root{--fg:#1d1d1f;--muted:#5a5a5a;--line:#d4d4d4;--head:#f2f4f7;--good:#0a6e2c;--bad:#a3001b}
*{box-sizing:border-box}
body{margin:0;color:var(--fg);background:#fff;font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
main{max-width:1180px;margin:0 auto;padding:16px 20px 40px}
h1{font-size:1.55em;margin:.2em 0 .3em}
h2{font-size:1.25em;margin:1.6em 0 .5em;padding-bottom:.2em;border-bottom:2px solid var(--line)}
h3{font-size:1.05em;margin:1.2em 0 .4em}
p.meta{color:var(--muted);margin:.2em 0}
nav ul{list-style:none;padding:0;margin:.6em 0;display:flex;flex-wrap:wrap;gap:.4em 1em}
nav a{color:#0b57b0}
.recommendation{background:#f5f9ff;border-left:4px solid #0072B2;padding:.6em 1em;margin:.6em 0}
.scroll{overflow-x:auto;-webkit-overflow-scrolling:touch;max-width:100%;margin:.4em 0 1em}
table{border-collapse:collapse;font-size:.9em}
th,td{border:1px solid var(--line);padding:4px 8px;text-align:left;vertical-align:top}
th{background:var(--head);font-weight:600}
td{overflow-wrap:anywhere}
td.num{text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}
td code,pre{font-family:ui-monospace,"SFMono-Regular",Menlo,Consolas,monospace;font-size:.92em}
.delta{display:block;font-size:.85em;color:var(--muted)}
.delta.better{color:var(--good)}
.delta.worse{color:var(--bad)}
caption{caption-side:top;text-align:left;color:var(--muted);font-size:.9em;padding:.2em 0}
pre{background:#f6f7f9;border:1px solid var(--line);padding:8px 10px;overflow-x:auto;max-width:100%}
figure{margin:1em 0}
figure svg{display:block;width:100%;height:auto;max-width:900px}
figcaption{color:var(--muted);font-size:.85em}
.empty{color:var(--muted);font-style:italic}
tr.detail td{background:#fafafa;font-size:.92em}
@media (max-width:640px){body{font-size:14px}main{padding:10px}th,td{padding:3px 5px}h1{font-size:1.3em}}
@media print{
  @page{margin:14mm}
  body{font-size:9.5pt;color:#000}
  main{max-width:none;padding:0}
  nav{display:none}
  .scroll{overflow:visible}
  table{width:100%}
  tr,figure,pre{break-inside:avoid;page-break-inside:avoid}
  h2,h3{break-after:avoid;page-break-after:avoid}
  .recommendation{border-left-color:#000;background:none}
}
)CSS";

struct Writer {
  const Report& rep;
  const HtmlOptions& opt;
  std::string o;

  void table(const ReportTable& t) {
    if (t.rows.empty()) {
      if (!t.emptyText.empty()) o += "<p class=\"empty\">" + htmlEscape(t.emptyText) + "</p>\n";
      return;
    }
    const std::size_t mainColumns = t.header.size() - std::min(t.detailColumns, t.header.size());
    if (opt.qtRichText) {
      if (!t.caption.empty()) o += "<p><i>" + htmlEscape(t.caption) + "</i></p>\n";
      o += "<table border=\"1\" cellspacing=\"0\" cellpadding=\"3\" width=\"100%\">\n<tr>";
      // Qt shares a table's width about evenly; widths from the longest text of each column (capped)
      // give long names (kernels, causes) the room.
      std::vector<double> weight(mainColumns, 0);
      for (std::size_t i = 0; i < mainColumns; ++i) {
        std::size_t word = 0, longestWord = 0;  // a header never breaks inside a word
        for (char ch : t.header[i]) {
          word = ch == ' ' ? 0 : word + 1;
          longestWord = std::max(longestWord, word);
        }
        weight[i] = std::max(1.3 * static_cast<double>(longestWord) + 4.0, 8.0);  // headers are bold
        for (const auto& row : t.rows)
          if (i < row.size())
            weight[i] = std::max(weight[i], static_cast<double>(std::min<std::size_t>(row[i].text.size() + 3, 34)));
      }
      double sum = 0;
      for (double w : weight) sum += w;
      for (std::size_t i = 0; i < mainColumns; ++i)
        o += "<th bgcolor=\"#eef1f5\" align=\"left\" width=\"" + std::to_string(static_cast<int>(100.0 * weight[i] / sum)) +
             "%\">" + htmlEscape(t.header[i]) + "</th>";
      o += "</tr>\n";
    } else {
      o += "<div class=\"scroll\"><table>\n";
      if (!t.caption.empty()) o += "<caption>" + htmlEscape(t.caption) + "</caption>\n";
      o += "<thead><tr>";
      for (std::size_t i = 0; i < mainColumns; ++i) o += "<th scope=\"col\">" + htmlEscape(t.header[i]) + "</th>";
      o += "</tr></thead>\n<tbody>\n";
    }
    for (const auto& row : t.rows) {
      o += "<tr>";
      for (std::size_t col = 0; col < row.size() && col < mainColumns; ++col) {
        const ReportCell& c = row[col];
        const bool num = c.style == ReportCell::Style::Number;
        if (opt.qtRichText)
          o += num ? "<td align=\"right\">" : "<td>";
        else
          o += num ? "<td class=\"num\">" : "<td>";
        std::string body = htmlEscape(c.text, true);
        if (c.style == ReportCell::Style::Code) body = "<code>" + body + "</code>";
        if (c.strong) body = "<strong>" + body + "</strong>";
        o += body;
        if (!c.note.empty()) {
          if (opt.qtRichText) {
            const char* color = c.noteTone > 0 ? "#0a6e2c" : c.noteTone < 0 ? "#a3001b" : "#5a5a5a";
            o += "<br><font color=\"" + std::string(color) + "\" size=\"-1\">" + htmlEscape(c.note) + "</font>";
          } else {
            o += "<span class=\"delta" +
                 std::string(c.noteTone > 0   ? " better"
                             : c.noteTone < 0 ? " worse"
                                              : "") +
                 "\">" + htmlEscape(c.note) + "</span>";
          }
        }
        o += "</td>";
      }
      o += "</tr>\n";
      // Long text under its row, across the table.
      std::string detail;
      for (std::size_t col = mainColumns; col < row.size() && col < t.header.size(); ++col)
        if (!row[col].text.empty())
          detail += std::string(detail.empty() ? "" : "<br>") + "<strong>" + htmlEscape(t.header[col]) + ":</strong> " +
                    htmlEscape(row[col].text, true);
      if (!detail.empty())
        o += std::string(opt.qtRichText ? "<tr><td bgcolor=\"#f7f7f7\" colspan=\"" : "<tr class=\"detail\"><td colspan=\"") +
             std::to_string(mainColumns) + "\">" + detail + "</td></tr>\n";
    }
    o += opt.qtRichText ? "</table>\n" : "</tbody></table></div>\n";
  }

  void section(const char* id, const std::string& title) {
    if (opt.qtRichText)
      o += "<h2>" + htmlEscape(title) + "</h2>\n";
    else
      o += std::string("</section>\n<section id=\"") + id + "\">\n<h2>" + htmlEscape(title) + "</h2>\n";
  }

  void perRun(const char* id, const std::string& title, const std::function<void(const ReportRun&)>& body) {
    section(id, title);
    for (const auto& r : rep.runs) {
      if (rep.runs.size() > 1) o += "<h3>" + htmlEscape(reportRunLabel(r)) + "</h3>\n";
      body(r);
    }
  }

  void write() {
    const bool qt = opt.qtRichText;
    o += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
    if (!qt) {
      o += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
      // Defence in depth: even markup that slipped through could load or run nothing.
      o += "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
           "img-src data:\">\n";
      o += "<meta name=\"generator\" content=\"Shardscope " + htmlEscape(rep.toolVersion) + "\">\n";
    }
    o += "<title>" + htmlEscape(rep.title) + "</title>\n";
    if (qt)
      o += "<style>body{font-family:sans-serif;font-size:9pt} h1{font-size:16pt} h2{font-size:13pt;margin-top:14px} "
           "h3{font-size:11pt} pre{font-size:7.5pt} code{font-size:8pt} th{font-weight:bold}</style>\n";
    else
      o += std::string("<style>") + kCss + "</style>\n";
    o += "</head>\n<body>\n<main>\n";
    if (!qt) o += "<section id=\"top\">\n";
    o += "<h1>" + htmlEscape(rep.title) + "</h1>\n";
    o += "<p class=\"meta\">Generated " + htmlEscape(rep.generatedAt) + " by Shardscope " + htmlEscape(rep.toolVersion) +
         " from the database " + htmlEscape(rep.database) + ".</p>\n";
    o += "<p class=\"meta\">" + std::string(rep.runs.size() == 1 ? "Run: " : "Runs: ");
    for (std::size_t i = 0; i < rep.runs.size(); ++i) {
      const auto& r = rep.runs[i];
      o += (i ? "; " : "") + htmlEscape(reportRunLabel(r)) + (r.strategy.empty() ? "" : ", " + htmlEscape(r.strategy)) + ", " +
           htmlEscape(r.source) + ", " + htmlEscape(r.status) + (rep.runs.size() > 1 && i == rep.baseline ? " (baseline)" : "");
    }
    o += "</p>\n";
    if (!qt) {
      o += "<nav><ul>";
      for (const auto& [id, name] :
           std::initializer_list<std::pair<const char*, const char*>>{{"recommendation", "Recommendation"},
                                                                      {"environment", "Environment"},
                                                                      {"strategies", "Strategy table"},
                                                                      {"comparison", "Comparison"},
                                                                      {"charts", "Charts"},
                                                                      {"bottlenecks", "Bottlenecks"},
                                                                      {"stragglers", "Arrivals"},
                                                                      {"memory", "Memory peaks"},
                                                                      {"collectives", "Collectives"},
                                                                      {"configuration", "Configuration"}})
        o += std::string("<li><a href=\"#") + id + "\">" + name + "</a></li>";
      o += "</ul></nav>\n";
    }

    section("recommendation", rep.runs.size() > 1 ? "Recommendation" : "Summary");
    const auto& rec = rep.recommendation;
    std::string para;
    for (const auto& s : rec.sentences) para += (para.empty() ? "" : " ") + s;
    o += qt ? "<p>" + htmlEscape(para) + "</p>\n" : "<div class=\"recommendation\"><p>" + htmlEscape(para) + "</p></div>\n";
    o += "<h3>Reasons</h3>\n<ul>\n";
    for (const auto& r : rec.reasons) o += "<li>" + htmlEscape(r) + "</li>\n";
    o += "</ul>\n";

    section("environment", "Environment");
    table(environmentTable(rep));

    section("strategies", "Strategy table");
    table(strategyReportTable(rep));

    section("comparison", rep.runs.size() > 1 ? "Comparison" : "Figures");
    table(comparisonTable(rep));

    section("charts", "Charts");
    if (rep.charts.empty()) o += "<p class=\"empty\">No chart: the runs have no steps, throughput or memory records.</p>\n";
    for (std::size_t i = 0; i < rep.charts.size(); ++i) {
      const Chart& c = rep.charts[i];
      if (qt) {
        if (opt.chartPlaceholder) o += opt.chartPlaceholder(i) + "\n";
        if (!c.note.empty()) o += "<p><i>" + htmlEscape(c.note) + "</i></p>\n";
        continue;
      }
      o += "<figure id=\"chart-" + htmlEscape(c.id) + "\">" + renderSvg(c);
      if (!c.note.empty()) o += "<figcaption>" + htmlEscape(c.note) + "</figcaption>";
      o += "</figure>\n";
    }

    perRun("bottlenecks", "Collective bottlenecks", [&](const ReportRun& r) { table(bottleneckTable(r)); });
    perRun("stragglers", "Arrivals and stragglers", [&](const ReportRun& r) {
      o += "<p>" + htmlEscape(stragglerSummary(r)) + "</p>\n";
      if (r.analysis.stragglers.matched > 0) {
        table(stragglerTable(r));
        table(arrivalGroupTable(r));
      }
    });
    perRun("memory", "Memory peaks", [&](const ReportRun& r) { table(memoryPeakTable(r)); });
    if (reportHasMemorySnapshots(rep))
      perRun("memory-snapshots", "Memory snapshots", [&](const ReportRun& r) {
        table(memorySnapshotTable(r));
        table(memorySnapshotTopTable(r));
      });
    perRun("collectives", "Collectives", [&](const ReportRun& r) { table(collectivesTable(r)); });
    perRun("configuration", "Configuration", [&](const ReportRun& r) {
      if (r.hasRunConfig) table(knobTable(r));
      if (!r.knownConfig.empty()) table(knownConfigTable(r));
      if (!r.deepSpeedJson.empty()) {
        o += "<p>DeepSpeed-style JSON that reproduces this run (knobs DeepSpeed does not carry are under "
             "<code>\"shardscope\"</code>):</p>\n";
        o += "<pre>" + htmlEscape(r.deepSpeedJson) + "</pre>\n";
      }
    });
    if (!qt) o += "</section>\n";
    o += "<p class=\"meta\">Definitions of every figure: docs/METRICS.md; of this report: docs/REPORTS.md.</p>\n";
    o += "</main>\n</body>\n</html>\n";
  }
};

}  // namespace

std::string htmlEscape(std::string_view s, bool breaks) {
  std::string out;
  out.reserve(s.size() + 16);
  for (char ch : s) {
    if (appendMarkupEntity(out, ch)) continue;
    switch (ch) {
      case '\n':
        out += breaks ? "<br>" : " ";
        break;
      case '\r':
        break;
      case '\t':
        out += ' ';
        break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) break;  // control characters: dropped
        out += ch;
    }
  }
  return out;
}

std::string writeHtml(const Report& report, const HtmlOptions& options) {
  Writer w{report, options, {}};
  w.write();
  return std::move(w.o);
}

}  // namespace shardscope::core
