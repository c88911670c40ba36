#include "core/storage/sqlite_version.h"

#include <sqlite3.h>

namespace shardscope::core {

std::string sqliteLibraryVersion() { return sqlite3_libversion(); }

}  // namespace shardscope::core
