// The Overview page's "Imported from" section: the import_log rows of an imported run (file, format,
// events, skipped, warnings), loaded with the page's summary off the GUI thread and in describe();
// hidden for a run that was not imported.
#include <QJsonArray>
#include <QJsonObject>
#include <QLabel>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QtTest>

#include "core/import/kineto_importer.h"
#include "core/storage/trace_store.h"
#include "tests/common/test_support.h"
#include "tests/ui/ui_fixture.h"
#include "ui/pages/overview_page.h"

using namespace shardscope;

namespace {

std::string rankTrace(int rank, const std::string& extra) {
  return R"({"distributedInfo": {"rank": )" + std::to_string(rank) + R"(, "world_size": 2}, "traceEvents": [
  {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10, "dur": 5})" +
         extra + "]}";
}

}  // namespace

class TestOverviewPage : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void importedFromSection() {
    QTemporaryDir dir;
    const std::string db = test::pathIn(dir, "o.db");
    const std::string r0 = test::writeFile(dir, "rank0.json", rankTrace(0, ""));
    const std::string r1 =
        test::writeFile(dir, "rank1.json", rankTrace(1, R"(, {"ph": "B", "name": "b", "pid": 1, "tid": 1, "ts": 2})"));
    core::RunId imported, measured;
    {
      core::TraceStore store(db);
      imported = core::importKineto(store, {r0, r1}).runIds.front();
      test::RunSpec s;
      s.ranks = 1;
      measured = test::writeRun(store, s);
    }
    ui::OverviewPage page;
    page.resize(1200, 800);
    page.show();
    QVERIFY(QTest::qWaitForWindowExposed(&page));
    page.setContext(QString::fromStdString(db), {imported, measured});
    QTRY_VERIFY_WITH_TIMEOUT(!page.busy(), 30000);
    page.showRun(imported);
    QTableWidget* t = page.importTable();
    QVERIFY(t->isVisible());
    QCOMPARE(t->rowCount(), 2);
    QCOMPARE(t->item(0, 0)->text(), QString("rank0.json"));
    QCOMPARE(t->item(0, 0)->toolTip(), QString::fromStdString(r0));
    QCOMPARE(t->item(1, 1)->text(), QString("kineto"));
    QCOMPARE(t->item(1, 2)->text(), QString("1"));
    QCOMPARE(t->item(1, 3)->text(), QString("1"));  // events
    QCOMPARE(t->item(1, 4)->text(), QString("1"));  // skipped
    QCOMPARE(t->item(1, 4)->toolTip(), QString("phase 'B': 1"));
    QCOMPARE(t->item(1, 5)->text(), QString("1"));  // warnings
    QVERIFY(t->item(1, 5)->toolTip().contains("skipping 'B' events"));
    QCOMPARE(t->item(0, 5)->text(), QString("0"));

    const QJsonObject d = page.describe();
    const QJsonArray runs = d.value("runs").toArray();
    QCOMPARE(runs.size(), 2);
    const QJsonArray files = runs[0].toObject().value("imported_from").toArray();
    QCOMPARE(files.size(), 2);
    QCOMPARE(files[1].toObject().value("path").toString(), QString::fromStdString(r1));
    QCOMPARE(files[1].toObject().value("format").toString(), QString("kineto"));
    QCOMPARE(files[1].toObject().value("skipped").toInt(), 1);
    QCOMPARE(files[1].toObject().value("warnings").toArray().size(), 1);
    QVERIFY(!runs[1].toObject().contains("imported_from"));

    page.showRun(measured);  // not imported: no section
    QVERIFY(!t->isVisible());
  }
};

QTEST_MAIN(TestOverviewPage)
#include "tst_overview_page.moc"
