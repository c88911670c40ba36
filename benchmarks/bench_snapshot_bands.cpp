// bench_snapshot_bands: memory_viz's stacked allocations (core/analysis/snapshot_bands.h) on generated
// memory snapshots (tests/tools/snapshot_generator.h) and on snapshot pickles given on the command line:
// the time and memory of the layout, the level of detail of a zoomed-out window, and a whole frame of
// the Memory page's snapshot view (relayout + QCustomPlot paint into a 1920x1080 widget).
//
//   bench_snapshot_bands [--sizes 200k,1M] [--frames 20] [FILE.pickle[.gz] ...]
//
// Output: one line per snapshot `1M events: ... allocations, layout X ms (Y MiB, Z steps), detail A ms,
// B ms per frame (relayout C + paint D)`.
#include <QApplication>
#include <QElapsedTimer>

#include <algorithm>
#include <cstdlib>
#include <cstdio>
#include <string>
#include <vector>

#include "core/analysis/snapshot_bands.h"
#include "core/import/memsnap_reader.h"
#include "core/util/input_source.h"
#include "tests/tools/snapshot_generator.h"
#include "ui/pages/snapshot_bands_plot.h"
#include "ui/pages/snapshot_view.h"

using namespace shardscope;

namespace {

double ms(const QElapsedTimer& t) { return static_cast<double>(t.nsecsElapsed()) / 1e6; }

std::int64_t parseSize(const std::string& s) {
  double v = std::stod(s);
  if (s.back() == 'k' || s.back() == 'K') v *= 1e3;
  if (s.back() == 'M' || s.back() == 'm') v *= 1e6;
  return static_cast<std::int64_t>(v);
}

void run(const std::string& label, core::MemorySnapshot snap, int frames) {
  auto shared = std::make_shared<const core::MemorySnapshot>(std::move(snap));
  ui::SnapshotRunData data;
  ui::SnapshotRunData::Entry e;
  e.snapshot = shared;
  QElapsedTimer t;
  t.start();
  e.timeline = core::buildSnapshotTimeline(*shared, shared->devices().empty() ? 0 : shared->devices().front());
  const double timelineMs = ms(t);
  e.figures = core::snapshotFigures(*shared, e.timeline);
  t.start();
  e.layout = core::layoutSnapshotBands(e.timeline);
  const double layoutMs = ms(t);
  t.start();
  e.categories = core::snapshotAllocationCategories(*shared, e.timeline);
  const double categoriesMs = ms(t);
  const core::TimeNs t0 = e.timeline.active.front().tsNs, t1 = e.timeline.active.back().tsNs + 1;
  t.start();
  const core::SnapshotBandDetail d =
      core::snapshotBandDetail(e.timeline, e.layout, t0, t1, 1800, e.figures.peakActiveBytes / 900);
  const double detailMs = ms(t);
  const std::size_t allocations = e.timeline.allocations.size();
  const std::size_t steps = e.layout.steps.size();
  const double layoutMiB = static_cast<double>(e.layout.memoryBytes()) / (1 << 20);
  data.entries.push_back(std::move(e));

  ui::SnapshotView view;
  view.resize(1920, 1080);
  view.show();
  QApplication::processEvents();
  view.setData(std::make_shared<const ui::SnapshotRunData>(std::move(data)));
  QApplication::processEvents();
  std::vector<double> total, relayout, paint;
  for (int i = 0; i < frames + 2; ++i) {
    QElapsedTimer f;
    f.start();
    view.zoomTo(t0 - i, t1 + (t1 - t0) / 50 + i);  // a new range each frame: a relayout each time
    view.plot()->replot(QCustomPlot::rpImmediateRefresh);
    if (i < 2) continue;  // warm-up
    total.push_back(ms(f));
    relayout.push_back(view.lastRelayoutMs());
    paint.push_back(view.bandsPlot()->lastPaintMs());
  }
  const auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
  };
  if (const char* shot = std::getenv("SHARDSCOPE_BENCH_SCREENSHOT")) view.grab().save(QString::fromUtf8(shot) + ".png");
  std::printf(
      "%s: %zu events, %zu allocations, timeline %.0f ms, layout %.0f ms (%.1f MiB, %zu steps), categories %.0f ms, "
      "detail of the whole trace %.1f ms (%zu pieces), %.1f ms per frame (relayout %.1f + bands' paint %.1f, median of %d)\n",
      label.c_str(), shared->events.size(), allocations, timelineMs, layoutMs, layoutMiB, steps, categoriesMs, detailMs,
      d.pieces.size(), median(total), median(relayout), median(paint), frames);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  std::vector<std::string> sizes{"200k", "1M"}, files;
  int frames = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--sizes" && i + 1 < argc) {
      sizes.clear();
      std::string list = argv[++i];
      for (std::size_t p = 0; p <= list.size();) {
        const std::size_t c = std::min(list.find(',', p), list.size());
        sizes.push_back(list.substr(p, c - p));
        p = c + 1;
      }
    } else if (a == "--frames" && i + 1 < argc) {
      frames = std::max(1, std::atoi(argv[++i]));
    } else {
      files.push_back(a);
    }
  }
  for (const auto& s : sizes) run(s + " generated", test::generatedMemorySnapshot(parseSize(s)), frames);
  for (const auto& f : files) {
    auto in = core::openInput(f);
    run(f, core::parseMemorySnapshot(core::readAll(*in, std::size_t(4) << 30), f), frames);
  }
  return 0;
}
