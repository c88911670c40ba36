// The CLI is strict, as scripts need it: a stray argument is a usage error (exit 2) for every
// command that takes options only; a flag reads --flag, --flag=false and --flag false alike (and
// anything else after '=' is refused); with --json, stdout is exactly one JSON document (the human
// text goes to stderr) for every command, `run` and `compare` included.
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

#include "core/storage/store_access.h"
#include "core/storage/trace_store.h"
#include "tests/app/cli_runner.h"
#include "tests/common/test_support.h"
#include "tests/tools/kineto_generator.h"

using namespace shardscope;
using test::runCli;
using test::workerBuilt;

namespace {

// stdout parses as one JSON value and holds nothing else.
QString oneJsonDocument(const QString& out) {
  QJsonParseError err{};
  const QJsonDocument d = QJsonDocument::fromJson(out.toUtf8(), &err);
  if (err.error != QJsonParseError::NoError) return "not one JSON document (" + err.errorString() + "): " + out.left(300);
  if (d.isNull()) return "empty stdout";
  return {};
}

}  // namespace

class TestCliStrict : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;
  QString db_;
  QStringList job_;

 private Q_SLOTS:
  void initTestCase() {
    for (int r = 0; r < 2; ++r) {
      test::KinetoGenOptions o;
      o.events = 5000;
      o.rank = r;
      o.worldSize = 2;
      const std::string f = test::pathIn(dir_, "rank" + std::to_string(r) + ".json");
      test::generateKinetoTrace(f, o);
      job_ << QString::fromStdString(f);
    }
    db_ = dir_.filePath("strict.db");
    QCOMPARE(runCli(QStringList{"import", "--db", db_, "--name", "a"} + job_).code, 0);
    QCOMPARE(runCli(QStringList{"import", "--db", db_, "--name", "b"} + job_).code, 0);
  }

  void strayArgumentsAreUsageErrors_data() {
    QTest::addColumn<QStringList>("args");
    QTest::newRow("info") << QStringList{"info", "--db", db_, "bogus"};
    QTest::newRow("analyze") << QStringList{"analyze", "--db", db_, "--run", "1", "extra"};
    QTest::newRow("compare-runs") << QStringList{"compare-runs", "--db", db_, "1", "2"};
    QTest::newRow("export") << QStringList{"export", "--db", db_, "--format", "perfetto", "-o", dir_.filePath("x.json"), "oops"};
    QTest::newRow("report") << QStringList{"report", "--db", db_, "--format", "md", "-o", dir_.filePath("r.md"), "oops"};
    QTest::newRow("estimate") << QStringList{"estimate", "--model", "tiny", "--gpus", "2", "stray"};
    QTest::newRow("run") << QStringList{"run", "--db", db_, "--model", "tiny", "bogus"};
    QTest::newRow("compare") << QStringList{"compare", "--db", db_, "bogus"};
    // A flag followed by a word that is not a truth value: the word is stray, not the flag's value.
    QTest::newRow("flag then word") << QStringList{"analyze", "--db", db_, "--all-runs", "maybe"};
  }
  void strayArgumentsAreUsageErrors() {
    QFETCH(QStringList, args);
    const auto r = runCli(args);
    QVERIFY2(r.code == 2, qPrintable(QString("exit %1: %2").arg(r.code).arg(r.err)));
    QVERIFY2(r.err.contains("unexpected argument"), qPrintable(r.err));
    QVERIFY(r.out.isEmpty());
  }

  void flagsTakeTheirValueThreeWays() {
    // --json, --json=true, --json true: JSON; --json=false, --json false, --json=0: the text.
    for (const QStringList& on :
         {QStringList{"--json"}, QStringList{"--json=true"}, QStringList{"--json", "true"}, QStringList{"--json=on"}}) {
      const auto r = runCli(QStringList{"info", "--db", db_} + on);
      QVERIFY2(r.code == 0, qPrintable(r.err));
      QVERIFY2(oneJsonDocument(r.out).isEmpty(), qPrintable(on.join(' ') + ": " + oneJsonDocument(r.out)));
    }
    for (const QStringList& off :
         {QStringList{"--json=false"}, QStringList{"--json", "false"}, QStringList{"--json=0"}, QStringList{"--json", "off"}}) {
      const auto r = runCli(QStringList{"info", "--db", db_} + off);
      QVERIFY2(r.code == 0, qPrintable(r.err));
      QVERIFY2(r.out.startsWith(QFileInfo(db_).filePath()) || r.out.contains("run(s)"),
               qPrintable(off.join(' ') + ": " + r.out.left(200)));
      QVERIFY2(!oneJsonDocument(r.out).isEmpty(), qPrintable(off.join(' ') + " printed JSON"));
    }
    const auto bad = runCli({"info", "--db", db_, "--json=maybe"});
    QCOMPARE(bad.code, 2);
    QVERIFY2(bad.err.contains("is a flag"), qPrintable(bad.err));
  }

  void jsonIsTheOnlyThingOnStdout_data() {
    QTest::addColumn<QStringList>("args");
    QTest::newRow("import") << (QStringList{"import", "--db", dir_.filePath("j.db"), "--json"} + job_);
    QTest::newRow("info") << QStringList{"info", "--db", db_, "--json"};
    QTest::newRow("analyze") << QStringList{"analyze", "--db", db_, "--run", "1", "--json"};
    QTest::newRow("compare-runs") << QStringList{"compare-runs", "--db", db_, "--json"};
    QTest::newRow("export") << QStringList{
        "export", "--db", db_, "--run", "1", "--format", "perfetto", "-o", dir_.filePath("p.json.gz"), "--json"};
    QTest::newRow("estimate") << QStringList{"estimate", "--model", "llama3-8b", "--gpus", "8", "--json"};
    QTest::newRow("simulate") << QStringList{"simulate", "--model", "small", "--gpus", "4", "--strategy", "ddp,fsdp", "--json"};
    QTest::newRow("report") << QStringList{"report", "--db", db_, "--runs", "1,2", "--format", "md", "-o", dir_.filePath("r.md"),
                                           "--json"};
  }
  void jsonIsTheOnlyThingOnStdout() {
    QFETCH(QStringList, args);
    const auto r = runCli(args);
    QVERIFY2(r.code == 0, qPrintable(r.err));
    const QString problem = oneJsonDocument(r.out);
    QVERIFY2(problem.isEmpty(), qPrintable(problem));
  }

  // run --like refuses what has no configuration to start from, naming it.
  void likeNeedsAStoredConfiguration_data() {
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<QString>("says");
    QTest::newRow("imported trace") << QStringList{"run", "--db", db_, "--like", "1"} << "is an imported trace";
    QTest::newRow("no such run") << QStringList{"run", "--db", db_, "--like", "99"} << "no run with id 99";
    QTest::newRow("not an id") << QStringList{"run", "--db", db_, "--like", "x1"} << "--like expects a run id";
  }
  void likeNeedsAStoredConfiguration() {
    QFETCH(QStringList, args);
    QFETCH(QString, says);
    const auto r = runCli(args);
    QVERIFY(r.code != 0);
    QVERIFY2(r.err.contains(says), qPrintable(r.err));
  }

  void runAndCompareWithJson() {
    if (!workerBuilt()) QSKIP("shardscope-worker is not built (no LibTorch)");
    const QString db = dir_.filePath("runs.db");
    const QStringList common{"--db",    db,  "--model",   "tiny", "--world-size",  "2",
                             "--steps", "2", "--seq-len", "16",   "--micro-batch", "2"};
    // --capture false really turns capture off (it used to be read as --capture and a stray 'false').
    auto r = runCli(QStringList{"run", "--strategy", "ddp", "--capture", "false", "--json"} + common, 180000);
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY2(oneJsonDocument(r.out).isEmpty(), qPrintable(oneJsonDocument(r.out)));
    const QJsonObject run = QJsonDocument::fromJson(r.out.toUtf8()).object();
    QCOMPARE(run.value("ok").toBool(), true);
    QCOMPARE(run.value("status").toString(), QString("completed"));
    QVERIFY(run.value("step_time_ms").toDouble() > 0);
    QVERIFY2(r.err.contains("step time"), "the human summary goes to stderr");
    {
      core::TraceStore s(db.toStdString(), core::Database::Mode::ReadOnly);
      core::Statement st(shardscope::core::storeDb(s), "SELECT COUNT(*) FROM event_chunks");
      QVERIFY(st.step());
      QCOMPARE(st.int64(0), std::int64_t(0));  // nothing captured
    }
    // run --like (a bottleneck's "try it"): the stored configuration of that run, then the flags.
    const qint64 first = run.value("run_id").toInteger();
    r = runCli(
        QStringList{"run", "--db", db, "--like", QString::number(first), "--bucket-cap-mb", "5", "--capture", "false", "--json"},
        180000);
    QVERIFY2(r.code == 0, qPrintable(r.err));
    {
      const QJsonObject liked = QJsonDocument::fromJson(r.out.toUtf8()).object();
      core::TraceStore s(db.toStdString(), core::Database::Mode::ReadOnly);
      const auto newRun = s.run(core::RunId{liked.value("run_id").toInteger()});
      QVERIFY(newRun.has_value());
      const QJsonObject cfg = QJsonDocument::fromJson(QByteArray::fromStdString(newRun->configJson)).object();
      QCOMPARE(cfg.value("bucket_cap_mb").toDouble(), 5.0);
      QCOMPARE(cfg.value("model").toString(), QString("tiny"));
      QCOMPARE(cfg.value("seq_len").toInt(), 16);
      QCOMPARE(cfg.value("strategy").toString(), QString("ddp"));
    }
    r = runCli(QStringList{"compare", "--strategies", "ddp,zero3", "--json"} + common, 300000);
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY2(oneJsonDocument(r.out).isEmpty(), qPrintable(oneJsonDocument(r.out)));
    const QJsonObject cmp = QJsonDocument::fromJson(r.out.toUtf8()).object();
    QCOMPARE(cmp.value("runs").toArray().size(), 2);
    QVERIFY(cmp.value("comparison").toObject().value("rows").toArray().size() > 3);
  }
};

QTEST_GUILESS_MAIN(TestCliStrict)
#include "tst_cli_strict.moc"
