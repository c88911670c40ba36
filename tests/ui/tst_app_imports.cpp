// The app's own imports on a database it holds open (issue 45): the real main window (offscreen),
// the real Import file dialog listing the database's folder (Qt sniffs the type of every file it
// lists, x.db, x.db-wal and x.db-shm among them), then two imports through the real
// `shardscope-cli` child process, one after the other, and a third from outside. No error may be
// reported, the run list must equal `info --json`, and the -shm must still be there while the app
// holds the file (before the open guard, the dialog's sniffing dropped the app's POSIX locks, the
// second import's process behaved as the last connection and deleted the -shm, and the app called
// the healthy file "malformed" until restarted).
//
// And when a read fails all the same (here: a descriptor of the file closed behind SQLite's back
// with a raw system call, which no guard can stop), the window checks the file, reopens it with
// the same selection and never calls it malformed while PRAGMA quick_check passes.
#include <sys/syscall.h>
#include <unistd.h>

#include <fcntl.h>

#include <QFileDialog>
#include <QFileInfo>
#include <QFileSystemModel>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QListView>
#include <QPlainTextEdit>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>

#include "core/storage/open_guard.h"
#include "tests/app/cli_runner.h"
#include "tests/common/test_support.h"
#include "tests/tools/kineto_generator.h"
#include "ui/main/main_window.h"
#include "ui/pages/page.h"
#include "ui/session/run_session.h"
#include "ui/models/run_list_model.h"

using namespace shardscope;

namespace {

// The run ids `info --json` lists.
QList<qint64> cliRunIds(const QString& db) {
  const auto r = test::runCli({"info", "--db", db, "--json"});
  if (r.code != 0) return {-1};
  QList<qint64> ids;
  const QJsonDocument doc = QJsonDocument::fromJson(r.out.toUtf8());
  const QJsonArray runs = doc.isArray() ? doc.array() : doc.object().value("runs").toArray();
  for (const auto& v : runs) ids << v.toObject().value("id").toInteger();
  std::sort(ids.begin(), ids.end());
  return ids;
}

QList<qint64> shownRunIds(const ui::MainWindow& w) {
  QList<qint64> ids;
  for (auto id : w.runModel()->runIds()) ids << qint64(id.value());
  std::sort(ids.begin(), ids.end());
  return ids;
}

// Closes a descriptor of `path` opened with the raw system call: what a library that bypasses the
// C library would do. The process loses every POSIX lock it held on the file.
void closeBehindSqlitesBack(const QString& path) {
  const long fd = syscall(SYS_openat, AT_FDCWD, path.toLocal8Bit().constData(), O_RDONLY | O_CLOEXEC);
  QVERIFY(fd >= 0);
  syscall(SYS_close, fd);
}

}  // namespace

class TestAppImports : public QObject {
  Q_OBJECT

  QTemporaryDir traces_;
  QStringList gpu_, job_;

  bool waitIdle(ui::MainWindow& w) {
    return QTest::qWaitFor([&] { return !w.busy(); }, 30000);
  }

  bool importFromTheApp(ui::MainWindow& w, const QStringList& files) {
    QSignalSpy finished(&w, &ui::MainWindow::importFinished);
    if (!w.importTraces(files)) return false;
    if (!finished.wait(120000)) return false;
    return finished.at(0).at(0).toBool();
  }

 private Q_SLOTS:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    qputenv("SHARDSCOPE_CLI", SHARDSCOPE_CLI);
    // Qt's file dialog sniffs the files it lists: refusing those opens is what the guard is for,
    // so this test runs it in its release mode (the other suites abort on any refused open).
    core::setOpenGuardMode(core::OpenGuardMode::Refuse);
    test::KinetoGenOptions o;
    o.events = 6000;
    o.rank = 0;
    o.worldSize = 1;
    gpu_ << QString::fromStdString(test::pathIn(traces_, "gpu.pt.trace.json.gz"));
    test::generateKinetoTrace(gpu_.first().toStdString(), o);
    for (int r = 0; r < 8; ++r) {
      o.events = 3000;
      o.rank = r;
      o.worldSize = 8;
      const std::string f = test::pathIn(traces_, "rank" + std::to_string(r) + ".json.gz");
      test::generateKinetoTrace(f, o);
      job_ << QString::fromStdString(f);
    }
  }

  void importsFromTheAppKeepTheDatabaseReadable() {
    QTemporaryDir dir;
    const QString db = dir.filePath("x.db");
    QCOMPARE(test::runCli(QStringList{"import", "--db", db, "--name", "first"} + gpu_).code, 0);

    ui::MainWindow w;
    w.show();
    QSignalSpy errors(&w, &ui::MainWindow::errorReported);
    QSignalSpy loaded(&w, &ui::MainWindow::runsLoaded);
    QVERIFY(w.openDatabase(db));
    QVERIFY(loaded.wait(10000));
    QVERIFY(w.showPage("timeline"));
    QVERIFY(waitIdle(w));
    const QString shm = db + "-shm";
    QVERIFY(QFileInfo::exists(shm));

    // The Import dialog, Qt's own widgets, listing the database's folder until it has looked at
    // every file there.
    const qint64 refusedBefore = core::refusedOpens();
    {
      QFileDialog dialog(&w, "Import", dir.path(), "All files (*)");
      dialog.setOption(QFileDialog::DontUseNativeDialog);
      dialog.setFileMode(QFileDialog::ExistingFiles);
      dialog.show();
      auto* model = dialog.findChild<QFileSystemModel*>();
      QVERIFY(model);
      QTRY_VERIFY_WITH_TIMEOUT(model->index(db).isValid() && model->index(shm).isValid(), 10000);
      // Its type column is what made Qt read the files' content.
      for (const QString& f : {db, db + "-wal", shm}) {
        const QModelIndex i = model->index(f);
        if (i.isValid()) (void)model->data(i.siblingAtColumn(2), Qt::DisplayRole);
        (void)model->fileInfo(model->index(f));
      }
      QTest::qWait(500);
      dialog.reject();
    }
    qInfo("opens the guard refused while the dialog listed the folder: %lld (last: %s)",
          static_cast<long long>(core::refusedOpens() - refusedBefore), core::lastRefusedOpen().c_str());

    // Two imports from the app, the second an 8-rank job, then the same job again from outside.
    QVERIFY(importFromTheApp(w, gpu_));
    QVERIFY(QFileInfo::exists(shm));
    QVERIFY(importFromTheApp(w, job_));
    QVERIFY2(QFileInfo::exists(shm), "the -shm is gone while the app holds the database");
    QCOMPARE(test::runCli(QStringList{"import", "--db", db, "--name", "outside"} + job_).code, 0);
    QVERIFY(QFileInfo::exists(shm));

    // Every page the user has reads; the run list is the CLI's.
    QTRY_COMPARE_WITH_TIMEOUT(shownRunIds(w), cliRunIds(db), 10000);
    QCOMPARE(shownRunIds(w).size(), 4);
    for (const char* page : {"overview", "timeline", "communication"}) {
      QVERIFY(w.showPage(page));
      QVERIFY(waitIdle(w));
    }
    QVERIFY2(errors.isEmpty(), qPrintable(errors.isEmpty() ? QString() : errors.first().first().toString()));
    QVERIFY(!w.logView()->toPlainText().contains("malformed"));
  }

  void aFailedReadIsCheckedAndReopened() {
    QTemporaryDir dir;
    const QString db = dir.filePath("y.db");
    QCOMPARE(test::runCli(QStringList{"import", "--db", db, "--name", "first"} + gpu_).code, 0);
    ui::MainWindow w;
    w.show();
    QSignalSpy errors(&w, &ui::MainWindow::errorReported);
    QSignalSpy loaded(&w, &ui::MainWindow::runsLoaded);
    QSignalSpy recovered(&w, &ui::MainWindow::databaseRecovered);
    QVERIFY(w.openDatabase(db));
    QVERIFY(loaded.wait(10000));
    QVERIFY(waitIdle(w));
    w.selectRuns({core::RunId{1}});
    w.applySelectionNow();

    // The locks are lost; the next writer to close deletes the -shm the app still maps.
    closeBehindSqlitesBack(db);
    QCOMPARE(test::runCli(QStringList{"import", "--db", db, "--name", "second"} + job_).code, 0);
    QCOMPARE(test::runCli(QStringList{"import", "--db", db, "--name", "third"} + gpu_).code, 0);

    // The window sees the change at its next poll; if that read fails, it checks and reopens.
    QTRY_COMPARE_WITH_TIMEOUT(shownRunIds(w), cliRunIds(db), 15000);
    QVERIFY(waitIdle(w));
    for (const auto& e : errors) QVERIFY2(!e.first().toString().contains("malformed"), qPrintable(e.first().toString()));
    QVERIFY2(!w.logView()->toPlainText().contains("malformed"), qPrintable(w.logView()->toPlainText()));
    QCOMPARE(w.databasePath(), db);
    QCOMPARE(w.selectedRuns(), QList<core::RunId>{core::RunId{1}});
    qInfo("the window %s", recovered.isEmpty() ? "read on without a failure" : "checked and reopened the file");

    // A reported read failure, whatever caused it: the file is checked, reopened, and the page and
    // the selection stay.
    QVERIFY(w.showPage("overview"));
    const int before = int(recovered.size());
    w.session()->reportReadFailure("a read failed (test)");
    QTRY_COMPARE_WITH_TIMEOUT(int(recovered.size()), before + 1, 10000);
    QVERIFY(recovered.last().at(1).toString().contains("quick_check: ok"));
    QVERIFY(!w.recovering());
    QCOMPARE(w.databasePath(), db);
    QCOMPARE(w.currentPage()->pageId(), QString("overview"));
    QTRY_COMPARE_WITH_TIMEOUT(w.selectedRuns(), QList<core::RunId>{core::RunId{1}}, 10000);
    QTRY_COMPARE_WITH_TIMEOUT(shownRunIds(w), cliRunIds(db), 10000);
    QVERIFY(waitIdle(w));
    QVERIFY2(errors.isEmpty(), qPrintable(errors.isEmpty() ? QString() : errors.first().first().toString()));
    QVERIFY(w.logView()->toPlainText().contains("reads again"));
  }
};

QTEST_MAIN(TestAppImports)
#include "tst_app_imports.moc"
