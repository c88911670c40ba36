#include "core/util/csv.h"

namespace shardscope::core {

std::string csvText(std::string_view v) {
  std::string s(v);
  if (!s.empty() && (s[0] == '=' || s[0] == '+' || s[0] == '-' || s[0] == '@' || s[0] == '\t' || s[0] == '\r'))
    s.insert(s.begin(), '\'');
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

}  // namespace shardscope::core
