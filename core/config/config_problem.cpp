#include "core/config/config_problem.h"

#include <algorithm>

#include "core/util/error.h"

namespace shardscope::core {
namespace {

// The run-config key a flag or JSON key spells ("--world-size", "world-size", "world_size", an alias).
std::string keyOf(std::string_view name) {
  while (!name.empty() && name.front() == '-') name.remove_prefix(1);
  std::string snake(name);
  std::replace(snake.begin(), snake.end(), '-', '_');
  for (const auto& k : runConfigKeys()) {
    if (k.key == snake) return k.key;
    if (std::find(k.aliases.begin(), k.aliases.end(), snake) != k.aliases.end()) return k.key;
  }
  return {};
}

bool isKeyPath(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
  });
}

}  // namespace

ConfigProblem describeConfigError(std::string_view text, const std::vector<std::string>& files) {
  ConfigProblem p;
  p.text = std::string(text);
  p.message = p.text;
  std::string_view rest = text;
  constexpr std::string_view kValidate = "run config: ";
  if (rest.substr(0, kValidate.size()) == kValidate) {  // validate(): "run config: <key> (--flag): <what>"
    rest.remove_prefix(kValidate.size());
    const auto space = rest.find(" (--");
    const auto close = rest.find("): ");
    if (space != std::string_view::npos && close != std::string_view::npos && space < close) {
      p.key = std::string(rest.substr(0, space));
      p.message = std::string(rest.substr(close + 3));
    }
    return p;
  }
  if (rest.substr(0, 2) == "--") {  // applyFlag(): "--flag: <what>"
    const auto colon = rest.find(": ");
    if (colon != std::string_view::npos) {
      if (std::string key = keyOf(rest.substr(0, colon)); !key.empty()) {
        p.key = std::move(key);
        p.message = std::string(rest.substr(colon + 2));
      }
    }
    return p;
  }
  // The JSON readers: "<file>: <key or key path>: <what>" (the longest file that matches).
  std::size_t best = 0;
  for (const auto& f : files)
    if (!f.empty() && f.size() > best && rest.size() > f.size() + 2 && rest.substr(0, f.size()) == f &&
        rest.substr(f.size(), 2) == ": ")
      best = f.size();
  if (best == 0) return p;
  p.file = std::string(rest.substr(0, best));
  rest.remove_prefix(best + 2);
  p.message = std::string(rest);
  const auto colon = rest.find(": ");
  if (colon != std::string_view::npos && isKeyPath(rest.substr(0, colon))) {
    const std::string_view path = rest.substr(0, colon);
    const std::string key = keyOf(path);
    p.key = key.empty() ? std::string(path) : key;
    p.message = std::string(rest.substr(colon + 2));
  }
  return p;
}

std::optional<ConfigProblem> checkRunConfig(const RunConfig& cfg) {
  try {
    validate(cfg);
  } catch (const Error& e) {
    return describeConfigError(e.what());
  }
  return std::nullopt;
}

}  // namespace shardscope::core
