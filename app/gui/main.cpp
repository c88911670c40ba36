// shardscope: the desktop app. `shardscope FILE.db` (or --open) opens a database; without one, the
// last database opened is reopened. `--screenshot OUT.png` renders a page without interaction and
// exits (docs and checks; works with QT_QPA_PLATFORM=offscreen).
#include <QApplication>
#include <QCommandLineParser>
#include <QRegularExpression>

#include <cstdio>
#include <string_view>

#include "core/storage/open_guard.h"
#include "ui/main/app_icons.h"
#include "ui/main/main_window.h"
#include "ui/main/screenshot.h"
#include "ui/pages/page_factory.h"

namespace {

int usage(const QString& message) {
  std::fprintf(stderr, "shardscope: %s\n", message.toLocal8Bit().constData());
  return 2;
}

// The command line (built for the GUI application, or for a plain QCoreApplication when only
// --help or --version is asked for, which must work without a display).
struct CommandLine {
  QCommandLineParser parser;
  QCommandLineOption open{QStringLiteral("open"), QStringLiteral("Open (or create) a Shardscope database."),
                          QStringLiteral("FILE.db")};
  QCommandLineOption page{QStringLiteral("page"),
                          QStringLiteral("Page to show: overview, compare, timeline, memory, communication, kernels, estimator."),
                          QStringLiteral("PAGE")};
  QCommandLineOption run{QStringLiteral("run"),
                         QStringLiteral("Select this run (repeat, or give a comma-separated list; the first is the baseline)."),
                         QStringLiteral("ID")};
  QCommandLineOption screenshot{QStringLiteral("screenshot"),
                                QStringLiteral("Render the page to a PNG file and exit (needs --open; default runs: the latest, "
                                               "the latest 3 for compare)."),
                                QStringLiteral("OUT.png")};
  QCommandLineOption size{QStringLiteral("size"), QStringLiteral("Window size for --screenshot (default 1600x1000)."),
                          QStringLiteral("WxH"), QStringLiteral("1600x1000")};
  QCommandLineOption timeout{QStringLiteral("timeout"), QStringLiteral("Seconds --screenshot waits for the page (default 60)."),
                             QStringLiteral("S"), QStringLiteral("60")};
  QCommandLineOption range{QStringLiteral("range"),
                           QStringLiteral("Time window to show, ms after the start of the first run's first step (timeline and "
                                          "memory pages share it), e.g. 0:250."),
                           QStringLiteral("START:END")};
  QCommandLineOption collapse{QStringLiteral("collapse-ranks"),
                              QStringLiteral("Timeline: show these ranks collapsed (comma-separated)."),
                              QStringLiteral("R,R,...")};
  QCommandLineOption hideLanes{QStringLiteral("hide-lanes"),
                               QStringLiteral("Timeline: hide lanes of these kinds: gpu, cpu, comm, group, counter, python."),
                               QStringLiteral("KIND,...")};
  QCommandLineOption timelineView{QStringLiteral("timeline-view"),
                                  QStringLiteral("Timeline with several runs: one (a run's own timeline), step (the same counted "
                                                 "step of each run) or stacked (each run's counted steps)."),
                                  QStringLiteral("VIEW")};
  QCommandLineOption step{QStringLiteral("step"), QStringLiteral("Timeline step view: which counted step (1 = the first)."),
                          QStringLiteral("K")};
  QCommandLineOption memoryCategories{QStringLiteral("memory-categories"),
                                      QStringLiteral("Memory page: show this rank's memory by category over time (runs of "
                                                     "Shardscope's runtime)."),
                                      QStringLiteral("RANK")};
  QCommandLineOption noJson{QStringLiteral("no-json"), QStringLiteral("--screenshot writes no OUT.json beside the picture.")};
  CommandLine() {
    parser.setApplicationDescription(QStringLiteral("Profiler and strategy explorer for sharded training"));
    parser.addHelpOption();
    parser.addVersionOption();
    parser.addOptions(
        {open, page, run, screenshot, size, timeout, range, collapse, hideLanes, timelineView, step, memoryCategories, noJson});
    parser.addPositionalArgument(QStringLiteral("file"),
                                 QStringLiteral("A database to open, as --open (without one: the last database opened)."),
                                 QStringLiteral("[FILE.db]"));
  }
};

void setNames() {
  QCoreApplication::setApplicationName(QStringLiteral("Shardscope"));
  QCoreApplication::setOrganizationName(QStringLiteral("Shardscope"));
  QCoreApplication::setApplicationVersion(QStringLiteral(SHARDSCOPE_VERSION));
}

}  // namespace

int main(int argc, char** argv) {
  // Qt's file dialogs read every file of a folder they list (MIME types): the open guard refuses
  // the open database's files there, and the app must go on (a debug build would otherwise abort
  // when the user browses to the database's folder). SHARDSCOPE_OPEN_GUARD=abort still aborts.
  if (qEnvironmentVariableIsEmpty("SHARDSCOPE_OPEN_GUARD"))
    shardscope::core::setOpenGuardMode(shardscope::core::OpenGuardMode::Refuse);
  // --help and --version print and exit before any window system is touched (no display needed).
  for (int i = 1; i < argc; ++i) {
    const std::string_view a(argv[i]);
    if (a == "--help" || a == "-h" || a == "-?" || a == "--help-all" || a == "--version" || a == "-v") {
      QCoreApplication core(argc, argv);
      setNames();
      CommandLine cl;
      cl.parser.process(core);  // prints and exits
      return 0;
    }
  }
  // Without a display Qt would abort with a plugin message: say what to do instead.
  if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM") && qEnvironmentVariableIsEmpty("DISPLAY") &&
      qEnvironmentVariableIsEmpty("WAYLAND_DISPLAY")) {
    std::fprintf(stderr,
                 "shardscope: no display (DISPLAY and WAYLAND_DISPLAY are unset). The desktop app needs one; without it, "
                 "use shardscope-cli, or QT_QPA_PLATFORM=offscreen shardscope --open FILE.db --screenshot OUT.png\n");
    return 1;
  }
  QApplication app(argc, argv);
  setNames();
  QGuiApplication::setDesktopFileName(QStringLiteral("org.shardscope.Shardscope"));
  QApplication::setWindowIcon(shardscope::ui::appIcon());

  CommandLine cl;
  QCommandLineParser& parser = cl.parser;
  const QCommandLineOption &open = cl.open, &page = cl.page, &run = cl.run, &screenshot = cl.screenshot, &size = cl.size,
                           &timeout = cl.timeout;
  parser.process(app);

  QList<shardscope::core::RunId> runs;
  QStringList runValues = parser.values(run);
  QString dbFile = parser.value(open);
  // `--run 1 2 3`: the ids after the first come as positional arguments; anything else is the
  // database to open (`shardscope FILE.db`, as the desktop entry starts it).
  static const QRegularExpression idsRe(QStringLiteral("^[0-9][0-9,]*$"));
  for (const QString& extra : parser.positionalArguments()) {
    if (!runValues.isEmpty() && idsRe.match(extra).hasMatch()) {
      runValues << extra;
      continue;
    }
    if (!dbFile.isEmpty())
      return usage(
          QStringLiteral("unexpected argument '%1': one database at a time, and '%2' is given (see --help)").arg(extra, dbFile));
    dbFile = extra;
  }
  for (const QString& v : runValues) {
    for (const QString& part : v.split(QLatin1Char(','), Qt::SkipEmptyParts)) {
      bool ok = false;
      const qlonglong id = part.trimmed().toLongLong(&ok);
      if (!ok || id <= 0) return usage(QStringLiteral("--run expects run ids (positive integers), got '%1'").arg(part));
      runs << shardscope::core::RunId{id};
    }
  }
  const QString pageId = parser.value(page);
  if (!pageId.isEmpty()) {
    const auto& ids = shardscope::ui::pageIds();
    if (std::find(ids.begin(), ids.end(), pageId) == ids.end())
      return usage(
          QStringLiteral("unknown page '%1' (one of: overview, compare, timeline, memory, communication, kernels, estimator)")
              .arg(pageId));
  }

  shardscope::ui::MainWindow window;
  if (parser.isSet(screenshot)) {
    if (dbFile.isEmpty()) return usage(QStringLiteral("--screenshot needs a database (FILE.db or --open FILE.db)"));
    static const QRegularExpression sizeRe(QStringLiteral("^([0-9]{2,5})x([0-9]{2,5})$"));
    const auto m = sizeRe.match(parser.value(size));
    if (!m.hasMatch())
      return usage(QStringLiteral("--size expects WIDTHxHEIGHT, e.g. 1600x1000, got '%1'").arg(parser.value(size)));
    bool ok = false;
    const int seconds = parser.value(timeout).toInt(&ok);
    if (!ok || seconds <= 0) return usage(QStringLiteral("--timeout expects a positive number of seconds"));
    shardscope::ui::ScreenshotOptions o;
    o.dbPath = dbFile;
    o.page = pageId.isEmpty() ? QStringLiteral("overview") : pageId;
    o.runs = runs;
    o.output = parser.value(screenshot);
    o.size = QSize(m.captured(1).toInt(), m.captured(2).toInt());
    o.timeoutMs = seconds * 1000;
    o.writeJson = !parser.isSet(cl.noJson);
    if (parser.isSet(cl.range)) {
      static const QRegularExpression rangeRe(QStringLiteral("^(-?[0-9.]+):(-?[0-9.]+)$"));
      const auto rm = rangeRe.match(parser.value(cl.range));
      const double a = rm.captured(1).toDouble(), b = rm.captured(2).toDouble();
      if (!rm.hasMatch() || !(b > a))
        return usage(QStringLiteral("--range expects START:END in ms with END > START, got '%1'").arg(parser.value(cl.range)));
      o.rangeMs = std::make_pair(a, b);
    }
    for (const QString& part : parser.value(cl.collapse).split(QLatin1Char(','), Qt::SkipEmptyParts)) {
      bool rok = false;
      const int r = part.trimmed().toInt(&rok);
      if (!rok || r < 0) return usage(QStringLiteral("--collapse-ranks expects rank numbers, got '%1'").arg(part));
      o.collapsedRanks << r;
    }
    for (const QString& part : parser.value(cl.hideLanes).split(QLatin1Char(','), Qt::SkipEmptyParts))
      o.hiddenLanes << part.trimmed();
    o.timelineView = parser.value(cl.timelineView);
    if (parser.isSet(cl.step)) {
      bool sok = false;
      o.step = parser.value(cl.step).toInt(&sok);
      if (!sok || o.step <= 0)
        return usage(QStringLiteral("--step expects a positive number, got '%1'").arg(parser.value(cl.step)));
    }
    if (parser.isSet(cl.memoryCategories)) {
      bool mok = false;
      o.memoryCategoriesRank = parser.value(cl.memoryCategories).toInt(&mok);
      if (!mok || o.memoryCategoriesRank < 0)
        return usage(
            QStringLiteral("--memory-categories expects a rank number, got '%1'").arg(parser.value(cl.memoryCategories)));
    }
    return shardscope::ui::takeScreenshot(window, o);
  }

  window.restoreSettings();
  if (!pageId.isEmpty()) window.showPage(pageId);
  window.show();
  if (!dbFile.isEmpty()) {
    if (window.openDatabase(dbFile) && !runs.isEmpty()) window.selectRuns(runs);
  } else {
    window.openLastDatabase();  // the last database opened, if it still exists
  }
  return QApplication::exec();
}
