// The Timeline page on a real store (the same hand-made 2-rank GPU trace as tst_timeline_widget,
// imported with the real importer): the index loads in a BackgroundTask and the page becomes not
// busy, a jump by store event id (what the Communication page does) selects and shows the event with
// its args, correlated launch and the collective on every rank, the search box selects, a cancel
// during a load leaves the page usable, and a missing database is an error in the page, not a crash.
#include <QJsonArray>
#include <QJsonObject>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTextBrowser>
#include <QTableWidget>
#include <QtTest>

#include <algorithm>
#include <stdexcept>

#include "core/import/kineto_importer.h"
#include "core/timeline/timeline_index.h"
#include "tests/common/test_support.h"
#include "tests/ui/timeline_fixture.h"
#include "ui/pages/timeline_page.h"
#include "ui/timeline/timeline_widget.h"

using namespace shardscope;
using namespace shardscope::core;
using namespace shardscope::ui;
namespace tl = shardscope::core::timeline;
using shardscope::test::pathIn;
using shardscope::test::writeFile;

namespace {

using shardscope::test::timeline::findNamed;
using shardscope::test::timeline::Found;
using shardscope::test::timeline::trace;

}  // namespace

class TestTimelinePage : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    db_ = pathIn(dir_, "tl.db");
    TraceStore store(db_);
    KinetoImportOptions o;
    o.runName = "two ranks";
    run_ = importKineto(store, {writeFile(dir_, "r0.json", trace(0)), writeFile(dir_, "r1.json", trace(1))}, o).runIds.at(0);
    index_ = tl::TimelineIndex::build(store, run_);
  }

  void pageLoadsShowsEventsAndCancels() {
    TimelinePage page;
    page.resize(1400, 900);
    QSignalSpy busy(&page, &Page::busyChanged);
    page.setContext(QString::fromStdString(db_), {run_});
    QVERIFY(page.busy());
    QTRY_VERIFY_WITH_TIMEOUT(!page.busy(), 20000);
    QVERIFY(page.index());
    QCOMPARE(page.index()->eventCount(), index_->eventCount());
    QVERIFY(busy.count() >= 2);
    // Jump to an event by its store id (what the Communication page asks for).
    const Found ar = findNamed(*page.index(), 1, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 1);
    const auto& lane = page.index()->lane(ar.lane);
    page.showEvent(run_.value(), static_cast<qint64>(lane.eventId[ar.index]), lane.start[ar.index], lane.end[ar.index]);
    QVERIFY(page.timeline()->selectedEvent());
    QCOMPARE(page.index()->lane(page.timeline()->selectedEvent()->first).eventId[page.timeline()->selectedEvent()->second],
             lane.eventId[ar.index]);
    QVERIFY(page.timeline()->viewStart() <= lane.start[ar.index] && page.timeline()->viewEnd() >= lane.end[ar.index]);
    QTRY_VERIFY(!page.details()->toPlainText().contains("loading args"));
    QVERIFY2(page.details()->toPlainText().contains("launched by cudaLaunchKernel"), qPrintable(page.details()->toPlainText()));
    QVERIFY(page.details()->toPlainText().contains("The same collective on every rank"));
    // The Lanes menu: hide every GPU stream, show them again, collapse every rank.
    Q_EMIT page.lanesMenu()->aboutToShow();
    QAction* streams = nullptr;
    QAction* collapseAll = nullptr;
    for (QAction* a : page.lanesMenu()->actions()) {
      if (a->text() == "GPU streams") streams = a;
      if (a->text() == "Collapse all ranks") collapseAll = a;
    }
    QVERIFY(streams && collapseAll);
    QVERIFY(streams->isChecked());
    std::vector<std::uint32_t> streamLanes;
    for (std::uint32_t li = 0; li < page.index()->lanes().size(); ++li)
      if (page.index()->lane(li).kind == tl::LaneKind::GpuStream) streamLanes.push_back(li);
    QVERIFY(!streamLanes.empty());
    for (auto li : streamLanes) QVERIFY(!page.timeline()->laneHidden(li));
    streams->setChecked(false);
    QVERIFY(page.timeline()->laneKindHidden(tl::LaneKind::GpuStream));
    for (auto li : streamLanes) QVERIFY(page.timeline()->laneHidden(li));
    streams->setChecked(true);
    for (auto li : streamLanes) QVERIFY(!page.timeline()->laneHidden(li));
    collapseAll->trigger();
    for (int r = 0; r < static_cast<int>(page.index()->ranks().size()); ++r) QVERIFY(page.timeline()->rankCollapsed(r));
    page.timeline()->setAllRanksCollapsed(false);
    // Search through the page's box.
    page.searchBox()->setText("gemm");
    QTest::keyClick(page.searchBox(), Qt::Key_Return);
    QVERIFY(page.timeline()->selectedEvent());
    // Range statistics shown, then the run is loaded again (what selecting another run does): no
    // panel keeps the previous run's event or range (issue 46).
    Q_EMIT page.timeline()->rangeSelected(page.index()->minStart(), page.index()->maxEnd());
    QVERIFY(page.rangeTable()->rowCount() > 0);
    page.setContext(QString::fromStdString(db_), {});
    QCOMPARE(page.rangeTable()->rowCount(), 0);
    QVERIFY(!page.details()->toPlainText().contains("launched by"));
    page.setContext(QString::fromStdString(db_), {run_});
    QTRY_VERIFY_WITH_TIMEOUT(!page.busy(), 20000);
    QCOMPARE(page.rangeTable()->rowCount(), 0);
    // Cancel while loading: not busy, usable again after.
    page.reload();
    QVERIFY(page.busy());
    page.cancelLoad();
    QVERIFY(!page.busy());
    page.reload();
    QTRY_VERIFY_WITH_TIMEOUT(!page.busy(), 20000);
    QVERIFY(page.index());
    // A database that is not there: an error in the page, no crash.
    page.setContext(QString::fromStdString(pathIn(dir_, "missing/none.db")), {RunId{1}});
    QTRY_VERIFY_WITH_TIMEOUT(!page.busy(), 20000);
    QVERIFY(!page.errorText().isEmpty());
  }

  // The legend lists the colours the run uses (computation and the all-reduce here, no all-gather);
  // selecting a kernel draws the flow arrow from its CPU launch once the store found it.
  void legendAndFlowArrow() {
    TimelinePage page;
    page.resize(1400, 900);
    page.setContext(QString::fromStdString(db_), {run_});
    QTRY_VERIFY_WITH_TIMEOUT(!page.busy(), 20000);
    const QString legend = page.legend()->text();
    QVERIFY2(legend.contains("computation") && legend.contains("all_reduce"), qPrintable(legend));
    QVERIFY2(!legend.contains("all_gather"), qPrintable(legend));
    QVERIFY2(legend.contains("exposed communication"), qPrintable(legend));  // the summary track's key
    QVERIFY(!page.legend()->isHidden());
    const QJsonObject json = page.describe();
    QVERIFY(json.value("legend").toArray().contains(QJsonValue("all_reduce")));
    QCOMPARE(json.value("ranks_on_screen").toInt(), 2);
    const Found gemm = findNamed(*page.index(), 0, "gemm", 1);
    const Found launch = findNamed(*page.index(), 0, "cudaLaunchKernel", 2);  // correlation 4, at 110 µs
    page.timeline()->selectEvent(gemm.lane, gemm.index, true);
    QTRY_VERIFY(page.timeline()->flow());
    const auto flow = *page.timeline()->flow();
    QCOMPARE(flow.fromLane, launch.lane);
    QCOMPARE(flow.fromIndex, launch.index);
    QCOMPARE(flow.toLane, gemm.lane);
    QCOMPARE(flow.toIndex, gemm.index);
    QVERIFY(page.timeline()->flowLine());
    // Another selection drops it (a CPU event has no launch).
    page.timeline()->selectEvent(launch.lane, launch.index);
    QVERIFY(!page.timeline()->flow());
    QTest::qWait(200);
    QVERIFY(!page.timeline()->flow());
  }

  void jumpLoadsTheRunFirst() {
    // No run selected yet (what MainWindow::onJumpToEvent may meet): the jump loads the run, then
    // selects the event once the index has arrived.
    TimelinePage page;
    page.resize(1400, 900);
    page.setContext(QString::fromStdString(db_), {});
    QTRY_VERIFY_WITH_TIMEOUT(!page.busy(), 20000);
    QVERIFY(!page.index());
    const Found ar = findNamed(*index_, 0, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 0);
    const auto& lane = index_->lane(ar.lane);
    const bool invoked = QMetaObject::invokeMethod(&page, "showEvent", Q_ARG(qint64, static_cast<qint64>(run_.value())),
                                                   Q_ARG(qint64, static_cast<qint64>(lane.eventId[ar.index])),
                                                   Q_ARG(qint64, lane.start[ar.index]), Q_ARG(qint64, lane.end[ar.index]));
    QVERIFY(invoked);  // by name, as MainWindow calls it
    QVERIFY(page.busy());
    QVERIFY(!page.timeline()->selectedEvent());
    QTRY_VERIFY_WITH_TIMEOUT(!page.busy(), 20000);
    QCOMPARE(page.currentRun(), run_);
    QVERIFY(page.timeline()->selectedEvent());
    const auto sel = *page.timeline()->selectedEvent();
    QCOMPARE(page.index()->lane(sel.first).eventId[sel.second], lane.eventId[ar.index]);
    QVERIFY(page.timeline()->viewStart() <= lane.start[ar.index] && page.timeline()->viewEnd() >= lane.end[ar.index]);
    QVERIFY(page.errorText().isEmpty());
  }

 private:
  QTemporaryDir dir_;
  std::string db_;
  RunId run_;
  std::shared_ptr<const tl::TimelineIndex> index_;
};

QTEST_MAIN(TestTimelinePage)
#include "tst_timeline_page.moc"
