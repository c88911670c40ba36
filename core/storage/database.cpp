#include "core/storage/database.h"

#include <sqlite3.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <thread>
#include <utility>

#include "core/storage/open_guard.h"
#include "core/util/error.h"
#include "core/util/progress.h"

namespace shardscope::core {

Statement::Statement(Database& db, std::string_view sql) : db_(&db) {
  const int rc =
      sqlite3_prepare_v3(db.handle(), sql.data(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT, &stmt_, nullptr);
  if (rc != SQLITE_OK) db.failWith(rc, "cannot prepare statement '" + std::string(sql.substr(0, 80)) + "'");
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
  sqlite3_reset(stmt_);
  db_->failWith(rc, {});
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

// ------------------------------------------------------------------------------------------------
// Waiting for locks

namespace {

std::atomic<std::int64_t> g_defaultTimeoutMs{-1};  // -1: not set yet (read the environment)
std::mutex g_reporterMu;
BusyPolicy::Reporter g_reporter;
std::atomic<std::int64_t> g_longestWaitMs{0};
std::atomic<std::int64_t> g_waits{0};
std::atomic<const CancelToken*> g_cancel{nullptr};
constexpr auto kReportEvery = std::chrono::seconds(2);
constexpr std::int64_t kBuiltInTimeoutMs = 600'000;

// SQLite's unix VFS opens the database, -wal, -shm and -journal through its system-call table:
// pointed at the C library's open, so that the open guard (open_guard.h) never refuses SQLite
// itself. Done once, before the first connection (xSetSystemCall is not thread-safe).
void routeSqliteOpensPastTheGuard() {
  static std::once_flag once;
  std::call_once(once, [] {
    sqlite3_vfs* vfs = sqlite3_vfs_find(nullptr);
    if (vfs && vfs->iVersion >= 3 && vfs->xSetSystemCall)
      vfs->xSetSystemCall(vfs, "open", reinterpret_cast<sqlite3_syscall_ptr>(&detail::libcOpen));
  });
}

DatabaseError::Problem problemOf(int rc) {
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return DatabaseError::Problem::Locked;
    case SQLITE_CORRUPT:
      return DatabaseError::Problem::Corrupt;
    case SQLITE_NOTADB:
      return DatabaseError::Problem::NotADatabase;
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
    case SQLITE_PERM:
      return DatabaseError::Problem::Unreadable;
    case SQLITE_FULL:
      return DatabaseError::Problem::Full;
    case SQLITE_READONLY:
      return DatabaseError::Problem::ReadOnly;
    default:
      return DatabaseError::Problem::Other;
  }
}

bool isBusy(int rc) { return (rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED; }

std::string seconds(std::chrono::milliseconds t) {
  const double s = static_cast<double>(t.count()) / 1000.0;
  char buf[32];
  std::snprintf(buf, sizeof buf, s < 10 ? "%.1f s" : "%.0f s", s);
  return buf;
}

}  // namespace

std::chrono::milliseconds BusyPolicy::defaultTimeout() {
  std::int64_t ms = g_defaultTimeoutMs.load();
  if (ms < 0) {
    ms = kBuiltInTimeoutMs;
    if (const char* env = std::getenv("SHARDSCOPE_BUSY_TIMEOUT"); env && *env) {
      char* end = nullptr;
      const double s = std::strtod(env, &end);
      if (end != env && s >= 0) ms = static_cast<std::int64_t>(s * 1000.0);
    }
    g_defaultTimeoutMs.store(ms);
  }
  return std::chrono::milliseconds(ms);
}

void BusyPolicy::setDefaultTimeout(std::chrono::milliseconds t) {
  g_defaultTimeoutMs.store(std::max<std::int64_t>(0, t.count()));
}

void BusyPolicy::setReporter(Reporter r) {
  std::lock_guard<std::mutex> l(g_reporterMu);
  g_reporter = std::move(r);
}

std::chrono::milliseconds BusyPolicy::longestWait() { return std::chrono::milliseconds(g_longestWaitMs.load()); }
std::int64_t BusyPolicy::waits() { return g_waits.load(); }
void BusyPolicy::setCancelToken(const CancelToken* token) { g_cancel.store(token); }

// SQLite calls this while another connection holds a lock this one needs; returning 0 gives up
// (the statement then fails with SQLITE_BUSY). Short sleeps first (most waits are one commit of a
// run's flusher, a few ms), then 50 ms steps up to the bound.
int Database::onBusy(void* self, int count) {
  auto* d = static_cast<Database*>(self);
  using namespace std::chrono;
  const auto now = steady_clock::now();
  if (count == 0) {
    d->waitStart_ = now;
    d->lastReport_ = now;
    d->waitCancelled_ = false;
    d->waitTimedOut_ = false;
    g_waits.fetch_add(1, std::memory_order_relaxed);
  }
  const CancelToken* global = g_cancel.load();
  if ((d->cancel_ && d->cancel_->isCancelled()) || (global && global->isCancelled())) {
    d->waitCancelled_ = true;
    return 0;
  }
  const auto waited = duration_cast<milliseconds>(now - d->waitStart_);
  d->lastWait_ = waited;
  if (waited > d->longestWait_) d->longestWait_ = waited;
  std::int64_t prev = g_longestWaitMs.load(std::memory_order_relaxed);
  while (waited.count() > prev && !g_longestWaitMs.compare_exchange_weak(prev, waited.count())) {
  }
  if (waited >= d->busyTimeout_) {
    d->waitTimedOut_ = true;
    return 0;
  }
  if (now - d->lastReport_ >= kReportEvery) {
    d->lastReport_ = now;
    BusyPolicy::Reporter r;
    {
      std::lock_guard<std::mutex> l(g_reporterMu);
      r = g_reporter;
    }
    if (r) r(d->path_, waited, d->busyTimeout_);
  }
  static constexpr int kSteps[] = {1, 2, 5, 10, 15, 20, 25, 25, 25, 50};
  const int ms = count < static_cast<int>(std::size(kSteps)) ? kSteps[count] : 50;
  std::this_thread::sleep_for(std::min(milliseconds(ms), d->busyTimeout_ - waited + milliseconds(1)));
  return 1;
}

void Database::failWith(int rc, const std::string& what) const {
  const std::string prefix = path_ + ": " + (what.empty() ? std::string() : what + ": ");
  if (isBusy(rc)) {
    const bool cancelled = std::exchange(waitCancelled_, false);
    const bool timedOut = std::exchange(waitTimedOut_, false);
    if (cancelled) throw Cancelled();
    if (timedOut)
      throw DatabaseError(prefix + "the database stayed locked by another writer (an import, a run or the app) for " +
                              seconds(lastWait_) + "; gave up (SHARDSCOPE_BUSY_TIMEOUT=SECONDS waits longer)",
                          DatabaseError::Problem::Locked);
  }
  const DatabaseError::Problem problem = problemOf(rc);
  if ((rc & 0xff) == SQLITE_NOTADB)
    throw DatabaseError(path_ + ": not a SQLite database (bad header); refusing to open it as a Shardscope database", problem);
  if ((rc & 0xff) == SQLITE_FULL)
    throw DatabaseError(prefix + "the disk is full (" + errorMessage() + "); nothing of this operation was stored", problem);
  throw DatabaseError(prefix + errorMessage(), problem);
}

Database::Database(const std::string& path, Mode mode) : Database(path, mode, BusyPolicy::defaultTimeout()) {}

Database::Database(const std::string& path, Mode mode, std::chrono::milliseconds busyTimeout)
    : path_(path), mode_(mode), busyTimeout_(busyTimeout) {
  // Only stat() here: opening and closing a descriptor of the file would drop the POSIX locks of
  // every connection this process already has on it. SQLite itself says SQLITE_NOTADB below.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw DatabaseError(path + ": is a directory, not a Shardscope database");
  const int flags =
      (mode == Mode::ReadOnly ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)) | SQLITE_OPEN_NOMUTEX;
  routeSqliteOpensPastTheGuard();
  const int rc = sqlite3_open_v2(path.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    db_ = nullptr;
    throw DatabaseError(path + ": cannot open database: " + msg, problemOf(rc));
  }
  // From here on the process holds the file: nothing outside SQLite may open it (open_guard.h).
  held_ = holdDatabaseFile(path);
  sqlite3_extended_result_codes(db_, 1);
  sqlite3_busy_handler(db_, &Database::onBusy, this);
  try {
    // The first read checks the header (SQLITE_NOTADB for any other file) without a lock of ours.
    Statement probe(*this, "SELECT COUNT(*) FROM sqlite_master");
    probe.step();
  } catch (...) {
    sqlite3_close(db_);
    db_ = nullptr;
    releaseDatabaseFile(std::exchange(held_, {}));
    throw;
  }
  if (mode == Mode::ReadWrite && sqlite3_db_readonly(db_, "main") == 1) {
    sqlite3_close(db_);
    db_ = nullptr;
    releaseDatabaseFile(std::exchange(held_, {}));
    throw DatabaseError(path + ": database file is read-only (check its permissions); cannot write to it",
                        DatabaseError::Problem::ReadOnly);
  }
}

Database::~Database() {
  sqlite3_close_v2(db_);
  releaseDatabaseFile(held_);
}

void Database::exec(std::string_view sql) {
  const std::string s(sql);
  const int rc = sqlite3_exec(db_, s.c_str(), nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) failWith(rc, {});
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
