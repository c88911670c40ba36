// Many processes writing into one database at once, as users do it: imports racing to create a new
// file, imports and training runs writing into an existing one, a writer that waits for another's
// lock (reporting it), gives up clearly after its bound, or stops on Ctrl-C. Every writer is a real
// shardscope-cli process; afterwards the file must pass PRAGMA integrity_check and hold every run.
#include <csignal>

#include <QDir>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QProcess>
#include <QTemporaryDir>
#include <QThread>
#include <QtTest>

#include <memory>
#include <vector>

#include "core/storage/store_access.h"
#include "core/storage/trace_store.h"
#include "tests/app/cli_runner.h"
#include "tests/common/test_support.h"
#include "tests/tools/kineto_generator.h"

using namespace shardscope;
using shardscope::test::pathIn;

namespace {

struct Proc {
  std::unique_ptr<QProcess> p;
  QString what;
};

Proc startCli(const QStringList& args, const QString& what) { return {test::startCli(args), what}; }

// Waits for every process; returns "" when all exited 0, else what failed with its stderr.
QString finishAll(std::vector<Proc>& procs, int timeoutMs) {
  QString failures;
  for (auto& pr : procs) {
    if (!pr.p->waitForFinished(timeoutMs)) {
      pr.p->kill();
      pr.p->waitForFinished();
      failures += pr.what + ": did not finish\n";
      continue;
    }
    if (pr.p->exitStatus() != QProcess::NormalExit || pr.p->exitCode() != 0)
      failures +=
          pr.what + ": exit " + QString::number(pr.p->exitCode()) + ": " + QString::fromUtf8(pr.p->readAllStandardError()) + "\n";
  }
  return failures;
}

QString pragmaText(core::TraceStore& s, const char* pragma) {
  core::Statement st(shardscope::core::storeDb(s), std::string("PRAGMA ") + pragma);
  QString out;
  while (st.step()) out += QString::fromStdString(st.text(0)) + (st.columnCount() > 1 ? "|" : "") + "\n";
  return out.trimmed();
}

// A 2-rank job: two generated trace files (PREFIX0.json.gz, PREFIX1.json.gz in dir) that import as one run.
QStringList twoRankJob(const QTemporaryDir& dir, const std::string& prefix, std::uint64_t events, std::uint64_t seed) {
  QStringList files;
  for (int r = 0; r < 2; ++r) {
    test::KinetoGenOptions o;
    o.events = events;
    o.rank = r;
    o.worldSize = 2;
    o.seed = seed;
    const std::string f = pathIn(dir, prefix + std::to_string(r) + ".json.gz");
    test::generateKinetoTrace(f, o);
    files << QString::fromStdString(f);
  }
  return files;
}

}  // namespace

class TestConcurrentWriters : public QObject {
  Q_OBJECT

  QTemporaryDir traces_;
  QStringList job_;  // a 2-rank job: two trace files that import as one run

 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(traces_.isValid());
    job_ = twoRankJob(traces_, "rank", 30000, 7);
  }

  void importsRaceToCreateANewDatabase() {
    for (int round = 0; round < 3; ++round) {
      QTemporaryDir dir;
      const QString db = dir.filePath("new.db");
      std::vector<Proc> procs;
      constexpr int kWriters = 4;
      for (int i = 0; i < kWriters; ++i)
        procs.push_back(startCli(QStringList{"import", "--db", db, "--name", QString("import %1").arg(i)} + job_,
                                 QString("import %1 (round %2)").arg(i).arg(round)));
      const QString failures = finishAll(procs, 120000);
      QVERIFY2(failures.isEmpty(), qPrintable(failures));
      core::TraceStore s(db.toStdString(), core::Database::Mode::ReadOnly);
      QCOMPARE(pragmaText(s, "integrity_check"), QString("ok"));
      QCOMPARE(pragmaText(s, "foreign_key_check"), QString());
      QCOMPARE(pragmaText(s, "journal_mode"), QString("wal"));
      const auto runs = s.runs();
      QCOMPARE(static_cast<int>(runs.size()), kWriters);
      for (const auto& r : runs) {
        QCOMPARE(static_cast<int>(s.ranks(r.id).size()), 2);
        QVERIFY(s.summary(r.id).eventCount > 10000);
      }
    }
  }

  void importsAndRunsWriteIntoAnExistingDatabase() {
    QTemporaryDir dir;
    const QString db = dir.filePath("shared.db");
    QCOMPARE(test::runCli(QStringList{"import", "--db", db, "--name", "before"} + job_).code, 0);
    std::vector<Proc> procs;
    int expected = 1;
    for (int i = 0; i < 3; ++i, ++expected)
      procs.push_back(
          startCli(QStringList{"import", "--db", db, "--name", QString("import %1").arg(i)} + job_, QString("import %1").arg(i)));
    const bool runs = test::workerBuilt();
    if (runs) {
      for (const char* strategy : {"ddp", "zero3"}) {
        procs.push_back(startCli({"run", "--db", db, "--strategy", strategy, "--world-size", "2", "--model", "tiny", "--steps",
                                  "3", "--seq-len", "16", "--micro-batch", "2"},
                                 QString("run %1").arg(strategy)));
        ++expected;
      }
    }
    const QString failures = finishAll(procs, 300000);
    QVERIFY2(failures.isEmpty(), qPrintable(failures));
    core::TraceStore s(db.toStdString(), core::Database::Mode::ReadOnly);
    QCOMPARE(pragmaText(s, "integrity_check"), QString("ok"));
    QCOMPARE(pragmaText(s, "foreign_key_check"), QString());
    QCOMPARE(pragmaText(s, "journal_mode"), QString("wal"));
    const auto all = s.runs();
    QCOMPARE(static_cast<int>(all.size()), expected);
    for (const auto& r : all) {
      QVERIFY2(r.status == core::RunStatus::Completed, r.name.c_str());
      QCOMPARE(static_cast<int>(s.ranks(r.id).size()), 2);
      if (r.source == core::RunSource::Runtime) QCOMPARE(static_cast<int>(s.steps(r.id).size()), 2 * 3);
    }
    if (!runs) QSKIP("shardscope-worker is not built (no LibTorch): imports only");
  }

  void aWriterWaitsReportsAndGivesUpClearly() {
    QTemporaryDir dir;
    const QString db = dir.filePath("held.db");
    QCOMPARE(test::runCli(QStringList{"import", "--db", db, "--name", "first"} + job_).code, 0);
    core::TraceStore holder(db.toStdString());
    {
      // Another process holds the write lock past the bound: exit 3, the file and the bound named.
      core::Transaction tx(shardscope::core::storeDb(holder));
      holder.setRunStatus(core::RunId{1}, core::RunStatus::Completed);
      const auto r = test::runCli(QStringList{"import", "--db", db, "--busy-timeout", "1.5", "--name", "late"} + job_, 60000);
      QCOMPARE(r.code, 3);
      QVERIFY2(r.err.contains("held.db") && r.err.contains("stayed locked by another writer") && r.err.contains("for 1.5 s"),
               qPrintable(r.err));
      tx.commit();
    }
    {
      // Held for 3 s: the writer waits, says so on stderr, then succeeds.
      auto tx = std::make_unique<core::Transaction>(shardscope::core::storeDb(holder));
      holder.setRunStatus(core::RunId{1}, core::RunStatus::Completed);
      Proc p = startCli(QStringList{"import", "--db", db, "--busy-timeout", "60", "--name", "waited", "--json"} + job_, "import");
      QTest::qWait(3000);
      QCOMPARE(p.p->state(), QProcess::Running);  // still waiting
      tx->commit();
      tx.reset();
      QVERIFY(p.p->waitForFinished(60000));
      const QString err = QString::fromUtf8(p.p->readAllStandardError());
      QVERIFY2(p.p->exitCode() == 0, qPrintable(err));
      QVERIFY2(err.contains("held.db: waiting for another process writing to it"), qPrintable(err));
      QVERIFY2(QString::fromUtf8(p.p->readAllStandardOutput()).contains("\"lock_wait_seconds\""), "no lock wait in --json");
    }
    {
      // Ctrl-C while waiting: cancelled (exit 130), nothing written.
      core::Transaction tx(shardscope::core::storeDb(holder));
      holder.setRunStatus(core::RunId{1}, core::RunStatus::Completed);
      Proc p = startCli(QStringList{"import", "--db", db, "--name", "cancelled"} + job_, "import");
      QTest::qWait(1500);
      QCOMPARE(p.p->state(), QProcess::Running);
      ::kill(static_cast<pid_t>(p.p->processId()), SIGINT);
      QVERIFY(p.p->waitForFinished(20000));
      QCOMPARE(p.p->exitCode(), 130);
      tx.commit();
    }
    QCOMPARE(static_cast<int>(holder.runs().size()), 2);  // "first" and "waited"
    QCOMPARE(pragmaText(holder, "integrity_check"), QString("ok"));
  }

  void importingTheDatabaseIntoItselfIsRefused() {
    QTemporaryDir dir;
    const QString db = dir.filePath("self.db");
    QCOMPARE(test::runCli(QStringList{"import", "--db", db, "--name", "first"} + job_).code, 0);
    const auto r = test::runCli({"import", "--db", db, db});
    QCOMPARE(r.code, 1);
    QVERIFY2(r.err.contains("is the database being imported into"), qPrintable(r.err));
  }

  // The first import into a new file writes it once, through a rollback journal instead of the WAL
  // (ImportWriter::writeOnceIfEmpty). Killed in the middle, it must leave the file as it was before
  // the import (the empty schema, rolled back from the journal by the next opener), in WAL mode
  // again, and ready for the next import.
  void aKilledFirstImportLeavesTheNewFileEmptyAndUsable() {
    QTemporaryDir dir;
    const QStringList big = twoRankJob(dir, "big", 1000000, 11);
    const QString db = dir.filePath("new.db");
    Proc imp = startCli(QStringList{"import", "--db", db, "--name", "killed"} + big, "import");
    // Mid-transaction: the journal exists and pages beyond the page cache went to the file.
    QElapsedTimer t;
    t.start();
    bool mid = false;
    while (t.elapsed() < 60000 && imp.p->state() != QProcess::NotRunning) {
      if (QFileInfo::exists(db + "-journal") && QFileInfo(db).size() > (8 << 20) && !QFileInfo::exists(db + "-wal")) {
        mid = true;
        break;
      }
      QThread::msleep(2);
    }
    QVERIFY2(mid, "the import did not write the new file through a rollback journal (or finished before it was seen)");
    ::kill(static_cast<pid_t>(imp.p->processId()), SIGKILL);
    QVERIFY(imp.p->waitForFinished(10000));
    {
      core::TraceStore s(db.toStdString());
      QCOMPARE(pragmaText(s, "integrity_check"), QString("ok"));
      QCOMPARE(pragmaText(s, "journal_mode"), QString("wal"));
      QVERIFY(s.runs().empty());
    }
    QVERIFY(!QFileInfo::exists(db + "-journal") || QFileInfo(db + "-journal").size() == 0);
    const auto r = test::runCli(QStringList{"import", "--db", db, "--name", "after"} + job_);
    QCOMPARE(r.code, 0);
    core::TraceStore s(db.toStdString(), core::Database::Mode::ReadOnly);
    QCOMPARE(static_cast<int>(s.runs().size()), 1);
    QCOMPARE(pragmaText(s, "journal_mode"), QString("wal"));
    QCOMPARE(pragmaText(s, "integrity_check"), QString("ok"));
  }
};

QTEST_GUILESS_MAIN(TestConcurrentWriters)
#include "tst_concurrent_writers.moc"
