// shardscope-cli end to end: the real executable on real files, its exit codes, its --json output,
// clean failures that keep the database intact, and Ctrl-C.
#include <QFile>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <csignal>
#include <filesystem>

#include "core/storage/store_access.h"
#include "core/storage/trace_store.h"
#include "core/util/json.h"
#include "tests/app/cli_runner.h"
#include "tests/common/test_support.h"
#include "tests/tools/kineto_generator.h"

using namespace shardscope;
using core::JsonValue;

namespace {

using Result = shardscope::test::CliResult;
using shardscope::test::runCli;

JsonValue json(const Result& r) { return core::parseJson(r.out.toStdString(), "cli output"); }

std::int64_t num(const JsonValue& v, const char* key) {
  const JsonValue* x = v.find(key);
  return x ? x->asInt().value_or(-1) : -1;
}

}  // namespace

class TestCli : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;
  std::string traceA_, traceB_;
  test::KinetoGenStats statsA_, statsB_;

 private Q_SLOTS:
  void initTestCase() {
    test::KinetoGenOptions o;
    o.events = 20000;
    o.worldSize = 2;
    o.rank = 0;
    QDir().mkpath(dir_.path() + "/job");
    traceA_ = test::pathIn(dir_, "job/rank0.pt.trace.json.gz");
    statsA_ = test::generateKinetoTrace(traceA_, o);
    o.rank = 1;
    o.seed = 2;
    traceB_ = test::pathIn(dir_, "job/rank1.pt.trace.json");
    statsB_ = test::generateKinetoTrace(traceB_, o);
  }

  void helpEverywhere() {
    const Result main = runCli({"--help"});
    QCOMPARE(main.code, 0);
    for (const char* c : {"import", "info", "analyze", "compare-runs", "export"}) {
      QVERIFY(main.out.contains(c));
      const Result r = runCli({c, "--help"});
      QCOMPARE(r.code, 0);
      QVERIFY2(r.out.contains("Usage: shardscope-cli " + QString(c)), qPrintable(r.out));
      QVERIFY(r.out.contains("--db"));
    }
    QVERIFY(main.out.contains("Exit codes"));
  }

  void usageErrors() {
    QCOMPARE(runCli({"frobnicate"}).code, 2);
    QCOMPARE(runCli({"import", "--bogus"}).code, 2);
    QCOMPARE(runCli({"import", "--db"}).code, 2);
    QCOMPARE(runCli({"export", "--db", test::pathIn(dir_, "x.db").c_str(), "--format", "svg", "-o", "out"}).code, 2);
    QCOMPARE(runCli({}).code, 2);
  }

  void checkSaysWhatTheFileIs() {
    const QString db = QString::fromStdString(test::pathIn(dir_, "check.db"));
    QCOMPARE(runCli({"import", "--db", db, QString::fromStdString(traceA_)}).code, 0);
    Result r = runCli({"check", "--db", db, "--json"});
    QCOMPARE(r.code, 0);
    QCOMPARE(QString::fromStdString(json(r).find("state")->asString()), QString("ok"));
    // Gone, and not a database: said as such, exit 3, never "malformed".
    r = runCli({"check", "--db", db + ".absent"});
    QCOMPARE(r.code, 3);
    QVERIFY2(r.err.contains("no such file"), qPrintable(r.err));
    const QString junk = QString::fromStdString(test::pathIn(dir_, "junk.db"));
    test::writeFile(dir_, "junk.db", std::string(5000, 'x'));
    r = runCli({"check", "--db", junk, "--json"});
    QCOMPARE(r.code, 3);
    QCOMPARE(QString::fromStdString(json(r).find("state")->asString()), QString("not-a-database"));
    // Damage in a table's b-tree page: malformed, with SQLite's words.
    const QString broken = QString::fromStdString(test::pathIn(dir_, "broken.db"));
    QVERIFY(QFile::copy(db, broken));
    {
      QFile f(broken);
      QVERIFY(f.open(QIODevice::ReadWrite));
      const qint64 page = 32768;  // the schema's page_size (schema.cpp)
      for (qint64 p = 1; p * page < f.size() && p < 12; ++p) {
        f.seek(p * page + 8);
        f.write(QByteArray(4000, '\xff'));
      }
    }
    r = runCli({"check", "--db", broken, "--json"});
    QCOMPARE(r.code, 3);
    QCOMPARE(QString::fromStdString(json(r).find("state")->asString()), QString("malformed"));
  }

  void importInfoExportRoundTrip() {
    const QString db = QString::fromStdString(test::pathIn(dir_, "runs.db"));
    const Result imp = runCli({"import", "--db", db, "--json", QString::fromStdString(test::pathIn(dir_, "job"))});
    QVERIFY2(imp.code == 0, qPrintable(imp.err));
    const JsonValue j = json(imp);
    QCOMPARE(j.find("runs")->items().size(), std::size_t(1));
    const auto& files = j.find("files")->items();
    QCOMPARE(files.size(), std::size_t(2));
    QCOMPARE(num(files[0], "rank"), 0);
    QCOMPARE(num(files[1], "rank"), 1);
    QCOMPARE(num(files[0], "trace_events"), std::int64_t(statsA_.traceEvents));
    QCOMPARE(num(files[0], "kernels"), std::int64_t(statsA_.kernels));
    QCOMPARE(num(files[0], "nccl_kernels"), std::int64_t(statsA_.ncclKernels));
    QCOMPARE(num(files[0], "steps"), std::int64_t(statsA_.steps));
    QCOMPARE(num(files[0], "memory_events"), std::int64_t(statsA_.memoryEvents));
    QCOMPARE(num(files[1], "kernels"), std::int64_t(statsB_.kernels));
    // X events and the 2 global instants per file become events; [memory] instants become memory records.
    QCOMPARE(num(j, "events"), std::int64_t(statsA_.completeEvents + statsB_.completeEvents + 4));

    const Result info = runCli({"info", "--db", db, "--json"});
    QCOMPARE(info.code, 0);
    const JsonValue run = json(info).find("runs")->items().at(0);
    QCOMPARE(num(run, "world_size"), 2);
    QCOMPARE(num(run, "events"), std::int64_t(statsA_.completeEvents + statsB_.completeEvents + 4));
    QCOMPARE(num(run, "steps"), std::int64_t(statsA_.steps + statsB_.steps));
    QCOMPARE(num(run, "collectives"), std::int64_t(statsA_.ncclKernels + statsB_.ncclKernels));
    QCOMPARE(run.find("ranks")->items().size(), std::size_t(2));
    QVERIFY(num(run, "span_ns") > 0);
    const Result text = runCli({"info", "--db", db, "--run", "1"});
    QCOMPARE(text.code, 0);
    QVERIFY(text.out.contains("rank 1"));
    QVERIFY(text.out.contains("gpu_stream"));

    // Export Kineto per rank and import it again: same event count.
    const QString out = QString::fromStdString(test::pathIn(dir_, "kineto_out"));
    const Result ex = runCli({"export", "--db", db, "--run", "1", "--format", "kineto", "-o", out, "--json"});
    QVERIFY2(ex.code == 0, qPrintable(ex.err));
    QCOMPARE(json(ex).find("files")->items().size(), std::size_t(2));
    const QString db2 = QString::fromStdString(test::pathIn(dir_, "again.db"));
    const Result re = runCli({"import", "--db", db2, "--json", out});
    QVERIFY2(re.code == 0, qPrintable(re.err));
    QCOMPARE(num(json(re), "events"), num(j, "events"));

    const QString perfetto = QString::fromStdString(test::pathIn(dir_, "merged.json.gz"));
    const Result pf = runCli({"export", "--db", db, "--format", "perfetto", "-o", perfetto});
    QVERIFY2(pf.code == 0, qPrintable(pf.err));
    QVERIFY(QFileInfo(perfetto).size() > 1000);
  }

  void analyzeGivesHtaFigures() {
    const QString db = QString::fromStdString(test::pathIn(dir_, "runs.db"));  // from importInfoExportRoundTrip
    const Result r = runCli({"analyze", "--db", db, "--json"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    const JsonValue run = json(r).find("runs")->items().at(0);
    const auto& ranks = run.find("hta_ranks")->items();
    QCOMPARE(ranks.size(), std::size_t(2));
    for (const auto& rk : ranks) {
      // The generated job communicates and computes: overlap is a number, shares add up to 100 %.
      QVERIFY(rk.find("comm_comp_overlap_pctg")->isNumber());
      const double sum = rk.find("idle_time_pctg")->asDouble() + rk.find("compute_time_pctg")->asDouble() +
                         rk.find("non_compute_time_pctg")->asDouble();
      QVERIFY2(std::abs(sum - 100.0) < 0.02, qPrintable(QString::number(sum)));
      QCOMPARE(num(rk, "idle_time_us") + num(rk, "compute_time_us") + num(rk, "non_compute_time_us"), num(rk, "kernel_time_us"));
      // HTA drops the last step from its GPU-side start (the gpu_user_annotation twin of
      // ProfilerStep#N starts after the CPU one), so CPU rows of the last step that come before it
      // keep their iteration tag: all 10 generated steps appear.
      QCOMPARE(rk.find("iterations")->items().size(), std::size_t(statsA_.steps));
    }
    const Result csv = runCli({"analyze", "--db", db, "--csv"});
    QCOMPARE(csv.code, 0);
    QCOMPARE(csv.out.trimmed().split('\n').size(), 3);  // header + 2 ranks
    const Result text = runCli({"analyze", "--db", db});
    QCOMPARE(text.code, 0);
    QVERIFY(text.out.contains("HTA-compatible"));
  }

  void compareRunsSideBySide() {
    const QString db = QString::fromStdString(test::pathIn(dir_, "compare.db"));
    QCOMPARE(runCli({"import", "--db", db, "--name", "same A", QString::fromStdString(traceA_)}).code, 0);
    QCOMPARE(runCli({"import", "--db", db, "--name", "same B", QString::fromStdString(traceA_)}).code, 0);
    QCOMPARE(runCli({"import", "--db", db, "--name", "other", QString::fromStdString(traceB_)}).code, 0);
    const Result r = runCli({"compare-runs", "--db", db, "--runs", "1,2,3", "--baseline", "1", "--json"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    const JsonValue j = json(r);
    QCOMPARE(j.find("runs")->items().size(), std::size_t(3));
    bool sawStep = false;
    for (const auto& row : j.find("rows")->items()) {
      if (row.find("key")->asString() != "step_time_ms") continue;
      sawStep = true;
      const auto& v = row.find("values")->items();
      QVERIFY(v[0].isNumber() && v[0].asDouble() > 0);
      QCOMPARE(v[0].asDouble(), v[1].asDouble());  // the same trace twice: the same figures
      QCOMPARE(row.find("delta_pct")->items()[1].asDouble(), 0.0);
    }
    QVERIFY(sawStep);
    QCOMPARE(runCli({"compare-runs", "--db", db, "--runs", "1"}).code, 1);  // needs two runs
    QCOMPARE(runCli({"compare-runs", "--db", db, "--runs", "1,x"}).code, 2);
    QCOMPARE(runCli({"compare-runs", "--db", db, "--baseline", "9"}).code, 2);
    const Result csv = runCli({"compare-runs", "--db", db, "--csv"});
    QCOMPARE(csv.code, 0);
    QVERIFY(csv.out.startsWith("metric,same A (run 1),same B (run 2),other (run 3),best_run"));
  }

  void badInputKeepsDatabase() {
    const QString db = QString::fromStdString(test::pathIn(dir_, "keep.db"));
    QCOMPARE(runCli({"import", "--db", db, QString::fromStdString(traceB_)}).code, 0);
    const std::string empty = test::writeFile(dir_, "empty.json", "");
    const std::string broken = test::writeFile(dir_, "broken.json", "{\"traceEvents\": [{\"ph\": \"X\", \"ts\": ");
    for (const std::string& bad : {empty, broken}) {
      const Result r = runCli({"import", "--db", db, QString::fromStdString(traceA_), QString::fromStdString(bad)});
      QCOMPARE(r.code, 1);
      QVERIFY2(r.err.contains(QString::fromStdString(bad)), qPrintable(r.err));
      QCOMPARE(r.err.trimmed().count('\n'), 0);  // one line
    }
    const Result missing = runCli({"import", "--db", db, "/nonexistent/trace.json"});
    QCOMPARE(missing.code, 1);
    QVERIFY(missing.err.contains("/nonexistent/trace.json"));
    const JsonValue info = json(runCli({"info", "--db", db, "--json"}));
    QCOMPARE(info.find("runs")->items().size(), std::size_t(1));
    QCOMPARE(num(info.find("runs")->items()[0], "events"), std::int64_t(statsB_.completeEvents + 2));
  }

  void databaseErrors() {
    const std::string notDb = test::writeFile(dir_, "notes.db", std::string(100, 'z'));
    const Result r = runCli({"info", "--db", QString::fromStdString(notDb)});
    QCOMPARE(r.code, 3);
    QVERIFY(r.err.contains("not a SQLite database"));
    const std::string newer = test::pathIn(dir_, "newer.db");
    {
      core::TraceStore store(newer);
      shardscope::core::storeDb(store).exec("PRAGMA user_version = 42");
    }
    const Result n = runCli({"import", "--db", QString::fromStdString(newer), QString::fromStdString(traceB_)});
    QCOMPARE(n.code, 3);
    QVERIFY(n.err.contains("newer"));
    const Result none = runCli({"info", "--db", QString::fromStdString(test::pathIn(dir_, "absent.db"))});
    QCOMPARE(none.code, 3);
  }

  void ctrlCCancelsAndKeepsNothing() {
    test::KinetoGenOptions o;
    o.events = 1500000;  // about a second of import since #21: time to interrupt it mid-way
    const std::string big = test::pathIn(dir_, "big.json.gz");
    test::generateKinetoTrace(big, o);
    const QString db = QString::fromStdString(test::pathIn(dir_, "cancel.db"));
    QProcess p;
    p.start(SHARDSCOPE_CLI, {"import", "--db", db, QString::fromStdString(big)});
    QVERIFY(p.waitForStarted());
    // Wait until the import has opened the database (its WAL, or the rollback journal of a bulk
    // import), then interrupt it.
    QTRY_VERIFY_WITH_TIMEOUT(QFileInfo::exists(db + "-wal") || QFileInfo::exists(db + "-journal"), 10000);
    QTest::qWait(100);
    if (p.state() != QProcess::Running) QSKIP("the import finished before it could be interrupted");
    ::kill(static_cast<pid_t>(p.processId()), SIGINT);
    QVERIFY(p.waitForFinished(30000));
    QCOMPARE(p.exitCode(), 130);
    QVERIFY(QString::fromUtf8(p.readAllStandardError()).contains("cancelled"));
    core::TraceStore store(db.toStdString());
    QCOMPARE(store.runs().size(), std::size_t(0));
  }
};

QTEST_GUILESS_MAIN(TestCli)
#include "tst_cli.moc"
