#pragma once
// The connection behind a TraceStore, for core/storage alone: the typed writers and readers of
// this folder (BulkWriter, ImportWriter, RankWriter, the import log, writeInTransaction) run their
// SQL on it. Everything else reads and writes through their named functions; the layering test
// (tests/layering/check_layering.cmake) fails when a file outside core/storage includes this
// header, calls .db() or uses sqlite3 (tests/ excepted: they inspect files directly).
#include "core/storage/database.h"
#include "core/storage/trace_store.h"

namespace shardscope::core {

class StoreAccess {
 public:
  static Database& db(TraceStore& store) { return store.db(); }
};

inline Database& storeDb(TraceStore& store) { return StoreAccess::db(store); }

}  // namespace shardscope::core
