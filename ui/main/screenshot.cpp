#include "ui/main/screenshot.h"

#include <QCoreApplication>
#include <QDeadlineTimer>
#include <QDir>
#include <QEventLoop>
#include <QFileInfo>
#include <QImageWriter>
#include <QLayout>
#include <QPixmap>
#include <QThread>

#include <algorithm>
#include <cstdio>

#include "ui/main/main_window.h"
#include "ui/pages/page.h"
#include "ui/pages/page_factory.h"

namespace shardscope::ui {

namespace {

void err(const QString& message) {
  std::fprintf(stderr, "shardscope: %s\n", message.toLocal8Bit().constData());
  std::fflush(stderr);
}

// Runs the event loop until pred() holds (true) or the deadline passes (false).
template <typename Pred>
bool waitFor(Pred pred, const QDeadlineTimer& deadline) {
  while (!pred()) {
    if (deadline.hasExpired()) return false;
    QCoreApplication::processEvents(QEventLoop::AllEvents, 50);
    QThread::msleep(10);
  }
  return true;
}

}  // namespace

int takeScreenshot(MainWindow& w, const ScreenshotOptions& o) {
  const auto& ids = pageIds();
  if (std::find(ids.begin(), ids.end(), o.page) == ids.end()) {
    QStringList known(ids.begin(), ids.end());
    err(QStringLiteral("unknown page '%1' (one of: %2)").arg(o.page, known.join(QStringLiteral(", "))));
    return 2;
  }
  if (o.output.isEmpty()) {
    err(QStringLiteral("--screenshot needs an output file"));
    return 2;
  }
  QStringList pageErrors;
  QObject::connect(&w, &MainWindow::errorReported, &w, [&pageErrors](const QString& m) { pageErrors << m; });

  w.setInteractive(false);
  w.setAutoSelectLatest(false);
  w.showPage(o.page);
  w.resize(o.size);
  w.show();
  QCoreApplication::processEvents();
  if (w.size() != o.size) {
    // Smaller than the window's minimum size: squeeze it anyway (the PNG has the size asked for).
    if (w.layout()) w.layout()->setSizeConstraint(QLayout::SetNoConstraint);
    w.setMinimumSize(0, 0);
    w.resize(o.size);
    QCoreApplication::processEvents();
  }
  if (!w.openDatabase(o.dbPath, MainWindow::OpenMode::MustExist)) {
    err(w.lastError());
    return 3;
  }
  const QDeadlineTimer deadline(o.timeoutMs);
  if (!waitFor([&] { return !w.runsLoading(); }, deadline)) {
    err(QStringLiteral("timed out reading the runs of %1").arg(o.dbPath));
    return 1;
  }
  if (w.runModel()->runCount() == 0 && !w.lastError().isEmpty()) {
    err(w.lastError());
    return 3;
  }

  QList<core::Id> runs = o.runs;
  if (runs.isEmpty()) {
    QList<core::Id> all = w.runModel()->runIds();
    std::sort(all.begin(), all.end());
    const int n = o.page == QLatin1String("compare") ? 3 : 1;
    runs = all.mid(std::max<qsizetype>(0, all.size() - n));
  } else {
    for (core::Id id : runs) {
      if (!w.runModel()->runRow(id)) {
        err(QStringLiteral("%1: no run with id %2").arg(o.dbPath).arg(id));
        return 2;
      }
    }
  }
  w.showPage(o.page);
  w.selectRuns(runs);
  w.applySelectionNow();
  pageErrors.clear();

  // Idle = not busy on a few consecutive checks (a page may chain loading steps).
  int idleChecks = 0;
  const bool settled = waitFor(
      [&] {
        idleChecks = w.busy() ? 0 : idleChecks + 1;
        return idleChecks >= 5;
      },
      deadline);
  QCoreApplication::processEvents();

  QPixmap shot = w.grab();
  if (shot.size() != o.size) shot = shot.copy(QRect(QPoint(0, 0), o.size));  // never other than asked
  const QFileInfo out(o.output);
  QDir().mkpath(out.absolutePath());
  QImageWriter writer(out.absoluteFilePath(), "png");
  if (!writer.write(shot.toImage())) {
    err(QStringLiteral("cannot write %1: %2").arg(out.absoluteFilePath(), writer.errorString()));
    return 1;
  }
  if (!settled) {
    Page* p = w.currentPage();
    err(QStringLiteral("timed out after %1 s waiting for the %2 page to load; wrote %3 anyway")
            .arg(o.timeoutMs / 1000)
            .arg(p ? p->title() : o.page, out.absoluteFilePath()));
    return 1;
  }
  if (!pageErrors.isEmpty()) {
    for (const auto& e : pageErrors) err(e);
    return 1;
  }
  return 0;
}

}  // namespace shardscope::ui
