// The protocol between the app and the CLI (app/cli/protocol.h, docs/ARCHITECTURE.md): with
// `--progress json`, `import`, `run` and `compare` write one JSON event per stdout line and nothing
// else there; the run ids of the run events and of the last "done" event are the database's; errors
// come back as events naming the file or the run-config key; the configuration can come as JSON on
// stdin (`--config -`). Without the flag the human output is where it always was.
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>

#include "core/config/run_config.h"
#include "core/storage/trace_store.h"
#include "tests/app/cli_runner.h"
#include "tests/common/test_support.h"
#include "tests/tools/kineto_generator.h"

using namespace shardscope;
using test::runCli;

namespace {

// Every stdout line as a JSON object with an "event"; fails the test on anything else.
QList<QJsonObject> events(const QString& out) {
  QList<QJsonObject> list;
  const QStringList lines = out.split('\n', Qt::SkipEmptyParts);
  for (const QString& line : lines) {
    QJsonParseError err{};
    const QJsonDocument d = QJsonDocument::fromJson(line.toUtf8(), &err);
    if (err.error != QJsonParseError::NoError || !d.isObject() || !d.object().contains("event")) {
      qWarning("not an event line: %s", qPrintable(line));
      return {};
    }
    list << d.object();
  }
  return list;
}

QList<QJsonObject> ofKind(const QList<QJsonObject>& all, const QString& kind) {
  QList<QJsonObject> out;
  for (const auto& e : all)
    if (e["event"].toString() == kind) out << e;
  return out;
}

QList<qint64> idsOf(const QJsonArray& a) {
  QList<qint64> out;
  for (const auto& v : a) out << static_cast<qint64>(v.toDouble());
  return out;
}

// The CLI with `input` on its stdin.
test::CliResult runWithStdin(const QStringList& args, const QByteArray& input) {
  QProcess p;
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.insert("SHARDSCOPE_NO_PROGRESS", "1");
  p.setProcessEnvironment(env);
  p.start(SHARDSCOPE_CLI, args);
  p.write(input);
  p.closeWriteChannel();
  if (!p.waitForFinished(120000)) {
    p.kill();
    p.waitForFinished();
    return {};
  }
  return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -2, QString::fromUtf8(p.readAllStandardOutput()),
          QString::fromUtf8(p.readAllStandardError())};
}

}  // namespace

class TestCliProtocol : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;
  QStringList job_;

 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    for (int r = 0; r < 2; ++r) {
      test::KinetoGenOptions o;
      o.events = 20000;
      o.rank = r;
      o.worldSize = 2;
      const std::string f = test::pathIn(dir_, "rank" + std::to_string(r) + ".json");
      test::generateKinetoTrace(f, o);
      job_ << QString::fromStdString(f);
    }
  }

  void importSpeaksJsonLines() {
    const QString db = dir_.filePath("import.db");
    QCOMPARE(runCli(QStringList{"import", "--db", db, "--name", "first"} + job_).code, 0);
    // Two files as separate runs: two run events.
    const auto r = runCli(QStringList{"import", "--db", db, "--separate-runs", "--progress", "json"} + job_);
    QVERIFY2(r.code == 0, qPrintable(r.err));
    const auto all = events(r.out);
    QVERIFY2(!all.isEmpty(), qPrintable(r.out));
    QVERIFY(!ofKind(all, "progress").isEmpty());
    for (const auto& p : ofKind(all, "progress")) {
      QVERIFY(p["done"].isDouble() && p["total"].isDouble() && p["label"].isString());
      QVERIFY(p["done"].toDouble() <= p["total"].toDouble() || p["total"].toDouble() == 0);
    }
    // The run ids are the database's new runs, in both the run events and the last event.
    core::TraceStore store(db.toStdString(), core::Database::Mode::ReadOnly);
    QList<qint64> stored;
    for (const auto& run : store.runs())
      if (run.name != "first") stored << qint64(run.id.value());
    std::sort(stored.begin(), stored.end());
    QCOMPARE(stored.size(), 2);
    QList<qint64> fromRuns;
    for (const auto& e : ofKind(all, "run")) {
      fromRuns << static_cast<qint64>(e["run_id"].toDouble());
      QCOMPARE(e["status"].toString(), QString("completed"));
    }
    QCOMPARE(fromRuns, stored);
    const QJsonObject last = all.last();
    QCOMPARE(last["event"].toString(), QString("done"));
    QCOMPARE(last["exit"].toInt(), 0);
    QCOMPARE(idsOf(last["run_ids"].toArray()), stored);
    // The human summary moved to stderr.
    QVERIFY2(r.err.contains("imported 2 file(s) into runs"), qPrintable(r.err));
    // Without the flag, the human summary is on stdout as before and no event is written.
    const auto plain = runCli(QStringList{"import", "--db", db} + job_);
    QCOMPARE(plain.code, 0);
    QVERIFY(plain.out.contains("imported 2 file(s) into run "));
    QVERIFY(!plain.out.contains("\"event\""));
  }

  void importErrorNamesTheFile() {
    const std::string bad = test::writeFile(dir_, "bad.json", "{\"traceEvents\": [");
    const auto r = runCli({"import", "--db", dir_.filePath("bad.db"), "--progress", "json", QString::fromStdString(bad)});
    QCOMPARE(r.code, 1);
    const auto all = events(r.out);
    QVERIFY2(!all.isEmpty(), qPrintable(r.out));
    const auto errors = ofKind(all, "error");
    QCOMPARE(errors.size(), 1);
    QCOMPARE(errors[0]["file"].toString(), QString::fromStdString(bad));
    QVERIFY(errors[0]["message"].toString().contains("bad.json"));
    QCOMPARE(all.last()["event"].toString(), QString("done"));
    QCOMPARE(all.last()["exit"].toInt(), 1);
    QVERIFY(all.last()["run_ids"].toArray().isEmpty());
    QVERIFY(r.err.contains("error: "));  // the human line too, on stderr
  }

  void invalidConfigComesBackWithItsKey_data() {
    QTest::addColumn<QString>("command");
    QTest::addColumn<QByteArray>("json");
    QTest::addColumn<QString>("key");
    // validate()'s cross-field rule, the JSON reader's type check, a value outside its set.
    QTest::newRow("run nnodes") << "run" << QByteArray(R"({"world_size":3,"nnodes":2})") << "nnodes";
    QTest::newRow("compare nnodes") << "compare" << QByteArray(R"({"world_size":3,"nnodes":2})") << "nnodes";
    QTest::newRow("type") << "run" << QByteArray(R"({"steps":"many"})") << "steps";
    QTest::newRow("choice") << "compare" << QByteArray(R"({"optimizer":"lamb"})") << "optimizer";
  }

  void invalidConfigComesBackWithItsKey() {
    QFETCH(QString, command);
    QFETCH(QByteArray, json);
    QFETCH(QString, key);
    const QString db = dir_.filePath("never.db");
    const auto r = runWithStdin({command, "--db", db, "--progress", "json", "--config", "-"}, json);
    QCOMPARE(r.code, 1);
    const auto all = events(r.out);
    QVERIFY2(!all.isEmpty(), qPrintable(r.out + r.err));
    const auto errors = ofKind(all, "error");
    QCOMPARE(errors.size(), 1);
    QCOMPARE(errors[0]["key"].toString(), key);
    QVERIFY(ofKind(all, "run").isEmpty());  // refused before anything launched
    QCOMPARE(all.last()["exit"].toInt(), 1);
    QVERIFY(!QFileInfo::exists(db));
  }

  void configFileAndStdinAreTheSame() {
    // The same refusal from a file and from stdin: the JSON is read the same way.
    const std::string file = test::writeFile(dir_, "cfg.json", R"({"world_size":3,"nnodes":2})");
    const auto a = runCli({"run", "--db", dir_.filePath("never.db"), "--config", QString::fromStdString(file)});
    const auto b = runWithStdin({"run", "--db", dir_.filePath("never.db"), "--config", "-"}, R"({"world_size":3,"nnodes":2})");
    QCOMPARE(a.code, 1);
    QCOMPARE(b.code, 1);
    QCOMPARE(a.err, b.err);
    QVERIFY(a.out.isEmpty());  // no flag: no events
  }

  void badProgressValueIsAUsageError() {
    const auto r = runCli({"import", "--db", dir_.filePath("x.db"), "--progress", "xml", job_[0]});
    QCOMPARE(r.code, 2);
    QVERIFY(r.err.contains("--progress: expected 'json'"));
    QVERIFY(r.out.isEmpty());
  }

  void runSpeaksJsonLines() {
    if (!test::workerBuilt()) QSKIP("shardscope-worker is not built (it needs LibTorch): no real run to launch");
    const QString db = dir_.filePath("run.db");
    core::RunConfig cfg;
    cfg.steps = 3;
    cfg.worldSize = 2;
    const auto r = runWithStdin({"run", "--db", db, "--progress", "json", "--config", "-"},
                                QByteArray::fromStdString(core::toJson(cfg).dump()));
    QVERIFY2(r.code == 0, qPrintable(r.err));
    const auto all = events(r.out);
    QVERIFY2(!all.isEmpty(), qPrintable(r.out));
    const auto runs = ofKind(all, "run");
    QCOMPARE(runs.size(), 2);  // running, completed
    QCOMPARE(runs[0]["status"].toString(), QString("running"));
    QCOMPARE(runs[1]["status"].toString(), QString("completed"));
    const qint64 id = static_cast<qint64>(runs[0]["run_id"].toDouble());
    QCOMPARE(ofKind(all, "progress").size(), 3);  // one per step of rank 0
    core::TraceStore store(db.toStdString(), core::Database::Mode::ReadOnly);
    QCOMPARE(store.runs().size(), std::size_t(1));
    QCOMPARE(store.runs()[0].id, core::RunId{id});
    QCOMPARE(idsOf(all.last()["run_ids"].toArray()), QList<qint64>{id});
  }
};

QTEST_MAIN(TestCliProtocol)
#include "tst_cli_protocol.moc"
