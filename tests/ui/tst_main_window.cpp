// The main window, offscreen: opens a real database and lists its runs; the selection reaches the
// pages (first = baseline; hidden pages when shown); grouping and the 2 s watch keep the selection;
// delete asks first; a bad file is reported in the window, not fatal; imports (menu and drag and
// drop) run the real shardscope-cli and can be cancelled; a dropped database is opened and the last
// one is reopened; jumpToEvent lands on the Timeline.
#include <QAction>
#include <QComboBox>
#include <QDockWidget>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QMenuBar>
#include <QMimeData>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSettings>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTreeView>
#include <QUrl>
#include <QtTest>

#include "core/util/json.h"
#include "core/storage/trace_store.h"
#include "ui/pages/timeline_page.h"
#include "ui/timeline/step_compare_widget.h"
#include "ui/timeline/timeline_widget.h"
#include "tests/common/test_support.h"
#include "tests/tools/kineto_generator.h"
#include "tests/ui/ui_fixture.h"
#include "ui/main/import_process.h"
#include "ui/main/main_window.h"
#include "ui/pages/overview_page.h"
#include "ui/pages/page.h"

#if __has_include("ui/launch/run_controller.h") && __has_include("ui/launch/launch_progress_widget.h")
#include "ui/launch/launch_progress_widget.h"
#include "ui/launch/run_controller.h"
#define HAVE_LAUNCH 1
#endif

using namespace shardscope;
using core::Id;
using core::RunId;

// A list of run ids, as the window and the session hold them.
QList<RunId> runIds(std::initializer_list<std::int64_t> v) {
  QList<RunId> out;
  for (std::int64_t id : v) out << RunId{id};
  return out;
}

namespace {

// Three runtime runs (ddp, fsdp, zero3) and one imported-looking run without strategy.
std::string makeDb(const QTemporaryDir& dir, const std::string& name = "runs.db") {
  const std::string path = test::pathIn(dir, name);
  core::TraceStore store(path);
  for (const char* s : {"ddp", "fsdp", "zero3"}) {
    test::RunSpec spec;
    spec.name = s;
    spec.strategy = s;
    spec.memorySamples = 50;
    const RunId id = test::writeRun(store, spec);
    auto run = *store.run(id);
    run.configJson = std::string("{\"strategy\":\"") + s + "\",\"world_size\":2,\"buckets\":[1,2]}";
    store.updateRun(run);
  }
  return path;
}

bool waitLoaded(ui::MainWindow& w) {
  return QTest::qWaitFor([&] { return !w.busy(); }, 20000);
}

}  // namespace

class TestMainWindow : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void initTestCase() { QStandardPaths::setTestModeEnabled(true); }

  void listsRunsOfTheDatabase() {
    QTemporaryDir dir;
    const std::string path = makeDb(dir);
    ui::MainWindow w;
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QVERIFY(!w.isInteractive());  // offscreen: no message boxes
    QSignalSpy loaded(&w, &ui::MainWindow::runsLoaded);
    QVERIFY(w.openDatabase(QString::fromStdString(path)));
    QVERIFY(loaded.wait(10000));
    QCOMPARE(w.runModel()->runCount(), 3);
    QCOMPARE(w.runModel()->rowCount(), 1);  // one group: runtime runs
    QCOMPARE(w.runView()->model(), w.runModel());
    // The latest run is selected and the current page (Overview) shows it.
    QCOMPARE(w.selectedRuns(), runIds({3}));
    QVERIFY(waitLoaded(w));
    QCOMPARE(w.pageContextRuns("overview").value_or(QList<RunId>{}), runIds({3}));
    auto* overview = qobject_cast<ui::OverviewPage*>(w.page("overview"));
    QVERIFY(overview);
    QCOMPARE(overview->overviews().size(), std::size_t(1));
    QCOMPARE(overview->overviews()[0].run.name, std::string("zero3"));
    QCOMPARE(overview->ranksTable()->rowCount(), 2);
    QCOMPARE(overview->keyMetrics().size(), std::size_t(1));
    QVERIFY(overview->keyMetrics()[0].tokensPerS.has_value());
    QCOMPARE(overview->configView()->toPlainText(),
             QString("{\n  \"strategy\": \"zero3\",\n  \"world_size\": 2,\n  \"buckets\": [1, 2]\n}"));
    QCOMPARE(ui::prettyJson("{}"), QString("{}"));
    QCOMPARE(ui::prettyJson("not json"), QString("not json"));
    // Status bar: the path and the count; window title: the file.
    QVERIFY(w.findChild<QLabel*>("dbLabel")->text().endsWith("runs.db"));
    QCOMPARE(w.findChild<QLabel*>("runCountLabel")->text(), QString("3 run(s)"));
    QVERIFY(w.windowTitle().startsWith("runs.db"));
    QCOMPARE(w.recentFiles().value(0), QFileInfo(QString::fromStdString(path)).absoluteFilePath());
    // Pages in order, each with a Ctrl+N shortcut; File > Export Report... is there.
    QStringList ids;
    for (auto* p : w.pages()) ids << p->pageId();
    QCOMPARE(ids, (QStringList{"overview", "compare", "timeline", "memory", "communication", "kernels", "estimator"}));
    QCOMPARE(w.action("actionPage_memory")->shortcut(), QKeySequence(Qt::CTRL | Qt::Key_4));
    QCOMPARE(w.action("actionRefresh")->shortcut(), QKeySequence(Qt::Key_F5));
    QVERIFY(w.action("actionExportReport"));
    QVERIFY(!w.findChild<QAction*>("actionExport"));  // the old placeholder is gone
    w.action("actionPage_timeline")->trigger();
    QCOMPARE(w.currentPage()->pageId(), QString("timeline"));
    // Launch is under Run (issue 46), first; Help has the documentation and the shortcuts, read from
    // the actions themselves (Ctrl+7 is the Estimator, as the README says).
    QMenu* runMenu = nullptr;
    for (QAction* m : w.menuBar()->actions())
      if (m->text() == "&Run") runMenu = m->menu();
    QVERIFY(runMenu);
    QCOMPARE(runMenu->actions().value(0), w.action("actionLaunch"));
    QVERIFY(w.action("actionDocs"));
    QVERIFY2(!ui::MainWindow::documentationDir().isEmpty(), qPrintable(ui::MainWindow::documentationCandidates().join(", ")));
    QVERIFY(QFileInfo::exists(ui::MainWindow::documentationDir() + "/ESTIMATOR.md"));
    const auto shortcuts = w.shortcutList();
    auto has = [&](const QString& key, const QString& what) {
      for (const auto& [k, v] : shortcuts)
        if (k == key && v == what) return true;
      return false;
    };
    QVERIFY(has("Ctrl+7", QString("View \u25b8 Estimator")));
    QVERIFY(has("Ctrl+R", QString("Run \u25b8 Launch Runs")));
    QVERIFY(has("F5", QString("View \u25b8 Refresh")));
    w.action("actionShortcuts")->trigger();
    auto* table = w.findChild<QTableWidget*>("shortcutsTable");
    QVERIFY(table);
    QCOMPARE(table->rowCount(), static_cast<int>(shortcuts.size()));
  }

  void selectionReachesPages() {
    QTemporaryDir dir;
    const std::string path = makeDb(dir);
    ui::MainWindow w;
    w.show();
    QSignalSpy loaded(&w, &ui::MainWindow::runsLoaded);
    QVERIFY(w.openDatabase(QString::fromStdString(path)));
    QVERIFY(loaded.wait(10000));
    QVERIFY(waitLoaded(w));

    // Click order matters: the first selected is the baseline.
    auto* sm = w.runView()->selectionModel();
    sm->select(w.runModel()->indexOfRun(core::RunId{2}), QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
    sm->select(w.runModel()->indexOfRun(core::RunId{1}), QItemSelectionModel::Select | QItemSelectionModel::Rows);
    QCOMPARE(w.selectedRuns(), runIds({2, 1}));
    // Debounced, then delivered to the current page only.
    QTRY_COMPARE(w.pageContextRuns("overview").value_or(QList<RunId>{}), runIds({2, 1}));
    QVERIFY(!w.pageContextRuns("timeline").has_value());
    QVERIFY(waitLoaded(w));
    auto* overview = qobject_cast<ui::OverviewPage*>(w.page("overview"));
    QCOMPARE(overview->overviews().size(), std::size_t(2));
    QCOMPARE(overview->overviews()[0].run.id, RunId{2});
    QCOMPARE(overview->metricsTable()->columnCount(), 2);
    overview->showRun(core::RunId{1});
    QCOMPARE(overview->shownRun(), RunId{1});

    // Another page gets the context when it is shown.
    QVERIFY(w.showPage("timeline"));
    QCOMPARE(w.pageContextRuns("timeline").value_or(QList<RunId>{}), runIds({2, 1}));
    auto* timeline = qobject_cast<ui::TimelinePage*>(w.page("timeline"));
    QVERIFY(timeline);
    QCOMPARE(timeline->currentRun(), RunId{2});  // the baseline
    QVERIFY(waitLoaded(w));
    // Two runs: the same step of each, side by side; then one run's own timeline.
    QCOMPARE(timeline->view(), ui::TimelinePage::View::SameStep);
    QCOMPARE(timeline->compareWidget()->runs().size(), std::size_t(2));
    timeline->setView(ui::TimelinePage::View::OneRun);
    QVERIFY(waitLoaded(w));
    QVERIFY(timeline->index());
    QCOMPARE(timeline->index()->runId(), RunId{2});
    QVERIFY(w.showPage("compare"));
    QCOMPARE(w.pageContextRuns("compare").value_or(QList<RunId>{}), runIds({2, 1}));
    QVERIFY(waitLoaded(w));

    // Make run 1 the baseline.
    w.makeBaseline(core::RunId{1});
    QCOMPARE(w.selectedRuns(), runIds({1, 2}));
    QCOMPARE(w.pageContextRuns("compare").value_or(QList<RunId>{}), runIds({1, 2}));
    QVERIFY(waitLoaded(w));

    // Regrouping is a model reset: the selection (and its order) survives.
    w.setGrouping(ui::RunListModel::Grouping::Strategy);
    QCOMPARE(w.groupingCombo()->currentText(), QString("Strategy"));
    QCOMPARE(w.runModel()->rowCount(), 3);
    QCOMPARE(w.selectedRuns(), runIds({1, 2}));
    QCOMPARE(sm->selectedRows().size(), 2);
    w.groupingCombo()->setCurrentIndex(w.groupingCombo()->findText("None"));
    QVERIFY(w.runModel()->grouping() == ui::RunListModel::Grouping::None);
    QCOMPARE(w.runModel()->rowCount(), 3);
    QCOMPARE(sm->selectedRows().size(), 2);
    QCOMPARE(w.selectedRuns(), runIds({1, 2}));

    // jumpToEvent (Communication rows) lands on the Timeline, which shows the event asked for.
    Q_EMIT w.page("communication")->jumpToEvent(core::RunId{2}, (Id(7) << 16) | 3, 1000, 5000);
    QCOMPARE(w.currentPage()->pageId(), QString("timeline"));
    QVERIFY(waitLoaded(w));
    // The event is selected when the run has it; otherwise its time [1000, 5000) is shown.
    const auto* tw = timeline->timeline();
    QVERIFY(tw->selectedEvent() || (tw->viewStart() <= 1000 && tw->viewEnd() >= 5000));
  }

  void watchesTheDatabase() {
    QTemporaryDir dir;
    const std::string path = makeDb(dir);
    ui::MainWindow w;
    w.setPollInterval(100);
    w.show();
    QSignalSpy loaded(&w, &ui::MainWindow::runsLoaded);
    QVERIFY(w.openDatabase(QString::fromStdString(path)));
    QVERIFY(loaded.wait(10000));
    w.selectRuns({core::RunId{1}, core::RunId{3}});
    w.applySelectionNow();
    QVERIFY(waitLoaded(w));
    QPersistentModelIndex first(w.runModel()->indexOfRun(core::RunId{1}));

    // A job writes a new run, then finishes it.
    core::TraceStore other(path);
    core::Run r;
    r.name = "hsdp live";
    r.strategy = "hsdp";
    r.source = core::RunSource::Runtime;
    r.status = core::RunStatus::Running;
    r.worldSize = 4;
    const RunId live = other.createRun(r);
    QTRY_COMPARE_WITH_TIMEOUT(w.runModel()->runCount(), 4, 10000);
    QCOMPARE(w.selectedRuns(), runIds({1, 3}));
    QCOMPARE(w.runView()->selectionModel()->selectedRows().size(), 2);
    QVERIFY(first.isValid());
    QCOMPARE(w.runModel()->runId(first), RunId{1});
    QTRY_COMPARE(w.findChild<QLabel*>("runCountLabel")->text(), QString("4 run(s)"));

    // A selected run changes status: the current page is told again.
    w.selectRuns({live});
    w.applySelectionNow();
    QVERIFY(waitLoaded(w));
    QSignalSpy delivered(&w, &ui::MainWindow::contextDelivered);
    other.setRunStatus(live, core::RunStatus::Failed, "rank 2: exit code 1");
    QTRY_VERIFY_WITH_TIMEOUT(delivered.count() >= 1, 10000);
    QVERIFY(w.runModel()->runRow(live)->run.status == core::RunStatus::Failed);
    QVERIFY(waitLoaded(w));
    auto* overview = qobject_cast<ui::OverviewPage*>(w.page("overview"));
    QCOMPARE(overview->overviews().at(0).run.failureReason, std::string("rank 2: exit code 1"));

    // Deleted elsewhere: the run leaves the list and the selection.
    other.deleteRun(live);
    QTRY_COMPARE_WITH_TIMEOUT(w.runModel()->runCount(), 3, 10000);
    QTRY_COMPARE(w.selectedRuns(), runIds({}));
    QVERIFY(waitLoaded(w));
  }

  void renameTagsAndDelete() {
    QTemporaryDir dir;
    const std::string path = makeDb(dir);
    ui::MainWindow w;
    w.show();
    QSignalSpy loaded(&w, &ui::MainWindow::runsLoaded);
    QVERIFY(w.openDatabase(QString::fromStdString(path)));
    QVERIFY(loaded.wait(10000));
    QVERIFY(waitLoaded(w));
    core::TraceStore other(path);

    // Inline editing through the view's delegate.
    w.renameRun(core::RunId{2});
    QWidget* editor = QApplication::focusWidget();
    QVERIFY(qobject_cast<QLineEdit*>(editor));
    qobject_cast<QLineEdit*>(editor)->setText("fsdp bs16");
    QTest::keyClick(editor, Qt::Key_Return);
    QTRY_COMPARE(other.run(core::RunId{2})->name, std::string("fsdp bs16"));
    QVERIFY(w.runModel()->setData(w.runModel()->indexOfRun(core::RunId{2}, ui::RunListModel::TagsColumn), "a100, best"));
    QCOMPARE(other.run(core::RunId{2})->tags, std::string("a100,best"));

    // Delete asks first: "no" keeps the run.
    w.setAutoConfirm(false);
    w.deleteRuns({core::RunId{1}});
    QVERIFY(other.run(core::RunId{1}).has_value());
    QCOMPARE(w.runModel()->runCount(), 3);
    w.setAutoConfirm(true);
    w.selectRuns({core::RunId{1}, core::RunId{2}});
    w.applySelectionNow();
    QSignalSpy deleted(&w, &ui::MainWindow::runsDeleted);
    w.deleteRuns({core::RunId{1}});
    QCOMPARE(w.selectedRuns(), runIds({2}));  // at once: the pages stop showing it
    QVERIFY(w.busy());
    QVERIFY(deleted.wait(10000));
    QCOMPARE(deleted.at(0).at(0).value<QList<qint64>>(), (QList<qint64>{1}));
    QVERIFY(!other.run(core::RunId{1}).has_value());
    QTRY_COMPARE(w.runModel()->runCount(), 2);
    QCOMPARE(w.selectedRuns(), runIds({2}));
    QTRY_COMPARE(w.pageContextRuns("overview").value_or(QList<RunId>{}), runIds({2}));
    QVERIFY(w.logView()->toPlainText().contains("Deleted 1 run(s)"));
    QVERIFY(waitLoaded(w));
  }

  void badFileIsReportedNotFatal() {
    QTemporaryDir dir;
    const std::string garbage = test::writeFile(dir, "garbage.db", std::string(4096, 'x'));
    ui::MainWindow w;
    w.show();
    QVERIFY(!w.openDatabase(QString::fromStdString(garbage)));
    QVERIFY(w.lastError().contains("not a SQLite database"));
    QVERIFY(w.databasePath().isEmpty());
    QVERIFY(w.logView()->toPlainText().contains("not a SQLite database"));
    QVERIFY(w.statusBar()->currentMessage().contains("not a SQLite database"));
    QVERIFY(!w.openDatabase(QString::fromStdString(test::pathIn(dir, "missing.db")), ui::MainWindow::OpenMode::MustExist));
    QVERIFY(w.lastError().contains("no such file"));
    QVERIFY(!w.openDatabase(dir.path()));
    QVERIFY(w.lastError().contains("directory"));

    // A good database stays open when a bad one is tried next.
    const std::string good = makeDb(dir);
    QSignalSpy loaded(&w, &ui::MainWindow::runsLoaded);
    QVERIFY(w.openDatabase(QString::fromStdString(good)));
    QVERIFY(loaded.wait(10000));
    QVERIFY(!w.openDatabase(QString::fromStdString(garbage)));
    QVERIFY(w.databasePath().endsWith("runs.db"));
    QCOMPARE(w.runModel()->runCount(), 3);
    QVERIFY(waitLoaded(w));

    // A newer schema is refused with the store's message.
    const std::string newer = makeDb(dir, "newer.db");
    {
      core::Database db(newer, core::Database::Mode::ReadWrite);
      db.exec("PRAGMA user_version = 999");
    }
    QVERIFY(!w.openDatabase(QString::fromStdString(newer)));
    QVERIFY(w.lastError().contains("newer"));
    QVERIFY(w.errors().size() >= 5);
  }

  void importsThroughTheCli() {
    qputenv("SHARDSCOPE_CLI", SHARDSCOPE_CLI);
    QTemporaryDir dir;
    test::KinetoGenOptions opt;
    opt.events = 3000;
    opt.worldSize = 2;
    std::vector<std::string> files;
    for (int r = 0; r < 2; ++r) {
      opt.rank = r;
      files.push_back(test::pathIn(dir, "rank" + std::to_string(r) + ".json"));
      test::generateKinetoTrace(files.back(), opt);
    }
    const std::string path = makeDb(dir);
    ui::MainWindow w;
    w.show();
    QSignalSpy loaded(&w, &ui::MainWindow::runsLoaded);
    QVERIFY(w.openDatabase(QString::fromStdString(path)));
    QVERIFY(loaded.wait(10000));
    QVERIFY(waitLoaded(w));

    QSignalSpy finished(&w, &ui::MainWindow::importFinished);
    QVERIFY(w.importTraces({QString::fromStdString(files[0]), QString::fromStdString(files[1])}));
    QVERIFY(w.importRunning());
    QVERIFY(w.busy());
    QVERIFY(w.cancelButton()->isEnabled());
    QCOMPARE(w.progressBar()->maximum(), 0);                       // indeterminate while the CLI works
    QVERIFY(!w.importTraces({QString::fromStdString(files[0])}));  // one at a time
    QVERIFY(finished.wait(60000));
    QCOMPARE(finished.at(0).at(0).toBool(), true);
    QCOMPARE(finished.at(0).at(1).value<QList<qint64>>(), (QList<qint64>{4}));
    // The new run appears, selected, in its group.
    QTRY_COMPARE(w.runModel()->runCount(), 4);
    QTRY_COMPARE(w.selectedRuns(), runIds({4}));
    QCOMPARE(w.runModel()->rowCount(), 2);
    QVERIFY(w.logView()->toPlainText().contains("imported 2 file(s) into run 4"));
    QVERIFY(waitLoaded(w));

    // Drag and drop of a folder does the same.
    QDir().mkpath(dir.filePath("job"));
    QFile::copy(QString::fromStdString(files[0]), dir.filePath("job/rank0.json"));
    QFile::copy(QString::fromStdString(files[1]), dir.filePath("job/rank1.json"));
    auto* mime = new QMimeData;
    mime->setUrls({QUrl::fromLocalFile(dir.filePath("job"))});
    QDragEnterEvent enter(QPoint(10, 10), Qt::CopyAction, mime, Qt::LeftButton, Qt::NoModifier);
    QApplication::sendEvent(&w, &enter);
    QVERIFY(enter.isAccepted());
    QDropEvent drop(QPointF(10, 10), Qt::CopyAction, mime, Qt::LeftButton, Qt::NoModifier);
    QApplication::sendEvent(&w, &drop);
    QVERIFY(drop.isAccepted());
    QVERIFY(finished.wait(60000));
    QCOMPARE(finished.at(1).at(0).toBool(), true);
    QTRY_COMPARE(w.runModel()->runCount(), 5);
    delete mime;
    QVERIFY(waitLoaded(w));

    // A failing import is reported in the window.
    const std::string bad = test::writeFile(dir, "bad.json", "{\"traceEvents\": [");
    QVERIFY(w.importTraces({QString::fromStdString(bad)}));
    QVERIFY(finished.wait(60000));
    QCOMPARE(finished.at(2).at(0).toBool(), false);
    QVERIFY(w.lastError().contains("bad.json"));
    QCOMPARE(w.runModel()->runCount(), 5);

    // Cancel stops the process; nothing of the import is kept.
    opt.events = 400000;
    opt.rank = 0;
    opt.worldSize = 1;
    const std::string big = test::pathIn(dir, "big.json");
    test::generateKinetoTrace(big, opt);
    QVERIFY(w.importTraces({QString::fromStdString(big)}));
    QTest::qWait(50);
    w.cancelCurrentTask();
    QVERIFY(finished.wait(60000));
    QCOMPARE(finished.at(3).at(0).toBool(), false);
    QVERIFY(!w.importRunning());
    QVERIFY(w.logView()->toPlainText().contains("Import cancelled: nothing of it was kept"));
    core::TraceStore check(path);
    QCOMPARE(check.runs().size(), std::size_t(5));
    QVERIFY(waitLoaded(w));
  }

  void launchesAComparison() {
    // A stand-in for `shardscope-cli compare --progress json` speaking its protocol (the real one
    // needs the LibTorch workers; RunController's own tests and the runtime tests cover it). The run
    // ids the window selects come from its run events.
    QTemporaryDir dir;
    const std::string path = makeDb(dir);
    const std::string fake =
        test::writeFile(dir, "fake-cli.sh",
                        "#!/bin/sh\n"
                        "for s in ddp fsdp; do\n"
                        "  if [ $s = ddp ]; then id=1; else id=2; fi\n"
                        "  echo \"== $s: tiny, 2 ranks, 3 steps\" >&2\n"
                        "  echo \"{\\\"event\\\":\\\"run\\\",\\\"run_id\\\":$id,\\\"strategy\\\":\\\"$s\\\","
                        "\\\"status\\\":\\\"running\\\"}\"\n"
                        "  for i in 1 2 3; do echo \"{\\\"event\\\":\\\"progress\\\",\\\"done\\\":$i,"
                        "\\\"total\\\":3,\\\"run_id\\\":$id,\\\"strategy\\\":\\\"$s\\\",\\\"loss\\\":5.$i,"
                        "\\\"step_ms\\\":12.5}\"; done\n"
                        "  echo \"{\\\"event\\\":\\\"run\\\",\\\"run_id\\\":$id,\\\"strategy\\\":\\\"$s\\\","
                        "\\\"status\\\":\\\"completed\\\"}\"\n"
                        "done\n"
                        "if [ -n \"$FAKE_HANG\" ]; then sleep 30 & p=$!; trap 'kill $p; exit 130' TERM; wait $p; fi\n");
    QFile::setPermissions(QString::fromStdString(fake), QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner);
    const QByteArray oldCli = qgetenv("SHARDSCOPE_CLI");
    qputenv("SHARDSCOPE_CLI", QByteArray::fromStdString(fake));
    ui::MainWindow w;
    w.show();
    QSignalSpy loaded(&w, &ui::MainWindow::runsLoaded);
    QVERIFY(w.openDatabase(QString::fromStdString(path)));
    QVERIFY(loaded.wait(10000));
    QVERIFY(waitLoaded(w));
    QSignalSpy ended(&w, &ui::MainWindow::launchEnded);
    core::RunConfig base;
    base.model = "tiny";
    base.steps = 3;
    if (!w.launchComparison(base, {"ddp", "fsdp"})) {
      qputenv("SHARDSCOPE_CLI", oldCli);
      QSKIP("the launch code (ui/launch) is not part of this build");
    }
    QVERIFY(w.launchRunning());
    QVERIFY(w.busy());
    QVERIFY(ended.wait(20000));
    QCOMPARE(ended.at(0).at(0).toBool(), true);
    QCOMPARE(ended.at(0).at(1).value<QList<qint64>>(), (QList<qint64>{1, 2}));
#ifdef HAVE_LAUNCH
    const auto& states = w.runController()->strategies();
    QCOMPARE(states.size(), 2);
    QVERIFY(states[0].status == ui::RunController::Status::Done);
    QCOMPARE(states[1].runId, qint64(2));
    QCOMPARE(states[1].loss.size(), 3);
    auto* progress = qobject_cast<ui::LaunchProgressWidget*>(w.launchProgress());
    QVERIFY(progress);
    QCOMPARE(progress->controller(), w.runController());
    QCOMPARE(progress->overallBar()->value(), progress->overallBar()->maximum());
#endif
    QVERIFY(w.launchDock()->isVisible());
    // The new runs are selected (first = baseline) and compared.
    QTRY_COMPARE(w.selectedRuns(), runIds({1, 2}));
    QCOMPARE(w.currentPage()->pageId(), QString("compare"));
    QVERIFY(waitLoaded(w));

    // Cancel stops the CLI (SIGTERM: it stops its ranks, exit 130).
    qputenv("FAKE_HANG", "1");
    QVERIFY(w.launchComparison(core::RunConfig{}, {"ddp", "fsdp"}));
#ifdef HAVE_LAUNCH
    QTRY_VERIFY_WITH_TIMEOUT(w.runController()->strategies().size() == 2 &&
                                 w.runController()->strategies()[1].status == ui::RunController::Status::Done,
                             10000);
#endif
    QVERIFY(w.cancelButton()->isEnabled());
    w.cancelCurrentTask();
    QVERIFY(ended.wait(20000));
    QCOMPARE(ended.at(1).at(0).toBool(), false);
    QVERIFY(!w.launchRunning());
    QVERIFY(w.logView()->toPlainText().contains("Comparison cancelled"));
    qunsetenv("FAKE_HANG");
    qputenv("SHARDSCOPE_CLI", oldCli);
    QVERIFY(waitLoaded(w));
  }

  // Issue 46: "try it" launches the run's own configuration with the change (through the same
  // launch path, a stand-in CLI here that keeps the configuration it was given) and then compares the
  // new run with the one it changed; a change that does not apply is refused with the key named.
  void tryItLaunchesTheChangedConfiguration() {
    QTemporaryDir dir;
    const std::string path = makeDb(dir);
    RunId base;
    {
      core::TraceStore store(path);
      test::RunSpec spec;
      spec.name = "fsdp post";
      spec.strategy = "fsdp";
      spec.memorySamples = 20;
      spec.configJson = R"({"strategy":"fsdp","world_size":2,"model":"tiny","backward_prefetch":"post"})";
      base = test::writeRun(store, spec);
    }
    const std::string kept = test::pathIn(dir, "launched.json");
    const std::string fake = test::writeFile(dir, "fake-cli.sh",
                                             "#!/bin/sh\n"
                                             "while [ $# -gt 0 ]; do [ \"$1\" = --config ] && cp \"$2\" '" +
                                                 kept +
                                                 "'; shift; done\n"
                                                 "echo '{\"event\":\"run\",\"run_id\":1,\"strategy\":\"fsdp\","
                                                 "\"status\":\"running\"}'\n"
                                                 "echo '{\"event\":\"run\",\"run_id\":1,\"strategy\":\"fsdp\","
                                                 "\"status\":\"completed\"}'\n");
    QFile::setPermissions(QString::fromStdString(fake), QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner);
    const QByteArray oldCli = qgetenv("SHARDSCOPE_CLI");
    qputenv("SHARDSCOPE_CLI", QByteArray::fromStdString(fake));
    ui::MainWindow w;
    w.show();
    QSignalSpy loaded(&w, &ui::MainWindow::runsLoaded);
    QVERIFY(w.openDatabase(QString::fromStdString(path)));
    QVERIFY(loaded.wait(10000));
    QVERIFY(waitLoaded(w));
    // Refused: a value the knob does not take.
    QVERIFY(!w.tryChange(base, core::KnobChange{{{"backward_prefetch", "sideways"}}}));
    QVERIFY2(w.logView()->toPlainText().contains("Try it: ") && w.logView()->toPlainText().contains("backward-prefetch"),
             qPrintable(w.logView()->toPlainText()));
    QSignalSpy ended(&w, &ui::MainWindow::launchEnded);
    if (!w.tryChange(base, core::KnobChange{{{"backward_prefetch", "pre"}}})) {
      qputenv("SHARDSCOPE_CLI", oldCli);
      QSKIP("the launch code (ui/launch) is not part of this build");
    }
    QVERIFY(ended.wait(20000));
    QCOMPARE(ended.at(0).at(0).toBool(), true);
    qputenv("SHARDSCOPE_CLI", oldCli);
    // The launched configuration is the run's own with the change.
    const core::JsonValue cfg = core::parseJsonFile(kept);
    QCOMPARE(cfg.find("backward_prefetch")->asString(), std::string("pre"));
    QCOMPARE(cfg.find("strategy")->asString(), std::string("fsdp"));
    QCOMPARE(cfg.find("model")->asString(), std::string("tiny"));
    // The run it changed first, then the new one, on the Compare page.
    QTRY_COMPARE(w.selectedRuns(), (QList<RunId>{base, RunId{1}}));
    QCOMPARE(w.currentPage()->pageId(), QString("compare"));
    QVERIFY(waitLoaded(w));
  }

  void settingsPersist() {
    QSettings().clear();  // test mode: ~/.qttest, never the user's settings
    QTemporaryDir dir;
    const std::string path = makeDb(dir);
    {
      ui::MainWindow w;
      w.restoreSettings();
      QVERIFY(w.recentFiles().isEmpty());
      QSignalSpy loaded(&w, &ui::MainWindow::runsLoaded);
      QVERIFY(w.openDatabase(QString::fromStdString(path)));
      QVERIFY(loaded.wait(10000));
      for (int i = 0; i < 10; ++i) w.openDatabase(QString::fromStdString(makeDb(dir, "db" + std::to_string(i) + ".db")));
      QVERIFY(waitLoaded(w));
      w.setGrouping(ui::RunListModel::Grouping::Status);
      w.showPage("memory");
      QVERIFY(waitLoaded(w));
      w.close();  // saves
    }
    ui::MainWindow w;
    w.restoreSettings();
    QVERIFY(w.runModel()->grouping() == ui::RunListModel::Grouping::Status);
    QCOMPARE(w.groupingCombo()->currentText(), QString("Status"));
    QCOMPARE(w.currentPage()->pageId(), QString("memory"));
    QCOMPARE(w.recentFiles().size(), 8);
    QVERIFY(w.recentFiles().first().endsWith("db9.db"));
    QSettings().clear();
  }

  // A database dropped on the window is opened (not imported); traces dropped with it are imported
  // into it. The last database opened is remembered and reopened (what the app does at start when
  // no file is given), unless it is gone.
  void opensDroppedDatabaseAndReopensTheLast() {
    QSettings().clear();  // test mode: ~/.qttest, never the user's settings
    qputenv("SHARDSCOPE_CLI", SHARDSCOPE_CLI);
    QTemporaryDir dir;
    const QString first = QString::fromStdString(makeDb(dir, "first.db"));
    const QString dropped = QString::fromStdString(makeDb(dir, "dropped.sqlite"));  // found by its header
    test::KinetoGenOptions opt;
    opt.events = 2000;
    opt.worldSize = 1;
    const std::string trace = test::pathIn(dir, "rank0.json");
    test::generateKinetoTrace(trace, opt);
    QVERIFY(ui::MainWindow::isDatabaseFile(dropped));
    QVERIFY(!ui::MainWindow::isDatabaseFile(QString::fromStdString(trace)));
    QVERIFY(!ui::MainWindow::isDatabaseFile(dir.path()));
    {
      ui::MainWindow w;
      w.restoreSettings();
      QVERIFY(!w.openLastDatabase());  // nothing opened yet
      QVERIFY(w.databasePath().isEmpty());
      QVERIFY(w.openDatabase(first));
      QVERIFY(waitLoaded(w));
      QSignalSpy finished(&w, &ui::MainWindow::importFinished);
      auto* mime = new QMimeData;
      mime->setUrls({QUrl::fromLocalFile(dropped), QUrl::fromLocalFile(QString::fromStdString(trace))});
      QDragEnterEvent enter(QPoint(10, 10), Qt::CopyAction, mime, Qt::LeftButton, Qt::NoModifier);
      QApplication::sendEvent(&w, &enter);
      QVERIFY(enter.isAccepted());
      QDropEvent drop(QPointF(10, 10), Qt::CopyAction, mime, Qt::LeftButton, Qt::NoModifier);
      QApplication::sendEvent(&w, &drop);
      QVERIFY(drop.isAccepted());
      QTRY_COMPARE(w.databasePath(), QFileInfo(dropped).absoluteFilePath());
      QVERIFY(finished.wait(60000));  // the trace went into the dropped database
      QCOMPARE(finished.at(0).at(0).toBool(), true);
      QTRY_COMPARE(w.runModel()->runCount(), 4);
      QCOMPARE(core::TraceStore(first.toStdString()).runs().size(), std::size_t(3));
      delete mime;
      QVERIFY(waitLoaded(w));
      w.close();  // saves
    }
    {
      ui::MainWindow w;
      w.restoreSettings();
      QVERIFY(w.openLastDatabase());
      QCOMPARE(w.databasePath(), QFileInfo(dropped).absoluteFilePath());
      QVERIFY(waitLoaded(w));
      w.close();
    }
    QVERIFY(QFile::remove(dropped));
    ui::MainWindow w;
    w.restoreSettings();
    QVERIFY(!w.openLastDatabase());  // gone: nothing is created in its place
    QVERIFY(w.databasePath().isEmpty());
    QVERIFY(!QFile::exists(dropped));
    QSettings().clear();
  }

  void noDatabaseNoImport() {
    ui::MainWindow w;
    QVERIFY(!w.importTraces({"/nonexistent.json"}));
    QVERIFY(w.lastError().contains("database"));
    QVERIFY(!w.action("actionImport")->isEnabled());
  }

  // File > Export to Perfetto: the run as one merged trace, written in the session's runner.
  void exportsToPerfetto() {
    QTemporaryDir dir;
    const std::string path = makeDb(dir);
    ui::MainWindow w;
    QVERIFY(w.openDatabase(QString::fromStdString(path)));
    QVERIFY(waitLoaded(w));
    QSignalSpy done(&w, &ui::MainWindow::exportFinished);
    const QString out = dir.filePath("run1.perfetto.json");
    QVERIFY(w.exportPerfetto(core::RunId{1}, out));
    QVERIFY(w.exportRunning());
    QVERIFY(done.wait(20000));
    QCOMPARE(done.first().at(0).toBool(), true);
    QFile f(out);
    QVERIFY(f.open(QIODevice::ReadOnly));
    const auto doc = QJsonDocument::fromJson(f.readAll());
    const QJsonArray events = doc.object()["traceEvents"].toArray();
    QVERIFY(events.size() > 100);
    // Both ranks are in it (host pids r*100).
    QSet<int> pids;
    for (const auto& e : events) pids.insert(e.toObject()["pid"].toInt());
    QVERIFY(pids.contains(0) && pids.contains(100));
    QVERIFY(!w.exportRunning());
  }
};

QTEST_MAIN(TestMainWindow)
#include "tst_main_window.moc"
