// Memory snapshots in the GUI (issue #18), offscreen with real widgets over a real store built by
// importing snapshots (the committed H100 fixture and generated ones): the Memory page's snapshot view
// shows core's figures, its level of detail keeps the peak at every zoom, a click at the peak lists the
// allocations alive there (largest first) and shows a stack, the top-allocations model passes
// QAbstractItemModelTester, and the Compare page's snapshot section shows core's deltas.
#include <QAbstractItemModelTester>
#include <QElapsedTimer>
#include <QGroupBox>
#include <QJsonArray>
#include <QJsonObject>
#include <QSignalSpy>
#include <QTableView>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QToolButton>
#include <QtTest>

#include <filesystem>
#include <set>

#include "core/analysis/memory_snapshot_analysis.h"
#include "core/import/trace_reader.h"
#include "core/storage/trace_store.h"
#include "tests/common/snapshot_oracle.h"
#include "tests/common/test_support.h"
#include "tests/tools/snapshot_pickle.h"
#include "ui/charts/chart_style.h"
#include "ui/main/main_window.h"
#include "ui/models/run_list_model.h"
#include "ui/models/snapshot_models.h"
#include "ui/pages/compare_page.h"
#include "ui/pages/memory_page.h"
#include "ui/pages/snapshot_bands_plot.h"
#include "ui/pages/snapshot_view.h"

using namespace shardscope;

namespace {

std::string fixturePath() {
  const auto dir = test::sharedTracesDir();
  return dir ? *dir + "/gpu/torch211_fsdp2_bf16_h100.memsnap.pickle.gz" : std::string();
}

core::RunId importSnapshot(const std::string& db, const std::string& file) {
  core::TraceStore store(db);
  const core::ImportResult r = core::traceReader("memsnap")->import(store, {file}, {});
  return r.runIds.at(0);
}

// A small snapshot: one prior block (512 B), then allocations of `big` and 300 bytes from two owners;
// the peak is prior + big + 300.
test::GenSnapshot generated(std::int64_t big, std::int64_t segment) {
  constexpr std::uint64_t kSeg = 0x7f0000000000;
  test::GenSnapshot s;
  s.stacks = {
      {{"c10::cuda::CUDACachingAllocator::malloc", "CUDACachingAllocator.cpp", 0},
       {"forward", "/venv/lib/python3.12/site-packages/torch/nn/modules/linear.py", 134},
       {"forward", "/home/me/model.py", 42}},
      {{"step", "/venv/lib/python3.12/site-packages/torch/optim/adamw.py", 200}, {"<module>", "/home/me/train.py", 9}},
  };
  s.segments = {{0, kSeg, segment, {{512, 512, "active_allocated", -1}, {segment - 512, segment - 512, "inactive", -1}}}};
  s.traces = {{
      {"alloc", 0xA000, big, 1000, 0},
      {"alloc", 0xB000, 300, 1100, 1},
      {"free_requested", 0xA000, big, 1200, 0},
      {"free_completed", 0xA000, big, 1201, 0},
      {"alloc", 0xC000, 100, 1300, 0},
  }};
  return s;
}

// The allocation the alive table's first row shows.
std::int64_t alive0(ui::SnapshotView* view) {
  const auto* e = view->entry();
  const auto& allocs = e->timeline.allocations;
  std::int64_t best = -1;
  for (std::size_t a = 0; a < allocs.size(); ++a)
    if (allocs[a].allocSeq <= view->selectedSeq() && (allocs[a].freeSeq < 0 || allocs[a].freeSeq > view->selectedSeq()) &&
        (best < 0 || allocs[a].size > allocs[static_cast<std::size_t>(best)].size))
      best = static_cast<std::int64_t>(a);
  return best;
}

// Written out without the layout: the allocations alive at the active curve's point `p` (alloc at or
// before it, free after it) stacked in order of allocation; (allocation, bottom) for each.
std::vector<std::pair<std::size_t, std::int64_t>> stackAt(const core::SnapshotTimeline& t, std::int32_t p) {
  const std::int64_t seq = t.active[static_cast<std::size_t>(p)].seq;
  std::vector<std::pair<std::size_t, std::int64_t>> out;
  std::int64_t below = 0;
  for (std::size_t a = 0; a < t.allocations.size(); ++a) {
    const auto& x = t.allocations[a];
    if (x.allocSeq <= seq && (x.freeSeq < 0 || x.freeSeq > seq)) {
      out.emplace_back(a, below);
      below += x.size;
    }
  }
  return out;
}

// The drawn bands' top in every bucket of the view's window is the curve's maximum there.
void checkDrawnTops(ui::SnapshotView* view) {
  const core::SnapshotBandDetail& d = view->bandDetail();
  QCOMPARE(d.buckets, std::max(50, view->plot()->axisRect()->width()));
  std::vector<std::int64_t> top(static_cast<std::size_t>(d.buckets), -1);
  for (const auto& p : d.pieces)
    for (int b = p.bucket0; b < p.bucket1; ++b)
      top[static_cast<std::size_t>(b)] = std::max(top[static_cast<std::size_t>(b)], p.top);
  int drawn = 0;
  for (int b = 0; b < d.buckets; ++b) {
    const std::int64_t want = test::activeMaxByDefinition(view->entry()->timeline, d.bucketStart(b), d.bucketStart(b + 1));
    if (want <= 0) continue;
    QCOMPARE(top[static_cast<std::size_t>(b)], want);
    ++drawn;
  }
  QVERIFY(drawn > 0);
}

// Clicks (real mouse clicks) the middle of the band of the largest allocation under pixel column `x`
// and checks the selection against the allocations stacked without the layout.
void clickLargestBandAt(ui::SnapshotView* view, int x) {
  QCustomPlot* plot = view->plot();
  const auto* e = view->entry();
  const core::TimeNs ns = view->origin() + static_cast<core::TimeNs>(std::llround(plot->xAxis->pixelToCoord(x) * 1e6));
  const int b = view->bandDetail().bucketOf(ns);
  QVERIFY(b >= 0);
  const std::int32_t point = view->bandDetail().bucketPoint[static_cast<std::size_t>(b)];
  QVERIFY(point >= 0);
  const auto stack = stackAt(e->timeline, point);
  QVERIFY(!stack.empty());
  auto largest = stack.front();
  for (const auto& s : stack)
    if (e->timeline.allocations[s.first].size > e->timeline.allocations[largest.first].size) largest = s;
  const core::SnapshotAllocation& a = e->timeline.allocations[largest.first];
  const double mid = (static_cast<double>(largest.second) + static_cast<double>(a.size) / 2) / view->bytesPerUnit();
  const int y = static_cast<int>(std::lround(plot->yAxis->coordToPixel(mid)));
  QVERIFY2(plot->yAxis->coordToPixel(static_cast<double>(largest.second) / view->bytesPerUnit()) - y > 2,
           "the band is too thin to click");
  QTest::mouseClick(plot, Qt::LeftButton, {}, QPoint(x, y));
  QCOMPARE(view->selectedAllocation(), static_cast<std::int64_t>(largest.first));
  QCOMPARE(view->selectedSeq(), e->timeline.active[static_cast<std::size_t>(point)].seq);
  // The side panel: its size, address, category and times.
  const QString text = view->stackText();
  QVERIFY2(text.contains(ui::charts::formatNumber(static_cast<double>(a.size))), qPrintable(text));
  QVERIFY2(text.contains(QString("0x%1").arg(a.addr, 0, 16)), qPrintable(text));
  const std::string_view cat = core::snapshotCategoryNames()[e->categories[largest.first]];
  QVERIFY2(text.contains(QString::fromUtf8(cat.data(), static_cast<qsizetype>(cat.size()))), qPrintable(text));
  QVERIFY2(text.contains(a.allocSeq < 0 ? "before recording" : "allocated at"), qPrintable(text));
  QVERIFY2(text.contains(a.freeSeq < 0 ? "alive at the dump" : "freed at"), qPrintable(text));
}

}  // namespace

class TestMemorySnapshotPage : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void fixtureOnTheMemoryPage() {
    const std::string file = fixturePath();
    QVERIFY2(std::filesystem::exists(file), file.c_str());  // the build unpacks tests/data
    QTemporaryDir dir;
    const std::string db = test::pathIn(dir, "s.db");
    const core::RunId run = importSnapshot(db, file);
    std::vector<core::SnapshotFigures> figs;
    {
      core::TraceStore store(db, core::Database::Mode::ReadOnly);
      figs = core::computeSnapshotFigures(store, run);
    }
    QCOMPARE(figs.size(), std::size_t(1));
    const core::SnapshotFigures& want = figs[0];

    ui::MemoryPage page;
    page.resize(1400, 900);
    page.show();
    QVERIFY(QTest::qWaitForWindowExposed(&page));
    QElapsedTimer timer;
    timer.start();
    page.setContext(QString::fromStdString(db), {run});
    QTRY_VERIFY_WITH_TIMEOUT(!page.busy(), 30000);
    const qint64 openMs = timer.elapsed();
    QVERIFY2(page.errorText().isEmpty(), qPrintable(page.errorText()));
    QVERIFY(page.snapshotData());
    qInfo("fixture opened in %lld ms (snapshot read and analysed in %.1f ms)", static_cast<long long>(openMs),
          page.snapshotData()->loadMs);
    QVERIFY2(page.snapshotData()->loadMs < 1000, "the fixture's snapshot must load well under a second");

    // No memory records: the page opens on the snapshot.
    QVERIFY(page.snapshotShown());
    QVERIFY(!page.snapshotButton()->isHidden());
    QVERIFY(page.messageText().isEmpty());
    ui::SnapshotView* view = page.snapshotView();
    const core::SnapshotFigures& got = view->entry()->figures;
    QCOMPARE(got.peakActiveBytes, want.peakActiveBytes);
    QCOMPARE(got.peakReservedBytes, want.peakReservedBytes);
    QCOMPARE(got.fragmentationBytes, want.fragmentationBytes);
    QCOMPARE(got.priorActiveBytes, want.priorActiveBytes);
    QCOMPARE(got.peakActiveNs, want.peakActiveNs);
    // The text shows them in core's units.
    for (std::int64_t b : {want.peakActiveBytes, want.peakReservedBytes, want.fragmentationBytes, want.priorActiveBytes})
      QVERIFY2(view->figuresText().contains(ui::charts::formatBytes(static_cast<double>(b), 2)), qPrintable(view->figuresText()));
    // The peak marker sits on core's peak.
    QCOMPARE(view->peakTracer()->position->key(), static_cast<double>(want.peakActiveNs - view->origin()) / 1e6);
    QCOMPARE(view->peakTracer()->position->value(), static_cast<double>(want.peakActiveBytes) / view->bytesPerUnit());

    // The top allocations: core's groups in core's order, under the tester.
    ui::SnapshotTopModel* top = view->topModel();
    QAbstractItemModelTester tester(top, QAbstractItemModelTester::FailureReportingMode::QtTest);
    QCOMPARE(top->rowCount(), static_cast<int>(want.topAtPeak.size()));
    QVERIFY(top->rowCount() > 0);
    for (int r = 0; r < top->rowCount(); ++r) {
      const auto& g = want.topAtPeak[static_cast<std::size_t>(r)];
      QCOMPARE(top->data(top->index(r, ui::SnapshotTopModel::Bytes), ui::SnapshotTopModel::RawValueRole).toLongLong(), g.bytes);
      QCOMPARE(top->data(top->index(r, ui::SnapshotTopModel::Count), ui::SnapshotTopModel::RawValueRole).toLongLong(), g.count);
      QCOMPARE(top->data(top->index(r, ui::SnapshotTopModel::Owner)).toString(), QString::fromStdString(g.owner));
    }
    top->setGroups(want.topAtPeak);  // a reset under the tester

    // The level of detail keeps the peak's maximum at every zoom that contains it.
    const core::TimeNs t0 = view->origin();
    const core::TimeNs span = std::max<core::TimeNs>(1000, want.peakActiveNs - t0) * 2;
    const auto drawnMax = [&] {
      std::int64_t m = 0;
      for (const auto& p : view->drawnActive()) m = std::max(m, p.bytes);
      double g = 0;
      for (auto it = view->activeGraph()->data()->constBegin(); it != view->activeGraph()->data()->constEnd(); ++it)
        g = std::max(g, it->value);
      return std::pair{m, g};
    };
    for (const double frac : {1.0, 0.5, 0.1, 0.01, 0.001}) {
      const auto half = std::max<core::TimeNs>(1000, static_cast<core::TimeNs>(static_cast<double>(span) * frac / 2));
      view->zoomTo(want.peakActiveNs - half, want.peakActiveNs + half);
      const auto [bytes, value] = drawnMax();
      QCOMPARE(bytes, want.peakActiveBytes);
      QCOMPARE(value, static_cast<double>(want.peakActiveBytes) / view->bytesPerUnit());
      QVERIFY(view->drawnActive().size() <= static_cast<std::size_t>(std::max(50, view->plot()->axisRect()->width())) + 2);
    }
    // A window before the peak never shows more than the curve holds there.
    view->zoomTo(t0, t0 + 1000);
    QVERIFY(drawnMax().first <= want.peakActiveBytes);
    view->resetZoom();
    QCOMPARE(drawnMax().first, want.peakActiveBytes);

    // A click above the stack at the peak's time (a real mouse click on the plot) lists what is alive there.
    view->plot()->replot();
    const double px = view->plot()->xAxis->coordToPixel(static_cast<double>(want.peakActiveNs - t0) / 1e6);
    const double py = view->plot()->yAxis->coordToPixel(static_cast<double>(want.peakActiveBytes) / view->bytesPerUnit() * 1.08);
    QTest::mouseClick(view->plot(), Qt::LeftButton, {},
                      QPoint(static_cast<int>(std::lround(px)), static_cast<int>(std::lround(py))));
    QCOMPARE(view->selectedSeq(), want.peakActiveSeq);
    QCOMPARE(view->selectedAllocation(), alive0(view));  // the largest alive there
    QTableWidget* alive = view->aliveTable();
    QCOMPARE(alive->rowCount(), static_cast<int>(std::min<std::int64_t>(want.allocationsAtPeak, 1000)));
    QCOMPARE(alive->currentRow(), 0);
    QVERIFY2(view->stackText().contains("Owner: "), qPrintable(view->stackText()));  // the largest, selected
    // The largest allocation here predates recording (no stack); the next ones with a stack show their frames.
    QString stack;
    for (int r = 0; r < alive->rowCount() && stack.isEmpty(); ++r) {
      alive->setCurrentCell(r, 0);
      if (view->stackText().contains("Stack (innermost first):")) stack = view->stackText();
    }
    QVERIFY2(stack.contains(".py"), qPrintable(stack));  // frames with their files
    // Selecting a top group shows its stack.
    view->topTable()->setCurrentIndex(top->index(0, 0));
    QVERIFY2(view->stackText().contains(ui::charts::formatBytes(static_cast<double>(want.topAtPeak[0].bytes), 2)),
             qPrintable(view->stackText()));
    QVERIFY(view->stackText() != stack);

    // The page's JSON carries core's figures.
    const QJsonObject json = page.describe();
    QCOMPARE(json["memory_snapshots"].toArray().size(), 1);
    QCOMPARE(json["memory_snapshots"].toArray()[0].toObject()["peak_active_bytes"].toDouble(),
             static_cast<double>(want.peakActiveBytes));
  }

  // The bands on the fixture: the drawn tops are the curve's maximum per bucket at several zooms, a
  // click on a band selects the allocation stacked there, the legend shows the categories' colours,
  // and the figures of a frame (relayout and paint).
  void bandsOnTheFixture() {
    const std::string file = fixturePath();
    QVERIFY2(std::filesystem::exists(file), file.c_str());
    QTemporaryDir dir;
    const std::string db = test::pathIn(dir, "s.db");
    const core::RunId run = importSnapshot(db, file);
    ui::MemoryPage page;
    page.resize(1400, 900);
    page.show();
    QVERIFY(QTest::qWaitForWindowExposed(&page));
    page.setContext(QString::fromStdString(db), {run});
    QTRY_VERIFY_WITH_TIMEOUT(!page.busy(), 30000);
    ui::SnapshotView* view = page.snapshotView();
    QVERIFY(view->entry());
    const auto& e = *view->entry();
    const auto& f = e.figures;
    QCustomPlot* plot = view->plot();
    plot->replot();

    // Zoomed out, then around the peak, then to a few events.
    const core::TimeNs span = e.timeline.active.back().tsNs - view->origin();
    for (const core::TimeNs half : {span, span / 20, std::max<core::TimeNs>(span / 2000, 2000)}) {
      view->zoomTo(f.peakActiveNs - half, f.peakActiveNs + half);
      plot->replot();
      checkDrawnTops(view);
      if (QTest::currentTestFailed()) return;
      // Every allocation of a pixel's bytes or more is a band of its own, at its place in the layout.
      for (const auto& p : view->bandDetail().pieces)
        if (p.allocation >= 0)
          QVERIFY(e.timeline.allocations[static_cast<std::size_t>(p.allocation)].size >= view->bandDetail().minBytes);
      const int peakX =
          static_cast<int>(std::lround(plot->xAxis->coordToPixel(static_cast<double>(f.peakActiveNs - view->origin()) / 1e6)));
      clickLargestBandAt(view, peakX);
      if (QTest::currentTestFailed()) return;
      // Half way between the window's (or the trace's) start and the peak.
      const core::TimeNs before = (std::max(view->origin(), f.peakActiveNs - half) + f.peakActiveNs) / 2;
      clickLargestBandAt(
          view, static_cast<int>(std::lround(plot->xAxis->coordToPixel(static_cast<double>(before - view->origin()) / 1e6))));
      if (QTest::currentTestFailed()) return;
    }
    // The selected band is outlined: its pieces are drawn (it is among the pieces).
    bool outlined = false;
    for (const auto& p : view->bandDetail().pieces) outlined = outlined || p.allocation == view->selectedAllocation();
    QVERIFY(outlined);

    // Colours: a band's is a shade of its category's (same hue), the merged pieces grey; the legend
    // lists exactly the categories present, with their colours.
    std::set<int> present;
    for (const std::uint8_t c : e.categories) present.insert(c);
    QCOMPARE(view->categoryLegend().size(), present.size());
    for (const auto& [c, g] : view->categoryLegend()) {
      QVERIFY(present.count(c));
      QCOMPARE(g->brush().color(), ui::SnapshotBandsPlot::categoryColor(c));
      QCOMPARE(g->name(), QString::fromUtf8(core::snapshotCategoryNames()[static_cast<std::size_t>(c)].data()));
      QVERIFY(plot->legend->hasItemWithPlottable(g));
    }
    QVERIFY(plot->legend->hasItemWithPlottable(view->smallLegend()));
    view->resetZoom();
    plot->replot();
    int merged = 0;
    for (const auto& p : view->bandDetail().pieces) {
      const QColor got = view->bandsPlot()->pieceColor(p);
      if (p.allocation < 0) {
        QCOMPARE(got, ui::SnapshotBandsPlot::smallColor());
        ++merged;
        continue;
      }
      const QColor want = ui::SnapshotBandsPlot::categoryColor(e.categories[static_cast<std::size_t>(p.allocation)]);
      QVERIFY2(std::abs(got.hsvHue() - want.hsvHue()) <= 2, qPrintable(QString("%1 vs %2").arg(got.name(), want.name())));
    }
    QVERIFY(merged > 0);  // zoomed out, the small allocations are merged
    // The paint shows them: the pixel in the middle of the selected band's first piece has a band colour, not the background.
    const QImage img = plot->toPixmap().toImage();
    int coloured = 0;
    for (int x = plot->axisRect()->left() + 5; x < plot->axisRect()->right() - 5; x += 17) {
      const QColor c = img.pixelColor(x, plot->axisRect()->bottom() - 2);
      coloured += c != QColor(Qt::white) ? 1 : 0;
    }
    QVERIFY(coloured > 10);

    // A frame: relayout for the window and the paint, zoomed out (the figure quoted in the docs).
    QElapsedTimer timer;
    std::vector<double> frames;
    for (int i = 0; i < 20; ++i) {
      timer.start();
      view->zoomTo(view->origin() + i, view->origin() + span + span / 50 + i);  // a new range: a relayout each time
      plot->replot(QCustomPlot::rpImmediateRefresh);
      frames.push_back(static_cast<double>(timer.nsecsElapsed()) / 1e6);
    }
    std::sort(frames.begin(), frames.end());
    qInfo("fixture bands: %zu pieces, %.2f ms per frame (median of 20; relayout %.2f ms, bands' paint %.2f ms)",
          view->bandDetail().pieces.size(), frames[10], view->lastRelayoutMs(), view->bandsPlot()->lastPaintMs());
  }

  void aliveAtThePeakLargestFirst() {
    QTemporaryDir dir;
    const std::string file = test::writeGzip(dir, "a.pickle.gz", test::snapshotPickle(generated(4096, 8192)));
    const std::string db = test::pathIn(dir, "g.db");
    const core::RunId run = importSnapshot(db, file);
    ui::MemoryPage page;
    page.resize(1200, 800);
    page.show();
    QVERIFY(QTest::qWaitForWindowExposed(&page));
    page.setContext(QString::fromStdString(db), {run});
    QTRY_VERIFY_WITH_TIMEOUT(!page.busy(), 30000);
    ui::SnapshotView* view = page.snapshotView();
    QVERIFY(view->entry());
    const auto& f = view->entry()->figures;
    QCOMPARE(f.peakActiveBytes, std::int64_t(512 + 4096 + 300));
    view->selectAt(f.peakActiveNs);
    QCOMPARE(view->selectedSeq(), f.peakActiveSeq);
    QCOMPARE(view->aliveTable()->rowCount(), 3);
    // Largest first; the prior block says so.
    QCOMPARE(view->aliveTable()->item(0, 0)->text(), ui::charts::formatBytes(4096, 2));
    QCOMPARE(view->aliveTable()->item(1, 0)->text(), ui::charts::formatBytes(512, 2));
    QCOMPARE(view->aliveTable()->item(1, 1)->text(), QString("before recording"));
    QVERIFY2(view->stackText().contains("/home/me/model.py:42:forward"), qPrintable(view->stackText()));
    // Later, after the big block's free: two blocks and the new one.
    view->selectAt(f.peakActiveNs + 1'000'000);
    QCOMPARE(view->aliveTable()->rowCount(), 3);
    QCOMPARE(view->aliveTable()->item(0, 0)->text(), ui::charts::formatBytes(512, 2));
    QCOMPARE(view->aliveTable()->item(2, 0)->text(), ui::charts::formatBytes(100, 2));
    // The button goes back to the (empty) records view and its note.
    page.setSnapshotShown(false);
    QVERIFY(!page.snapshotShown());
    QVERIFY(page.messageText().contains("no memory records"));
    page.setSnapshotShown(true);
    QVERIFY(page.snapshotShown());
  }

  // Issue 46: a run of memory snapshots alone is called what it is ("memory snapshot", grouped under
  // "Memory snapshots"), counts the allocator's events, and opens on the Memory page's snapshot.
  void snapshotRunIsNamedAndOpensOnItsSnapshot() {
    QTemporaryDir dir;
    const std::string db = test::pathIn(dir, "s.db");
    const core::RunId run = importSnapshot(db, test::writeGzip(dir, "a.pickle.gz", test::snapshotPickle(generated(4096, 8192))));
    std::vector<ui::RunRow> rows;
    std::vector<core::SnapshotFigures> figs;
    {
      core::TraceStore store(db, core::Database::Mode::ReadOnly);
      rows = ui::loadRunRows(store);
      figs = core::computeSnapshotFigures(store, run);
    }
    QCOMPARE(rows.size(), std::size_t(1));
    QVERIFY(core::isMemorySnapshotRun(rows[0].run));
    QCOMPARE(std::string(core::runKind(rows[0].run)), std::string("memory snapshot"));
    QVERIFY(figs.at(0).events > 0);
    QCOMPARE(rows[0].events, static_cast<std::int64_t>(figs.at(0).events));
    ui::RunListModel model;
    model.setRuns(rows);
    QCOMPARE(model.rowCount(), 1);
    QVERIFY2(model.data(model.index(0, 0)).toString().startsWith("Memory snapshots"),
             qPrintable(model.data(model.index(0, 0)).toString()));
    ui::MainWindow w;
    w.show();
    w.showPage("overview");
    QSignalSpy loaded(&w, &ui::MainWindow::runsLoaded);
    QVERIFY(w.openDatabase(QString::fromStdString(db)));
    QVERIFY(loaded.wait(10000));
    w.selectRuns({run});  // the latest run, selected when the database opens: the same selection
    QTRY_COMPARE(w.currentPage()->pageId(), QString("memory"));
    auto* page = qobject_cast<ui::MemoryPage*>(w.currentPage());
    QVERIFY(page);
    QTRY_VERIFY_WITH_TIMEOUT(!page->busy() && page->snapshotShown(), 30000);
  }

  void compareTwoSnapshots() {
    QTemporaryDir dir;
    const std::string db = test::pathIn(dir, "c.db");
    const core::RunId a = importSnapshot(db, test::writeGzip(dir, "a.pickle.gz", test::snapshotPickle(generated(4096, 8192))));
    const core::RunId b = importSnapshot(db, test::writeGzip(dir, "b.pickle.gz", test::snapshotPickle(generated(10000, 16384))));
    std::vector<core::SnapshotFigures> fa, fb;
    {
      core::TraceStore store(db, core::Database::Mode::ReadOnly);
      fa = core::computeSnapshotFigures(store, a);
      fb = core::computeSnapshotFigures(store, b);
    }
    const core::SnapshotComparison want = core::compareSnapshots(fa.at(0), fb.at(0));
    QCOMPARE(want.peakActiveDelta, std::int64_t(10000 - 4096));

    ui::ComparePage page;
    page.resize(1400, 1000);
    page.show();
    QVERIFY(QTest::qWaitForWindowExposed(&page));
    page.setContext(QString::fromStdString(db), {a, b});
    QTRY_VERIFY_WITH_TIMEOUT(!page.busy(), 30000);
    QVERIFY2(page.errorText().isEmpty(), qPrintable(page.errorText()));
    QVERIFY(page.snapshotComparison());
    QVERIFY(!page.snapshotBox()->isHidden());
    const auto& got = *page.snapshotComparison();
    QCOMPARE(got.peakActiveDelta, want.peakActiveDelta);
    QCOMPARE(got.peakReservedDelta, want.peakReservedDelta);
    QCOMPARE(got.fragmentationDelta, want.fragmentationDelta);
    QTableWidget* t = page.snapshotFiguresTable();
    const std::int64_t expect[3][3] = {{want.a.peakActiveBytes, want.b.peakActiveBytes, want.peakActiveDelta},
                                       {want.a.peakReservedBytes, want.b.peakReservedBytes, want.peakReservedDelta},
                                       {want.a.fragmentationBytes, want.b.fragmentationBytes, want.fragmentationDelta}};
    for (int r = 0; r < 3; ++r)
      for (int c = 0; c < 3; ++c) {
        QCOMPARE(t->item(r, c + 1)->data(Qt::UserRole).toLongLong(), expect[r][c]);
        QVERIFY(t->item(r, c + 1)->text().contains(
            ui::charts::formatBytes(static_cast<double>(expect[r][c] < 0 ? -expect[r][c] : expect[r][c]), 2)));
      }
    QVERIFY(t->item(0, 3)->text().startsWith("+"));
    // What grew: the model.py activation (4096 -> 10000 at the peak).
    ui::SnapshotGrowthModel* grew = page.snapshotGrowthModel();
    QAbstractItemModelTester tester(grew, QAbstractItemModelTester::FailureReportingMode::QtTest);
    QCOMPARE(grew->rowCount(), static_cast<int>(want.grew.size()));
    QVERIFY(grew->rowCount() >= 1);
    QCOMPARE(grew->data(grew->index(0, ui::SnapshotGrowthModel::Owner)).toString(), QString("/home/me/model.py:42:forward"));
    QCOMPARE(grew->data(grew->index(0, ui::SnapshotGrowthModel::Growth), ui::SnapshotGrowthModel::RawValueRole).toLongLong(),
             std::int64_t(10000 - 4096));
    const QJsonObject json = page.describe();
    QCOMPARE(json["memory_snapshots"].toObject()["peak_active_delta"].toDouble(), static_cast<double>(want.peakActiveDelta));

    // One run alone: no section.
    page.setContext(QString::fromStdString(db), {a});
    QTRY_VERIFY_WITH_TIMEOUT(!page.busy(), 30000);
    QVERIFY(page.snapshotBox()->isHidden());
    QVERIFY(!page.snapshotComparison());
  }
};

QTEST_MAIN(TestMemorySnapshotPage)
#include "tst_memory_snapshot_page.moc"
