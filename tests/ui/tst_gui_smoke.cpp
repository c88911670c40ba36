// Smoke test of the real app: `shardscope --open DB --page P --screenshot OUT.png` started as a
// process (offscreen) on a real database (imported Kineto traces and runtime-style runs) writes a PNG
// of the requested size that is not blank, and exits 0; bad arguments and bad files exit non-zero
// with a message on stderr.
#include <QImage>
#include <QProcess>
#include <QSet>
#include <QTemporaryDir>
#include <QtTest>

#include <tuple>

#include "core/import/kineto_importer.h"
#include "core/storage/trace_store.h"
#include "tests/common/test_support.h"
#include "tests/tools/kineto_generator.h"
#include "tests/ui/ui_fixture.h"

using namespace shardscope;

namespace {

struct Result {
  int exitCode = -1;
  QString stderrText;
};

}  // namespace

class TestGuiSmoke : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;
  QString db_;

  Result runApp(const QStringList& args) {
    QProcess p;
    auto env = QProcessEnvironment::systemEnvironment();
    env.insert("QT_QPA_PLATFORM", "offscreen");
    env.insert("XDG_CONFIG_HOME", dir_.filePath("config"));  // never the user's settings
    p.setProcessEnvironment(env);
    p.start(SHARDSCOPE_GUI, args);
    if (!p.waitForFinished(120000)) {
      p.kill();
      p.waitForFinished();
      return {};
    }
    Result r;
    r.exitCode = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
    r.stderrText = QString::fromLocal8Bit(p.readAllStandardError());
    return r;
  }

  static int distinctColours(const QImage& img) {
    QSet<QRgb> seen;
    for (int y = 0; y < img.height(); y += 7)
      for (int x = 0; x < img.width(); x += 7) seen.insert(img.pixel(x, y));
    return static_cast<int>(seen.size());
  }

 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    db_ = dir_.filePath("smoke.db");
    core::TraceStore store(db_.toStdString());
    // Run 1: an imported two-rank Kineto job.
    test::KinetoGenOptions opt;
    opt.events = 20000;
    opt.worldSize = 2;
    std::vector<std::string> files;
    for (int r = 0; r < 2; ++r) {
      opt.rank = r;
      files.push_back(test::pathIn(dir_, "rank" + std::to_string(r) + ".json.gz"));
      test::generateKinetoTrace(files.back(), opt);
    }
    core::KinetoImportOptions io;
    io.runName = "job42";
    QCOMPARE(core::importKineto(store, files, io).runIds.size(), std::size_t(1));
    // Runs 2-3: runtime-style runs.
    for (const char* s : {"ddp", "fsdp"}) {
      test::RunSpec spec;
      spec.name = s;
      spec.strategy = s;
      test::writeRun(store, spec);
    }
  }

  // --help and --version answer without a display (a cluster login node, a CI container); without
  // a display the app says what to do instead of aborting in Qt's platform plugin.
  void helpAndVersionWithoutADisplay() {
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    for (const char* v : {"DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"}) env.remove(v);
    auto runGui = [&](const QStringList& args) {
      QProcess p;
      p.setProcessEnvironment(env);
      p.start(SHARDSCOPE_GUI, args);
      [&] { QVERIFY(p.waitForFinished(30000)); }();
      return std::tuple{p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1, QString::fromUtf8(p.readAllStandardOutput()),
                        QString::fromUtf8(p.readAllStandardError())};
    };
    auto [code, out, err] = runGui({"--version"});
    QCOMPARE(code, 0);
    QVERIFY2(out.contains(SHARDSCOPE_VERSION), qPrintable(out + err));
    std::tie(code, out, err) = runGui({"--help"});
    QCOMPARE(code, 0);
    QVERIFY2(out.contains("--screenshot") && out.contains("--open"), qPrintable(out));
    std::tie(code, out, err) = runGui({"--open", dir_.filePath("x.db")});
    QCOMPARE(code, 1);
    QVERIFY2(err.contains("no display") && err.contains("shardscope-cli"), qPrintable(err));
  }

  void screenshotOfEachPage_data() {
    QTest::addColumn<QString>("page");
    QTest::addColumn<QStringList>("extra");
    QTest::newRow("overview (latest run)") << "overview" << QStringList{};
    QTest::newRow("overview of the import") << "overview" << QStringList{"--run", "1"};
    QTest::newRow("compare (latest 3)") << "compare" << QStringList{};
    QTest::newRow("compare (--run 3 1)") << "compare" << QStringList{"--run", "3", "1"};
    QTest::newRow("memory") << "memory" << QStringList{"--run", "2"};
    QTest::newRow("communication") << "communication" << QStringList{"--run", "1"};
    QTest::newRow("timeline") << "timeline" << QStringList{"--run", "2,3"};
  }

  void screenshotOfEachPage() {
    QFETCH(QString, page);
    QFETCH(QStringList, extra);
    const QString out = dir_.filePath(QStringLiteral("shot-%1-%2.png").arg(page).arg(extra.join("")));
    const Result r = runApp(QStringList{"--open", db_, "--page", page, "--screenshot", out, "--size", "1024x700"} + extra);
    QVERIFY2(r.exitCode == 0, qPrintable(QStringLiteral("exit %1: %2").arg(r.exitCode).arg(r.stderrText)));
    QVERIFY(QFileInfo(out).size() > 10000);
    const QImage img(out);
    QCOMPARE(img.size(), QSize(1024, 700));
    QVERIFY(distinctColours(img) > 20);  // a drawn window, not a blank one
  }

  void errorsExitNonZero() {
    const QString out = dir_.filePath("never.png");
    Result r = runApp({"--open", dir_.filePath("missing.db"), "--screenshot", out});
    QCOMPARE(r.exitCode, 3);
    QVERIFY2(r.stderrText.contains("no such file"), qPrintable(r.stderrText));
    QVERIFY(!QFileInfo::exists(dir_.filePath("missing.db")));  // not created by a screenshot

    const std::string garbage = test::writeFile(dir_, "garbage.db", std::string(8192, 'x'));
    r = runApp({"--open", QString::fromStdString(garbage), "--screenshot", out});
    QCOMPARE(r.exitCode, 3);
    QVERIFY2(r.stderrText.contains("not a SQLite database"), qPrintable(r.stderrText));

    r = runApp({"--open", db_, "--page", "simulator", "--screenshot", out});
    QCOMPARE(r.exitCode, 2);
    QVERIFY(r.stderrText.contains("unknown page"));

    r = runApp({"--open", db_, "--run", "99", "--screenshot", out});
    QCOMPARE(r.exitCode, 2);
    QVERIFY(r.stderrText.contains("no run with id 99"));

    r = runApp({"--open", db_, "--screenshot", out, "--size", "big"});
    QCOMPARE(r.exitCode, 2);
    QVERIFY(r.stderrText.contains("--size"));

    r = runApp({"--open", db_, "stray", "--screenshot", out});
    QCOMPARE(r.exitCode, 2);
    QVERIFY(r.stderrText.contains("unexpected argument"));

    r = runApp({"--screenshot", out});
    QCOMPARE(r.exitCode, 2);
    QVERIFY(r.stderrText.contains("--open"));
    QVERIFY(!QFileInfo::exists(out));
  }
};

QTEST_GUILESS_MAIN(TestGuiSmoke)
#include "tst_gui_smoke.moc"
