#include "core/storage/trace_store.h"

#include <lz4.h>
#include <pthread.h>
#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstring>
#include <limits>
#include <mutex>
#include <thread>
#include <utility>
#include <condition_variable>
#include <deque>

#include "core/model/memory_category.h"
#include "core/storage/schema.h"
#include "core/storage/store_access.h"
#include "core/util/error.h"

namespace shardscope::core {
namespace {

std::string nowIso8601() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

Run readRun(const Statement& st) {
  Run r;
  r.id = RunId{st.int64(0)};
  r.name = st.text(1);
  r.source = runSourceFromString(st.textView(2)).value_or(RunSource::Kineto);
  r.strategy = st.text(3);
  r.configJson = st.text(4);
  r.worldSize = static_cast<int>(st.int64(5));
  r.devicesJson = st.text(6);
  r.createdAt = st.text(7);
  r.status = runStatusFromString(st.textView(8)).value_or(RunStatus::Pending);
  r.failureReason = st.text(9);
  r.tags = st.text(10);
  r.metadataJson = st.text(11);
  return r;
}

constexpr const char* kRunColumns =
    "id, name, source, strategy, config_json, world_size, devices_json, created_at, status, failure_reason, tags, "
    "metadata_json";

}  // namespace

TraceStore::TraceStore(const std::string& path, Database::Mode mode) : db_(std::make_unique<Database>(path, mode)) {
  schema::open(*db_);
  argsHaveRawSize_ = schema::version(*db_) >= 3;
}

TraceStore::~TraceStore() = default;

std::int64_t TraceStore::dataVersion() { return db_->pragmaInt("data_version"); }

std::int64_t TraceStore::schemaVersion() { return db_->pragmaInt("user_version"); }

std::string TraceStore::integrityCheck() {
  Statement st(*db_, "PRAGMA integrity_check");
  return st.step() ? st.text(0) : "?";
}

RunId TraceStore::createRun(const Run& run) {
  Statement st(*db_,
               "INSERT INTO runs(name, source, strategy, config_json, world_size, devices_json, created_at, status, "
               "failure_reason, tags, metadata_json) VALUES(?,?,?,?,?,?,?,?,?,?,?)");
  st.bind(1, run.name)
      .bind(2, toString(run.source))
      .bind(3, run.strategy)
      .bind(4, run.configJson.empty() ? std::string("{}") : run.configJson)
      .bind(5, run.worldSize)
      .bind(6, run.devicesJson.empty() ? std::string("[]") : run.devicesJson)
      .bind(7, run.createdAt.empty() ? nowIso8601() : run.createdAt)
      .bind(8, toString(run.status))
      .bind(9, run.failureReason)
      .bind(10, run.tags)
      .bind(11, run.metadataJson.empty() ? std::string("{}") : run.metadataJson);
  st.exec();
  return RunId{db_->lastInsertRowId()};
}

void TraceStore::updateRun(const Run& run) {
  Statement st(*db_,
               "UPDATE runs SET name=?, strategy=?, config_json=?, world_size=?, devices_json=?, status=?, "
               "failure_reason=?, tags=?, metadata_json=? WHERE id=?");
  st.bind(1, run.name)
      .bind(2, run.strategy)
      .bind(3, run.configJson)
      .bind(4, run.worldSize)
      .bind(5, run.devicesJson)
      .bind(6, toString(run.status))
      .bind(7, run.failureReason)
      .bind(8, run.tags)
      .bind(9, run.metadataJson)
      .bind(10, run.id.value());
  st.exec();
}

void TraceStore::setRunMetadata(RunId runId, const std::string& metadataJson) {
  Statement st(*db_, "UPDATE runs SET metadata_json=? WHERE id=?");
  st.bind(1, metadataJson).bind(2, runId.value());
  st.exec();
}

void TraceStore::setRunStatus(RunId runId, RunStatus status, const std::string& failureReason) {
  Statement st(*db_, "UPDATE runs SET status=?, failure_reason=? WHERE id=?");
  st.bind(1, toString(status)).bind(2, failureReason).bind(3, runId.value());
  st.exec();
}

void TraceStore::deleteRun(RunId runId) {
  Transaction tx(*db_);
  Statement st(*db_, "DELETE FROM runs WHERE id=?");
  st.bind(1, runId.value());
  st.exec();
  tx.commit();
}

std::vector<Run> TraceStore::runs() {
  std::vector<Run> out;
  Statement st(*db_, std::string("SELECT ") + kRunColumns + " FROM runs ORDER BY id");
  while (st.step()) out.push_back(readRun(st));
  return out;
}

std::optional<Run> TraceStore::run(RunId runId) {
  Statement st(*db_, std::string("SELECT ") + kRunColumns + " FROM runs WHERE id=?");
  st.bind(1, runId.value());
  if (!st.step()) return std::nullopt;
  return readRun(st);
}

std::optional<RunId> TraceStore::latestRunId() {
  Statement st(*db_, "SELECT MAX(id) FROM runs");
  if (!st.step() || st.isNull(0)) return std::nullopt;
  return RunId{st.int64(0)};
}

std::vector<RunCounts> TraceStore::runCounts() {
  std::vector<RunCounts> out;
  Statement st(*db_,
               "SELECT r.run_id, COUNT(DISTINCT r.id), "
               "IFNULL(SUM(CASE WHEN t.kind <> 'counter' THEN t.event_count ELSE 0 END), 0) "
               "FROM ranks r LEFT JOIN tracks t ON t.rank_id = r.id GROUP BY r.run_id");
  while (st.step()) out.push_back(RunCounts{RunId{st.int64(0)}, static_cast<int>(st.int64(1)), st.int64(2)});
  // A memory snapshot's allocator events count as the run's events (a snapshot-only run has no other).
  Statement has(*db_, "SELECT 1 FROM sqlite_master WHERE type='table' AND name='memsnaps'");
  if (has.step()) {
    Statement snaps(*db_,
                    "SELECT r.run_id, COUNT(*) FROM memsnap_events e JOIN memsnaps m ON m.id = e.snapshot_id "
                    "JOIN ranks r ON r.id = m.rank_id GROUP BY r.run_id");
    while (snaps.step())
      for (RunCounts& c : out)
        if (c.runId.value() == snaps.int64(0)) c.events += snaps.int64(1);
  }
  return out;
}

RunsFingerprint TraceStore::runsFingerprint() {
  Statement st(*db_,
               "SELECT COUNT(*), IFNULL(MAX(id), 0), "
               "IFNULL(SUM(id * CASE status WHEN 'pending' THEN 1 WHEN 'running' THEN 2 WHEN 'completed' THEN 3 "
               "WHEN 'failed' THEN 5 ELSE 7 END), 0), "
               "IFNULL(SUM(id * (length(name) + 31 * length(IFNULL(tags, '')) + unicode(name))), 0), "
               "IFNULL(SUM(status IN ('pending', 'running')), 0) FROM runs");
  RunsFingerprint f;
  if (st.step()) {
    f.count = st.int64(0);
    f.maxId = st.int64(1);
    f.statusSum = st.int64(2);
    f.textSum = st.int64(3);
    f.active = st.int64(4);
  }
  return f;
}

RankId TraceStore::addRank(const Rank& r) {
  Statement st(*db_,
               "INSERT INTO ranks(run_id, rank, host, device, source_file, time_base_ns, ts_float, metadata_json) "
               "VALUES(?,?,?,?,?,?,?,?)");
  st.bind(1, r.runId.value())
      .bind(2, r.rank)
      .bind(3, r.host)
      .bind(4, r.device)
      .bind(5, r.sourceFile)
      .bind(6, r.timeBaseNs)
      .bind(7, r.tsFloat ? 1 : 0)
      .bind(8, r.metadataJson.empty() ? std::string("{}") : r.metadataJson);
  st.exec();
  return RankId{db_->lastInsertRowId()};
}

void TraceStore::updateRank(const Rank& r) {
  Statement st(*db_,
               "UPDATE ranks SET rank=?, host=?, device=?, source_file=?, time_base_ns=?, ts_float=?, metadata_json=? "
               "WHERE id=?");
  st.bind(1, r.rank)
      .bind(2, r.host)
      .bind(3, r.device)
      .bind(4, r.sourceFile)
      .bind(5, r.timeBaseNs)
      .bind(6, r.tsFloat ? 1 : 0)
      .bind(7, r.metadataJson)
      .bind(8, r.id.value());
  st.exec();
}

std::vector<Rank> TraceStore::ranks(RunId runId) {
  std::vector<Rank> out;
  Statement st(*db_,
               "SELECT id, run_id, rank, host, device, source_file, time_base_ns, ts_float, metadata_json FROM ranks "
               "WHERE run_id=? ORDER BY rank");
  st.bind(1, runId.value());
  while (st.step()) {
    Rank r;
    r.id = RankId{st.int64(0)};
    r.runId = RunId{st.int64(1)};
    r.rank = static_cast<int>(st.int64(2));
    r.host = st.text(3);
    r.device = st.text(4);
    r.sourceFile = st.text(5);
    r.timeBaseNs = st.int64(6);
    r.tsFloat = st.int64(7) != 0;
    r.metadataJson = st.text(8);
    out.push_back(std::move(r));
  }
  return out;
}

TrackId TraceStore::addTrack(const Track& t) {
  Statement st(*db_,
               "INSERT INTO tracks(rank_id, kind, name, pid, tid, device, stream, sort_index, derived_from) "
               "VALUES(?,?,?,?,?,?,?,?,?)");
  st.bind(1, t.rankId.value()).bind(2, toString(t.kind)).bind(3, t.name).bind(4, t.pid).bind(5, t.tid);
  if (t.device)
    st.bind(6, *t.device);
  else
    st.bindNull(6);
  st.bind(7, t.stream).bind(8, t.sortIndex);
  if (t.derivedFrom.empty())
    st.bindNull(9);
  else
    st.bind(9, t.derivedFrom);
  st.exec();
  return TrackId{db_->lastInsertRowId()};
}

std::pair<TrackId, TrackId> TraceStore::addMemoryTracks(RankId rankId, int deviceType, int deviceId) {
  const std::string dev = memoryDeviceName(deviceType, deviceId);
  const std::string suffix = std::to_string(deviceType) + ":" + std::to_string(deviceId);
  Track a;
  a.rankId = rankId;
  a.kind = TrackKind::Counter;
  a.name = "memory allocated (" + dev + ")";
  a.device = deviceId;
  a.sortIndex = 1000;
  a.derivedFrom = "memory_events:allocated:" + suffix;
  Track r = a;
  r.name = "memory reserved (" + dev + ")";
  r.sortIndex = 1001;
  r.derivedFrom = "memory_events:reserved:" + suffix;
  const TrackId ai = addTrack(a);
  return {ai, addTrack(r)};
}

std::vector<Track> TraceStore::tracks(RunId runId) {
  std::vector<Track> out;
  for (auto& s : summary(runId).tracks) out.push_back(std::move(s.track));
  return out;
}

Id TraceStore::addProcessGroup(const ProcessGroup& pg) {
  Statement st(*db_,
               "INSERT INTO process_groups(run_id, name, description, backend, size, ranks_json) VALUES(?,?,?,?,?,?) "
               "ON CONFLICT(run_id, name) DO UPDATE SET "
               // What one rank knows (a collective's args) must not erase what another said (pg_config).
               "description=CASE WHEN excluded.description != '' THEN excluded.description ELSE description END, "
               "backend=CASE WHEN excluded.backend != '' THEN excluded.backend ELSE backend END, "
               "size=CASE WHEN excluded.size > 0 THEN excluded.size ELSE size END, "
               "ranks_json=CASE WHEN excluded.ranks_json NOT IN ('', '[]') THEN excluded.ranks_json ELSE ranks_json END "
               "RETURNING id");
  st.bind(1, pg.runId.value())
      .bind(2, pg.name)
      .bind(3, pg.description)
      .bind(4, pg.backend)
      .bind(5, pg.size)
      .bind(6, pg.ranksJson);
  if (!st.step()) db_->fail("cannot add process group " + pg.name);
  const Id id = st.int64(0);
  st.reset();
  return id;
}

std::vector<ProcessGroup> TraceStore::processGroups(RunId runId) {
  std::vector<ProcessGroup> out;
  Statement st(*db_,
               "SELECT id, run_id, name, description, backend, size, ranks_json FROM process_groups WHERE run_id=? "
               "ORDER BY id");
  st.bind(1, runId.value());
  while (st.step()) {
    ProcessGroup pg;
    pg.id = st.int64(0);
    pg.runId = RunId{st.int64(1)};
    pg.name = st.text(2);
    pg.description = st.text(3);
    pg.backend = st.text(4);
    pg.size = static_cast<int>(st.int64(5));
    pg.ranksJson = st.text(6);
    out.push_back(std::move(pg));
  }
  return out;
}

void TraceStore::addStep(const Step& s) {
  Statement st(*db_,
               "INSERT INTO steps(rank_id, step, start_ns, end_ns) VALUES(?,?,?,?) ON CONFLICT(rank_id, step) DO UPDATE "
               "SET start_ns=MIN(start_ns, excluded.start_ns), end_ns=MAX(end_ns, excluded.end_ns)");
  st.bind(1, s.rankId.value()).bind(2, s.step).bind(3, s.startNs).bind(4, s.endNs);
  st.exec();
}

std::vector<Step> TraceStore::steps(RunId runId) {
  std::vector<Step> out;
  Statement st(*db_,
               "SELECT s.rank_id, s.step, s.start_ns, s.end_ns FROM steps s JOIN ranks r ON r.id = s.rank_id "
               "WHERE r.run_id=? ORDER BY r.rank, s.step");
  st.bind(1, runId.value());
  while (st.step()) out.push_back(Step{RankId{st.int64(0)}, st.int64(1), st.int64(2), st.int64(3)});
  return out;
}

void TraceStore::setMetric(RunId runId, std::optional<RankId> rankId, const std::string& key, double value) {
  Statement st(*db_,
               "INSERT INTO metrics(run_id, rank_id, key, value) VALUES(?,?,?,?) "
               "ON CONFLICT(run_id, IFNULL(rank_id, -1), key) DO UPDATE SET value=excluded.value");
  st.bind(1, runId.value())
      .bind(2, rankId ? std::optional<std::int64_t>(rankId->value()) : std::nullopt)
      .bind(3, key)
      .bind(4, value);
  st.exec();
}

std::optional<double> TraceStore::metric(RunId runId, std::optional<RankId> rankId, const std::string& key) {
  Statement st(*db_, "SELECT value FROM metrics WHERE run_id=? AND IFNULL(rank_id, -1)=? AND key=?");
  st.bind(1, runId.value()).bind(2, rankId ? rankId->value() : std::int64_t{-1}).bind(3, key);
  if (!st.step() || st.isNull(0)) return std::nullopt;
  return st.real(0);
}

std::vector<TraceStore::MetricRow> TraceStore::metrics(RunId runId) {
  Statement st(*db_, "SELECT rank_id, key, value, text_value FROM metrics WHERE run_id=? ORDER BY IFNULL(rank_id, -1), key");
  st.bind(1, runId.value());
  std::vector<MetricRow> out;
  while (st.step()) {
    MetricRow m;
    if (!st.isNull(0)) m.rankId = RankId{st.int64(0)};
    m.key = st.text(1);
    if (!st.isNull(2)) m.value = st.real(2);
    if (!st.isNull(3)) m.text = st.text(3);
    out.push_back(std::move(m));
  }
  return out;
}

void TraceStore::setMetricRow(RunId runId, const MetricRow& m) {
  Statement st(*db_,
               "INSERT INTO metrics(run_id, rank_id, key, value, text_value) VALUES(?,?,?,?,?) "
               "ON CONFLICT(run_id, IFNULL(rank_id, -1), key) DO UPDATE SET value=excluded.value, "
               "text_value=excluded.text_value");
  st.bind(1, runId.value())
      .bind(2, m.rankId ? std::optional<std::int64_t>(m.rankId->value()) : std::nullopt)
      .bind(3, m.key)
      .bind(4, m.value)
      .bind(5, m.text);
  st.exec();
}

Id TraceStore::intern(std::string_view s) {
  // Heterogeneous lookup would avoid this copy; the cache hit rate is what matters here.
  thread_local std::string key;
  key.assign(s);
  if (auto it = internCache_.find(key); it != internCache_.end()) return it->second;
  Statement sel(*db_, "SELECT id FROM strings WHERE value=?");
  sel.bind(1, s);
  Id id;
  if (sel.step()) {
    id = sel.int64(0);
  } else {
    Statement ins(*db_, "INSERT INTO strings(value) VALUES(?)");
    ins.bind(1, s);
    ins.exec();
    id = db_->lastInsertRowId();
  }
  internCache_.emplace(key, id);
  return id;
}

std::string TraceStore::string(Id id) {
  if (auto it = stringCache_.find(id); it != stringCache_.end()) return it->second;
  Statement st(*db_, "SELECT value FROM strings WHERE id=?");
  st.bind(1, id);
  std::string v = st.step() ? st.text(0) : std::string();
  stringCache_.emplace(id, v);
  return v;
}

void TraceStore::invalidateCaches() {
  internCache_.clear();
  stringCache_.clear();
  stringPtr_.clear();
  argsCache_.clear();
}

const std::string& TraceStore::cachedString(Id id) {
  static const std::string empty;
  if (id <= 0) return empty;
  // String ids are dense: an array in front of the map makes the per-event lookups a load.
  const auto i = static_cast<std::size_t>(id);
  if (i < stringPtr_.size() && stringPtr_[i]) return *stringPtr_[i];
  auto it = stringCache_.find(id);
  if (it == stringCache_.end()) it = stringCache_.emplace(id, string(id)).first;
  if (i < (std::size_t{1} << 24)) {
    if (i >= stringPtr_.size()) stringPtr_.resize(std::max(i + 1, stringPtr_.size() * 2), nullptr);
    stringPtr_[i] = &it->second;  // map nodes do not move
  }
  return it->second;
}

Event TraceStore::makeEvent(const EventChunk& c, std::size_t i, Id chunkId, TrackId trackId) {
  Event e;
  e.id = EventChunk::eventId(chunkId, i);
  e.trackId = trackId;
  e.startNs = c.start[i];
  e.endNs = c.end[i];
  e.name = cachedString(c.name[i]);
  e.cat = cachedString(c.cat[i]);
  e.category = static_cast<Category>(c.category[i]);
  e.flags = c.flags[i];
  if (c.step[i] != EventChunk::kNull) e.step = c.step[i];
  if (c.correlation[i] != EventChunk::kNull) e.correlation = c.correlation[i];
  if (c.externalId[i] != EventChunk::kNull) e.externalId = c.externalId[i];
  e.collOp = static_cast<CollectiveOp>(c.collOp[i]);
  if (c.pg[i]) e.processGroupId = c.pg[i];
  if (c.bytes[i] != EventChunk::kNull) e.bytes = c.bytes[i];
  e.dtype = cachedString(c.dtype[i]);
  if (c.groupSize[i]) e.groupSize = c.groupSize[i];
  return e;
}

namespace {

std::string_view blobOf(const Statement& st, int col) {
  const auto* p = static_cast<const char*>(sqlite3_column_blob(st.handle(), col));
  return {p ? p : "", static_cast<std::size_t>(sqlite3_column_bytes(st.handle(), col))};
}

bool eventOrder(const Event& a, const Event& b) {
  if (a.startNs != b.startNs) return a.startNs < b.startNs;
  if (a.endNs != b.endNs) return a.endNs > b.endNs;
  return a.id < b.id;
}

}  // namespace

std::vector<Event> TraceStore::eventsInWindow(TrackId trackId, TimeNs t0, TimeNs t1, bool withArgs) {
  Statement st(*db_, "SELECT id, data FROM event_chunks WHERE track_id=? AND start_ns < ? AND end_ns >= ? ORDER BY start_ns, id");
  st.bind(1, trackId.value()).bind(2, t1).bind(3, t0);
  std::vector<Event> out;
  while (st.step()) {
    const Id chunkId = st.int64(0);
    const EventChunk c = EventChunk::decode(blobOf(st, 1));
    for (std::size_t i = 0; i < c.size(); ++i) {
      const bool overlaps = c.start[i] < t1 && (c.end[i] > t0 || (c.end[i] == c.start[i] && c.start[i] >= t0));
      if (overlaps) out.push_back(makeEvent(c, i, chunkId, trackId));
    }
  }
  std::sort(out.begin(), out.end(), eventOrder);
  if (withArgs)
    for (auto& e : out) e.argsJson = eventArgs(e.id);
  return out;
}

void TraceStore::forEachEvent(TrackId trackId, const std::function<void(const Event&)>& fn, bool withArgs) {
  forEachEventRef(trackId, [&](const EventChunk& c, std::size_t begin, std::size_t end, Id chunkId) {
    for (std::size_t i = begin; i < end; ++i) {
      Event e = makeEvent(c, i, chunkId, trackId);
      if (withArgs) e.argsJson = eventArgs(e.id);
      fn(e);
    }
  });
}

void TraceStore::forEachEventRef(TrackId trackId,
                                 const std::function<void(const EventChunk&, std::size_t, std::size_t, Id)>& fn) {
  // Chunks are sorted inside and come ordered by their first start; a chunk can only contribute
  // events once the merge frontier has reached its first start, so chunks are opened lazily.
  struct Cursor {
    Id chunkId;
    EventChunk chunk;
    std::size_t i = 0;
  };
  std::vector<Cursor> active;
  Statement st(*db_, "SELECT id, start_ns, data FROM event_chunks WHERE track_id=? ORDER BY start_ns, id");
  st.bind(1, trackId.value());
  bool more = st.step();
  for (;;) {
    // Smallest head among the open cursors.
    int best = -1;
    for (std::size_t k = 0; k < active.size(); ++k) {
      const auto& c = active[k];
      if (best < 0) {
        best = static_cast<int>(k);
        continue;
      }
      const auto& b = active[static_cast<std::size_t>(best)];
      const TimeNs cs = c.chunk.start[c.i], bs = b.chunk.start[b.i];
      if (cs < bs || (cs == bs && c.chunk.end[c.i] > b.chunk.end[b.i])) best = static_cast<int>(k);
    }
    if (more && (best < 0 ||
                 st.int64(1) <= active[static_cast<std::size_t>(best)].chunk.start[active[static_cast<std::size_t>(best)].i])) {
      active.push_back(Cursor{st.int64(0), EventChunk::decode(blobOf(st, 2)), 0});
      if (active.back().chunk.size() == 0) active.pop_back();
      more = st.step();
      continue;
    }
    if (best < 0) break;
    auto& cur = active[static_cast<std::size_t>(best)];
    if (active.size() == 1) {
      // One open chunk (the usual case): its events come in its own order up to the next chunk's start.
      const TimeNs next = more ? st.int64(1) : 0;
      const std::size_t begin = cur.i;
      do {
        ++cur.i;
      } while (cur.i < cur.chunk.size() && (!more || cur.chunk.start[cur.i] < next));
      fn(cur.chunk, begin, cur.i, cur.chunkId);
      if (cur.i >= cur.chunk.size()) active.clear();
      continue;
    }
    fn(cur.chunk, cur.i, cur.i + 1, cur.chunkId);
    if (++cur.i >= cur.chunk.size()) active.erase(active.begin() + best);
  }
}

const TraceStore::ArgsBlock* TraceStore::argsBlockFor(Id chunkId) {
  for (const auto& b : argsCache_)
    if (b.chunk == chunkId) return &b;
  Statement st(*db_, argsHaveRawSize_ ? "SELECT offsets, data, raw_size FROM event_args WHERE chunk_id=?"
                                      : "SELECT offsets, data, NULL FROM event_args WHERE chunk_id=?");
  st.bind(1, chunkId);
  ArgsBlock b;
  b.chunk = chunkId;
  if (st.step()) {
    const std::string_view off = blobOf(st, 0);
    b.offsets.resize(off.size() / 4);
    std::memcpy(b.offsets.data(), off.data(), b.offsets.size() * 4);
    const std::string_view data = blobOf(st, 1);
    if (st.isNull(2)) {
      b.data.assign(data);
    } else {
      const std::int64_t raw = st.int64(2);
      if (raw < 0 || raw > std::numeric_limits<int>::max() ||
          data.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()))
        throw DatabaseError(db_->path() + ": event args block of chunk " + std::to_string(chunkId) + " is damaged (size " +
                            std::to_string(raw) + ")");
      b.data.resize(static_cast<std::size_t>(raw));
      const int n = LZ4_decompress_safe(data.data(), b.data.data(), static_cast<int>(data.size()), static_cast<int>(raw));
      if (n != raw)
        throw DatabaseError(db_->path() + ": event args block of chunk " + std::to_string(chunkId) +
                            " is damaged (LZ4 data does not decode)");
    }
  }
  constexpr std::size_t kCacheBlocks = 16;
  if (argsCache_.size() < kCacheBlocks) {
    argsCache_.push_back(std::move(b));
    return &argsCache_.back();
  }
  argsCacheNext_ = (argsCacheNext_ + 1) % kCacheBlocks;
  argsCache_[argsCacheNext_] = std::move(b);
  return &argsCache_[argsCacheNext_];
}

std::string TraceStore::eventArgs(Id eventId) {
  const ArgsBlock* b = argsBlockFor(EventChunk::chunkOf(eventId));
  const std::size_t i = EventChunk::indexOf(eventId);
  if (!b || i + 1 >= b->offsets.size()) return {};
  const std::uint32_t from = b->offsets[i], to = b->offsets[i + 1];
  if (to < from || to > b->data.size()) return {};
  return b->data.substr(from, to - from);
}

std::optional<Event> TraceStore::event(Id eventId, bool withArgs) {
  Statement st(*db_, "SELECT track_id, data FROM event_chunks WHERE id=?");
  st.bind(1, EventChunk::chunkOf(eventId));
  if (!st.step()) return std::nullopt;
  const EventChunk c = EventChunk::decode(blobOf(st, 1));
  const std::size_t i = EventChunk::indexOf(eventId);
  if (i >= c.size()) return std::nullopt;
  Event e = makeEvent(c, i, EventChunk::chunkOf(eventId), TrackId{st.int64(0)});
  if (withArgs) e.argsJson = eventArgs(eventId);
  return e;
}

std::vector<CounterSample> TraceStore::counterSamples(TrackId trackId) {
  std::vector<CounterSample> out;
  forEachCounterSample(trackId, [&](TimeNs ts, double v) { out.push_back(CounterSample{ts, v}); });
  return out;
}

void TraceStore::forEachCounterSample(TrackId trackId, const std::function<void(TimeNs, double)>& fn) {
  std::string derived;
  RankId rankId;
  {
    Statement t(*db_, "SELECT IFNULL(derived_from, ''), rank_id FROM tracks WHERE id=?");
    t.bind(1, trackId.value());
    if (t.step()) {
      derived = t.text(0);
      rankId = RankId{t.int64(1)};
    }
  }
  if (!derived.empty()) {
    // "memory_events:<allocated|reserved>:<device type>:<device id>"
    char which[16] = {};
    int type = 0, dev = 0;
    if (std::sscanf(derived.c_str(), "memory_events:%15[a-z]:%d:%d", which, &type, &dev) == 3) {
      const bool allocated = std::string_view(which) == "allocated";
      Statement st(*db_, std::string("SELECT ts_ns, ") + (allocated ? "total_allocated" : "total_reserved") +
                             " FROM memory_events WHERE rank_id=? AND device_type=? AND device_id=? ORDER BY ts_ns, id");
      st.bind(1, rankId.value()).bind(2, type).bind(3, dev);
      while (st.step()) fn(st.int64(0), static_cast<double>(st.int64(1)));
    }
    return;
  }
  Statement st(*db_, "SELECT ts_ns, value FROM counters WHERE track_id=? ORDER BY ts_ns, rowid");
  st.bind(1, trackId.value());
  while (st.step()) fn(st.int64(0), st.real(1));
}

std::vector<Flow> TraceStore::flows(RankId rankId) {
  std::vector<Flow> out;
  forEachFlow(rankId, [&](const Flow& f) { out.push_back(f); });
  return out;
}

void TraceStore::forEachFlow(RankId rankId, const std::function<void(const Flow&)>& fn, FlowOrder order) {
  // (rank_id, flow_id, rowid) is the flows_rank index order: FlowId streams without a sort.
  Statement st(*db_, order == FlowOrder::FlowId
                         ? "SELECT rank_id, flow_id, cat_id, name_id, phase, track_id, ts_ns, bind_enclosing FROM flows "
                           "WHERE rank_id=? ORDER BY flow_id, id"
                         : "SELECT rank_id, flow_id, cat_id, name_id, phase, track_id, ts_ns, bind_enclosing FROM flows "
                           "WHERE rank_id=? ORDER BY id");
  st.bind(1, rankId.value());
  Flow f;
  while (st.step()) {
    f.rankId = RankId{st.int64(0)};
    f.flowId = st.int64(1);
    f.catId = st.isNull(2) ? 0 : st.int64(2);
    f.nameId = st.isNull(3) ? 0 : st.int64(3);
    f.phase = st.textView(4).empty() ? 's' : st.textView(4)[0];
    f.trackId = TrackId{st.int64(5)};
    f.tsNs = st.int64(6);
    f.bindEnclosing = st.int64(7) != 0;
    fn(f);
  }
}

std::optional<TimeNs> TraceStore::firstFlowNs(RankId rankId) {
  Statement st(*db_, "SELECT MIN(ts_ns) FROM flows WHERE rank_id=?");
  st.bind(1, rankId.value());
  if (st.step() && !st.isNull(0)) return st.int64(0);
  return std::nullopt;
}

std::optional<TimeNs> TraceStore::firstMemoryEventNs(RankId rankId) {
  Statement st(*db_, "SELECT MIN(ts_ns) FROM memory_events WHERE rank_id=?");
  st.bind(1, rankId.value());
  if (st.step() && !st.isNull(0)) return st.int64(0);
  return std::nullopt;
}

bool TraceStore::hasMemoryEvents(RankId rankId) {
  Statement st(*db_, "SELECT EXISTS(SELECT 1 FROM memory_events WHERE rank_id=?)");
  st.bind(1, rankId.value());
  return st.step() && st.int64(0) != 0;
}

std::vector<MemoryEvent> TraceStore::memoryEvents(RankId rankId) {
  std::vector<MemoryEvent> out;
  forEachMemoryEvent(rankId, [&](const MemoryEvent& m) { out.push_back(m); });
  return out;
}

void TraceStore::forEachMemoryEvent(RankId rankId, const std::function<void(const MemoryEvent&)>& fn, bool totalsOnly) {
  Statement st(*db_, totalsOnly ? "SELECT ts_ns, device_type, device_id, total_allocated, total_reserved "
                                  "FROM memory_events WHERE rank_id=? ORDER BY ts_ns, id"
                                : "SELECT ts_ns, device_type, device_id, total_allocated, total_reserved, addr, bytes, "
                                  "out_of_memory FROM memory_events WHERE rank_id=? ORDER BY ts_ns, id");
  st.bind(1, rankId.value());
  MemoryEvent m;
  m.rankId = rankId;
  while (st.step()) {
    m.tsNs = st.int64(0);
    m.deviceType = static_cast<int>(st.int64(1));
    m.deviceId = static_cast<int>(st.int64(2));
    m.totalAllocated = st.int64(3);
    m.totalReserved = st.int64(4);
    if (!totalsOnly) {
      m.addr = st.int64(5);
      m.bytes = st.int64(6);
      m.outOfMemory = st.int64(7) != 0;
    }
    fn(m);
  }
}

RunSummary TraceStore::summary(RunId runId) {
  RunSummary s;
  auto r = run(runId);
  if (!r) throw Error(path() + ": no run with id " + std::to_string(runId.value()));
  s.run = *r;
  s.ranks = ranks(runId);
  Statement st(*db_,
               "SELECT t.id, t.rank_id, t.kind, t.name, t.pid, t.tid, t.device, t.stream, t.sort_index, t.event_count, "
               "t.min_start_ns, t.max_end_ns, t.max_dur_ns, t.collective_count, IFNULL(t.derived_from, '') FROM tracks t JOIN "
               "ranks r ON r.id = t.rank_id "
               "WHERE r.run_id=? ORDER BY r.rank, t.sort_index, t.id");
  st.bind(1, runId.value());
  while (st.step()) {
    TrackSummary ts;
    ts.track.id = TrackId{st.int64(0)};
    ts.track.rankId = RankId{st.int64(1)};
    ts.track.kind = trackKindFromString(st.textView(2)).value_or(TrackKind::CpuThread);
    ts.track.name = st.text(3);
    ts.track.pid = st.optInt64(4);
    ts.track.tid = st.optInt64(5);
    if (auto d = st.optInt64(6)) ts.track.device = static_cast<int>(*d);
    ts.track.stream = st.optInt64(7);
    ts.track.sortIndex = static_cast<int>(st.int64(8));
    ts.eventCount = st.int64(9);
    ts.minStartNs = st.optInt64(10);
    ts.maxEndNs = st.optInt64(11);
    ts.maxDurNs = st.int64(12);
    ts.collectiveCount = st.int64(13);
    ts.track.derivedFrom = st.text(14);
    // Collectives as issued by the GPU/comm side: NCCL kernels and our own comm spans.
    if (ts.track.kind == TrackKind::GpuStream || ts.track.kind == TrackKind::Comm) s.collectiveCount += ts.collectiveCount;
    if (ts.track.kind == TrackKind::Counter)
      s.counterSamples += ts.eventCount;
    else
      s.eventCount += ts.eventCount;
    if (ts.minStartNs) s.startNs = s.startNs ? std::min(*s.startNs, *ts.minStartNs) : *ts.minStartNs;
    if (ts.maxEndNs) s.endNs = s.endNs ? std::max(*s.endNs, *ts.maxEndNs) : *ts.maxEndNs;
    s.tracks.push_back(std::move(ts));
  }
  {
    Statement c(*db_, "SELECT COUNT(*) FROM steps s JOIN ranks r ON r.id=s.rank_id WHERE r.run_id=?");
    c.bind(1, runId.value());
    if (c.step()) s.stepCount = c.int64(0);
  }
  return s;
}

// ---------------------------------------------------------------------------------------------

namespace {

// LZ4 (fast, ~10x on Kineto args): a block is written once, at import, and read only for the events
// a user opens or an export writes. Kept raw (`data` itself) when it would not save an eighth.
std::string_view compressArgs(std::string_view data, std::string& out) {
  if (data.size() < 256 || data.size() > static_cast<std::size_t>(LZ4_MAX_INPUT_SIZE)) return data;
  out.resize(static_cast<std::size_t>(LZ4_compressBound(static_cast<int>(data.size()))));
  const int n = LZ4_compress_default(data.data(), out.data(), static_cast<int>(data.size()), static_cast<int>(out.size()));
  if (n <= 0 || static_cast<std::size_t>(n) > data.size() - data.size() / 8) return data;
  return {out.data(), static_cast<std::size_t>(n)};
}

}  // namespace

struct BulkWriter::Encoder {
  static constexpr std::size_t kMaxInFlight = 16;  // chunks prepared ahead of their insert, at most
  std::mutex m;
  std::condition_variable work, done;
  std::deque<PreparedChunk*> todo;  // in order, not yet taken by the thread
  bool stop = false;
  // The writing thread's own: every chunk not inserted yet, in order, and emptied ones to reuse.
  std::deque<std::unique_ptr<PreparedChunk>> inFlight;
  std::vector<std::unique_ptr<PreparedChunk>> spare;
  std::thread thread;

  Encoder() {
    thread = std::thread([this] {
      pthread_setname_np(pthread_self(), "ss-encode");
      for (;;) {
        PreparedChunk* p = nullptr;
        {
          std::unique_lock lk(m);
          work.wait(lk, [&] { return stop || !todo.empty(); });
          if (stop) return;
          p = todo.front();
          todo.pop_front();
        }
        try {
          prepare(*p);
        } catch (...) {
          p->error = std::current_exception();
        }
        {
          std::lock_guard lk(m);
          p->ready = true;
        }
        done.notify_all();
      }
    });
  }
  ~Encoder() {
    {
      std::lock_guard lk(m);
      stop = true;
    }
    work.notify_all();
    thread.join();
  }
  Encoder(const Encoder&) = delete;
  Encoder& operator=(const Encoder&) = delete;
};

BulkWriter::BulkWriter(TraceStore& store)
    : store_(store),
      insChunk_(storeDb(store), "INSERT INTO event_chunks(track_id, count, start_ns, end_ns, data) VALUES(?,?,?,?,?)"),
      insArgs_(storeDb(store), "INSERT INTO event_args(chunk_id, offsets, data, raw_size) VALUES(?,?,?,?)"),
      insCounter_(storeDb(store), "INSERT INTO counters(track_id, ts_ns, value) VALUES(?,?,?)"),
      insFlow_(storeDb(store),
               "INSERT INTO flows(rank_id, flow_id, cat_id, name_id, phase, track_id, ts_ns, bind_enclosing) "
               "VALUES(?,?,?,?,?,?,?,?)"),
      insMemory_(storeDb(store),
                 "INSERT INTO memory_events(rank_id, ts_ns, device_type, device_id, addr, bytes, total_allocated, "
                 "total_reserved, out_of_memory) VALUES(?,?,?,?,?,?,?,?,?)") {
  // SQLite before 3.32 allows 999 parameters to a statement.
  const int params = sqlite3_limit(storeDb(store).handle(), SQLITE_LIMIT_VARIABLE_NUMBER, -1);
  memoryRows_ = std::clamp<std::size_t>(static_cast<std::size_t>(std::max(params, 9)) / 9, 1, kMemoryRows);
}

BulkWriter::~BulkWriter() = default;

void BulkWriter::encodeOnThread() {
  if (!encoder_) encoder_ = std::make_unique<Encoder>();
}

BulkWriter::OpenChunk& BulkWriter::beginEvent(const EventRecord& e) {
  CachedTrack& cached = cachedTrack(e.trackId);
  if (!cached.open) {
    auto [it, fresh] = open_.try_emplace(e.trackId);
    if (fresh && !spareOpen_.empty()) {
      it->second = std::move(spareOpen_.back());
      spareOpen_.pop_back();
    }
    cached.open = &it->second;
  }
  OpenChunk& oc = *cached.open;
  if (oc.chunk.size() == 0) oc.chunk.reserve(EventChunk::kMaxEvents);
  oc.chunk.push(e);
  oc.argsOffsets.push_back(static_cast<std::uint32_t>(oc.args.size()));
  return oc;
}

void BulkWriter::endEvent(const EventRecord& e, OpenChunk& oc) {
  if (oc.args.size() > oc.argsOffsets.back()) oc.hasArgs = true;
  bool fresh = false;
  TrackStats& s = trackStats(e.trackId, fresh);
  if (fresh || e.startNs < s.minStart) s.minStart = e.startNs;
  if (fresh || e.endNs > s.maxEnd) s.maxEnd = e.endNs;
  s.maxDur = std::max(s.maxDur, e.endNs - e.startNs);
  ++s.count;
  if (e.collOp != CollectiveOp::None && e.category == Category::Communication) ++s.collectives;
  // Chunks also close when their args grow large, so one args blob stays small to fetch.
  if (oc.chunk.size() >= static_cast<std::size_t>(EventChunk::kMaxEvents) || oc.args.size() >= (1u << 20))
    writeChunk(e.trackId, oc);
}

void BulkWriter::addEvent(const EventRecord& e, std::string_view argsJson) {
  OpenChunk& oc = beginEvent(e);
  oc.args.append(argsJson);
  endEvent(e, oc);
}

void BulkWriter::addEvent(const EventRecord& e, const std::function<void(std::string&)>& appendArgs) {
  OpenChunk& oc = beginEvent(e);
  appendArgs(oc.args);
  endEvent(e, oc);
}

// The chunk's events move into a PreparedChunk (whose emptied buffers the open chunk gets instead),
// which is prepared and inserted here, or prepared on the encoding thread and inserted later, in order.
void BulkWriter::writeChunk(TrackId trackId, OpenChunk& oc) {
  if (oc.chunk.size() == 0) return;
  const bool mark = beforeFlush_ && beforeFlush_(trackId, oc.chunk);
  if (!encoder_) {
    std::swap(sync_.oc, oc);
    sync_.trackId = trackId;
    sync_.mark = mark;
    prepare(sync_);
    insert(sync_);
    return;
  }
  Encoder& en = *encoder_;
  std::unique_ptr<PreparedChunk> p;
  if (!en.spare.empty()) {
    p = std::move(en.spare.back());
    en.spare.pop_back();
  } else {
    p = std::make_unique<PreparedChunk>();
  }
  std::swap(p->oc, oc);
  p->trackId = trackId;
  p->mark = mark;
  p->ready = false;
  p->error = nullptr;
  PreparedChunk* raw = p.get();
  en.inFlight.push_back(std::move(p));
  {
    std::lock_guard lk(en.m);
    en.todo.push_back(raw);
  }
  en.work.notify_one();
  insertPrepared(false);
}

void BulkWriter::prepare(PreparedChunk& p) {
  OpenChunk& oc = p.oc;
  const auto perm = oc.chunk.sortByTime();
  p.maxEnd = oc.chunk.end[0];
  for (auto v : oc.chunk.end) p.maxEnd = std::max(p.maxEnd, v);
  oc.chunk.encodeInto(p.blob);
  if (!oc.hasArgs) return;
  // Args follow the sorted order of the chunk (usually the order they came in: no copy then).
  oc.argsOffsets.push_back(static_cast<std::uint32_t>(oc.args.size()));
  bool identity = true;
  for (std::size_t k = 0; k < perm.size() && identity; ++k) identity = perm[k] == k;
  if (!identity) {
    p.reordered.clear();
    p.reorderedOffsets.clear();
    p.reordered.reserve(oc.args.size());
    p.reorderedOffsets.reserve(perm.size() + 1);
    for (std::uint32_t old : perm) {
      p.reorderedOffsets.push_back(static_cast<std::uint32_t>(p.reordered.size()));
      p.reordered.append(oc.args, oc.argsOffsets[old], oc.argsOffsets[old + 1] - oc.argsOffsets[old]);
    }
    p.reorderedOffsets.push_back(static_cast<std::uint32_t>(p.reordered.size()));
  }
  const std::string& data = identity ? oc.args : p.reordered;
  p.argsOffsets = identity ? &oc.argsOffsets : &p.reorderedOffsets;
  p.argsRawSize = data.size();
  p.argsStored = compressArgs(data, p.compressed);
  p.argsCompressed = p.argsStored.data() != data.data();
}

void BulkWriter::insert(PreparedChunk& p) {
  OpenChunk& oc = p.oc;
  auto* h = insChunk_.handle();
  insChunk_.bind(1, p.trackId.value())
      .bind(2, static_cast<std::int64_t>(oc.chunk.size()))
      .bind(3, oc.chunk.start.front())
      .bind(4, p.maxEnd);
  if (sqlite3_bind_blob(h, 5, p.blob.data(), static_cast<int>(p.blob.size()), SQLITE_STATIC) != SQLITE_OK)
    storeDb(store_).fail("cannot bind event chunk");
  insChunk_.exec();
  const Id chunkId = storeDb(store_).lastInsertRowId();
  if (p.mark) marked_.push_back(chunkId);
  if (oc.hasArgs) {
    const std::vector<std::uint32_t>& offsets = *p.argsOffsets;
    auto* ha = insArgs_.handle();
    insArgs_.bind(1, chunkId);
    if (sqlite3_bind_blob(ha, 2, offsets.data(), static_cast<int>(offsets.size() * 4), SQLITE_STATIC) != SQLITE_OK ||
        sqlite3_bind_blob(ha, 3, p.argsStored.data(), static_cast<int>(p.argsStored.size()), SQLITE_STATIC) != SQLITE_OK)
      storeDb(store_).fail("cannot bind event args");
    if (p.argsCompressed)
      insArgs_.bind(4, static_cast<std::int64_t>(p.argsRawSize));
    else
      insArgs_.bindNull(4);
    insArgs_.exec();
  }
  oc.chunk.clear();
  oc.args.clear();
  oc.argsOffsets.clear();
  oc.hasArgs = false;
  p.argsStored = {};
  p.argsOffsets = nullptr;
}

void BulkWriter::insertPrepared(bool all) {
  if (!encoder_) return;
  Encoder& en = *encoder_;
  while (!en.inFlight.empty()) {
    PreparedChunk& p = *en.inFlight.front();
    {
      std::unique_lock lk(en.m);
      if (!p.ready) {
        if (!all && en.inFlight.size() <= Encoder::kMaxInFlight) return;
        en.done.wait(lk, [&] { return p.ready; });
      }
    }
    if (p.error) std::rethrow_exception(p.error);
    insert(p);
    en.spare.push_back(std::move(en.inFlight.front()));
    en.inFlight.pop_front();
  }
}

void BulkWriter::flush() {
  for (auto& [track, oc] : open_) writeChunk(track, oc);
  insertPrepared(true);
  writeMemoryEvents();
}

void BulkWriter::addCounter(TrackId trackId, TimeNs ts, double value) {
  insCounter_.bind(1, trackId.value()).bind(2, ts).bind(3, value);
  insCounter_.exec();
  noteSample(trackId, ts);
}

void BulkWriter::addFlow(const Flow& f) {
  const char phase[2] = {f.phase, 0};
  insFlow_.bind(1, f.rankId.value()).bind(2, f.flowId);
  if (f.catId)
    insFlow_.bind(3, f.catId);
  else
    insFlow_.bindNull(3);
  if (f.nameId)
    insFlow_.bind(4, f.nameId);
  else
    insFlow_.bindNull(4);
  insFlow_.bind(5, std::string_view(phase, 1)).bind(6, f.trackId.value()).bind(7, f.tsNs).bind(8, f.bindEnclosing ? 1 : 0);
  insFlow_.exec();
}

BulkWriter::TrackStats& BulkWriter::trackStats(TrackId trackId, bool& fresh) {
  CachedTrack& cached = cachedTrack(trackId);
  fresh = false;
  if (!cached.stats) {
    auto [it, made] = stats_.try_emplace(trackId);
    fresh = made;
    cached.stats = &it->second;
  }
  return *cached.stats;
}

void BulkWriter::noteSample(TrackId trackId, TimeNs ts) {
  bool fresh = false;
  TrackStats& s = trackStats(trackId, fresh);
  if (fresh || ts < s.minStart) s.minStart = ts;
  if (fresh || ts > s.maxEnd) s.maxEnd = ts;
  ++s.count;
}

// Memory records come by the million (one per allocation and free): they are written up to
// kMemoryRows to a statement, which cuts SQLite's cost per row (one step, reset and halt per group;
// 256 rows cost 2 % less of the import's CPU than 64).
void BulkWriter::addMemoryEvent(const MemoryEvent& m) {
  memory_.push_back(m);
  if (memory_.size() >= memoryRows_) writeMemoryEvents();
}

void BulkWriter::writeMemoryEvents() {
  if (memory_.empty()) return;
  const bool full = memory_.size() == memoryRows_;
  if (full && !insMemoryMany_.handle()) {
    std::string sql =
        "INSERT INTO memory_events(rank_id, ts_ns, device_type, device_id, addr, bytes, total_allocated, "
        "total_reserved, out_of_memory) VALUES";
    for (std::size_t i = 0; i < memoryRows_; ++i) sql += i ? ",(?,?,?,?,?,?,?,?,?)" : "(?,?,?,?,?,?,?,?,?)";
    insMemoryMany_ = Statement(storeDb(store_), sql);
  }
  Statement& st = full ? insMemoryMany_ : insMemory_;
  int p = 1;
  for (const MemoryEvent& m : memory_) {
    st.bind(p, m.rankId.value())
        .bind(p + 1, m.tsNs)
        .bind(p + 2, m.deviceType)
        .bind(p + 3, m.deviceId)
        .bind(p + 4, m.addr)
        .bind(p + 5, m.bytes)
        .bind(p + 6, m.totalAllocated)
        .bind(p + 7, m.totalReserved)
        .bind(p + 8, m.outOfMemory ? 1 : 0);
    if (full) {
      p += 9;
    } else {
      st.exec();
    }
  }
  if (full) st.exec();
  memory_.clear();
}

void BulkWriter::rewriteChunks(TrackId trackId, TimeNs t0, TimeNs t1, const std::function<bool(EventChunk&)>& fn) {
  insertPrepared(true);
  std::vector<std::pair<Id, std::string>> chunks;
  {
    Statement st(storeDb(store_), "SELECT id, data FROM event_chunks WHERE track_id=? AND start_ns <= ? AND end_ns >= ?");
    st.bind(1, trackId.value()).bind(2, t1).bind(3, t0);
    while (st.step()) chunks.emplace_back(st.int64(0), std::string(blobOf(st, 1)));
  }
  Statement upd(storeDb(store_), "UPDATE event_chunks SET data=?, start_ns=?, end_ns=? WHERE id=?");
  for (auto& [id, blob] : chunks) rewriteChunk(id, blob, fn, upd);
}

void BulkWriter::rewriteChunk(Id chunkId, std::string_view blob, const std::function<bool(EventChunk&)>& fn, Statement& upd) {
  EventChunk c = EventChunk::decode(blob);
  if (!fn(c) || c.size() == 0) return;
  TimeNs maxEnd = c.end[0];
  for (auto v : c.end) maxEnd = std::max(maxEnd, v);
  const std::string enc = c.encode();
  if (sqlite3_bind_blob(upd.handle(), 1, enc.data(), static_cast<int>(enc.size()), SQLITE_STATIC) != SQLITE_OK)
    storeDb(store_).fail("cannot bind event chunk");
  upd.bind(2, c.start.front()).bind(3, maxEnd).bind(4, chunkId);
  upd.exec();
}

void BulkWriter::rewriteMarked(const std::function<bool(EventChunk&)>& fn) {
  flush();
  Statement sel(storeDb(store_), "SELECT data FROM event_chunks WHERE id=?");
  Statement upd(storeDb(store_), "UPDATE event_chunks SET data=?, start_ns=?, end_ns=? WHERE id=?");
  std::vector<Id> ids;
  ids.swap(marked_);
  for (Id id : ids) {
    sel.bind(1, id);
    if (sel.step()) {
      const std::string blob(blobOf(sel, 0));
      sel.reset();
      rewriteChunk(id, blob, fn, upd);
    } else {
      sel.reset();
    }
  }
}

void BulkWriter::shiftTracks(const std::vector<TrackId>& trackIds, TimeNs delta) {
  if (delta == 0) return;
  flush();
  Statement counters(storeDb(store_), "UPDATE counters SET ts_ns = ts_ns + ? WHERE track_id = ?");
  Statement trackStats(storeDb(store_),
                       "UPDATE tracks SET min_start_ns = min_start_ns + ?1, max_end_ns = max_end_ns + ?1 WHERE id = ?2");
  for (TrackId t : trackIds) {
    rewriteChunks(t, std::numeric_limits<TimeNs>::min(), std::numeric_limits<TimeNs>::max(), [&](EventChunk& c) {
      for (auto& v : c.start) v += delta;
      for (auto& v : c.end) v += delta;
      return true;
    });
    counters.bind(1, delta).bind(2, t.value());
    counters.exec();
    if (auto it = stats_.find(t); it != stats_.end()) {
      it->second.minStart += delta;
      it->second.maxEnd += delta;
    } else {  // written by an earlier finish(): its statistics are in the row
      trackStats.bind(1, delta).bind(2, t.value());
      trackStats.exec();
    }
  }
}

void BulkWriter::finish() {
  flush();
  Statement st(storeDb(store_),
               "UPDATE tracks SET event_count = event_count + ?1, min_start_ns = MIN(IFNULL(min_start_ns, ?2), ?2), "
               "max_end_ns = MAX(IFNULL(max_end_ns, ?3), ?3), max_dur_ns = MAX(max_dur_ns, ?4), "
               "collective_count = collective_count + ?5 WHERE id = ?6");
  for (const auto& [track, s] : stats_) {
    st.bind(1, s.count).bind(2, s.minStart).bind(3, s.maxEnd).bind(4, s.maxDur).bind(5, s.collectives).bind(6, track.value());
    st.exec();
  }
  stats_.clear();
  for (CachedTrack& c : cachedTracks_) c.stats = nullptr;
  // The tracks written so far may get no more events (an importer's finished file): their open
  // chunks' buffers go to the tracks that come next instead of being grown anew. The entries stay:
  // flush() writes the open chunks in the map's order, which must not change.
  for (auto& [track, oc] : open_)
    if (oc.chunk.start.capacity() && spareOpen_.size() < 64) spareOpen_.push_back(std::exchange(oc, OpenChunk{}));
}

}  // namespace shardscope::core
