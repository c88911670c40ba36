#include "ui/main/screenshot.h"

#include <QCoreApplication>
#include <QDeadlineTimer>
#include <QDir>
#include <QEventLoop>
#include <QFileInfo>
#include <QImageWriter>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSaveFile>
#include <QSpinBox>
#include <QLayout>
#include <QPixmap>
#include <QThread>

#include <algorithm>
#include <cstdio>

#include "ui/main/main_window.h"
#include "ui/pages/memory_page.h"
#include "ui/pages/timeline_page.h"
#include "ui/session/run_session.h"
#include "ui/timeline/timeline_widget.h"
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

// Applies the timeline options to the Timeline page once its runs are loaded; an error message or "".
QString applyTimelineOptions(MainWindow& w, const ScreenshotOptions& o) {
  auto* t = qobject_cast<TimelinePage*>(w.page(QStringLiteral("timeline")));
  if (!t) return {};
  if (!o.timelineView.isEmpty()) {
    if (o.timelineView == QLatin1String("one"))
      t->setView(TimelinePage::View::OneRun);
    else if (o.timelineView == QLatin1String("step"))
      t->setView(TimelinePage::View::SameStep);
    else if (o.timelineView == QLatin1String("stacked"))
      t->setView(TimelinePage::View::WholeRuns);
    else
      return QStringLiteral("--timeline-view expects one, step or stacked, got '%1'").arg(o.timelineView);
  }
  return {};
}

// After the page loaded: the step of the multi-run view, the lanes of the one-run view.
QString applyLaneOptions(MainWindow& w, const ScreenshotOptions& o) {
  auto* t = qobject_cast<TimelinePage*>(w.page(QStringLiteral("timeline")));
  if (!t) return {};
  if (o.step > 0 && t->view() != TimelinePage::View::OneRun) {
    if (o.step > t->stepSpin()->maximum())
      return QStringLiteral("--step %1: the runs have %2 counted steps in common").arg(o.step).arg(t->stepSpin()->maximum());
    t->stepSpin()->setValue(o.step);
  }
  if (!t->timeline()->index()) return {};
  TimelineWidget* tw = t->timeline();
  const auto& ranks = tw->index()->ranks();
  for (int r : o.collapsedRanks) {
    bool found = false;
    for (std::size_t i = 0; i < ranks.size(); ++i)
      if (ranks[i].rank == r) {
        tw->setRankCollapsed(static_cast<int>(i), true);
        found = true;
      }
    if (!found) return QStringLiteral("--collapse-ranks: the run has no rank %1").arg(r);
  }
  using core::timeline::LaneKind;
  const std::pair<const char*, LaneKind> kinds[] = {{"gpu", LaneKind::GpuStream},   {"cpu", LaneKind::CpuThread},
                                                    {"comm", LaneKind::Comm},       {"group", LaneKind::CommGroup},
                                                    {"counter", LaneKind::Counter}, {"python", LaneKind::Python}};
  for (const QString& name : o.hiddenLanes) {
    auto it = std::find_if(std::begin(kinds), std::end(kinds), [&](const auto& k) { return name == QLatin1String(k.first); });
    if (it == std::end(kinds))
      return QStringLiteral("--hide-lanes: unknown lane kind '%1' (gpu, cpu, comm, group, counter, python)").arg(name);
    tw->setLaneKindHidden(it->second, true);
  }
  return {};
}

}  // namespace

QString screenshotJsonPath(const QString& png) {
  const QFileInfo f(png);
  return f.dir().filePath(f.completeBaseName() + QStringLiteral(".json"));
}

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

  QList<core::RunId> runs = o.runs;
  if (runs.isEmpty()) {
    QList<core::RunId> all = w.runModel()->runIds();
    std::sort(all.begin(), all.end());
    const int n = o.page == QLatin1String("compare") ? 3 : 1;
    runs = all.mid(std::max<qsizetype>(0, all.size() - n));
  } else {
    for (core::RunId id : runs) {
      if (!w.runModel()->runRow(id)) {
        err(QStringLiteral("%1: no run with id %2").arg(o.dbPath).arg(id.value()));
        return 2;
      }
    }
  }
  w.showPage(o.page);
  w.selectRuns(runs);
  w.applySelectionNow();
  pageErrors.clear();

  // Idle = not busy on a few consecutive checks (a page may chain loading steps).
  auto settle = [&] {
    int idleChecks = 0;
    return waitFor(
        [&] {
          idleChecks = w.busy() ? 0 : idleChecks + 1;
          return idleChecks >= 5;
        },
        deadline);
  };
  if (o.page == QLatin1String("timeline")) {
    if (const QString e = applyTimelineOptions(w, o); !e.isEmpty()) {
      err(e);
      return 2;
    }
  }
  bool settled = settle();
  if (o.page == QLatin1String("timeline") && settled) {
    if (const QString e = applyLaneOptions(w, o); !e.isEmpty()) {
      err(e);
      return 2;
    }
    settled = settle();
  }
  if (o.memoryCategoriesRank >= 0 && settled) {
    auto* m = qobject_cast<MemoryPage*>(w.page(QStringLiteral("memory")));
    if (!m || o.page != QLatin1String("memory")) {
      err(QStringLiteral("--memory-categories needs --page memory"));
      return 2;
    }
    m->showCategories(o.memoryCategoriesRank);
    if (m->categoriesRank() != o.memoryCategoriesRank) {
      err(QStringLiteral("--memory-categories: the run has no breakdown over time for rank %1").arg(o.memoryCategoriesRank));
      return 2;
    }
    settled = settle();
  }
  if (o.rangeMs && settled) {
    // ms after the start of the first run's steps: the session's range, which the pages follow.
    core::TimeNs origin = 0;
    bool known = false;
    if (auto* t = qobject_cast<TimelinePage*>(w.page(QStringLiteral("timeline")));
        t && t->index() && t->index()->runId() == runs.first()) {
      const auto extent = t->index()->stepsExtent();
      origin = extent ? extent->first : t->index()->minStart();
      known = true;
    }
    if (!known) {
      err(QStringLiteral("--range needs the timeline of run %1 (use --page timeline with --timeline-view one)")
              .arg(runs.first().value()));
      return 2;
    }
    RunSession::TimeRange r;
    r.run = runs.first();
    r.startNs = origin + static_cast<qint64>(o.rangeMs->first * 1e6);
    r.endNs = origin + static_cast<qint64>(o.rangeMs->second * 1e6);
    w.session()->setTimeRange(r);
    settled = settle();
  }
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
  if (o.writeJson) {
    // What the page shows, for checks: the page's own description plus the window's selection.
    QJsonObject j = w.currentPage() ? w.currentPage()->describe() : QJsonObject{};
    QJsonArray selected;
    for (core::RunId id : w.selectedRuns()) {
      const auto* row = w.runModel()->runRow(id);
      selected.append(
          QJsonObject{{QStringLiteral("id"), static_cast<double>(id.value())},
                      {QStringLiteral("label"), row ? QString::fromStdString(core::runLabel(row->run.name, id)) : QString()}});
    }
    j[QStringLiteral("selected_runs")] = selected;
    j[QStringLiteral("database")] = w.databasePath();
    j[QStringLiteral("settled")] = settled;
    if (const auto r = w.session()->timeRange())
      j[QStringLiteral("time_range")] = QJsonObject{{QStringLiteral("run"), static_cast<double>(r->run.value())},
                                                    {QStringLiteral("start_ns"), static_cast<double>(r->startNs)},
                                                    {QStringLiteral("end_ns"), static_cast<double>(r->endNs)}};
    QSaveFile jf(screenshotJsonPath(out.absoluteFilePath()));
    if (!jf.open(QIODevice::WriteOnly) || jf.write(QJsonDocument(j).toJson(QJsonDocument::Indented)) < 0 || !jf.commit()) {
      err(QStringLiteral("cannot write %1: %2").arg(jf.fileName(), jf.errorString()));
      return 1;
    }
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
