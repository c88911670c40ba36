// bench_concurrent_writers: many processes writing into one database while a reader follows it, as
// the app does when imports and runs write into the file it has open. Bounded: N writer processes
// each import M generated 2-rank jobs (E events per rank), one reader thread polls the run list the
// way the app's watch does. Prints the throughput, each import's time, the longest wait any writer
// had for another's lock, the reader's slowest read, and checks the file afterwards.
//
//   bench_concurrent_writers [--writers 4] [--imports 3] [--events 100k] [--new] [--dir DIR] [--keep]
//
// --new: the writers race to create the database (otherwise it exists, with one run, beforehand).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
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
using Clock = std::chrono::steady_clock;

struct Options {
  int writers = 4;
  int imports = 3;
  std::uint64_t events = 100'000;
  bool fresh = false;
  bool keep = false;
  std::string dir;
};

[[noreturn]] void usage(int code) {
  std::fputs(
      "usage: bench_concurrent_writers [--writers N] [--imports M] [--events E] [--new] [--dir DIR] [--keep]\n"
      "N writer processes each import M generated 2-rank jobs (E trace events per rank) into one database\n"
      "while a reader polls its run list; prints throughput, the longest lock wait and the slowest read.\n",
      code == 0 ? stdout : stderr);
  std::exit(code);
}

double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

struct WriterResult {
  int ok = 0;
  std::uint64_t events = 0;
  double longestWaitMs = 0;
  std::vector<double> importMs;
  std::string error;
};

// One writer process: M imports, one connection each (as separate CLI invocations would).
void writer(int w, const Options& o, const std::string& db, const std::vector<std::string>& files, int fd) {
  std::string out;
  for (int m = 0; m < o.imports; ++m) {
    try {
      shardscope::core::TraceStore store(db);
      shardscope::core::KinetoImportOptions opt;
      opt.runName = "writer " + std::to_string(w) + " import " + std::to_string(m);
      const auto t0 = Clock::now();
      const auto res = shardscope::core::importKineto(store, files, opt);
      out += "import " + std::to_string(ms(Clock::now() - t0)) + " " + std::to_string(res.events) + " " +
             std::to_string(store.longestLockWait().count()) + "\n";
    } catch (const std::exception& e) {
      std::string msg = e.what();
      std::replace(msg.begin(), msg.end(), '\n', ' ');
      out += "error " + msg + "\n";
    }
  }
  out += "longest " + std::to_string(shardscope::core::BusyPolicy::longestWait().count()) + "\n";
  std::size_t off = 0;
  while (off < out.size()) {
    const ssize_t n = ::write(fd, out.data() + off, out.size() - off);
    if (n <= 0) break;
    off += static_cast<std::size_t>(n);
  }
  ::close(fd);
}

WriterResult parse(const std::string& text) {
  WriterResult r;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t nl = text.find('\n', pos);
    const std::string line = text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    pos = nl == std::string::npos ? text.size() : nl + 1;
    if (line.rfind("import ", 0) == 0) {
      double t = 0;
      unsigned long long ev = 0;
      long long waitMs = 0;
      if (std::sscanf(line.c_str(), "import %lf %llu %lld", &t, &ev, &waitMs) == 3) {
        ++r.ok;
        r.importMs.push_back(t);
        r.events += ev;
        r.longestWaitMs = std::max(r.longestWaitMs, static_cast<double>(waitMs));
      }
    } else if (line.rfind("error ", 0) == 0) {
      r.error += line.substr(6) + "; ";
    } else if (line.rfind("longest ", 0) == 0) {
      r.longestWaitMs = std::max(r.longestWaitMs, std::atof(line.c_str() + 8));
    }
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  static const std::vector<core::ArgSpec> specs = {
      {"writers", true, ""}, {"imports", true, ""}, {"events", true, ""}, {"new", false, ""},
      {"keep", false, ""},   {"dir", true, ""},     {"help", false, ""},
  };
  try {
    const core::ParsedArgs a = core::parseArgs(argc, argv, specs, core::ArgParseOptions::optionsOnly());
    if (a.has("help")) usage(0);
    o.writers = static_cast<int>(a.getCount("writers", static_cast<std::uint64_t>(o.writers), 1, 1024));
    o.imports = static_cast<int>(a.getCount("imports", static_cast<std::uint64_t>(o.imports), 1, 100000));
    o.events = a.getCount("events", o.events, 1);
    o.fresh = a.has("new");
    o.keep = a.has("keep");
    o.dir = a.get("dir");
  } catch (const core::ArgError& e) {
    std::fprintf(stderr, "bench_concurrent_writers: %s\n", e.what());
    usage(2);
  }
  const bool tmpDir = o.dir.empty();
  if (tmpDir) {
    char tmpl[] = "/tmp/bench_concurrent_XXXXXX";
    if (!mkdtemp(tmpl)) return 1;
    o.dir = tmpl;
  }
  fs::create_directories(o.dir);
  std::vector<std::string> files;
  for (int r = 0; r < 2; ++r) {
    shardscope::test::KinetoGenOptions g;
    g.events = o.events;
    g.rank = r;
    g.worldSize = 2;
    files.push_back(o.dir + "/rank" + std::to_string(r) + ".json");
    shardscope::test::generateKinetoTrace(files.back(), g);
  }
  const std::string db = o.dir + "/concurrent.db";
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) fs::remove(db + suffix);
  if (!o.fresh) {
    shardscope::core::TraceStore store(db);
    shardscope::core::KinetoImportOptions opt;
    opt.runName = "existing";
    shardscope::core::importKineto(store, files, opt);
  }
  std::printf(
      "bench_concurrent_writers: %d writer processes x %d imports of a 2-rank job (%llu events per rank), "
      "%s database, 1 reader polling; %u CPU cores\n",
      o.writers, o.imports, static_cast<unsigned long long>(o.events), o.fresh ? "new" : "existing",
      std::thread::hardware_concurrency());
  std::fflush(stdout);

  // The writers, forked before this process opens any connection of its own.
  const auto t0 = Clock::now();
  std::vector<pid_t> pids;
  std::vector<int> fds;
  for (int w = 0; w < o.writers; ++w) {
    int p[2];
    if (pipe(p) != 0) return 1;
    const pid_t pid = fork();
    if (pid == 0) {
      ::close(p[0]);
      writer(w, o, db, files, p[1]);
      _exit(0);
    }
    ::close(p[1]);
    pids.push_back(pid);
    fds.push_back(p[0]);
  }

  // The reader: the app's watch, every 100 ms (the run list and the per-run counts).
  std::atomic<bool> stop{false};
  std::vector<double> readMs;
  std::string readError;
  std::thread reader([&] {
    while (!stop.load()) {
      try {
        std::error_code ec;
        if (fs::exists(db, ec)) {
          const auto r0 = Clock::now();
          shardscope::core::TraceStore store(db, shardscope::core::Database::Mode::ReadOnly);
          // What the run list reads (ui/models/run_list_model.cpp, loadRunRows).
          const auto runs = store.runs();
          const auto counts = store.runCounts();
          (void)runs;
          (void)counts;
          readMs.push_back(ms(Clock::now() - r0));
        }
      } catch (const std::exception& e) {
        // A new file is not readable until its schema is committed: only later errors count.
        if (!o.fresh || !readMs.empty()) readError = e.what();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });

  std::vector<WriterResult> results;
  for (std::size_t i = 0; i < pids.size(); ++i) {
    std::string text;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fds[i], buf, sizeof buf)) > 0) text.append(buf, static_cast<std::size_t>(n));
    ::close(fds[i]);
    int status = 0;
    waitpid(pids[i], &status, 0);
    results.push_back(parse(text));
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) results.back().error += "writer process died; ";
  }
  const double wallS = std::chrono::duration<double>(Clock::now() - t0).count();
  stop = true;
  reader.join();

  int ok = 0, failed = 0;
  std::uint64_t events = 0;
  double longestWait = 0;
  std::vector<double> imports;
  for (const auto& r : results) {
    ok += r.ok;
    failed += o.imports - r.ok;
    events += r.events;
    longestWait = std::max(longestWait, r.longestWaitMs);
    imports.insert(imports.end(), r.importMs.begin(), r.importMs.end());
    if (!r.error.empty()) std::printf("writer error: %s\n", r.error.c_str());
  }
  std::sort(imports.begin(), imports.end());
  std::sort(readMs.begin(), readMs.end());
  auto pct = [](const std::vector<double>& v, double q) {
    return v.empty() ? 0.0 : v[std::min(v.size() - 1, static_cast<std::size_t>(q * static_cast<double>(v.size())))];
  };

  shardscope::core::TraceStore check(db, shardscope::core::Database::Mode::ReadOnly);
  const std::string integrity = check.integrityCheck();
  const std::size_t runs = check.runs().size();
  const std::size_t expectedRuns = static_cast<std::size_t>(o.writers * o.imports) + (o.fresh ? 0 : 1);

  std::printf("imports: %d ok, %d failed in %.2f s: %.2f imports/s, %.0f events/s in aggregate\n", ok, failed, wallS, ok / wallS,
              static_cast<double>(events) / wallS);
  std::printf("one import: min %.0f ms, median %.0f ms, max %.0f ms (each holds the write lock for its transaction)\n",
              imports.empty() ? 0 : imports.front(), pct(imports, 0.5), imports.empty() ? 0 : imports.back());
  std::printf("longest wait for another writer's lock: %.0f ms\n", longestWait);
  std::printf("reader: %zu reads, median %.1f ms, p99 %.1f ms, slowest %.1f ms%s%s\n", readMs.size(), pct(readMs, 0.5),
              pct(readMs, 0.99), readMs.empty() ? 0 : readMs.back(), readError.empty() ? "" : "; error: ", readError.c_str());
  std::printf("file: integrity_check %s, %zu runs (expected %zu)\n", integrity.c_str(), runs, expectedRuns);
  if (!o.keep && tmpDir) fs::remove_all(o.dir);
  return (failed == 0 && integrity == "ok" && runs == expectedRuns && readError.empty()) ? 0 : 1;
}
