// `export --format db`: runs copied into a new database that reads back as the same runs (ids,
// ranks, events, metrics, the same analysis), and nothing is written when the export cannot be done.
#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

#include "core/storage/trace_store.h"
#include "tests/app/cli_runner.h"
#include "tests/common/test_support.h"
#include "tests/tools/kineto_generator.h"

using namespace shardscope;
using test::runCli;

class TestCliExportDb : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;
  QString db_;

  void importJob(const QString& name, std::uint64_t seed) {
    const QString job = dir_.filePath(name);
    QDir().mkpath(job);
    for (int r = 0; r < 2; ++r) {
      test::KinetoGenOptions o;
      o.events = 3000;
      o.worldSize = 2;
      o.rank = r;
      o.steps = 3;
      o.seed = seed + static_cast<std::uint64_t>(r);
      test::generateKinetoTrace((job + QString("/rank%1.json").arg(r)).toStdString(), o);
    }
    const auto imp = runCli({"import", "--db", db_, "--name", name, job});
    QVERIFY2(imp.code == 0, qPrintable(imp.err));
  }

 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    db_ = dir_.filePath("all.db");
    importJob("a", 3);
    importJob("b", 11);
    importJob("c", 21);
  }

  void copiesTheRunsAsTheyAre() {
    const QString part = dir_.filePath("part.db");
    const auto r = runCli({"export", "--db", db_, "--format", "db", "--runs", "1,3", "-o", part, "--json"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    const QJsonObject j = QJsonDocument::fromJson(r.out.toUtf8()).object();
    QCOMPARE(j["runs"].toArray().size(), 2);
    QVERIFY(j["rows"].toInt() > 0);
    core::TraceStore src(db_.toStdString(), core::Database::Mode::ReadOnly);
    core::TraceStore out(part.toStdString(), core::Database::Mode::ReadOnly);
    const auto runs = out.runs();
    QCOMPARE(static_cast<int>(runs.size()), 2);
    QCOMPARE(runs[0].id.value(), 1);
    QCOMPARE(runs[1].id.value(), 3);
    QCOMPARE(runs[1].name, std::string("c"));
    for (const auto& run : runs) {
      const auto a = src.ranks(run.id), b = out.ranks(run.id);
      QCOMPARE(a.size(), b.size());
      // Every track with the same events (the interned strings came along: names decode alike).
      std::size_t events = 0;
      const auto ta = src.tracks(run.id), tb = out.tracks(run.id);
      QCOMPARE(ta.size(), tb.size());
      for (std::size_t i = 0; i < ta.size(); ++i) {
        std::vector<std::string> na, nb;
        src.forEachEvent(ta[i].id, [&](const core::Event& e) { na.emplace_back(e.name); });
        out.forEachEvent(tb[i].id, [&](const core::Event& e) { nb.emplace_back(e.name); });
        QCOMPARE(na, nb);
        events += na.size();
      }
      QVERIFY(events > 1000);
    }
    // The same analysis from either file.
    const auto fromAll = runCli({"analyze", "--db", db_, "--run", "3", "--json"});
    const auto fromPart = runCli({"analyze", "--db", part, "--run", "3", "--json"});
    QCOMPARE(fromPart.code, 0);
    QCOMPARE(fromPart.out, fromAll.out);
    QCOMPARE(runCli({"info", "--db", part}).code, 0);
  }

  void refusesWithoutWriting() {
    // An existing file is never overwritten.
    const QString existing = dir_.filePath("exists.db");
    {
      QFile f(existing);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write("keep me");
    }
    auto r = runCli({"export", "--db", db_, "--format", "db", "--runs", "2", "-o", existing});
    QCOMPARE(r.code, 1);
    QVERIFY2(r.err.contains("exists"), qPrintable(r.err));
    QFile f(existing);
    QVERIFY(f.open(QIODevice::ReadOnly));
    QCOMPARE(f.readAll(), QByteArray("keep me"));
    // An unknown run: an error naming it, no file left.
    const QString none = dir_.filePath("none.db");
    r = runCli({"export", "--db", db_, "--format", "db", "--runs", "2,99", "-o", none});
    QCOMPARE(r.code, 1);
    QVERIFY2(r.err.contains("no run with id 99"), qPrintable(r.err));
    QVERIFY(!QFile::exists(none));
    // A bad list is a usage error.
    QCOMPARE(runCli({"export", "--db", db_, "--format", "db", "--runs", "2,x", "-o", none}).code, 2);
  }
};

QTEST_GUILESS_MAIN(TestCliExportDb)
#include "tst_cli_export_db.moc"
