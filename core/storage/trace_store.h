#pragma once
// The trace store: one SQLite file holding measured, imported and simulated runs in one schema.
// TraceStore owns the connection, the string interning cache and the typed read/write helpers;
// BulkWriter streams events/counters into it with prepared statements.
#include <array>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/model/types.h"
#include "core/storage/database.h"
#include "core/storage/event_chunk.h"

namespace shardscope::core {

struct TrackSummary {
  Track track;
  std::int64_t eventCount = 0;
  std::int64_t collectiveCount = 0;
  std::optional<TimeNs> minStartNs;
  std::optional<TimeNs> maxEndNs;
  TimeNs maxDurNs = 0;
};

struct RunSummary {
  Run run;
  std::vector<Rank> ranks;
  std::vector<TrackSummary> tracks;
  std::int64_t eventCount = 0;
  std::int64_t counterSamples = 0;
  std::int64_t stepCount = 0;
  std::int64_t collectiveCount = 0;
  std::optional<TimeNs> startNs;
  std::optional<TimeNs> endNs;
};

// The stored counts of one run, from the per-track statistics (no event is read; a memory snapshot's
// events are counted).
struct RunCounts {
  RunId runId;
  int ranks = 0;
  std::int64_t events = 0;  // stored events (counter samples excluded) and memory-snapshot allocator events
};

// A cheap fingerprint of the runs table (count, ids, statuses, names, tags): when it changes, or
// while a run is pending/running, a watcher reloads its run list.
struct RunsFingerprint {
  std::int64_t count = 0;
  std::int64_t maxId = 0;
  std::int64_t statusSum = 0;
  std::int64_t textSum = 0;
  std::int64_t active = 0;  // runs pending or running
  bool operator==(const RunsFingerprint& o) const = default;
};

// The order of TraceStore::forEachFlow.
enum class FlowOrder {
  Stored,  // as written (id)
  FlowId,  // by flow id, then as written: the flows_rank index order, no sort
};

class TraceStore {
 public:
  explicit TraceStore(const std::string& path, Database::Mode mode = Database::Mode::ReadWrite);
  ~TraceStore();

  const std::string& path() const { return db_->path(); }

  // The connection. Nothing outside core/storage reaches the Database itself (see StoreAccess).
  // How long this connection waits for another connection's lock (see BusyPolicy).
  void setBusyTimeout(std::chrono::milliseconds t) { db_->setBusyTimeout(t); }
  // The longest such wait this connection saw.
  std::chrono::milliseconds longestLockWait() const { return db_->longestWait(); }
  // PRAGMA data_version: changes when another connection (any process) commits.
  std::int64_t dataVersion();
  // The file's schema version (PRAGMA user_version).
  std::int64_t schemaVersion();
  // PRAGMA integrity_check's first line ("ok" for a sound file).
  std::string integrityCheck();

  // Runs
  RunId createRun(const Run& run);
  void updateRun(const Run& run);
  void setRunStatus(RunId runId, RunStatus status, const std::string& failureReason = {});
  void setRunMetadata(RunId runId, const std::string& metadataJson);
  void deleteRun(RunId runId);
  std::vector<Run> runs();
  std::optional<Run> run(RunId runId);
  std::optional<RunId> latestRunId();
  // Rank and event counts of every run that has ranks (one query over the track statistics).
  std::vector<RunCounts> runCounts();
  RunsFingerprint runsFingerprint();

  // Structure
  RankId addRank(const Rank& rank);
  void updateRank(const Rank& rank);
  std::vector<Rank> ranks(RunId runId);
  TrackId addTrack(const Track& track);
  // The two counter tracks of one device's memory, "memory allocated (cpu:0)" / "memory reserved
  // (cuda:N)", read from memory_events (derived_from); deviceType 0 CPU, 1 CUDA. Returns
  // {allocated, reserved}. Writers that record allocations (the runtime, the simulator) use it.
  std::pair<TrackId, TrackId> addMemoryTracks(RankId rankId, int deviceType, int deviceId);
  std::vector<Track> tracks(RunId runId);
  Id addProcessGroup(const ProcessGroup& pg);
  std::vector<ProcessGroup> processGroups(RunId runId);
  void addStep(const Step& step);
  std::vector<Step> steps(RunId runId);
  void setMetric(RunId runId, std::optional<RankId> rankId, const std::string& key, double value);
  std::optional<double> metric(RunId runId, std::optional<RankId> rankId, const std::string& key);
  // Every metric of a run (run-level rows have no rank), in (rank, key) order.
  struct MetricRow {
    std::optional<RankId> rankId;
    std::string key;
    std::optional<double> value;
    std::optional<std::string> text;
  };
  std::vector<MetricRow> metrics(RunId runId);
  void setMetricRow(RunId runId, const MetricRow& row);  // insert or replace

  // Interned strings (names, categories, dtypes). Cached in memory; call invalidateCaches() after a
  // rolled-back transaction, since ids created inside it no longer exist.
  Id intern(std::string_view s);
  std::string string(Id id);
  // The cached string of an id, valid as long as Event::name views are (see Event); "" for id 0.
  std::string_view stringView(Id id) { return cachedString(id); }
  void invalidateCaches();

  // Reads for the timeline and exporters.
  // Events of one track overlapping [t0, t1), ordered by start (then end descending, so parents come
  // before their children). Uses the (track_id, start_ns) index and the track's max duration.
  std::vector<Event> eventsInWindow(TrackId trackId, TimeNs t0, TimeNs t1, bool withArgs = false);
  // Every event of a track in start order (then end descending), streamed: chunks are merged as
  // the walk reaches them, so memory stays bounded whatever the track size.
  void forEachEvent(TrackId trackId, const std::function<void(const Event&)>& fn, bool withArgs = true);
  // The same walk, in the same order, without building an Event: fn gets a decoded chunk, a run of
  // consecutive indices [begin, end) in it that come next, and the chunk id (EventChunk::eventId
  // makes an event id). String columns are ids (stringView). For analyses that read millions of events.
  void forEachEventRef(TrackId trackId, const std::function<void(const EventChunk&, std::size_t begin, std::size_t end, Id)>& fn);
  std::vector<CounterSample> counterSamples(TrackId trackId);
  // The same samples in the same order, streamed.
  void forEachCounterSample(TrackId trackId, const std::function<void(TimeNs ts, double value)>& fn);
  std::vector<Flow> flows(RankId rankId);
  void forEachFlow(RankId rankId, const std::function<void(const Flow&)>& fn, FlowOrder order = FlowOrder::Stored);
  // The earliest flow / memory record of a rank (nullopt when it has none), and whether it has any
  // memory record.
  std::optional<TimeNs> firstFlowNs(RankId rankId);
  std::optional<TimeNs> firstMemoryEventNs(RankId rankId);
  bool hasMemoryEvents(RankId rankId);
  std::vector<MemoryEvent> memoryEvents(RankId rankId);
  // The same records in the same order (time, then id), streamed: nothing is kept. With totalsOnly
  // only the time, device and running totals are read (addr, bytes, outOfMemory stay 0): a third
  // cheaper, for peak searches.
  void forEachMemoryEvent(RankId rankId, const std::function<void(const MemoryEvent&)>& fn, bool totalsOnly = false);

  RunSummary summary(RunId runId);

  // The args JSON of one event ("" when it has none).
  std::string eventArgs(Id eventId);
  // An event by id (from eventsInWindow/forEachEvent); nullopt if it does not exist.
  std::optional<Event> event(Id eventId, bool withArgs = true);

 private:
  friend class StoreAccess;
  Database& db() { return *db_; }

  struct ArgsBlock {
    Id chunk = 0;
    std::vector<std::uint32_t> offsets;
    std::string data;
  };
  const ArgsBlock* argsBlockFor(Id chunkId);
  Event makeEvent(const EventChunk& c, std::size_t i, Id chunkId, TrackId trackId);
  const std::string& cachedString(Id id);

  std::unique_ptr<Database> db_;
  std::vector<ArgsBlock> argsCache_;  // a few recently used blocks
  bool argsHaveRawSize_ = true;       // schema 3 (read-only connections read version 2 files as they are)
  std::size_t argsCacheNext_ = 0;
  std::unordered_map<std::string, Id> internCache_;
  std::unordered_map<Id, std::string> stringCache_;
  std::vector<const std::string*> stringPtr_;  // id -> cached string, for the hot read path
};

// Streams events into the store. Each track buffers an open chunk (EventChunk::kMaxEvents events)
// that is sorted and written when full; counters, flows and memory records are plain rows. The
// caller owns the transaction (an import is one transaction: all or nothing); finish() writes what
// is buffered and the per-track statistics gathered on the way.
class BulkWriter {
 public:
  explicit BulkWriter(TraceStore& store);
  ~BulkWriter();
  BulkWriter(const BulkWriter&) = delete;
  BulkWriter& operator=(const BulkWriter&) = delete;

  // Sorting, encoding and compressing full chunks on a thread of its own ("ss-encode") while this
  // thread goes on adding events; the rows are still inserted on this thread, in the same order, so
  // the database is the same. For imports whose writing thread is their slowest stage.
  // flush(), finish(), rewriteChunks(), rewriteMarked() and shiftTracks() wait for it.
  void encodeOnThread();

  void addEvent(const EventRecord& e, std::string_view argsJson = {});
  // As above, with the args written by `appendArgs` straight into the chunk's args block.
  void addEvent(const EventRecord& e, const std::function<void(std::string&)>& appendArgs);
  void addCounter(TrackId trackId, TimeNs ts, double value);
  void addFlow(const Flow& f);
  // Memory records are written in groups: flush() or finish() writes the last ones.
  void addMemoryEvent(const MemoryEvent& m);
  // Counts a sample of a derived counter track (Track::derivedFrom) in the track statistics.
  void noteSample(TrackId trackId, TimeNs ts);

  // Called on each chunk just before it is written (e.g. to fill steps learnt since its events came).
  // Returning true marks the chunk for a later rewriteMarked() (something is still unresolved).
  void setBeforeFlush(std::function<bool(TrackId trackId, EventChunk&)> fn) { beforeFlush_ = std::move(fn); }
  // Rewrites the chunks marked by beforeFlush (and forgets the marks); fn as for rewriteChunks.
  void rewriteMarked(const std::function<bool(EventChunk&)>& fn);
  void flush();   // writes every open chunk and the memory records not written yet
  void finish();  // flush() + track statistics; call before commit

  // Rewrites the written chunks of a track that overlap [t0, t1]; fn returns true when it changed
  // the chunk (times may change but must keep their order, e.g. a constant shift).
  void rewriteChunks(TrackId trackId, TimeNs t0, TimeNs t1, const std::function<bool(EventChunk&)>& fn);
  // Shifts every event/counter time of the given tracks by delta (statistics included).
  void shiftTracks(const std::vector<TrackId>& trackIds, TimeNs delta);

 private:
  struct OpenChunk {
    EventChunk chunk;
    std::string args;
    std::vector<std::uint32_t> argsOffsets;  // start of each event's args in `args`
    bool hasArgs = false;
  };
  struct TrackStats {
    std::int64_t count = 0;
    std::int64_t collectives = 0;
    TimeNs minStart = 0;
    TimeNs maxEnd = 0;
    TimeNs maxDur = 0;
  };
  // A full chunk on its way to its rows: sorted, encoded and its args compressed (prepare(), on the
  // encoding thread when there is one), then inserted (insert(), on the writing thread).
  struct PreparedChunk {
    TrackId trackId;
    bool mark = false;  // beforeFlush asked for a rewriteMarked
    OpenChunk oc;
    TimeNs maxEnd = 0;
    std::string blob;  // the encoded chunk
    std::string reordered;
    std::vector<std::uint32_t> reorderedOffsets;  // the args in the sorted order, when it moved events
    std::string compressed;
    std::string_view argsStored;  // the args block as stored (into the above)
    const std::vector<std::uint32_t>* argsOffsets = nullptr;
    std::size_t argsRawSize = 0;
    bool argsCompressed = false;
    bool ready = false;  // prepared (under the encoder's mutex)
    std::exception_ptr error;
  };
  struct Encoder;  // the encoding thread (trace_store.cpp)
  void writeChunk(TrackId trackId, OpenChunk& oc);
  static void prepare(PreparedChunk& p);
  void insert(PreparedChunk& p);
  // Inserts the prepared chunks in their order: those ready, or (all) every one.
  void insertPrepared(bool all);
  OpenChunk& beginEvent(const EventRecord& e);
  void endEvent(const EventRecord& e, OpenChunk& oc);

  TraceStore& store_;
  Statement insChunk_;
  Statement insArgs_;
  Statement insCounter_;
  Statement insFlow_;
  Statement insMemory_;
  Statement insMemoryMany_;  // memoryRows_ rows at once, prepared when first needed
  static constexpr std::size_t kMemoryRows = 256;
  std::size_t memoryRows_ = kMemoryRows;  // fewer where SQLite allows fewer parameters (9 a row)
  std::vector<MemoryEvent> memory_;       // not written yet
  void writeMemoryEvents();
  std::unordered_map<TrackId, OpenChunk> open_;
  std::unordered_map<TrackId, TrackStats> stats_;
  // The entries of the tracks written to last, direct-mapped by track id: an event (and a memory
  // record's two counter samples) mostly skips the two hash look-ups. Map nodes do not move, and no
  // entry of open_ is ever erased; stats_.clear() forgets the cached stats.
  struct CachedTrack {
    TrackId track;
    OpenChunk* open = nullptr;    // open_[track], or not looked up yet
    TrackStats* stats = nullptr;  // stats_[track], or not looked up yet
  };
  std::array<CachedTrack, 64> cachedTracks_{};
  CachedTrack& cachedTrack(TrackId trackId) {
    CachedTrack& c = cachedTracks_[static_cast<std::size_t>(trackId.value()) & 63];
    if (c.track != trackId) c = CachedTrack{trackId, nullptr, nullptr};
    return c;
  }
  // stats_[trackId]; fresh when it was just made.
  TrackStats& trackStats(TrackId trackId, bool& fresh);
  std::function<bool(TrackId, EventChunk&)> beforeFlush_;
  std::vector<Id> marked_;
  PreparedChunk sync_;                // the chunk being written when there is no encoding thread
  std::vector<OpenChunk> spareOpen_;  // buffers of finished tracks, for new tracks
  std::unique_ptr<Encoder> encoder_;
  void rewriteChunk(Id chunkId, std::string_view blob, const std::function<bool(EventChunk&)>& fn, Statement& upd);
};

}  // namespace shardscope::core
