// The open guard (core/storage/open_guard.h): while this process holds a database through SQLite,
// nothing else in it may open the file or its -wal/-shm (every such open would end in a close that
// drops the process's POSIX locks). Checked as the peers see it: a forked child asks the kernel
// with fcntl(F_GETLK) whether the lock is still held, after each thing that used to drop it,
// Qt's own MIME sniffing (what the file dialog does to every file it lists) among them.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <QFile>
#include <QMimeDatabase>
#include <QTemporaryDir>
#include <QtTest>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <filesystem>

#include "core/import/trace_reader.h"
#include "core/storage/open_guard.h"
#include "core/storage/trace_store.h"
#include "core/util/error.h"
#include "tests/common/test_support.h"

using namespace shardscope::core;
using shardscope::test::otherProcessSeesSharedLock;
using shardscope::test::pathIn;

namespace {

RunId addRun(TraceStore& store) {
  Run r;
  r.name = "r";
  r.source = RunSource::Runtime;
  r.status = RunStatus::Completed;
  return store.createRun(r);
}

}  // namespace

class TestOpenGuard : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void init() { setOpenGuardMode(OpenGuardMode::Refuse); }

  void aHeldDatabaseIsNotOpenedOutsideSqlite() {
    QTemporaryDir dir;
    const std::string path = pathIn(dir, "held.db");
    TraceStore store(path);
    addRun(store);
    QCOMPARE(store.runs().size(), std::size_t(1));
    QVERIFY(otherProcessSeesSharedLock(path));
    QVERIFY(isHeldDatabaseFile(path));
    QVERIFY(isHeldDatabaseFile(path + "-wal"));
    QVERIFY(isHeldDatabaseFile(path + "-shm"));
    QVERIFY(isHeldDatabaseFile(path + "-journal"));  // absent, named after the held file
    QCOMPARE(heldConnections(path), 1);

    const std::int64_t before = refusedOpens();
    errno = 0;
    QVERIFY(std::fopen(path.c_str(), "rb") == nullptr);
    QCOMPARE(errno, EACCES);
    QCOMPARE(::open((path + "-shm").c_str(), O_RDONLY), -1);
    QCOMPARE(::openat(AT_FDCWD, (path + "-wal").c_str(), O_RDONLY), -1);
    {
      QFile f(QString::fromStdString(path));
      QVERIFY(!f.open(QIODevice::ReadOnly));
    }
    // Another name of the same file is the same file.
    const std::string link = pathIn(dir, "alias.db");
    std::filesystem::create_hard_link(path, link);
    QVERIFY(std::fopen(link.c_str(), "rb") == nullptr);
    QVERIFY(refusedOpens() >= before + 5);
    QCOMPARE(QString::fromStdString(lastRefusedOpen()), QString::fromStdString(link));
    QVERIFY2(otherProcessSeesSharedLock(path), "a refused open still dropped the lock");

    // Other files open as before; the store still reads and writes.
    const std::string other = pathIn(dir, "trace.json");
    std::FILE* f = std::fopen(other.c_str(), "wb");
    QVERIFY(f);
    std::fclose(f);
    addRun(store);
    QCOMPARE(store.runs().size(), std::size_t(2));
  }

  void qtsMimeSniffingKeepsTheLocks() {
    // What QFileDialog does for the type of every file in a folder it lists.
    QTemporaryDir dir;
    const std::string path = pathIn(dir, "x.db");
    TraceStore store(path);
    addRun(store);
    QVERIFY(store.runs().size() == 1);
    QVERIFY(otherProcessSeesSharedLock(path));
    QMimeDatabase mimes;
    for (const std::string& f : {path, path + "-wal", path + "-shm"}) {
      (void)mimes.mimeTypeForFile(QString::fromStdString(f), QMimeDatabase::MatchContent);
      QVERIFY2(otherProcessSeesSharedLock(path), f.c_str());
    }
  }

  void aReleasedDatabaseOpensAgain() {
    QTemporaryDir dir;
    const std::string path = pathIn(dir, "released.db");
    {
      TraceStore a(path);
      TraceStore b(path, Database::Mode::ReadOnly);
      QCOMPARE(heldConnections(path), 2);
    }
    QCOMPARE(heldConnections(path), 0);
    QVERIFY(!isHeldDatabaseFile(path));
    std::FILE* f = std::fopen(path.c_str(), "rb");
    QVERIFY(f);
    std::fclose(f);
  }

  void importingTheHeldDatabaseIsAClearError() {
    QTemporaryDir dir;
    const std::string path = pathIn(dir, "self.db");
    const std::string other = pathIn(dir, "other.db");
    TraceStore store(path);
    TraceStore second(other);
    addRun(store);
    try {
      chooseReader({other}, path);
      QFAIL("a held database was sniffed as a trace");
    } catch (const Error& e) {
      QVERIFY2(std::string(e.what()).find("this process has open") != std::string::npos, e.what());
    }
  }

  void outputsNeverReplaceADatabase() {
    QTemporaryDir dir;
    const std::string held = pathIn(dir, "held.db");
    const std::string other = pathIn(dir, "other.sqlite");
    { TraceStore create(other); }  // a database no connection of this process has open
    TraceStore store(held);
    addRun(store);
    const std::string text = pathIn(dir, "report.html");
    std::FILE* f = std::fopen(text.c_str(), "wb");
    QVERIFY(f);
    std::fputs("<html></html>", f);
    std::fclose(f);
    QVERIFY(isSqliteDatabaseFile(held));
    QVERIFY(isSqliteDatabaseFile(other));
    QVERIFY(!isSqliteDatabaseFile(text));
    QVERIFY(!isSqliteDatabaseFile(pathIn(dir, "absent.html")));
    for (const std::string& db : {held, other}) {
      try {
        refuseToReplaceDatabase(db, "writing the report there");
        QFAIL("a database would have been replaced");
      } catch (const Error& e) {
        QVERIFY2(std::string(e.what()).find("is a SQLite database") != std::string::npos, e.what());
      }
    }
    refuseToReplaceDatabase(text, "writing the report there");  // an ordinary file may be replaced
    QCOMPARE(store.runs().size(), std::size_t(1));
  }

  void abortModeFailsLoudly() {
    QTemporaryDir dir;
    const std::string path = pathIn(dir, "abort.db");
    { TraceStore create(path); }
    const pid_t pid = fork();
    if (pid == 0) {
      // The child's own connection (a fork inherits no lock and no registration). The abort is
      // the test's outcome, not a crash for Qt Test's handler to report.
      std::signal(SIGABRT, SIG_DFL);
      {
        TraceStore mine(path);
        if (!isHeldDatabaseFile(path)) _exit(5);
        setOpenGuardMode(OpenGuardMode::Abort);
        std::FILE* f = std::fopen(path.c_str(), "rb");
        (void)f;
      }
      _exit(0);  // not reached when the guard aborts
    }
    int status = 0;
    waitpid(pid, &status, 0);
    QVERIFY2(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "the guard did not abort");
  }

  void aForkedChildHoldsNothing() {
    QTemporaryDir dir;
    const std::string path = pathIn(dir, "fork.db");
    TraceStore store(path);
    QVERIFY(isHeldDatabaseFile(path));
    const pid_t pid = fork();
    if (pid == 0) _exit(isHeldDatabaseFile(path) ? 1 : 0);
    int status = 0;
    waitpid(pid, &status, 0);
    QVERIFY(WIFEXITED(status));
    QCOMPARE(WEXITSTATUS(status), 0);
  }
};

QTEST_GUILESS_MAIN(TestOpenGuard)
#include "tst_open_guard.moc"
