#pragma once
// The import_log table: one row per imported file (which reader read it, what it gave, what it
// skipped and why, its warnings), written by the import in the same transaction as its run.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/model/types.h"

namespace shardscope::core {

class TraceStore;

struct ImportLogEntry {
  Id id = 0;
  RunId runId;
  std::optional<int> rank;  // the rank the file became (none for a format without ranks)
  std::string path;
  std::string format;  // the reader's name (TraceReader::name)
  std::int64_t bytes = 0;
  std::int64_t events = 0;                              // events stored
  std::int64_t skipped = 0;                             // records not imported, all reasons
  std::map<std::string, std::int64_t> skippedByReason;  // reason -> count
  std::vector<std::string> warnings;
  double seconds = 0;
};

// A run's import_log rows in the order the files were imported. Empty for runs that were not
// imported, and for a database from before the table (version < 4) opened read-only.
std::vector<ImportLogEntry> importLog(TraceStore& store, RunId runId);

}  // namespace shardscope::core
