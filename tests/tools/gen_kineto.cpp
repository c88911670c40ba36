// shardscope-gen-kineto: writes a synthetic torch.profiler/Kineto trace (tests/tools/kineto_generator.h)
// and prints what it wrote.
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <string_view>

#include "tests/tools/kineto_generator.h"

namespace {

void usage(std::FILE* to) {
  std::fputs(
      "usage: shardscope-gen-kineto --events N [--rank R] [--world W] [--old-format] [--steps S]\n"
      "                             [--seed X] [--no-memory] [--python] [--indent] -o FILE\n"
      "Writes a synthetic Kineto trace of a data-parallel training loop (gzip when FILE ends in .gz).\n"
      "N accepts k/M/G suffixes (e.g. 5M).\n",
      to);
}

// "5M", "100k", "1000": the sizes people type for event counts.
bool parseCount(std::string_view s, std::uint64_t& out) {
  std::uint64_t mult = 1;
  if (!s.empty()) {
    const char last = s.back();
    if (last == 'k' || last == 'K') mult = 1000;
    if (last == 'm' || last == 'M') mult = 1000000;
    if (last == 'g' || last == 'G') mult = 1000000000;
    if (mult != 1) s.remove_suffix(1);
  }
  std::uint64_t v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty()) return false;
  out = v * mult;
  return true;
}

bool parseInt(std::string_view s, int& out) {
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size() && !s.empty();
}

}  // namespace

int main(int argc, char** argv) {
  shardscope::test::KinetoGenOptions opt;
  std::string out;
  bool haveEvents = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    auto value = [&](const char* what) -> std::string_view {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "shardscope-gen-kineto: %s needs a value\n", what);
        std::exit(2);
      }
      return argv[++i];
    };
    auto bad = [&](std::string_view v) {
      std::fprintf(stderr, "shardscope-gen-kineto: invalid value '%.*s' for %.*s\n", static_cast<int>(v.size()), v.data(),
                   static_cast<int>(a.size()), a.data());
      std::exit(2);
    };
    if (a == "--events" || a == "-n") {
      const auto v = value("--events");
      if (!parseCount(v, opt.events)) bad(v);
      haveEvents = true;
    } else if (a == "--rank") {
      const auto v = value("--rank");
      if (!parseInt(v, opt.rank) || opt.rank < 0) bad(v);
    } else if (a == "--world") {
      const auto v = value("--world");
      if (!parseInt(v, opt.worldSize) || opt.worldSize < 1) bad(v);
    } else if (a == "--steps") {
      const auto v = value("--steps");
      if (!parseInt(v, opt.steps) || opt.steps < 1) bad(v);
    } else if (a == "--seed") {
      const auto v = value("--seed");
      if (!parseCount(v, opt.seed)) bad(v);
    } else if (a == "--old-format") {
      opt.newFormat = false;
    } else if (a == "--no-memory") {
      opt.withMemory = false;
    } else if (a == "--python") {
      opt.withPython = true;
    } else if (a == "--indent") {
      opt.indent = true;
    } else if (a == "-o" || a == "--output") {
      out = std::string(value("-o"));
    } else if (a == "-h" || a == "--help") {
      usage(stdout);
      return 0;
    } else {
      std::fprintf(stderr, "shardscope-gen-kineto: unknown argument '%s'\n", argv[i]);
      usage(stderr);
      return 2;
    }
  }
  if (out.empty() || !haveEvents) {
    usage(stderr);
    return 2;
  }
  if (opt.rank >= opt.worldSize) {
    std::fprintf(stderr, "shardscope-gen-kineto: --rank %d is not below --world %d\n", opt.rank, opt.worldSize);
    return 2;
  }
  try {
    const auto t0 = std::chrono::steady_clock::now();
    const auto st = shardscope::test::generateKinetoTrace(out, opt);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf(
        "%s: %llu traceEvents (%llu complete, %llu cpu_op, %llu runtime, %llu kernels of which %llu NCCL, "
        "%llu steps, %llu [memory], %llu launch flows), %.1f MB JSON in %.2f s\n",
        out.c_str(), static_cast<unsigned long long>(st.traceEvents), static_cast<unsigned long long>(st.completeEvents),
        static_cast<unsigned long long>(st.cpuOps), static_cast<unsigned long long>(st.runtimeEvents),
        static_cast<unsigned long long>(st.kernels), static_cast<unsigned long long>(st.ncclKernels),
        static_cast<unsigned long long>(st.steps), static_cast<unsigned long long>(st.memoryEvents),
        static_cast<unsigned long long>(st.launchFlows), static_cast<double>(st.bytes) / 1e6, s);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "shardscope-gen-kineto: %s\n", e.what());
    return 1;
  }
  return 0;
}
