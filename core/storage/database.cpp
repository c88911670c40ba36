#include "core/storage/database.h"

#include <sqlite3.h>

#include <filesystem>
#include <fstream>

#include "core/util/error.h"

namespace shardscope::core {

Statement::Statement(Database& db, std::string_view sql) : db_(&db) {
  const int rc = sqlite3_prepare_v3(db.handle(), sql.data(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT,
                                    &stmt_, nullptr);
  if (rc != SQLITE_OK) db.fail("cannot prepare statement '" + std::string(sql.substr(0, 80)) + "'");
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

Statement::Statement(Statement&& o) noexcept : db_(o.db_), stmt_(o.stmt_) { o.stmt_ = nullptr; }

Statement& Statement::operator=(Statement&& o) noexcept {
  if (this != &o) {
    sqlite3_finalize(stmt_);
    db_ = o.db_;
    stmt_ = o.stmt_;
    o.stmt_ = nullptr;
  }
  return *this;
}

void Statement::check(int rc, const char* what) {
  if (rc != SQLITE_OK) db_->fail(what);
}

Statement& Statement::bind(int i, std::int64_t v) {
  check(sqlite3_bind_int64(stmt_, i, v), "bind");
  return *this;
}
Statement& Statement::bind(int i, double v) {
  check(sqlite3_bind_double(stmt_, i, v), "bind");
  return *this;
}
Statement& Statement::bind(int i, std::string_view v) {
  check(sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT), "bind");
  return *this;
}
Statement& Statement::bindStatic(int i, std::string_view v) {
  check(sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_STATIC), "bind");
  return *this;
}
Statement& Statement::bindNull(int i) {
  check(sqlite3_bind_null(stmt_, i), "bind");
  return *this;
}

bool Statement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  const std::string msg = db_->errorMessage();
  sqlite3_reset(stmt_);
  throw DatabaseError(db_->path() + ": " + msg);
}

void Statement::exec() {
  while (step()) {
  }
  reset();
}

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

int Statement::columnCount() const { return sqlite3_column_count(stmt_); }
bool Statement::isNull(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
std::int64_t Statement::int64(int col) const { return sqlite3_column_int64(stmt_, col); }
double Statement::real(int col) const { return sqlite3_column_double(stmt_, col); }
std::string Statement::text(int col) const { return std::string(textView(col)); }
std::string_view Statement::textView(int col) const {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, col));
  if (!p) return {};
  return {p, static_cast<std::size_t>(sqlite3_column_bytes(stmt_, col))};
}
std::optional<std::int64_t> Statement::optInt64(int col) const {
  if (isNull(col)) return std::nullopt;
  return int64(col);
}

namespace {

// SQLite happily "opens" any file and only fails at the first query; check the header up front so a
// wrong file gets a clear message instead of "file is not a database" later, mid-operation.
void checkIsSqliteFile(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return;
  if (std::filesystem::is_directory(path, ec)) throw DatabaseError(path + ": is a directory, not a Shardscope database");
  const auto size = std::filesystem::file_size(path, ec);
  if (ec || size == 0) return;  // an empty file becomes a new database
  std::ifstream in(path, std::ios::binary);
  char header[16] = {};
  in.read(header, sizeof header);
  if (in.gcount() < 16 || std::string_view(header, 16) != std::string_view("SQLite format 3\0", 16))
    throw DatabaseError(path + ": not a SQLite database (bad header); refusing to open it as a Shardscope database");
}

}  // namespace

Database::Database(const std::string& path, Mode mode) : path_(path), mode_(mode) {
  checkIsSqliteFile(path);
  const int flags = (mode == Mode::ReadOnly ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)) |
                    SQLITE_OPEN_NOMUTEX;
  const int rc = sqlite3_open_v2(path.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    db_ = nullptr;
    throw DatabaseError(path + ": cannot open database: " + msg);
  }
  sqlite3_extended_result_codes(db_, 1);
  sqlite3_busy_timeout(db_, 5000);
  if (mode == Mode::ReadWrite && sqlite3_db_readonly(db_, "main") == 1) {
    sqlite3_close(db_);
    db_ = nullptr;
    throw DatabaseError(path + ": database file is read-only (check its permissions); cannot write to it");
  }
}

Database::~Database() { sqlite3_close_v2(db_); }

void Database::exec(std::string_view sql) {
  const std::string s(sql);
  char* err = nullptr;
  if (sqlite3_exec(db_, s.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : errorMessage();
    sqlite3_free(err);
    throw DatabaseError(path_ + ": " + msg);
  }
}

std::int64_t Database::lastInsertRowId() const { return sqlite3_last_insert_rowid(db_); }
int Database::changes() const { return sqlite3_changes(db_); }
std::string Database::errorMessage() const { return db_ ? sqlite3_errmsg(db_) : "no connection"; }

void Database::fail(const std::string& what) const { throw DatabaseError(path_ + ": " + what + ": " + errorMessage()); }

std::int64_t Database::pragmaInt(std::string_view pragma) {
  Statement st(*this, "PRAGMA " + std::string(pragma));
  if (!st.step()) return 0;
  return st.int64(0);
}

Transaction::Transaction(Database& db) : db_(db) { db_.exec("BEGIN IMMEDIATE"); }

Transaction::~Transaction() {
  if (!done_) {
    try {
      db_.exec("ROLLBACK");
    } catch (...) {
      // A failed rollback leaves SQLite to roll back the journal when the connection closes.
    }
  }
}

void Transaction::commit() {
  db_.exec("COMMIT");
  done_ = true;
}

}  // namespace shardscope::core
