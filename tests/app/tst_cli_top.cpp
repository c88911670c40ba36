// `shardscope-cli top` end to end: the real executable on a real database (generated Kineto traces of
// a two-rank job, imported by the CLI): --json equals core::computeTopOps, --limit sums the rest
// into "other" so the shares add up to 1, the text shows both tables, CSV has one row per name, and
// the usage and input errors have their exit codes.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

#include "core/analysis/top_ops.h"
#include "core/storage/trace_store.h"
#include "tests/app/cli_runner.h"
#include "tests/common/test_support.h"
#include "tests/tools/kineto_generator.h"

using namespace shardscope;
using test::CliResult;
using test::runCli;

namespace {

double shareSum(const QJsonArray& rows) {
  double s = 0;
  for (const auto& r : rows) s += r.toObject()["share"].toDouble();
  return s;
}

}  // namespace

class TestCliTop : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    db_ = dir_.filePath("top.db");
    const QString job = dir_.filePath("job");
    QDir().mkpath(job);
    for (int r = 0; r < 2; ++r) {
      test::KinetoGenOptions o;
      o.events = 6000;
      o.worldSize = 2;
      o.rank = r;
      o.steps = 3;
      o.seed = static_cast<std::uint64_t>(7 + r);
      test::generateKinetoTrace((job + QString("/rank%1.json").arg(r)).toStdString(), o);
    }
    const CliResult imp = runCli({"import", "--db", db_, "--name", "job", job});
    QVERIFY2(imp.code == 0, qPrintable(imp.err));
  }

  void help() {
    QVERIFY(runCli({"--help"}).out.contains("top "));
    const CliResult r = runCli({"top", "--help"});
    QCOMPARE(r.code, 0);
    QVERIFY(r.out.contains("Usage: shardscope-cli top"));
    for (const char* o : {"--run", "--limit", "--csv", "--json", "--db"}) QVERIFY2(r.out.contains(o), o);
  }

  // --json is core's computation, field by field.
  void jsonEqualsCore() {
    const CliResult r = runCli({"top", "--db", db_, "--run", "1", "--json"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    const QJsonObject j = QJsonDocument::fromJson(r.out.toUtf8()).object();
    core::TraceStore store(db_.toStdString(), core::Database::Mode::ReadOnly);
    const core::TopOps t = core::computeTopOps(store, core::RunId{1});
    QCOMPARE(j["run"].toInt(), 1);
    QCOMPARE(j["ranks"].toArray(), (QJsonArray{0, 1}));
    QCOMPARE(j["device_lanes"].toString(), QString("GPU streams"));
    QCOMPARE(j["limit"].toInt(), 50);
    QCOMPARE(j["device_time_ns"].toInteger(), t.kernels.timeNs);
    QCOMPARE(j["cpu_op_self_ns"].toInteger(), t.operators.timeNs);
    QCOMPARE(j["kernel_names"].toInteger(), t.kernels.distinctNames);
    QVERIFY(t.kernels.timeNs > 0 && t.operators.timeNs > 0);
    for (const auto& [key, table] : {std::pair{"kernels", &t.kernels}, std::pair{"operators", &t.operators}}) {
      const QJsonArray rows = j[key].toArray();
      QCOMPARE(rows.size(), static_cast<qsizetype>(table->rows.size()));
      for (qsizetype i = 0; i < rows.size(); ++i) {
        const QJsonObject o = rows[i].toObject();
        const core::TopOpRow& e = table->rows[static_cast<std::size_t>(i)];
        QCOMPARE(o["name"].toString(), QString::fromStdString(e.name));
        QCOMPARE(o["count"].toInteger(), e.count);
        QCOMPARE(o["time_ns"].toInteger(), e.timeNs);
        QCOMPARE(o["total_ns"].toInteger(), e.totalNs);
        QCOMPARE(o["max_ns"].toInteger(), e.maxNs);
        QCOMPARE(o["share"].toDouble(), e.share);
        const QJsonArray pr = o["per_rank_ns"].toArray();
        QCOMPARE(pr.size(), 2);
        QCOMPARE(pr[0].toInteger() + pr[1].toInteger(), e.timeNs);
      }
      QVERIFY(qAbs(shareSum(rows) - 1.0) < 1e-9);
    }
    // Operators carry their self time and inclusive time.
    const QJsonObject op = j["operators"].toArray()[0].toObject();
    QCOMPARE(op["self_ns"].toInteger(), op["time_ns"].toInteger());
    QVERIFY(op["total_ns"].toInteger() >= op["self_ns"].toInteger());
  }

  // --limit N: N rows and "other", shares still add up to 1; the latest run by default.
  void limitAndOther() {
    const CliResult r = runCli({"top", "--db", db_, "--limit", "2", "--json"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    const QJsonObject j = QJsonDocument::fromJson(r.out.toUtf8()).object();
    QCOMPARE(j["run"].toInt(), 1);
    const QJsonArray k = j["kernels"].toArray();
    QCOMPARE(k.size(), 3);
    QVERIFY(!k[0].toObject()["other"].toBool());
    QVERIFY(k[2].toObject()["other"].toBool());
    QCOMPARE(k[2].toObject()["names"].toInteger(), j["kernel_names"].toInteger() - 2);
    qint64 count = 0, time = 0;
    for (const auto& row : k) {
      count += row.toObject()["count"].toInteger();
      time += row.toObject()["time_ns"].toInteger();
    }
    QCOMPARE(count, j["kernel_count"].toInteger());
    QCOMPARE(time, j["device_time_ns"].toInteger());
    QVERIFY(qAbs(shareSum(k) - 1.0) < 1e-9);
    QVERIFY(qAbs(shareSum(j["operators"].toArray()) - 1.0) < 1e-9);
  }

  // Text: two tables with per-rank columns; CSV: a header and one line per row of both tables.
  void textAndCsv() {
    const CliResult r = runCli({"top", "--db", db_, "--run", "1", "--limit", "5"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY(r.out.contains("Top kernels:"));
    QVERIFY(r.out.contains("Top operators (cpu_op, by self time):"));
    QVERIFY(r.out.contains("rank 0 ms") && r.out.contains("rank 1 ms"));
    QVERIFY(r.out.contains("other ("));
    QVERIFY(r.out.contains("share %"));

    const CliResult c = runCli({"top", "--db", db_, "--run", "1", "--limit", "5", "--csv"});
    QVERIFY2(c.code == 0, qPrintable(c.err));
    const QStringList lines = c.out.split("\r\n", Qt::SkipEmptyParts);
    QVERIFY(lines[0].startsWith("table,position,name,other,names,category,count,time_ns"));
    QVERIFY(lines[0].endsWith("rank_0_ns,rank_1_ns"));
    const CliResult js = runCli({"top", "--db", db_, "--run", "1", "--limit", "5", "--json"});
    const QJsonObject j = QJsonDocument::fromJson(js.out.toUtf8()).object();
    QCOMPARE(lines.size() - 1, j["kernels"].toArray().size() + j["operators"].toArray().size());
    QVERIFY(lines[1].startsWith("kernel,1,"));
    QVERIFY(lines.last().startsWith("operator,"));
  }

  void errors() {
    QCOMPARE(runCli({"top", "--db", db_, "--limit", "many"}).code, 2);
    QCOMPARE(runCli({"top", "--db", db_, "--json", "--csv"}).code, 2);
    QCOMPARE(runCli({"top", "--db", db_, "--bogus"}).code, 2);
    const CliResult noRun = runCli({"top", "--db", db_, "--run", "42"});
    QCOMPARE(noRun.code, 1);
    QVERIFY(noRun.err.contains("no run with id 42"));
    QCOMPARE(runCli({"top", "--db", dir_.filePath("missing.db")}).code, 3);
  }

 private:
  QTemporaryDir dir_;
  QString db_;
};

QTEST_GUILESS_MAIN(TestCliTop)
#include "tst_cli_top.moc"
