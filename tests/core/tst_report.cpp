// Reports: the model's figures are core's (compareRuns, analyzeRun, memory peaks), every section is
// present in every format, the recommendation follows the figures, hostile names stay text in HTML,
// Markdown and CSV, and the HTML references nothing outside itself.
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>

#include "core/storage/store_access.h"
#include "core/analysis/comparison.h"
#include "core/analysis/memory_peaks.h"
#include "core/analysis/run_analysis.h"
#include "core/config/run_config.h"
#include "core/import/kineto_importer.h"
#include "core/report/csv_writer.h"
#include "core/report/html_writer.h"
#include "core/report/markdown_writer.h"
#include "core/report/palette.h"
#include "core/report/report.h"
#include "core/report/svg_chart.h"
#include "core/util/error.h"
#include "tests/common/test_support.h"
#include "tests/tools/kineto_generator.h"
#include "tests/ui/ui_fixture.h"

using namespace shardscope::core;
using shardscope::test::pathIn;
using shardscope::test::writeFile;

namespace {

// RFC 4180 reader: fields separated by ',', records by CRLF (LF accepted), quoted fields with "".
std::vector<std::vector<std::string>> parseCsv(const std::string& text, bool* crlf = nullptr) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string field;
  bool quoted = false, fieldStarted = false;
  if (crlf) *crlf = true;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"') {
        if (i + 1 < text.size() && text[i + 1] == '"') {
          field += '"';
          ++i;
        } else {
          quoted = false;
        }
      } else {
        field += c;
      }
      continue;
    }
    if (c == '"' && !fieldStarted) {
      quoted = fieldStarted = true;
    } else if (c == ',') {
      row.push_back(field);
      field.clear();
      fieldStarted = false;
    } else if (c == '\r' || c == '\n') {
      if (c == '\n' && crlf) *crlf = false;
      if (c == '\r') {
        if (i + 1 >= text.size() || text[i + 1] != '\n') throw std::runtime_error("bare CR");
        ++i;
      }
      row.push_back(field);
      rows.push_back(row);
      row.clear();
      field.clear();
      fieldStarted = false;
    } else {
      field += c;
      fieldStarted = true;
    }
  }
  if (quoted) throw std::runtime_error("unterminated quote");
  if (fieldStarted || !row.empty()) {
    row.push_back(field);
    rows.push_back(row);
  }
  return rows;
}

bool isNumber(const std::string& s) {
  if (s.empty()) return false;
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

const ComparisonRow& rowOf(const Comparison& c, const std::string& key) {
  for (const auto& r : c.rows)
    if (r.key == key) return r;
  throw std::runtime_error("no row " + key);
}

std::string jsonString(const std::string& s) { return JsonValue::string(s).dump(); }

const std::string kScript = "<script>alert(1)</script>";
const std::string kFormula = "=cmd|' /C calc'!A0";
const std::string kKernel = "ncclDevKernel_AllGather_RING_LL |pipe| `tick` \"q\"\n<b>bold</b>";
const std::string kUnit = "## <img src=x onerror=alert(1)> ##";
const std::string kOp = "aten::<iframe>|x|";

// One rank of a 2-rank job whose strings are all hostile: the all-gather kernel's name, its process
// group, the annotation that issued it, and the CPU op running at the memory peak.
std::string hostileRank(int rank) {
  return "{\"distributedInfo\": {\"rank\": " + std::to_string(rank) + ", \"world_size\": 2, \"backend\": " + jsonString(kScript) +
         ", \"pg_config\": [{\"pg_name\": " + jsonString(kFormula) +
         ", \"pg_size\": 2, \"ranks\": [0, 1]}]}, \"traceEvents\": [\n"
         "{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#1\", \"pid\": 1, \"tid\": 1, \"ts\": 0, "
         "\"dur\": 300},\n"
         "{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": " +
         jsonString(kUnit) +
         ", \"pid\": 1, \"tid\": 1, \"ts\": 1, \"dur\": 200},\n"
         "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": " +
         jsonString(kOp) +
         ", \"pid\": 1, \"tid\": 1, \"ts\": 2, \"dur\": 50},\n"
         "{\"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"s\": \"t\", \"name\": \"[memory]\", \"pid\": 1, \"tid\": 1, \"ts\": "
         "5, "
         "\"args\": {\"Total Reserved\": 4194304, \"Total Allocated\": 3145728, \"Bytes\": 3145728, \"Addr\": 1, \"Device "
         "Type\": 1, "
         "\"Device Id\": 0}},\n"
         "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": 1, \"tid\": 1, \"ts\": 10, "
         "\"dur\": 1, "
         "\"args\": {\"correlation\": 10}},\n"
         "{\"ph\": \"X\", \"cat\": \"cuda_driver\", \"name\": \"cuLaunchKernelEx\", \"pid\": 1, \"tid\": 1, \"ts\": 12, \"dur\": "
         "1, "
         "\"args\": {\"correlation\": 11}},\n"
         "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"gemm\", \"pid\": 0, \"tid\": 7, \"ts\": 20, \"dur\": 40, \"args\": "
         "{\"stream\": 7, \"correlation\": 10}},\n"
         "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": " +
         jsonString(kKernel) + ", \"pid\": 0, \"tid\": 21, \"ts\": " + std::to_string(70 + rank * 30) +
         ", \"dur\": " + std::to_string(100 - rank * 30) +
         ", \"args\": {\"stream\": 21, \"correlation\": 11, \"Collective name\": \"_allgather_base\", \"In msg nelems\": 250000, "
         "\"Out msg nelems\": 500000, \"Group size\": 2, \"dtype\": \"BFloat16\", \"Process Group Name\": " +
         jsonString(kFormula) + "}}\n]}";
}

// Pipes that split a Markdown table row (not backslash-escaped).
int cellSeparators(const QString& line) {
  int n = 0;
  for (int i = 0; i < line.size(); ++i)
    if (line[i] == '|' && (i == 0 || line[i - 1] != '\\')) ++n;
  return n;
}

}  // namespace

class TestReport : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;
  std::string db_;
  RunId a_, b_, failed_, runtime_;
  RunConfig cfg_;

 private Q_SLOTS:
  void initTestCase() {
    db_ = pathIn(dir_, "report.db");
    TraceStore store(db_);
    auto importJob = [&](const std::string& name, std::uint64_t seed) {
      std::vector<std::string> files;
      for (int r = 0; r < 2; ++r) {
        shardscope::test::KinetoGenOptions o;
        o.events = 12000;
        o.worldSize = 2;
        o.rank = r;
        o.seed = seed + static_cast<std::uint64_t>(r);
        o.steps = 4;
        const std::string path = pathIn(dir_, name + "_rank" + std::to_string(r) + ".json");
        shardscope::test::generateKinetoTrace(path, o);
        files.push_back(path);
      }
      KinetoImportOptions io;
      io.runName = name;
      return importKineto(store, files, io).runIds.at(0);
    };
    a_ = importJob("job-a", 1);
    b_ = importJob("job-b", 7);
    failed_ = importJob("job-failed", 11);
    store.setMetric(a_, std::nullopt, metric_keys::kTokensPerSecond, 1000);
    store.setMetric(b_, std::nullopt, metric_keys::kTokensPerSecond, 1500);
    store.setMetric(failed_, std::nullopt, metric_keys::kTokensPerSecond, 99999);
    store.setRunStatus(failed_, RunStatus::Failed, "rank 1 exited with code 1");
    // A run of the embedded runtime: its configuration is stored as our JSON.
    cfg_.strategy = Strategy::Zero3;
    cfg_.worldSize = 4;
    cfg_.microBatch = 8;
    cfg_.precision = Precision::Bf16;
    cfg_.prefetchBucketSize = 12345678;
    Run rt;
    rt.name = "runtime zero3";
    rt.source = RunSource::Runtime;
    rt.strategy = "zero3";
    rt.worldSize = 4;
    rt.status = RunStatus::Completed;
    rt.configJson = toJson(cfg_).dump();
    runtime_ = store.createRun(rt);
  }

  // The figures are core's own: the comparison is compareRuns, the analyses analyzeRun's.
  // Issue 46: the report's memory-peak table names what is live in the app's words (core's
  // labels), largest part first as stored, and leaves out categories the run never used.
  void memoryPeakTableSaysCategoriesInWords() {
    ReportRun run;
    MemoryPeak p;
    p.rank = 1;
    p.peakAllocatedBytes = 3 << 20;
    p.breakdown = {{"parameters", 1 << 20}, {"gathered_parameters", 0}, {"optimizer_state", 1 << 20}, {"comm_buffers", 1 << 20}};
    run.analysis.memoryPeaks = {p};
    const ReportTable t = memoryPeakTable(run);
    QCOMPARE(t.rows.size(), std::size_t(1));
    const std::string live = t.rows[0].back().text;
    QVERIFY2(live == "parameters 1.0 MiB, optimizer state 1.0 MiB, communication buffers 1.0 MiB", live.c_str());
  }

  void figuresAreCores() {
    TraceStore store(db_, Database::Mode::ReadOnly);
    ReportOptions opt;
    opt.generatedAt = "2026-01-02T03:04:05Z";
    const Report rep = buildReport(store, {a_, b_}, opt);
    const Comparison c = compareRuns(store, {a_, b_}, 0);
    QCOMPARE(rep.comparison.rows.size(), c.rows.size());
    for (std::size_t k = 0; k < c.rows.size(); ++k) {
      QCOMPARE(rep.comparison.rows[k].key, c.rows[k].key);
      QCOMPARE(rep.comparison.rows[k].values, c.rows[k].values);
      QCOMPARE(rep.comparison.rows[k].deltaPct, c.rows[k].deltaPct);
      QCOMPARE(rep.comparison.rows[k].best, c.rows[k].best);
    }
    for (std::size_t i = 0; i < 2; ++i) {
      const ReportRun& r = rep.runs[i];
      const RunAnalysis an = analyzeRun(store, r.id);
      QCOMPARE(r.analysis.collectives.size(), an.collectives.size());
      QCOMPARE(r.analysis.bottlenecks.size(), an.bottlenecks.size());
      for (std::size_t k = 0; k < an.bottlenecks.size(); ++k)
        QCOMPARE(r.analysis.bottlenecks[k].exposedNs, an.bottlenecks[k].exposedNs);
      QCOMPARE(r.analysis.stragglers.matched, an.stragglers.matched);
      const auto peaks = computeMemoryPeaks(store, r.id);
      QVERIFY(!peaks.empty());
      QCOMPARE(r.analysis.memoryPeaks.size(), peaks.size());
      std::int64_t top = 0;
      for (const auto& p : peaks) top = std::max(top, p.peakAllocatedBytes);
      QCOMPARE(*r.peakAllocatedBytes, top);
      // The mean step is the comparison's; the four stacked parts add up to it.
      QCOMPARE(*r.stepMs, *rowOf(c, "step_time_ms").values[i]);
      QVERIFY(std::abs(*r.computeMs + *r.exposedCommMs + *r.otherBusyMs + *r.idleMs - *r.stepMs) < 1e-9 * *r.stepMs);
      QVERIFY(r.stepsAnalysed > 0);
    }
    QCOMPARE(rep.generatedAt, std::string("2026-01-02T03:04:05Z"));
    QCOMPARE(rep.title, std::string("Shardscope report: comparison of 2 runs"));
    QCOMPARE(rep.database, std::string("report.db"));

    // Charts: step breakdown, tokens/s, overlap per step and one memory chart per run.
    std::vector<std::string> ids;
    for (const auto& ch : rep.charts) ids.push_back(ch.id);
    QCOMPARE(ids,
             (std::vector<std::string>{"step-breakdown", "tokens-per-second", "overlap-per-step",
                                       "memory-run-" + std::to_string(a_.value()), "memory-run-" + std::to_string(b_.value())}));
    const Chart& bars = rep.charts[0];
    QCOMPARE(bars.series.size(), std::size_t(4));
    QCOMPARE(*bars.series[1].y[0], *rep.runs[0].exposedCommMs);
    const Chart& tps = rep.charts[1];
    QCOMPARE(*tps.series[0].y[1], 1500.0);
    // The memory curves keep the peak: at most 400 points per line, and the highest point is the peak.
    for (std::size_t i = 0; i < 2; ++i) {
      const Chart& mem = rep.charts[3 + i];
      QVERIFY(mem.marker.has_value());
      double highest = 0;
      for (const auto& s : mem.series) {
        QVERIFY(s.x.size() <= 400);
        QVERIFY(!s.x.empty());
        QVERIFY(std::is_sorted(s.x.begin(), s.x.end()));
        for (const auto& y : s.y) highest = std::max(highest, *y);
      }
      const double unit = *rep.runs[i].peakAllocatedBytes >= (1LL << 30) ? double(1LL << 30) : double(1LL << 20);
      QCOMPARE(mem.marker->y, double(*rep.runs[i].peakAllocatedBytes) / unit);
      QCOMPARE(highest, mem.marker->y);
    }
  }

  // Runs we trained are compared on their steady state (compareRuns leaves the warm-up step out): the
  // report's step breakdown follows, so the stacked bar is the comparison's step time.
  void runtimeRunsLeaveTheWarmupOut() {
    QTemporaryDir d;
    TraceStore store(pathIn(d, "rt.db"));
    shardscope::test::RunSpec spec;
    spec.name = "trained";
    spec.steps = 5;
    const RunId id = shardscope::test::writeRun(store, spec);
    const Report rep = buildReport(store, {id});
    const Comparison c = compareRuns(store, {id});
    QCOMPARE(*rep.runs[0].stepMs, *rowOf(c, "step_time_ms").values[0]);
    QCOMPARE(rep.runs[0].stepsAnalysed, std::int64_t(spec.steps - 1));
    QVERIFY(std::abs(*rep.runs[0].computeMs + *rep.runs[0].exposedCommMs + *rep.runs[0].otherBusyMs + *rep.runs[0].idleMs -
                     *rep.runs[0].stepMs) < 1e-9 * *rep.runs[0].stepMs);
  }

  // The recommendation follows the figures: the faster completed run wins, a failed run is never
  // recommended however fast it looked, and each figure used appears in the reasons.
  void recommendationFromFigures() {
    TraceStore store(db_, Database::Mode::ReadOnly);
    const Report rep = buildReport(store, {a_, b_, failed_});
    const auto& rec = rep.recommendation;
    QCOMPARE(rec.rankedBy, std::string("tokens/s"));
    QCOMPARE(rec.recommended.value_or(99), std::size_t(1));
    QVERIFY(!rec.sentences.empty());
    const QString para = QString::fromStdString(rec.sentences[0]);
    QVERIFY2(para.contains("job-b") && para.contains("1500 tokens/s") && para.contains("50.0 %") && para.contains("job-a") &&
                 para.contains("1000 tokens/s"),
             qPrintable(para));
    bool failedNamed = false;
    for (const auto& s : rec.sentences)
      failedNamed = failedNamed || (s.find("job-failed") != std::string::npos && s.find("not ranked") != std::string::npos);
    QVERIFY(failedNamed);
    // The figures of each run, the two rules, then the comparison's verdict (judgeRuns) line by line.
    QCOMPARE(rec.reasons.size(), std::size_t(3 + 2) + rep.comparison.verdict.reasons.size());
    QVERIFY(!rep.comparison.verdict.reasons.empty());
    QVERIFY(QString::fromStdString(rec.reasons[2]).contains("rank 1 exited with code 1"));
    // Memory is discussed with the computed figures.
    bool memory = false;
    for (const auto& s : rec.sentences)
      memory = memory || s.find(reportBytes(double(*rep.runs[1].peakAllocatedBytes))) != std::string::npos;
    QVERIFY(memory);

    // Swap the throughputs: the other run wins (nothing is canned).
    QTemporaryDir d2;
    const std::string copy = pathIn(d2, "copy.db");
    {
      // Through SQLite: a file copy would open the database this process holds (open_guard.h).
      TraceStore source(db_, Database::Mode::ReadOnly);
      shardscope::core::storeDb(source).exec("VACUUM INTO '" + copy + "'");
    }
    TraceStore store2(copy);
    store2.setMetric(a_, std::nullopt, metric_keys::kTokensPerSecond, 2000);
    const Report rep2 = buildReport(store2, {a_, b_});
    QCOMPARE(rep2.recommendation.recommended.value_or(99), std::size_t(0));
    QVERIFY(QString::fromStdString(rep2.recommendation.sentences[0]).contains("33.3 %"));
    // Without tokens/s on every run, step time ranks them.
    shardscope::core::storeDb(store2).exec("DELETE FROM metrics WHERE run_id = " + std::to_string(b_.value()));
    const Report rep3 = buildReport(store2, {a_, b_});
    QCOMPARE(rep3.recommendation.rankedBy, std::string("step time"));
    // The two synthetic jobs' mean steps are within their step spread, and so are their peaks: no
    // measurable difference, so neither is recommended (never a winner inside the noise).
    const ComparisonVerdict& v3 = rep3.comparison.verdict;
    QVERIFY(*v3.speedMarginPct <= std::max(*v3.noisePct, kTieMarginPct));
    QCOMPARE(v3.by, ComparisonVerdict::By::None);
    QVERIFY(!rep3.recommendation.recommended);
    QVERIFY2(QString::fromStdString(rep3.recommendation.sentences[0]).contains("no measurable difference") &&
                 QString::fromStdString(rep3.recommendation.sentences[0]).contains("neither is recommended"),
             rep3.recommendation.sentences[0].c_str());
    for (const auto& r : rep3.comparison.rows)
      if (r.key == "step_time_ms") QVERIFY(!r.best);  // no best run marked inside the noise
  }

  // Within the runs' step spread (11 % here) or 3 % the runs show no measurable difference in speed
  // and the one with the lower memory peak is recommended; the sentence says which rule decided.
  // Beyond the spread, speed decides.
  void tieGoesToTheLeanerRun() {
    QTemporaryDir d;
    const std::string copy = pathIn(d, "tie.db");
    {
      // Through SQLite: a file copy would open the database this process holds (open_guard.h).
      TraceStore source(db_, Database::Mode::ReadOnly);
      shardscope::core::storeDb(source).exec("VACUUM INTO '" + copy + "'");
    }
    TraceStore store(copy);
    // Give run b twice the memory of run a at its peak: one more [memory] record on rank 0.
    const Report before = buildReport(store, {a_, b_});
    const std::int64_t peakA = *before.runs[0].peakAllocatedBytes;
    {
      const auto ranks = store.ranks(b_);
      Transaction tx(shardscope::core::storeDb(store));
      BulkWriter w(store);
      MemoryEvent m;
      m.rankId = ranks.at(0).id;
      m.tsNs = *store.summary(b_).startNs + 1000;
      m.deviceType = 1;
      m.bytes = peakA;
      m.totalAllocated = 2 * peakA;
      m.totalReserved = 2 * peakA;
      w.addMemoryEvent(m);
      w.finish();
      tx.commit();
    }
    store.setMetric(a_, std::nullopt, metric_keys::kTokensPerSecond, 1000);
    store.setMetric(b_, std::nullopt, metric_keys::kTokensPerSecond, 1020);  // 2 % faster: a tie
    const Report rep = buildReport(store, {a_, b_});
    QCOMPARE(*rep.runs[1].peakAllocatedBytes, 2 * peakA);
    QCOMPARE(rep.recommendation.recommended.value_or(99), std::size_t(0));
    const QString first = QString::fromStdString(rep.recommendation.sentences[0]);
    QVERIFY2(first.contains("2.0 % apart") && first.contains("no measurable difference") &&
                 first.contains("\u201Cjob-a\u201D is recommended because it needs less memory"),
             qPrintable(first));
    QCOMPARE(rep.comparison.verdict.by, ComparisonVerdict::By::Memory);
    // 5 % apart, within the 11 % spread: still no measurable difference in speed.
    const double spread = *rep.comparison.verdict.noisePct;
    QVERIFY(spread > 5.0 && spread < 40.0);
    store.setMetric(b_, std::nullopt, metric_keys::kTokensPerSecond, 1050);
    QCOMPARE(buildReport(store, {a_, b_}).comparison.verdict.by, ComparisonVerdict::By::Memory);
    // Beyond the spread: speed decides although b needs more memory, and the memory cost is named.
    store.setMetric(b_, std::nullopt, metric_keys::kTokensPerSecond, 1000.0 * (1.0 + spread / 100.0) + 50.0);
    const Report rep2 = buildReport(store, {a_, b_});
    QCOMPARE(rep2.comparison.verdict.by, ComparisonVerdict::By::Speed);
    QCOMPARE(rep2.recommendation.recommended.value_or(99), std::size_t(1));
    bool memoryCost = false;
    for (const auto& s : rep2.recommendation.sentences)
      memoryCost = memoryCost || (s.find("more than run " + std::to_string(a_.value())) != std::string::npos &&
                                  s.find("when memory is the constraint") != std::string::npos);
    QVERIFY(memoryCost);
    // The device's capacity from deviceProperties gives the headroom.
    bool headroom = false;
    for (const auto& s : rep2.recommendation.sentences) headroom = headroom || s.find("of headroom") != std::string::npos;
    QCOMPARE(headroom, rep2.runs[1].deviceMemoryBytes.has_value());
  }

  void sectionsInEveryFormat() {
    TraceStore store(db_, Database::Mode::ReadOnly);
    const Report rep = buildReport(store, {a_, b_, runtime_});
    const QString html = QString::fromStdString(writeHtml(rep));
    for (const char* id : {"recommendation", "environment", "comparison", "charts", "bottlenecks", "stragglers", "memory",
                           "collectives", "configuration"})
      QVERIFY2(html.contains(QString("<section id=\"%1\">").arg(id)), id);
    QCOMPARE(html.count("<svg"), int(rep.charts.size()));
    QVERIFY(html.contains("<meta name=\"viewport\""));
    QVERIFY(html.contains("@media print"));
    QVERIFY(html.contains("overflow-x:auto"));
    // Every comparison value is in the HTML as formatted for people.
    for (const auto& row : rep.comparison.rows)
      for (const auto& v : row.values)
        if (v) QVERIFY2(html.contains(QString::fromStdString(reportRowValue(row, *v))), row.key.c_str());
    // Memory values carry their own unit (MiB, GiB): the row labels do not claim GiB.
    QVERIFY(!html.contains("(GiB"));
    QVERIFY(html.contains("peak memory allocated (max over ranks)"));
    // The runtime run's knobs and the DeepSpeed JSON that reproduces it.
    const ReportRun& rt = rep.runs[2];
    QVERIFY(rt.hasRunConfig);
    QCOMPARE(rt.knobs.size(), runConfigKeys().size());
    const JsonValue ds = parseJson(rt.deepSpeedJson, "deepspeed");
    std::vector<std::string> warnings;
    QVERIFY(fromDeepSpeedJson(ds, "deepspeed", RunConfig{}, &warnings) == cfg_);
    bool prefetchBold = false;
    for (const auto& k : rt.knobs)
      if (k.key == "prefetch_bucket_size") prefetchBold = !k.isDefault && k.value == "12345678";
    QVERIFY(prefetchBold);
    QVERIFY(html.contains("<strong><code>12345678</code></strong>"));
    QVERIFY(!rep.runs[0].hasRunConfig);
    QVERIFY(!rep.runs[0].knownConfig.empty());
    // Environment: world size and devices from the trace.
    bool world = false;
    for (const auto& kv : rep.runs[0].environment) world = world || (kv.key == "world size" && kv.value == "2");
    QVERIFY(world);

    const QString md = QString::fromStdString(writeMarkdown(rep));
    for (const char* h : {"## Recommendation", "## Environment", "## Comparison", "## Charts", "## Collective bottlenecks",
                          "## Arrivals and stragglers", "## Memory peaks", "## Collectives", "## Configuration", "```json"})
      QVERIFY2(md.contains(h), h);

    const auto csv = parseCsv(comparisonCsv(rep));
    QVERIFY(csv.size() > 3);
    QCOMPARE(csv[0].size(), std::size_t(3 + 3 + 1 + 3 + 2));
    QCOMPARE(csv[0][6], std::string("delta_unit"));
    int shares = 0;
    for (std::size_t r = 1; r < csv.size(); ++r) {
      QCOMPARE(csv[r].size(), csv[0].size());
      const ComparisonRow& row = rowOf(rep.comparison, csv[r][0]);
      for (std::size_t i = 0; i < 3; ++i) {
        if (row.values[i])
          QCOMPARE(std::strtod(csv[r][3 + i].c_str(), nullptr), *row.values[i]);  // exact: shortest round-trip form
        else
          QVERIFY(csv[r][3 + i].empty());
      }
      // Shares change by percentage points (a spread of 0 % -> 0.4 % is +0.4 pp, not "+inf %"), the
      // rest by percent; the baseline's own delta is empty.
      const bool share = row.key.size() > 4 && row.key.compare(row.key.size() - 4, 4, "_pct") == 0;
      QCOMPARE(csv[r][6], std::string(share ? "pp" : "%"));
      shares += share;
      const auto& want = share ? row.deltaPp : row.deltaPct;
      for (std::size_t i = 0; i < 3; ++i) {
        if (i == rep.comparison.baseline || !want[i])
          QVERIFY(csv[r][7 + i].empty());
        else
          QCOMPARE(std::strtod(csv[r][7 + i].c_str(), nullptr), *want[i]);
      }
    }
    QVERIFY(shares > 0);
    const auto coll = parseCsv(collectivesCsv(rep));
    std::size_t expected = 1;
    for (const auto& r : rep.runs) expected += r.analysis.collectives.size();
    QCOMPARE(coll.size(), expected);
    QCOMPARE(coll[1][0], std::to_string(a_.value()));
    QCOMPARE(coll[1][7], std::to_string(rep.runs[0].analysis.collectives[0].totalNs));
  }

  // Issue #46: the HTML's tables never overflow the page or split a word, print keeps headings
  // with what follows, the JSON keeps its lines; the report names runs and figures as the app does
  // and draws with the app's palette; a comparison's knobs are one table, a column per run.
  void htmlPrintsAndNamesAsTheApp() {
    TraceStore store(db_, Database::Mode::ReadOnly);
    const Report rep = buildReport(store, {a_, b_, runtime_});
    const std::string html = writeHtml(rep);
    const auto print = html.find("@media print");
    QVERIFY(print != std::string::npos);
    // Screen: cells wrap between words only; a wide table scrolls in its box, its caption above it.
    QVERIFY(html.find("overflow-wrap:anywhere") == std::string::npos || html.find("overflow-wrap:anywhere") > print);
    QVERIFY(html.find("th,td{overflow-wrap:normal;word-break:normal") != std::string::npos);
    const auto strategies = html.find("<section id=\"strategies\">");
    QVERIFY(strategies != std::string::npos);
    const auto caption = html.find("<p class=\"tcaption\">", strategies);
    const auto box = html.find("<div class=\"scroll\"><table", strategies);
    QVERIFY(caption != std::string::npos && box != std::string::npos && caption < box);
    QVERIFY(html.find("<caption>") == std::string::npos);
    // Print: wide tables smaller, rows and charts not split, no break after a heading.
    for (const char* rule : {"table.wide{font-size:6.5pt}", "tr,figure,pre{break-inside:avoid;page-break-inside:avoid}",
                             "h2,h3,.tcaption{break-after:avoid;page-break-after:avoid}", "thead{display:table-header-group}"})
      QVERIFY2(html.find(rule, print) != std::string::npos, rule);
    // The DeepSpeed JSON keeps its lines (it was one long line).
    QVERIFY(html.find("<pre>{\n  &quot;") != std::string::npos);
    // The app's names: "name #3", the Compare page's headers and step chart.
    QVERIFY(html.find(reportRunLabel(rep.runs[0])) != std::string::npos);
    QCOMPARE(reportRunLabel(rep.runs[0]), runLabel(rep.runs[0].name, rep.runs[0].id));
    QVERIFY(html.find("(run ") == std::string::npos);
    const ReportTable cmp = comparisonTable(rep);
    QCOMPARE(cmp.header[0], std::string("figure"));
    // Shares change in percentage points, as on the Compare page.
    for (std::size_t r = 0; r < rep.comparison.rows.size(); ++r) {
      const ComparisonRow& row = rep.comparison.rows[r];
      if (row.key != "exposed_comm_pct" || !row.deltaPp[1]) continue;
      for (const auto& cells : cmp.rows)
        if (cells[0].text.rfind(row.label, 0) == 0)
          QVERIFY2(cells[2].note.find(" pp") != std::string::npos, cells[2].note.c_str());
    }
    QCOMPARE(cmp.header[1], reportRunLabel(rep.runs[0]) + " (baseline)");
    const Chart* steps = nullptr;
    const Chart* tps = nullptr;
    for (const auto& c : rep.charts) {
      if (c.id == "step-breakdown") steps = &c;
      if (c.id == "tokens-per-second") tps = &c;
    }
    QVERIFY(steps && tps);
    QCOMPARE(steps->title, std::string("Where a step goes (mean of counted steps)"));
    QCOMPARE(steps->series[2].name, std::string(palette::stepPartName(palette::StepPart::OtherDeviceWork)));
    QCOMPARE(chartMarkColor(*steps, 1, 0), palette::stepPart(palette::StepPart::ExposedCommunication));
    QVERIFY(tps->perRunBars);
    const std::string svg = renderSvg(*tps);
    QVERIFY(svg.find(palette::hex(palette::kBar)) != std::string::npos);
    if (tps->best) QVERIFY(svg.find(palette::hex(palette::kBestBar)) != std::string::npos);
    QCOMPARE(chartColor(0), std::string("#0072b2"));
    // One runtime run here: its own knob table; two runs with a configuration make one table.
    QVERIFY(!reportComparesKnobs(rep));
    Report two = rep;
    two.runs[0] = rep.runs[2];
    two.runs[0].id = RunId{99};
    two.runs[0].knobs[0].value = "other";
    QVERIFY(reportComparesKnobs(two));
    const ReportTable knobs = knobComparisonTable(two);
    QCOMPARE(knobs.header.size(), std::size_t(4));  // group, knob, a column per run with a configuration
    QCOMPARE(knobs.rows.size(), rep.runs[2].knobs.size());
    QCOMPARE(knobs.rows[0][1].note, std::string("differs between the runs"));
    QVERIFY(knobs.rows[1][1].note.empty());
    const std::string html2 = writeHtml(two);
    QVERIFY(html2.find("Every knob of the runs, side by side") != std::string::npos);
  }

  void singleRun() {
    TraceStore store(db_, Database::Mode::ReadOnly);
    const Report rep = buildReport(store, {b_});
    QCOMPARE(rep.title, std::string("Shardscope report: job-b"));
    QCOMPARE(rep.recommendation.recommended.value_or(99), std::size_t(0));
    QVERIFY(QString::fromStdString(rep.recommendation.sentences[0]).contains("1500 tokens/s"));
    const QString html = QString::fromStdString(writeHtml(rep));
    QVERIFY(html.contains("<h2>Figures</h2>"));
    QVERIFY(html.contains("<h2>Summary</h2>"));
    QVERIFY(!html.contains("(baseline)"));
  }

  void errorsNameTheRun() {
    TraceStore store(db_, Database::Mode::ReadOnly);
    try {
      buildReport(store, {a_, RunId{4242}});
      QFAIL("no error");
    } catch (const Error& e) {
      QVERIFY2(QString(e.what()).contains("no run with id 4242"), e.what());
    }
    ReportOptions o;
    o.baseline = RunId{777};
    QVERIFY_THROWS_EXCEPTION(Error, buildReport(store, {a_, b_}, o));
    QVERIFY_THROWS_EXCEPTION(Error, buildReport(store, {}));
    CancelToken cancel;
    cancel.cancel();
    QVERIFY_THROWS_EXCEPTION(Cancelled, buildReport(store, {a_}, {}, &cancel));
  }

  // Nothing outside the file: no URL, no external script, style, font or image.
  void htmlIsSelfContained() {
    TraceStore store(db_, Database::Mode::ReadOnly);
    const std::string html = writeHtml(buildReport(store, {a_, b_, runtime_}));
    for (const char* bad : {"http://", "https://", "src=", "@import", "url(", "<link", "<script", "<img", "<iframe", "<object",
                            "<embed", "xlink:href", "@font-face"})
      QVERIFY2(html.find(bad) == std::string::npos, bad);
  }

  void hostileNamesStayText() {
    QTemporaryDir dir;
    TraceStore store(pathIn(dir, "hostile.db"));
    KinetoImportOptions io;
    io.runName = kScript;
    const RunId id =
        importKineto(store, {writeFile(dir, "r0.json", hostileRank(0)), writeFile(dir, "r1.json", hostileRank(1))}, io)
            .runIds.at(0);
    Run r = *store.run(id);
    r.tags = kFormula + "\n<i>tag</i>";
    store.updateRun(r);
    io.runName = "-12 " + kFormula;
    const RunId other = importKineto(store, {writeFile(dir, "o0.json", hostileRank(0))}, io).runIds.at(0);
    ReportOptions opt;
    opt.title = "Report <b>" + kScript;
    const Report rep = buildReport(store, {id, other}, opt);
    // The hostile strings reached the model (so the checks below test something).
    QVERIFY(!rep.runs[0].analysis.bottlenecks.empty());
    QCOMPARE(rep.runs[0].analysis.bottlenecks[0].kernel, kKernel);
    QCOMPARE(rep.runs[0].analysis.bottlenecks[0].unit, kUnit);
    QCOMPARE(rep.runs[0].analysis.collectives.at(0).processGroup, kFormula);
    QCOMPARE(rep.runs[0].analysis.memoryPeaks.at(0).operation, kOp);

    const std::string html = writeHtml(rep);
    for (const char* raw : {"<script", "<img", "<iframe", "<b>", "<i>", "onerror=alert(1)>"})
      QVERIFY2(html.find(raw) == std::string::npos, raw);
    QVERIFY(html.find("&lt;script&gt;alert(1)&lt;/script&gt;") != std::string::npos);
    QVERIFY(html.find("&lt;img src=x onerror=alert(1)&gt;") != std::string::npos);
    QVERIFY(html.find("&lt;iframe&gt;|x|") != std::string::npos);
    QVERIFY(html.find("&#39; /C calc&#39;!A0") != std::string::npos);
    // SVG text too (run names are chart categories and series).
    for (const auto& c : rep.charts) QVERIFY(renderSvg(c).find("<script") == std::string::npos);
    // Qt rich-text flavour (PDF, preview) escapes the same way.
    const std::string qt = writeHtml(rep, HtmlOptions{true, {}});
    QVERIFY(qt.find("<script") == std::string::npos && qt.find("<img") == std::string::npos);

    const QString md = QString::fromStdString(writeMarkdown(rep));
    QVERIFY(!md.contains("<script") && !md.contains("<img") && !md.contains("<iframe") && !md.contains("<b>"));
    QVERIFY(md.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    // Every table row has as many cell separators as its header: | in names never splits a cell.
    const QStringList lines = md.split('\n');
    int tables = 0;
    for (int i = 0; i < lines.size(); ++i) {
      if (!lines[i].startsWith("|") || (i > 0 && lines[i - 1].startsWith("|"))) continue;
      ++tables;
      const int n = cellSeparators(lines[i]);
      for (int j = i + 1; j < lines.size() && lines[j].startsWith("|"); ++j)
        QVERIFY2(cellSeparators(lines[j]) == n, qPrintable(lines[j]));
    }
    QVERIFY(tables >= 8);
    QVERIFY(md.contains("\\|pipe\\|"));

    // CSV: RFC 4180 parses back to the exact strings, with the formula prefix on text cells only.
    bool crlf = false;
    const auto coll = parseCsv(collectivesCsv(rep), &crlf);
    QVERIFY(crlf);
    QCOMPARE(coll.size(), std::size_t(3));
    QCOMPARE(coll[1][1], kScript);
    QCOMPARE(coll[1][3], "'" + kFormula);
    QCOMPARE(coll[2][1], "'-12 " + kFormula);
    const auto cmp = parseCsv(comparisonCsv(rep));
    for (const auto& row : cmp) {
      QCOMPARE(row.size(), cmp[0].size());
      for (const auto& cell : row)
        if (!cell.empty() && std::string("=+-@\t\r").find(cell[0]) != std::string::npos)
          QVERIFY2(isNumber(cell), cell.c_str());  // only numbers may start with - (or +)
    }
    QCOMPARE(QString::fromStdString(cmp[0][4]),
             QString::fromStdString("'-12 " + kFormula + " #" + std::to_string(other.value())));
    // Negative numbers stay numeric: a delta below zero is written as a plain number.
    QCOMPARE(csvText("-5"), std::string("'-5"));
    QCOMPARE(csvNumber(-5.25), std::string("-5.25"));
    QCOMPARE(csvText("a,b\"c"), std::string("\"a,b\"\"c\""));
    QCOMPARE(csvText("@SUM(A1)"), std::string("'@SUM(A1)"));
    QCOMPARE(csvText("\tx"), std::string("'\tx"));
    QCOMPARE(collectivesCsvPath("out/report.csv"), std::string("out/report.collectives.csv"));
    QCOMPARE(collectivesCsvPath("report"), std::string("report.collectives.csv"));
  }

  void markdownEscaping() {
    QCOMPARE(markdownEscape("a|b`c*d_[x](y)<z>&\nw"), std::string("a\\|b\\`c\\*d\\_\\[x\\](y)&lt;z&gt;&amp; w"));
    QCOMPARE(htmlEscape("<a href='x'>&\"", false), std::string("&lt;a href=&#39;x&#39;&gt;&amp;&quot;"));
    QCOMPARE(htmlEscape("a\nb", true), std::string("a<br>b"));
  }

  void svgCharts() {
    Chart c;
    c.kind = Chart::Kind::Line;
    c.title = "t <x>";
    c.series.push_back({"s&1", {0, 1, 2}, {1.0, 3.0, std::nullopt}, {}});
    c.marker = ChartMarker{0, 1, 3, "peak"};
    const std::string svg = renderSvg(c);
    QVERIFY(svg.rfind("<svg", 0) == 0);
    QVERIFY(svg.find("t &lt;x&gt;") != std::string::npos);
    QVERIFY(svg.find("s&amp;1") != std::string::npos);
    QVERIFY(svg.find("<polyline") != std::string::npos);
    QVERIFY(svg.find("http") == std::string::npos);
    QVERIFY(renderSvg(c, 720, 320, true).find("xmlns=\"http://www.w3.org/2000/svg\"") != std::string::npos);
    const AxisTicks t = niceTicks(0, 7.3, 5);
    QCOMPARE(t.step, 2.0);
    QCOMPARE(t.values.back(), 8.0);
    Chart bars;
    bars.kind = Chart::Kind::StackedBars;
    bars.categories = {"a", "b"};
    bars.series.push_back({"x", {}, {1.0, 2.0}, {}});
    bars.series.push_back({"y", {}, {3.0, std::nullopt}, {}});
    QCOMPARE(chartRange(bars).y1, 4.0);
    const QString svgBars = QString::fromStdString(renderSvg(bars));
    QCOMPARE(svgBars.count("</rect>"), 3);   // one rectangle per present value, each with its tooltip
    QVERIFY(svgBars.contains(">4</text>"));  // the stack's total
  }
};

QTEST_GUILESS_MAIN(TestReport)
#include "tst_report.moc"
