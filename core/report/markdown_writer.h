#pragma once
// The report as Markdown for wikis and pull requests (GitHub-flavoured tables). Untrusted strings are
// escaped so they cannot break a table (| and newlines), open code spans or links, or inject HTML
// (< > & become entities); JSON goes into a fence longer than any backtick run inside it. Charts
// appear as their data tables (Markdown has no portable inline graphics).
#include <string>
#include <string_view>

#include "core/report/report.h"

namespace shardscope::core {

std::string writeMarkdown(const Report& report);

// Inline text: Markdown punctuation that could start markup (\ ` * _ [ ] | ~ #) backslash-escaped,
// < > & as entities, newlines and tabs as spaces.
std::string markdownEscape(std::string_view s);

}  // namespace shardscope::core
