// The main window, offscreen: opens a real database, lists its runs, reports a bad file in the window.
#include <QTemporaryDir>
#include <QTreeWidget>
#include <QtTest>

#include "core/storage/trace_store.h"
#include "tests/common/test_support.h"
#include "ui/main/main_window.h"

using namespace shardscope;

class TestMainWindow : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void listsRunsOfTheDatabase() {
    QTemporaryDir dir;
    const std::string path = test::pathIn(dir, "runs.db");
    {
      core::TraceStore store(path);
      core::Run r;
      r.name = "ddp baseline";
      r.strategy = "ddp";
      r.source = core::RunSource::Runtime;
      r.status = core::RunStatus::Completed;
      r.worldSize = 4;
      store.createRun(r);
      r.name = "fsdp full shard";
      r.strategy = "fsdp";
      store.createRun(r);
    }
    ui::MainWindow w;
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QVERIFY(w.openDatabase(QString::fromStdString(path)));
    QCOMPARE(w.runList()->topLevelItemCount(), 2);
    QStringList names;
    for (int i = 0; i < 2; ++i) names << w.runList()->topLevelItem(i)->text(0);
    QVERIFY(names.join(",").contains("ddp baseline"));
    QVERIFY(names.join(",").contains("fsdp full shard"));
    QCOMPARE(w.runList()->topLevelItem(0)->text(4), QString("4"));
  }

  void badFileIsReportedNotFatal() {
    QTemporaryDir dir;
    const std::string path = test::writeFile(dir, "garbage.db", std::string(4096, 'x'));
    ui::MainWindow w;  // not shown: no modal box in the test
    QVERIFY(!w.openDatabase(QString::fromStdString(path)));
    QVERIFY(w.lastError().contains("not a SQLite database"));
    QVERIFY(w.databasePath().isEmpty());
  }
};

QTEST_MAIN(TestMainWindow)
#include "tst_main_window.moc"
