#include "core/storage/run_copy.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "core/storage/database.h"
#include "core/storage/store_access.h"
#include "core/storage/trace_store.h"
#include "core/util/error.h"
#include "core/util/progress.h"

namespace shardscope::core {

namespace {

std::string quoted(const std::string& name) {
  std::string q = "\"";
  for (char c : name) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

struct ForeignKey {
  std::string column, parent, parentColumn;
};

std::vector<std::string> columns(Database& db, const std::string& schema, const std::string& table) {
  std::vector<std::string> out;
  Statement s(db, "PRAGMA " + schema + ".table_info(" + quoted(table) + ")");
  while (s.step()) out.push_back(s.text(1));
  return out;
}

std::vector<ForeignKey> foreignKeys(Database& db, const std::string& table) {
  std::vector<ForeignKey> out;
  Statement s(db, "PRAGMA main.foreign_key_list(" + quoted(table) + ")");
  while (s.step()) out.push_back({s.text(3), s.text(2), s.isNull(4) ? std::string("rowid") : s.text(4)});
  return out;
}

void removeFiles(const std::string& path) {
  std::error_code ec;
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) std::filesystem::remove(path + suffix, ec);
}

}  // namespace

RunCopyResult copyRunsToNewDatabase(const std::string& from, const std::vector<RunId>& runs, const std::string& to,
                                    const CancelToken* cancel) {
  if (runs.empty()) throw Error("export --format db: no runs given");
  if (std::filesystem::exists(to)) throw Error(to + ": exists; a run export writes a new database (choose another file)");
  {
    TraceStore src(from, Database::Mode::ReadOnly);
    for (RunId id : runs)
      if (!src.run(id)) throw Error(from + ": no run with id " + std::to_string(id.value()));
  }
  RunCopyResult result;
  result.runs = runs;
  try {
    TraceStore out(to);  // the schema of this build
    Database& db = storeDb(out);
    {
      Statement attach(db, "ATTACH DATABASE ?1 AS src");
      attach.bind(1, from);
      attach.exec();
    }
    // Tables in foreign-key order (parents first).
    std::vector<std::string> tables;
    {
      Statement s(db, "SELECT name FROM main.sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY rowid");
      while (s.step()) tables.push_back(s.text(0));
    }
    std::map<std::string, std::vector<ForeignKey>> fks;
    for (const auto& t : tables) fks[t] = foreignKeys(db, t);
    std::vector<std::string> order;
    std::set<std::string> placed;
    while (order.size() < tables.size()) {
      bool progressed = false;
      for (const auto& t : tables) {
        if (placed.count(t)) continue;
        const bool ready = std::all_of(fks[t].begin(), fks[t].end(), [&](const ForeignKey& k) {
          return k.parent == t || placed.count(k.parent) || !std::count(tables.begin(), tables.end(), k.parent);
        });
        if (!ready) continue;
        order.push_back(t);
        placed.insert(t);
        progressed = true;
      }
      if (!progressed) throw Error(to + ": the schema's foreign keys form a cycle; cannot order the copy");
    }
    std::string idList;
    for (RunId id : runs) idList += (idList.empty() ? "" : ",") + std::to_string(id.value());
    Transaction tx(db);
    for (const auto& t : order) {
      if (cancel) cancel->throwIfCancelled();
      if (t == "meta") continue;  // the new file's own schema record
      const auto srcCols = columns(db, "src", t);
      if (srcCols.empty()) continue;  // a table the source's (older) schema does not have
      std::string cols;
      for (const auto& c : columns(db, "main", t))
        if (std::find(srcCols.begin(), srcCols.end(), c) != srcCols.end()) cols += (cols.empty() ? "" : ", ") + quoted(c);
      std::string where;
      if (t == "runs") {
        where = "id IN (" + idList + ")";
      } else {
        for (const auto& k : fks[t]) {
          if (k.parent == t) continue;
          where += (where.empty() ? "" : " AND ") + std::string("(") + quoted(k.column) + " IS NULL OR " + quoted(k.column) +
                   " IN (SELECT " + quoted(k.parentColumn) + " FROM main." + quoted(k.parent) + "))";
        }
      }
      db.exec("INSERT INTO main." + quoted(t) + " (" + cols + ") SELECT " + cols + " FROM src." + quoted(t) +
              (where.empty() ? std::string() : " WHERE " + where));
      result.rows += db.changes();
    }
    tx.commit();
    db.exec("DETACH DATABASE src");
  } catch (...) {
    removeFiles(to);
    throw;
  }
  std::error_code ec;
  result.bytes = static_cast<std::int64_t>(std::filesystem::file_size(to, ec));
  return result;
}

}  // namespace shardscope::core
