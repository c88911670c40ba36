// libFuzzer harness for the run-config readers: our own run-config JSON and DeepSpeed JSON (the two
// ways a user hands a configuration to `run`, `compare`, the worker and the launch dialog), and the
// CLI flag parser.
//
// Every input is parsed as JSON; a parsed document goes through parseRunConfigJson and
// fromDeepSpeedJson, and each accepted config through validate(). core::Error is the expected way to
// refuse an input; a crash, a sanitizer report, a hang or another exception type is a bug, and so is
// a broken round trip (abort() below): an accepted run config must read back equal from toJson(), and
// a validated one from toDeepSpeedJson() (the documented "fromDeepSpeedJson(toDeepSpeedJson(c)) == c").
// The input's first line, when it looks like "--flag=value", is also applied with applyFlag.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "core/config/run_config.h"
#include "core/util/error.h"
#include "core/util/json.h"

namespace {

using namespace shardscope::core;

[[noreturn]] void invariant(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz_run_config: invariant broken: %s: %s\n", what, detail.substr(0, 400).c_str());
  std::abort();
}

void roundTrips(const RunConfig& c) {
  std::vector<std::string> warnings;
  const RunConfig back = parseRunConfigJson(toJson(c), "round trip", &warnings);
  if (!(back == c)) invariant("parseRunConfigJson(toJson(c)) != c", toJson(c).dump());
  bool valid = true;
  try {
    validate(c);
  } catch (const Error&) {
    valid = false;
  }
  if (!valid) return;
  const RunConfig ds = fromDeepSpeedJson(toDeepSpeedJson(c), "round trip", RunConfig{}, &warnings);
  if (!(ds == c)) invariant("fromDeepSpeedJson(toDeepSpeedJson(c)) != c", toDeepSpeedJson(c).dump());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  // A first line "--flag=value": the flag parser.
  if (text.size() > 2 && text.substr(0, 2) == "--") {
    const auto eol = text.find('\n');
    const std::string_view line = text.substr(0, eol);
    const auto eq = line.find('=');
    RunConfig c;
    try {
      applyFlag(c, line.substr(0, eq), eq == std::string_view::npos ? std::string_view() : line.substr(eq + 1));
      roundTrips(c);
    } catch (const Error&) {
    }
  }
  JsonValue json;
  try {
    json = parseJson(text, "fuzz input");
  } catch (const Error&) {
    return 0;
  }
  std::vector<std::string> warnings;
  try {
    roundTrips(parseRunConfigJson(json, "fuzz input", &warnings));
  } catch (const Error&) {
  }
  try {
    roundTrips(fromDeepSpeedJson(json, "fuzz input", RunConfig{}, &warnings));
  } catch (const Error&) {
  }
  return 0;
}
