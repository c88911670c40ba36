// Run comparison: values, deltas against the baseline and the best run per row, on two hand-made
// runs whose breakdowns are known.
#include <QTemporaryDir>
#include <QtTest>

#include "core/storage/store_access.h"
#include "core/analysis/comparison.h"
#include "core/util/stats.h"
#include "core/import/kineto_importer.h"
#include "core/storage/trace_store.h"
#include "tests/common/test_support.h"
#include "tests/ui/ui_fixture.h"

using namespace shardscope::core;
using shardscope::test::pathIn;
using shardscope::test::writeFile;

namespace {

std::string trace(bool secondAllReduce) {
  std::string s = R"J({"distributedInfo": {"rank": 0, "world_size": 2}, "traceEvents": [
{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10, "dur": 1, "args": {"correlation": 1}},
{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 15, "dur": 1, "args": {"correlation": 2}},
{"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 20, "dur": 40, "args": {"stream": 7, "correlation": 1}},
{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "pid": 0, "tid": 21, "ts": 40, "dur": 40, "args": {"stream": 21, "correlation": 2}},
{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "pid": 1, "tid": 1, "ts": 100, "dur": 100},
{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 110, "dur": 1, "args": {"correlation": 4}},
{"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 120, "dur": 30, "args": {"stream": 7, "correlation": 4}})J";
  if (secondAllReduce)
    s += R"J(,
{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 112, "dur": 1, "args": {"correlation": 5}},
{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "pid": 0, "tid": 21, "ts": 150, "dur": 20, "args": {"stream": 21, "correlation": 5}})J";
  return s + "]}";
}

const ComparisonRow& rowOf(const Comparison& c, const std::string& key) {
  for (const auto& r : c.rows)
    if (r.key == key) return r;
  throw std::runtime_error("no row " + key);
}

}  // namespace

class TestComparison : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  // Runs we trained start with a warm-up step: their figures are the steady state (steps after the
  // first), as their tokens_per_s is; imported traces keep every step.
  void runtimeRunsSkipTheWarmupStep() {
    QTemporaryDir dir;
    TraceStore store(pathIn(dir, "t.db"));
    KinetoImportOptions o;
    o.runName = "imported";
    const RunId imported = importKineto(store, {writeFile(dir, "a.json", trace(true))}, o).runIds.at(0);
    o.runName = "trained";
    const RunId trained = importKineto(store, {writeFile(dir, "b.json", trace(true))}, o).runIds.at(0);
    // The source is fixed when a run is created (updateRun leaves it): set it as the worker would have.
    shardscope::core::storeDb(store).exec("UPDATE runs SET source='" + std::string(toString(RunSource::Runtime)) +
                                          "' WHERE id=" + std::to_string(trained.value()));
    QVERIFY(store.run(trained)->source == RunSource::Runtime);
    const Comparison c = compareRuns(store, {imported, trained}, 0);
    const auto& compute = rowOf(c, "compute_pct");
    // The imported GPU trace's steps follow its GPU work: [20, 120) and [120, 170) µs. The trained
    // run's steps are the windows it recorded (here the profiler's, [0, 100) and [100, 200) µs).
    QCOMPARE(*compute.values[0], 70.0 / 1.5);  // (40 + 30) µs of 150: both steps
    QCOMPARE(*compute.values[1], 30.0);        // step 2 only: 30 µs of 100
    const auto& comm = rowOf(c, "comm_pct");
    QCOMPARE(*comm.values[0], 40.0);
    QCOMPARE(*comm.values[1], 20.0);
    QCOMPARE(*rowOf(c, "exposed_comm_pct").values[1], 20.0);
  }

  // Shares change in percentage points; a step-time change within the runs' step-to-step spread is
  // flagged as noise (and so is the throughput change that follows from it).
  void percentagePointsAndNoise() {
    Comparison c;
    c.runs = {RunId{1}, RunId{2}, RunId{3}};
    c.names = {"ddp", "ddp again", "zero3"};
    c.figures.resize(3);
    c.figures[0].stepSpreadPct = 8.0;
    c.figures[1].stepSpreadPct = 6.0;
    c.figures[2].stepSpreadPct = 5.0;
    auto add = [&](const std::string& key, std::vector<std::optional<double>> v) {
      ComparisonRow r;
      r.key = key;
      r.values = std::move(v);
      c.rows.push_back(r);
    };
    add("step_time_ms", {100.0, 107.0, 130.0});
    add(metric_keys::kTokensPerSecond, {1000.0, 934.6, 769.2});
    add("exposed_comm_pct", {8.5, 15.6, 8.5});
    rebase(c, 0);
    const auto& step = rowOf(c, "step_time_ms");
    QVERIFY(step.withinNoise[1]);   // +7 % against spreads of 8 % and 6 %: noise
    QVERIFY(!step.withinNoise[2]);  // +30 %: a change
    const auto& tps = rowOf(c, metric_keys::kTokensPerSecond);
    QVERIFY(tps.withinNoise[1] && !tps.withinNoise[2]);
    const auto& exposed = rowOf(c, "exposed_comm_pct");
    QVERIFY(std::abs(*exposed.deltaPp[1] - 7.1) < 1e-9);  // +7.1 pp, not +83.5 %
    QVERIFY(std::abs(*exposed.deltaPct[1] - 7.1 / 8.5 * 100.0) < 1e-9);
    QVERIFY(!step.deltaPp[1]);  // not a share
    rebase(c, 2);               // another baseline: the same rules against it
    QVERIFY(!rowOf(c, "step_time_ms").withinNoise[0]);
    QVERIFY(std::abs(*rowOf(c, "exposed_comm_pct").deltaPp[1] - 7.1) < 1e-9);
  }

  // A winner only beyond the noise (issue 46): 8.2 % more throughput with step spreads of 9 % is no
  // measurable difference; memory then decides when it differs by more than the tie margin; a
  // failed run never wins; beyond the spread the faster wins.
  void verdictRespectsTheNoise() {
    auto make = [](double spreadA, double spreadB, double tpsB, std::optional<double> peakB) {
      Comparison c;
      c.runs = {RunId{7}, RunId{8}, RunId{9}};
      c.names = {"ddp", "zero3", "broken"};
      c.completed = {true, true, false};
      c.figures.resize(3);
      c.figures[0].stepSpreadPct = spreadA;
      c.figures[1].stepSpreadPct = spreadB;
      auto add = [&](const std::string& key, std::vector<std::optional<double>> v) {
        ComparisonRow r;
        r.key = key;
        r.values = std::move(v);
        c.rows.push_back(r);
      };
      add("step_time_ms", {100.0, 100.0 / (tpsB / 1000.0), 10.0});
      add(metric_keys::kTokensPerSecond, {1000.0, tpsB, 99999.0});
      add("peak_allocated_gib", {0.125, peakB, 0.01});
      return c;
    };
    ComparisonVerdict v = judgeRuns(make(9.0, 4.0, 1082.0, 0.125));
    QVERIFY(!v.winner);
    QCOMPARE(v.by, ComparisonVerdict::By::None);
    QCOMPARE(v.rankedBy, std::string("tokens/s"));
    QCOMPARE(v.ranked, (std::vector<std::size_t>{1, 0}));  // the failed run is not ranked
    QVERIFY(std::abs(*v.speedMarginPct - 8.2) < 1e-9);
    QCOMPARE(*v.noisePct, 9.0);
    QVERIFY(QString::fromStdString(v.reasons.front()).contains("no measurable difference"));
    // The same speeds, ZeRO-3 leaner by 12 %: it wins on memory.
    v = judgeRuns(make(9.0, 4.0, 1082.0, 0.11));
    QCOMPARE(v.winner.value_or(99), std::size_t(1));
    QCOMPARE(v.by, ComparisonVerdict::By::Memory);
    QVERIFY(std::abs(*v.memoryMarginPct - 12.0) < 1e-9);
    // Quieter runs: 8.2 % is beyond spreads of 2 %, so speed decides.
    v = judgeRuns(make(2.0, 1.5, 1082.0, 0.2));
    QCOMPARE(v.winner.value_or(99), std::size_t(1));
    QCOMPARE(v.by, ComparisonVerdict::By::Speed);
    // Under the 3 % tie margin with no spread at all: a tie.
    v = judgeRuns(make(0.0, 0.0, 1020.0, 0.125));
    QVERIFY(!v.winner);
    // The JSON carries it: winner is a run id or null.
    const JsonValue j = toJson(judgeRuns(make(9.0, 4.0, 1082.0, 0.11)), {RunId{7}, RunId{8}, RunId{9}});
    QCOMPARE(j.find("winner")->asString(), std::string("8"));
    QCOMPARE(j.find("by")->asString(), std::string("memory"));
    QVERIFY(toJson(judgeRuns(make(9.0, 4.0, 1082.0, 0.125)), {RunId{7}, RunId{8}, RunId{9}}).find("winner")->isNull());
  }

  // Repeats (issue 46, compare --repeats): runs of one configuration are judged together. Three
  // repeats each of ddp (~100 ms) and zero3 (~104 ms, +4 %) with a run-to-run spread of ~1 %: Welch's
  // t-test finds it significant and the margin passes the tie margin, so ddp's configuration wins
  // with every one of its runs; with a spread of ~12 % the same means are no measurable difference
  // (p > 0.05) and the speed rows mark no best run.
  void repeatsAreJudgedBySignificance() {
    auto make = [](std::vector<double> ddp, std::vector<double> zero3) {
      Comparison c;
      for (std::size_t i = 0; i < ddp.size(); ++i) {  // interleaved, as compare --repeats runs them
        for (const auto& [name, ms] : {std::pair{"ddp", ddp[i]}, std::pair{"zero3", zero3[i]}}) {
          c.runs.push_back(RunId{static_cast<std::int64_t>(c.runs.size() + 1)});
          c.names.push_back(name);
          c.completed.push_back(true);
          c.figures.emplace_back().stepSpreadPct = 20.0;  // each run's own step spread is large
          if (c.rows.empty()) c.rows.resize(2);
          c.rows[0].key = "step_time_ms";
          c.rows[0].values.push_back(ms);
          c.rows[1].key = "peak_allocated_gib";
          c.rows[1].values.push_back(0.125);
        }
      }
      std::vector<std::string> configs;
      for (const auto& n : c.names) configs.push_back(std::string("{\"strategy\":\"") + n + "\"}");
      c.configGroups = configGroups(configs);
      return c;
    };
    Comparison c = make({100.0, 101.0, 99.5}, {104.0, 103.5, 104.8});
    QCOMPARE(c.configGroups, (std::vector<std::vector<std::size_t>>{{0, 2, 4}, {1, 3, 5}}));
    ComparisonVerdict v = judgeRuns(c);
    QCOMPARE(v.by, ComparisonVerdict::By::Speed);
    QCOMPARE(v.winnerRuns, (std::vector<std::size_t>{4, 0, 2}));  // fastest first
    QCOMPARE(v.winner.value_or(99), std::size_t(4));
    QVERIFY(v.pValue && *v.pValue < 0.01);
    QCOMPARE(v.repeats.size(), std::size_t(2));
    QCOMPARE(v.repeats[0].runs, (std::vector<std::size_t>{0, 2, 4}));
    QVERIFY(std::abs(v.repeats[0].mean - 100.1666666667) < 1e-6);
    QVERIFY(std::abs(v.repeats[0].spreadPct - 1.5 / 100.1666666667 * 100.0) < 1e-6);
    QVERIFY(QString::fromStdString(v.reasons.front()).contains("Welch's t-test p = 0.00"));
    QCOMPARE(v.winnerName, std::string("the configuration of ddp (3 runs: #1, #3, #5)"));
    // Each run alone would have been no difference: a step spread of 20 % hides 4 %.
    Comparison lone = make({100.0}, {104.0});
    QVERIFY(!judgeRuns(lone).winner);
    // Noisy repeats: the same ~4 % between means is not significant.
    v = judgeRuns(make({92.0, 108.0, 100.5}, {110.0, 97.0, 105.3}));
    QVERIFY(!v.winner);
    QVERIFY(v.pValue && *v.pValue > 0.05);
    QVERIFY(QString::fromStdString(v.reasons.front()).contains("no measurable difference"));
    QVERIFY(QString::fromStdString(v.reasons.front()).contains("not significant"));
    // The JSON carries the repeats and the test.
    const JsonValue j = toJson(judgeRuns(c), c.runs);
    QCOMPARE(j.find("winner_runs")->items().size(), std::size_t(3));
    QVERIFY(j.find("p_value")->asDouble() < 0.01);
    QCOMPARE(j.find("repeats")->items().size(), std::size_t(2));
    QCOMPARE(j.find("repeats")->items()[1].find("runs")->items()[0].asString(), std::string("2"));
  }

  // Welch's t-test against closed forms of Student's t: P(|T| > 1 | 1 df) = 1/2 (Cauchy),
  // P(|T| > 2 | 2 df) = 1 - 2/sqrt(6), and a textbook pair of samples.
  void welchTTestMatchesStudentsT() {
    QVERIFY(std::abs(studentTwoSidedP(1.0, 1.0) - 0.5) < 1e-12);
    QVERIFY(std::abs(studentTwoSidedP(2.0, 2.0) - (1.0 - 2.0 / std::sqrt(6.0))) < 1e-12);
    QVERIFY(std::abs(studentTwoSidedP(0.0, 7.0) - 1.0) < 1e-12);
    QVERIFY(std::abs(studentTwoSidedP(2.228138852, 10.0) - 0.05) < 1e-6);  // the 97.5 % quantile at 10 df
    // a = {1, 2, 3, 4}, b = {3, 4, 5, 6}: means 2.5 and 4.5, variances 5/3 each: t = -2 / sqrt(5/6),
    // df = 6 (equal variances and sizes).
    const auto t = welchTTest({1, 2, 3, 4}, {3, 4, 5, 6});
    QVERIFY(t);
    QVERIFY(std::abs(t->t + 2.0 / std::sqrt(5.0 / 6.0)) < 1e-12);
    QVERIFY(std::abs(t->df - 6.0) < 1e-12);
    QVERIFY(std::abs(t->p - studentTwoSidedP(t->t, 6.0)) < 1e-15);
    QVERIFY(std::abs(t->p - 0.0709876543) < 1e-8);  // numerical integration of the t density
    QVERIFY(!welchTTest({1.0}, {2.0, 3.0}));        // one value: no variance to test
    QVERIFY(!welchTTest({2.0, 2.0}, {3.0, 3.0}));   // no variance at all
  }

  // One step rule everywhere (issue 46): the collectives per rank and step count the counted steps
  // only. A runtime run of 4 steps on 2 ranks, one 3 ms all-reduce per step, plus two more in the
  // warm-up step 0 and a broadcast outside any step (initialisation): 1 all-reduce of 3 ms per
  // counted step, over 2 x 3 counted (rank, step) rows; no broadcast row.
  void collectivesPerCountedStep() {
    QTemporaryDir dir;
    TraceStore store(pathIn(dir, "c.db"));
    shardscope::test::RunSpec spec;
    spec.memorySamples = 0;
    const RunId run = shardscope::test::writeRun(store, spec);
    {
      const Id ar = store.intern(spec.commName), bc = store.intern("broadcast"), op = store.intern("cpu_op");
      std::vector<TrackId> lanes;
      for (const Rank& rk : store.ranks(run)) {
        Track t;
        t.rankId = rk.id;
        t.kind = TrackKind::Comm;
        t.name = "comm 2";
        t.sortIndex = 3;
        lanes.push_back(store.addTrack(t));
      }
      Transaction tx(storeDb(store));
      BulkWriter w(store);
      for (const TrackId lane : lanes) {
        EventRecord e;
        e.trackId = lane;
        e.catId = op;
        e.category = Category::Communication;
        e.bytes = 1 << 20;
        for (int k = 0; k < 2; ++k) {  // two more all-reduces in the warm-up step
          e.step = 0;
          e.nameId = ar;
          e.collOp = CollectiveOp::AllReduce;
          e.startNs = spec.t0 + 8'000'000 + k * 500'000;
          e.endNs = e.startNs + 400'000;
          w.addEvent(e);
        }
        e.step = EventChunk::kNull;  // before the first step
        e.nameId = bc;
        e.collOp = CollectiveOp::Broadcast;
        e.startNs = spec.t0 - 5'000'000;
        e.endNs = spec.t0 - 1'000'000;
        w.addEvent(e);
      }
      w.finish();
      tx.commit();
    }
    const Comparison c = compareRuns(store, {run}, 0);
    QCOMPARE(c.figures[0].steps.count, std::int64_t(3));
    const RunAnalysis a = analyzeRun(store, run);
    const CollectiveComparison cc = compareCollectives({run}, {&a}, c.figures, 0);
    QCOMPARE(cc.rankSteps.at(0), std::int64_t(2 * 3));
    QCOMPARE(cc.rows.size(), std::size_t(1));  // the broadcast ran outside the counted steps
    QVERIFY(cc.rows[0].op == CollectiveOp::AllReduce);
    QCOMPARE(*cc.rows[0].count[0], 1.0);
    QVERIFY(std::abs(*cc.rows[0].ms[0] - 3.0) < 1e-9);
    // The whole run's table still has every instance.
    std::int64_t all = 0;
    for (const auto& st : a.collectives) all += st.count;
    QCOMPARE(all, std::int64_t(2 * (4 + 2 + 1)));
  }

  // Only what differs, nested keys flattened, a missing key shown as missing.
  void configurationDifferences() {
    const auto d = configDiff({R"({"strategy":"ddp","world_size":2,"zero":{"stage":1,"overlap":true},"seed":0})",
                               R"({"strategy":"fsdp","world_size":2,"zero":{"stage":3,"overlap":true}})"});
    QCOMPARE(d.size(), std::size_t(3));
    QCOMPARE(QString::fromStdString(d[0].key), QString("seed"));
    QCOMPARE(*d[0].values[0], std::string("0"));
    QVERIFY(!d[0].values[1]);
    QCOMPARE(QString::fromStdString(d[1].key), QString("strategy"));
    QCOMPARE(*d[1].values[1], std::string("\"fsdp\""));
    QCOMPARE(QString::fromStdString(d[2].key), QString("zero.stage"));
    QVERIFY(configDiff({R"({"a":1})"}).empty());                  // one run: nothing to compare
    QVERIFY(configDiff({R"({"a":1})", "not json"}).size() == 1);  // unreadable: compares as empty
  }

  void twoRuns() {
    QTemporaryDir dir;
    TraceStore store(pathIn(dir, "t.db"));
    KinetoImportOptions o;
    o.runName = "A";
    const RunId a = importKineto(store, {writeFile(dir, "a.json", trace(true))}, o).runIds.at(0);
    o.runName = "B";
    const RunId b = importKineto(store, {writeFile(dir, "b.json", trace(false))}, o).runIds.at(0);
    store.setMetric(a, std::nullopt, metric_keys::kTokensPerSecond, 1000);
    store.setMetric(b, std::nullopt, metric_keys::kTokensPerSecond, 1500);

    const Comparison c = compareRuns(store, {a, b}, 0);
    QCOMPARE(c.names, (std::vector<std::string>{"A", "B"}));
    const auto& step = rowOf(c, "step_time_ms");
    // Steps follow the GPU work: A [20, 120) and [120, 170) µs; B [20, 120) and [120, 150) µs.
    QCOMPARE(*step.values[0], 0.075);
    QCOMPARE(*step.values[1], 0.065);
    const auto& exposed = rowOf(c, "exposed_comm_pct");
    QCOMPARE(*exposed.values[0], 40.0 / 1.5);      // 20 + 20 µs of 150
    QCOMPARE(*exposed.values[1], 2000.0 / 130.0);  // 20 µs of 130
    QVERIFY(std::abs(*exposed.deltaPct[1] - (2000.0 / 130.0 - 40.0 / 1.5) / (40.0 / 1.5) * 100.0) < 1e-9);
    QCOMPARE(*exposed.best, std::size_t(1));
    const auto& comm = rowOf(c, "comm_pct");
    QCOMPARE(*comm.values[0], 40.0);
    QCOMPARE(*comm.values[1], 4000.0 / 130.0);
    const auto& overlap = rowOf(c, "overlap_pct");
    QVERIFY(std::abs(*overlap.values[0] - 100.0 / 3.0) < 1e-9);
    QCOMPARE(*overlap.values[1], 50.0);
    QCOMPARE(*overlap.best, std::size_t(1));
    const auto& compute = rowOf(c, "compute_pct");
    QCOMPARE(*compute.values[0], 70.0 / 1.5);
    QCOMPARE(*compute.values[1], 7000.0 / 130.0);
    QCOMPARE(*compute.best, std::size_t(1));
    const auto& tps = rowOf(c, metric_keys::kTokensPerSecond);
    QCOMPARE(*tps.deltaPct[1], 50.0);
    QCOMPARE(*tps.best, std::size_t(1));
    // Imported traces have no [memory] records here and no init/checkpoint metrics: no value, no best.
    QVERIFY(!rowOf(c, "peak_allocated_gib").values[0].has_value());
    QVERIFY(!rowOf(c, metric_keys::kInitSeconds).best.has_value());
    QVERIFY_THROWS_EXCEPTION(Error, compareRuns(store, {a, RunId{999}}, 0));
  }
};

QTEST_GUILESS_MAIN(TestComparison)
#include "tst_comparison.moc"
