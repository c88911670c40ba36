#pragma once
// Copying runs out of a database into a new one (`shardscope-cli export --format db --runs N,M -o
// part.db`): a run travels off a cluster as one small file that the app opens like any other.
//
// Every table of the schema is walked in foreign-key order: `runs` keeps the runs asked for, every
// table with foreign keys keeps the rows whose parents were kept (a nullable key may be NULL), a
// table without any (the interned strings) is copied whole so that the ids stored in event chunks
// stay valid; `meta` belongs to the new file's own schema. Ids are kept, so the new file is the same
// runs under the same numbers. A table added to the schema later is carried by the same rule.
#include <cstdint>
#include <string>
#include <vector>

#include "core/model/ids.h"

namespace shardscope::core {

class CancelToken;

struct RunCopyResult {
  std::vector<RunId> runs;
  std::int64_t rows = 0;   // rows written, all tables
  std::int64_t bytes = 0;  // size of the new file
};

// Writes `runs` of the database at `from` into a new database at `to` (which must not exist), in one
// transaction: on any error (an unknown run, a full disk, Cancelled) nothing is left at `to`.
// Throws core::Error naming the file and what is wrong.
RunCopyResult copyRunsToNewDatabase(const std::string& from, const std::vector<RunId>& runs, const std::string& to,
                                    const CancelToken* cancel = nullptr);

}  // namespace shardscope::core
