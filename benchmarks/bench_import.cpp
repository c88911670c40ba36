// bench_import: end-to-end Kineto import throughput (parse + insert + index + commit, i.e. the whole
// importKineto call) on synthetic traces of given sizes, or on given files.
//
//   bench_import [--sizes 1M,5M] [--gz] [--keep] [--dir DIR] [--old-format] [--seed N]
//   bench_import --files A.json B.json.gz ...
//
// Each import runs in a fork()ed child so that its peak RSS (VmHWM) is its own, not the high-water
// mark of earlier, larger runs in the same process.
#include <sched.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/util/args.h"
#include "core/import/kineto_importer.h"
#include "core/storage/trace_store.h"
#include "tests/tools/kineto_generator.h"

namespace {

namespace core = shardscope::core;

namespace fs = std::filesystem;

struct Options {
  std::vector<std::uint64_t> sizes{1'000'000, 5'000'000};
  bool gz = false;
  bool keep = false;
  bool newFormat = true;
  std::uint64_t seed = 1;
  std::string dir;
  std::vector<std::string> files;
};

[[noreturn]] void usage(int code) {
  std::fputs(
      "usage: bench_import [--sizes 1M,5M] [--gz] [--keep] [--dir DIR] [--old-format] [--seed N]\n"
      "       bench_import --files TRACE [TRACE...]\n"
      "Times importKineto end to end (parse + insert + index + commit) into a fresh SQLite database.\n"
      "--sizes  synthetic trace sizes in traceEvents (k/M suffixes), generated into DIR (default: a temp dir)\n"
      "--gz     also time the gzip-compressed copy of each synthetic trace\n"
      "--keep   keep the generated traces and databases\n"
      "--files  time the given trace files instead (each into its own fresh database)\n",
      code == 0 ? stdout : stderr);
  std::exit(code);
}

std::string sizeLabel(std::uint64_t n) {
  if (n % 1'000'000 == 0) return std::to_string(n / 1'000'000) + "M";
  if (n % 1'000 == 0) return std::to_string(n / 1'000) + "k";
  return std::to_string(n);
}

Options parseArgs(int argc, char** argv) {
  static const std::vector<core::ArgSpec> specs = {
      {"sizes", true, ""}, {"gz", false, ""}, {"keep", false, ""},  {"old-format", false, ""},
      {"seed", true, ""},  {"dir", true, ""}, {"files", false, ""}, {"help", false, ""},
  };
  Options o;
  try {
    const core::ParsedArgs a = core::parseArgs(argc, argv, specs);
    if (a.has("help")) usage(0);
    o.sizes = a.getCounts("sizes", o.sizes, 1);
    o.gz = a.has("gz");
    o.keep = a.has("keep");
    o.newFormat = !a.has("old-format");
    o.seed = a.getCount("seed", o.seed);
    o.dir = a.get("dir");
    // --files TRACE [TRACE...]: the traces are the positionals.
    if (a.has("files") == a.positional.empty()) throw core::ArgError("--files needs trace files (and only it takes them)");
    o.files = a.positional;
  } catch (const core::ArgError& e) {
    std::fprintf(stderr, "bench_import: %s\n", e.what());
    usage(2);
  }
  return o;
}

// Peak resident set of this process in bytes: VmHWM, else ru_maxrss.
std::uint64_t peakRss() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::strtoull(line.c_str() + 6, nullptr, 10) * 1024;
  }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<std::uint64_t>(ru.ru_maxrss) * 1024;
}

int cpuCount() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
  return static_cast<int>(std::thread::hardware_concurrency());
}

// Imports `file` into a fresh database at `db` in a child process and prints one result line.
bool timeImport(const std::string& label, const std::string& file, const std::string& db) {
  std::fflush(stdout);
  // Start every run from a quiet disk: the previous run's (or the generator's) dirty pages would
  // otherwise be written back during this one and throttle its writes.
  ::sync();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const pid_t pid = fork();
  if (pid < 0) {
    std::perror("fork");
    return false;
  }
  if (pid == 0) {
    int code = 0;
    try {
      for (const char* suffix : {"", "-wal", "-shm", "-journal"}) fs::remove(db + suffix);
      auto store = std::make_unique<shardscope::core::TraceStore>(db);
      const auto t0 = std::chrono::steady_clock::now();
      const auto res = shardscope::core::importKineto(*store, {file});
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::uint64_t traceEvents = 0;
      for (const auto& f : res.files) traceEvents += f.traceEvents;
      // The database as it stays on disk: closing the last connection checkpoints and removes the
      // WAL (which otherwise holds a second copy of what the import wrote until then).
      store.reset();
      std::uint64_t dbBytes = 0;
      for (const char* suffix : {"", "-wal"}) {
        std::error_code ec;
        const auto n = fs::file_size(db + suffix, ec);
        if (!ec) dbBytes += n;
      }
      std::printf(
          "%s: %.2f s, %.0f events/s, %.1f MB/s (json), peak RSS %.0f MB  [%llu traceEvents, %llu rows, %.1f MB json, "
          "%.1f MB on disk, db %.1f MB]\n",
          label.c_str(), s, static_cast<double>(traceEvents) / s, static_cast<double>(res.jsonBytes) / 1e6 / s,
          static_cast<double>(peakRss()) / 1e6, static_cast<unsigned long long>(traceEvents),
          static_cast<unsigned long long>(res.events), static_cast<double>(res.jsonBytes) / 1e6,
          static_cast<double>(res.bytes) / 1e6, static_cast<double>(dbBytes) / 1e6);
    } catch (const std::exception& e) {
      std::printf("%s: FAILED: %s\n", label.c_str(), e.what());
      code = 1;
    }
    std::fflush(stdout);
    _exit(code);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status)) {
    std::printf("%s: child died (signal %d)\n", label.c_str(), WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    return false;
  }
  return WEXITSTATUS(status) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parseArgs(argc, argv);
  std::printf("bench_import: %d CPU cores available (%u hardware threads)\n", cpuCount(), std::thread::hardware_concurrency());
  bool ok = true;

  if (!o.files.empty()) {
    const fs::path dbDir = o.dir.empty() ? fs::temp_directory_path() : fs::path(o.dir);
    for (const auto& f : o.files) {
      const std::string db = (dbDir / ("bench_import_" + std::to_string(getpid()) + ".db")).string();
      ok = timeImport(f, f, db) && ok;
      if (!o.keep)
        for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(db + suffix);
    }
    return ok ? 0 : 1;
  }

  fs::path dir;
  bool ownDir = false;
  if (o.dir.empty()) {
    dir = fs::temp_directory_path() / ("bench_import_" + std::to_string(getpid()));
    ownDir = true;
  } else {
    dir = o.dir;
  }
  fs::create_directories(dir);
  std::printf("bench_import: traces in %s\n", dir.string().c_str());

  for (const std::uint64_t n : o.sizes) {
    const std::string label = sizeLabel(n);
    shardscope::test::KinetoGenOptions g;
    g.events = n;
    g.newFormat = o.newFormat;
    g.seed = o.seed;
    g.worldSize = 8;
    std::vector<std::pair<std::string, std::string>> runs;  // (label, file)
    const std::string plain = (dir / ("trace_" + label + ".json")).string();
    auto t0 = std::chrono::steady_clock::now();
    const auto st = shardscope::test::generateKinetoTrace(plain, g);
    std::printf("generated %s: %llu traceEvents, %.1f MB in %.1f s\n", plain.c_str(),
                static_cast<unsigned long long>(st.traceEvents), static_cast<double>(st.bytes) / 1e6,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    runs.emplace_back(label + " events", plain);
    if (o.gz) {
      const std::string gz = plain + ".gz";
      t0 = std::chrono::steady_clock::now();
      shardscope::test::generateKinetoTrace(gz, g);
      std::printf("generated %s: %.1f MB compressed in %.1f s\n", gz.c_str(), static_cast<double>(fs::file_size(gz)) / 1e6,
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      runs.emplace_back(label + " events (.gz)", gz);
    }
    std::fflush(stdout);
    for (const auto& [runLabel, file] : runs) {
      const std::string db = (dir / ("bench_" + label + ".db")).string();
      ok = timeImport(runLabel, file, db) && ok;
      if (!o.keep)
        for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(db + suffix);
    }
    if (!o.keep)
      for (const auto& r : runs) fs::remove(r.second);
  }
  if (ownDir && !o.keep) fs::remove_all(dir);
  return ok ? 0 : 1;
}
