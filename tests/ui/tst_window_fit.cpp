// The main window on real screens: at 1366 x 768 (and 1280 x 720) every page, the Log and Launch
// docks and a several-run selection fit without the window growing past the screen; what does not
// fit scrolls (each page sits in a scroll area) and the docks can be collapsed.
#include <QDockWidget>
#include <QScreen>
#include <QScrollArea>
#include <QScrollBar>
#include <QStandardPaths>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QtTest>

#include <functional>
#include <memory>
#include <vector>

#include "core/storage/trace_store.h"
#include "tests/common/test_support.h"
#include "tests/ui/ui_fixture.h"
#include "ui/main/main_window.h"
#include "ui/main/run_browser.h"
#include "ui/main/about_dialog.h"
#include "ui/pages/page.h"
#include "ui/report/export_dialog.h"

#if __has_include("ui/launch/launch_dialog.h")
#include "ui/launch/launch_dialog.h"
#define HAVE_LAUNCH_DIALOG 1
#endif

using namespace shardscope;

namespace {

std::string makeDb(const QTemporaryDir& dir) {
  const std::string path = test::pathIn(dir, "runs.db");
  core::TraceStore store(path);
  for (const char* s : {"ddp", "fsdp", "zero3"}) {
    test::RunSpec spec;
    spec.name = std::string(s) + " with a long descriptive run name for the table";
    spec.strategy = s;
    spec.memorySamples = 50;
    const core::RunId id = test::writeRun(store, spec);
    auto run = *store.run(id);
    run.configJson = std::string("{\"strategy\":\"") + s + "\",\"world_size\":2}";
    store.updateRun(run);
  }
  return path;
}

}  // namespace

class TestWindowFit : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void initTestCase() { QStandardPaths::setTestModeEnabled(true); }

  void everyPageFitsTheScreen_data() {
    QTest::addColumn<int>("width");
    QTest::addColumn<int>("height");
    QTest::newRow("1366x768") << 1366 << 768;
    QTest::newRow("1280x720") << 1280 << 720;
  }

  void everyPageFitsTheScreen() {
    QFETCH(int, width);
    QFETCH(int, height);
    QTemporaryDir dir;
    const std::string path = makeDb(dir);
    ui::MainWindow w;
    w.resize(width, height);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QVERIFY(w.openDatabase(QString::fromStdString(path)));
    QVERIFY(QTest::qWaitFor([&] { return w.runModel()->runCount() == 3 && !w.busy(); }, 20000));
    w.selectRuns({core::RunId{1}, core::RunId{2}, core::RunId{3}});
    w.applySelectionNow();
    for (auto* dock : w.findChildren<QDockWidget*>()) dock->show();
    for (auto* p : w.pages()) {
      QVERIFY(w.showPage(p->pageId()));
      QVERIFY(QTest::qWaitFor([&] { return !w.busy(); }, 20000));
      QTest::qWait(50);
      const QSize hint = w.minimumSizeHint();
      qInfo("%s: window %dx%d, minimum hint %dx%d, page minimum hint %dx%d", qPrintable(p->pageId()), w.width(), w.height(),
            hint.width(), hint.height(), p->minimumSizeHint().width(), p->minimumSizeHint().height());
      for (QWidget* part :
           {static_cast<QWidget*>(w.runBrowser()), static_cast<QWidget*>(w.logDock()), static_cast<QWidget*>(w.launchDock())})
        if (part)
          qInfo("  %s minimum hint %dx%d", qPrintable(part->objectName()), part->minimumSizeHint().width(),
                part->minimumSizeHint().height());
      QVERIFY2(hint.width() <= width && hint.height() <= height, qPrintable(p->pageId()));
      QVERIFY2(w.width() <= width && w.height() <= height, qPrintable(p->pageId()));
      // Usable, not only shown: the page needs no sideways scrolling next to the run list at its
      // default width (it may scroll down).
      auto* scroll = qobject_cast<QScrollArea*>(p->parentWidget() ? p->parentWidget()->parentWidget() : nullptr);
      QVERIFY2(scroll, qPrintable(p->pageId()));
      qInfo("  viewport %dx%d", scroll->viewport()->width(), scroll->viewport()->height());
      if (qEnvironmentVariableIsSet("FIT_DUMP")) {
        std::function<void(QWidget*, int)> dump = [&](QWidget* x, int depth) {
          for (auto* c : x->findChildren<QWidget*>(QString(), Qt::FindDirectChildrenOnly)) {
            if (!c->isVisible()) continue;
            const QSize m = c->minimumSizeHint().expandedTo(c->minimumSize());
            if (m.width() > qEnvironmentVariableIntValue("FIT_MIN")) {
              qInfo("%*s%s %s %dx%d", depth * 2, "", c->metaObject()->className(), qPrintable(c->objectName()), m.width(),
                    m.height());
              dump(c, depth + 1);
            }
          }
        };
        dump(p, 1);
      }
      if (!qEnvironmentVariableIsSet("FIT_DUMP"))
        QVERIFY2(p->minimumSizeHint().width() <= scroll->viewport()->width(), qPrintable(p->pageId()));
      if (!qEnvironmentVariableIsSet("FIT_DUMP")) QVERIFY2(!scroll->horizontalScrollBar()->isVisible(), qPrintable(p->pageId()));
    }
  }

  // The dialogs of the app fit a 1366 x 768 screen (title bar and panel left aside: 700 px high):
  // their minimum size, and the size they open at is at most the screen's.
  void dialogsFitTheScreen() {
    QTemporaryDir dir;
    const std::string path = makeDb(dir);
    std::vector<std::unique_ptr<QDialog>> dialogs;
#ifdef HAVE_LAUNCH_DIALOG
    dialogs.push_back(std::make_unique<ui::LaunchDialog>());
#endif
    dialogs.push_back(std::make_unique<ui::ExportReportDialog>(
        QString::fromStdString(path), QList<core::RunId>{core::RunId{1}, core::RunId{2}, core::RunId{3}}));
    dialogs.push_back(std::make_unique<ui::AboutDialog>());
    for (auto& d : dialogs) {
      d->show();
      QVERIFY(QTest::qWaitForWindowExposed(d.get()));
      const QSize hint = d->minimumSizeHint().expandedTo(d->minimumSize());
      qInfo("%s: minimum %dx%d, shown %dx%d", d->metaObject()->className(), hint.width(), hint.height(), d->width(), d->height());
      QVERIFY2(hint.width() <= 1366 && hint.height() <= 700, d->metaObject()->className());
      // Opened no larger than the screen it is on (the offscreen one is 800 x 800).
      const QSize screen = d->screen()->availableGeometry().size();
      QVERIFY2(d->width() <= screen.width() && d->height() <= screen.height(), d->metaObject()->className());
    }
  }
};

QTEST_MAIN(TestWindowFit)
#include "tst_window_fit.moc"
