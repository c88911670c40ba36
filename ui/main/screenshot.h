#pragma once
// The screenshot mode (`shardscope --open DB --screenshot OUT.png`): opens the database, selects the
// runs, shows the page, waits until nothing is loading and grabs the window. For docs and checks;
// works under QT_QPA_PLATFORM=offscreen.
#include <QList>
#include <QSize>
#include <QString>

#include "core/model/types.h"

namespace shardscope::ui {

class MainWindow;

struct ScreenshotOptions {
  QString dbPath;
  QString page = QStringLiteral("overview");
  QList<core::Id> runs;  // empty: the latest run (the latest 3 for "compare")
  QString output;
  QSize size{1600, 1000};
  int timeoutMs = 60000;
};

// Exit codes: 0 written; 1 written after a timeout or a page error, or could not be written;
// 2 bad options (unknown page, run not in the database); 3 the database cannot be opened.
// Messages go to stderr.
int takeScreenshot(MainWindow& window, const ScreenshotOptions& options);

}  // namespace shardscope::ui
