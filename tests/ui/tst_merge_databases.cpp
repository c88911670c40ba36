// File ▸ Merge Databases… offscreen: the per-node databases of a 2-node job (ranks 0-1 and 2-3,
// node 1's clock 3 ms ahead, on another host) merged on the window's worker thread into a new file,
// which the window then opens with the one merged run of 4 ranks; a node missing is reported in the
// window and leaves no file behind.
#include <QAction>
#include <QFileInfo>
#include <QPlainTextEdit>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>

#include "core/import/kineto_importer.h"
#include "core/model/job.h"
#include "core/storage/run_writer.h"
#include "core/storage/trace_store.h"
#include "tests/common/test_support.h"
#include "ui/main/main_window.h"
#include "ui/main/merge_task.h"

using namespace shardscope;

namespace {

std::string rankTrace(int rank, int world, long clockUs) {
  std::string s = "{\"distributedInfo\": {\"rank\": " + std::to_string(rank) + ", \"world_size\": " + std::to_string(world) +
                  ", \"pg_config\": [{\"pg_name\": \"0\", \"pg_size\": " + std::to_string(world) + "}]}, \"traceEvents\": [";
  for (int k = 0; k < 8; ++k) {
    const long start = clockUs + 1000 * k + 100 + 10 * rank, end = clockUs + 1000 * k + 400;
    if (k) s += ",";
    s += "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"ncclDevKernel_AllReduce_Sum_f32_RING_LL\", \"pid\": 0, \"tid\": 21, "
         "\"ts\": " +
         std::to_string(start) + ", \"dur\": " + std::to_string(end - start) +
         ", \"args\": {\"stream\": 21, \"Collective name\": \"allreduce\", \"Process Group Name\": \"0\", \"Group size\": " +
         std::to_string(world) + "}}";
  }
  return s + "]}";
}

std::string nodeDb(const QTemporaryDir& dir, int node, long clockUs) {
  const std::string db = test::pathIn(dir, "job.db.node" + std::to_string(node));
  core::TraceStore store(db);
  const auto res = core::importKineto(
      store, {test::writeFile(dir, "r" + std::to_string(2 * node) + ".json", rankTrace(2 * node, 4, clockUs)),
              test::writeFile(dir, "r" + std::to_string(2 * node + 1) + ".json", rankTrace(2 * node + 1, 4, clockUs))});
  core::JobPart j;
  j.id = "slurm:5.0/feed";
  j.nnodes = 2;
  j.nodeRank = node;
  j.firstRank = 2 * node;
  j.ranksOnNode = 2;
  j.host = "node" + std::to_string(node);
  core::setRunJob(store, res.runIds.at(0), j);
  return db;
}

}  // namespace

class TestMergeDatabases : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void initTestCase() { QStandardPaths::setTestModeEnabled(true); }

  void mergesAndOpensTheResult() {
    QTemporaryDir dir;
    const QString a = QString::fromStdString(nodeDb(dir, 0, 0)), b = QString::fromStdString(nodeDb(dir, 1, 3000));
    const QString out = dir.filePath("merged.db");
    ui::MainWindow w;
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QVERIFY(w.action("actionMerge"));
    QSignalSpy done(&w, &ui::MainWindow::mergeFinished);
    QSignalSpy loaded(&w, &ui::MainWindow::runsLoaded);
    QVERIFY(w.mergeDatabases({a, b}, out));
    QVERIFY(done.wait(30000));
    QVERIFY2(done.at(0).at(0).toBool(), qPrintable(done.at(0).at(1).toString()));
    QVERIFY(done.at(0).at(1).toString().contains("2 of 2 node(s), 4 ranks"));
    QCOMPARE(QFileInfo(w.databasePath()).absoluteFilePath(), QFileInfo(out).absoluteFilePath());
    QVERIFY(QTest::qWaitFor([&] { return w.runModel()->runCount() == 1; }, 10000));
    core::TraceStore store(out.toStdString(), core::Database::Mode::ReadOnly);
    const auto runs = store.runs();
    QCOMPARE(runs.size(), std::size_t{1});
    QCOMPARE(store.ranks(runs[0].id).size(), std::size_t{4});
    QVERIFY(runs[0].metadataJson.find("\"clock_offset_ns\":3000000") != std::string::npos);
    QVERIFY(w.logView()->toPlainText().contains("→ run 1"));
    QVERIFY(!w.mergeRunning());
  }

  void missingNodeIsReported() {
    QTemporaryDir dir;
    const QString a = QString::fromStdString(nodeDb(dir, 0, 0));
    const QString out = dir.filePath("half.db");
    ui::MainWindow w;
    QSignalSpy done(&w, &ui::MainWindow::mergeFinished);
    QVERIFY(w.mergeDatabases({a}, out));
    QVERIFY(done.wait(30000));
    QVERIFY(!done.at(0).at(0).toBool());
    QVERIFY2(done.at(0).at(1).toString().contains("node(s) 1 of 2 are missing"), qPrintable(done.at(0).at(1).toString()));
    QVERIFY(w.errors().join("\n").contains("Merge Databases"));
    QVERIFY(!QFileInfo::exists(out));
  }
};

QTEST_MAIN(TestMergeDatabases)
#include "tst_merge_databases.moc"
