#include "core/storage/import_log.h"
#include "core/storage/store_access.h"

#include "core/storage/schema.h"
#include "core/storage/trace_store.h"
#include "core/util/error.h"
#include "core/util/json.h"

namespace shardscope::core {
namespace {

constexpr const char* kImportLogColumns =
    "id, run_id, rank, path, format, bytes, events, skipped, skipped_json, warnings_json, seconds";

// The one row mapper of import_log (kImportLogColumns order).
ImportLogEntry readImportLogRow(const Statement& st) {
  ImportLogEntry e;
  e.id = st.int64(0);
  e.runId = RunId{st.int64(1)};
  if (!st.isNull(2)) e.rank = static_cast<int>(st.int64(2));
  e.path = st.text(3);
  e.format = st.text(4);
  e.bytes = st.int64(5);
  e.events = st.int64(6);
  e.skipped = st.int64(7);
  try {
    const JsonValue reasons = parseJson(st.text(8), "import_log.skipped_json");
    for (const auto& [reason, n] : reasons.members()) e.skippedByReason[reason] = n.asInt().value_or(0);
    const JsonValue warnings = parseJson(st.text(9), "import_log.warnings_json");
    for (const auto& w : warnings.items()) e.warnings.push_back(w.isString() ? w.asString() : w.dump());
  } catch (const Error&) {
    // Written by this code as JSON; a hand-edited row shows what is left.
  }
  e.seconds = st.real(10);
  return e;
}

}  // namespace

std::vector<ImportLogEntry> importLog(TraceStore& store, RunId runId) {
  std::vector<ImportLogEntry> out;
  if (schema::version(storeDb(store)) < 4) return out;  // a read-only file from before the table
  Statement st(storeDb(store), std::string("SELECT ") + kImportLogColumns + " FROM import_log WHERE run_id=? ORDER BY id");
  st.bind(1, runId.value());
  while (st.step()) out.push_back(readImportLogRow(st));
  return out;
}

}  // namespace shardscope::core
