#pragma once
// The report as one self-contained HTML file: inline CSS, charts as inline SVG, no script, no URL of
// any kind (a Content-Security-Policy forbids loading anything), readable on a phone (viewport, tables
// scroll sideways inside their box, cells wrap between words only) and in print (@media print: wide
// tables in a smaller font, no page break inside a row, chart or JSON block, none after a heading).
// Every string from a trace or config is escaped, so a run called <script>alert(1)</script> shows as
// that text.
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "core/report/report.h"

namespace shardscope::core {

struct HtmlOptions {
  // Markup for Qt's rich-text engine (QTextDocument: PDF and the GUI preview) instead of a browser:
  // table attributes instead of CSS layout, no SVG. Each chart becomes chartPlaceholder(index into
  // Report::charts), trusted markup from the caller; without one, charts are left out.
  bool qtRichText = false;
  std::function<std::string(std::size_t)> chartPlaceholder;
  // Qt flavour: two charts to a row (the cells of a borderless table), the last alone when their
  // number is odd. The placeholder then sits in a table cell.
  bool chartPairs = false;
};

std::string writeHtml(const Report& report, const HtmlOptions& options = {});

// Text for HTML element content and attribute values (& < > " ' escaped, control characters dropped);
// newlines become <br> when `breaks`.
std::string htmlEscape(std::string_view s, bool breaks = false);

}  // namespace shardscope::core
