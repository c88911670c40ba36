#pragma once
// Internal to core/export: what the Kineto and Perfetto exporters share. An output file written under a
// temporary name (optionally gzip-compressed) and renamed into place, exact µs formatting, and the
// writer that turns one rank's rows into Chrome-trace events in either layout.
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/export/export_types.h"
#include "core/model/types.h"
#include "core/storage/trace_store.h"

namespace shardscope::core::exporting {

// ---- formatting: integer arithmetic only, so output never depends on double rounding or locale ----
void appendInt(std::string& out, std::int64_t v);
// ns as µs with exactly three decimals: 1234567 -> "1234.567", -5 -> "-0.005".
void appendMicros(std::string& out, std::int64_t ns);
// Shortest round-trip form; false (nothing appended) for NaN/inf, which JSON cannot carry.
bool appendDouble(std::string& out, double v);

// A file that appears under its final name only after commit(); until then it is a hidden temporary
// beside it, removed again if the writer is destroyed without commit (error, cancel).
class OutputFile {
 public:
  OutputFile(std::string path, bool gzip, int level);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  // Callers append JSON text here and call maybeFlush() now and then.
  std::string& buffer() { return buf_; }
  void maybeFlush() {
    if (buf_.size() >= kFlushBytes) flush();
  }
  void close();   // flushes, finishes the gzip stream and closes; throws on any I/O error
  void commit();  // renames the closed temporary file to path()
  const std::string& path() const { return path_; }
  std::uint64_t bytesOnDisk() const { return written_; }

 private:
  static constexpr std::size_t kFlushBytes = 1u << 20;
  struct Zlib;
  void flush();
  void deflateBuffer(bool finish);
  void writeRaw(const void* p, std::size_t n);
  [[noreturn]] void fail(const std::string& what, int err) const;

  std::string path_;
  std::string tmpPath_;
  std::FILE* file_ = nullptr;
  std::unique_ptr<Zlib> z_;
  std::string buf_;
  std::uint64_t written_ = 0;
  bool closed_ = false;
  bool committed_ = false;
};

// State of one export: the run's summary, its process groups and steps, progress and cancel.
struct RunContext {
  RunContext(TraceStore& s, RunId runId, const ExportOptions& o);
  TraceStore& store;
  const ExportOptions& options;
  RunSummary summary;
  std::unordered_map<Id, ProcessGroup> groups;  // by id
  std::vector<Step> steps;                      // all ranks, ordered by rank then step
  std::string stage;
  std::uint64_t eventsDone = 0;

  // Called once per row written: checks the cancel token and reports progress every few thousand.
  void tick() {
    if (++sinceCheck_ >= 4096) checkpoint();
  }
  void checkpoint();

 private:
  std::uint32_t sinceCheck_ = 0;
};

// Smallest timestamp of the rank's events, counter samples, flows and (withMemory) [memory] records;
// nullopt when it has none.
std::optional<TimeNs> rankMinNs(RunContext& ctx, const Rank& rank, bool withMemory);

enum class Layout { Kineto, Perfetto };

// Writes every event of one rank (metadata, slices, instants, flows, counters, [memory]) as elements
// of a traceEvents array. Rows are streamed from the store; what is kept in memory is per track, plus
// 24 bytes per CPU-side launch to regenerate the ac2g flows.
class RankWriter {
 public:
  // origin: the ns value written as ts 0 (Kineto: baseTimeNanoseconds; Perfetto: the run's minimum).
  // first: shared "no element written yet" flag of the enclosing array.
  RankWriter(RunContext& ctx, const Rank& rank, Layout layout, TimeNs origin, OutputFile& out, bool& first);
  void write();
  std::uint64_t eventsWritten() const { return events_; }

 private:
  struct Lane {
    std::int64_t pid = 0;
    std::int64_t tid = 0;
    std::string name;
    std::vector<TimeNs> open;  // ends of the enclosing X events still open (Perfetto nesting)
  };
  struct TrackOut {
    const TrackSummary* summary = nullptr;
    bool gpu = false;
    bool original = false;  // pid/tid come from the source as they were
    std::string_view defaultCat;
    std::uint32_t lane = 0;
    std::vector<std::uint32_t> overflow;  // Perfetto overflow lanes, in creation order
  };
  struct Launch {
    std::int64_t correlation;
    TimeNs ts;
    std::uint32_t lane;
    std::uint32_t used;  // 0 until a GPU event consumed it
  };

  void setupLanes();
  std::int64_t syntheticTid(std::int64_t pid, std::int64_t from);
  std::uint32_t mainLane();
  std::uint32_t addLane(std::int64_t pid, std::int64_t tid, std::string name);
  std::uint32_t placeSlice(TrackOut& t, TimeNs start, TimeNs end);
  void writeMetadata();
  void writeThreadName(const Lane& lane);
  void writeProcessMeta(std::int64_t pid, std::string_view what, std::string_view value, bool isString);
  void writeTrack(TrackOut& t, bool cpuSide);
  void writeEvent(TrackOut& t, const Event& e, bool cpuSide);
  void writeSynthesizedArgs(const TrackOut& t, const Event& e);
  void writeMissingSteps();
  void writeFlows();
  void writeCounters();
  void writeMemory();
  std::int64_t flowId(std::int64_t id) const;
  std::string& begin();  // separator + returns the buffer
  void end();            // closes nothing; flushes when the buffer is large

  RunContext& ctx_;
  const Rank& rank_;
  Layout layout_;
  TimeNs origin_;
  OutputFile& out_;
  bool& first_;
  std::int64_t hostPid_ = 0;
  std::vector<TrackOut> tracks_;
  std::vector<const TrackSummary*> counters_;
  std::unordered_map<TrackId, std::size_t> trackIndex_;  // track id -> tracks_ index
  std::vector<Lane> lanes_;
  std::map<std::int64_t, std::set<std::int64_t>> usedTids_;  // pid -> tids taken
  std::map<std::int64_t, std::int64_t> nextOverflowTid_;     // pid -> next candidate
  std::optional<std::uint32_t> mainLane_;
  std::vector<Launch> launches_;
  std::set<std::int64_t> stepsSeen_;
  std::uint64_t events_ = 0;
  std::int64_t memoryEvents_ = 0;
};

}  // namespace shardscope::core::exporting
