// bench_timeline_paint: a whole timeline frame as the app makes it — the draw list (core) plus the
// paint of the real TimelineWidget into an image — at full zoom-out, for runs written by
// bench_timeline. Two figures per run: the window a user sees (1920 px of time axis, 1080 px high:
// the lanes that fit) and every lane of every rank visible at once (the widget made as tall as all
// its lanes), the worst case.
//
//   bench_timeline --sizes 1M,10M --dir DIR --keep      # writes DIR/timeline_1M.db, DIR/timeline_10M.db (16 ranks)
//   bench_timeline --sizes 10M --ranks 64 --dir DIR64 --keep   # the 64-rank configuration
//   bench_timeline_paint DIR/timeline_1M.db DIR/timeline_10M.db [--frames 20] [--expanded]
//
// The window frame uses the layout the widget opens with (many ranks: compact or collapsed to summary
// tracks so that every rank fits); --expanded measures it with every rank expanded instead (the lanes
// of the first ranks that fit, what the widget opened with before the compact layout).
//
// Output: one line per run `1M events: 9.8 ms/frame (draw list 2.1 + paint 7.7), all lanes: ...`, then
// the index's build time and bytes per event, the window's layout (ranks, which mode, how many on
// screen), and the time of a first search by name.
#include <QApplication>
#include <QElapsedTimer>
#include <QImage>
#include <QPainter>

#include <algorithm>
#include <cmath>
#include <optional>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "core/util/args.h"
#include "core/storage/trace_store.h"
#include "core/timeline/timeline_index.h"
#include "ui/timeline/timeline_widget.h"

using namespace shardscope;

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Frame {
  double list = 0, paint = 0, total = 0;
  std::size_t rects = 0;
};

Frame measure(ui::TimelineWidget& w, QImage& img, int frames) {
  std::vector<double> lists, paints, totals;
  Frame f;
  for (int i = 0; i < frames + 2; ++i) {
    QElapsedTimer t;
    t.start();
    w.renderNow();  // the draw list, built on this thread (the widget uses 2 threads for it)
    const double list = w.lastBuildMs();
    QElapsedTimer p;
    p.start();
    img.fill(Qt::white);
    {
      QPainter painter(&img);
      w.render(&painter);
    }
    const double paint = static_cast<double>(p.nsecsElapsed()) / 1e6;
    const double total = static_cast<double>(t.nsecsElapsed()) / 1e6;
    if (i < 2) continue;  // warm-up
    lists.push_back(list);
    paints.push_back(paint);
    totals.push_back(total);
    f.rects = w.drawList()->rects.size();
  }
  f.list = median(lists);
  f.paint = median(paints);
  f.total = median(totals);
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
  QApplication app(argc, argv);
  std::vector<std::string> dbs;
  int frames = 20;
  bool expanded = false;
  const char* usage =
      "usage: bench_timeline_paint DB... [--frames 20] [--expanded]   (DBs from bench_timeline --keep [--ranks 64])\n"
      "  --expanded  the 1920x1080 frame with every rank expanded, not the layout the widget opens with\n"
      "              (compact or collapsed ranks when a run of 4 ranks or more does not fit)\n";
  static const std::vector<core::ArgSpec> specs = {{"frames", true, ""}, {"expanded", false, ""}, {"help", false, ""}};
  try {
    const core::ParsedArgs a = core::parseArgs(argc, argv, specs);
    if (a.has("help")) {
      std::fputs(usage, stdout);
      return 0;
    }
    frames = static_cast<int>(a.getInt("frames", frames, 1));
    expanded = a.has("expanded");
    dbs = a.positional;
  } catch (const core::ArgError& e) {
    std::fprintf(stderr, "bench_timeline_paint: %s\n", e.what());
    std::fputs(usage, stderr);
    return 2;
  }
  if (dbs.empty()) {
    std::fputs(usage, stderr);
    return 2;
  }
  for (const auto& db : dbs) {
    core::TraceStore store(db, core::Database::Mode::ReadOnly);
    const auto runs = store.runs();
    if (runs.empty()) {
      std::fprintf(stderr, "%s: no runs\n", db.c_str());
      return 1;
    }
    QElapsedTimer t;
    t.start();
    auto index = core::timeline::TimelineIndex::build(store, runs.back().id);
    const double buildS = static_cast<double>(t.nsecsElapsed()) / 1e9;
    const double events = static_cast<double>(index->eventCount());
    const std::string label = events >= 1e6 ? std::to_string(static_cast<long long>(std::llround(events / 1e6))) + "M"
                                            : std::to_string(static_cast<long long>(events));

    ui::TimelineWidget w;
    w.setIndex(index);
    // 1920 px of time axis (the lane labels come on top of that), 1080 px high.
    w.resize(1920 + w.labelWidth(), 1080);
    if (expanded) w.setAllRanksMode(ui::TimelineWidget::RankMode::Expanded);
    w.fitAll();
    const int nRanks = static_cast<int>(index->ranks().size());
    int onScreen = 0, compact = 0, collapsed = 0;
    for (int r = 0; r < nRanks; ++r) {
      if (w.rankY(r)) ++onScreen;
      if (w.rankMode(r) == ui::TimelineWidget::RankMode::Compact) ++compact;
      if (w.rankMode(r) == ui::TimelineWidget::RankMode::Collapsed) ++collapsed;
    }
    QImage img(w.size(), QImage::Format_ARGB32_Premultiplied);
    const Frame window = measure(w, img, frames);
    const std::size_t summaries = w.drawList() ? w.drawList()->summaries.size() : 0;
    // Every lane at once: as tall as the layout.
    w.setAllRanksMode(ui::TimelineWidget::RankMode::Expanded);  // the worst case: every lane of every rank
    w.resize(1920 + w.labelWidth(), 30000);
    std::optional<int> lastY;
    for (std::uint32_t l = 0; l < index->lanes().size(); ++l)
      if (auto y = w.laneY(l)) lastY = std::max(lastY.value_or(0), *y);
    const int tall = std::min(30000, lastY.value_or(1000) + 200);
    w.resize(1920 + w.labelWidth(), tall);
    w.fitAll();
    QImage big(w.size(), QImage::Format_ARGB32_Premultiplied);
    const Frame all = measure(w, big, std::max(3, frames / 4));
    std::printf(
        "%s events: %.1f ms/frame (draw list %.1f + paint %.1f, %zu rectangles, 1920x1080); all %zu lanes (%dpx tall): "
        "%.1f ms/frame (draw list %.1f + paint %.1f, %zu rectangles)\n",
        label.c_str(), window.total, window.list, window.paint, window.rects, index->lanes().size(), tall, all.total, all.list,
        all.paint, all.rects);
    std::printf("  index: %.2f s to build, %.1f bytes/event resident\n", buildS,
                static_cast<double>(index->memoryBytes()) / std::max(1.0, events));
    std::printf(
        "  1920x1080 layout: %d ranks, %d expanded, %d compact, %d collapsed (%zu summary tracks); %d of %d ranks on screen\n",
        nRanks, nRanks - compact - collapsed, compact, collapsed, summaries, onScreen, nRanks);
    // Search by name (the first findNext of a text scans every lane): a rare name, a common one and
    // a substring of almost every name, timed as a synchronous scan — what the GUI thread pays below
    // syncSearchLimit() events; above it the same scan runs on a pool thread.
    const std::size_t limit = w.syncSearchLimit();
    w.setSyncSearchLimit(SIZE_MAX);
    for (const char* needle : {"reducescatter", "cudalaunch", "a"}) {
      w.clearSelection();
      QElapsedTimer s;
      s.start();
      const bool found = w.findNext(QString::fromLatin1(needle));
      std::printf("  search '%s': %d matches, %s, %.1f ms (%s)\n", needle, w.matchCount(), found ? "first selected" : "none",
                  static_cast<double>(s.nsecsElapsed()) / 1e6,
                  events > static_cast<double>(limit) ? "on a pool thread in the app" : "on the GUI thread in the app");
    }
    w.setSyncSearchLimit(limit);
    std::fflush(stdout);
  }
  return 0;
}
