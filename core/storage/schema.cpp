#include "core/storage/schema.h"

#include <array>
#include <string>

#include "core/util/error.h"

namespace shardscope::core::schema {
namespace {

// Version 1: the first layout (runs, ranks, tracks, interned strings, event chunks, counters, steps, metrics).
constexpr const char* kV1 = R"SQL(
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE runs(
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  source TEXT NOT NULL CHECK (source IN ('runtime','kineto','simulated')),
  strategy TEXT NOT NULL DEFAULT '',
  config_json TEXT NOT NULL DEFAULT '{}',
  world_size INTEGER NOT NULL DEFAULT 0,
  devices_json TEXT NOT NULL DEFAULT '[]',
  created_at TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('pending','running','completed','failed','cancelled')),
  failure_reason TEXT NOT NULL DEFAULT ''
);
CREATE TABLE ranks(
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  rank INTEGER NOT NULL,
  host TEXT NOT NULL DEFAULT '',
  device TEXT NOT NULL DEFAULT '',
  source_file TEXT NOT NULL DEFAULT '',
  time_base_ns INTEGER NOT NULL DEFAULT 0,
  ts_float INTEGER NOT NULL DEFAULT 0,
  metadata_json TEXT NOT NULL DEFAULT '{}',
  UNIQUE(run_id, rank)
);
CREATE TABLE process_groups(
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  name TEXT NOT NULL,
  description TEXT NOT NULL DEFAULT '',
  backend TEXT NOT NULL DEFAULT '',
  size INTEGER NOT NULL DEFAULT 0,
  ranks_json TEXT NOT NULL DEFAULT '[]',
  UNIQUE(run_id, name)
);
CREATE TABLE strings(id INTEGER PRIMARY KEY, value TEXT NOT NULL UNIQUE);
CREATE TABLE tracks(
  id INTEGER PRIMARY KEY,
  rank_id INTEGER NOT NULL REFERENCES ranks(id) ON DELETE CASCADE,
  kind TEXT NOT NULL CHECK (kind IN ('gpu_stream','cpu_thread','comm','counter','python')),
  name TEXT NOT NULL,
  pid INTEGER,
  tid INTEGER,
  device INTEGER,
  stream INTEGER,
  sort_index INTEGER NOT NULL DEFAULT 0,
  event_count INTEGER NOT NULL DEFAULT 0,
  min_start_ns INTEGER,
  max_end_ns INTEGER,
  max_dur_ns INTEGER NOT NULL DEFAULT 0,
  collective_count INTEGER NOT NULL DEFAULT 0,
  derived_from TEXT
);
CREATE INDEX tracks_rank ON tracks(rank_id);
CREATE TABLE event_chunks(
  id INTEGER PRIMARY KEY,
  track_id INTEGER NOT NULL REFERENCES tracks(id) ON DELETE CASCADE,
  count INTEGER NOT NULL,
  start_ns INTEGER NOT NULL,
  end_ns INTEGER NOT NULL,
  data BLOB NOT NULL
);
CREATE INDEX event_chunks_track_start ON event_chunks(track_id, start_ns);
CREATE TABLE counters(
  track_id INTEGER NOT NULL REFERENCES tracks(id) ON DELETE CASCADE,
  ts_ns INTEGER NOT NULL,
  value REAL NOT NULL
);
CREATE INDEX counters_track_ts ON counters(track_id, ts_ns);
CREATE TABLE steps(
  id INTEGER PRIMARY KEY,
  rank_id INTEGER NOT NULL REFERENCES ranks(id) ON DELETE CASCADE,
  step INTEGER NOT NULL,
  start_ns INTEGER NOT NULL,
  end_ns INTEGER NOT NULL,
  UNIQUE(rank_id, step)
);
CREATE TABLE metrics(
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  rank_id INTEGER REFERENCES ranks(id) ON DELETE CASCADE,
  key TEXT NOT NULL,
  value REAL,
  text_value TEXT
);
CREATE UNIQUE INDEX metrics_key ON metrics(run_id, IFNULL(rank_id, -1), key);
)SQL";

// Version 2: free-form event args, non-launch flows, [memory] allocation records, run tags/metadata.
constexpr const char* kV2 = R"SQL(
ALTER TABLE runs ADD COLUMN tags TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN metadata_json TEXT NOT NULL DEFAULT '{}';
CREATE TABLE event_args(
  chunk_id INTEGER PRIMARY KEY REFERENCES event_chunks(id) ON DELETE CASCADE,
  offsets BLOB NOT NULL,
  data BLOB NOT NULL
);
CREATE TABLE flows(
  id INTEGER PRIMARY KEY,
  rank_id INTEGER NOT NULL REFERENCES ranks(id) ON DELETE CASCADE,
  flow_id INTEGER NOT NULL,
  cat_id INTEGER REFERENCES strings(id),
  name_id INTEGER REFERENCES strings(id),
  phase TEXT NOT NULL CHECK (phase IN ('s','t','f')),
  track_id INTEGER NOT NULL REFERENCES tracks(id) ON DELETE CASCADE,
  ts_ns INTEGER NOT NULL,
  bind_enclosing INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX flows_rank ON flows(rank_id, flow_id);
CREATE TABLE memory_events(
  id INTEGER PRIMARY KEY,
  rank_id INTEGER NOT NULL REFERENCES ranks(id) ON DELETE CASCADE,
  ts_ns INTEGER NOT NULL,
  device_type INTEGER NOT NULL,
  device_id INTEGER NOT NULL,
  addr INTEGER NOT NULL,
  bytes INTEGER NOT NULL,
  total_allocated INTEGER NOT NULL,
  total_reserved INTEGER NOT NULL,
  out_of_memory INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX memory_events_rank_ts ON memory_events(rank_id, ts_ns);
)SQL";

constexpr std::array<const char*, kCurrentVersion> kMigrations = {kV1, kV2};

}  // namespace

int version(Database& db) { return static_cast<int>(db.pragmaInt("user_version")); }

void migrate(Database& db, int target) {
  int v = version(db);
  if (v > kCurrentVersion)
    throw DatabaseError(db.path() + ": database schema version " + std::to_string(v) +
                " is newer than this Shardscope supports (" + std::to_string(kCurrentVersion) +
                "); open it with a newer Shardscope");
  if (v >= target) return;
  if (db.readOnly())
    throw DatabaseError(db.path() + ": database schema version " + std::to_string(v) + " must be upgraded to " +
                std::to_string(target) + ", but the file is read-only");
  Transaction tx(db);
  for (; v < target; ++v) {
    db.exec(kMigrations[static_cast<std::size_t>(v)]);
  }
  db.exec("PRAGMA user_version = " + std::to_string(target));
  if (target >= 1) db.exec("INSERT OR REPLACE INTO meta(key, value) VALUES('schema_writer', 'shardscope " SHARDSCOPE_VERSION "')");
  tx.commit();
}

void open(Database& db) {
  // Peek at the version before touching anything so a newer file is refused untouched.
  const int v = version(db);
  if (v > kCurrentVersion) migrate(db, kCurrentVersion);  // throws the clear message
  if (!db.readOnly()) {
    // Chunks and args blocks are BLOBs of tens of KB: big pages keep them off long overflow chains.
    // Only takes effect on a new, empty file (before journal_mode=WAL fixes the page size).
    if (v == 0 && db.pragmaInt("page_count") == 0) db.exec("PRAGMA page_size = 32768");
    db.exec("PRAGMA journal_mode = WAL");
    db.exec("PRAGMA synchronous = NORMAL");
  }
  db.exec("PRAGMA foreign_keys = ON");
  db.exec("PRAGMA cache_size = -65536");  // 64 MiB page cache
  db.exec("PRAGMA temp_store = MEMORY");
  if (!db.readOnly()) db.exec("PRAGMA journal_size_limit = 67108864");
  migrate(db, kCurrentVersion);
}

}  // namespace shardscope::core::schema
