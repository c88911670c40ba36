#include "app/cli/commands.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdlib>
#include <memory>
#include <optional>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <sstream>
#include <string_view>

#include "app/cli/command_table.h"
#include "app/cli/protocol.h"
#include "app/cli/terminal_progress.h"
#include "core/analysis/bottlenecks.h"
#include "core/analysis/collectives.h"
#include "core/analysis/comparison.h"
#include "core/analysis/hta_metrics.h"
#include "core/analysis/memory_peaks.h"
#include "core/analysis/run_figures.h"
#include "core/util/units.h"
#include "core/analysis/run_analysis.h"
#include "core/analysis/step_breakdown.h"
#include "core/analysis/stragglers.h"
#include "core/export/kineto_exporter.h"
#include "core/export/perfetto_exporter.h"
#include "core/import/kineto_importer.h"
#include "core/import/trace_reader.h"
#include "core/merge/job_merge.h"
#include "core/storage/database_check.h"
#include "core/storage/import_log.h"
#include "core/storage/run_copy.h"
#include "core/storage/trace_store.h"
#include "core/util/csv.h"
#include "core/util/error.h"
#include "core/util/json.h"

namespace shardscope::cli {

std::optional<core::RunId> parseRunId(const std::string& s) {
  try {
    std::size_t used = 0;
    const long long v = std::stoll(s, &used);
    if (used != s.size() || v <= 0) return std::nullopt;
    return core::RunId{v};
  } catch (...) {
    return std::nullopt;
  }
}

namespace {

using core::JsonValue;

const std::vector<OptionSpec> kCommon = {
    {"db", true, "database file (default: shardscope.db in the current directory)"},
    {"json", false, "machine-readable JSON on stdout"},
    {"busy-timeout", true,
     "seconds to wait for another process writing to the database (default 600, or $SHARDSCOPE_BUSY_TIMEOUT)"},
    {"help", false, "show this help"},
};

std::string dbPath(const Args& a) { return a.get("db", "shardscope.db"); }

std::string durationText(core::TimeNs ns) {
  char buf[64];
  const double v = static_cast<double>(ns);
  if (ns >= 1'000'000'000)
    std::snprintf(buf, sizeof buf, "%.3f s", v / 1e9);
  else if (ns >= 1'000'000)
    std::snprintf(buf, sizeof buf, "%.3f ms", v / 1e6);
  else if (ns >= 1'000)
    std::snprintf(buf, sizeof buf, "%.3f us", v / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%" PRId64 " ns", ns);
  return buf;
}

// Resolves --run (default: the latest run). Throws a usage-style Error when absent.
core::RunId resolveRun(core::TraceStore& store, const Args& a) {
  if (a.has("run")) {
    auto id = parseRunId(a.get("run"));
    if (!id) throw core::Error("--run expects a run id (a positive integer), got '" + a.get("run") + "'");
    if (!store.run(*id)) throw core::Error(store.path() + ": no run with id " + std::to_string(id->value()));
    return *id;
  }
  auto latest = store.latestRunId();
  if (!latest) throw core::Error(store.path() + ": the database has no runs (import a trace first)");
  return *latest;
}

// ------------------------------------------------------------------------------------------------

// A memory snapshot's figures (core::SnapshotFigures) as `analyze` prints them.
void printSnapshotFigures(std::ostream& os, const core::SnapshotFigures& f) {
  auto b = [](std::int64_t v) { return core::formatBytes(static_cast<double>(v)); };
  os << "  Memory snapshot, rank " << f.rank << " cuda:" << f.device << " (" << f.events << " allocator events)\n";
  os << "    peak active " << b(f.peakActiveBytes) << " (" << f.peakActiveBytes << " bytes) at event " << f.peakActiveSeq
     << ", peak reserved " << b(f.peakReservedBytes) << "; at the active peak: reserved " << b(f.reservedAtPeakBytes)
     << ", fragmentation " << b(f.fragmentationBytes) << ", " << f.allocationsAtPeak << " allocations, " << b(f.priorActiveBytes)
     << " from before recording\n";
  if (!f.categories.empty()) {
    std::string line = "    by category:";
    for (const auto& [cat, bytes] : f.categories) line += " " + cat + " " + b(bytes) + ",";
    line.pop_back();
    os << line << "\n";
  }
  if (f.topAtPeak.empty()) return;
  os << "    top allocations alive at the peak, by stack:\n";
  for (const auto& g : f.topAtPeak) {
    char line[1024];
    std::snprintf(line, sizeof line, "    %12s %5lld x  %-15s %s%s%s\n", b(g.bytes).c_str(), static_cast<long long>(g.count),
                  g.category.c_str(), g.owner.c_str(), g.site.empty() || g.site == g.owner ? "" : "  via ",
                  g.site == g.owner ? "" : g.site.c_str());
    os << line;
  }
}

int cmdImport(const Args& a, core::CancelToken& cancel) {
  if (a.positional.empty()) throw std::invalid_argument("import: give at least one trace file or directory");
  const auto files = core::collectTraceFiles(a.positional);
  core::TraceStore store(dbPath(a));
  // The reader is chosen by each file's content (core/import/trace_reader.h), whatever its name.
  const core::TraceReader& reader = core::chooseReader(files, store.path());
  TerminalProgress bar;
  core::ImportOptions opt;
  opt.runName = a.get("name");
  opt.separateRuns = a.has("separate-runs");
  opt.keepArgs = !a.has("no-args");
  opt.progress = EventStream::instance().wrap(bar.callback());
  opt.cancel = &cancel;
  if (a.has("attach-to")) {
    if (reader.name() != "memsnap")
      throw core::Error("import --attach-to: only a memory snapshot attaches to a run; " + files.front() + " is a " +
                        std::string(reader.name()) + " file");
    const auto id = parseRunId(a.get("attach-to"));
    if (!id) throw core::Error("--attach-to expects a run id (a positive integer), got '" + a.get("attach-to") + "'");
    opt.attachTo = *id;
    const std::string r = a.has("rank") ? a.get("rank") : "0";
    char* end = nullptr;
    const long v = std::strtol(r.c_str(), &end, 10);
    if (r.empty() || *end || v < 0 || v > 1'000'000) throw core::Error("--rank expects a rank number, got '" + r + "'");
    opt.attachRank = static_cast<int>(v);
  } else if (a.has("rank")) {
    throw core::Error("import --rank: give it with --attach-to RUN");
  }
  const auto res = reader.import(store, files, opt);
  bar.finish();
  for (const auto& w : res.warnings) EventStream::instance().warning(w);  // --progress json (protocol.h)
  for (auto id : res.runIds) EventStream::instance().run(id, store.run(id) ? store.run(id)->strategy : "", "completed");
  const double eps = res.seconds > 0 ? static_cast<double>(res.events) / res.seconds : 0;
  if (a.has("json")) {
    JsonValue out = JsonValue::object();
    JsonValue runs = JsonValue::array();
    for (auto id : res.runIds) runs.push(JsonValue::number(static_cast<std::int64_t>(id.value())));
    out.set("db", JsonValue::string(store.path()));
    out.set("format", JsonValue::string(std::string(reader.name())));
    out.set("runs", std::move(runs));
    out.set("events", JsonValue::number(static_cast<std::int64_t>(res.events)));
    out.set("bytes", JsonValue::number(static_cast<std::int64_t>(res.bytes)));
    out.set("json_bytes", JsonValue::number(static_cast<std::int64_t>(res.jsonBytes)));
    out.set("seconds", JsonValue::number(res.seconds));
    out.set("events_per_second", JsonValue::number(eps));
    out.set("lock_wait_seconds", JsonValue::number(static_cast<double>(store.longestLockWait().count()) / 1000.0));
    JsonValue fileList = JsonValue::array();
    for (const auto& f : res.files) {
      JsonValue fj = JsonValue::object();
      fj.set("path", JsonValue::string(f.path));
      fj.set("rank", JsonValue::number(static_cast<std::int64_t>(f.rank)));
      fj.set("world_size", JsonValue::number(static_cast<std::int64_t>(f.worldSize)));
      fj.set("trace_events", JsonValue::number(static_cast<std::int64_t>(f.traceEvents)));
      fj.set("events", JsonValue::number(static_cast<std::int64_t>(f.events)));
      fj.set("kernels", JsonValue::number(static_cast<std::int64_t>(f.kernels)));
      fj.set("nccl_kernels", JsonValue::number(static_cast<std::int64_t>(f.ncclKernels)));
      fj.set("steps", JsonValue::number(static_cast<std::int64_t>(f.steps)));
      fj.set("memory_events", JsonValue::number(static_cast<std::int64_t>(f.memoryEvents)));
      fj.set("counter_samples", JsonValue::number(static_cast<std::int64_t>(f.counters)));
      fj.set("launch_flows", JsonValue::number(static_cast<std::int64_t>(f.launchFlows)));
      fj.set("flows", JsonValue::number(static_cast<std::int64_t>(f.flows)));
      fj.set("skipped", JsonValue::number(static_cast<std::int64_t>(f.skipped)));
      fileList.push(std::move(fj));
    }
    out.set("files", std::move(fileList));
    JsonValue warnings = JsonValue::array();
    for (const auto& w : res.warnings) warnings.push(JsonValue::string(w));
    out.set("warnings", std::move(warnings));
    std::cout << out.dump() << "\n";
  } else {
    for (const auto& w : res.warnings) std::cerr << "warning: " << w << "\n";
    for (const auto& f : res.files)
      std::cout << "  rank " << f.rank << "  " << std::filesystem::path(f.path).filename().string() << ": " << f.events
                << " events, " << f.kernels << " kernels (" << f.ncclKernels << " NCCL), " << f.steps << " steps, "
                << f.memoryEvents << " memory events\n";
    std::cout << "imported " << res.files.size() << " file(s) into run" << (res.runIds.size() > 1 ? "s" : "");
    for (auto id : res.runIds) std::cout << " " << id.value();
    std::cout << " of " << store.path() << ": " << res.events << " events in " << std::fixed;
    std::cout.precision(2);
    std::cout << res.seconds << " s (" << core::formatSi(eps, "events/s") << ", "
              << core::formatSi(res.seconds > 0 ? static_cast<double>(res.jsonBytes) / res.seconds : 0, "B/s") << " of input)\n";
  }
  return kOk;
}

JsonValue runJson(const core::RunSummary& s, bool withTracks) {
  JsonValue r = JsonValue::object();
  r.set("id", JsonValue::number(static_cast<std::int64_t>(s.run.id.value())));
  r.set("name", JsonValue::string(s.run.name));
  r.set("source", JsonValue::string(std::string(core::toString(s.run.source))));
  r.set("kind", JsonValue::string(std::string(core::runKind(s.run))));
  r.set("strategy", JsonValue::string(s.run.strategy));
  r.set("status", JsonValue::string(std::string(core::toString(s.run.status))));
  if (!s.run.failureReason.empty()) r.set("failure_reason", JsonValue::string(s.run.failureReason));
  r.set("created_at", JsonValue::string(s.run.createdAt));
  r.set("world_size", JsonValue::number(static_cast<std::int64_t>(s.run.worldSize)));
  r.set("events", JsonValue::number(s.eventCount));
  r.set("counter_samples", JsonValue::number(s.counterSamples));
  r.set("steps", JsonValue::number(s.stepCount));
  r.set("collectives", JsonValue::number(s.collectiveCount));
  if (s.startNs) r.set("start_ns", JsonValue::number(*s.startNs));
  if (s.endNs) r.set("end_ns", JsonValue::number(*s.endNs));
  if (s.startNs && s.endNs) r.set("span_ns", JsonValue::number(*s.endNs - *s.startNs));
  JsonValue ranks = JsonValue::array();
  for (const auto& rk : s.ranks) {
    JsonValue rj = JsonValue::object();
    rj.set("rank", JsonValue::number(static_cast<std::int64_t>(rk.rank)));
    rj.set("device", JsonValue::string(rk.device));
    rj.set("source_file", JsonValue::string(rk.sourceFile));
    std::int64_t events = 0, tracks = 0;
    JsonValue tj = JsonValue::array();
    for (const auto& t : s.tracks) {
      if (t.track.rankId != rk.id) continue;
      ++tracks;
      if (t.track.kind != core::TrackKind::Counter) events += t.eventCount;
      if (withTracks) {
        JsonValue one = JsonValue::object();
        one.set("id", JsonValue::number(static_cast<std::int64_t>(t.track.id.value())));
        one.set("kind", JsonValue::string(std::string(core::toString(t.track.kind))));
        one.set("name", JsonValue::string(t.track.name));
        one.set("events", JsonValue::number(t.eventCount));
        if (t.minStartNs) one.set("start_ns", JsonValue::number(*t.minStartNs));
        if (t.maxEndNs) one.set("end_ns", JsonValue::number(*t.maxEndNs));
        tj.push(std::move(one));
      }
    }
    rj.set("tracks", withTracks ? std::move(tj) : JsonValue::number(tracks));
    rj.set("events", JsonValue::number(events));
    ranks.push(std::move(rj));
  }
  r.set("ranks", std::move(ranks));
  return r;
}

// Whether the file reads (PRAGMA quick_check on a fresh connection) and, if not, why: exit 0 when
// it is healthy, 3 (kDatabase) otherwise. What the app says after a failed read.
int cmdCheck(const Args& a, core::CancelToken&) {
  const std::string path = dbPath(a);
  const double wait = a.getDouble("wait", 5.0);
  const core::DatabaseHealth h =
      core::checkDatabase(path, std::chrono::milliseconds(static_cast<std::int64_t>(std::max(0.0, wait) * 1000.0)));
  if (a.has("json")) {
    JsonValue out = JsonValue::object();
    out.set("db", JsonValue::string(path));
    out.set("state", JsonValue::string(core::DatabaseHealth::stateName(h.state)));
    out.set("detail", JsonValue::string(h.detail));
    out.set("message", JsonValue::string(h.message(path)));
    std::cout << out.dump() << "\n";
  } else {
    (h.ok() ? std::cout : std::cerr) << h.message(path) << "\n";
  }
  return h.ok() ? kOk : kDatabase;
}

int cmdInfo(const Args& a, core::CancelToken& cancel) {
  core::TraceStore store(dbPath(a), core::Database::Mode::ReadOnly);
  std::vector<core::RunId> ids;
  if (a.has("run")) {
    ids.push_back(resolveRun(store, a));
  } else {
    for (const auto& r : store.runs()) ids.push_back(r.id);
  }
  const bool detail = a.has("run");
  if (a.has("json")) {
    JsonValue out = JsonValue::object();
    out.set("db", JsonValue::string(store.path()));
    out.set("schema_version", JsonValue::number(store.schemaVersion()));
    JsonValue runs = JsonValue::array();
    for (auto id : ids) {
      JsonValue r = runJson(store.summary(id), detail);
      const auto log = core::importLog(store, id);
      if (!log.empty()) {
        JsonValue files = JsonValue::array();
        for (const auto& e : log) {
          JsonValue f = JsonValue::object();
          f.set("path", JsonValue::string(e.path));
          f.set("format", JsonValue::string(e.format));
          if (e.rank) f.set("rank", JsonValue::number(static_cast<std::int64_t>(*e.rank)));
          f.set("bytes", JsonValue::number(e.bytes));
          f.set("events", JsonValue::number(e.events));
          f.set("skipped", JsonValue::number(e.skipped));
          JsonValue reasons = JsonValue::object();
          for (const auto& [reason, n] : e.skippedByReason) reasons.set(reason, JsonValue::number(n));
          f.set("skipped_by_reason", std::move(reasons));
          JsonValue warnings = JsonValue::array();
          for (const auto& w : e.warnings) warnings.push(JsonValue::string(w));
          f.set("warnings", std::move(warnings));
          f.set("seconds", JsonValue::number(e.seconds));
          files.push(std::move(f));
        }
        r.set("import_log", std::move(files));
      }
      // One run asked for: its figures too (run_figures.h; a pass over its events).
      if (detail) r.set("figures", core::toJson(core::computeRunFigures(store, id, &cancel)));
      runs.push(std::move(r));
    }
    out.set("runs", std::move(runs));
    std::cout << out.dump() << "\n";
    return kOk;
  }
  std::cout << store.path() << ": " << ids.size() << " run(s)\n";
  for (auto id : ids) {
    const auto s = store.summary(id);
    std::cout << "\nrun " << s.run.id.value() << "  " << s.run.name << "  [" << core::runKind(s.run) << ", "
              << core::toString(s.run.status) << (s.run.strategy.empty() ? "" : ", " + s.run.strategy) << "]\n";
    if (!s.run.failureReason.empty()) std::cout << "  failure: " << s.run.failureReason << "\n";
    std::cout << "  created " << s.run.createdAt << ", world size " << s.run.worldSize << ", " << s.ranks.size()
              << " rank(s) imported, " << s.tracks.size() << " tracks\n";
    std::cout << "  " << s.eventCount << " events, " << s.collectiveCount << " collective kernels/spans, " << s.stepCount
              << " step windows, " << s.counterSamples << " counter samples";
    if (s.startNs && s.endNs) std::cout << ", span " << durationText(*s.endNs - *s.startNs);
    std::cout << "\n";
    if (detail) {  // the figures every surface shows (run_figures.h)
      const core::RunFigures f = core::computeRunFigures(store, id, &cancel);
      if (f.stepTimeMs)
        std::cout << "  step time " << core::formatFixed(*f.stepTimeMs, 2) << " ms (" << core::describeStepTime(f) << ")";
      if (f.tokensPerSecond) std::cout << ", " << core::formatFixed(*f.tokensPerSecond, 0) << " tokens/s";
      if (f.peakAllocatedBytes)
        std::cout << ", peak " << f.peakDevice << " memory " << core::formatBytes(static_cast<double>(*f.peakAllocatedBytes));
      if (f.stepTimeMs || f.peakAllocatedBytes) std::cout << "\n";
    }
    for (const auto& e : core::importLog(store, id)) {  // what each imported file gave
      std::cout << "  imported " << std::filesystem::path(e.path).filename().string() << " (" << e.format
                << (e.rank ? ", rank " + std::to_string(*e.rank) : std::string()) << "): " << e.events << " events, " << e.skipped
                << " skipped";
      const char* sep = " (";
      for (const auto& [reason, n] : e.skippedByReason) {
        std::cout << sep << reason << ": " << n;
        sep = ", ";
      }
      if (!e.skippedByReason.empty()) std::cout << ")";
      std::cout << ", " << e.warnings.size() << " warning(s), " << core::formatFixed(e.seconds, 2) << " s\n";
      for (const auto& w : e.warnings) std::cout << "    warning: " << w << "\n";
    }
    for (const auto& rk : s.ranks) {
      std::int64_t events = 0, tracks = 0;
      for (const auto& t : s.tracks)
        if (t.track.rankId == rk.id) {
          ++tracks;
          if (t.track.kind != core::TrackKind::Counter) events += t.eventCount;
        }
      std::cout << "  rank " << rk.rank << " (" << rk.device << "): " << tracks << " tracks, " << events << " events"
                << (rk.sourceFile.empty() ? "" : "  <- " + std::filesystem::path(rk.sourceFile).filename().string()) << "\n";
      if (!detail) continue;
      for (const auto& t : s.tracks) {
        if (t.track.rankId != rk.id) continue;
        std::cout << "    " << core::toString(t.track.kind) << "  " << t.track.name << ": " << t.eventCount
                  << (t.track.kind == core::TrackKind::Counter ? " samples" : " events");
        if (t.minStartNs && t.maxEndNs) std::cout << ", span " << durationText(*t.maxEndNs - *t.minStartNs);
        std::cout << "\n";
      }
    }
  }
  return kOk;
}

// "3,5,8" -> run ids (empty -> none); a bad item is a usage error naming it.
std::vector<core::RunId> parseRunList(const std::string& list) {
  std::vector<core::RunId> ids;
  for (std::size_t pos = 0; pos <= list.size();) {
    const std::size_t comma = std::min(list.find(',', pos), list.size());
    const std::string item = list.substr(pos, comma - pos);
    if (!item.empty()) {
      auto id = parseRunId(item);
      if (!id) throw std::invalid_argument("--runs expects run ids separated by commas, got '" + item + "'");
      ids.push_back(*id);
    }
    pos = comma + 1;
  }
  return ids;
}

int cmdExport(const Args& a, core::CancelToken& cancel) {
  const std::string format = a.get("format");
  const std::string out = a.get("o", a.get("output"));
  if (format != "kineto" && format != "perfetto" && format != "db")
    throw std::invalid_argument("export: --format must be kineto, perfetto or db");
  if (out.empty()) throw std::invalid_argument("export: -o OUT is required");
  if (format == "db") {
    // Runs into a new database (a run travels off a cluster as one file): --runs, else --run, else the latest.
    std::vector<core::RunId> ids = parseRunList(a.get("runs"));
    if (ids.empty()) {
      core::TraceStore store(dbPath(a), core::Database::Mode::ReadOnly);
      ids.push_back(resolveRun(store, a));
    }
    const core::RunCopyResult res = core::copyRunsToNewDatabase(dbPath(a), ids, out, &cancel);
    if (a.has("json")) {
      JsonValue j = JsonValue::object();
      JsonValue runs = JsonValue::array();
      for (core::RunId id : res.runs) runs.push(JsonValue::number(static_cast<std::int64_t>(id.value())));
      j.set("runs", std::move(runs));
      j.set("format", JsonValue::string("db"));
      j.set("file", JsonValue::string(out));
      j.set("rows", JsonValue::number(res.rows));
      j.set("bytes", JsonValue::number(res.bytes));
      std::cout << j.dump() << "\n";
    } else {
      std::cout << "exported " << res.runs.size() << " run(s) (" << res.rows << " rows, "
                << core::formatBytes(static_cast<double>(res.bytes)) << ") into the new database " << out << "\n";
    }
    return kOk;
  }
  core::TraceStore store(dbPath(a), core::Database::Mode::ReadOnly);
  const core::RunId run = resolveRun(store, a);
  TerminalProgress bar;
  core::ExportOptions opt;
  opt.progress = bar.callback();
  opt.cancel = &cancel;
  opt.gzip = !a.has("no-gzip");
  const core::ExportResult res =
      format == "kineto" ? core::exportKineto(store, run, out, opt) : core::exportPerfetto(store, run, out, opt);
  bar.finish();
  if (a.has("json")) {
    JsonValue j = JsonValue::object();
    j.set("run", JsonValue::number(static_cast<std::int64_t>(run.value())));
    j.set("format", JsonValue::string(format));
    JsonValue files = JsonValue::array();
    for (const auto& f : res.files) files.push(JsonValue::string(f));
    j.set("files", std::move(files));
    j.set("events", JsonValue::number(static_cast<std::int64_t>(res.events)));
    j.set("bytes", JsonValue::number(static_cast<std::int64_t>(res.bytes)));
    std::cout << j.dump() << "\n";
  } else {
    std::cout << "exported run " << run.value() << " (" << res.events << " events) as " << format << ":\n";
    for (const auto& f : res.files) std::cout << "  " << f << "\n";
  }
  return kOk;
}

// `merge --db OUT IN.db...`: the per-node databases of multi-node jobs into one (core/merge/job_merge.h).
int cmdMerge(const Args& a, core::CancelToken& cancel) {
  if (a.positional.empty()) throw std::invalid_argument("merge: give the databases to merge (IN.db...)");
  core::MergeOptions opt;
  opt.align = core::clockAlignFromString(a.get("clock-align", "auto"));
  opt.partial = a.has("partial");
  TerminalProgress bar;
  const core::MergeResult res = core::mergeDatabases(dbPath(a), a.positional, opt, &cancel, bar.callback());
  bar.finish();
  if (a.has("json")) {
    JsonValue j = JsonValue::object();
    j.set("db", JsonValue::string(dbPath(a)));
    JsonValue jobs = JsonValue::array();
    for (const auto& m : res.jobs) {
      JsonValue o = JsonValue::object();
      o.set("job_id", JsonValue::string(m.jobId));
      o.set("run", JsonValue::number(static_cast<std::int64_t>(m.run.value())));
      o.set("skipped", JsonValue::boolean(m.skipped));
      o.set("nnodes", JsonValue::number(static_cast<std::int64_t>(m.nnodes)));
      o.set("ranks", JsonValue::number(static_cast<std::int64_t>(m.ranks)));
      o.set("status", JsonValue::string(std::string(core::toString(m.status))));
      o.set("failure_reason", JsonValue::string(m.failureReason));
      o.set("events", JsonValue::number(m.events));
      JsonValue nodes = JsonValue::array();
      for (const auto& n : m.nodes) {
        JsonValue x = JsonValue::object();
        x.set("node_rank", JsonValue::number(static_cast<std::int64_t>(n.nodeRank)));
        x.set("source_file", JsonValue::string(n.sourceFile));
        x.set("source_run", JsonValue::number(static_cast<std::int64_t>(n.sourceRun.value())));
        x.set("host", JsonValue::string(n.host));
        x.set("status", JsonValue::string(std::string(core::toString(n.status))));
        x.set("ranks", JsonValue::number(static_cast<std::int64_t>(n.ranks)));
        x.set("clock_offset_ns", JsonValue::number(static_cast<std::int64_t>(n.clockOffsetNs)));
        x.set("clock_offset_method", JsonValue::string(n.offsetMethod));
        nodes.push(std::move(x));
      }
      o.set("nodes", std::move(nodes));
      JsonValue miss = JsonValue::array();
      for (int n : m.missingNodes) miss.push(JsonValue::number(static_cast<std::int64_t>(n)));
      o.set("missing_nodes", std::move(miss));
      jobs.push(std::move(o));
    }
    j.set("jobs", std::move(jobs));
    JsonValue copied = JsonValue::array();
    for (const auto& c : res.copied) {
      JsonValue o = JsonValue::object();
      o.set("source_file", JsonValue::string(c.sourceFile));
      o.set("source_run", JsonValue::number(static_cast<std::int64_t>(c.sourceRun.value())));
      o.set("run", JsonValue::number(static_cast<std::int64_t>(c.run.value())));
      o.set("skipped", JsonValue::boolean(c.skipped));
      o.set("events", JsonValue::number(c.events));
      copied.push(std::move(o));
    }
    j.set("copied", std::move(copied));
    j.set("events", JsonValue::number(res.events));
    j.set("seconds", JsonValue::number(res.seconds));
    std::cout << j.dump() << "\n";
    return kOk;
  }
  for (const auto& m : res.jobs) {
    if (m.skipped) {
      std::cout << "job " << m.jobId << ": already merged as run " << m.run.value() << " (skipped)\n";
      continue;
    }
    std::cout << "job " << m.jobId << ": " << m.nodes.size() << " of " << m.nnodes << " node(s), " << m.ranks << " ranks -> run "
              << m.run.value() << " (" << core::toString(m.status);
    if (!m.failureReason.empty()) std::cout << ": " << m.failureReason;
    std::cout << ")\n";
    for (const auto& n : m.nodes)
      std::cout << "  node " << n.nodeRank << ": " << n.sourceFile << " run " << n.sourceRun.value() << ", " << n.ranks
                << " rank(s) on " << n.host << ", " << core::toString(n.status) << ", clock offset "
                << core::formatFixed(static_cast<double>(n.clockOffsetNs) / 1e6, 3) << " ms (" << n.offsetMethod << ")\n";
  }
  int copied = 0, skipped = 0;
  for (const auto& c : res.copied) (c.skipped ? skipped : copied)++;
  if (copied || skipped)
    std::cout << copied << " other run(s) copied" << (skipped ? ", " + std::to_string(skipped) + " already there (skipped)" : "")
              << "\n";
  std::cout << res.events << " events written into " << dbPath(a) << " in " << core::formatFixed(res.seconds, 2) << " s\n";
  return kOk;
}

int cmdAnalyze(const Args& a, core::CancelToken& cancel) {
  core::TraceStore store(dbPath(a), core::Database::Mode::ReadOnly);
  std::vector<core::RunId> ids;
  if (a.has("all-runs")) {
    for (const auto& r : store.runs()) ids.push_back(r.id);
  } else {
    ids.push_back(resolveRun(store, a));
  }
  JsonValue jsonRuns = JsonValue::array();
  if (a.has("csv"))
    std::cout << "run,rank,comm_comp_overlap_pctg,idle_time_us,compute_time_us,non_compute_time_us,kernel_time_us,"
                 "idle_time_pctg,compute_time_pctg,non_compute_time_pctg\n";
  for (core::RunId id : ids) {
    const auto run = store.run(id);
    // Every analysis from one pass over the store, one rank at a time.
    const core::RunAnalysis analysis = core::analyzeRun(store, id, {}, &cancel);
    const core::HtaFigures& f = analysis.hta;
    const std::vector<core::StepBreakdown>& steps = analysis.steps;
    const std::vector<core::CollectiveStats>& colls = analysis.collectives;
    const std::vector<core::MemoryPeak>& peaks = analysis.memoryPeaks;
    const std::vector<core::Bottleneck>& bottlenecks = analysis.bottlenecks;
    const core::StragglerReport& stragglers = analysis.stragglers;
    if (a.has("json")) {
      JsonValue rj = JsonValue::object();
      rj.set("run", JsonValue::number(static_cast<std::int64_t>(id.value())));
      rj.set("name", JsonValue::string(run->name));
      JsonValue ranks = JsonValue::array();
      for (const auto& r : f.ranks) {
        JsonValue x = JsonValue::object();
        x.set("rank", JsonValue::number(static_cast<std::int64_t>(r.rank)));
        x.set("comm_comp_overlap_pctg", r.overlapPct ? JsonValue::number(*r.overlapPct) : JsonValue());
        x.set("idle_time_us", JsonValue::number(r.idleUs));
        x.set("compute_time_us", JsonValue::number(r.computeUs));
        x.set("non_compute_time_us", JsonValue::number(r.nonComputeUs));
        x.set("kernel_time_us", JsonValue::number(r.kernelTimeUs));
        x.set("idle_time_pctg", JsonValue::number(r.idlePct));
        x.set("compute_time_pctg", JsonValue::number(r.computePct));
        x.set("non_compute_time_pctg", JsonValue::number(r.nonComputePct));
        JsonValue its = JsonValue::array();
        for (auto i : r.iterations) its.push(JsonValue::number(i));
        x.set("iterations", std::move(its));
        ranks.push(std::move(x));
      }
      rj.set("hta_ranks", std::move(ranks));
      JsonValue kt = JsonValue::array();
      for (const auto& k : f.kernelTypes) {
        JsonValue x = JsonValue::object();
        x.set("kernel_type", JsonValue::string(k.label));
        x.set("sum_us", JsonValue::number(k.sumUs));
        x.set("percentage", JsonValue::number(k.pct));
        kt.push(std::move(x));
      }
      rj.set("hta_kernel_type_breakdown", std::move(kt));
      const core::RunFigures rf = core::runFigures(store, id, steps, peaks);
      rj.set("figures", core::toJson(rf));
      JsonValue sj = JsonValue::array();
      for (const auto& b : steps) {
        JsonValue x = JsonValue::object();
        x.set("rank", JsonValue::number(static_cast<std::int64_t>(b.rank)));
        x.set("step", JsonValue::number(b.step));
        x.set("step_ns", JsonValue::number(b.stepNs));
        x.set("compute_ns", JsonValue::number(b.computeNs));
        x.set("comm_ns", JsonValue::number(b.commNs));
        x.set("overlapped_comm_ns", JsonValue::number(b.overlappedCommNs));
        x.set("exposed_comm_ns", JsonValue::number(b.exposedCommNs));
        x.set("other_busy_ns", JsonValue::number(b.otherBusyNs));
        x.set("idle_ns", JsonValue::number(b.idleNs));
        x.set("overlap", b.overlap ? JsonValue::number(*b.overlap) : JsonValue());
        x.set("window", JsonValue::string(core::describe(b.window)));
        x.set("counted", JsonValue::boolean(rf.steps.counts(b.step)));
        sj.push(std::move(x));
      }
      rj.set("steps", std::move(sj));
      JsonValue cj = JsonValue::array();
      for (const auto& c : colls) {
        JsonValue x = JsonValue::object();
        x.set("op", JsonValue::string(std::string(core::toString(c.op))));
        x.set("process_group", JsonValue::string(c.processGroup));
        x.set("group_size", JsonValue::number(static_cast<std::int64_t>(c.groupSize)));
        x.set("count", JsonValue::number(c.count));
        x.set("bytes", JsonValue::number(c.bytes));
        x.set("total_ns", JsonValue::number(c.totalNs));
        x.set("mean_ns", JsonValue::number(c.meanNs));
        x.set("exposed_ns", JsonValue::number(c.exposedNs));
        x.set("algbw_gbps", c.algBwGBps ? JsonValue::number(*c.algBwGBps) : JsonValue());
        x.set("busbw_gbps", c.busBwGBps ? JsonValue::number(*c.busBwGBps) : JsonValue());
        cj.push(std::move(x));
      }
      rj.set("collectives", std::move(cj));
      JsonValue mj = JsonValue::array();
      for (const auto& p : peaks) {
        JsonValue x = JsonValue::object();
        x.set("rank", JsonValue::number(static_cast<std::int64_t>(p.rank)));
        x.set("device_type", JsonValue::number(static_cast<std::int64_t>(p.deviceType)));
        x.set("device_id", JsonValue::number(static_cast<std::int64_t>(p.deviceId)));
        x.set("peak_allocated_bytes", JsonValue::number(p.peakAllocatedBytes));
        x.set("allocated_at_ns", JsonValue::number(p.allocatedAtNs));
        x.set("peak_reserved_bytes", JsonValue::number(p.peakReservedBytes));
        x.set("reserved_at_ns", JsonValue::number(p.reservedAtNs));
        x.set("device", JsonValue::string(core::deviceName(p.deviceType, p.deviceId)));
        x.set("allocated_from_counter", JsonValue::boolean(p.allocatedFromCounter));
        x.set("from_memory_snapshot", JsonValue::boolean(p.fromSnapshot));
        x.set("step", p.step ? JsonValue::number(*p.step) : JsonValue());
        x.set("operation", JsonValue::string(p.operation));
        x.set("annotation", JsonValue::string(p.annotation));
        if (!p.breakdown.empty()) {
          JsonValue bd = JsonValue::object();
          for (const auto& [cat, bytes] : p.breakdown) bd.set(cat, JsonValue::number(bytes));
          x.set("breakdown_at_peak", std::move(bd));
        }
        mj.push(std::move(x));
      }
      rj.set("memory_peaks", std::move(mj));
      JsonValue snapj = JsonValue::array();
      for (const auto& snap : analysis.memorySnapshots) snapj.push(snap.toJson());
      rj.set("memory_snapshots", std::move(snapj));
      JsonValue bj = JsonValue::array();
      for (const auto& b : bottlenecks) {
        JsonValue x = JsonValue::object();
        x.set("rank", JsonValue::number(static_cast<std::int64_t>(b.rank)));
        x.set("op", JsonValue::string(std::string(core::toString(b.op))));
        x.set("step", b.step ? JsonValue::number(*b.step) : JsonValue());
        x.set("start_ns", JsonValue::number(b.startNs));
        x.set("duration_ns", JsonValue::number(b.durNs));
        x.set("exposed_ns", JsonValue::number(b.exposedNs));
        x.set("instances", JsonValue::number(b.instances));
        x.set("steps_seen", JsonValue::number(b.stepsSeen));
        x.set("total_exposed_ns", JsonValue::number(b.totalExposedNs));
        x.set("mean_exposed_ns", JsonValue::number(b.meanExposedNs));
        x.set("bytes", b.bytes ? JsonValue::number(*b.bytes) : JsonValue());
        x.set("elements", b.elements ? JsonValue::number(*b.elements) : JsonValue());
        x.set("process_group", JsonValue::string(b.processGroup));
        x.set("unit", JsonValue::string(b.unit));
        x.set("kernel", JsonValue::string(b.kernel));
        x.set("target", JsonValue::string(b.target));
        x.set("target_from", JsonValue::string(b.targetFrom));
        x.set("ranks", JsonValue::number(static_cast<std::int64_t>(b.ranks)));
        x.set("total_duration_ns", JsonValue::number(b.totalDurNs));
        x.set("cause", JsonValue::string(core::toString(b.cause)));
        JsonValue causes = JsonValue::array();
        for (const auto& c : b.causes) {
          JsonValue y = JsonValue::object();
          y.set("cause", JsonValue::string(core::toString(c.cause)));
          y.set("exposed_ns", JsonValue::number(c.exposedNs));
          y.set("instances", JsonValue::number(c.instances));
          causes.push(std::move(y));
        }
        x.set("causes", std::move(causes));
        x.set("late_rank", b.lateRank ? JsonValue::number(static_cast<std::int64_t>(*b.lateRank)) : JsonValue());
        x.set("wait_for_late_rank_ns", JsonValue::number(b.waitForLateRankNs));
        x.set("bus_bw_gbps", b.busBwGBps ? JsonValue::number(*b.busBwGBps) : JsonValue());
        x.set("link_bw_gbps", b.linkBwGBps ? JsonValue::number(*b.linkBwGBps) : JsonValue());
        x.set("link_knee_bytes", b.linkKneeBytes ? JsonValue::number(*b.linkKneeBytes) : JsonValue());
        if (b.tryIt) {
          JsonValue t = JsonValue::object(), set = JsonValue::object();
          for (const auto& [k, v] : b.tryIt->set) set.set(k, JsonValue::string(v));
          t.set("set", std::move(set));
          t.set("text", JsonValue::string(b.tryIt->text()));
          x.set("try_it", std::move(t));
        } else {
          x.set("try_it", JsonValue());
        }
        JsonValue rs = JsonValue::array(), ss = JsonValue::array();
        for (const auto& r : b.reasons) rs.push(JsonValue::string(r));
        for (const auto& g : b.suggestions) ss.push(JsonValue::string(g));
        x.set("reasons", std::move(rs));
        x.set("suggestions", std::move(ss));
        bj.push(std::move(x));
      }
      rj.set("collective_bottlenecks", std::move(bj));
      JsonValue st = JsonValue::object();
      st.set("matched_collectives", JsonValue::number(stragglers.matched));
      st.set("max_skew_ns", JsonValue::number(stragglers.maxSkewNs));
      st.set("straggler_rank",
             stragglers.straggler ? JsonValue::number(static_cast<std::int64_t>(*stragglers.straggler)) : JsonValue());
      st.set("most_waited_for",
             stragglers.mostWaitedFor ? JsonValue::number(static_cast<std::int64_t>(*stragglers.mostWaitedFor)) : JsonValue());
      st.set("p_value", JsonValue::number(stragglers.stragglerPValue));
      st.set("evidence", JsonValue::string(stragglers.evidence));
      st.set("total_wait_ns", JsonValue::number(stragglers.totalWaitNs));
      JsonValue gj = JsonValue::array();
      for (const auto& g : stragglers.groups) {
        JsonValue x = JsonValue::object();
        x.set("process_group", JsonValue::string(g.processGroup));
        x.set("op", JsonValue::string(std::string(core::toString(g.op))));
        x.set("matched", JsonValue::number(g.matched));
        x.set("ranks", JsonValue::number(static_cast<std::int64_t>(g.ranks)));
        x.set("mean_skew_ns", JsonValue::number(g.meanSkewNs));
        x.set("max_skew_ns", JsonValue::number(g.maxSkewNs));
        x.set("wait_ns", JsonValue::number(g.waitNs));
        x.set("most_often_last",
              g.mostOftenLast >= 0 ? JsonValue::number(static_cast<std::int64_t>(g.mostOftenLast)) : JsonValue());
        x.set("most_often_last_count", JsonValue::number(g.mostOftenLastCount));
        gj.push(std::move(x));
      }
      st.set("groups", std::move(gj));
      JsonValue sr = JsonValue::array();
      for (const auto& arr : stragglers.ranks) {
        JsonValue x = JsonValue::object();
        x.set("rank", JsonValue::number(static_cast<std::int64_t>(arr.rank)));
        x.set("clock_offset_ns", JsonValue::number(arr.clockOffsetNs));
        x.set("instances", JsonValue::number(arr.instances));
        x.set("last_count", JsonValue::number(arr.lastCount));
        x.set("late_ns", JsonValue::number(arr.lateNs));
        x.set("caused_wait_ns", JsonValue::number(arr.causedWaitNs));
        sr.push(std::move(x));
      }
      st.set("ranks", std::move(sr));
      rj.set("stragglers", std::move(st));
      jsonRuns.push(std::move(rj));
      continue;
    }
    if (a.has("csv")) {
      for (const auto& r : f.ranks)
        std::cout << id.value() << "," << r.rank << "," << (r.overlapPct ? core::formatFixed(*r.overlapPct, 2) : std::string())
                  << "," << r.idleUs << "," << r.computeUs << "," << r.nonComputeUs << "," << r.kernelTimeUs << ","
                  << core::formatFixed(r.idlePct, 2) << "," << core::formatFixed(r.computePct, 2) << ","
                  << core::formatFixed(r.nonComputePct, 2) << "\n";
      continue;
    }
    std::cout << "run " << id.value() << "  " << run->name << "\n";
    std::cout << "  HTA-compatible figures (HTA @f4d0062c rules: last ProfilerStep dropped when there are several)\n";
    std::cout << "  rank  overlap %   idle us (%)            compute us (%)         non-compute us (%)     GPU span us\n";
    bool anyWithoutGpu = false;
    for (const auto& r : f.ranks) {
      char line[256];
      if (r.kernelTimeUs == 0) {  // no GPU rows: HTA's figures are about GPU kernels, nothing to measure
        anyWithoutGpu = true;
        std::snprintf(line, sizeof line, "  %4d  %9s   %19s   %19s   %19s   %10s\n", r.rank, "n/a", "n/a", "n/a", "n/a", "n/a");
      } else {
        std::snprintf(line, sizeof line, "  %4d  %9s   %10lld (%6.2f)   %10lld (%6.2f)   %10lld (%6.2f)   %10lld\n", r.rank,
                      r.overlapPct ? core::formatFixed(*r.overlapPct, 2).c_str() : "n/a", static_cast<long long>(r.idleUs),
                      r.idlePct, static_cast<long long>(r.computeUs), r.computePct, static_cast<long long>(r.nonComputeUs),
                      r.nonComputePct, static_cast<long long>(r.kernelTimeUs));
      }
      std::cout << line;
    }
    if (anyWithoutGpu) std::cout << "  (n/a: a rank without GPU kernels; HTA's figures measure GPU kernels)\n";
    if (!f.kernelTypes.empty()) {
      std::cout << "  GPU kernel-type breakdown (all ranks)\n";
      for (const auto& k : f.kernelTypes) {
        char line[256];
        std::snprintf(line, sizeof line, "    %-58s %12lld us %6.1f %%\n", k.label.c_str(), static_cast<long long>(k.sumUs),
                      k.pct);
        std::cout << line;
      }
    }
    // The run's figures (core/analysis/run_figures.h): the same numbers as the run summary,
    // compare-runs and the reports; then the same rule per rank.
    const core::RunFigures rf = core::runFigures(store, id, steps, peaks);
    std::cout << "  Run figures (" << (rf.stepTimeMs ? core::describeStepTime(rf) : std::string("no steps")) << ")\n";
    auto pctOf = [](const std::optional<double>& v) { return v ? core::formatFixed(*v, 1) + " %" : std::string("n/a"); };
    std::cout << "    step time " << (rf.stepTimeMs ? core::formatFixed(*rf.stepTimeMs, 3) + " ms" : std::string("n/a"))
              << ", tokens/s " << (rf.tokensPerSecond ? core::formatFixed(*rf.tokensPerSecond, 0) : std::string("n/a"))
              << ", compute " << pctOf(rf.computePct) << ", communication " << pctOf(rf.commPct) << ", exposed "
              << pctOf(rf.exposedCommPct) << ", idle " << pctOf(rf.idlePct) << ", overlap " << pctOf(rf.overlapPct) << "\n";
    if (rf.peakAllocatedBytes)
      std::cout << "    peak " << rf.peakDevice << " memory " << core::formatBytes(static_cast<double>(*rf.peakAllocatedBytes))
                << " allocated, " << core::formatBytes(static_cast<double>(rf.peakReservedBytes.value_or(0)))
                << " reserved (largest rank)\n";
    {
      bool cpuOnly = true;
      for (const auto& r : f.ranks) cpuOnly = cpuOnly && r.kernelTimeUs == 0;
      std::cout << "  Per step (Shardscope): mean over the counted steps of each rank";
      if (cpuOnly && !steps.empty())
        std::cout << "\n  (no GPU rows: the device lanes are the CPU threads and communication lanes, so compute is CPU "
                     "operator time)";
      std::cout << "\n  (overlap differs from HTA's above: HTA's spans the whole trace without its last step, this one "
                   "averages the counted steps)\n";
    }
    std::cout << "  rank  steps   step ms   compute %   comm %   exposed comm %   idle %   overlap %\n";
    std::map<int, std::vector<core::StepBreakdown>> byRank;
    for (const auto& b : steps) byRank[b.rank].push_back(b);
    for (auto& [rank, list] : byRank) {
      const core::StepMeans m = core::meanOverSteps(list, rf.steps);
      if (m.rows == 0) continue;
      auto pct = [&](double x) { return m.stepNs > 0 ? core::formatFixed(100.0 * x / m.stepNs, 1) : std::string("-"); };
      char line[256];
      std::snprintf(line, sizeof line, "  %4d  %5lld  %8.3f   %9s  %7s   %14s  %6s   %9s\n", rank, static_cast<long long>(m.rows),
                    m.stepNs / 1e6, pct(m.computeNs).c_str(), pct(m.commNs).c_str(), pct(m.exposedNs).c_str(),
                    pct(m.idleNs).c_str(),
                    m.commNs > 0 ? core::formatFixed(100.0 * m.overlappedNs / m.commNs, 1).c_str() : "n/a");
      std::cout << line;
    }
    if (!colls.empty()) {
      std::cout << "  Collectives (Shardscope; bandwidths as nccl-tests defines them)\n";
      std::cout << "  op              group  ranks   count    total ms    mean us   exposed ms   algBw GB/s  busBw GB/s\n";
      for (const auto& c : colls) {
        char line[256];
        std::snprintf(line, sizeof line, "  %-15s %5s  %5d  %6lld  %10.3f  %9.1f  %11.3f  %11s %11s\n",
                      std::string(core::toString(c.op)).c_str(), c.processGroup.empty() ? "?" : c.processGroup.c_str(),
                      c.groupSize, static_cast<long long>(c.count), static_cast<double>(c.totalNs) / 1e6,
                      static_cast<double>(c.meanNs) / 1e3, static_cast<double>(c.exposedNs) / 1e6,
                      c.algBwGBps ? core::formatFixed(*c.algBwGBps, 1).c_str() : "-",
                      c.busBwGBps ? core::formatFixed(*c.busBwGBps, 1).c_str() : "-");
        std::cout << line;
      }
    }
    if (stragglers.matched > 0) {
      std::cout << "  Arrival at collectives (" << stragglers.matched
                << " matched across ranks; clocks aligned on collective ends)\n";
      std::cout << "  rank  clock offset us   last at   late total ms   others waited ms\n";
      for (const auto& arr : stragglers.ranks) {
        char line[256];
        std::snprintf(line, sizeof line, "  %4d  %15.1f   %4lld/%-4lld %13.3f   %16.3f%s\n", arr.rank,
                      static_cast<double>(arr.clockOffsetNs) / 1e3, static_cast<long long>(arr.lastCount),
                      static_cast<long long>(arr.instances), static_cast<double>(arr.lateNs) / 1e6,
                      static_cast<double>(arr.causedWaitNs) / 1e6,
                      stragglers.straggler && *stragglers.straggler == arr.rank ? "   <- straggler" : "");
        std::cout << line;
      }
      std::cout << "  " << stragglers.evidence << "\n";
      std::cout << "  per collective group       matched  mean skew ms  max skew ms  waited ms  last most often\n";
      for (const auto& g : stragglers.groups) {
        char line[256];
        const std::string name = std::string(core::toString(g.op)) + (g.processGroup.empty() ? "" : " (" + g.processGroup + ")");
        std::snprintf(
            line, sizeof line, "  %-26s %7lld  %12.3f  %11.3f  %9.3f  %s\n", name.c_str(), static_cast<long long>(g.matched),
            static_cast<double>(g.meanSkewNs) / 1e6, static_cast<double>(g.maxSkewNs) / 1e6, static_cast<double>(g.waitNs) / 1e6,
            g.mostOftenLast >= 0
                ? ("rank " + std::to_string(g.mostOftenLast) + " (" + std::to_string(g.mostOftenLastCount) + "x)").c_str()
                : "-");
        std::cout << line;
      }
    }
    if (!bottlenecks.empty()) {
      std::cout << "  Costliest exposed collectives, grouped by what you can change (target, else size and group),\n"
                   "  exposed time summed over steps and ranks, its causes, and what to try\n";
      for (const auto& b : bottlenecks) {
        char line[420];
        const std::string target =
            b.target.empty() ? (b.bytes ? core::formatBytes(static_cast<double>(*b.bytes)) : std::string("size ?")) : b.target;
        std::snprintf(line, sizeof line,
                      "  %-14s %s%s  exposed %8.3f ms, %lld instance%s on %d rank%s in %lld step%s (mean %.3f ms; worst %.3f ms "
                      "of %.3f ms, "
                      "rank %d step %s)\n",
                      std::string(core::toString(b.op)).c_str(), target.c_str(),
                      b.processGroup.empty() ? "" : (" [" + b.processGroup + "]").c_str(),
                      static_cast<double>(b.totalExposedNs) / 1e6, static_cast<long long>(b.instances),
                      b.instances == 1 ? "" : "s", b.ranks, b.ranks == 1 ? "" : "s", static_cast<long long>(b.stepsSeen),
                      b.stepsSeen == 1 ? "" : "s", static_cast<double>(b.meanExposedNs) / 1e6,
                      static_cast<double>(b.exposedNs) / 1e6, static_cast<double>(b.durNs) / 1e6, b.rank,
                      b.step ? std::to_string(*b.step).c_str() : "-");
        std::cout << line;
        for (const auto& r : b.reasons) std::cout << "      why: " << r << "\n";
        for (const auto& g : b.suggestions) std::cout << "      try: " << g << "\n";
        if (b.tryIt) {
          // The first suggestion as a run of the changed configuration (run --like).
          std::string flags;
          for (const auto& [k, v] : b.tryIt->set) {
            std::string flag = k;
            std::replace(flag.begin(), flag.end(), '_', '-');
            flags += " --" + flag + " " + v;
          }
          std::cout << "      try it: shardscope-cli run --db " << store.path() << " --like " << id.value() << flags << "\n";
        }
      }
    }
    if (!peaks.empty()) {
      std::cout << "  Memory peaks (memory records; * the allocator's peak counter, reached between two records)\n";
      std::cout << "  rank  device     peak allocated      peak reserved   step   at the allocated peak\n";
      for (const auto& p : peaks) {
        char line[512];
        const std::string dev = core::deviceName(p.deviceType, p.deviceId);
        std::string what = p.operation;
        if (!p.annotation.empty()) what += (what.empty() ? "" : " in ") + p.annotation;
        if (p.fromSnapshot) what = "(memory snapshot)" + (what.empty() ? "" : " " + what);
        std::snprintf(
            line, sizeof line, "  %4d  %-8s  %14s   %14s   %4s   %s\n", p.rank, dev.c_str(),
            (core::formatBytes(static_cast<double>(p.peakAllocatedBytes)) + (p.allocatedFromCounter ? "*" : "")).c_str(),
            (core::formatBytes(static_cast<double>(p.peakReservedBytes)) + (p.reservedFromCounter ? "*" : "")).c_str(),
            p.step ? std::to_string(*p.step).c_str() : "-", what.empty() ? "-" : what.c_str());
        std::cout << line;
        if (!p.breakdown.empty()) {
          std::string bd = "        at the peak:";
          for (const auto& [cat, bytes] : p.breakdown)
            bd += " " + cat + " " + core::formatBytes(static_cast<double>(bytes)) + ",";
          bd.pop_back();
          std::cout << bd << "\n";
        }
      }
    }
    for (const auto& snap : analysis.memorySnapshots) printSnapshotFigures(std::cout, snap);
    for (const auto& r : f.ranks)
      if (!r.overlapPct) {
        std::cout << "  (overlap n/a: that rank has no communication kernel, HTA reports NaN)\n";
        break;
      }
  }
  if (a.has("json")) {
    JsonValue out = JsonValue::object();
    out.set("runs", std::move(jsonRuns));
    std::cout << out.dump() << "\n";
  }
  return kOk;
}

}  // namespace

void printStrategyTable(std::ostream& os, const core::StrategyTable& t) {
  if (t.rows.empty()) return;
  std::vector<std::vector<std::string>> cells;  // [row][column]: "run" first
  std::vector<std::string> header{"run"};
  for (core::StrategyColumn c : t.columns) header.push_back(core::strategyColumnHeader(t, c));
  for (const auto& r : t.rows) {
    std::vector<std::string> line{core::runLabel(r.name, r.run)};
    for (core::StrategyColumn c : t.columns) line.push_back(core::strategyCellText(c, r.at(c)));
    cells.push_back(std::move(line));
  }
  std::vector<std::size_t> width(header.size());
  for (std::size_t k = 0; k < header.size(); ++k) {
    width[k] = header[k].size();
    for (const auto& line : cells) width[k] = std::max(width[k], line[k].size());
  }
  auto print = [&](const std::vector<std::string>& line) {
    std::string out = " ";
    for (std::size_t k = 0; k < line.size(); ++k) {
      const bool left = k == 0 || core::strategyColumn(t.columns[k - 1]).text;
      const std::string pad(width[k] - line[k].size(), ' ');
      out += " " + (left ? line[k] + pad : pad + line[k]);
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    os << out << "\n";
  };
  os << "strategy table (peak memory per GPU, max over ranks; shares of the step time):\n";
  print(header);
  for (const auto& line : cells) print(line);
  const auto notes = core::strategyTableNotes(t);
  if (!notes.empty()) {
    os << "n/a:\n";
    for (const auto& n : notes) os << "  " << n << "\n";
  }
  os << "\n";
}

void printComparisonTable(std::ostream& os, const core::Comparison& c) {
  os << "baseline: run " << c.runs[c.baseline].value() << " (" << c.names[c.baseline]
     << "); * = best; (±%) vs baseline, shares in percentage points (pp); ~ = within the runs' step-to-step spread\n";
  std::string header = "  " + std::string(46, ' ');
  for (std::size_t i = 0; i < c.runs.size(); ++i) {
    char h[64];
    std::snprintf(h, sizeof h, "  %20.20s", ("run " + std::to_string(c.runs[i].value()) + " " + c.names[i]).c_str());
    header += h;
  }
  os << header << "\n";
  for (const auto& r : c.rows) {
    bool any = false;
    for (const auto& v : r.values) any = any || v.has_value();
    if (!any) continue;  // nothing to say (e.g. throughput of imported traces)
    char l[64];
    std::snprintf(l, sizeof l, "  %-46.46s", r.label.c_str());
    std::string line = l;
    for (std::size_t i = 0; i < c.runs.size(); ++i) {
      std::string cell = r.values[i] ? core::formatFixed(*r.values[i], 2) : "-";
      if (i != c.baseline && i < r.deltaPp.size() && r.deltaPp[i])
        cell += " (" + std::string(*r.deltaPp[i] >= 0 ? "+" : "") + core::formatFixed(*r.deltaPp[i], 1) + " pp)";
      else if (i != c.baseline && r.deltaPct[i])
        cell += " (" + std::string(*r.deltaPct[i] >= 0 ? "+" : "") + core::formatFixed(*r.deltaPct[i], 1) + "%)";
      if (i != c.baseline && i < r.withinNoise.size() && r.withinNoise[i]) cell += "~";
      if (r.best && *r.best == i) cell += " *";
      char c2[64];
      std::snprintf(c2, sizeof c2, "  %20s", cell.c_str());
      line += c2;
    }
    os << line << "\n";
  }
  if (!c.configDiff.empty()) {
    os << "\nconfiguration differences (key: ";
    for (std::size_t i = 0; i < c.runs.size(); ++i) os << (i ? " | " : "") << core::runLabel(c.names[i], c.runs[i]);
    os << "):\n";
    for (const auto& d : c.configDiff) {
      os << "  " << d.key << ": ";
      for (std::size_t i = 0; i < d.values.size(); ++i) os << (i ? " | " : "") << (d.values[i] ? *d.values[i] : std::string("-"));
      os << "\n";
    }
  }
}

void printVerdict(std::ostream& os, const core::Comparison& c) {
  // A winner only on a measurable difference (judgeRuns); repeats with their run-to-run spread.
  const auto& v = c.verdict;
  auto runText = [&](std::size_t i) { return c.names[i] + " (run " + std::to_string(c.runs[i].value()) + ")"; };
  for (const auto& r : v.repeats) {
    std::string runs;
    for (std::size_t i : r.runs) runs += (runs.empty() ? "" : ", ") + std::to_string(c.runs[i].value());
    const bool tps = v.rankedBy == "tokens/s";
    const int digits = tps ? 0 : 2;
    os << (&r == &v.repeats.front() ? "\nrepeats (" + v.rankedBy + "):\n" : std::string()) << "  runs " << runs << ": mean "
       << core::formatFixed(r.mean, digits) << (tps ? " tokens/s" : " ms") << ", " << core::formatFixed(r.min, digits) << " to "
       << core::formatFixed(r.max, digits) << ", run-to-run spread " << core::formatFixed(r.spreadPct, 1) << " %\n";
  }
  os << "\nverdict: "
     << (v.winner ? (v.winnerRuns.size() > 1 ? v.winnerName : runText(*v.winner)) +
                        (v.by == core::ComparisonVerdict::By::Memory ? ", by memory" : ", by speed")
                  : std::string("no measurable difference"))
     << "\n";
  for (const auto& line : v.reasons) os << "  " << line << "\n";
}

core::JsonValue comparisonJson(const core::Comparison& c, const std::vector<core::RunId>& ids, std::size_t baseline) {
  JsonValue out = JsonValue::object();
  out.set("strategy_table", core::toJson(c.strategies));
  JsonValue runs = JsonValue::array();
  for (std::size_t i = 0; i < ids.size(); ++i) {
    JsonValue r = JsonValue::object();
    r.set("id", JsonValue::number(static_cast<std::int64_t>(ids[i].value())));
    r.set("name", JsonValue::string(c.names[i]));
    if (i < c.figures.size()) r.set("figures", core::toJson(c.figures[i]));  // and how each was measured
    runs.push(std::move(r));
  }
  out.set("runs", std::move(runs));
  out.set("baseline", JsonValue::number(static_cast<std::int64_t>(ids[baseline].value())));
  JsonValue rows = JsonValue::array();
  for (const auto& r : c.rows) {
    JsonValue x = JsonValue::object();
    x.set("key", JsonValue::string(r.key));
    x.set("label", JsonValue::string(r.label));
    x.set("lower_is_better", JsonValue::boolean(r.lowerIsBetter));
    JsonValue v = JsonValue::array(), d = JsonValue::array();
    for (std::size_t i = 0; i < ids.size(); ++i) {
      v.push(r.values[i] ? JsonValue::number(*r.values[i]) : JsonValue());
      d.push(r.deltaPct[i] ? JsonValue::number(*r.deltaPct[i]) : JsonValue());
    }
    JsonValue pp = JsonValue::array(), noise = JsonValue::array();
    for (std::size_t i = 0; i < ids.size(); ++i) {
      pp.push(i < r.deltaPp.size() && r.deltaPp[i] ? JsonValue::number(*r.deltaPp[i]) : JsonValue());
      noise.push(JsonValue::boolean(i < r.withinNoise.size() && r.withinNoise[i]));
    }
    x.set("values", std::move(v));
    x.set("delta_pct", std::move(d));
    x.set("delta_pp", std::move(pp));
    x.set("within_noise", std::move(noise));
    x.set("best_run", r.best ? JsonValue::number(static_cast<std::int64_t>((ids[*r.best]).value())) : JsonValue());
    rows.push(std::move(x));
  }
  out.set("rows", std::move(rows));
  JsonValue diff = JsonValue::array();
  for (const auto& d : c.configDiff) {
    JsonValue x = JsonValue::object();
    x.set("key", JsonValue::string(d.key));
    JsonValue vals = JsonValue::array();
    for (const auto& v : d.values) vals.push(v ? JsonValue::string(*v) : JsonValue());
    x.set("values", std::move(vals));
    diff.push(std::move(x));
  }
  out.set("config_diff", std::move(diff));
  out.set("verdict", core::toJson(c.verdict, ids));
  return out;
}

core::JsonValue collectiveComparisonJson(const core::CollectiveComparison& cc) {
  JsonValue out = JsonValue::object();
  JsonValue steps = JsonValue::array();
  for (auto n : cc.rankSteps) steps.push(JsonValue::number(n));
  out.set("rank_steps", std::move(steps));
  JsonValue rows = JsonValue::array();
  auto opt = [](const std::optional<double>& v) { return v ? JsonValue::number(*v) : JsonValue(); };
  for (const auto& r : cc.rows) {
    JsonValue row = JsonValue::object();
    row.set("op", JsonValue::string(std::string(core::toString(r.op))));
    JsonValue per = JsonValue::array();
    for (std::size_t i = 0; i < r.ms.size(); ++i) {
      JsonValue x = JsonValue::object();
      x.set("count_per_rank_step", opt(r.count[i]));
      x.set("bytes_per_rank_step", opt(r.bytes[i]));
      x.set("ms_per_rank_step", opt(r.ms[i]));
      x.set("exposed_ms_per_rank_step", opt(r.exposedMs[i]));
      x.set("delta_pct", opt(r.deltaPct[i]));
      x.set("within_noise", JsonValue::boolean(r.withinNoise[i]));
      per.push(std::move(x));
    }
    row.set("runs", std::move(per));
    rows.push(std::move(row));
  }
  out.set("rows", std::move(rows));
  return out;
}

void printCollectiveComparison(std::ostream& os, const core::CollectiveComparison& cc, const core::Comparison& c) {
  if (cc.rows.empty()) return;
  os << "\ncollectives, ms per rank and step (change vs " << core::runLabel(c.names[cc.baseline], c.runs[cc.baseline]) << "):\n";
  for (const auto& r : cc.rows) {
    os << "  " << core::toString(r.op) << ":";
    for (std::size_t i = 0; i < r.ms.size(); ++i) {
      os << (i ? " | " : " ") << core::runLabel(c.names[i], c.runs[i]) << " ";
      if (!r.ms[i]) {
        os << "-";
        continue;
      }
      os << core::formatFixed(*r.ms[i], 3);
      if (i != cc.baseline && r.deltaPct[i])
        os << " (" << (*r.deltaPct[i] >= 0 ? "+" : "") << core::formatFixed(*r.deltaPct[i], 1) << " %"
           << (r.withinNoise[i] ? ", noise" : "") << ")";
    }
    os << "\n";
  }
}

namespace {

int cmdCompareRuns(const Args& a, core::CancelToken& cancel) {
  core::TraceStore store(dbPath(a), core::Database::Mode::ReadOnly);
  std::vector<core::RunId> ids = parseRunList(a.get("runs"));
  if (ids.empty())
    for (const auto& r : store.runs()) ids.push_back(r.id);
  if (ids.size() < 2) throw core::Error(store.path() + ": comparing needs at least two runs");
  std::size_t baseline = 0;
  if (a.has("baseline")) {
    auto b = parseRunId(a.get("baseline"));
    auto it = b ? std::find(ids.begin(), ids.end(), *b) : ids.end();
    if (it == ids.end()) throw std::invalid_argument("--baseline must be one of the compared runs");
    baseline = static_cast<std::size_t>(it - ids.begin());
  }
  // Each run analysed once: its figures (the comparison rows) and its collectives come from it.
  std::vector<std::shared_ptr<const core::RunAnalysis>> analyses;
  for (core::RunId id : ids) {
    if (!store.run(id)) throw core::Error(store.path() + ": no run with id " + std::to_string(id.value()));
    core::RunAnalysisOptions options;
    options.bottleneckLimit = 0;
    analyses.push_back(std::make_shared<const core::RunAnalysis>(core::analyzeRun(store, id, options, &cancel)));
  }
  const auto source = [&](core::RunId id) -> std::shared_ptr<const core::RunAnalysis> {
    for (std::size_t i = 0; i < ids.size(); ++i)
      if (ids[i] == id) return analyses[i];
    return nullptr;
  };
  const core::Comparison c = core::compareRuns(store, ids, baseline, &cancel, source);
  std::vector<const core::RunAnalysis*> raw;
  for (const auto& an : analyses) raw.push_back(an.get());
  const core::CollectiveComparison cc = core::compareCollectives(ids, raw, c.figures, baseline);
  if (a.has("json")) {
    JsonValue out = comparisonJson(c, ids, baseline);
    out.set("collectives", collectiveComparisonJson(cc));
    std::cout << out.dump() << "\n";
    return kOk;
  }
  if (a.has("csv")) {
    std::cout << "metric";
    for (std::size_t i = 0; i < ids.size(); ++i)
      std::cout << "," << core::csvText(c.names[i] + " (run " + std::to_string(ids[i].value()) + ")");
    std::cout << ",best_run\n";
    for (const auto& r : c.rows) {
      std::cout << core::csvText(r.label);
      for (const auto& v : r.values) std::cout << "," << (v ? core::formatFixed(*v, 4) : std::string());
      std::cout << "," << (r.best ? std::to_string((ids[*r.best]).value()) : std::string()) << "\n";
    }
    return kOk;
  }
  printStrategyTable(std::cout, c.strategies);
  printComparisonTable(std::cout, c);
  printCollectiveComparison(std::cout, cc, c);
  printVerdict(std::cout, c);
  return kOk;
}

const std::vector<Command>& commands() {
  static const std::vector<Command> cmds = {
      {"import",
       "shardscope-cli import [--db F] [--name N] [--separate-runs] [--no-args] [--attach-to RUN [--rank R]] [--json] "
       "[--progress json] "
       "FILE|DIR...",
       "Import torch.profiler (Kineto) JSON traces (.json/.json.gz), one per rank, as one run, or PyTorch memory snapshots "
       "(.pickle/.pickle.gz, torch.cuda.memory._dump_snapshot)",
       {{"name", true, "run name (default: the directory or file name)"},
        {"attach-to", true, "memory snapshot: store it as the memory of a rank of this existing run"},
        {"rank", true, "with --attach-to: the rank (default 0)"},
        {"progress", true, "json: one JSON event per line on stdout (the app's protocol); human output to stderr"},
        {"separate-runs", false, "import each file as its own run (files from different jobs)"},
        {"no-args", false, "do not keep each event's free-form args (smaller database)"}},
       cmdImport,
       /*positional=*/true},
      {"info",
       "shardscope-cli info [--db F] [--run ID] [--json]",
       "Show runs, ranks, tracks, event counts and time spans",
       {{"run", true, "one run in detail (tracks per rank)"}},
       cmdInfo},
      {"check",
       "shardscope-cli check [--db F] [--wait SECONDS] [--json]",
       "Check that a database reads (PRAGMA quick_check on a fresh read-only connection): ok, locked, unreadable, "
       "missing, not-a-database or malformed with SQLite's words; exit 0 only when it is healthy",
       {{"wait", true, "seconds to wait for another writer's lock (default 5)"}},
       cmdCheck},
      {"analyze",
       "shardscope-cli analyze [--db F] [--run ID | --all-runs] [--json | --csv]",
       "Analyse a run (default: the latest): HTA-compatible overlap and breakdowns, per-step exposed "
       "communication, collectives with bandwidth, memory peaks",
       {{"run", true, "run id (default: the latest run)"},
        {"all-runs", false, "every run of the database"},
        {"csv", false, "CSV on stdout (RFC 4180)"}},
       cmdAnalyze},
      {"compare-runs",
       "shardscope-cli compare-runs [--db F] [--runs ID,ID,...] [--baseline ID] [--json | --csv]",
       "Compare runs side by side (default: every run): the strategy table (peak memory per GPU, init time, "
       "tokens/s, communication share, checkpoint save time, trainable parameters, skipped steps), then step time, throughput, "
       "communication and exposed "
       "communication, memory peaks, initialisation and checkpoint time, with deltas and the best run per row",
       {{"runs", true, "run ids, comma separated (default: all runs)"},
        {"baseline", true, "the run the deltas refer to (default: the first)"},
        {"csv", false, "CSV on stdout (RFC 4180)"}},
       cmdCompareRuns},
      {"export",
       "shardscope-cli export [--db F] [--run ID | --runs N,M] --format kineto|perfetto|db -o OUT [--no-gzip] [--json]",
       "Export a run: Kineto JSON per rank into directory OUT (HTA, TraceLens, Perfetto read it), one merged "
       "multi-rank JSON file OUT for ui.perfetto.dev, or runs into a new database OUT (db: the app opens it)",
       {{"run", true, "run id (default: the latest run)"},
        {"runs", true, "db: run ids, comma separated (default: --run)"},
        {"format", true, "kineto | perfetto | db"},
        {"o", true, "output directory (kineto) or file (perfetto, db: a new file)"},
        {"no-gzip", false, "write plain .json instead of .json.gz"}},
       cmdExport},
      {"merge",
       "shardscope-cli merge --db OUT [--clock-align auto|collectives|none] [--partial] [--json] IN.db...",
       "Merge the per-node databases of multi-node jobs (torchrun, srun, run --nnodes) into OUT: each job becomes one run "
       "with all its ranks, node clocks aligned on collective ends; every other run is copied. Idempotent",
       {{"clock-align", true,
         "auto (align nodes on other hosts on their collectives; default) | collectives (every node) | none"},
        {"partial", false, "merge a job with missing nodes anyway (the run is marked failed, naming them)"}},
       cmdMerge,
       /*positional=*/true},
  };
  static const std::vector<Command> all = [] {
    auto v = cmds;
    for (auto& c : runCommands()) v.push_back(std::move(c));
    for (auto& c : reportCommands()) v.push_back(std::move(c));
    for (auto& c : estimatorCommands()) v.push_back(std::move(c));
    for (auto& c : simulatorCommands()) v.push_back(std::move(c));
    for (auto& c : topCommands()) v.push_back(std::move(c));
    return v;
  }();
  return all;
}

void printMainHelp(std::ostream& os) {
  os << "shardscope-cli " SHARDSCOPE_VERSION
        " - profile and compare sharded training runs (headless)\n\n"
        "Usage: shardscope-cli <command> [options]\n\nCommands:\n";
  for (const auto& c : commands())
    os << "  " << c.name << std::string(c.name.size() < 14 ? 14 - c.name.size() : 1, ' ') << c.summary << "\n";
  os << "\nRun 'shardscope-cli <command> --help' for a command's options.\n"
        "Exit codes: 0 ok, 1 failed (bad input or operation), 2 usage error, 3 database error "
        "(not SQLite, read-only, newer schema, disk full), 130 cancelled (Ctrl-C).\n";
}

void printCommandHelp(std::ostream& os, const Command& c) {
  os << c.summary << "\n\nUsage: " << c.usage << "\n\nOptions:\n";
  os << core::argsHelp(c.options) << core::argsHelp(kCommon);
}

}  // namespace

namespace {
int runCommand(const Command& cmd, const Args& args, core::CancelToken& cancel);
}  // namespace

int runCli(int argc, char** argv, core::CancelToken& cancel) {
  std::vector<std::string> argvs(argv + 1, argv + argc);
  if (argvs.empty() || argvs[0] == "--help" || argvs[0] == "-h" || argvs[0] == "help") {
    printMainHelp(argvs.empty() ? std::cerr : std::cout);
    return argvs.empty() ? kUsage : kOk;
  }
  if (argvs[0] == "--version") {
    std::cout << "shardscope-cli " SHARDSCOPE_VERSION "\n";
    return kOk;
  }
  const auto& cmds = commands();
  auto it = std::find_if(cmds.begin(), cmds.end(), [&](const Command& c) { return c.name == argvs[0]; });
  if (it == cmds.end()) {
    std::cerr << "shardscope-cli: unknown command '" << argvs[0] << "' (see shardscope-cli --help)\n";
    return kUsage;
  }
  const Command& cmd = *it;
  std::vector<core::ArgSpec> specs = cmd.options;
  specs.insert(specs.end(), kCommon.begin(), kCommon.end());
  Args args;
  try {
    args = core::parseArgs(std::vector<std::string>(argvs.begin() + 1, argvs.end()), specs);
  } catch (const core::ArgError& e) {
    std::cerr << "shardscope-cli " << cmd.name << ": " << e.what() << " (see --help)\n";
    return kUsage;
  }
  if (args.has("help")) {
    printCommandHelp(std::cout, cmd);
    return kOk;
  }
  if (!cmd.positional && !args.positional.empty()) {
    std::cerr << "shardscope-cli " << cmd.name << ": unexpected argument '" << args.positional.front()
              << "' (this command takes options only; see --help)\n";
    return kUsage;
  }
  // --progress json: the app's protocol (protocol.h) on stdout, every error as an event, and the
  // exit code in a last "done" event.
  auto& events = EventStream::instance();
  std::vector<std::string> inputs = args.positional;
  for (const char* key : {"config", "deepspeed"})
    if (args.has(key)) inputs.push_back(args.get(key) == "-" ? "<stdin>" : args.get(key));
  if (args.has("progress")) {
    if (args.get("progress") != "json") {
      std::cerr << "shardscope-cli " << cmd.name << ": --progress: expected 'json', got '" << args.get("progress")
                << "' (see --help)\n";
      return kUsage;
    }
    events.enable();
  }
  const auto fail = [&](int code, const std::string& prefix, const std::string& message, const std::string& suffix) {
    std::cerr << prefix << message << suffix << "\n";
    events.error(message, inputs);
    return code;
  };
  const int rc = [&]() -> int {
    try {
      return runCommand(cmd, args, cancel);
    } catch (const std::invalid_argument& e) {
      return fail(kUsage, "shardscope-cli " + cmd.name + ": ", e.what(), " (see --help)");
    } catch (const core::Cancelled&) {
      std::cerr << "shardscope-cli " << cmd.name << ": cancelled; nothing was written\n";
      return kCancelled;
    } catch (const core::DatabaseError& e) {
      return fail(kDatabase, "error: ", e.what(), "");
    } catch (const core::Error& e) {
      return fail(kFailed, "error: ", e.what(), "");
    } catch (const std::bad_alloc&) {
      return fail(kFailed, "\nerror: ", "out of memory", "");
    } catch (const std::exception& e) {
      return fail(kFailed, "error: ", e.what(), "");
    }
  }();
  events.done(rc);
  return rc;
}

namespace {

// The command itself, after the options were parsed: the database wait policy, then the handler.
int runCommand(const Command& cmd, const Args& args, core::CancelToken& cancel) {
  if (args.has("busy-timeout")) {
    const std::string v = args.get("busy-timeout", "");
    char* end = nullptr;
    const double secs = std::strtod(v.c_str(), &end);
    if (v.empty() || end != v.c_str() + v.size() || !(secs >= 0))
      throw std::invalid_argument("--busy-timeout: '" + v + "' is not a number of seconds");
    core::BusyPolicy::setDefaultTimeout(std::chrono::milliseconds(static_cast<std::int64_t>(secs * 1000)));
    ::setenv("SHARDSCOPE_BUSY_TIMEOUT", v.c_str(), 1);  // the worker ranks this command starts wait as long
  }
  // Another process writing (an import, a run, the app) makes this one wait, not fail: say so on
  // stderr after 2 s and every 10 s after, and let Ctrl-C end the wait.
  core::BusyPolicy::setCancelToken(&cancel);
  core::BusyPolicy::setReporter([name = cmd.name, lastPrinted = std::make_shared<std::atomic<std::int64_t>>(-1)](
                                    const std::string& path, std::chrono::milliseconds waited, std::chrono::milliseconds bound) {
    const std::int64_t bucket = waited.count() / 10000;
    if (lastPrinted->exchange(bucket) == bucket) return;
    std::fprintf(stderr, "shardscope-cli %s: %s: waiting for another process writing to it (%lld s so far, at most %lld s)\n",
                 name.c_str(), path.c_str(), static_cast<long long>(waited.count() / 1000),
                 static_cast<long long>(bound.count() / 1000));
  });
  return cmd.run(args, cancel);
}

}  // namespace

}  // namespace shardscope::cli
