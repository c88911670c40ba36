#pragma once
// The one CSV cell escaper (RFC 4180): every CSV Shardscope writes — reports, `compare-runs --csv`,
// `analyze --csv`, `top --csv`, the app's "Copy as CSV" — goes through it.
#include <string>
#include <string_view>

namespace shardscope::core {

// A text cell: quoted when it holds a comma, a quote or a line break (quotes doubled); a leading
// = + - @ tab or carriage return is prefixed with ' so a spreadsheet shows the text instead of
// evaluating it (CSV injection). Numbers are written as they are, not through this.
std::string csvText(std::string_view s);

}  // namespace shardscope::core
