// Memory page, offscreen: the peak markers sit exactly on core::computeMemoryPeaks' peaks (plot
// coordinates), downsampling keeps every peak at every zoom and width, the breakdown stacks sum to the
// peaks, the peaks model under QAbstractItemModelTester, and an empty database, a run without memory
// records and a cancelled load handled without a crash.
#include <QAbstractItemModelTester>
#include <QCheckBox>
#include <QComboBox>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <random>

#include "core/storage/store_access.h"
#include "core/analysis/memory_peaks.h"
#include "tests/common/test_support.h"
#include "tests/ui/ui_fixture.h"
#include "ui/charts/max_pyramid.h"
#include "ui/charts/memory_chart.h"
#include "ui/charts/stacked_bar_chart.h"
#include "ui/models/memory_peaks_model.h"
#include "ui/pages/memory_page.h"

using namespace shardscope;
using ui::charts::MemoryChart;

namespace {

QString qpath(const std::string& p) { return QString::fromStdString(p); }

bool graphHasPoint(const QCPGraph* g, double key, double value) {
  for (auto it = g->data()->constBegin(); it != g->data()->constEnd(); ++it)
    if (it->key == key && it->value == value) return true;
  return false;
}

double graphMax(const QCPGraph* g) {
  double m = 0;
  for (auto it = g->data()->constBegin(); it != g->data()->constEnd(); ++it) m = std::max(m, it->value);
  return m;
}

void waitLoaded(ui::MemoryPage& page) { QTRY_VERIFY_WITH_TIMEOUT(!page.busy(), 30000); }

}  // namespace

class TestMemoryPage : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void peakMarkersAreCorePeaks() {
    QTemporaryDir dir;
    const std::string path = test::pathIn(dir, "m.db");
    core::RunId run;
    {
      core::TraceStore store(path);
      test::RunSpec s;
      s.ranks = 3;
      run = test::writeRun(store, s);
    }
    ui::MemoryPage page;
    QCOMPARE(page.pageId(), QString("memory"));
    page.resize(1200, 800);
    page.show();
    QVERIFY(QTest::qWaitForWindowExposed(&page));
    page.setContext(qpath(path), {run});
    waitLoaded(page);
    QVERIFY2(page.errorText().isEmpty(), qPrintable(page.errorText()));
    QVERIFY(page.messageText().isEmpty());

    core::TraceStore store(path, core::Database::Mode::ReadOnly);
    const auto peaks = core::computeMemoryPeaks(store, run);
    QCOMPARE(peaks.size(), std::size_t(3));
    const auto summary = store.summary(run);
    MemoryChart* chart = page.chart();
    QCOMPARE(chart->origin(), *summary.startNs);  // 0 ms = the run start
    QCOMPARE(chart->seriesCount(), 3);
    QCOMPARE(chart->markerCount(), 3);
    QCOMPARE(chart->scale().suffix, QString("MiB"));
    for (const auto& p : peaks) {
      // The fixture's peak: rank r's is 96 MiB + r MiB, first reached at 62 % of the run.
      QCOMPARE(p.peakAllocatedBytes, test::peakOf(test::RunSpec{}, p.rank));
      int found = -1;
      for (int i = 0; i < chart->markerCount(); ++i)
        if (chart->markerPeak(i).series == p.rank) found = i;
      QVERIFY(found >= 0);
      const QCPItemTracer* t = chart->markerTracer(found);
      const double x = static_cast<double>(p.allocatedAtNs - *summary.startNs) / 1e6;
      const double y = static_cast<double>(p.peakAllocatedBytes) / (1024.0 * 1024.0);
      QCOMPARE(t->position->key(), x);
      QCOMPARE(t->position->value(), y);
      QCOMPARE(t->position->type(), QCPItemPosition::ptPlotCoords);
      QVERIFY(t->visible());
      // The label says what caused it.
      const QString label = chart->markerLabel(found)->text();
      QVERIFY2(label.contains(QString("rank %1").arg(p.rank)), qPrintable(label));
      QVERIFY2(label.contains(QString("step %1").arg(*p.step)), qPrintable(label));
      QVERIFY2(label.contains("## forward ##") && label.contains("aten::mm"), qPrintable(label));
      // The curve passes through the marker.
      QVERIFY(graphHasPoint(chart->allocatedGraph(p.rank), x, y));
    }
    // Labels are placed without overlapping.
    QTest::qWait(50);
    std::vector<QRectF> rects;
    for (int i = 0; i < chart->markerCount(); ++i) {
      const QCPItemText* l = chart->markerLabel(i);
      if (!l->visible()) continue;
      const QPointF tl = l->topLeft->pixelPosition(), br = l->bottomRight->pixelPosition();
      rects.emplace_back(tl, br);
    }
    QVERIFY(!rects.empty());
    for (std::size_t i = 0; i < rects.size(); ++i)
      for (std::size_t j = i + 1; j < rects.size(); ++j) QVERIFY(!rects[i].intersects(rects[j]));

    // The peaks table.
    QCOMPARE(page.peaksModel()->rowCount(), 3);
    QCOMPARE(page.peaksModel()
                 ->data(page.peaksModel()->index(1, ui::MemoryPeaksModel::PeakAllocated), ui::MemoryPeaksModel::RawValueRole)
                 .toLongLong(),
             peaks[1].peakAllocatedBytes);

    // Only reserved shown: the markers are the reserved peaks.
    page.allocatedCheck()->setChecked(false);
    page.reservedCheck()->setChecked(true);
    QCOMPARE(chart->markerCount(), 3);
    for (int i = 0; i < chart->markerCount(); ++i) {
      const auto& p = peaks[static_cast<std::size_t>(chart->markerPeak(i).series)];
      QCOMPARE(chart->markerTracer(i)->position->key(), chart->toPlotX(p.reservedAtNs));
      QCOMPARE(chart->markerTracer(i)->position->value(), chart->toPlotY(static_cast<double>(p.peakReservedBytes)));
    }
    QVERIFY(!chart->allocatedGraph(0)->visible());
    QVERIFY(chart->reservedGraph(0)->visible());
  }

  void downsamplingKeepsPeaksAtEveryZoom() {
    QTemporaryDir dir;
    const std::string path = test::pathIn(dir, "big.db");
    core::RunId run;
    test::RunSpec s;
    s.ranks = 2;
    s.memorySamples = 120'000;  // far more than pixels
    s.peakAt = 0.37;
    {
      core::TraceStore store(path);
      run = test::writeRun(store, s);
    }
    ui::MemoryPage page;
    page.resize(900, 700);
    page.show();
    QVERIFY(QTest::qWaitForWindowExposed(&page));
    page.setContext(qpath(path), {run});
    waitLoaded(page);
    core::TraceStore store(path, core::Database::Mode::ReadOnly);
    const auto peaks = core::computeMemoryPeaks(store, run);
    MemoryChart* chart = page.chart();
    // Compact storage: 16 bytes per record (plus the reserved change points).
    QVERIFY(chart->sampleBytes() <= std::size_t(2 * s.memorySamples + 16) * 16 * 2);

    auto check = [&](const char* what) {
      const QCPRange r = chart->xAxis->range();
      for (const auto& p : peaks) {
        const QCPGraph* g = chart->allocatedGraph(p.rank);
        QVERIFY2(g->dataCount() <= chart->bucketCount() + 3, what);
        const double x = chart->toPlotX(p.allocatedAtNs), y = chart->toPlotY(static_cast<double>(p.peakAllocatedBytes));
        if (x < r.lower || x > r.upper) continue;
        QVERIFY2(graphHasPoint(g, x, y),
                 qPrintable(QString("%1: rank %2 peak lost in [%3, %4]").arg(what).arg(p.rank).arg(r.lower).arg(r.upper)));
        QCOMPARE(graphMax(g), y);
      }
    };
    chart->rebucket();
    check("full range");
    const double px = chart->toPlotX(peaks[0].allocatedAtNs);
    const double full = chart->xAxis->range().size();
    // Zoom in around the peak, step by step, down to a few µs; re-bucketing goes through the
    // range-changed signal (queued), as with the mouse wheel.
    int zooms = 0;
    for (double w = full / 2; w > 0.004; w /= 3) {
      for (double off : {0.5, 0.1, 0.9}) {
        QSignalSpy rebucketed(chart, &MemoryChart::viewChanged);
        chart->xAxis->setRange(px - w * off, px + w * (1 - off));
        QVERIFY(rebucketed.wait(5000));
        ++zooms;
        check(qPrintable(QString("zoom width %1 ms").arg(w)));
      }
    }
    QVERIFY(zooms >= 20);
    // A narrower widget: fewer buckets, the peak still there.
    page.resize(500, 600);
    QTest::qWait(50);
    chart->resetZoom();
    chart->rebucket();
    check("narrow widget");
    // Pan: the window clamps to the run.
    chart->xAxis->setRange(-500, -100);
    QVERIFY(chart->xAxis->range().lower >= 0);
    chart->xAxis->setRange(full * 10, full * 10 + 50);
    QVERIFY(chart->xAxis->range().upper <= full + 1e-6);
    chart->resetZoom();
    QCOMPARE(chart->xAxis->range().lower, 0.0);
    // Zoom to a peak from the table.
    chart->zoomTo(peaks[1].allocatedAtNs - 1'000'000, peaks[1].allocatedAtNs + 1'000'000);
    chart->rebucket();
    check("zoomTo");
  }

  void breakdownSumsToThePeak() {
    QTemporaryDir dir;
    const std::string path = test::pathIn(dir, "b.db");
    core::RunId run;
    {
      core::TraceStore store(path);
      test::RunSpec s;
      s.ranks = 4;
      run = test::writeRun(store, s);
    }
    ui::MemoryPage page;
    page.resize(1200, 800);
    page.show();
    page.setContext(qpath(path), {run});
    waitLoaded(page);
    core::TraceStore store(path, core::Database::Mode::ReadOnly);
    const auto peaks = core::computeMemoryPeaks(store, run);
    QVERIFY(page.breakdownShown());
    auto* b = page.breakdownChart();
    QCOMPARE(b->groupCount(), 4);
    QCOMPARE(b->categoryCount(), 7);  // core's categories, gathered parameters included
    for (int g = 0; g < 4; ++g) {
      std::int64_t sum = 0;
      for (const auto& [cat, bytes] : peaks[static_cast<std::size_t>(g)].breakdown) sum += bytes;
      QCOMPARE(sum, peaks[static_cast<std::size_t>(g)].peakAllocatedBytes);
      QCOMPARE(b->totalBytes(g), peaks[static_cast<std::size_t>(g)].peakAllocatedBytes);
      const double plotted = b->plottedTotal(g) * b->scale().factor;
      QVERIFY(std::abs(plotted - static_cast<double>(peaks[static_cast<std::size_t>(g)].peakAllocatedBytes)) < 1.0);
    }
    // The stacked layers are the categories in order, parameters at the bottom.
    QCOMPARE(b->bars(0)->name(), QString("parameters"));
    QCOMPARE(b->bars(1)->barBelow(), b->bars(0));
    // Model-state bytes per rank.
    QTableWidget* ms = page.modelStateTable();
    QVERIFY(!ms->isHidden());
    QCOMPARE(ms->rowCount(), 4);
    QCOMPARE(ms->item(1, 1)->text(), QString("8.0 MiB"));  // rank 1: parameters 16 MiB / 2
    QCOMPARE(ms->item(0, 5)->text(), QString("64.0 MiB"));
  }

  // Issue 46: runtime runs record the breakdown over time. One rank shown by category: the chart
  // stacks the categories that have a track (parameters at the bottom, each filled down to the one
  // below), its top curve is the rank's total with the peak marked on it, and what the curves hold at
  // the peak equals the breakdown stored at the peak.
  void breakdownOverTime() {
    QTemporaryDir dir;
    const std::string path = test::pathIn(dir, "t.db");
    core::RunId run;
    test::RunSpec s;
    s.ranks = 3;
    s.categoryTracks = true;
    {
      core::TraceStore store(path);
      run = test::writeRun(store, s);
    }
    ui::MemoryPage page;
    page.resize(1200, 800);
    page.show();
    page.setContext(qpath(path), {run});
    waitLoaded(page);
    QCOMPARE(page.data()->categoryStacks.size(), std::size_t(3));
    QComboBox* view = page.viewCombo();
    QVERIFY(!view->isHidden());
    QCOMPARE(view->count(), 4);  // every rank, then ranks 0..2
    QCOMPARE(page.categoriesRank(), -1);
    QCOMPARE(page.chart()->seriesCount(), 3);
    page.showCategories(2);
    QCOMPARE(page.categoriesRank(), 2);
    auto* chart = page.chart();
    QCOMPARE(chart->seriesCount(), 6);  // no gathered parameters in this run
    QCOMPARE(chart->allocatedGraph(0)->name(), QString("parameters"));
    QCOMPARE(chart->allocatedGraph(5)->name(), QString("other"));
    QVERIFY(chart->allocatedGraph(0)->channelFillGraph() == nullptr);
    for (int i = 1; i < 6; ++i) QCOMPARE(chart->allocatedGraph(i)->channelFillGraph(), chart->allocatedGraph(i - 1));
    QVERIFY(!page.allocatedCheck()->isEnabled());
    // The top curve is the total: its maximum is the rank's peak, marked there.
    QCOMPARE(chart->markerCount(), 1);
    QCOMPARE(chart->markerPeak(0).bytes, static_cast<double>(test::peakOf(s, 2)));
    QCOMPARE(chart->markerPeak(0).series, 5);
    const QJsonObject json = page.describe();
    QCOMPARE(json["category_rank_shown"].toInt(), 2);
    QCOMPARE(json["category_ranks"].toArray().size(), 3);
    core::TraceStore store(path, core::Database::Mode::ReadOnly);
    const auto peaks = core::computeMemoryPeaks(store, run);
    const auto& breakdown = peaks[2].breakdown;
    const QJsonArray atPeak = json["categories_at_peak"].toArray();
    QCOMPARE(atPeak.size(), 6);
    std::int64_t sum = 0;
    for (const auto& v : atPeak) {
      const QJsonObject o = v.toObject();
      const std::string key = o["category"].toString().toStdString();
      const auto it = std::find_if(breakdown.begin(), breakdown.end(), [&](const auto& kv) { return kv.first == key; });
      QVERIFY2(it != breakdown.end(), key.c_str());
      QCOMPARE(static_cast<std::int64_t>(o["bytes"].toDouble()), it->second);
      sum += it->second;
    }
    QCOMPARE(sum, test::peakOf(s, 2));
    // Back to every rank.
    page.showCategories(-1);
    QCOMPARE(chart->seriesCount(), 3);
    QVERIFY(page.allocatedCheck()->isEnabled());
  }

  // Issue 46: "ZeRO-3 peaks above DDP and no page says why". Two runs side by side at their own
  // peaks: the first run's largest part with its knob, the second against it, naming the category
  // that grew (activations here: zero3 peaks 32 MiB higher) and the knob of its own configuration
  // (activation checkpointing is off there, so it is suggested; the first run has it on, so not).
  void peakDifferenceIsExplained() {
    QTemporaryDir dir;
    const std::string path = test::pathIn(dir, "why.db");
    core::RunId a, b;
    {
      core::TraceStore store(path);
      test::RunSpec s;
      s.name = "ddp";
      s.strategy = "ddp";
      s.configJson = R"({"strategy":"ddp","world_size":2,"micro_batch":4,"seq_len":128,"activation_checkpointing":true})";
      a = test::writeRun(store, s);
      s.name = "zero3";
      s.strategy = "zero3";
      s.peakBytes = 128ll << 20;
      s.configJson = R"({"strategy":"zero3","world_size":2,"micro_batch":4,"seq_len":128,"activation_checkpointing":false})";
      b = test::writeRun(store, s);
    }
    ui::MemoryPage page;
    page.resize(1200, 800);
    page.show();
    page.setContext(qpath(path), {a, b});
    waitLoaded(page);
    QVERIFY(page.overlay());
    const QStringList why = page.peakExplanations();
    QCOMPARE(why.size(), 2);
    QVERIFY2(why[0].startsWith("ddp #1: optimizer state hold the most at the peak"), qPrintable(why[0]));
    QVERIFY2(why[0].contains("ZeRO-1 or higher shards it"), qPrintable(why[0]));
    QVERIFY2(why[1].startsWith("zero3 #2 peaks 32.00 MiB above ddp #1; activations grew the most"), qPrintable(why[1]));
    QVERIFY2(why[1].contains("activation_checkpointing=true recomputes it"), qPrintable(why[1]));
    QCOMPARE(page.describe()["peak_explanations"].toArray().size(), 2);
  }

  void peaksModelUnderTester() {
    ui::MemoryPeaksModel m;
    QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::QtTest);
    core::MemoryPeak p;
    p.rank = 1;
    p.deviceType = 1;
    p.deviceId = 1;
    p.peakAllocatedBytes = 3ll << 30;
    p.allocatedAtNs = 1'500'000 + 1000;
    p.peakReservedBytes = 4ll << 30;
    p.reservedAtNs = 2'000'000 + 1000;
    p.step = 7;
    p.operation = "aten::mm";
    p.annotation = "## backward ##";
    m.setPeaks({p, p}, 1000);
    QCOMPARE(m.rowCount(), 2);
    QCOMPARE(m.data(m.index(0, ui::MemoryPeaksModel::Device)).toString(), QString("cuda:1"));
    QCOMPARE(m.data(m.index(0, ui::MemoryPeaksModel::PeakAllocated)).toString(), QString("3.00 GiB"));
    QCOMPARE(m.data(m.index(0, ui::MemoryPeaksModel::AllocatedAt)).toString(), QString("1.500"));
    QCOMPARE(m.data(m.index(0, ui::MemoryPeaksModel::Step)).toLongLong(), 7ll);
    QCOMPARE(m.data(m.index(0, ui::MemoryPeaksModel::Phase)).toString(), QString("## backward ##"));
    m.clear();
    QCOMPARE(m.rowCount(), 0);
  }

  void runWithoutMemoryRecords() {
    QTemporaryDir dir;
    const std::string path = test::pathIn(dir, "n.db");
    core::RunId run, imported;
    {
      core::TraceStore store(path);
      test::RunSpec s;
      s.memorySamples = 0;
      s.breakdown = false;
      run = test::writeRun(store, s);
      test::RunSpec k;
      k.name = "imported";
      k.source = core::RunSource::Kineto;
      k.breakdown = false;
      imported = test::writeRun(store, k);
    }
    ui::MemoryPage page;
    page.resize(900, 700);
    page.show();
    page.setContext(qpath(path), {run, imported});
    waitLoaded(page);
    // Two runs: overlaid, one row per run; the run without records says so.
    QVERIFY(page.overlay());
    QCOMPARE(page.overlayRuns().size(), std::size_t(2));
    QCOMPARE(page.runPeaksTable()->rowCount(), 2);
    QCOMPARE(page.overlayRuns()[0].peak, -1);
    QVERIFY(page.overlayRuns()[1].peak >= 0);
    QCOMPARE(page.chart()->seriesCount(), 1);  // only the imported run has a curve
    QCOMPARE(page.runPeaksTable()->item(0, 7)->text(), QString("no memory records"));
    page.showRun(0);
    waitLoaded(page);
    QVERIFY(!page.overlay());
    QVERIFY2(page.messageText().contains("no memory records"), qPrintable(page.messageText()));
    QCOMPARE(page.chart()->markerCount(), 0);
    QCOMPARE(page.peaksModel()->rowCount(), 0);
    QVERIFY(!page.breakdownShown());
    // The other run of the context, picked in the page: an imported trace, curves but no breakdown.
    QCOMPARE(page.runCombo()->count(), 3);  // the overlay, then each run
    page.showRun(1);
    waitLoaded(page);
    QCOMPARE(page.currentRun(), imported);
    QVERIFY(page.messageText().isEmpty());
    QCOMPARE(page.chart()->markerCount(), 2);
    QVERIFY(!page.breakdownShown());
    QVERIFY(page.modelStateTable()->isHidden());
  }

  void emptyDatabaseAndMissingRun() {
    QTemporaryDir dir;
    const std::string path = test::pathIn(dir, "empty.db");
    { core::TraceStore store(path); }
    ui::MemoryPage page;
    page.setContext(qpath(path), {});
    QVERIFY(!page.busy());
    QVERIFY(!page.messageText().isEmpty());
    QSignalSpy errors(&page, &ui::Page::errorMessage);
    page.setContext(qpath(path), {core::RunId{7}});
    waitLoaded(page);
    QVERIFY2(page.errorText().contains("no run with id 7"), qPrintable(page.errorText()));
    QCOMPARE(errors.size(), 1);
    QVERIFY(page.messageText().contains("no run with id 7"));
    page.setContext(QString(), {});
    QVERIFY(!page.busy());
  }

  void cancelledLoad() {
    QTemporaryDir dir;
    const std::string path = test::pathIn(dir, "c.db");
    core::RunId run, other;
    {
      core::TraceStore store(path);
      test::RunSpec s;
      s.memorySamples = 50'000;
      run = test::writeRun(store, s);
      s.name = "other";
      other = test::writeRun(store, s);
    }
    ui::MemoryPage page;
    page.resize(900, 700);
    page.show();
    page.setContext(qpath(path), {run});
    QVERIFY(page.busy());
    page.cancelLoad();
    QVERIFY(!page.busy());
    QTest::qWait(500);
    QVERIFY(page.data() == nullptr);
    QCOMPARE(page.chart()->seriesCount(), 0);
    QVERIFY(page.messageText().contains("cancelled"));
    // Changing the context mid-load cancels the first load; only the second is shown.
    page.setContext(qpath(path), {run, other});
    page.showRun(1);
    waitLoaded(page);
    QCOMPARE(page.data()->run.id, other);
    QCOMPARE(page.chart()->seriesCount(), 2);
    // Destroyed while loading.
    auto* p = new ui::MemoryPage;
    p->setContext(qpath(path), {run});
    delete p;
    QTest::qWait(200);
  }

  void pyramidKeepsTheWindowMaximum() {
    // Random walk with plateaus (ties) and spikes; windows of every size, bucket counts from few to many.
    std::mt19937_64 rng(42);
    std::vector<core::CounterSample> v;
    double level = 1000;
    core::TimeNs t = 5'000;
    for (int i = 0; i < 300'000; ++i) {
      t += 1 + static_cast<core::TimeNs>(rng() % 50);
      if (rng() % 3) level = std::max(0.0, level + static_cast<double>(static_cast<int>(rng() % 201) - 100));
      const double spike = rng() % 5000 == 0 ? 50'000.0 : 0.0;
      v.push_back({t, level + spike});
    }
    const ui::charts::MaxPyramid p(v);
    QVERIFY(p.levelCount() >= 3);
    QCOMPARE(p.size(), v.size());
    QCOMPARE(p.maxValue(), std::max_element(v.begin(), v.end(), [](auto& a, auto& b) { return a.value < b.value; })->value);
    int coarse = 0;
    for (int trial = 0; trial < 400; ++trial) {
      const std::size_t i0 = rng() % v.size();
      const std::size_t len = 1 + rng() % (trial % 4 == 0 ? v.size() : 5000);
      const std::size_t i1 = std::min(v.size() - 1, i0 + len);
      const core::TimeNs t0 = v[i0].tsNs, t1 = v[i1].tsNs + 1;
      const int buckets = 1 + static_cast<int>(rng() % 1500);
      const auto d = p.downsample(t0, t1, buckets);
      QVERIFY(d.size() <= static_cast<std::size_t>(buckets));
      // The window's first maximum is in the result, at its own time.
      auto first = v.begin() + static_cast<std::ptrdiff_t>(i0);
      for (auto it = first; it != v.begin() + static_cast<std::ptrdiff_t>(i1) + 1; ++it)
        if (it->value > first->value) first = it;
      bool found = false;
      double maxOut = 0;
      for (const auto& s : d) {
        found = found || (s.tsNs == first->tsNs && s.value == first->value);
        maxOut = std::max(maxOut, s.value);
        QVERIFY(s.tsNs >= t0 && s.tsNs < t1);
      }
      QVERIFY2(found, qPrintable(QString("trial %1: window [%2, %3] with %4 buckets").arg(trial).arg(i0).arg(i1).arg(buckets)));
      QCOMPARE(maxOut, first->value);
      // Small windows read the raw samples: exactly core::downsampleMax.
      if (p.levelFor(i1 - i0 + 1, buckets) == 0)
        QCOMPARE(d.size(), core::downsampleMax(v, t0, t1, buckets).size());
      else
        ++coarse;
    }
    QVERIFY(coarse > 20);
  }

  void deviceFilter() {
    // An imported trace with CPU and CUDA records on each rank: GPU memory shown first, one curve per rank.
    QTemporaryDir dir;
    const std::string path = test::pathIn(dir, "d.db");
    core::RunId run;
    {
      core::TraceStore store(path);
      test::RunSpec s;
      s.source = core::RunSource::Kineto;
      s.breakdown = false;
      run = test::writeRun(store, s);
      core::Transaction tx(shardscope::core::storeDb(store));
      core::BulkWriter w(store);
      for (const auto& rank : store.ranks(run))
        for (int i = 0; i < 100; ++i) {
          core::MemoryEvent m;
          m.rankId = rank.id;
          m.tsNs = s.t0 + i * 100'000;
          m.deviceType = 1;
          m.deviceId = rank.rank;
          m.totalAllocated = (1ll << 30) + i * 1000 + (i == 40 ? 5'000'000 : 0);
          m.totalReserved = 2ll << 30;
          w.addMemoryEvent(m);
        }
      w.finish();
      tx.commit();
    }
    ui::MemoryPage page;
    page.resize(1000, 700);
    page.show();
    page.setContext(qpath(path), {run});
    waitLoaded(page);
    QCOMPARE(page.deviceCombo()->count(), 2);
    QVERIFY(page.deviceCombo()->isVisibleTo(&page));
    QCOMPARE(page.deviceCombo()->currentData().toInt(), 1);
    MemoryChart* chart = page.chart();
    QCOMPARE(chart->seriesCount(), 4);
    QCOMPARE(chart->scale().suffix, QString("GiB"));
    QCOMPARE(chart->markerCount(), 2);  // the two CUDA peaks
    for (int i = 0; i < chart->markerCount(); ++i) {
      QCOMPARE(chart->markerPeak(i).bytes, static_cast<double>((1ll << 30) + 40'000 + 5'000'000));
      QCOMPARE(chart->markerTracer(i)->position->value(), chart->toPlotY(chart->markerPeak(i).bytes));
    }
    int visible = 0;
    for (int i = 0; i < 4; ++i) visible += chart->allocatedGraph(i)->visible();
    QCOMPARE(visible, 2);
    QCOMPARE(page.peaksModel()->rowCount(), 4);  // the table lists every device
    page.deviceCombo()->setCurrentIndex(1);      // CPU
    QCOMPARE(chart->markerCount(), 2);
    QVERIFY(chart->markerPeak(0).bytes < (1ll << 30));
  }

  void wheelZoomsTimeOnly() {
    QTemporaryDir dir;
    const std::string path = test::pathIn(dir, "w.db");
    core::RunId run;
    {
      core::TraceStore store(path);
      run = test::writeRun(store, test::RunSpec{});
    }
    ui::MemoryPage page;
    page.resize(1000, 700);
    page.show();
    QVERIFY(QTest::qWaitForWindowExposed(&page));
    page.setContext(qpath(path), {run});
    waitLoaded(page);
    MemoryChart* chart = page.chart();
    const QCPRange x0 = chart->xAxis->range(), y0 = chart->yAxis->range();
    const QPointF at = chart->axisRect()->center();
    QWheelEvent wheel(at, chart->mapToGlobal(at), QPoint(), QPoint(0, 240), Qt::NoButton, Qt::NoModifier, Qt::NoScrollPhase,
                      false);
    QApplication::sendEvent(chart, &wheel);
    QVERIFY(chart->xAxis->range().size() < x0.size() * 0.8);
    QCOMPARE(chart->yAxis->range().lower, y0.lower);
    QCOMPARE(chart->yAxis->range().upper, y0.upper);
    QSignalSpy rebucketed(chart, &MemoryChart::viewChanged);
    QVERIFY(rebucketed.wait(5000));
    chart->resetZoom();
    QCOMPARE(chart->xAxis->range().lower, x0.lower);
    QCOMPARE(chart->xAxis->range().upper, x0.upper);
  }

  void loadStreamsAndCancels() {
    QTemporaryDir dir;
    const std::string path = test::pathIn(dir, "l.db");
    core::RunId run;
    {
      core::TraceStore store(path);
      test::RunSpec s;
      s.memorySamples = 70'000;
      run = test::writeRun(store, s);
    }
    core::TraceStore store(path, core::Database::Mode::ReadOnly);
    const auto d = ui::loadMemoryRun(store, run, {run});
    QCOMPARE(d.series.size(), std::size_t(2));
    QCOMPARE(d.records, std::uint64_t(2 * 70'001));  // the fixture adds the peak record
    QCOMPARE(d.series[0].allocated->size(), std::size_t(70'001));
    QVERIFY(d.series[0].allocated->levelCount() >= 2);
    QVERIFY(d.series[0].reserved->size() < d.series[0].allocated->size() / 10);  // change points only
    QCOMPARE(d.runNames.size(), std::size_t(1));
    core::CancelToken cancel;
    cancel.cancel();
    QVERIFY_THROWS_EXCEPTION(core::Cancelled, ui::loadMemoryRun(store, run, {run}, &cancel));
  }
};

QTEST_MAIN(TestMemoryPage)
#include "tst_memory_page.moc"
