#pragma once
// Thin RAII wrappers over sqlite3: a connection and prepared statements. Errors become core::Error with
// the database path and SQLite's message.
//
// Many processes share one database file (the app reading, runs, imports and renames writing): see
// docs/SCHEMA.md, "Many processes, one file". Two rules hold here. Nothing in the process opens the
// file outside SQLite (closing any descriptor of it drops every POSIX lock the process holds on it,
// those of open connections included). Every connection waits for other writers' locks with a
// bounded, reported wait (busy handler) instead of failing at once.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "core/storage/open_guard.h"

struct sqlite3;
struct sqlite3_stmt;

namespace shardscope::core {

class Database;
class CancelToken;

// How long connections wait for another connection's lock before giving up, and who hears about a
// long wait. Process-wide; a connection may override the bound (Database::setBusyTimeout).
struct BusyPolicy {
  // The bound for new connections: $SHARDSCOPE_BUSY_TIMEOUT (seconds) when set, else 600 s (a big
  // import holds the write lock for its whole transaction, tens of seconds on a slow disk).
  static std::chrono::milliseconds defaultTimeout();
  static void setDefaultTimeout(std::chrono::milliseconds t);
  // Called (on the waiting thread) about every 2 s while a connection waits: the file and how long
  // it has waited so far. The CLI prints it; nothing is called when no reporter is set.
  using Reporter =
      std::function<void(const std::string& path, std::chrono::milliseconds waited, std::chrono::milliseconds bound)>;
  static void setReporter(Reporter r);
  // The longest wait any connection of this process saw, and the number of waits (benchmarks).
  static std::chrono::milliseconds longestWait();
  static std::int64_t waits();
  // A token that ends every wait of this process when cancelled (the CLI's Ctrl-C).
  static void setCancelToken(const CancelToken* token);
};

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
  // The same, waiting at most `busyTimeout` for another connection's lock (the first read included).
  Database(const std::string& path, Mode mode, std::chrono::milliseconds busyTimeout);
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
  // Throws the error for SQLite result code rc: Cancelled when a wait for a lock was cancelled, a
  // "stayed locked" DatabaseError after the busy bound, else SQLite's message.
  [[noreturn]] void failWith(int rc, const std::string& what) const;

  // Waiting for other connections' locks (see BusyPolicy). A cancelled token ends a wait at once
  // (the statement then throws Cancelled).
  void setBusyTimeout(std::chrono::milliseconds t) { busyTimeout_ = t; }
  std::chrono::milliseconds busyTimeout() const { return busyTimeout_; }
  void setCancelToken(const CancelToken* token) { cancel_ = token; }
  std::chrono::milliseconds longestWait() const { return longestWait_; }

 private:
  static int onBusy(void* self, int count);
  std::string path_;
  Mode mode_;
  sqlite3* db_ = nullptr;
  HeldFile held_;  // this connection's count in the open guard
  std::chrono::milliseconds busyTimeout_;
  const CancelToken* cancel_ = nullptr;
  std::chrono::steady_clock::time_point waitStart_{};
  std::chrono::steady_clock::time_point lastReport_{};
  std::chrono::milliseconds longestWait_{0};
  std::chrono::milliseconds lastWait_{0};
  // How the last wait ended; consumed by the failWith that reports it (so a later busy error
  // the handler never saw is not blamed on an old wait).
  mutable bool waitCancelled_ = false;
  mutable bool waitTimedOut_ = false;
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
