#pragma once
// The screenshot mode (`shardscope --open DB --screenshot OUT.png`): opens the database, selects the
// runs, shows the page, applies the view asked for (a time range, collapsed ranks, hidden lane kinds,
// the timeline's multi-run view and step, the Memory page's rank by category), waits until nothing is loading and grabs the
// window. It also writes OUT.json beside the picture: what the page shows (Page::describe(): runs, headline figures with units,
// table rows, chart series names and lengths). For docs and checks; works under QT_QPA_PLATFORM=offscreen.
#include <QList>
#include <QSize>
#include <QString>
#include <QStringList>

#include <optional>
#include <utility>

#include "core/model/types.h"

namespace shardscope::ui {

class MainWindow;

struct ScreenshotOptions {
  QString dbPath;
  QString page = QStringLiteral("overview");
  QList<core::RunId> runs;  // empty: the latest run (the latest 3 for "compare")
  QString output;
  QSize size{1600, 1000};
  int timeoutMs = 60000;
  // The session's shared time range: ms after the start of the first run's first step (what the
  // timeline's "Fit steps" starts at); the Timeline and Memory pages show it.
  std::optional<std::pair<double, double>> rangeMs;
  QList<int> collapsedRanks;      // timeline: rank numbers shown collapsed
  QStringList hiddenLanes;        // timeline: lane kinds hidden (gpu, cpu, comm, group, counter, python)
  QString timelineView;           // "one", "step", "stacked" (default: the page's own)
  int step = 0;                   // timeline "step" view: which counted step (1-based; 0: the first)
  int memoryCategoriesRank = -1;  // memory: show this rank's memory by category over time (-1: every rank)
  bool writeJson = true;          // OUT.json beside OUT.png
};

// The JSON path written beside a screenshot: OUT.png -> OUT.json.
QString screenshotJsonPath(const QString& png);

// Exit codes: 0 written; 1 written after a timeout or a page error, or could not be written;
// 2 bad options (unknown page, run not in the database); 3 the database cannot be opened.
// Messages go to stderr.
int takeScreenshot(MainWindow& window, const ScreenshotOptions& options);

}  // namespace shardscope::ui
