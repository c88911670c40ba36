// The session, the app's document per database: each run is analysed once whichever pages show it;
// its cache shares a computation between threads, survives a cancelled one, forgets a run whose data
// changed (another connection changing its status or deleting it), and only the latest task of a
// slot delivers.
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QtTest>

#include <atomic>
#include <chrono>
#include <thread>

#include "core/analysis/comparison.h"
#include "core/storage/trace_store.h"
#include "tests/common/test_support.h"
#include "tests/ui/ui_fixture.h"
#include "ui/charts/memory_chart.h"
#include "ui/main/main_window.h"
#include "ui/main/task_centre.h"
#include "ui/models/comparison_model.h"
#include "ui/pages/communication_page.h"
#include "ui/pages/compare_page.h"
#include "ui/pages/memory_page.h"
#include "ui/pages/overview_page.h"
#include "ui/session/run_session.h"

using namespace shardscope;
using core::Id;
using core::RunId;

// A list of run ids, as the window and the session hold them.
QList<RunId> runIds(std::initializer_list<std::int64_t> v) {
  QList<RunId> out;
  for (std::int64_t id : v) out << RunId{id};
  return out;
}

namespace {

std::string makeDb(const QTemporaryDir& dir, int runs) {
  const std::string path = test::pathIn(dir, "s.db");
  core::TraceStore store(path);
  const char* names[] = {"ddp", "fsdp", "zero3"};
  for (int i = 0; i < runs; ++i) {
    test::RunSpec spec;
    spec.name = names[i % 3];
    spec.strategy = names[i % 3];
    spec.memorySamples = 60;
    spec.commNs = 2'000'000 + i * 1'000'000;
    test::writeRun(store, spec);
  }
  return path;
}

bool settle(ui::MainWindow& w) {
  return QTest::qWaitFor([&] { return !w.busy(); }, 30000);
}

}  // namespace

class TestRunSession : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void initTestCase() { QStandardPaths::setTestModeEnabled(true); }

  void pagesAnalyseARunOnce() {
    QTemporaryDir dir;
    const std::string path = makeDb(dir, 1);
    ui::MainWindow w;
    w.resize(1200, 800);
    w.show();
    QVERIFY(w.openDatabase(QString::fromStdString(path)));
    QVERIFY(settle(w));
    QCOMPARE(w.selectedRuns(), runIds({1}));
    for (const char* page : {"overview", "compare", "communication", "memory", "timeline"}) {
      QVERIFY(w.showPage(page));
      QVERIFY2(settle(w), page);
      QCOMPARE(w.pageContextRuns(page).value_or(QList<RunId>{}), runIds({1}));
    }
    auto* cache = w.session()->cache().get();
    QCOMPARE(cache->computedCount(ui::RunSession::kAnalysis, RunId{1}), 1);
    QCOMPARE(cache->computedCount("memory-curves", RunId{1}), 1);
    QCOMPARE(cache->computedCount("timeline", RunId{1}), 1);
    // Back and forth: nothing is computed again.
    for (const char* page : {"overview", "memory", "compare"}) {
      QVERIFY(w.showPage(page));
      QVERIFY(settle(w));
    }
    QCOMPARE(cache->computedCount(ui::RunSession::kAnalysis), 1);
    // The Overview's and the Compare page's step time are the same number (one truth).
    auto* overview = qobject_cast<ui::OverviewPage*>(w.page("overview"));
    auto* compare = qobject_cast<ui::ComparePage*>(w.page("compare"));
    QVERIFY(overview && compare);
    QVERIFY(!overview->keyMetrics().empty() && overview->keyMetrics()[0].stepTimeMs);
    const auto& rows = compare->model()->comparison().rows;
    const auto it = std::find_if(rows.begin(), rows.end(), [](const auto& r) { return r.key == "step_time_ms"; });
    QVERIFY(it != rows.end());
    QCOMPARE(*overview->keyMetrics()[0].stepTimeMs, *it->values[0]);
    // F5 asks for fresh figures: computed once more.
    w.refresh();
    QVERIFY(settle(w));
    QCOMPARE(cache->computedCount(ui::RunSession::kAnalysis, RunId{1}), 2);
  }

  void threeRunsOnEveryPageOnceEach() {
    QTemporaryDir dir;
    const std::string path = makeDb(dir, 3);
    ui::MainWindow w;
    w.resize(1400, 900);
    w.show();
    w.setAutoSelectLatest(false);
    QVERIFY(w.openDatabase(QString::fromStdString(path)));
    QVERIFY(settle(w));
    w.selectRuns({core::RunId{1}, core::RunId{2}, core::RunId{3}});
    w.applySelectionNow();
    for (const char* page : {"compare", "memory", "communication", "timeline", "overview"}) {
      QVERIFY(w.showPage(page));
      QVERIFY2(settle(w), page);
    }
    auto* cache = w.session()->cache().get();
    for (std::int64_t id : {1, 2, 3}) QCOMPARE(cache->computedCount(ui::RunSession::kAnalysis, RunId{id}), 1);
    QCOMPARE(w.session()->runs(), runIds({1, 2, 3}));
    // Every page compares: Memory overlays three runs, Communication has a column per run, the
    // Compare page gives its verdict.
    auto* memory = qobject_cast<ui::MemoryPage*>(w.page("memory"));
    QVERIFY(memory->overlay());
    QCOMPARE(memory->overlayRuns().size(), std::size_t(3));
    QCOMPARE(memory->chart()->seriesCount(), 3);
    auto* comm = qobject_cast<ui::CommunicationPage*>(w.page("communication"));
    QVERIFY(comm->runsCompared().has_value());
    QCOMPARE(comm->runsTable()->columnCount(), 4);
    auto* compare = qobject_cast<ui::ComparePage*>(w.page("compare"));
    QVERIFY(!compare->recommendationText().isEmpty());
    // The three runs report the same tokens/s and the same memory: no measurable difference, so
    // the verdict names no run (issue 46: never a winner inside the noise).
    QVERIFY(!compare->model()->comparison().verdict.winner);
    QCOMPARE(compare->recommendedRun(), RunId{});
    QVERIFY2(compare->recommendationText().contains("no measurable difference"), qPrintable(compare->recommendationText()));
  }

  void cacheSharesOneComputation() {
    ui::RunCache cache;
    std::atomic<int> computed{0};
    auto compute = [&] {
      ++computed;
      std::this_thread::sleep_for(std::chrono::milliseconds(150));
      return std::make_shared<const int>(42);
    };
    std::vector<std::thread> threads;
    std::atomic<int> sum{0};
    for (int i = 0; i < 4; ++i) threads.emplace_back([&] { sum += *cache.get<int>("x", core::RunId{7}, nullptr, compute); });
    for (auto& t : threads) t.join();
    QCOMPARE(computed.load(), 1);
    QCOMPARE(sum.load(), 4 * 42);
    QCOMPARE(cache.computedCount("x", RunId{7}), 1);
    QVERIFY(cache.has("x", core::RunId{7}));
    cache.invalidate(core::RunId{7});
    QVERIFY(!cache.has("x", core::RunId{7}));
    QCOMPARE(*cache.get<int>("x", core::RunId{7}, nullptr, compute), 42);
    QCOMPARE(computed.load(), 2);
  }

  void aCancelledComputationIsTakenOver() {
    ui::RunCache cache;
    core::CancelToken first;
    std::atomic<bool> started{false};
    std::thread a([&] {
      try {
        cache.get<int>("x", core::RunId{1}, &first, [&]() -> std::shared_ptr<const int> {
          started = true;
          while (!first.isCancelled()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
          throw core::Cancelled();
        });
      } catch (const core::Cancelled&) {
      }
    });
    while (!started) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    int got = 0;
    std::thread b([&] { got = *cache.get<int>("x", core::RunId{1}, nullptr, [] { return std::make_shared<const int>(5); }); });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    first.cancel();
    a.join();
    b.join();
    QCOMPARE(got, 5);  // b waited, saw the cancellation, computed it itself
    QCOMPARE(cache.computedCount("x", RunId{1}), 2);
    // A failure is not cached: the next call tries again.
    QVERIFY_THROWS_EXCEPTION(core::Error, cache.get<int>("y", core::RunId{1}, nullptr,
                                                         []() -> std::shared_ptr<const int> { throw core::Error("no"); }));
    QCOMPARE(*cache.get<int>("y", core::RunId{1}, nullptr, [] { return std::make_shared<const int>(3); }), 3);
  }

  void forgetsRunsWhoseDataChanged() {
    QTemporaryDir dir;
    const std::string path = makeDb(dir, 2);
    ui::RunSession session;
    session.setDatabase(QString::fromStdString(path));
    QVERIFY(!session.poll());  // the first look only learns the file
    {
      core::TraceStore store(path, core::Database::Mode::ReadOnly);
      ui::RunSession::analysis(*session.cache(), store, core::RunId{1}, nullptr);
      ui::RunSession::analysis(*session.cache(), store, core::RunId{2}, nullptr);
    }
    QVERIFY(!session.poll());  // nothing committed
    QSignalSpy changed(&session, &ui::RunSession::dataChanged);
    {
      core::TraceStore other(path);  // another connection: a run fails, another is deleted
      other.setRunStatus(core::RunId{1}, core::RunStatus::Failed, "killed");
    }
    QVERIFY(session.poll());
    QCOMPARE(changed.count(), 1);
    QCOMPARE(changed.first().first().value<QList<RunId>>(), runIds({1}));
    QVERIFY(!session.cache()->has(ui::RunSession::kAnalysis, core::RunId{1}));
    QVERIFY(session.cache()->has(ui::RunSession::kAnalysis, core::RunId{2}));
    {
      core::TraceStore other(path);
      other.deleteRun(core::RunId{2});
    }
    QVERIFY(session.poll());
    QCOMPARE(changed.count(), 2);
    QVERIFY(!session.cache()->has(ui::RunSession::kAnalysis, core::RunId{2}));
    // A new database: a new cache.
    const auto before = session.cache();
    session.setDatabase(QString());
    QVERIFY(session.cache() != before);
  }

  void onlyTheLatestTaskOfASlotDelivers() {
    ui::TaskRunner runner;
    QList<int> delivered;
    std::atomic<bool> release{false};
    runner.start<int>(
        &runner, "page", "first",
        [&](core::CancelToken&, const core::ProgressFn&) {
          while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(2));
          return 1;  // ends late, after it was replaced: dropped
        },
        [&](int v) { delivered << v; });
    QVERIFY(runner.busy("page"));
    runner.start<int>(
        &runner, "page", "second", [](core::CancelToken&, const core::ProgressFn&) { return 2; }, [&](int v) { delivered << v; });
    release = true;
    QVERIFY(QTest::qWaitFor([&] { return !runner.busy(); }, 5000));
    QTest::qWait(50);
    QCOMPARE(delivered, QList<int>{2});
    QCOMPARE(runner.startedCount(), quint64(2));
    // The task centre shows a running task and cancels it through its owner.
    ui::TaskCentre centre;
    centre.setRunner(&runner);
    std::atomic<bool> stop{false};
    runner.start<int>(
        &runner, "memory", "Loading the memory",
        [&](core::CancelToken& c, const core::ProgressFn&) {
          while (!c.isCancelled() && !stop) std::this_thread::sleep_for(std::chrono::milliseconds(2));
          c.throwIfCancelled();
          return 0;
        },
        [](int) {});
    QCOMPARE(centre.shownKey(), QString("task:memory"));
    QVERIFY(centre.shownLabel().startsWith("Loading the memory"));
    centre.setActivity("import", "Importing 2 path(s)…", -1, true, 100);
    QCOMPARE(centre.shownKey(), QString("import"));  // an import outranks a page's task
    centre.clearActivity("import");
    QSignalSpy cancel(&centre, &ui::TaskCentre::cancelRequested);
    QTest::mouseClick(reinterpret_cast<QWidget*>(centre.cancelButton()), Qt::LeftButton);
    QCOMPARE(cancel.count(), 1);
    QCOMPARE(cancel.first().first().toString(), QString("task:memory"));
    runner.cancel("memory");
    QCOMPARE(centre.shownKey(), QString());
    stop = true;
  }
};

QTEST_MAIN(TestRunSession)
#include "tst_run_session.moc"
