// One database, many connections and processes: opening a connection never drops the POSIX locks of
// the others (checked from another process with fcntl(F_GETLK), as SQLite's peers see them), the
// schema of a new file is created once when several connections race, and a connection waits for
// another's write lock within its bound, then fails with a clear message, or stops when cancelled.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <QTemporaryDir>
#include <QtTest>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <sqlite3.h>

#include "core/storage/store_access.h"
#include "core/storage/schema.h"
#include "core/storage/trace_store.h"
#include "core/util/error.h"
#include "core/util/progress.h"
#include "tests/common/test_support.h"

using namespace shardscope::core;
using shardscope::test::otherProcessSeesSharedLock;
using shardscope::test::pathIn;

namespace {

RunId addRun(TraceStore& store, const std::string& name) {
  Run r;
  r.name = name;
  r.source = RunSource::Runtime;
  r.status = RunStatus::Completed;
  return store.createRun(r);
}

}  // namespace

class TestDatabaseLocks : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void openingAnotherConnectionKeepsTheLocks() {
    QTemporaryDir dir;
    const std::string path = pathIn(dir, "locks.db");
    TraceStore app(path);
    addRun(app, "first");
    QVERIFY(app.runs().size() == 1);  // a read: the WAL connection now holds its SHARED lock
    QVERIFY2(otherProcessSeesSharedLock(path), "the first connection holds no lock at all");

    // What the app does at every reload (a worker thread's own read-only connection) and a run's
    // rank (a second read-write connection): neither may drop the first connection's lock.
    for (int i = 0; i < 3; ++i) {
      TraceStore reader(path, Database::Mode::ReadOnly);
      QCOMPARE(reader.runs().size(), std::size_t(1));
      TraceStore writer(path);
      QVERIFY2(otherProcessSeesSharedLock(path), "opening a second connection dropped the first one's lock");
    }
    QVERIFY2(otherProcessSeesSharedLock(path), "closing the second connections dropped the first one's lock");
    // The file stays in WAL mode and whole.
    Statement jm(shardscope::core::storeDb(app), "PRAGMA journal_mode");
    QVERIFY(jm.step());
    QCOMPARE(QString::fromStdString(jm.text(0)), QString("wal"));
    Statement ic(shardscope::core::storeDb(app), "PRAGMA integrity_check");
    QVERIFY(ic.step());
    QCOMPARE(QString::fromStdString(ic.text(0)), QString("ok"));
  }

  void aRefusedFileIsLeftAloneAndLocksKept() {
    // Refusing a non-database (SQLite says SQLITE_NOTADB) is done by SQLite, not by reading the file
    // ourselves: the message still names the file, and other connections keep their locks.
    QTemporaryDir dir;
    const std::string path = pathIn(dir, "good.db");
    TraceStore app(path);
    addRun(app, "kept");
    QVERIFY(app.runs().size() == 1);
    const std::string bad = shardscope::test::writeFile(dir, "bad.db", std::string(4096, 'x'));
    try {
      TraceStore b(bad);
      QFAIL("a file of x was opened as a database");
    } catch (const DatabaseError& e) {
      QVERIFY2(QString(e.what()).contains("not a SQLite database") && QString(e.what()).contains("bad.db"), e.what());
    }
    QVERIFY(otherProcessSeesSharedLock(path));
    QVERIFY_THROWS_EXCEPTION(DatabaseError, TraceStore(dir.path().toStdString()));  // a directory
  }

  void schemaIsCreatedOnceWhenConnectionsRace() {
    // Threads stand in for processes here (each connection has its own locks in SQLite's view);
    // tst_concurrent_writers races real processes.
    for (int round = 0; round < 5; ++round) {
      QTemporaryDir dir;
      const std::string path = pathIn(dir, "race.db");
      constexpr int kConnections = 6;
      std::atomic<int> ready{0};
      std::vector<std::string> errors(kConnections);
      std::vector<std::thread> threads;
      for (int i = 0; i < kConnections; ++i) {
        threads.emplace_back([&, i] {
          ++ready;
          while (ready.load() < kConnections) std::this_thread::yield();
          try {
            TraceStore s(path);
            addRun(s, "run " + std::to_string(i));
          } catch (const std::exception& e) {
            errors[static_cast<std::size_t>(i)] = e.what();
          }
        });
      }
      for (auto& t : threads) t.join();
      for (const auto& e : errors) QVERIFY2(e.empty(), e.c_str());
      TraceStore s(path, Database::Mode::ReadOnly);
      QCOMPARE(s.runs().size(), std::size_t(kConnections));
      QCOMPARE(schema::version(shardscope::core::storeDb(s)), schema::kCurrentVersion);
      QCOMPARE(shardscope::core::storeDb(s).pragmaInt("page_size"), std::int64_t(32768));
    }
  }

  void switchingToWalWaitsForAReader() {
    // A file still in rollback-journal mode (an older tool made it) with a reader inside a
    // transaction: journal_mode = WAL answers SQLITE_BUSY at once, without the busy handler. Opening
    // the store must wait for the reader, not fail, and leave the file in WAL mode.
    QTemporaryDir dir;
    const std::string path = pathIn(dir, "rollback.db");
    sqlite3* raw = nullptr;
    QCOMPARE(sqlite3_open(path.c_str(), &raw), SQLITE_OK);
    QCOMPARE(sqlite3_exec(raw, "PRAGMA journal_mode=DELETE; CREATE TABLE t(x); INSERT INTO t VALUES(1); BEGIN; SELECT * FROM t;",
                          nullptr, nullptr, nullptr),
             SQLITE_OK);
    std::thread release([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(600));
      sqlite3_exec(raw, "COMMIT", nullptr, nullptr, nullptr);
    });
    const auto t0 = std::chrono::steady_clock::now();
    std::string error;
    try {
      TraceStore store(path);
      Statement jm(shardscope::core::storeDb(store), "PRAGMA journal_mode");
      QVERIFY(jm.step());
      QCOMPARE(QString::fromStdString(jm.text(0)), QString("wal"));
    } catch (const std::exception& e) {
      error = e.what();
    }
    release.join();
    sqlite3_close(raw);
    QVERIFY2(error.empty(), error.c_str());
    QVERIFY(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(500));
  }

  void aWriterWaitsForTheLockThenGivesUpClearly() {
    QTemporaryDir dir;
    const std::string path = pathIn(dir, "busy.db");
    TraceStore holder(path);
    TraceStore waiter(path);
    shardscope::core::storeDb(waiter).setBusyTimeout(std::chrono::milliseconds(400));
    {
      Transaction tx(shardscope::core::storeDb(holder));
      addRun(holder, "holding the write lock");
      const auto t0 = std::chrono::steady_clock::now();
      try {
        addRun(waiter, "must wait");
        QFAIL("a second writer wrote while the first held the lock");
      } catch (const DatabaseError& e) {
        const auto waited = std::chrono::steady_clock::now() - t0;
        QVERIFY2(waited >= std::chrono::milliseconds(380), "gave up before its bound");
        QVERIFY2(waited < std::chrono::milliseconds(3000), "waited far past its bound");
        const QString msg = e.what();
        QVERIFY2(
            msg.contains("busy.db") && msg.contains("stayed locked by another writer") && msg.contains("SHARDSCOPE_BUSY_TIMEOUT"),
            e.what());
      }
      QVERIFY(shardscope::core::storeDb(waiter).longestWait() >= std::chrono::milliseconds(350));
      tx.commit();
    }
    // Readers were never blocked, and the lock released, the waiter writes.
    QCOMPARE(waiter.runs().size(), std::size_t(1));
    addRun(waiter, "after");
    QCOMPARE(holder.runs().size(), std::size_t(2));
  }

  void aWriterWaitsUntilTheLockIsReleased() {
    QTemporaryDir dir;
    const std::string path = pathIn(dir, "wait.db");
    TraceStore holder(path);
    TraceStore waiter(path);
    shardscope::core::storeDb(waiter).setBusyTimeout(std::chrono::milliseconds(20000));
    std::vector<std::chrono::milliseconds> reported;
    BusyPolicy::setReporter([&](const std::string& p, std::chrono::milliseconds waited, std::chrono::milliseconds bound) {
      QVERIFY(p == path);
      QCOMPARE(bound, std::chrono::milliseconds(20000));
      reported.push_back(waited);
    });
    auto tx = std::make_unique<Transaction>(shardscope::core::storeDb(holder));
    addRun(holder, "long import");
    std::thread release([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(2600));
      tx->commit();
    });
    const auto t0 = std::chrono::steady_clock::now();
    addRun(waiter, "waited");  // must not throw
    const auto waited = std::chrono::steady_clock::now() - t0;
    release.join();
    BusyPolicy::setReporter({});
    QVERIFY(waited >= std::chrono::milliseconds(2500));
    QVERIFY2(reported.size() == 1, "a wait of 2.6 s is reported once (after 2 s)");
    QVERIFY(reported[0] >= std::chrono::milliseconds(2000));
    QVERIFY(BusyPolicy::longestWait() >= std::chrono::milliseconds(2400));
    QCOMPARE(holder.runs().size(), std::size_t(2));
  }

  void cancellingEndsAWait() {
    QTemporaryDir dir;
    const std::string path = pathIn(dir, "cancel.db");
    TraceStore holder(path);
    TraceStore waiter(path);
    CancelToken token;
    shardscope::core::storeDb(waiter).setCancelToken(&token);
    Transaction tx(shardscope::core::storeDb(holder));
    addRun(holder, "holding");
    std::thread cancel([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      token.cancel();
    });
    const auto t0 = std::chrono::steady_clock::now();
    QVERIFY_THROWS_EXCEPTION(Cancelled, addRun(waiter, "cancelled"));
    cancel.join();
    QVERIFY(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
    tx.commit();
    QCOMPARE(waiter.runs().size(), std::size_t(1));
  }
};

QTEST_GUILESS_MAIN(TestDatabaseLocks)
#include "tst_database_locks.moc"
