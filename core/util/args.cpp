#include "core/util/args.h"

#include <algorithm>
#include <charconv>
#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace shardscope::core {

std::optional<bool> parseFlagValue(std::string_view v) {
  if (v == "true" || v == "1" || v == "on" || v == "yes") return true;
  if (v == "false" || v == "0" || v == "off" || v == "no") return false;
  return std::nullopt;
}

bool ParsedArgs::has(const std::string& name) const {
  const bool given = std::any_of(options.begin(), options.end(), [&](const auto& p) { return p.first == name; });
  if (!given || std::find(flags.begin(), flags.end(), name) == flags.end()) return given;
  return get(name) == "true";
}

std::string ParsedArgs::get(const std::string& name, const std::string& def) const {
  for (auto it = options.rbegin(); it != options.rend(); ++it)
    if (it->first == name) return it->second;
  return def;
}

std::vector<std::string> ParsedArgs::all(const std::string& name) const {
  std::vector<std::string> out;
  for (const auto& [n, v] : options)
    if (n == name) out.push_back(v);
  return out;
}

namespace {
std::string dashed(const std::string& name) { return (name.size() == 1 ? "-" : "--") + name; }
}  // namespace

std::int64_t ParsedArgs::getInt(const std::string& name, std::int64_t def, std::int64_t min) const {
  if (!has(name)) return def;
  const std::string v = get(name);
  errno = 0;
  char* end = nullptr;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || end != v.c_str() + v.size() || errno == ERANGE)
    throw ArgError(dashed(name) + ": expected an integer, got '" + v + "'");
  if (x < min) throw ArgError(dashed(name) + ": expected an integer >= " + std::to_string(min) + ", got '" + v + "'");
  return x;
}

double ParsedArgs::getDouble(const std::string& name, double def) const {
  if (!has(name)) return def;
  const std::string v = get(name);
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || end != v.c_str() + v.size() || !std::isfinite(x))
    throw ArgError(dashed(name) + ": expected a number, got '" + v + "'");
  return x;
}

namespace {
std::optional<std::uint64_t> parseCount(std::string_view s) {
  std::uint64_t mult = 1;
  if (!s.empty() && (s.back() == 'k' || s.back() == 'K')) mult = 1000;
  if (!s.empty() && (s.back() == 'm' || s.back() == 'M')) mult = 1000000;
  if (mult != 1) s.remove_suffix(1);
  std::uint64_t v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size() || v > UINT64_MAX / mult) return std::nullopt;
  return v * mult;
}

std::uint64_t countOf(const std::string& name, std::string_view v, std::uint64_t min, std::uint64_t max) {
  const auto n = parseCount(v);
  if (!n || *n < min || *n > max) {
    std::string range;
    if (min > 0 || max != UINT64_MAX)
      range = " from " + std::to_string(min) + (max == UINT64_MAX ? std::string(" up") : " to " + std::to_string(max));
    throw ArgError(dashed(name) + ": expected a count (1000, 5k, 2M)" + range + ", got '" + std::string(v) + "'");
  }
  return *n;
}
}  // namespace

std::uint64_t ParsedArgs::getCount(const std::string& name, std::uint64_t def, std::uint64_t min, std::uint64_t max) const {
  return has(name) ? countOf(name, get(name), min, max) : def;
}

std::vector<std::uint64_t> ParsedArgs::getCounts(const std::string& name, std::vector<std::uint64_t> def, std::uint64_t min,
                                                 std::uint64_t max) const {
  if (!has(name)) return def;
  std::vector<std::uint64_t> out;
  const std::string list = get(name);
  for (std::size_t pos = 0; pos < list.size();) {
    const std::size_t comma = std::min(list.find(',', pos), list.size());
    out.push_back(countOf(name, std::string_view(list).substr(pos, comma - pos), min, max));
    pos = comma + 1;
  }
  if (out.empty()) throw ArgError(dashed(name) + ": expected counts separated by commas, got '" + list + "'");
  return out;
}

ParsedArgs parseArgs(const std::vector<std::string>& argv, const std::vector<ArgSpec>& specs, const ArgParseOptions& po) {
  ParsedArgs args;
  for (std::size_t i = 0; i < argv.size(); ++i) {
    const std::string& s = argv[i];
    if (s == "--") {
      args.positional.insert(args.positional.end(), argv.begin() + static_cast<long>(i) + 1, argv.end());
      break;
    }
    if (s.size() < 2 || s[0] != '-') {
      if (!po.allowPositional) throw ArgError("unexpected argument '" + s + "'");
      args.positional.push_back(s);
      continue;
    }
    std::string name = s.substr(s[1] == '-' ? 2 : 1);
    std::string value;
    bool inlineValue = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      inlineValue = true;
    }
    bool takesValue = false;
    const ArgSpec* spec = nullptr;
    for (const auto& o : specs)
      if (o.name == name) spec = &o;
    if (!spec && po.shortHelp && name == "h")
      for (const auto& o : specs)
        if (o.name == "help") spec = &o;
    if (spec) {
      name = spec->name;
      takesValue = spec->takesValue;
    } else if (const auto isFlag = po.extra ? po.extra(name) : std::nullopt) {
      takesValue = !*isFlag;
    } else {
      throw ArgError("unknown option '" + s + "'");
    }
    if (takesValue && !inlineValue) {
      if (i + 1 >= argv.size()) throw ArgError("option '" + s + "' needs a value");
      value = argv[++i];
    } else if (!takesValue) {
      // A flag: --flag, --flag=false, or --flag false (the next word, when it is a truth value).
      if (inlineValue) {
        const auto b = parseFlagValue(value);
        if (!b) throw ArgError("option '--" + name + "' is a flag: '" + value + "' is not true/false/1/0/on/off/yes/no");
        value = *b ? "true" : "false";
      } else if (i + 1 < argv.size() && parseFlagValue(argv[i + 1])) {
        value = *parseFlagValue(argv[++i]) ? "true" : "false";
      } else {
        value = "true";
      }
      if (std::find(args.flags.begin(), args.flags.end(), name) == args.flags.end()) args.flags.push_back(name);
    }
    args.options.emplace_back(name, value);
  }
  return args;
}

ParsedArgs parseArgs(int argc, char** argv, const std::vector<ArgSpec>& specs, const ArgParseOptions& options) {
  return parseArgs(std::vector<std::string>(argv + std::min(argc, 1), argv + argc), specs, options);
}

std::string argsHelp(const std::vector<ArgSpec>& specs, std::size_t column) {
  std::string out;
  for (const auto& o : specs) {
    const std::string flag = dashed(o.name) + (o.takesValue ? " " + o.valueName : "");
    out += "  " + flag + std::string(flag.size() < column ? column - flag.size() : 1, ' ') + o.help + "\n";
  }
  return out;
}

}  // namespace shardscope::core
