// Every page holds the same figures as the CLI: the real app (`shardscope --screenshot`, offscreen)
// writes OUT.json beside each picture with what the page shows, and the real `shardscope-cli
// compare-runs --json` / `analyze --json` on the same three runs must agree with it number for number.
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <map>

#include "core/storage/trace_store.h"
#include "tests/common/test_support.h"
#include "tests/ui/ui_fixture.h"

using namespace shardscope;

namespace {

struct Out {
  int code = -1;
  QByteArray out, err;
};

Out runProcess(const QString& program, const QStringList& args) {
  QProcess p;
  auto env = QProcessEnvironment::systemEnvironment();
  env.insert("QT_QPA_PLATFORM", "offscreen");
  p.setProcessEnvironment(env);
  p.start(program, args);
  Out o;
  if (!p.waitForFinished(120000)) {
    p.kill();
    p.waitForFinished();
    return o;
  }
  o.code = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
  o.out = p.readAllStandardOutput();
  o.err = p.readAllStandardError();
  return o;
}

QJsonObject parse(const QByteArray& bytes) {
  QJsonParseError e;
  const auto doc = QJsonDocument::fromJson(bytes, &e);
  return doc.object();
}

bool same(const QJsonValue& a, const QJsonValue& b) {
  if (a.isNull() || b.isNull()) return a.isNull() && b.isNull();
  const double x = a.toDouble(), y = b.toDouble();
  return std::abs(x - y) <= 1e-9 * std::max(1.0, std::max(std::abs(x), std::abs(y)));
}

}  // namespace

class TestPageJson : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;
  QString db_;
  QJsonObject compareRuns_;
  std::map<int, QJsonObject> analyze_;  // run id -> analyze --json's run

  // The page as the app shows it: OUT.json of a screenshot.
  QJsonObject page(const QString& id, const QStringList& extra = {}, const QString& runs = "1,2,3") {
    const QString png = dir_.filePath(id + QString::number(qHash(extra.join(' ') + runs)) + ".png");
    QStringList args{"--open", db_, "--page", id, "--run", runs, "--screenshot", png, "--size", "1400x900"};
    args << extra;
    const Out o = runProcess(SHARDSCOPE_GUI, args);
    if (o.code != 0) qWarning("%s", o.err.constData());
    if (o.code != 0) return {};
    QFile f(dir_.filePath(QFileInfo(png).completeBaseName() + ".json"));
    if (!f.open(QIODevice::ReadOnly)) return {};
    return parse(f.readAll());
  }

 private Q_SLOTS:
  void initTestCase() {
    db_ = dir_.filePath("three.db");
    {
      core::TraceStore store(db_.toStdString());
      const char* names[] = {"ddp", "fsdp", "zero3"};
      for (int i = 0; i < 3; ++i) {
        test::RunSpec s;
        s.name = names[i];
        s.strategy = names[i];
        s.steps = 6;
        s.commNs = 2'000'000 + i * 1'500'000;
        s.computeNs = 6'000'000 - i * 500'000;
        s.peakBytes = (96ll + 16 * i) << 20;
        s.tokensPerS = 1000 + 100 * i;
        s.memorySamples = 120;
        test::writeRun(store, s);
      }
    }
    const Out c = runProcess(SHARDSCOPE_CLI, {"compare-runs", "--db", db_, "--runs", "1,2,3", "--json"});
    QCOMPARE(c.code, 0);
    compareRuns_ = parse(c.out);
    QVERIFY(!compareRuns_.isEmpty());
    for (int id : {1, 2, 3}) {
      const Out a = runProcess(SHARDSCOPE_CLI, {"analyze", "--db", db_, "--run", QString::number(id), "--json"});
      QCOMPARE(a.code, 0);
      analyze_[id] = parse(a.out)["runs"].toArray().at(0).toObject();
    }
  }

  void compareHoldsCompareRuns() {
    const QJsonObject j = page("compare");
    QVERIFY(!j.isEmpty());
    QCOMPARE(j["runs"].toArray().size(), 3);
    QCOMPARE(j["runs"].toArray().at(2).toObject()["label"].toString(), QString("zero3 #3"));
    std::map<QString, QJsonObject> gui;
    for (const auto& r : j["rows"].toArray()) gui[r.toObject()["key"].toString()] = r.toObject();
    const QJsonArray cliRows = compareRuns_["rows"].toArray();
    QVERIFY(cliRows.size() >= 8);
    for (const auto& v : cliRows) {
      const QJsonObject c = v.toObject();
      const QString key = c["key"].toString();
      QVERIFY2(gui.count(key), qPrintable("the Compare page lacks the row " + key));
      const QJsonObject g = gui[key];
      for (int i = 0; i < 3; ++i) {
        QVERIFY2(same(g["values"].toArray()[i], c["values"].toArray()[i]), qPrintable(key));
        QVERIFY2(same(g["delta_pct"].toArray()[i], c["delta_pct"].toArray()[i]), qPrintable(key));
        QCOMPARE(g["within_noise"].toArray()[i].toBool(), c["within_noise"].toArray()[i].toBool());
      }
      // compare-runs names the best run by id; the page by index.
      if (c["best_run"].isNull())
        QVERIFY(g["best"].isNull());
      else
        QCOMPARE(g["best"].toInt() + 1, c["best_run"].toInt());
    }
    QCOMPARE(gui["step_time_ms"]["unit"].toString(), QString("ms"));
    QCOMPARE(gui["exposed_comm_pct"]["unit"].toString(), QString("%"));
    // The stacked step bar: four parts per run that sum to the step time of the table.
    const QJsonObject stack = j["charts"].toArray()[0].toObject();
    QCOMPARE(stack["series"].toArray().size(), 4);
    for (int i = 0; i < 3; ++i) {
      double sum = 0;
      for (const auto& s : stack["series"].toArray()) {
        QCOMPARE(s.toObject()["length"].toInt(), 3);
        sum += s.toObject()["values_ms"].toArray()[i].toDouble();
      }
      // The chart holds whole nanoseconds: within 10 ns of the table's mean.
      QVERIFY2(std::abs(sum - gui["step_time_ms"]["values"].toArray()[i].toDouble()) < 1e-5, "the parts make the step");
    }
    QVERIFY(!j["verdict"].toString().isEmpty());
    // The verdict is compare-runs' own: the same winner (a run id, or null inside the noise).
    QCOMPARE(j["verdict_detail"].toObject(), compareRuns_["verdict"].toObject());
    QVERIFY(compareRuns_["verdict"].toObject().contains("winner"));
  }

  void overviewHoldsCompareRuns() {
    const QJsonObject j = page("overview");
    QVERIFY(!j.isEmpty());
    const QJsonArray runs = j["runs"].toArray();
    QCOMPARE(runs.size(), 3);
    std::map<QString, QJsonArray> cli;
    for (const auto& v : compareRuns_["rows"].toArray()) cli[v.toObject()["key"].toString()] = v.toObject()["values"].toArray();
    for (int i = 0; i < 3; ++i) {
      for (const auto& f : runs[i].toObject()["figures"].toArray()) {
        const QJsonObject fig = f.toObject();
        const QString key = fig["key"].toString();
        if (!cli.count(key)) continue;
        QVERIFY2(same(fig["value"], cli[key][i]), qPrintable(key));
      }
    }
  }

  void memoryHoldsTheFigures() {
    const QJsonObject j = page("memory");
    QVERIFY(!j.isEmpty());
    QCOMPARE(j["mode"].toString(), QString("overlay"));
    QCOMPARE(j["series"].toArray().size(), 3);
    for (const auto& s : j["series"].toArray()) QVERIFY(s.toObject()["length"].toInt() > 10);
    const QJsonArray runs = j["runs"].toArray();
    const QJsonArray cliRuns = compareRuns_["runs"].toArray();
    for (int i = 0; i < 3; ++i) {
      const QJsonObject cliFig = cliRuns[i].toObject()["figures"].toObject();
      QJsonValue gui;
      for (const auto& f : runs[i].toObject()["figures"].toArray())
        if (f.toObject()["key"].toString() == "peak_allocated_bytes") gui = f.toObject()["value"];
      QVERIFY(same(gui, cliFig["peak_allocated_bytes"]));
      QCOMPARE(runs[i].toObject()["peak_rank"].toInt(), 1);  // rank 1 holds one MiB more (ui_fixture)
    }
    // One run: its peaks per rank are analyze's.
    const QJsonObject one = page("memory", {}, "2");
    QCOMPARE(one["mode"].toString(), QString("run"));
    const QJsonArray peaks = one["table_rows"].toArray();
    const QJsonArray cliPeaks = analyze_[2]["memory_peaks"].toArray();
    QCOMPARE(peaks.size(), cliPeaks.size());
    for (int k = 0; k < peaks.size(); ++k) {
      QCOMPARE(peaks[k].toObject()["rank"].toInt(), cliPeaks[k].toObject()["rank"].toInt());
      QVERIFY(same(peaks[k].toObject()["peak_allocated_bytes"], cliPeaks[k].toObject()["peak_allocated_bytes"]));
    }
  }

  void communicationHoldsTheCli() {
    const QJsonObject j = page("communication");
    QVERIFY(!j.isEmpty());
    // The baseline's own table is analyze's collectives.
    std::map<QString, QJsonObject> cli;
    for (const auto& v : analyze_[1]["collectives"].toArray())
      cli[v.toObject()["op"].toString() + "/" + v.toObject()["process_group"].toString()] = v.toObject();
    const QJsonArray rows = j["collectives"].toArray();
    QCOMPARE(rows.size(), static_cast<int>(cli.size()));
    for (const auto& v : rows) {
      const QJsonObject r = v.toObject();
      const QJsonObject c = cli[r["op"].toString() + "/" + r["group"].toString()];
      QVERIFY(same(r["count"], c["count"]));
      QVERIFY(same(r["total_ns"], c["total_ns"]));
      QVERIFY(same(r["exposed_ns"], c["exposed_ns"]));
    }
    // The side-by-side table is compare-runs' "collectives".
    const QJsonArray byRun = j["collectives_by_run"].toArray();
    const QJsonArray cliRows = compareRuns_["collectives"].toObject()["rows"].toArray();
    QCOMPARE(byRun.size(), cliRows.size());
    QVERIFY(byRun.size() >= 1);
    for (int k = 0; k < byRun.size(); ++k) {
      const QJsonObject g = byRun[k].toObject(), c = cliRows[k].toObject();
      QCOMPARE(g["op"].toString(), c["op"].toString());
      for (int i = 0; i < 3; ++i) {
        const QJsonObject cr = c["runs"].toArray()[i].toObject();
        QVERIFY(same(g["ms_per_rank_step"].toArray()[i], cr["ms_per_rank_step"]));
        QVERIFY(same(g["exposed_ms_per_rank_step"].toArray()[i], cr["exposed_ms_per_rank_step"]));
        QVERIFY(same(g["delta_pct"].toArray()[i], cr["delta_pct"]));
      }
    }
  }

  void timelineStepsHoldAnalyze() {
    const QJsonObject j = page("timeline", {"--timeline-view", "step", "--step", "2"});
    QVERIFY(!j.isEmpty());
    QCOMPARE(j["view"].toString(), QString("same_step"));
    QCOMPARE(j["step_ordinal"].toInt(), 1);
    const QJsonArray rows = j["rows"].toArray();
    QCOMPARE(rows.size(), 6);  // 3 runs x 2 ranks
    for (const auto& v : rows) {
      const QJsonObject r = v.toObject();
      QCOMPARE(r["step"].toInt(), 2);  // runtime runs: step 0 is the warm-up, the 2nd counted is step 2
      bool found = false;
      for (const auto& s : analyze_[r["run"].toInt()]["steps"].toArray()) {
        const QJsonObject st = s.toObject();
        if (st["rank"].toInt() != r["rank"].toInt() || st["step"].toInt() != 2) continue;
        found = true;
        QVERIFY(same(r["window_ns"], st["step_ns"]));
        QVERIFY(same(r["compute_ns"], st["compute_ns"]));
        QVERIFY(same(r["exposed_ns"], st["exposed_comm_ns"]));
      }
      QVERIFY(found);
    }
  }

  void timelineTakesTheViewAskedFor() {
    const QJsonObject j =
        page("timeline", {"--timeline-view", "one", "--range", "5:25", "--collapse-ranks", "1", "--hide-lanes", "counter"});
    QVERIFY(!j.isEmpty());
    QCOMPARE(j["view"].toString(), QString("one_run"));
    QCOMPARE(j["collapsed_ranks"].toArray(), QJsonArray{1});
    // Lane kinds hidden: the memory counters are not shown (they are without --hide-lanes).
    for (const auto& l : j["lanes"].toArray()) QVERIFY(!l.toObject()["name"].toString().startsWith("memory"));
    const QJsonObject all = page("timeline", {"--timeline-view", "one"});
    int counters = 0;
    for (const auto& l : all["lanes"].toArray()) counters += l.toObject()["name"].toString().startsWith("memory") ? 1 : 0;
    QVERIFY(counters >= 2);
    const double span = j["view_end_ns"].toDouble() - j["view_start_ns"].toDouble();
    QCOMPARE(span, 20e6);  // 5 to 25 ms
    QCOMPARE(j["time_range"].toObject()["end_ns"].toDouble() - j["time_range"].toObject()["start_ns"].toDouble(), 20e6);
    // A bad option is refused with a message, not a picture.
    const Out bad = runProcess(SHARDSCOPE_GUI, {"--open", db_, "--page", "timeline", "--run", "1", "--timeline-view", "one",
                                                "--hide-lanes", "bogus", "--screenshot", dir_.filePath("bad.png")});
    QCOMPARE(bad.code, 2);
    QVERIFY(bad.err.contains("bogus"));
  }
};

QTEST_MAIN(TestPageJson)
#include "tst_page_json.moc"
