// bench_gui_responsiveness: is the window responsive while a big run loads? Opens the real main
// window on a database, selects a run and shows every page in turn; while each page loads, a 5 ms
// timer on the GUI thread measures how late the event loop serves it. Prints per page the time
// until the page is ready and the event loop's worst and 99th-percentile delays.
//
//   bench_gui_responsiveness --db FILE [--run ID] [--timeout-s 600] [--cold PAGE[,PAGE...]]
//
// --cold: for each page named, a fresh main window opens the database, shows that page first, selects
// the run and waits for the page; prints the time from opening to the page ready and to its first
// frame painted (the page rendered once, as on screen). This is what a user waits for opening a run
// straight on that page (issue #21: the timeline's first frame and the Compare, Communication and
// Memory pages within 3 s); without it the pages are shown one after another in one window, and a
// page after the first may reuse the analysis an earlier one made.
//
// A 5M-event run to load: `bench_analyze --ranks 8 --events 625k --repeat 1 --dir DIR --keep` leaves
// DIR/bench_analyze.db. Runs under the offscreen platform unless QT_QPA_PLATFORM says otherwise.
#include <QApplication>
#include <QElapsedTimer>
#include <QPixmap>
#include <QStringList>
#include <QTimer>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "core/storage/trace_store.h"
#include "core/util/args.h"
#include "ui/main/main_window.h"
#include "ui/pages/page.h"
#include "ui/pages/page_factory.h"

using namespace shardscope;

namespace {

[[noreturn]] void usage(int code) {
  std::fputs(
      "usage: bench_gui_responsiveness --db FILE [--run ID] [--timeout-s 600] [--cold PAGE[,PAGE...]]\n"
      "Shows every page of the main window for one run (default: the largest) and prints, per page, the\n"
      "time until it is ready and how late the GUI thread's event loop ran meanwhile (max, p99).\n"
      "--cold: each named page in a fresh window, from opening the database to the page ready and to its\n"
      "first frame (pages: overview, compare, timeline, memory, communication, kernels, estimator).\n",
      code == 0 ? stdout : stderr);
  std::exit(code);
}

}  // namespace

int main(int argc, char** argv) {
  if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
  std::string db;
  core::RunId run;
  int timeoutS = 600;
  QStringList cold;
  static const std::vector<core::ArgSpec> specs = {
      {"db", true, ""}, {"run", true, ""}, {"timeout-s", true, ""}, {"cold", true, ""}, {"help", false, ""}};
  try {
    const core::ParsedArgs a = core::parseArgs(argc, argv, specs, core::ArgParseOptions::optionsOnly());
    if (a.has("help")) usage(0);
    db = a.get("db");
    run = core::RunId{a.getInt("run", 0, 0)};
    timeoutS = static_cast<int>(a.getInt("timeout-s", timeoutS, 1));
    if (a.has("cold")) {
      cold = QString::fromStdString(a.get("cold")).split(',', Qt::SkipEmptyParts);
      for (const QString& id : cold)
        if (std::find(ui::pageIds().begin(), ui::pageIds().end(), id) == ui::pageIds().end())
          throw core::ArgError("--cold: no page '" + id.toStdString() + "'");
    }
  } catch (const core::ArgError& e) {
    std::fprintf(stderr, "bench_gui_responsiveness: %s\n", e.what());
    usage(2);
  }
  if (db.empty()) usage(2);
  std::uint64_t events = 0;
  {
    core::TraceStore store(db, core::Database::Mode::ReadOnly);
    core::RunId best;
    for (const auto& r : store.runs()) {
      const auto n = static_cast<std::uint64_t>(store.summary(r.id).eventCount);
      if (run && r.id != run) continue;
      if (!best || n > events) best = r.id, events = n;
    }
    run = best;
  }
  if (!run) {
    std::fprintf(stderr, "bench_gui_responsiveness: %s has no runs\n", db.c_str());
    return 1;
  }

  QApplication app(argc, argv);
  const auto waitFor = [&](const std::function<bool()>& done) {
    QElapsedTimer t;
    t.start();
    while (!done()) {
      if (t.elapsed() > timeoutS * 1000LL) return false;
      app.processEvents(QEventLoop::WaitForMoreEvents, 50);
    }
    return true;
  };
  if (!cold.isEmpty()) {
    std::printf("run %lld: %llu events, window 1600x1000, platform %s, each page opened cold\n",
                static_cast<long long>(run.value()), static_cast<unsigned long long>(events),
                qgetenv("QT_QPA_PLATFORM").constData());
    int status = 0;
    for (const QString& id : cold) {
      QElapsedTimer t;
      t.start();
      ui::MainWindow cw;
      cw.setInteractive(false);
      cw.resize(1600, 1000);
      cw.show();
      if (!cw.openDatabase(QString::fromStdString(db))) {
        std::fprintf(stderr, "bench_gui_responsiveness: cannot open %s\n", db.c_str());
        return 1;
      }
      cw.showPage(id);
      bool ok = waitFor([&] { return !cw.runsLoading(); });
      cw.selectRuns({run});
      cw.applySelectionNow();
      ui::Page* p = cw.page(id);
      app.processEvents();
      ok = ok && waitFor([&] { return p && !p->busy(); });
      const double readyS = static_cast<double>(t.nsecsElapsed()) / 1e9;
      // The first frame: the page rendered once, as the window system would have it painted.
      const QPixmap frame = p ? p->grab() : QPixmap();
      const double frameS = static_cast<double>(t.nsecsElapsed()) / 1e9;
      std::printf("%-14s cold: ready in %6.2f s, first frame in %6.2f s (%dx%d)%s\n", id.toUtf8().constData(), readyS, frameS,
                  frame.width(), frame.height(), ok ? "" : " (TIMED OUT)");
      std::fflush(stdout);
      if (!ok) status = 1;
    }
    return status;
  }
  ui::MainWindow w;
  w.setInteractive(false);
  w.resize(1600, 1000);
  w.show();
  if (!w.openDatabase(QString::fromStdString(db))) {
    std::fprintf(stderr, "bench_gui_responsiveness: cannot open %s\n", db.c_str());
    return 1;
  }
  std::printf("run %lld: %llu events, window 1600x1000, platform %s\n", static_cast<long long>(run.value()),
              static_cast<unsigned long long>(events), qgetenv("QT_QPA_PLATFORM").constData());

  // The probe: a 5 ms timer; each tick records how long after its due time it ran.
  constexpr int kTickMs = 5;
  std::vector<double> lateMs;
  QElapsedTimer clock;
  clock.start();
  qint64 last = clock.nsecsElapsed();
  QTimer probe;
  probe.setTimerType(Qt::PreciseTimer);
  QObject::connect(&probe, &QTimer::timeout, [&] {
    const qint64 now = clock.nsecsElapsed();
    lateMs.push_back(std::max(0.0, static_cast<double>(now - last) / 1e6 - kTickMs));
    last = now;
  });

  if (!waitFor([&] { return !w.runsLoading(); })) {
    std::fprintf(stderr, "bench_gui_responsiveness: the run list did not load\n");
    return 1;
  }
  w.selectRuns({run});
  w.applySelectionNow();
  int status = 0;
  for (const QString& id : ui::pageIds()) {
    lateMs.clear();
    last = clock.nsecsElapsed();
    probe.start(kTickMs);
    QElapsedTimer t;
    t.start();
    w.showPage(id);
    ui::Page* p = w.page(id);
    // A page starts loading when shown; give it one turn of the loop to report busy.
    app.processEvents();
    const bool ok = waitFor([&] { return p && !p->busy(); });
    const double readyS = static_cast<double>(t.nsecsElapsed()) / 1e9;
    // Keep probing a little after ready (the result being shown counts too).
    QElapsedTimer after;
    after.start();
    while (after.elapsed() < 200) app.processEvents(QEventLoop::WaitForMoreEvents, 20);
    probe.stop();
    std::vector<double> v = lateMs;
    std::sort(v.begin(), v.end());
    const double mx = v.empty() ? 0 : v.back();
    const double p99 = v.empty() ? 0 : v[std::min(v.size() - 1, static_cast<std::size_t>(0.99 * static_cast<double>(v.size())))];
    std::printf("%-14s ready in %7.2f s%s; event loop late by max %7.1f ms, p99 %6.1f ms over %zu ticks\n",
                id.toUtf8().constData(), readyS, ok ? "" : " (TIMED OUT)", mx, p99, v.size());
    std::fflush(stdout);
    if (!ok) status = 1;
  }
  return status;
}
