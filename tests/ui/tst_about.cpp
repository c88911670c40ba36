// Desktop integration, offscreen: Help > About shows the versions of Shardscope, Qt (compile and run
// time), SQLite (the library loaded), QCustomPlot and the runtime's LibTorch and CUDA when built with
// them; the icons are compiled in (every hicolor size of the application icon, page and toolbar
// icons); the real app opens a FILE.db given as its argument, and the worker answers --version.
#include <QAction>
#include <QApplication>
#include <QClipboard>
#include <QImage>
#include <QLabel>
#include <QProcess>
#include <QPushButton>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QtTest>

#include <sqlite3.h>

#include "core/storage/trace_store.h"
#include "shardscope/build_info.h"
#include "tests/ui/ui_fixture.h"
#include "ui/main/about_dialog.h"
#include "ui/main/app_icons.h"
#include "ui/main/main_window.h"
#include "ui/pages/page.h"

using namespace shardscope;

namespace {

struct Result {
  int exitCode = -1;
  QString out, err;
};

Result runProgram(const QString& program, const QStringList& args, const QString& configDir) {
  QProcess p;
  auto env = QProcessEnvironment::systemEnvironment();
  env.insert("QT_QPA_PLATFORM", "offscreen");
  env.insert("XDG_CONFIG_HOME", configDir);  // never the user's settings
  p.setProcessEnvironment(env);
  p.start(program, args);
  if (!p.waitForFinished(120000)) {
    p.kill();
    p.waitForFinished();
    return {};
  }
  return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1, QString::fromUtf8(p.readAllStandardOutput()),
          QString::fromUtf8(p.readAllStandardError())};
}

}  // namespace

class TestAbout : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void versionsInTheAboutBox() {
    ui::MainWindow w;
    QAction* about = w.action("actionAbout");
    QVERIFY(about);
    QVERIFY(!about->icon().isNull());
    about->trigger();
    auto* dialog = w.findChild<ui::AboutDialog*>();
    QVERIFY(dialog);
    QVERIFY(dialog->isVisible());
    const QString text = dialog->versionsLabel()->text();
    QCOMPARE(text, dialog->versionsText());
    QVERIFY2(text.contains(QStringLiteral("Shardscope " SHARDSCOPE_VERSION)), qPrintable(text));
    // Qt at run time and at compile time; SQLite as loaded (asked here of the library itself).
    QVERIFY2(text.contains(QStringLiteral("Qt %1 (built with " QT_VERSION_STR ")").arg(qVersion())), qPrintable(text));
    QVERIFY2(text.contains(QStringLiteral("SQLite %1").arg(sqlite3_libversion())), qPrintable(text));
    QVERIFY2(text.contains("QCustomPlot 2."), qPrintable(text));
    const QString torch = QStringLiteral(SHARDSCOPE_BUILD_TORCH_VERSION);
    if (torch.isEmpty())
      QVERIFY2(text.contains("LibTorch: not in this build"), qPrintable(text));
    else
      QVERIFY2(text.contains("LibTorch " + torch + (SHARDSCOPE_BUILD_TORCH_CUDA ? " (CUDA" : " (CPU")), qPrintable(text));
    const QString cuda = QStringLiteral(SHARDSCOPE_BUILD_CUDA_VERSION);
    QVERIFY2(text.contains(cuda.isEmpty() ? QStringLiteral("CUDA/CUPTI: not in this build") : "CUDA " + cuda + ", CUPTI"),
             qPrintable(text));
    // One line per component; Copy Versions copies exactly them.
    QCOMPARE(text.split('\n').size(), 6);
    auto* copy = dialog->findChild<QPushButton*>("copyVersions");
    QVERIFY(copy);
    copy->click();
    QCOMPARE(QApplication::clipboard()->text(), text);
    // A second Help > About raises the open box instead of stacking another.
    about->trigger();
    QCOMPARE(w.findChildren<ui::AboutDialog*>().size(), 1);
    dialog->close();
    QTRY_COMPARE(w.findChildren<ui::AboutDialog*>().size(), 0);  // deleted on close
  }

  void iconsAreCompiledIn() {
    ui::MainWindow w;
    // The window icon: the application icon at every hicolor size, each a real picture.
    const QIcon icon = w.windowIcon();
    QVERIFY(!icon.isNull());
    const QList<QSize> sizes = icon.availableSizes();
    for (int s : {16, 22, 24, 32, 48, 64, 128, 256}) {
      QVERIFY2(sizes.contains(QSize(s, s)), qPrintable(QString::number(s)));
      const QImage img = icon.pixmap(QSize(s, s)).toImage();
      QCOMPARE(img.size(), QSize(s, s));
      QVERIFY(img.pixelColor(s / 2, s / 2).alpha() > 0);  // the middle is drawn, not transparent
      QCOMPARE(img.pixelColor(0, 0).alpha(), 0);          // the rounded corner is not
    }
    // Every page tab and View menu entry, and the toolbar's actions, carry an icon.
    auto* tabs = w.findChild<QTabWidget*>("pageTabs");
    QVERIFY(tabs);
    QCOMPARE(tabs->count(), static_cast<int>(w.pages().size()));
    for (int i = 0; i < tabs->count(); ++i) {
      QVERIFY2(!tabs->tabIcon(i).isNull(), qPrintable(tabs->tabText(i)));
      QVERIFY(!w.action("actionPage_" + w.pages()[static_cast<std::size_t>(i)]->pageId())->icon().isNull());
    }
    for (const char* name : {"actionOpen", "actionImport", "actionLaunch", "actionRefresh"})
      QVERIFY2(!w.action(name)->icon().isNull(), name);
    // Large and high-DPI: the 32 px picture is there.
    QCOMPARE(ui::actionIcon("view-refresh").pixmap(QSize(32, 32)).size(), QSize(32, 32));
    QVERIFY(ui::actionIcon("no-such-icon").isNull());
    QVERIFY(ui::pageIcon("no-such-page").isNull());
  }

  // `shardscope FILE.db` (as the desktop entry starts it) opens the file like --open.
  void appOpensItsArgument() {
    QTemporaryDir dir;
    const QString db = dir.filePath("arg.db");
    {
      core::TraceStore store(db.toStdString());
      test::RunSpec spec;
      test::writeRun(store, spec);
    }
    const QString png = dir.filePath("arg.png");
    const Result r =
        runProgram(SHARDSCOPE_GUI, {db, "--screenshot", png, "--size", "800x600", "--no-json"}, dir.filePath("config"));
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    QCOMPARE(QImage(png).size(), QSize(800, 600));
    const Result two = runProgram(SHARDSCOPE_GUI, {db, dir.filePath("other.db"), "--screenshot", png}, dir.filePath("config"));
    QCOMPARE(two.exitCode, 2);
    QVERIFY2(two.err.contains("unexpected argument") && two.err.contains("one database at a time"), qPrintable(two.err));
    const Result none = runProgram(SHARDSCOPE_GUI, {"--screenshot", png}, dir.filePath("config"));
    QCOMPARE(none.exitCode, 2);
    QVERIFY2(none.err.contains("needs a database"), qPrintable(none.err));
  }

  void workerAnswersVersion() {
#ifdef SHARDSCOPE_WORKER
    QTemporaryDir dir;
    const Result r = runProgram(SHARDSCOPE_WORKER, {"--version"}, dir.filePath("config"));
    QCOMPARE(r.exitCode, 0);
    QVERIFY2(r.out.startsWith(QStringLiteral("shardscope-worker " SHARDSCOPE_VERSION "\n")), qPrintable(r.out));
    QVERIFY2(r.out.contains(QStringLiteral("LibTorch " SHARDSCOPE_BUILD_TORCH_VERSION)), qPrintable(r.out));
#else
    QSKIP("shardscope-worker is not built (no LibTorch)");
#endif
  }
};

QTEST_MAIN(TestAbout)
#include "tst_about.moc"
