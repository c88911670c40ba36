// bench_analyze: time of the full analysis of a run (what `shardscope-cli analyze` computes), and of
// each analysis on its own.
//
//   bench_analyze [--ranks 8] [--events 1M] [--seed 7] [--repeat 5] [--dir DIR] [--keep]
//   bench_analyze --db FILE [--run ID] [--repeat 5]
//
// Without --db it generates RANKS synthetic Kineto traces of EVENTS traceEvents each (one job: same
// seed, ranks 0..RANKS-1), imports them as one run and analyses that. Every repetition runs in a
// fork()ed child so that its peak RSS (VmHWM) is its own; the figures printed last are the medians.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/util/args.h"
#include "core/analysis/bottlenecks.h"
#include "core/analysis/collectives.h"
#include "core/analysis/hta_metrics.h"
#include "core/analysis/memory_peaks.h"
#include "core/analysis/run_analysis.h"
#include "core/analysis/step_breakdown.h"
#include "core/analysis/stragglers.h"
#include "core/import/kineto_importer.h"
#include "core/storage/trace_store.h"
#include "tests/tools/kineto_generator.h"

namespace {

namespace fs = std::filesystem;
using namespace shardscope;

struct Options {
  int ranks = 8;
  std::uint64_t events = 1'000'000;
  std::uint64_t seed = 7;
  int repeat = 5;
  std::string dir;
  bool keep = false;
  std::string db;
  core::RunId run;
};

[[noreturn]] void usage(int code) {
  std::fputs(
      "usage: bench_analyze [--ranks 8] [--events 1M] [--seed 7] [--repeat 5] [--dir DIR] [--keep]\n"
      "       bench_analyze --db FILE [--run ID] [--repeat 5]\n"
      "Times the full analysis of a run (analyzeRun: what `shardscope-cli analyze` computes) and each\n"
      "analysis on its own, each repetition in a fresh child process; prints the medians, one figure a line.\n"
      "--events  traceEvents per rank of the generated traces (k/M suffixes)\n"
      "--dir     where the traces and the database are generated (default: a temp dir, removed after)\n"
      "--keep    keep the generated traces and database\n"
      "--db      analyse a run of an existing database instead (default run: the latest)\n"
      "Figures: full.* = analyzeRun (scan: reading and decoding the events once for all analyses; then each\n"
      "analysis' own work; cpu: user + system time), alone.* = each analysis called on its own.\n",
      code == 0 ? stdout : stderr);
  std::exit(code);
}

Options parseArgs(int argc, char** argv) {
  static const std::vector<core::ArgSpec> specs = {
      {"ranks", true, ""}, {"events", true, ""}, {"seed", true, ""}, {"repeat", true, ""}, {"dir", true, ""},
      {"keep", false, ""}, {"db", true, ""},     {"run", true, ""},  {"help", false, ""},
  };
  Options o;
  try {
    const core::ParsedArgs a = core::parseArgs(argc, argv, specs, core::ArgParseOptions::optionsOnly());
    if (a.has("help")) usage(0);
    o.ranks = static_cast<int>(a.getCount("ranks", static_cast<std::uint64_t>(o.ranks), 1, 1024));
    o.events = a.getCount("events", o.events, 1);
    o.seed = a.getCount("seed", o.seed);
    o.repeat = static_cast<int>(a.getCount("repeat", static_cast<std::uint64_t>(o.repeat), 1, 100));
    o.dir = a.get("dir");
    o.keep = a.has("keep");
    o.db = a.get("db");
    o.run =
        core::RunId{static_cast<core::Id>(a.getCount("run", static_cast<std::uint64_t>(o.run.value()), a.has("run") ? 1 : 0))};
  } catch (const core::ArgError& e) {
    std::fprintf(stderr, "bench_analyze: %s\n", e.what());
    usage(2);
  }
  return o;
}

// Peak resident set of this process in bytes: VmHWM, else ru_maxrss.
std::uint64_t peakRss() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::strtoull(line.c_str() + 6, nullptr, 10) * 1024;
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<std::uint64_t>(ru.ru_maxrss) * 1024;
}

double msSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

using Figures = std::vector<std::pair<std::string, double>>;  // (name, value) in print order

// Runs `fn` in a child process; it fills figures that come back through a pipe as "name=value" lines.
bool inChild(const std::function<void(Figures&)>& fn, Figures& out) {
  std::fflush(stdout);
  int fd[2];
  if (pipe(fd) != 0) {
    std::perror("pipe");
    return false;
  }
  const pid_t pid = fork();
  if (pid < 0) {
    std::perror("fork");
    return false;
  }
  if (pid == 0) {
    close(fd[0]);
    int code = 0;
    std::string text;
    try {
      Figures f;
      fn(f);
      for (const auto& [k, v] : f) text += k + "=" + std::to_string(v) + "\n";
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bench_analyze: %s\n", e.what());
      code = 1;
    }
    for (std::size_t off = 0; off < text.size();) {
      const ssize_t w = write(fd[1], text.data() + off, text.size() - off);
      if (w <= 0) break;
      off += static_cast<std::size_t>(w);
    }
    close(fd[1]);
    _exit(code);
  }
  close(fd[1]);
  std::string text;
  char buf[4096];
  for (ssize_t r; (r = read(fd[0], buf, sizeof buf)) > 0;) text.append(buf, static_cast<std::size_t>(r));
  close(fd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return false;
  out.clear();
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t nl = text.find('\n', pos);
    const std::string line = text.substr(pos, nl - pos);
    pos = nl == std::string::npos ? text.size() : nl + 1;
    const std::size_t eq = line.find('=');
    if (eq != std::string::npos) out.emplace_back(line.substr(0, eq), std::strtod(line.c_str() + eq + 1, nullptr));
  }
  return true;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// CPU time (user + system) of this process, ms: less sensitive than wall time to a busy machine.
double cpuMs() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto ms = [](const timeval& t) { return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_usec) / 1e3; };
  return ms(ru.ru_utime) + ms(ru.ru_stime);
}

// The full analysis, as `shardscope-cli analyze` runs it.
void fullAnalysis(const std::string& db, core::RunId run, std::int64_t events, Figures& f) {
  core::TraceStore store(db, core::Database::Mode::ReadOnly);
  const double cpu0 = cpuMs();
  const auto t0 = std::chrono::steady_clock::now();
  const core::RunAnalysis a = core::analyzeRun(store, run);
  const double total = msSince(t0);
  const double cpu = cpuMs() - cpu0;
  for (const auto& [name, ms] : a.timings) f.emplace_back("full." + name + " ms", ms);
  f.emplace_back("full.total ms", total);
  f.emplace_back("full.cpu ms", cpu);
  f.emplace_back("full.stored events/s", static_cast<double>(events) / (total / 1000.0));
  f.emplace_back("full.peak RSS MB", static_cast<double>(peakRss()) / 1e6);
}

// One analysis on its own (its own pass over the store).
void oneAnalysis(const std::string& db, core::RunId run, const std::string& which, Figures& f) {
  core::TraceStore store(db, core::Database::Mode::ReadOnly);
  const auto t0 = std::chrono::steady_clock::now();
  if (which == "hta")
    core::computeHtaFigures(store, run);
  else if (which == "steps")
    core::computeStepBreakdown(store, run);
  else if (which == "collectives")
    core::computeCollectives(store, run);
  else if (which == "memory")
    core::computeMemoryPeaks(store, run);
  else if (which == "bottlenecks")
    core::findCollectiveBottlenecks(store, run, 10);
  else if (which == "stragglers")
    core::detectStragglers(store, run);
  f.emplace_back("alone." + which + " ms", msSince(t0));
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parseArgs(argc, argv);
  fs::path dir;
  bool ownDir = false;
  if (o.db.empty()) {
    if (o.dir.empty()) {
      dir = fs::temp_directory_path() / ("bench_analyze_" + std::to_string(getpid()));
      ownDir = true;
    } else {
      dir = o.dir;
    }
    fs::create_directories(dir);
    std::vector<std::string> files;
    auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < o.ranks; ++r) {
      test::KinetoGenOptions g;
      g.events = o.events;
      g.rank = r;
      g.worldSize = o.ranks;
      g.seed = o.seed;
      files.push_back((dir / ("rank" + std::to_string(r) + ".json")).string());
      test::generateKinetoTrace(files.back(), g);
    }
    std::printf("generated %d traces of %llu traceEvents in %s in %.1f s\n", o.ranks, static_cast<unsigned long long>(o.events),
                dir.string().c_str(), msSince(t0) / 1000.0);
    o.db = (dir / "bench_analyze.db").string();
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) fs::remove(o.db + suffix);
    t0 = std::chrono::steady_clock::now();
    // In a child too: the import's memory must not be inherited by the children that measure.
    Figures imported;
    const bool importedOk = inChild(
        [&](Figures& f) {
          core::TraceStore store(o.db);
          f.emplace_back("run", static_cast<double>((core::importKineto(store, files).runIds.at(0)).value()));
        },
        imported);
    if (!importedOk || imported.empty()) {
      std::fprintf(stderr, "bench_analyze: the import failed\n");
      return 1;
    }
    o.run = core::RunId{static_cast<core::Id>(imported.front().second)};
    std::printf("imported them as run %lld in %.1f s\n", static_cast<long long>(o.run.value()), msSince(t0) / 1000.0);
    if (!o.keep)
      for (const auto& f : files) fs::remove(f);
  }
  std::int64_t events = 0;
  {
    core::TraceStore store(o.db, core::Database::Mode::ReadOnly);
    if (!o.run) o.run = store.latestRunId().value_or(core::RunId{});
    const auto s = store.summary(o.run);
    events = s.eventCount;
    std::printf("run %lld of %s: %zu ranks, %lld events\n", static_cast<long long>(o.run.value()), o.db.c_str(), s.ranks.size(),
                static_cast<long long>(s.eventCount));
  }

  // figure -> values over the repetitions, in first-seen order
  std::vector<std::string> order;
  std::map<std::string, std::vector<double>> values;
  auto record = [&](const Figures& f) {
    for (const auto& [k, v] : f) {
      if (!values.count(k)) order.push_back(k);
      values[k].push_back(v);
    }
  };
  bool ok = true;
  const char* each[] = {"hta", "steps", "collectives", "memory", "bottlenecks", "stragglers"};
  for (int rep = 0; rep < o.repeat; ++rep) {
    Figures f;
    if (inChild([&](Figures& x) { fullAnalysis(o.db, o.run, events, x); }, f)) {
      record(f);
      double total = 0, rss = 0;
      for (const auto& [k, v] : f) {
        if (k == "full.total ms") total = v;
        if (k == "full.peak RSS MB") rss = v;
      }
      std::printf("repetition %d: full analysis %.0f ms, peak RSS %.0f MB\n", rep + 1, total, rss);
    } else {
      ok = false;
    }
    for (const char* w : each) {
      if (inChild([&](Figures& x) { oneAnalysis(o.db, o.run, w, x); }, f))
        record(f);
      else
        ok = false;
    }
  }
  std::printf("median of %d:\n", o.repeat);
  for (const auto& k : order) std::printf("  %-28s %12.1f\n", k.c_str(), median(values[k]));
  if (!dir.empty() && !o.keep) {
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) fs::remove(o.db + suffix);
    if (ownDir) fs::remove_all(dir);
  }
  return ok ? 0 : 1;
}
