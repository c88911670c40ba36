#include "core/storage/import_writer.h"
#include "core/storage/store_access.h"

#include <string>

#include "core/storage/trace_store.h"
#include "core/util/error.h"
#include "core/util/json.h"

namespace shardscope::core {

ImportWriter::Restore::~Restore() {
  try {
    db.exec(sql);
  } catch (...) {
  }
}

// Integrity is by construction in an import (every id comes from its transaction), and per-row
// foreign key lookups cost a third of the insert time. The pragma is a no-op inside a transaction,
// so it is switched around it; tests run PRAGMA foreign_key_check after imports.
ImportWriter::Restore ImportWriter::switchForeignKeysOff(Database& db) {
  db.exec("PRAGMA foreign_keys = OFF");
  return Restore{db, "PRAGMA foreign_keys = ON"};
}

// A small page cache for the import: what does not fit is written to the WAL as the import goes,
// while the parsers work, instead of all at the commit (and 50 MB less memory). Measured with
// bench_import: 16 MiB is as fast as 64 MiB or faster; 1 GiB is 30 % slower (everything at the end).
ImportWriter::Restore ImportWriter::setImportCacheSize(Database& db) {
  const std::int64_t before = db.pragmaInt("cache_size");
  db.exec("PRAGMA cache_size = -16384");
  return Restore{db, "PRAGMA cache_size = " + std::to_string(before)};
}

// Only when the file holds no run and no event yet: a crash then rolls back to the empty schema from
// the journal (synchronous = FULL while it lasts, as a rollback journal needs for that; DELETE mode,
// so that no empty journal file stays beside the database). Readers that
// open the file meanwhile wait for the commit (they would have seen nothing anyway). When another
// connection has the file open, SQLite refuses the switch and the import writes through the WAL.
ImportWriter::WriteOnce ImportWriter::writeOnceIfEmpty(TraceStore& store) {
  Database& db = storeDb(store);
  if (db.readOnly()) return {};
  {
    Statement empty(db, "SELECT NOT EXISTS(SELECT 1 FROM runs) AND NOT EXISTS(SELECT 1 FROM event_chunks)");
    if (!empty.step() || empty.int64(0) == 0) return {};
  }  // finalized: a pending statement holds a read transaction, and the switch needs none
  try {
    Statement st(db, "PRAGMA journal_mode = DELETE");
    if (!st.step() || st.textView(0) != "delete") return {};
  } catch (const DatabaseError&) {
    return {};
  }
  db.exec("PRAGMA synchronous = FULL");
  return WriteOnce{&db};
}

ImportWriter::WriteOnce::~WriteOnce() {
  if (!db) return;
  try {
    db->exec("PRAGMA synchronous = NORMAL");
    // One try: a connection that opened the file meanwhile switches it back itself (schema::open).
    Statement st(*db, "PRAGMA journal_mode = WAL");
    st.step();
    st.reset();
    // Open the WAL and its index now, as every connection has them from its open on: a later
    // reader must not have to create files (on a full disk, or under a file-size limit).
    Statement read(*db, "SELECT count(*) FROM sqlite_master");
    read.step();
  } catch (...) {
  }
}

ImportWriter::ImportWriter(TraceStore& store)
    : store_(store),
      foreignKeys_(switchForeignKeysOff(storeDb(store))),
      cacheSize_(setImportCacheSize(storeDb(store))),
      writeOnce_(writeOnceIfEmpty(store)),
      tx_(storeDb(store)) {}

ImportWriter::~ImportWriter() {
  if (!committed_) store_.invalidateCaches();
}

void ImportWriter::commit() {
  rename_ = Statement();
  tx_.commit();
  committed_ = true;
}

void ImportWriter::setRankDeviceFromTracks(RankId rankId) {
  // The device a rank used is its GPU tracks' device (deviceProperties lists every visible GPU).
  Statement dev(storeDb(store_),
                "UPDATE ranks SET device = COALESCE((SELECT 'cuda:' || MIN(device) FROM tracks WHERE "
                "rank_id=?1 AND kind='gpu_stream' AND device IS NOT NULL), 'cpu') WHERE id=?1");
  dev.bind(1, rankId.value());
  dev.exec();
}

void ImportWriter::renameTrack(TrackId trackId, std::string_view name) {
  if (!rename_.handle()) rename_ = Statement(storeDb(store_), "UPDATE tracks SET name=? WHERE id=?");
  rename_.bind(1, name).bind(2, trackId.value());
  rename_.exec();
}

void ImportWriter::shiftRankRecords(RankId rankId, TimeNs delta) {
  Database& db = storeDb(store_);
  const std::string shift = std::to_string(delta);
  const std::string rid = std::to_string(rankId.value());
  db.exec("UPDATE flows SET ts_ns=ts_ns+" + shift + " WHERE rank_id=" + rid);
  db.exec("UPDATE memory_events SET ts_ns=ts_ns+" + shift + " WHERE rank_id=" + rid);
  db.exec("UPDATE steps SET start_ns=start_ns+" + shift + ", end_ns=end_ns+" + shift + " WHERE rank_id=" + rid);
}

Id ImportWriter::addImportLog(const ImportLogEntry& e) {
  JsonValue reasons = JsonValue::object();
  for (const auto& [reason, n] : e.skippedByReason) reasons.set(reason, JsonValue::number(n));
  JsonValue warnings = JsonValue::array();
  for (const auto& w : e.warnings) warnings.push(JsonValue::string(w));
  Statement st(storeDb(store_),
               "INSERT INTO import_log(run_id, rank, path, format, bytes, events, skipped, skipped_json, warnings_json, "
               "seconds) VALUES(?,?,?,?,?,?,?,?,?,?)");
  st.bind(1, e.runId.value()).bind(2, e.rank).bind(3, e.path).bind(4, e.format).bind(5, e.bytes).bind(6, e.events);
  st.bind(7, e.skipped).bind(8, reasons.dump()).bind(9, warnings.dump()).bind(10, e.seconds);
  st.exec();
  return storeDb(store_).lastInsertRowId();
}

}  // namespace shardscope::core
