#pragma once
// Thin RAII wrappers over sqlite3: a connection and prepared statements. Errors become core::Error with
// the database path and SQLite's message.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

struct sqlite3;
struct sqlite3_stmt;

namespace shardscope::core {

class Database;

class Statement {
 public:
  Statement() = default;
  Statement(Database& db, std::string_view sql);
  ~Statement();
  Statement(Statement&& o) noexcept;
  Statement& operator=(Statement&& o) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Binding uses 1-based parameter indices, as SQLite does.
  Statement& bind(int i, std::int64_t v);
  Statement& bind(int i, int v) { return bind(i, static_cast<std::int64_t>(v)); }
  Statement& bind(int i, double v);
  Statement& bind(int i, std::string_view v);  // copied (SQLITE_TRANSIENT)
  Statement& bind(int i, const char* v) { return bind(i, std::string_view(v)); }
  Statement& bind(int i, const std::string& v) { return bind(i, std::string_view(v)); }
  Statement& bindStatic(int i, std::string_view v);  // caller keeps v alive until step()
  Statement& bindNull(int i);
  template <typename T>
  Statement& bind(int i, const std::optional<T>& v) {
    return v ? bind(i, *v) : bindNull(i);
  }

  bool step();  // true while a row is available
  void exec();  // step to completion, then reset
  void reset();

  int columnCount() const;
  bool isNull(int col) const;
  std::int64_t int64(int col) const;
  double real(int col) const;
  std::string text(int col) const;
  std::string_view textView(int col) const;  // valid until the next step/reset
  std::optional<std::int64_t> optInt64(int col) const;

  sqlite3_stmt* handle() const { return stmt_; }

 private:
  void check(int rc, const char* what);
  Database* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
};

class Database {
 public:
  enum class Mode { ReadWrite, ReadOnly };
  // Opens (creating if ReadWrite and absent) the file. Does not apply the schema; see Schema::open.
  Database(const std::string& path, Mode mode);
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  void exec(std::string_view sql);
  std::int64_t lastInsertRowId() const;
  int changes() const;
  bool readOnly() const { return mode_ == Mode::ReadOnly; }
  const std::string& path() const { return path_; }
  sqlite3* handle() const { return db_; }
  std::string errorMessage() const;
  [[noreturn]] void fail(const std::string& what) const;
  // Pragma that returns one integer.
  std::int64_t pragmaInt(std::string_view pragma);

 private:
  std::string path_;
  Mode mode_;
  sqlite3* db_ = nullptr;
};

// RAII transaction: BEGIN IMMEDIATE on construction, ROLLBACK on destruction unless commit() ran.
class Transaction {
 public:
  explicit Transaction(Database& db);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  void commit();

 private:
  Database& db_;
  bool done_ = false;
};

}  // namespace shardscope::core
