#pragma once
// The storage side of an import: the transaction every importer writes in (all or nothing), with
// the connection tuned for bulk writing while it lasts, and the few set-wise updates an importer
// needs after streaming a file (BulkWriter does the streaming). Importers hold no SQL of their own.
#include <cstdint>
#include <string_view>

#include "core/model/types.h"
#include "core/storage/database.h"
#include "core/storage/import_log.h"

namespace shardscope::core {

class TraceStore;

class ImportWriter {
 public:
  // Switches foreign-key checks off and the page cache to 16 MiB, then begins the transaction
  // (BEGIN IMMEDIATE: waits for other writers within the connection's busy bound).
  explicit ImportWriter(TraceStore& store);
  // Without commit(): rolls everything back and drops the store's caches (ids made inside the
  // transaction no longer exist). Either way the connection's settings are restored.
  ~ImportWriter();
  ImportWriter(const ImportWriter&) = delete;
  ImportWriter& operator=(const ImportWriter&) = delete;

  void commit();

  // ranks.device = "cuda:N" for the lowest device of the rank's GPU-stream tracks, else "cpu".
  void setRankDeviceFromTracks(RankId rankId);
  void renameTrack(TrackId trackId, std::string_view name);
  // Adds delta to the times of a rank's flows, memory records and steps (events and counters are
  // chunked: BulkWriter::shiftTracks).
  void shiftRankRecords(RankId rankId, TimeNs delta);
  // One imported file's row (entry.id is ignored); returns its id.
  Id addImportLog(const ImportLogEntry& entry);

 private:
  // Restores one setting when the writer goes, whatever happened.
  struct Restore {
    Database& db;
    std::string sql;
    ~Restore();
  };
  static Restore switchForeignKeysOff(Database& db);
  static Restore setImportCacheSize(Database& db);
  // A database that holds nothing yet (a new file) is written once: with a rollback journal for
  // the import's transaction instead of the WAL, whose checkpoint would copy every page a second
  // time (1.2 GB and a second of the 64-rank import's 10 s). Back to WAL when the writer goes.
  struct WriteOnce {
    Database* db = nullptr;  // set when the journal was switched
    ~WriteOnce();
  };
  static WriteOnce writeOnceIfEmpty(TraceStore& store);

  TraceStore& store_;
  Restore foreignKeys_;
  Restore cacheSize_;
  WriteOnce writeOnce_;
  Transaction tx_;
  Statement rename_;
  bool committed_ = false;
};

}  // namespace shardscope::core
