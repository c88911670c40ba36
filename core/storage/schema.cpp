#include "core/storage/schema.h"

#include <sqlite3.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <string>
#include <thread>

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

// Version 3: args blocks LZ4-compressed (raw_size = the JSON's length; NULL: data is the JSON itself,
// as every block written before). Halves what an import writes, and so what the WAL and its
// checkpoint copy (docs/SCHEMA.md, "Many processes, one file").
constexpr const char* kV3 = R"SQL(
ALTER TABLE event_args ADD COLUMN raw_size INTEGER;
)SQL";

// Version 4: import_log, one row per imported file (which reader, what it stored and skipped, its
// warnings), written in the import's transaction. Readers of older files read it as empty.
constexpr const char* kV4 = R"SQL(
CREATE TABLE import_log(
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  rank INTEGER,
  path TEXT NOT NULL,
  format TEXT NOT NULL,
  bytes INTEGER NOT NULL DEFAULT 0,
  events INTEGER NOT NULL DEFAULT 0,
  skipped INTEGER NOT NULL DEFAULT 0,
  skipped_json TEXT NOT NULL DEFAULT '{}',
  warnings_json TEXT NOT NULL DEFAULT '[]',
  seconds REAL NOT NULL DEFAULT 0
);
CREATE INDEX import_log_run ON import_log(run_id);
)SQL";

// Version 5: PyTorch memory snapshots (torch.cuda.memory._dump_snapshot), one per rank: every
// allocator event with its interned stack, the segments and blocks at the dump, the external
// annotations and the blocks alive before recording (docs/SCHEMA.md, "Memory snapshots"). Older
// files simply have no snapshot; readers of a version-4 file opened read-only see none.
constexpr const char* kV5 = R"SQL(
CREATE TABLE memsnaps(
  id INTEGER PRIMARY KEY,
  rank_id INTEGER NOT NULL UNIQUE REFERENCES ranks(id) ON DELETE CASCADE,
  source_file TEXT NOT NULL DEFAULT '',
  allocator_settings_json TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE memsnap_frames(
  snapshot_id INTEGER NOT NULL REFERENCES memsnaps(id) ON DELETE CASCADE,
  idx INTEGER NOT NULL,
  name_id INTEGER NOT NULL REFERENCES strings(id),
  file_id INTEGER NOT NULL REFERENCES strings(id),
  line INTEGER NOT NULL,
  PRIMARY KEY(snapshot_id, idx)
) WITHOUT ROWID;
CREATE TABLE memsnap_stacks(
  snapshot_id INTEGER NOT NULL REFERENCES memsnaps(id) ON DELETE CASCADE,
  idx INTEGER NOT NULL,
  frames TEXT NOT NULL,
  PRIMARY KEY(snapshot_id, idx)
) WITHOUT ROWID;
CREATE TABLE memsnap_events(
  snapshot_id INTEGER NOT NULL REFERENCES memsnaps(id) ON DELETE CASCADE,
  device INTEGER NOT NULL,
  seq INTEGER NOT NULL,
  ts_ns INTEGER NOT NULL,
  action INTEGER NOT NULL,
  addr INTEGER NOT NULL,
  size INTEGER NOT NULL,
  stream INTEGER NOT NULL,
  stack INTEGER NOT NULL,
  PRIMARY KEY(snapshot_id, device, seq)
) WITHOUT ROWID;
CREATE TABLE memsnap_segments(
  snapshot_id INTEGER NOT NULL REFERENCES memsnaps(id) ON DELETE CASCADE,
  idx INTEGER NOT NULL,
  device INTEGER NOT NULL,
  address INTEGER NOT NULL,
  total_size INTEGER NOT NULL,
  allocated_size INTEGER NOT NULL,
  active_size INTEGER NOT NULL,
  requested_size INTEGER NOT NULL,
  stream INTEGER NOT NULL,
  segment_type TEXT NOT NULL,
  expandable INTEGER NOT NULL,
  stack INTEGER NOT NULL,
  PRIMARY KEY(snapshot_id, idx)
) WITHOUT ROWID;
CREATE TABLE memsnap_blocks(
  snapshot_id INTEGER NOT NULL REFERENCES memsnaps(id) ON DELETE CASCADE,
  idx INTEGER NOT NULL,
  segment INTEGER NOT NULL,
  address INTEGER NOT NULL,
  size INTEGER NOT NULL,
  requested_size INTEGER NOT NULL,
  state TEXT NOT NULL,
  stack INTEGER NOT NULL,
  PRIMARY KEY(snapshot_id, idx)
) WITHOUT ROWID;
CREATE TABLE memsnap_annotations(
  snapshot_id INTEGER NOT NULL REFERENCES memsnaps(id) ON DELETE CASCADE,
  idx INTEGER NOT NULL,
  device INTEGER NOT NULL,
  ts_ns INTEGER NOT NULL,
  start INTEGER NOT NULL,
  name TEXT NOT NULL,
  PRIMARY KEY(snapshot_id, idx)
) WITHOUT ROWID;
CREATE TABLE memsnap_prior(
  snapshot_id INTEGER NOT NULL REFERENCES memsnaps(id) ON DELETE CASCADE,
  idx INTEGER NOT NULL,
  device INTEGER NOT NULL,
  addr INTEGER NOT NULL,
  size INTEGER NOT NULL,
  stack INTEGER NOT NULL,
  from_free INTEGER NOT NULL,
  PRIMARY KEY(snapshot_id, idx)
) WITHOUT ROWID;
)SQL";

constexpr std::array<const char*, kCurrentVersion> kMigrations = {kV1, kV2, kV3, kV4, kV5};

}  // namespace

int version(Database& db) { return static_cast<int>(db.pragmaInt("user_version")); }

namespace {

[[noreturn]] void refuseNewer(Database& db, int v) {
  throw DatabaseError(db.path() + ": database schema version " + std::to_string(v) + " is newer than this Shardscope supports (" +
                      std::to_string(kCurrentVersion) + "); open it with a newer Shardscope");
}

// Brings the file to `target` inside one write transaction. The version is read after BEGIN
// IMMEDIATE: two processes creating the same new file both wait for the write lock, and the second
// finds the tables the first made instead of creating them again.
void migrateLocked(Database& db, int target) {
  Transaction tx(db);
  int v = version(db);
  if (v > kCurrentVersion) refuseNewer(db, v);
  if (v >= target) return;  // someone else migrated while we waited (the transaction rolls back: nothing written)
  for (; v < target; ++v) db.exec(kMigrations[static_cast<std::size_t>(v)]);
  db.exec("PRAGMA user_version = " + std::to_string(target));
  if (target >= 1)
    db.exec("INSERT OR REPLACE INTO meta(key, value) VALUES('schema_writer', 'shardscope " SHARDSCOPE_VERSION "')");
  tx.commit();
}

// journal_mode = WAL needs the file to itself for a moment and returns SQLITE_BUSY at once
// (SQLite's busy handler is not called for it): retried here within the connection's busy bound.
// The mode is persistent, so once any process switched the file this is a read.
void ensureWal(Database& db) {
  const auto start = std::chrono::steady_clock::now();
  for (int attempt = 0;; ++attempt) {
    try {
      Statement st(db, "PRAGMA journal_mode");
      if (st.step() && st.textView(0) == "wal") return;
    } catch (const DatabaseError&) {
    }
    try {
      // "wal", or "memory" for an in-memory database (which has no WAL): done. SQLite answers the
      // old mode when it could not switch: try again.
      Statement st(db, "PRAGMA journal_mode = WAL");
      if (st.step() && (st.textView(0) == "wal" || st.textView(0) == "memory")) return;
    } catch (const Cancelled&) {
      throw;
    } catch (const DatabaseError&) {
      // Only a busy file is worth waiting for; anything else (no room for the -wal file, an I/O
      // error) is final.
      const int code = sqlite3_errcode(db.handle()) & 0xff;
      if ((code != SQLITE_BUSY && code != SQLITE_LOCKED) || std::chrono::steady_clock::now() - start >= db.busyTimeout()) throw;
    }
    if (std::chrono::steady_clock::now() - start >= db.busyTimeout())
      throw DatabaseError(db.path() + ": cannot switch the database to WAL mode: another process kept it busy");
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(50, 1 + 5 * attempt)));
  }
}

}  // namespace

void migrate(Database& db, int target) {
  const int v = version(db);
  if (v > kCurrentVersion) refuseNewer(db, v);
  if (v >= target) return;
  // A reader of a version-2 file needs no upgrade: version 3 only added event_args.raw_size, which
  // readers take as NULL (uncompressed) where the column is missing. So a read-only file from an
  // older Shardscope (a shared fixture, a database on a read-only mount) opens for reading.
  if (db.readOnly() && v >= kOldestReadableVersion) return;
  if (db.readOnly())
    throw DatabaseError(db.path() + ": database schema version " + std::to_string(v) + " must be upgraded to " +
                        std::to_string(target) + ", but the file is read-only");
  migrateLocked(db, target);
}

void open(Database& db) {
  // Peek at the version before touching anything so a newer file is refused untouched.
  const int v = version(db);
  if (v > kCurrentVersion) refuseNewer(db, v);
  if (!db.readOnly()) {
    // Chunks and args blocks are BLOBs of tens of KB: big pages keep them off long overflow chains.
    // Only takes effect on a new, empty file (before journal_mode=WAL fixes the page size).
    if (v == 0 && db.pragmaInt("page_count") == 0) db.exec("PRAGMA page_size = 32768");
    ensureWal(db);
    db.exec("PRAGMA synchronous = NORMAL");
  }
  db.exec("PRAGMA foreign_keys = ON");
  db.exec("PRAGMA cache_size = -65536");  // 64 MiB page cache
  db.exec("PRAGMA temp_store = MEMORY");
  if (!db.readOnly()) db.exec("PRAGMA journal_size_limit = 67108864");
  migrate(db, kCurrentVersion);
}

}  // namespace shardscope::core::schema
