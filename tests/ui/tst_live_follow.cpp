// The app follows its database live while other processes write into it: the real main window
// (offscreen) open on a file while a real `shardscope-cli compare` (worker ranks, where LibTorch was
// found) and a real `shardscope-cli import` run in child processes. Any error the window reports
// fails the test; every run must show, with its final status, within ~2 s of its process ending,
// and the user's selection must stay. A file that cannot be read is reported once, not at every
// poll, as what the check found (gone), and reopened when it is back.
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QLabel>
#include <QPlainTextEdit>
#include <QProcess>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>

#include <chrono>
#include <memory>

#include "core/storage/store_access.h"
#include "core/storage/trace_store.h"
#include "tests/app/cli_runner.h"
#include "tests/common/test_support.h"
#include "tests/tools/kineto_generator.h"
#include "ui/main/main_window.h"
#include "ui/models/run_list_model.h"

using namespace shardscope;
using core::Id;
using test::startCli;
using test::workerBuilt;

namespace {

// Runs (name or strategy, status) as the window's model shows them.
int shownCompleted(const ui::RunListModel& m, const std::function<bool(const core::Run&)>& match) {
  int n = 0;
  for (auto id : m.runIds()) {
    const auto* r = m.runRow(id);
    if (r && match(r->run) && r->run.status == core::RunStatus::Completed) ++n;
  }
  return n;
}

}  // namespace

class TestLiveFollow : public QObject {
  Q_OBJECT

  QTemporaryDir traces_;
  QStringList job_;

 private Q_SLOTS:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    for (int r = 0; r < 2; ++r) {
      test::KinetoGenOptions o;
      o.events = 40000;
      o.rank = r;
      o.worldSize = 2;
      const std::string f = test::pathIn(traces_, "rank" + std::to_string(r) + ".json.gz");
      test::generateKinetoTrace(f, o);
      job_ << QString::fromStdString(f);
    }
  }

  void followsRunsAndImportsOfOtherProcesses() {
    QTemporaryDir dir;
    const QString db = dir.filePath("live.db");
    {
      auto first = startCli(QStringList{"import", "--db", db, "--name", "baseline"} + job_);
      QVERIFY(first->waitForFinished(60000));
      QCOMPARE(first->exitCode(), 0);
    }
    ui::MainWindow w;
    w.show();
    QSignalSpy errors(&w, &ui::MainWindow::errorReported);
    QSignalSpy loaded(&w, &ui::MainWindow::runsLoaded);
    QVERIFY(w.openDatabase(db));
    QVERIFY(loaded.wait(10000));
    w.selectRuns({core::RunId{1}});
    w.applySelectionNow();

    const bool withRuns = workerBuilt();
    std::unique_ptr<QProcess> compare;
    if (withRuns)
      // 300 steps of `tiny` (~2 s a run): long enough that the window's 1 s poll sees each run running;
      // with 4 steps a run lasted ~0.4 s and a poll could miss both (a flaky "never showed as running").
      compare = startCli({"compare", "--db", db, "--strategies", "ddp,zero3", "--world-size", "2", "--model", "tiny", "--steps",
                          "300", "--seq-len", "16", "--micro-batch", "2"});
    QTest::qWait(500);  // the import lands while the compare writes
    auto import = startCli(QStringList{"import", "--db", db, "--name", "from a shell"} + job_);

    auto isImport = [](const core::Run& r) { return r.name == "from a shell"; };
    auto isCompare = [](const core::Run& r) { return r.source == core::RunSource::Runtime; };
    bool sawRunning = false;
    std::optional<std::chrono::steady_clock::time_point> importDone, compareDone;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(5);
    while (std::chrono::steady_clock::now() < deadline) {
      QTest::qWait(50);
      QVERIFY2(errors.isEmpty(), qPrintable(errors.isEmpty() ? QString() : errors.first().first().toString()));
      for (auto id : w.runModel()->runIds())
        if (const auto* r = w.runModel()->runRow(id); r && r->run.status == core::RunStatus::Running) sawRunning = true;
      const auto now = std::chrono::steady_clock::now();
      if (!importDone && import->state() == QProcess::NotRunning) {
        QVERIFY2(import->exitCode() == 0, import->readAllStandardError().constData());
        importDone = now;
      }
      if (compare && !compareDone && compare->state() == QProcess::NotRunning) {
        QVERIFY2(compare->exitCode() == 0, compare->readAllStandardError().constData());
        compareDone = now;
      }
      // Within ~2 s of a writer's end, the window shows what it wrote (1 s poll + the reload).
      if (importDone && shownCompleted(*w.runModel(), isImport) != 1)
        QVERIFY2(now - *importDone < std::chrono::milliseconds(2500), "the import's run did not show within 2.5 s");
      if (compareDone && shownCompleted(*w.runModel(), isCompare) != 2)
        QVERIFY2(now - *compareDone < std::chrono::milliseconds(2500), "the compare's runs did not show within 2.5 s");
      const bool importShown = importDone && shownCompleted(*w.runModel(), isImport) == 1;
      const bool compareShown = !compare || (compareDone && shownCompleted(*w.runModel(), isCompare) == 2);
      if (importShown && compareShown) break;
    }
    QVERIFY2(importDone, "the import did not finish");
    QVERIFY2(!compare || compareDone, "the compare did not finish");
    QCOMPARE(w.runModel()->runCount(), withRuns ? 4 : 2);
    QCOMPARE(w.selectedRuns(), QList<core::RunId>{core::RunId{1}});  // the user's selection stays
    QVERIFY2(!withRuns || sawRunning, "a running run never showed as running");
    QVERIFY2(errors.isEmpty(), qPrintable(w.lastError()));
    QVERIFY(w.lastError().isEmpty());
    QVERIFY(QTest::qWaitFor([&] { return !w.busy(); }, 20000));
    QVERIFY(errors.isEmpty());
    // And the file is whole.
    core::TraceStore s(db.toStdString(), core::Database::Mode::ReadOnly);
    core::Statement ic(shardscope::core::storeDb(s), "PRAGMA integrity_check");
    QVERIFY(ic.step());
    QCOMPARE(QString::fromStdString(ic.text(0)), QString("ok"));
    if (!withRuns) QSKIP("shardscope-worker is not built (no LibTorch): followed the import only");
  }

  void anUnreadableFileIsReportedOnce() {
    QTemporaryDir dir;
    const QString db = dir.filePath("gone.db");
    {
      auto first = startCli(QStringList{"import", "--db", db, "--name", "one"} + job_);
      QVERIFY(first->waitForFinished(60000));
      QCOMPARE(first->exitCode(), 0);
    }
    ui::MainWindow w;
    w.setPollInterval(100);
    w.show();
    QSignalSpy loaded(&w, &ui::MainWindow::runsLoaded);
    QVERIFY(w.openDatabase(db));
    QVERIFY(loaded.wait(10000));
    // No run selected: only the run list reads the file (the pages would report their own errors).
    w.selectRuns({});
    w.applySelectionNow();
    QVERIFY(QTest::qWaitFor([&] { return !w.busy(); }, 20000));
    QSignalSpy errors(&w, &ui::MainWindow::errorReported);
    // The file goes away under the app (a network mount drops, someone moves it): the next reload
    // fails, and so does every poll after it, with one message.
    QVERIFY(QFile::rename(db, db + ".moved"));
    w.refresh();
    QTRY_COMPARE_WITH_TIMEOUT(errors.count(), 1, 10000);
    QTest::qWait(1500);  // ~15 polls, each failing to read
    QCOMPARE(errors.count(), 1);
    QVERIFY(w.lastError().contains("gone.db"));
    // The window checked the file and says what it is (not "malformed").
    QVERIFY2(w.lastError().contains("no such file"), qPrintable(w.lastError()));
    // Back: the window reopens it by itself, and says so.
    QVERIFY(QFile::rename(db + ".moved", db));
    QTRY_VERIFY_WITH_TIMEOUT(w.logView()->toPlainText().contains("reads again"), 10000);
    QTRY_COMPARE_WITH_TIMEOUT(w.runModel()->runCount(), 1, 10000);
    QCOMPARE(errors.count(), 1);
  }
};

QTEST_MAIN(TestLiveFollow)
#include "tst_live_follow.moc"
