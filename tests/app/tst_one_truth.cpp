// One truth per number (docs/METRICS.md, "Run figures"): the same runs read through every surface
// (the run summary of `compare`, its --json, `compare-runs` text and JSON, `analyze --json`, `info
// --run --json`, the CSV report) show the figures core::computeRunFigures defines, to the digits each surface prints.
// Runs: real runtime runs on CPU (`compare --strategies ddp,fsdp --model tiny`, 2 Gloo ranks) and the
// database our runtime wrote on an H100 (tests/data/traces/gpu).
#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>

#include "core/analysis/run_figures.h"
#include "core/storage/trace_store.h"
#include "tests/app/cli_runner.h"
#include "tests/common/test_support.h"

using namespace shardscope;
using shardscope::test::runCli;

namespace {

bool near(double a, double b, double absTol) { return std::abs(a - b) <= absTol + 1e-9 * std::abs(b); }

QJsonObject parseObject(const QString& text) { return QJsonDocument::fromJson(text.toUtf8()).object(); }

// A row of a comparison's JSON by key: its value for run index i.
std::optional<double> rowValue(const QJsonObject& cmp, const QString& key, int i) {
  for (const auto& r : cmp.value("rows").toArray()) {
    const QJsonObject o = r.toObject();
    if (o.value("key").toString() != key) continue;
    const QJsonValue v = o.value("values").toArray().at(i);
    if (v.isNull() || v.isUndefined()) return std::nullopt;
    return v.toDouble();
  }
  return std::nullopt;
}

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

}  // namespace

class TestOneTruth : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;

  // Every surface against core's figures for the runs of `db`.
  void checkSurfaces(const QString& db, const std::vector<core::RunId>& ids) {
    std::vector<core::RunFigures> truth;
    {
      core::TraceStore store(db.toStdString(), core::Database::Mode::ReadOnly);
      for (core::RunId id : ids) truth.push_back(core::computeRunFigures(store, id));
    }
    QStringList idList;
    for (core::RunId id : ids) idList << QString::number(id.value());

    // compare-runs --json: every row is the figure.
    auto r = runCli({"compare-runs", "--db", db, "--runs", idList.join(','), "--json"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    const QJsonObject cmp = parseObject(r.out);
    for (std::size_t i = 0; i < ids.size(); ++i) {
      const auto& f = truth[i];
      const int k = static_cast<int>(i);
      const QByteArray where = "run " + QByteArray::number(qint64(ids[i].value()));
      QVERIFY2(f.stepTimeMs.has_value(), where);
      QVERIFY2(near(rowValue(cmp, "step_time_ms", k).value_or(-1), *f.stepTimeMs, 1e-9), where);
      QVERIFY2(f.tokensPerSecond.has_value(), where);
      QVERIFY2(near(rowValue(cmp, "tokens_per_s", k).value_or(-1), *f.tokensPerSecond, 1e-6), where);
      QVERIFY2(near(rowValue(cmp, "comm_pct", k).value_or(-1), f.commPct.value_or(-2), 1e-9), where);
      QVERIFY2(near(rowValue(cmp, "exposed_comm_pct", k).value_or(-1), f.exposedCommPct.value_or(-2), 1e-9), where);
      QVERIFY2(f.peakAllocatedBytes.has_value(), where);
      QVERIFY2(near(rowValue(cmp, "peak_allocated_gib", k).value_or(-1), double(*f.peakAllocatedBytes) / kGiB, 1e-12), where);
      // ...and carries how it was measured.
      const QJsonObject fj = cmp.value("runs").toArray().at(k).toObject().value("figures").toObject();
      QCOMPARE(fj.value("step_window").toString(), QString::fromStdString(core::describeStepTime(f)));
      // Throughput is tokens per step over that step time, not a second clock.
      QVERIFY2(near(*f.tokensPerSecond, *f.tokensPerStep / (*f.stepTimeMs / 1000.0), 1e-6), where);

      // analyze --json: the same figures object.
      auto a = runCli({"analyze", "--db", db, "--run", QString::number(ids[i].value()), "--json"});
      QVERIFY2(a.code == 0, qPrintable(a.err));
      const QJsonObject aj = parseObject(a.out);
      const QJsonArray runs = aj.contains("runs") ? aj.value("runs").toArray() : QJsonArray{aj};
      const QJsonObject af = runs.at(0).toObject().value("figures").toObject();
      QVERIFY2(near(af.value("step_time_ms").toDouble(), *f.stepTimeMs, 1e-9), where);
      QVERIFY2(near(af.value("peak_allocated_bytes").toDouble(), double(*f.peakAllocatedBytes), 0.5), where);
      QVERIFY2(near(af.value("tokens_per_s").toDouble(), *f.tokensPerSecond, 1e-6), where);
      // info --run: the same figures.
      auto in = runCli({"info", "--db", db, "--run", QString::number(ids[i].value()), "--json"});
      QVERIFY2(in.code == 0, qPrintable(in.err));
      const QJsonObject inf = parseObject(in.out).value("runs").toArray().at(0).toObject().value("figures").toObject();
      QVERIFY2(near(inf.value("step_time_ms").toDouble(), *f.stepTimeMs, 1e-9), where);
      QVERIFY2(near(inf.value("peak_allocated_bytes").toDouble(), double(*f.peakAllocatedBytes), 0.5), where);
      // analyze's per-step rows marked counted average to the same step time.
      double sum = 0;
      int n = 0;
      for (const auto& s : runs.at(0).toObject().value("steps").toArray()) {
        const QJsonObject o = s.toObject();
        if (!o.value("counted").toBool()) continue;
        sum += o.value("step_ns").toDouble();
        ++n;
      }
      QVERIFY2(n > 0 && near(sum / n / 1e6, *f.stepTimeMs, 1e-6), where);
    }

    // compare-runs text: the table prints two decimals.
    r = runCli({"compare-runs", "--db", db, "--runs", idList.join(',')});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    const QString text = r.out + r.err;
    for (const auto& line : text.split('\n')) {
      if (!line.trimmed().startsWith("step time (ms, mean")) continue;
      const auto nums = QRegularExpression(R"((\d+\.\d{2})(?: \*| \(|\s|$))").globalMatch(line);
      std::vector<double> seen;
      for (auto it = nums; it.hasNext();) seen.push_back(it.next().captured(1).toDouble());
      QVERIFY2(seen.size() >= ids.size(), qPrintable(line));
      for (std::size_t i = 0; i < ids.size(); ++i) QVERIFY2(near(seen[i], *truth[i].stepTimeMs, 0.0051), qPrintable(line));
    }

    // The CSV report (what a spreadsheet gets).
    const QString csv = dir_.filePath("report.csv");
    r = runCli({"report", "--db", db, "--runs", idList.join(','), "--format", "csv", "-o", csv});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QFile f(csv);
    QVERIFY(f.open(QIODevice::ReadOnly));
    bool sawStep = false;
    for (const auto& line : QString::fromUtf8(f.readAll()).split('\n')) {
      if (!line.startsWith("step_time_ms,")) continue;
      sawStep = true;
      const QStringList cells = line.split(',');  // key,"label, with comma",better,values...
      std::vector<double> vals;
      for (const auto& c : cells) {
        bool ok = false;
        const double v = c.toDouble(&ok);
        if (ok) vals.push_back(v);
      }
      QVERIFY2(vals.size() >= ids.size(), qPrintable(line));
      for (std::size_t i = 0; i < ids.size(); ++i) QVERIFY2(near(vals[i], *truth[i].stepTimeMs, 1e-9), qPrintable(line));
    }
    QVERIFY(sawStep);
  }

 private Q_SLOTS:
  void initTestCase() { QVERIFY(dir_.isValid()); }

  // The quick start's comparison on CPU: two strategies, two Gloo ranks.
  void cpuRuns() {
    if (!test::workerBuilt()) QSKIP("shardscope-worker is not built (no LibTorch)");
    const QString db = dir_.filePath("cpu.db");
    auto r = runCli({"compare", "--db", db, "--strategies", "ddp,fsdp", "--model", "tiny", "--world-size", "2", "--steps", "4",
                     "--seq-len", "32", "--micro-batch", "2", "--json"},
                    300000);
    QVERIFY2(r.code == 0, qPrintable(r.err));
    const QJsonObject out = parseObject(r.out);
    std::vector<core::RunId> ids;
    core::TraceStore store(db.toStdString(), core::Database::Mode::ReadOnly);
    for (const auto& run : store.runs()) ids.push_back(run.id);
    QCOMPARE(ids.size(), std::size_t(2));
    // The run summaries `compare` printed (stderr under --json) and its JSON: the same step time.
    for (core::RunId id : ids) {
      const core::RunFigures f = core::computeRunFigures(store, id);
      QVERIFY(f.stepTimeMs);
      const QRegularExpression re(QString("run %1 \\(.*\\): completed\\n  step time (\\d+\\.\\d+) ms").arg(id.value()));
      const auto m = re.match(r.err);
      QVERIFY2(m.hasMatch(), qPrintable(r.err));
      QVERIFY2(near(m.captured(1).toDouble(), *f.stepTimeMs, 0.0051), qPrintable(m.captured(0)));
      QCOMPARE(f.window, core::StepWindow::Recorded);
      QVERIFY(f.steps.warmupLeftOut);
      QCOMPARE(f.steps.count, std::int64_t(3));
    }
    QVERIFY2(out.contains("runs") || out.contains("comparison"), qPrintable(r.out));
    checkSurfaces(db, ids);
  }

  // compare --repeats (issue 46): each configuration runs N times, interleaved, and the verdict
  // judges the configurations by their repeats: the JSON lists each one's runs, mean and run-to-run
  // spread, the t-test's p and every run of the winner (if any); the text prints the same.
  void repeatsAreJudgedTogether() {
    if (!test::workerBuilt()) QSKIP("shardscope-worker is not built (no LibTorch)");
    const QString db = dir_.filePath("repeats.db");
    auto r = runCli(
        {"compare", "--db",         db,  "--strategies", "ddp,fsdp", "--repeats", "2",  "--name",        "sweep", "--model",
         "tiny",    "--world-size", "2", "--steps",      "3",        "--seq-len", "32", "--micro-batch", "2",     "--json"},
        300000);
    QVERIFY2(r.code == 0, qPrintable(r.err));
    core::TraceStore store(db.toStdString(), core::Database::Mode::ReadOnly);
    QStringList names;
    for (const auto& run : store.runs()) names << QString::fromStdString(run.name);
    QCOMPARE(names, QStringList({"sweep ddp (1/2)", "sweep fsdp (1/2)", "sweep ddp (2/2)", "sweep fsdp (2/2)"}));
    const QJsonObject verdict = parseObject(r.out)["comparison"].toObject()["verdict"].toObject();
    const QJsonArray repeats = verdict["repeats"].toArray();
    QCOMPARE(repeats.size(), 2);
    QStringList groups;
    for (const auto& g : repeats) {
      QStringList ids;
      for (const auto& id : g.toObject()["runs"].toArray()) ids << QString::number(id.toInteger());
      groups << ids.join(',');
      const QJsonObject o = g.toObject();
      QVERIFY(o["min"].toDouble() <= o["mean"].toDouble() && o["mean"].toDouble() <= o["max"].toDouble());
      QVERIFY(near(o["spread_pct"].toDouble(), 100.0 * (o["max"].toDouble() - o["min"].toDouble()) / o["mean"].toDouble(), 1e-9));
    }
    groups.sort();
    QCOMPARE(groups, QStringList({"1,3", "2,4"}));
    QVERIFY(verdict.contains("p_value"));
    if (!verdict["winner"].isNull()) QCOMPARE(verdict["winner_runs"].toArray().size(), 2);
    // The text of compare-runs over the same runs: the repeats and the verdict.
    r = runCli({"compare-runs", "--db", db, "--runs", "1,2,3,4"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY2(r.out.contains("repeats (step time):") || r.out.contains("repeats (tokens/s):"), qPrintable(r.out));
    QVERIFY2(r.out.contains("run-to-run spread"), qPrintable(r.out));
    QVERIFY2(r.out.contains("the configuration of sweep ddp (2 runs: #1, #3)"), qPrintable(r.out));
  }

  // The database our runtime wrote on an H100 (schema 2, read-only): two ranks sharing a GPU
  // through Gloo (runs 1-3) and the 1.49B model on one GPU (run 4).
  void gpuFixture() {
    // tests/data commits the file cut to runs 1, 2 and 4 (run 3, ZeRO-3, deleted to stay under 1 MB);
    // ../shared has all four.
    const auto shared = test::sharedTracesDir();
    QString gz;
    std::vector<core::RunId> runs;
    for (const auto& [name, ids] :
         {std::pair{QStringLiteral("/gpu/shardscope_h100_runtime_runs124.db.gz"),
                    std::vector<core::RunId>{core::RunId{1}, core::RunId{2}, core::RunId{4}}},
          std::pair{QStringLiteral("/gpu/shardscope_h100_runtime.db.gz"),
                    std::vector<core::RunId>{core::RunId{1}, core::RunId{2}, core::RunId{3}, core::RunId{4}}}}) {
      if (shared && QFile::exists(QString::fromStdString(*shared) + name)) {
        gz = QString::fromStdString(*shared) + name;
        runs = ids;
        break;
      }
    }
    if (gz.isEmpty()) QSKIP("no H100 runtime database (tests/data/traces/gpu was not unpacked)");
    const QString db = dir_.filePath("h100.db");
    QProcess gunzip;
    gunzip.setStandardOutputFile(db);
    gunzip.start("gzip", {"-dc", gz});
    QVERIFY(gunzip.waitForFinished(60000) && gunzip.exitCode() == 0);
    QFile::setPermissions(db, QFileDevice::ReadOwner);  // as shipped: nothing may need to write it
    checkSurfaces(db, runs);
    core::TraceStore store(db.toStdString(), core::Database::Mode::ReadOnly);
    // On CUDA the recorded windows are the runtime's device-synchronised step timer: the 1.49B run's
    // one rank gives exactly the step_time_ms the runtime stored, and its peak is the caching
    // allocator's max_memory_allocated (32.08 GiB), not the highest per-step sample (24.75 GiB).
    const core::RunFigures big = core::computeRunFigures(store, core::RunId{4});
    QVERIFY(near(*big.stepTimeMs, *store.metric(core::RunId{4}, std::nullopt, "step_time_ms"), 1e-6));
    QCOMPARE(double(*big.peakAllocatedBytes), 34443085312.0);
    QCOMPARE(big.peakDevice, std::string("GPU"));
    // Two ranks sharing a GPU through Gloo: their collectives run on host threads and count as
    // communication (they used to read 0 %).
    const core::RunFigures ddp = core::computeRunFigures(store, core::RunId{1});
    QVERIFY(ddp.commPct && *ddp.commPct > 5.0);
    QVERIFY(ddp.exposedCommPct && *ddp.exposedCommPct <= *ddp.commPct);
    // World size 1: its collectives are local, so no communication share.
    QCOMPARE(big.commPct.value_or(-1), 0.0);
  }
};

QTEST_GUILESS_MAIN(TestOneTruth)
#include "tst_one_truth.moc"
