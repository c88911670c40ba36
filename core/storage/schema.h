#pragma once
// Schema and forward migrations, versioned with PRAGMA user_version. docs/SCHEMA.md documents every table.
#include "core/storage/database.h"

namespace shardscope::core::schema {

constexpr int kCurrentVersion = 5;
// The oldest version a read-only connection reads as it is (version 3 added only a column that
// readers do without, versions 4 and 5 only tables they read as empty). Older files need a writable connection, which migrates
// them.
constexpr int kOldestReadableVersion = 2;

// Applies the per-connection settings (WAL, foreign keys, cache) and brings the file to
// kCurrentVersion. A file written by a newer Shardscope is refused with a clear message; a read-only
// connection reads a file of kOldestReadableVersion or later as it is, and refuses an older one (it
// cannot be migrated in place).
void open(Database& db);

// Migrates up to `target` (<= kCurrentVersion). Exposed so tests can build an older file.
void migrate(Database& db, int target);

int version(Database& db);

}  // namespace shardscope::core::schema
