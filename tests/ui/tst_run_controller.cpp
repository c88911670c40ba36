// RunController: the JSON-lines protocol of `shardscope-cli compare --progress json` read from
// stand-in scripts (partial lines, human lines, failures with the key, a CLI that ignores SIGTERM and
// is killed with its rank after the grace period), the configuration handed over as JSON, then the
// real CLI on the tiny model: progress per step, finished, runs in the database; and cancel of a
// running comparison stops its worker processes (exit 130).
// The real-CLI cases need shardscope-worker (LibTorch): skipped where it is not built.
#include <QCheckBox>
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QProgressBar>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTimer>
#include <QtTest>

#include <csignal>

#include "core/config/run_config.h"
#include "core/storage/trace_store.h"
#include "core/util/json.h"
#include "tests/common/test_support.h"
#include "ui/charts/qcp.h"
#include "ui/launch/launch_dialog.h"
#include "ui/launch/launch_progress_widget.h"
#include "ui/launch/run_controller.h"

using namespace shardscope;
using Status = ui::RunController::Status;

namespace {

QString writeScript(const QTemporaryDir& dir, const QString& name, const QString& body) {
  const QString path = dir.filePath(name);
  QFile f(path);
  if (!f.open(QIODevice::WriteOnly)) return {};
  f.write("#!/bin/sh\n");
  f.write(body.toUtf8());
  f.close();
  f.setPermissions(QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner);
  return path;
}

struct ProcInfo {
  qint64 pid = 0;
  qint64 ppid = 0;
  QString comm;
  char state = '?';
};

std::optional<ProcInfo> procInfo(qint64 pid) {
  QFile f(QStringLiteral("/proc/%1/stat").arg(pid));
  if (!f.open(QIODevice::ReadOnly)) return std::nullopt;
  const QByteArray s = f.readAll();
  const qsizetype open = s.indexOf('('), close = s.lastIndexOf(')');
  if (open < 0 || close < 0) return std::nullopt;
  const QList<QByteArray> rest = s.mid(close + 2).split(' ');
  if (rest.size() < 2) return std::nullopt;
  ProcInfo p;
  p.pid = pid;
  p.comm = QString::fromUtf8(s.mid(open + 1, close - open - 1));
  p.state = rest[0].isEmpty() ? '?' : rest[0][0];
  p.ppid = rest[1].toLongLong();
  return p;
}

QList<ProcInfo> childrenOf(qint64 parent) {
  QList<ProcInfo> out;
  for (const QString& e : QDir("/proc").entryList(QDir::Dirs | QDir::NoDotAndDotDot)) {
    bool ok = false;
    const qint64 pid = e.toLongLong(&ok);
    if (!ok) continue;
    if (auto p = procInfo(pid); p && p->ppid == parent) out << *p;
  }
  return out;
}

// Alive = exists and is not a zombie waiting to be reaped.
bool alive(qint64 pid) {
  auto p = procInfo(pid);
  return p && p->state != 'Z' && p->state != 'X';
}

bool waitFor(const std::function<bool()>& cond, int ms) {
  QElapsedTimer t;
  t.start();
  while (!cond() && t.elapsed() < ms) QTest::qWait(20);
  return cond();
}

QString cliPath() {
#ifdef SHARDSCOPE_CLI
  return QStringLiteral(SHARDSCOPE_CLI);
#else
  return {};
#endif
}

// The worker the CLI will start: $SHARDSCOPE_WORKER, else the build's.
QString workerPath() {
  const QString env = qEnvironmentVariable("SHARDSCOPE_WORKER");
  if (!env.isEmpty()) return env;
  const QString cli = cliPath();
  if (cli.isEmpty()) return {};
  const QDir dir = QFileInfo(cli).dir();
  for (const QString& p : {dir.filePath("shardscope-worker"), dir.filePath("../profiler/shardscope-worker")})
    if (QFileInfo(p).isExecutable()) return QDir::cleanPath(p);
  return {};
}

#define REQUIRE_RUNTIME()                                                                                  \
  do {                                                                                                     \
    if (cliPath().isEmpty() || !QFileInfo(cliPath()).isExecutable()) QSKIP("shardscope-cli is not built"); \
    if (workerPath().isEmpty() || !QFileInfo(workerPath()).isExecutable())                                 \
      QSKIP("shardscope-worker is not built (it needs LibTorch): no real comparison to run");              \
  } while (0)

}  // namespace

class TestRunController : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void initTestCase() { QVERIFY(dir_.isValid()); }

  void readsTheProtocol() {
    // Events on stdout (one a line, the last without a newline), human lines on both pipes; the
    // configuration arrives as the file after --config, which the stand-in copies for the test.
    const QString copy = dir_.filePath("received.json");
    const QString cli =
        writeScript(dir_, "fake-ok",
                    "while [ $# -gt 0 ]; do if [ \"$1\" = --config ]; then cp \"$2\" '" + copy +
                        "'; fi; shift; done\n"
                        "echo '== ddp: tiny, 2 ranks, 2 steps' >&2\n"
                        "echo '{\"event\":\"run\",\"run_id\":7,\"strategy\":\"ddp\",\"status\":\"running\"}'\n"
                        "echo '{\"event\":\"progress\",\"done\":1,\"total\":2,\"label\":\"ddp steps\",\"run_id\":7,"
                        "\"strategy\":\"ddp\",\"loss\":5.5,\"step_ms\":12.5}'\n"
                        "echo '{\"event\":\"progress\",\"done\":2,\"total\":2,\"label\":\"ddp steps\",\"run_id\":7,"
                        "\"strategy\":\"ddp\",\"loss\":5.25,\"step_ms\":11}'\n"
                        "echo '{\"event\":\"run\",\"run_id\":7,\"strategy\":\"ddp\",\"status\":\"completed\"}'\n"
                        "echo 'run 7 (ddp): completed' >&2\n"
                        "echo '{\"event\":\"warning\",\"message\":\"careful\"}'\n"
                        "echo '{\"event\":\"run\",\"run_id\":8,\"strategy\":\"fsdp\",\"status\":\"running\"}'\n"
                        "echo '{\"event\":\"progress\",\"done\":1,\"total\":2,\"label\":\"fsdp steps\",\"run_id\":8,"
                        "\"strategy\":\"fsdp\",\"loss\":5.5,\"step_ms\":20}'\n"
                        "sleep 0.3\n"
                        "echo '{\"event\":\"progress\",\"done\":2,\"total\":2,\"label\":\"fsdp steps\",\"run_id\":8,"
                        "\"strategy\":\"fsdp\",\"loss\":5.2,\"step_ms\":21}'\n"
                        "echo '{\"event\":\"run\",\"run_id\":8,\"strategy\":\"fsdp\",\"status\":\"completed\"}'\n"
                        "echo 'not an event'\n"
                        "printf '{\"event\":\"done\",\"run_ids\":[7,8],\"exit\":0}'\n");
    ui::RunController rc;
    rc.setCliPath(cli);
    QSignalSpy started(&rc, &ui::RunController::strategyStarted);
    QSignalSpy steps(&rc, &ui::RunController::stepProgress);
    QSignalSpy done(&rc, &ui::RunController::strategyFinished);
    QSignalSpy finished(&rc, &ui::RunController::finished);
    QSignalSpy ended(&rc, &ui::RunController::ended);
    QSignalSpy log(&rc, &ui::RunController::logLine);
    core::RunConfig base;
    base.model = "odd";
    base.steps = 2;
    base.lr = 0.0123;
    QVERIFY(rc.start("/tmp/unused.db", base, {"ddp", "fsdp_full"}));
    QCOMPARE(rc.arguments().mid(0, 5), QStringList({"compare", "--db", "/tmp/unused.db", "--progress", "json"}));
    QCOMPARE(rc.arguments().mid(7), QStringList({"--strategies", "ddp,fsdp"}));  // as compare names them
    QVERIFY(!rc.start("/tmp/unused.db", base, {"ddp"}));                         // one at a time
    QVERIFY(ended.wait(10000));
    QCOMPARE(finished.count(), 1);
    QCOMPARE(finished.at(0).at(0).toInt(), 0);
    // The CLI got the configuration itself, as JSON, not re-spelled as flags.
    QFile f(copy);
    QVERIFY(f.open(QIODevice::ReadOnly));
    std::vector<std::string> warnings;
    const core::RunConfig received =
        core::parseRunConfigJson(core::parseJson(f.readAll().toStdString(), "copy"), "copy", &warnings);
    QVERIFY(received == base);
    QVERIFY(warnings.empty());
    QVERIFY(!QFileInfo::exists(rc.arguments().at(6)));  // the temporary file is gone with the CLI
    QCOMPARE(started.count(), 2);
    QCOMPARE(started.at(0).at(1).toString(), QString("ddp"));
    QCOMPARE(started.at(1).at(1).toString(), QString("fsdp"));
    QCOMPARE(steps.count(), 4);
    QCOMPARE(steps.at(0).at(0).toInt(), 0);
    QCOMPARE(steps.at(0).at(2).toInt(), 1);
    QCOMPARE(steps.at(0).at(3).toInt(), 2);
    QCOMPARE(steps.at(0).at(4).toDouble(), 5.5);
    QCOMPARE(steps.at(0).at(5).toDouble(), 12.5);
    QCOMPARE(steps.at(2).at(0).toInt(), 1);
    QCOMPARE(steps.at(2).at(5).toDouble(), 20.0);
    QCOMPARE(done.count(), 2);
    QCOMPARE(rc.runIds(), QList<qint64>({7, 8}));  // from the run events
    const auto& s = rc.strategies();
    QCOMPARE(s.size(), 2);
    QVERIFY(s[0].status == Status::Done && s[1].status == Status::Done);
    QCOMPARE(s[0].loss, QVector<double>({5.5, 5.25}));
    QCOMPARE(s[1].stepNumbers, QVector<int>({1, 2}));
    bool other = false, summary = false, warning = false;
    for (const auto& l : log) {
      other = other || l.at(0).toString() == "not an event";
      summary = summary || l.at(0).toString() == "run 7 (ddp): completed";
      warning = warning || l.at(0).toString() == "warning: careful";
    }
    QVERIFY(other);
    QVERIFY(summary);
    QVERIFY(warning);
    QVERIFY(!rc.isRunning());
  }

  // The launch dialog's run name and repeats reach the CLI (--name, --repeats) and the controller
  // expects every run: the strategies interleaved, as compare runs them.
  void nameAndRepeatsReachTheCli() {
    const QString cli = writeScript(dir_, "fake-quiet", "printf '{\"event\":\"done\",\"run_ids\":[],\"exit\":0}'\n");
    ui::RunController rc;
    rc.setCliPath(cli);
    QSignalSpy ended(&rc, &ui::RunController::ended);
    QVERIFY(rc.start("/tmp/unused.db", core::RunConfig{}, {"ddp", "zero3"}, " sweep ", 3));
    QCOMPARE(rc.arguments().mid(7), QStringList({"--strategies", "ddp,zero3", "--name", "sweep", "--repeats", "3"}));
    QStringList expected;
    for (const auto& st : rc.strategies()) expected << st.name;
    QCOMPARE(expected, QStringList({"ddp", "zero3", "ddp", "zero3", "ddp", "zero3"}));
    QVERIFY(ended.wait(10000));
  }

  void failureCarriesTheErrorEvent() {
    const QString cli =
        writeScript(dir_, "fake-fail",
                    "echo '{\"event\":\"run\",\"run_id\":3,\"strategy\":\"zero3\",\"status\":\"running\"}'\n"
                    "echo '{\"event\":\"progress\",\"done\":1,\"total\":5,\"run_id\":3,\"strategy\":\"zero3\",\"loss\":5.5}'\n"
                    "echo '[rank 1] RuntimeError: boom' >&2\n"
                    "echo '{\"event\":\"run\",\"run_id\":3,\"strategy\":\"zero3\",\"status\":\"failed\"}'\n"
                    "echo '{\"event\":\"error\",\"message\":\"run 3 failed: rank 1 exited with code 1: RuntimeError: boom\"}'\n"
                    "echo 'a later line' >&2\n"
                    "echo '{\"event\":\"done\",\"run_ids\":[3],\"exit\":1}'\n"
                    "exit 1\n");
    ui::RunController rc;
    rc.setCliPath(cli);
    QSignalSpy failed(&rc, &ui::RunController::failed);
    QVERIFY(rc.start("/tmp/unused.db", core::RunConfig{}, {"zero3", "ddp"}));
    QVERIFY(failed.wait(10000));
    QCOMPARE(failed.at(0).at(0).toInt(), 1);
    QCOMPARE(failed.at(0).at(1).toString(), QString("run 3 failed: rank 1 exited with code 1: RuntimeError: boom"));
    QVERIFY(rc.strategies()[0].status == Status::Failed);
    QCOMPARE(rc.strategies()[0].runId, qint64(3));
    QVERIFY(rc.strategies()[1].status == Status::NotRun);

    // No CLI at all.
    ui::RunController none;
    none.setCliPath(dir_.filePath("does-not-exist"));
    QSignalSpy noneFailed(&none, &ui::RunController::failed);
    QVERIFY(!none.start("/tmp/unused.db", core::RunConfig{}, {"ddp"}));
    QCOMPARE(noneFailed.count(), 1);
    QCOMPARE(noneFailed.at(0).at(0).toInt(), -1);
    QVERIFY(!none.isRunning());
  }

  // The real CLI refuses a configuration before launching anything: its error event names the key,
  // and the controller hands it on (the dialog would mark that field).
  void invalidConfigComesBackWithItsKey() {
    if (cliPath().isEmpty() || !QFileInfo(cliPath()).isExecutable()) QSKIP("shardscope-cli is not built");
    ui::RunController rc;
    rc.setCliPath(cliPath());
    QSignalSpy failed(&rc, &ui::RunController::failed);
    QSignalSpy started(&rc, &ui::RunController::strategyStarted);
    core::RunConfig base;
    base.worldSize = 3;
    base.nnodes = 2;  // does not divide world_size
    QVERIFY(rc.start(dir_.filePath("never.db"), base, {"ddp"}));
    QVERIFY(failed.wait(30000));
    QCOMPARE(failed.at(0).at(0).toInt(), 1);
    QVERIFY2(failed.at(0).at(1).toString().contains("nnodes"), qPrintable(failed.at(0).at(1).toString()));
    QCOMPARE(rc.errorKey(), QString("nnodes"));
    QCOMPARE(started.count(), 0);
    QVERIFY(!QFileInfo::exists(dir_.filePath("never.db")) ||
            core::TraceStore(dir_.filePath("never.db").toStdString()).runs().empty());
  }

  void cliIgnoringSigtermIsKilledWithItsRanks() {
    // A stand-in that ignores SIGTERM and has a "rank" in its own process group.
    const QString cli = writeScript(dir_, "fake-stuck",
                                    "trap '' TERM\n"
                                    "echo '== ddp: tiny, 2 ranks, 5 steps' >&2\n"
                                    "setsid sleep 300 &\n"
                                    "echo '{\"event\":\"run\",\"run_id\":1,\"strategy\":\"ddp\",\"status\":\"running\"}'\n"
                                    "echo '{\"event\":\"progress\",\"done\":1,\"total\":5,\"run_id\":1,\"strategy\":\"ddp\"}'\n"
                                    "exec sleep 300\n");
    ui::RunController rc;
    rc.setCliPath(cli);
    rc.setKillGraceMs(700);
    QSignalSpy steps(&rc, &ui::RunController::stepProgress);
    QSignalSpy cancelled(&rc, &ui::RunController::cancelled);
    QVERIFY(rc.start("/tmp/unused.db", core::RunConfig{}, {"ddp"}));
    QVERIFY(steps.wait(10000));
    const qint64 pid = rc.processId();
    QVERIFY(pid > 0);
    QList<qint64> rank;
    QVERIFY(waitFor(
        [&] {
          rank.clear();
          for (const auto& c : childrenOf(pid))
            if (c.comm == "sleep") rank << c.pid;
          return !rank.isEmpty();
        },
        5000));
    QElapsedTimer t;
    t.start();
    rc.cancel();
    QVERIFY(rc.isCancelling());
    QVERIFY(cancelled.wait(10000));
    QVERIFY(t.elapsed() >= 600);  // SIGTERM first, the kill after the grace period
    QVERIFY(rc.strategies()[0].status == Status::Cancelled);
    QVERIFY(waitFor([&] { return !alive(pid); }, 3000));
    for (qint64 r : rank) QVERIFY2(waitFor([&] { return !alive(r); }, 3000), "the rank survived");
  }

  void realComparisonRunsAndReportsEveryStep() {
    REQUIRE_RUNTIME();
    const QString db = dir_.filePath("compare.db");
    // The arguments come from the launch dialog, as in the app.
    ui::LaunchDialog dialog;
    dialog.setStrategies({"ddp", "fsdp"});
    dialog.setValue("model", "tiny");
    dialog.setValue("steps", "4");
    dialog.setValue("world_size", "2");
    QVERIFY(dialog.isValid());

    ui::RunController rc;
    rc.setCliPath(cliPath());
    ui::LaunchProgressWidget view;
    view.setController(&rc);
    view.resize(800, 500);
    view.show();
    QSignalSpy strategyStarted(&rc, &ui::RunController::strategyStarted);
    QSignalSpy steps(&rc, &ui::RunController::stepProgress);
    QSignalSpy done(&rc, &ui::RunController::strategyFinished);
    QSignalSpy finished(&rc, &ui::RunController::finished);
    QSignalSpy failed(&rc, &ui::RunController::failed);
    QSignalSpy ended(&rc, &ui::RunController::ended);
    // The GUI thread stays free: a timer keeps firing while the comparison runs.
    QElapsedTimer sinceTick;
    qint64 worstGap = 0;
    QTimer tick;
    tick.setInterval(20);
    connect(&tick, &QTimer::timeout, this, [&] { worstGap = std::max(worstGap, sinceTick.restart()); });
    QVERIFY(rc.start(db, dialog.config(), dialog.strategies()));
    sinceTick.start();
    tick.start();
    QVERIFY(rc.isRunning());
    QVERIFY(ended.wait(240000));
    tick.stop();
    QVERIFY2(failed.isEmpty(), failed.isEmpty() ? "" : qPrintable(failed.at(0).at(1).toString()));
    QCOMPARE(finished.count(), 1);
    QCOMPARE(rc.exitCode(), 0);
    QVERIFY2(worstGap < 1000, qPrintable(QString("GUI thread blocked for %1 ms").arg(worstGap)));
    QCOMPARE(strategyStarted.count(), 2);
    // Rank 0's progress: steps 1..4 of 4 for each strategy, in order, with a loss and a step time.
    QCOMPARE(steps.count(), 8);
    for (int i = 0; i < steps.count(); ++i) {
      const auto& a = steps.at(i);
      QCOMPARE(a.at(0).toInt(), i / 4);
      QCOMPARE(a.at(1).toString(), QString(i / 4 == 0 ? "ddp" : "fsdp"));
      QCOMPARE(a.at(2).toInt(), i % 4 + 1);
      QCOMPARE(a.at(3).toInt(), 4);
      QVERIFY(std::isfinite(a.at(4).toDouble()) && a.at(4).toDouble() > 0);
      QVERIFY(a.at(5).toDouble() > 0);
    }
    QCOMPARE(done.count(), 2);
    const QList<qint64> ids = rc.runIds();
    QCOMPARE(ids.size(), 2);
    // The runs are in the database, completed, with their strategies.
    core::TraceStore store(db.toStdString(), core::Database::Mode::ReadOnly);
    const auto runs = store.runs();
    QCOMPARE(runs.size(), std::size_t(2));
    for (int i = 0; i < 2; ++i) {
      const auto r = store.run(core::RunId{ids[i]});
      QVERIFY(r.has_value());
      QCOMPARE(QString::fromStdString(r->strategy), QString(i == 0 ? "ddp" : "fsdp"));
      QVERIFY(r->status == core::RunStatus::Completed);
      QCOMPARE(r->worldSize, 2);
      QVERIFY(!store.ranks(core::RunId{ids[i]}).empty());
    }
    // The progress view shows it all.
    QTest::qWait(200);
    QCOMPARE(view.overallBar()->value(), view.overallBar()->maximum());
    QCOMPARE(view.strategyBar(1)->value(), 4);
    QCOMPARE(view.lossPlot()->graphCount(), 2);
    QCOMPARE(view.lossPlot()->graph(1)->dataCount(), 4);
    QCOMPARE(view.stepTimePlot()->graph(0)->dataCount(), 4);
    QVERIFY(!view.cancelButton()->isEnabled());
  }

  void cancelStopsTheRanks() {
    REQUIRE_RUNTIME();
    const QString db = dir_.filePath("cancel.db");
    ui::RunController rc;
    rc.setCliPath(cliPath());
    ui::LaunchProgressWidget view;
    view.setController(&rc);
    QSignalSpy steps(&rc, &ui::RunController::stepProgress);
    QSignalSpy cancelled(&rc, &ui::RunController::cancelled);
    QSignalSpy failed(&rc, &ui::RunController::failed);
    core::RunConfig base;
    base.model = "tiny";
    base.steps = 100000;
    base.worldSize = 2;
    QVERIFY(rc.start(db, base, {"zero3", "ddp"}));
    const qint64 cli = rc.processId();
    QVERIFY(cli > 0);
    QVERIFY(waitFor([&] { return steps.count() >= 2; }, 120000));
    // The ranks are the CLI's children.
    QList<qint64> workers;
    QVERIFY(waitFor(
        [&] {
          workers.clear();
          for (const auto& c : childrenOf(cli))
            if (c.comm.startsWith("shardscope-work")) workers << c.pid;
          return workers.size() == 2;
        },
        10000));
    QVERIFY(view.cancelButton()->isEnabled());
    QTest::mouseClick(view.cancelButton(), Qt::LeftButton);  // as the user does
    QVERIFY(rc.isCancelling());
    QVERIFY(cancelled.wait(30000));
    QVERIFY(failed.isEmpty());
    QCOMPARE(cancelled.at(0).at(0).toInt(), 130);  // the CLI stopped its ranks itself
    QCOMPARE(rc.exitCode(), 130);
    QVERIFY(!alive(cli));
    for (qint64 w : workers) QVERIFY2(waitFor([&] { return !alive(w); }, 5000), "a worker rank survived the cancel");
    QVERIFY(childrenOf(cli).isEmpty());
    QVERIFY(rc.strategies()[0].status == Status::Cancelled);
    QVERIFY(rc.strategies()[1].status == Status::NotRun);
    // The run is kept, marked cancelled; the second strategy never started.
    core::TraceStore store(db.toStdString(), core::Database::Mode::ReadOnly);
    const auto runs = store.runs();
    QCOMPARE(runs.size(), std::size_t(1));
    QVERIFY(runs[0].status == core::RunStatus::Cancelled);
    QCOMPARE(QString::fromStdString(runs[0].strategy), QString("zero3"));
  }

 private:
  QTemporaryDir dir_;
};

QTEST_MAIN(TestRunController)
#include "tst_run_controller.moc"
