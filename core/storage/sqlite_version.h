#pragma once
// The SQLite library's version, for About boxes and --version (only core/storage talks to SQLite).
#include <string>

namespace shardscope::core {

// The version of the SQLite library loaded at run time (sqlite3_libversion(), e.g. "3.40.1").
std::string sqliteLibraryVersion();

}  // namespace shardscope::core
