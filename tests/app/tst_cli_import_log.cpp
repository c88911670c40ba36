// shardscope-cli and the reader registry: import picks the reader by content (a trace named .txt
// imports; a file no reader knows is refused naming it, nothing stored), and info shows each run's
// import_log (text and --json).
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

#include "tests/app/cli_runner.h"
#include "tests/common/test_support.h"

using shardscope::test::runCli;

namespace {

const char* kRank1 = R"({"distributedInfo": {"rank": 1, "world_size": 2}, "traceEvents": [
  {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10, "dur": 5},
  {"ph": "B", "name": "open", "pid": 1, "tid": 1, "ts": 20}]})";

QJsonObject json(const shardscope::test::CliResult& r) { return QJsonDocument::fromJson(r.out.toUtf8()).object(); }

}  // namespace

class TestCliImportLog : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void importByContentAndInfoShowsTheLog() {
    QTemporaryDir dir;
    const QString db = dir.filePath("c.db");
    const QString trace = QString::fromStdString(shardscope::test::writeFile(dir, "rank1.txt", kRank1));
    const auto imp = runCli({"import", "--db", db, "--json", trace});
    QCOMPARE(imp.code, 0);
    QCOMPARE(json(imp).value("format").toString(), QString("kineto"));

    const auto info = runCli({"info", "--db", db, "--json"});
    QCOMPARE(info.code, 0);
    const QJsonObject run = json(info).value("runs").toArray().at(0).toObject();
    const QJsonArray log = run.value("import_log").toArray();
    QCOMPARE(log.size(), 1);
    const QJsonObject f = log.at(0).toObject();
    QCOMPARE(f.value("path").toString(), trace);
    QCOMPARE(f.value("format").toString(), QString("kineto"));
    QCOMPARE(f.value("rank").toInt(), 1);
    QCOMPARE(f.value("events").toInt(), 1);
    QCOMPARE(f.value("skipped").toInt(), 1);
    QCOMPARE(f.value("skipped_by_reason").toObject().value("phase 'B'").toInt(), 1);
    QCOMPARE(f.value("warnings").toArray().size(), 1);

    const auto text = runCli({"info", "--db", db});
    QCOMPARE(text.code, 0);
    QVERIFY2(text.out.contains("imported rank1.txt (kineto, rank 1): 1 events, 1 skipped (phase 'B': 1), 1 warning(s)"),
             qPrintable(text.out));
    QVERIFY2(text.out.contains("warning: rank1.txt: skipping 'B' events"), qPrintable(text.out));
  }

  void unknownFormatIsRefusedByName() {
    QTemporaryDir dir;
    const QString db = dir.filePath("u.db");
    const QString good = QString::fromStdString(shardscope::test::writeFile(dir, "rank1.json", kRank1));
    const QString odd =
        QString::fromStdString(shardscope::test::writeFile(dir, "profile.bin", std::string("\x01\x02garbage", 9)));
    const auto r = runCli({"import", "--db", db, good, odd});
    QCOMPARE(r.code, 1);
    QVERIFY2(r.err.contains(odd) && r.err.contains("not a trace format"), qPrintable(r.err));
    QCOMPARE(r.err.trimmed().count('\n'), 0);
    const auto info = runCli({"info", "--db", db, "--json"});
    QCOMPARE(json(info).value("runs").toArray().size(), 0);
  }
};

QTEST_GUILESS_MAIN(TestCliImportLog)
#include "tst_cli_import_log.moc"
