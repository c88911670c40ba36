#include "core/report/html_writer.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <initializer_list>
#include <utility>
#include <vector>

#include "core/report/snapshot_report.h"
#include "core/report/svg_chart.h"
#include "core/util/error.h"
#include "core/util/json.h"

namespace shardscope::core {
namespace {

// The page's only styling. No url(), no @import, no web fonts: nothing is fetched.
const char* kCss = R"CSS(
:root{--fg:#1d1d1f;--muted:#5a5a5a;--line:#d4d4d4;--head:#f2f4f7;--good:#1a7f37;--bad:#c62828}
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
table.wide{font-size:.82em}
th,td{border:1px solid var(--line);padding:4px 8px;text-align:left;vertical-align:top}
th{background:var(--head);font-weight:600}
th,td{overflow-wrap:normal;word-break:normal;hyphens:none}
td code{overflow-wrap:break-word}
td.num{text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}
td code,pre{font-family:ui-monospace,"SFMono-Regular",Menlo,Consolas,monospace;font-size:.92em}
.delta{display:block;font-size:.85em;color:var(--muted)}
.delta.better{color:var(--good)}
.delta.worse{color:var(--bad)}
.tcaption{color:var(--muted);font-size:.85em;margin:.6em 0 .1em}
pre{background:#f6f7f9;border:1px solid var(--line);padding:8px 10px;overflow-x:auto;max-width:100%}
figure{margin:1em 0}
figure svg{display:block;width:100%;height:auto;max-width:900px}
figcaption{color:var(--muted);font-size:.85em}
.empty{color:var(--muted);font-style:italic}
tr.detail td{background:#fafafa;font-size:.92em;overflow-wrap:break-word}
@media (max-width:640px){body{font-size:14px}main{padding:10px}th,td{padding:3px 5px}h1{font-size:1.3em}}
@media print{
  @page{margin:14mm}
  body{font-size:9pt;color:#000}
  main{max-width:none;padding:0}
  nav{display:none}
  h2{margin-top:1.1em}
  .scroll{overflow:visible;max-width:100%}
  table{width:100%;font-size:8pt}
  table.wide{font-size:6.5pt}
  th,td{padding:2px 3px}
  td.num{white-space:normal}
  td.num,th{overflow-wrap:normal}
  td code{overflow-wrap:anywhere}
  pre{white-space:pre-wrap;overflow:visible;font-size:7pt}
  figure svg{max-width:100%}
  tr,figure,pre{break-inside:avoid;page-break-inside:avoid}
  thead{display:table-header-group}
  .tcaption{font-size:7.5pt}
  h2,h3,.tcaption{break-after:avoid;page-break-after:avoid}
  .recommendation{border-left-color:#000;background:none}
}
)CSS";

// The Qt rich-text flavour's styling (QTextDocument's CSS subset; sizes in points, for print).
const char* kQtCss =
    "body{font-size:8pt} h1{font-size:14pt;margin-top:0px;margin-bottom:3px} "
    "h2{font-size:11pt;margin-top:10px;margin-bottom:3px} h3{font-size:9pt;margin-top:6px;margin-bottom:2px} "
    "p{margin-top:1px;margin-bottom:3px} p.meta{color:#5a5a5a} p.caption{font-size:7pt;color:#444444;font-style:italic} "
    "p.figcaption{font-size:6.5pt;color:#5a5a5a;font-style:italic} p.empty{font-style:italic} "
    "ul{margin-top:1px;margin-bottom:3px} li{font-size:7.5pt} "
    "th{font-weight:bold;font-size:7pt} td{font-size:7pt} td.group{font-size:7pt} td.detail{font-size:6.5pt} "
    "td.json{font-size:6pt} span.note{font-size:6pt} code{font-size:6.5pt} pre{font-size:6pt}";

// The Qt rich-text flavour keeps a number and its unit on one line ("459.13 ms", "+12.3 %"): the
// space after a digit before a unit becomes a no-break space.
std::string keepUnits(const std::string& s) {
  static const char* kUnits[] = {"%", "ms", "s", "\u00B5s", "ns", "B", "KiB", "MiB", "GiB", "TiB", "GB/s", "pp"};
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == ' ' && i > 0 && std::isdigit(static_cast<unsigned char>(s[i - 1]))) {
      bool unit = false;
      for (const char* u : kUnits) {
        const std::string_view uv(u);
        if (s.compare(i + 1, uv.size(), uv) != 0) continue;
        const std::size_t after = i + 1 + uv.size();
        unit = after == s.size() || !std::isalnum(static_cast<unsigned char>(s[after]));
        if (unit) break;
      }
      if (unit) {
        out += "\u00A0";
        continue;
      }
    }
    out += s[i];
  }
  return out;
}

// Wide tables of few rows read better turned a quarter (Qt flavour: a page is narrow and cannot
// scroll): a row per column, a column per row, the first column's cells as the new header.
ReportTable transposed(const ReportTable& t) {
  ReportTable out;
  out.caption = t.caption;
  out.emptyText = t.emptyText;
  if (t.header.empty()) return out;
  out.header.emplace_back();
  for (const auto& row : t.rows) out.header.push_back(row.empty() ? std::string() : row[0].text);
  for (std::size_t col = 1; col < t.header.size(); ++col) {
    std::vector<ReportCell> r{ReportCell{t.header[col], ReportCell::Style::Text, false, {}, 0}};
    for (const auto& row : t.rows) r.push_back(col < row.size() ? row[col] : ReportCell{});
    out.rows.push_back(std::move(r));
  }
  return out;
}

struct Writer {
  const Report& rep;
  const HtmlOptions& opt;
  std::string o;

  // Qt flavour: a paragraph that belongs with the block after it (a table's caption): the PDF writer
  // never leaves it at the bottom of a page (headings it knows by their level).
  static constexpr const char* kKeepWithNext = " style=\"-qt-user-state:1\"";

  // `byRun`: Qt flavour, the first column names the run (a table of every run's rows, mergedByRun):
  // a line with the run's name over its rows instead of a column.
  void table(const ReportTable& input, bool byRun = false) {
    const bool qt = opt.qtRichText;
    if (input.rows.empty()) {
      if (!input.emptyText.empty()) o += "<p class=\"empty\">" + htmlEscape(input.emptyText) + "</p>\n";
      return;
    }
    const bool turn = qt && !byRun && input.detailColumns == 0 && input.header.size() > 10 && input.rows.size() <= 6;
    ReportTable turned;
    if (turn) turned = transposed(input);
    const ReportTable& t = turn ? turned : input;
    const std::size_t mainColumns = t.header.size() - std::min(t.detailColumns, t.header.size());
    if (!qt) {
      // The caption above the box, not in the table: a wide table scrolls sideways in its box, and
      // its caption would be as wide as it.
      if (!t.caption.empty()) o += "<p class=\"tcaption\">" + htmlEscape(t.caption) + "</p>\n";
      o += std::string("<div class=\"scroll\"><table") + (mainColumns > 8 ? " class=\"wide\"" : "") + ">\n";
      o += "<thead><tr>";
      for (std::size_t i = 0; i < mainColumns; ++i) o += "<th scope=\"col\">" + htmlEscape(t.header[i]) + "</th>";
      o += "</tr></thead>\n<tbody>\n";
      rows(t, 0, t.rows.size(), mainColumns, false);
      o += "</tbody></table></div>\n";
      return;
    }
    if (!t.caption.empty()) o += std::string("<p class=\"caption\"") + kKeepWithNext + ">" + htmlEscape(t.caption) + "</p>\n";
    // A long table of a few narrow columns (the knobs) in two halves side by side; a "group"
    // column becomes a line over the group's rows.
    const bool grouped = byRun || (!t.header.empty() && t.header[0] == "group" && mainColumns <= 6);
    const bool halves = t.detailColumns == 0 && mainColumns <= 6 && t.rows.size() >= 24;
    if (!halves) {
      qtTable(t, 0, t.rows.size(), mainColumns, grouped);
      return;
    }
    const std::size_t middle = (t.rows.size() + 1) / 2;
    o += "<table width=\"100%\" border=\"0\" cellspacing=\"0\" cellpadding=\"0\"><tr><td width=\"49.5%\" valign=\"top\">";
    qtTable(t, 0, middle, mainColumns, grouped);
    o += "</td><td width=\"1%\"></td><td width=\"49.5%\" valign=\"top\">";
    qtTable(t, middle, t.rows.size(), mainColumns, grouped);
    o += "</td></tr></table>\n";
  }

  // Qt flavour: rows [from, to) of `t` as one table with its header (repeated on every page).
  void qtTable(const ReportTable& t, std::size_t from, std::size_t to, std::size_t mainColumns, bool grouped) {
    // No column widths: the PDF writer shares the width out by the content, with text wrapping
    // between words only, and makes a table's text smaller until its words fit the page.
    o +=
        "<table border=\"1\" cellspacing=\"0\" cellpadding=\"1\" width=\"100%\" style=\"border-collapse:collapse\">\n<thead><tr>";
    for (std::size_t i = grouped ? 1 : 0; i < mainColumns; ++i)
      o += "<th bgcolor=\"#eef1f5\" align=\"left\">" + htmlEscape(t.header[i]) + "</th>";
    o += "</tr></thead>\n";
    rows(t, from, to, mainColumns, grouped);
    o += "</table>\n";
  }

  void rows(const ReportTable& t, std::size_t from, std::size_t to, std::size_t mainColumns, bool grouped) {
    const bool qt = opt.qtRichText;
    std::vector<std::string> lastDetail(t.header.size());
    std::string group;
    for (std::size_t r = from; r < to; ++r) {
      const auto& row = t.rows[r];
      if (grouped && !row.empty() && (r == from || row[0].text != group)) {
        group = row[0].text;
        std::fill(lastDetail.begin(), lastDetail.end(), std::string());
        o += "<tr><td class=\"group\" bgcolor=\"#f4f5f7\" colspan=\"" + std::to_string(mainColumns - 1) + "\"><b>" +
             htmlEscape(group) + "</b></td></tr>\n";
      }
      o += "<tr>";
      for (std::size_t col = grouped ? 1 : 0; col < row.size() && col < mainColumns; ++col) {
        const ReportCell& c = row[col];
        const bool num = c.style == ReportCell::Style::Number;
        if (qt)
          o += num ? "<td align=\"right\">" : "<td>";
        else
          o += num ? "<td class=\"num\">" : "<td>";
        std::string body = htmlEscape(qt ? keepUnits(c.text) : c.text, true);
        if (c.style == ReportCell::Style::Code) body = "<code>" + body + "</code>";
        if (c.strong) body = "<strong>" + body + "</strong>";
        o += body;
        if (!c.note.empty()) {
          if (qt) {
            // On the value's line when the column has the room (a space: it may wrap there).
            const char* color = c.noteTone > 0 ? "#0a6e2c" : c.noteTone < 0 ? "#a3001b" : "#5a5a5a";
            o += " <span class=\"note\" style=\"color:" + std::string(color) + "\">" + htmlEscape(keepUnits(c.note)) + "</span>";
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
      // Long text under its row, across the table, in one paragraph (each part led by its bold
      // name); a long text the row above already showed in full is not repeated (the same
      // suggestion for ten buckets).
      std::string detail;
      for (std::size_t col = mainColumns; col < row.size() && col < t.header.size(); ++col) {
        const ReportCell& c = row[col];
        if (c.text.empty()) continue;
        const bool same = c.text.size() > 60 && c.text == lastDetail[col];
        lastDetail[col] = c.text;
        std::string body = same ? std::string("<i>as above</i>") : htmlEscape(qt ? keepUnits(c.text) : c.text, true);
        if (!same && c.style == ReportCell::Style::Code) body = "<code>" + body + "</code>";
        detail += std::string(detail.empty() ? ""
                              : qt           ? " \u00B7 "
                                             : "<br>") +
                  "<strong>" + htmlEscape(t.header[col]) + ":</strong> " + body;
      }
      if (!detail.empty())
        o += std::string(qt ? "<tr><td class=\"detail\" bgcolor=\"#f7f7f7\" colspan=\"" : "<tr class=\"detail\"><td colspan=\"") +
             std::to_string(mainColumns - (grouped ? 1 : 0)) + "\">" + detail + "</td></tr>\n";
    }
  }

  // One table of every run's rows, the run's name first (Qt flavour of a comparison: one header
  // instead of one per run). A run without rows gets one saying why.
  ReportTable mergedByRun(const std::function<ReportTable(const ReportRun&)>& make) {
    ReportTable merged;
    for (const auto& r : rep.runs) {
      ReportTable t = make(r);
      if (merged.header.empty()) {
        merged.header.push_back("run");
        merged.header.insert(merged.header.end(), t.header.begin(), t.header.end());
        merged.caption = t.caption;
        merged.detailColumns = t.detailColumns;
        merged.emptyText = t.emptyText;
      }
      const ReportCell name{reportRunLabel(r), ReportCell::Style::Text, false, {}, 0};
      if (t.rows.empty()) {
        std::vector<ReportCell> row{name, ReportCell{t.emptyText, ReportCell::Style::Text, false, {}, 0}};
        row.resize(merged.header.size());
        merged.rows.push_back(std::move(row));
      }
      for (auto& row : t.rows) {
        row.insert(row.begin(), name);
        merged.rows.push_back(std::move(row));
      }
    }
    return merged;
  }

  // A per-run table: one of every run's rows in a comparison's Qt flavour, else one per run.
  void perRunTable(const char* id, const std::string& title, const std::function<ReportTable(const ReportRun&)>& make) {
    if (opt.qtRichText && rep.runs.size() > 1) {
      section(id, title);
      table(mergedByRun(make), true);
      return;
    }
    perRun(id, title, [&](const ReportRun& r) { table(make(r)); });
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

  void json(const std::string& text) {
    if (opt.qtRichText) {
      // On paper the JSON is for reading: one top-level key a line, its value inline (pre-wrap:
      // it wraps between values in its column). Still valid JSON.
      std::string body;
      try {
        const JsonValue v = parseJson(text, "deepspeed");
        body = v.isObject() ? linesJson(v) : inlineJson(v);
      } catch (const Error&) {
        body = text;
      }
      o += "<pre style=\"white-space:pre-wrap\">" + escapeLines(body) + "</pre>\n";
      return;
    }
    o += "<pre>" + escapeLines(text) + "</pre>\n";
  }

  // Escaped line by line: the lines stay (htmlEscape turns a newline into a space).
  static std::string escapeLines(const std::string& text) {
    std::string body;
    std::size_t from = 0;
    while (from <= text.size()) {
      const std::size_t nl = std::min(text.find('\n', from), text.size());
      body += htmlEscape(std::string_view(text).substr(from, nl - from)) + (nl < text.size() ? "\n" : "");
      from = nl + 1;
    }
    return body;
  }

  static std::string inlineJson(const JsonValue& v) {
    std::string out;
    if (v.isObject()) {
      out += "{";
      for (std::size_t i = 0; i < v.members().size(); ++i)
        out += (i ? ", " : "") + JsonValue::string(v.members()[i].first).dump() + ": " + inlineJson(v.members()[i].second);
      return out + "}";
    }
    if (v.isArray()) {
      out += "[";
      for (std::size_t i = 0; i < v.items().size(); ++i) out += (i ? ", " : "") + inlineJson(v.items()[i]);
      return out + "]";
    }
    return v.dump();
  }

  static std::string linesJson(const JsonValue& v) {
    std::string out = "{\n";
    for (std::size_t i = 0; i < v.members().size(); ++i)
      out += "  " + JsonValue::string(v.members()[i].first).dump() + ": " + inlineJson(v.members()[i].second) +
             (i + 1 < v.members().size() ? ",\n" : "\n");
    return out + "}";
  }

  void configuration() {
    static const char* kJsonIntro =
        "DeepSpeed-style JSON that reproduces this run (knobs DeepSpeed does not carry are under <code>\"shardscope\"</code>)";
    if (!reportComparesKnobs(rep)) {
      perRun("configuration", "Configuration", [&](const ReportRun& r) {
        if (r.hasRunConfig) table(knobTable(r));
        if (!r.knownConfig.empty()) table(knownConfigTable(r));
        if (!r.deepSpeedJson.empty()) {
          o += std::string("<p") + (opt.qtRichText ? kKeepWithNext : "") + ">" + kJsonIntro + ":</p>\n";
          json(r.deepSpeedJson);
        }
      });
      return;
    }
    // Several runs with a configuration: their knobs side by side, then what the others tell.
    section("configuration", "Configuration");
    table(knobComparisonTable(rep));
    for (const auto& r : rep.runs)
      if (!r.knownConfig.empty()) {
        o += "<h3>" + htmlEscape(reportRunLabel(r)) + "</h3>\n";
        table(knownConfigTable(r));
      }
    std::vector<const ReportRun*> withJson;
    for (const auto& r : rep.runs)
      if (!r.deepSpeedJson.empty()) withJson.push_back(&r);
    if (withJson.empty()) return;
    if (opt.qtRichText) {
      // The JSON of each run in a column of its own: a page holds them side by side.
      o += std::string("<p") + kKeepWithNext +
           ">DeepSpeed-style JSON that reproduces each run, one column per run (knobs DeepSpeed does not carry are under "
           "<code>\"shardscope\"</code>):</p>\n";
      o += "<table border=\"1\" cellspacing=\"0\" cellpadding=\"1\" width=\"100%\" style=\"border-collapse:collapse\">"
           "<thead><tr>";
      for (const ReportRun* r : withJson)
        o += "<th bgcolor=\"#eef1f5\" align=\"left\">" + htmlEscape(reportRunLabel(*r)) + "</th>";
      o += "</tr></thead>\n<tr>";
      for (const ReportRun* r : withJson) {
        o += "<td class=\"json\">";
        json(r->deepSpeedJson);
        o += "</td>";
      }
      o += "</tr></table>\n";
      return;
    }
    for (const ReportRun* r : withJson) {
      o += "<h3>" + htmlEscape(reportRunLabel(*r)) + "</h3>\n<p>" + kJsonIntro + ":</p>\n";
      json(r->deepSpeedJson);
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
      o += std::string("<style>") + kQtCss + "</style>\n";
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
    if (qt) {
      // Two charts to a row (a borderless table, which never splits a chart), the last alone.
      const std::size_t perRow = opt.chartPairs ? 2 : 1;
      for (std::size_t i = 0; i < rep.charts.size(); i += perRow) {
        const std::size_t n = std::min(perRow, rep.charts.size() - i);
        if (n > 1) o += "<table width=\"100%\" border=\"0\" cellspacing=\"0\" cellpadding=\"3\"><tr>";
        for (std::size_t k = i; k < i + n; ++k) {
          const Chart& c = rep.charts[k];
          if (n > 1) o += "<td width=\"50%\" valign=\"top\">";
          if (opt.chartPlaceholder) o += opt.chartPlaceholder(k) + "\n";
          if (!c.note.empty()) o += "<p class=\"figcaption\">" + htmlEscape(c.note) + "</p>\n";
          if (n > 1) o += "</td>";
        }
        if (n > 1) o += "</tr></table>\n";
      }
    } else {
      for (const Chart& c : rep.charts) {
        o += "<figure id=\"chart-" + htmlEscape(c.id) + "\">" + renderSvg(c);
        if (!c.note.empty()) o += "<figcaption>" + htmlEscape(c.note) + "</figcaption>";
        o += "</figure>\n";
      }
    }

    perRunTable("bottlenecks", "Collective bottlenecks", bottleneckTable);
    if (qt && rep.runs.size() > 1) {
      section("stragglers", "Arrivals and stragglers");
      o += "<ul>\n";
      for (const auto& r : rep.runs)
        o += "<li><b>" + htmlEscape(reportRunLabel(r)) + ":</b> " + htmlEscape(stragglerSummary(r)) + "</li>\n";
      o += "</ul>\n";
      const auto matched = [](const ReportRun& r) { return r.analysis.stragglers.matched > 0; };
      if (std::any_of(rep.runs.begin(), rep.runs.end(), matched)) {
        table(mergedByRun(stragglerTable), true);
        table(mergedByRun(arrivalGroupTable), true);
      }
    } else {
      perRun("stragglers", "Arrivals and stragglers", [&](const ReportRun& r) {
        o += "<p>" + htmlEscape(stragglerSummary(r)) + "</p>\n";
        if (r.analysis.stragglers.matched > 0) {
          table(stragglerTable(r));
          table(arrivalGroupTable(r));
        }
      });
    }
    perRunTable("memory", "Memory peaks", memoryPeakTable);
    if (reportHasMemorySnapshots(rep))
      perRun("memory-snapshots", "Memory snapshots", [&](const ReportRun& r) {
        table(memorySnapshotTable(r));
        table(memorySnapshotTopTable(r));
      });
    perRunTable("collectives", "Collectives", collectivesTable);
    configuration();
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
