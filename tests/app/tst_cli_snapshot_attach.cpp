// shardscope-cli import --attach-to RUN --rank R SNAPSHOT: a memory snapshot becomes the memory of a rank
// of an existing run (a generated 2-rank Kineto run imported first), and `analyze` reads its figures
// there; a wrong run, a malformed rank, a rank that already has a snapshot, --rank without --attach-to
// and a Kineto trace with --attach-to are refused with a message naming the problem, a non-zero exit and
// nothing stored.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

#include "tests/app/cli_runner.h"
#include "tests/common/test_support.h"
#include "tests/tools/kineto_generator.h"
#include "tests/tools/snapshot_pickle.h"

using shardscope::test::runCli;

namespace {

QJsonObject json(const shardscope::test::CliResult& r) { return QJsonDocument::fromJson(r.out.toUtf8()).object(); }

// Prior block of 512 bytes (alive at the dump, never in the trace), then 4096 and 300 allocated, 4096
// freed, 100 allocated: the peak is 512 + 4096 + 300 = 4908; segments of 8192 bytes.
shardscope::test::GenSnapshot snapshot() {
  shardscope::test::GenSnapshot s;
  s.stacks = {{{"forward", "/home/me/model.py", 42}}};
  s.segments = {{0, 0x7f0000000000, 8192, {{512, 512, "active_allocated", -1}, {7680, 7680, "inactive", -1}}}};
  s.traces = {{{"alloc", 0xA000, 4096, 1000, 0},
               {"alloc", 0xB000, 300, 1100, 0},
               {"free_requested", 0xA000, 4096, 1200, 0},
               {"free_completed", 0xA000, 4096, 1201, 0},
               {"alloc", 0xC000, 100, 1300, 0}}};
  return s;
}

int runCount(const QString& db) { return json(runCli({"info", "--db", db, "--json"})).value("runs").toArray().size(); }

}  // namespace

class TestCliSnapshotAttach : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void attachToARankOfAnImportedRun() {
    QTemporaryDir dir;
    const QString db = dir.filePath("a.db");
    QStringList traces;
    for (int rank = 0; rank < 2; ++rank) {
      shardscope::test::KinetoGenOptions opt;
      opt.events = 3000;
      opt.rank = rank;
      opt.worldSize = 2;
      opt.steps = 3;
      const QString path = dir.filePath(QString("rank%1.json").arg(rank));
      shardscope::test::generateKinetoTrace(path.toStdString(), opt);
      traces << path;
    }
    const auto imp = runCli(QStringList{"import", "--db", db, "--json"} + traces);
    QCOMPARE(imp.code, 0);
    const QJsonArray runs = json(imp).value("runs").toArray();
    QCOMPARE(runs.size(), 1);
    const QString run = QString::number(runs.at(0).toInt());
    const QString snap =
        QString::fromStdString(shardscope::test::writeGzip(dir, "rank1.pickle.gz", shardscope::test::snapshotPickle(snapshot())));

    const auto attach = runCli({"import", "--db", db, "--attach-to", run, "--rank", "1", "--json", snap});
    QVERIFY2(attach.code == 0, qPrintable(attach.err));
    QCOMPARE(json(attach).value("format").toString(), QString("memsnap"));
    QCOMPARE(json(attach).value("runs").toArray().at(0).toInt(), runs.at(0).toInt());
    QCOMPARE(runCount(db), 1);  // no run of its own

    // The run's analysis: rank 1's memory is the snapshot's, by memory_viz's definition.
    const auto an = runCli({"analyze", "--db", db, "--run", run, "--json"});
    QVERIFY2(an.code == 0, qPrintable(an.err));
    const QJsonObject r = json(an).value("runs").toArray().at(0).toObject();
    const QJsonArray snaps = r.value("memory_snapshots").toArray();
    QCOMPARE(snaps.size(), 1);
    QCOMPARE(snaps.at(0).toObject().value("rank").toInt(), 1);
    QCOMPARE(snaps.at(0).toObject().value("peak_active_bytes").toDouble(), 4908.0);
    QCOMPARE(snaps.at(0).toObject().value("peak_reserved_bytes").toDouble(), 8192.0);
    QCOMPARE(snaps.at(0).toObject().value("prior_active_bytes").toDouble(), 512.0);
    bool fromSnapshot = false;
    for (const auto& p : r.value("memory_peaks").toArray()) {
      const QJsonObject o = p.toObject();
      if (o.value("from_memory_snapshot").toBool()) {
        QCOMPARE(o.value("rank").toInt(), 1);
        QCOMPARE(o.value("peak_allocated_bytes").toDouble(), 4908.0);
        fromSnapshot = true;
      }
    }
    QVERIFY(fromSnapshot);

    // Refused, each with its reason, nothing stored: a run that does not exist,
    const auto noRun = runCli({"import", "--db", db, "--attach-to", "999", "--rank", "0", snap});
    QVERIFY(noRun.code != 0);
    QVERIFY2(noRun.err.contains("no run with id 999"), qPrintable(noRun.err));
    // a run id or rank that is not a number,
    const auto badRun = runCli({"import", "--db", db, "--attach-to", "first", snap});
    QVERIFY(badRun.code != 0);
    QVERIFY2(badRun.err.contains("--attach-to expects a run id"), qPrintable(badRun.err));
    for (const QString rank : {"-1", "one", ""}) {
      const auto badRank = runCli({"import", "--db", db, "--attach-to", run, "--rank", rank, snap});
      QVERIFY(badRank.code != 0);
      QVERIFY2(badRank.err.contains("--rank expects a rank number"), qPrintable(badRank.err));
    }
    // a rank outside the run's world,
    const auto outside = runCli({"import", "--db", db, "--attach-to", run, "--rank", "7", snap});
    QVERIFY(outside.code != 0);
    QVERIFY2(outside.err.contains("has ranks 0..1; --rank 7 is not one of them"), qPrintable(outside.err));
    // a rank that already has a snapshot,
    const auto again = runCli({"import", "--db", db, "--attach-to", run, "--rank", "1", snap});
    QVERIFY(again.code != 0);
    QVERIFY2(again.err.contains("this rank already has a memory snapshot"), qPrintable(again.err));
    // --rank without --attach-to, and a Kineto trace attached.
    const auto rankAlone = runCli({"import", "--db", db, "--rank", "1", snap});
    QVERIFY(rankAlone.code != 0);
    QVERIFY2(rankAlone.err.contains("give it with --attach-to RUN"), qPrintable(rankAlone.err));
    const auto kineto = runCli({"import", "--db", db, "--attach-to", run, traces.at(0)});
    QVERIFY(kineto.code != 0);
    QVERIFY2(kineto.err.contains("only a memory snapshot attaches to a run"), qPrintable(kineto.err));

    QCOMPARE(runCount(db), 1);
    const auto after = runCli({"analyze", "--db", db, "--run", run, "--json"});
    QCOMPARE(json(after).value("runs").toArray().at(0).toObject().value("memory_snapshots").toArray().size(), 1);

    // Rank 0 still takes one.
    const auto rank0 = runCli({"import", "--db", db, "--attach-to", run, snap});
    QVERIFY2(rank0.code == 0, qPrintable(rank0.err));
    const auto both = runCli({"analyze", "--db", db, "--run", run, "--json"});
    const QJsonArray two = json(both).value("runs").toArray().at(0).toObject().value("memory_snapshots").toArray();
    QCOMPARE(two.size(), 2);
    QCOMPARE(two.at(0).toObject().value("rank").toInt(), 0);
    QCOMPARE(two.at(1).toObject().value("rank").toInt(), 1);
  }
};

QTEST_MAIN(TestCliSnapshotAttach)
#include "tst_cli_snapshot_attach.moc"
