// The step simulator (core/estimator/simulator): step times worked out by hand for schedules with
// known compute and link figures, the collectives each strategy issues against the communication
// model, overlap and prefetch rules moving the step time in the right direction, the memory peak
// against the estimator, stragglers, scale, and the simulated run as the analyses read it back.
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <string>

#include "core/storage/store_access.h"
#include "core/analysis/step_breakdown.h"
#include "core/estimator/comm_model.h"
#include "core/estimator/memory_estimator.h"
#include "core/estimator/prediction.h"
#include "core/estimator/simulator.h"
#include "core/estimator/simulator_store.h"
#include "core/storage/trace_store.h"

using namespace shardscope::core;
using namespace shardscope::core::estimator;

namespace {

EstimateInput runtimeInput(const char* model, int gpus) {
  EstimateInput in;
  in.model = *modelShapePreset(model);
  in.gpus = gpus;
  in.gpusPerNode = gpus;
  in.precision = Precision::Fp32;
  in.microBatch = 4;
  in.seqLen = 128;
  return in;
}

// 1 GB/s, 100 µs: a collective of S bytes over 2 ranks all-reduces in 100e-6 + S·1/1e9 s.
LinkModel slowLink() { return LinkModel{"test", 1.0, 0, 100, "test"}; }

ComputeProfile flat(int layers, double fwd, double bwd, double optPerElem) {
  ComputeProfile p;
  p.source = "test";
  p.forwardS.assign(static_cast<std::size_t>(layers + 2), fwd);
  p.backwardS.assign(static_cast<std::size_t>(layers + 2), bwd);
  p.optimizerSPerElement = optPerElem;
  return p;
}

SimulateInput simInput(const EstimateInput& em, Strategy s, const ComputeProfile& p) {
  SimulateInput si;
  si.model = em;
  si.strategy = s;
  si.compute = p;
  si.intraNode = slowLink();
  si.interNode = slowLink();
  return si;
}

// A simulation stored and read back as a CPU run of our runtime (the device class whose default
// interference k the simulations here use), for measuredProfile.
RunId storeAsCpuRuntimeRun(TraceStore& store, const SimulationResult& r, const std::string& name) {
  const RunId id = writeSimulatedRun(store, r, name);
  shardscope::core::storeDb(store).exec("UPDATE runs SET source='runtime' WHERE id=" + std::to_string(id.value()));
  shardscope::core::storeDb(store).exec("UPDATE ranks SET device='cpu' WHERE run_id=" + std::to_string(id.value()));
  return id;
}

// A database file in a fresh directory of its own, removed with the directory when the test
// ends, failed checks included (declare it before the TraceStore that opens it).
struct ScratchDb {
  QTemporaryDir dir;
  std::string file;
  explicit ScratchDb(const char* name) : file((dir.path() + "/" + name).toStdString()) {}
};

// A checkpointed `small` run on 2 CPU ranks of strategy `s` with plain 4 / 8 ms blocks, whose
// checkpointed forward costs 1.0 and whose recomputation `recomputeShare` of a plain forward.
SimulateInput checkpointedSmall(Strategy s, double recomputeShare) {
  auto em = runtimeInput("small", 2);
  em.activationCheckpointing = true;
  auto si = simInput(em, s, flat(em.model.layers, 4e-3, 8e-3, 1e-9));
  si.compute.checkpointedForwardShare = 1.0;
  si.compute.recomputeShare = recomputeShare;
  si.steps = 4;
  si.interference = kCpuGlooInterference;  // what the reader takes out of spans beside collectives
  return si;
}

// The metrics a checkpointing probe writes for each rank of a run: a forward share of 1.0 and the
// recomputation share `recomputeOf(rank)`.
void addCheckpointProbe(TraceStore& store, RunId id, const std::function<double(int)>& recomputeOf) {
  auto& sdb = shardscope::core::storeDb(store);
  for (const auto& rk : store.ranks(id)) {
    const std::string rank = std::to_string(rk.id.value()), run = std::to_string(id.value());
    sdb.exec("INSERT INTO metrics(run_id, rank_id, key, value) VALUES(" + run + "," + rank + ",'ckpt_probe_forward_share', 1.0)");
    sdb.exec("INSERT INTO metrics(run_id, rank_id, key, value) VALUES(" + run + "," + rank + ",'ckpt_probe_recompute_share', " +
             std::to_string(recomputeOf(rk.rank)) + ")");
  }
}

// A Llama-3-70B-shaped run on `gpus` H100s, 8 per node, 4096 tokens, checkpointing, FLOPs compute.
SimulateInput llama70b(int gpus, Strategy s) {
  SimulateInput si;
  si.model.model = *modelShapePreset("llama3-70b");
  si.model.gpus = gpus;
  si.model.gpusPerNode = 8;
  si.model.precision = Precision::Bf16;
  si.model.microBatch = 1;
  si.model.seqLen = 4096;
  si.model.activationCheckpointing = true;
  si.strategy = s;
  si.intraNode = *linkPreset("nvlink-h100");
  si.interNode = *linkPreset("ib-ndr");
  return si;
}

}  // namespace

class TestSimulator : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  // DDP with one bucket: the all-reduce starts after the last gradient, nothing hides it.
  void ddpOneBucketIsFullyExposed() {
    auto em = runtimeInput("tiny", 2);
    em.bucketCapMb = 1000;  // everything in the first 1 MiB bucket anyway: tiny is 0.5 MB of gradients
    const auto p = flat(em.model.layers, 1e-3, 2e-3, 1e-9);
    auto si = simInput(em, Strategy::Ddp, p);
    si.steps = 1;
    const auto r = simulate(si);
    const double P = static_cast<double>(parameterCount(em.model));
    const double ar = 100e-6 + 4.0 * P * 1.0 / 1e9;  // 2(n-1)/n = 1 on 2 ranks
    const int blocks = em.model.layers + 2;
    const double expected = blocks * 1e-3 + blocks * 2e-3 + ar + P * 1e-9;
    QCOMPARE(r.collectivesPerStep, 1);
    QVERIFY2(std::abs(r.steady.stepS - expected) < 1e-9,
             qPrintable(QString::number(r.steady.stepS, 'g', 12) + " vs " + QString::number(expected, 'g', 12)));
    QVERIFY(std::abs(r.steady.exposedCommS - ar) < 1e-9);
    QVERIFY(std::abs(r.steady.commS - ar) < 1e-9);
    QCOMPARE(r.steady.overlap(), 0.0);
  }

  // DDP with small buckets: gradients of the head go out while the blocks below still compute.
  void ddpBucketsOverlapBackward() {
    auto em = runtimeInput("small", 2);
    em.bucketCapMb = 1;
    const auto p = flat(em.model.layers, 2e-3, 4e-3, 1e-10);
    auto one = simInput(em, Strategy::Ddp, p);
    one.model.bucketCapMb = 1000;
    const auto r1 = simulate(one);
    const auto rn = simulate(simInput(em, Strategy::Ddp, p));
    QVERIFY(rn.collectivesPerStep > 5);
    QVERIFY2(rn.steady.exposedCommS < 0.6 * r1.steady.exposedCommS, "buckets must hide part of the all-reduce");
    QVERIFY(rn.steady.stepS < r1.steady.stepS);
    QVERIFY(rn.steady.overlap() > 0.3);
    // Never faster than its compute.
    QVERIFY(rn.steady.stepS >= rn.steady.computeS - 1e-12);
  }

  // What each strategy sends per step is exactly what the communication model counts.
  void volumesMatchTheCommunicationModel_data() {
    QTest::addColumn<QString>("strategy");
    QTest::addColumn<int>("gpus");
    for (const char* s : {"ddp", "zero1", "zero2", "zero3", "fsdp", "fsdp_grad_op"}) {
      QTest::newRow((std::string(s) + "/2").c_str()) << QString(s) << 2;
      QTest::newRow((std::string(s) + "/4").c_str()) << QString(s) << 4;
    }
    QTest::newRow("hsdp/4") << QString("hsdp") << 4;
  }
  void volumesMatchTheCommunicationModel() {
    QFETCH(QString, strategy);
    QFETCH(int, gpus);
    const auto s = *strategyFromString(strategy.toStdString());
    auto em = runtimeInput("tiny", gpus);
    em.paramPersistenceThreshold = 0;
    const auto r = simulate(simInput(em, s, flat(em.model.layers, 1e-4, 2e-4, 1e-9)));
    const auto cv = commVolume(em, s);
    QCOMPARE(r.messageBytesPerStep, cv.messageBytes);
    QVERIFY(std::abs(r.wireBytesPerStep - cv.wireBytes) < 1e-6 * cv.wireBytes);
    std::int64_t count = 0;
    for (const auto& c : cv.collectives) count += c.count;
    if (s != Strategy::Zero3) QCOMPARE(r.collectivesPerStep, count);  // ZeRO-3's buckets fill by module, the model rounds
  }

  // ZeRO-3's first step has no trace (no prefetch); from the second on, prefetch hides the gathers.
  void zero3PrefetchFromTheSecondStep() {
    auto em = runtimeInput("small", 2);
    em.maxReuseDistance = 0;  // release after use: all-gathers in forward and backward
    em.paramPersistenceThreshold = 0;
    auto si = simInput(em, Strategy::Zero3, flat(em.model.layers, 4e-3, 8e-3, 1e-10));
    si.steps = 3;
    si.keepRanks = 1;
    const auto r = simulate(si);
    QCOMPARE(r.ranks.size(), std::size_t{1});
    const auto& steps = r.ranks[0].steps;
    QCOMPARE(steps.size(), std::size_t{3});
    const double first = steps[0].second - steps[0].first, second = steps[1].second - steps[1].first;
    QVERIFY2(second < first, qPrintable(QString("traced step %1 s, untraced %2 s").arg(second).arg(first)));
    // With the prefetch bucket at zero, no module is fetched ahead: every gather is exposed.
    auto none = si;
    none.model.prefetchBucketSize = 0;
    const auto rn = simulate(none);
    QVERIFY(rn.steady.exposedCommS > r.steady.exposedCommS);
  }

  // FSDP: BACKWARD_PRE issues the next unit's gather before this unit's gradients; none waits.
  void fsdpBackwardPrefetchOrder() {
    auto em = runtimeInput("small", 4);
    const auto p = flat(em.model.layers, 4e-3, 8e-3, 1e-10);
    auto pre = simInput(em, Strategy::FsdpFull, p);
    auto post = pre, none = pre;
    post.backwardPrefetch = BackwardPrefetch::Post;
    none.backwardPrefetch = BackwardPrefetch::None;
    const auto a = simulate(pre), b = simulate(post), c = simulate(none);
    QVERIFY2(a.steady.stepS <= b.steady.stepS + 1e-12, "pre must not be slower than post");
    QVERIFY2(b.steady.stepS < c.steady.stepS, "post must beat no prefetch");
    QVERIFY(c.steady.exposedCommS > a.steady.exposedCommS);
    // Forward prefetch hides the forward gathers too.
    auto fwd = pre;
    fwd.forwardPrefetch = true;
    QVERIFY(simulate(fwd).steady.stepS < a.steady.stepS);
  }

  // The simulated peak is the estimator's peak moment replayed over time.
  void peakMatchesTheEstimator_data() {
    QTest::addColumn<QString>("strategy");
    QTest::addColumn<QString>("model");
    for (const char* m : {"tiny", "small"})
      for (const char* s : {"ddp", "zero1", "zero2", "zero3", "fsdp"})
        QTest::newRow((std::string(m) + "/" + s).c_str()) << QString(s) << QString(m);
  }
  void peakMatchesTheEstimator() {
    QFETCH(QString, strategy);
    QFETCH(QString, model);
    const auto s = *strategyFromString(strategy.toStdString());
    auto em = runtimeInput(model.toStdString().c_str(), 2);
    const auto r = simulate(simInput(em, s, flat(em.model.layers, 1e-4, 2e-4, 1e-9)));
    const auto e = estimateMemory(em, s);
    const double err = (static_cast<double>(r.peakBytes) - static_cast<double>(e.peakBytes)) / static_cast<double>(e.peakBytes);
    QVERIFY2(std::abs(err) < 0.05, qPrintable(QString("simulated %1, estimated %2").arg(r.peakBytes).arg(e.peakBytes)));
    QVERIFY(!r.ranks.empty() && !r.ranks[0].memory.empty());
  }

  // The last rank to start a collective ends it lastLateness x its time after the others; the
  // members' mean end stays at the last start + its time. Without it they end together.
  void lastStarterEndsLater() {
    auto em = runtimeInput("tiny", 2);
    em.bucketCapMb = 1000;
    auto si = simInput(em, Strategy::Ddp, flat(em.model.layers, 1e-3, 2e-3, 1e-9));
    si.steps = 1;
    si.slowRanks = {{1, 1.5}};  // rank 1 reaches the all-reduce last
    si.keepRanks = 0;
    const double ar = 100e-6 + 4.0 * static_cast<double>(parameterCount(em.model)) / 1e9;
    // The one all-reduce's start and end on each rank.
    double start[2] = {0, 0}, end[2] = {0, 0};
    const auto allReduceOn = [&](const SimulationResult& r) {
      QCOMPARE(r.ranks.size(), std::size_t{2});
      for (int k = 0; k < 2; ++k)
        for (const auto& sp : r.ranks[static_cast<std::size_t>(k)].spans)
          if (sp.kind == SimSpan::Kind::Collective) {
            start[k] = sp.startS;
            end[k] = sp.endS;
          }
    };
    for (const double theta : {0.0, 0.5}) {
      si.lastLatenessAllReduce = theta;
      allReduceOn(simulate(si));
      QVERIFY(start[1] > start[0]);
      QVERIFY2(std::abs((end[1] - end[0]) - theta * ar) < 1e-12, qPrintable(QString::number(end[1] - end[0], 'g', 12)));
      QVERIFY(std::abs((end[0] + end[1]) / 2 - (start[1] + ar)) < 1e-12);
    }
    // Where the calibration run measured the collective's own size, that size's time and lateness
    // stand (LinkModel::InRunSize) before its class's and its kind's.
    const double wire = 4.0 * static_cast<double>(parameterCount(em.model)) * ringFactor(CollKind::AllReduce, 2);
    si.intraNode.allReduceInRun = {{wire, 2 * ar, 0.2}};
    si.lastLatenessAllReduce = 0.5;
    si.lastLatenessByWait[0][0] = si.lastLatenessByWait[0][1] = 0.4;
    allReduceOn(simulate(si));
    QVERIFY2(std::abs((end[1] - end[0]) - 0.2 * 2 * ar) < 1e-12, qPrintable(QString::number(end[1] - end[0], 'g', 12)));
    QVERIFY(std::abs((end[0] + end[1]) / 2 - (start[1] + 2 * ar)) < 1e-12);
    si.intraNode.allReduceInRun.clear();  // the class's, then
    allReduceOn(simulate(si));
    QVERIFY2(std::abs((end[1] - end[0]) - 0.4 * ar) < 1e-12, qPrintable(QString::number(end[1] - end[0], 'g', 12)));
  }

  // A straggler slows every rank it synchronises with, and the slowest rank is named.
  void stragglerDelaysEveryone() {
    auto em = runtimeInput("small", 4);
    const auto p = flat(em.model.layers, 2e-3, 4e-3, 1e-10);
    auto si = simInput(em, Strategy::FsdpFull, p);
    const auto base = simulate(si);
    si.slowRanks = {{3, 1.5}};
    si.keepRanks = 1;
    const auto slow = simulate(si);
    QCOMPARE(slow.slowestRank, 3);
    QCOMPARE(slow.ranks.size(), std::size_t{2});  // rank 0 and the slow rank 3
    const auto& r0 = slow.ranks[0];
    QCOMPARE(r0.rank, 0);
    const double r0step = r0.steps.back().second - r0.steps.back().first;
    QVERIFY2(r0step > 1.3 * (base.ranks[0].steps.back().second - base.ranks[0].steps.back().first),
             "rank 0 waits for rank 3 at every gather");
    // Jitter is deterministic per seed.
    auto j = simInput(em, Strategy::FsdpFull, p);
    j.jitter = 0.05;
    QCOMPARE(simulate(j).steady.stepS, simulate(j).steady.stepS);
    auto j2 = j;
    j2.seed = 7;
    QVERIFY(simulate(j2).steady.stepS != simulate(j).steady.stepS);
  }

  // FLOPs mode: compute follows the device peak and the efficiency.
  void flopsProfileScales() {
    EstimateInput em;
    em.model = *modelShapePreset("llama3-8b");
    em.gpus = 8;
    em.gpusPerNode = 8;
    em.microBatch = 1;
    em.seqLen = 2048;
    const auto a = flopsComputeProfile(em, 989, 0.4, 3350), b = flopsComputeProfile(em, 989, 0.2, 3350);
    QVERIFY(std::abs(b.forwardS[5] - 2 * a.forwardS[5]) < 1e-12);
    double total = 0;
    for (std::size_t i = 0; i < a.forwardS.size(); ++i) total += a.forwardS[i] + a.backwardS[i];
    // 6·Ψ_non-embedding + attention per token, at 395.6 TFLOPS: within 1% of the recommendation's figure.
    const double nonEmbed = static_cast<double>(parameterCount(em.model) - em.model.vocab * em.model.hidden);
    const double flops = (6 * nonEmbed + 6.0 * 32 * 32 * 2 * 128 * 2048) * 2048;
    QVERIFY2(std::abs(total - flops / 395.6e12) / total < 0.01, qPrintable(QString::number(total)));
    // Scaling a measured profile to the same shape changes nothing; to twice the tokens doubles the layers.
    auto em2 = em;
    em2.microBatch = 2;
    const auto s = scaleComputeProfile(a, em, em2);
    QVERIFY(std::abs(s.forwardS[3] / a.forwardS[3] - 2.0) < 0.01);
    QCOMPARE(scaleComputeProfile(a, em, em).forwardS, a.forwardS);
  }

  // Thousands of devices: 256 here (the 1024-device figure is bench_simulator's).
  void scalesToManyDevices() {
    SimulateInput si = llama70b(256, Strategy::Zero3);
    si.keepRanks = 2;
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = simulate(si);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    QVERIFY2(s < 20, qPrintable(QString::number(s)));
    QCOMPARE(r.ranks.size(), std::size_t{2});
    QVERIFY(r.steady.stepS > r.steady.computeS);
    QVERIFY(r.tokensPerSPerDevice > 100 && r.tokensPerSPerDevice < 5000);
    // HSDP across 32 nodes: a shard group per node, replicas across.
    si.strategy = Strategy::Hsdp;
    const auto h = simulate(si);
    QVERIFY(h.steady.stepS > 0);
    int shardGroups = 0, replicaGroups = 0;
    for (const auto& g : h.groups) {
      shardGroups += g.name.rfind("shard", 0) == 0;
      replicaGroups += g.name.rfind("replica", 0) == 0;
    }
    QCOMPARE(shardGroups, 32);
    QCOMPARE(replicaGroups, 8);
  }

  // The result's JSON (what `simulate --json` prints) carries the result's own figures.
  void resultJsonCarriesTheFigures() {
    auto si = simInput(runtimeInput("tiny", 2), Strategy::Zero3, flat(2, 1e-3, 2e-3, 0));
    const auto r = simulate(si);
    const JsonValue j = toJson(r);
    QCOMPARE(j.find("strategy")->asString(), std::string("zero3"));
    QCOMPARE(j.find("step_s")->asDouble(), r.steady.stepS);
    QCOMPARE(j.find("exposed_comm_s")->asDouble(), r.steady.exposedCommS);
    QCOMPARE(j.find("overlap")->asDouble(), r.steady.overlap());
    QCOMPARE(*j.find("peak_bytes")->asInt(), r.peakBytes);
    QCOMPARE(*j.find("collectives_per_step")->asInt(), r.collectivesPerStep);
    QCOMPARE(j.find("wire_bytes_per_step")->asDouble(), r.wireBytesPerStep);
    QCOMPARE(j.members().size(), std::size_t{15});
  }

  void refusesWhatItCannotSimulate() {
    auto em = runtimeInput("tiny", 2);
    em.offloadOptimizer = true;
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, simulate(simInput(em, Strategy::Zero3, flat(2, 1e-4, 1e-4, 0))));
    auto e2 = runtimeInput("tiny", 2);
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, simulate(simInput(e2, Strategy::Zero3, flat(5, 1e-4, 1e-4, 0))));
    auto si = simInput(e2, Strategy::Ddp, flat(2, 1e-4, 1e-4, 0));
    si.steps = 0;
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, simulate(si));
    // More event state than a desktop holds (70B, ZeRO-3, 4096 devices, 20 steps: ~11 GiB):
    // refused at once with what to do, before anything big is allocated.
    SimulateInput bs = llama70b(4096, Strategy::Zero3);
    bs.steps = 20;
    const auto t0 = std::chrono::steady_clock::now();
    try {
      simulate(bs);
      QFAIL("not refused");
    } catch (const std::invalid_argument& e) {
      QVERIFY2(std::string(e.what()).find("fewer steps") != std::string::npos, e.what());
    }
    QVERIFY(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
    // A cancelled token stops it before any work.
    CancelToken cancelled;
    cancelled.cancel();
    bs.steps = 2;
    QVERIFY_THROWS_EXCEPTION(Cancelled, simulate(bs, &cancelled));
  }

  // The stored run reads back like a measured one: lanes, steps, collectives, memory, and the step
  // breakdown's exposed communication equals the simulator's own.
  void storedRunReadsBack() {
    const ScratchDb scratch("sim.db");
    const std::string& db = scratch.file;
    auto em = runtimeInput("small", 2);
    auto si = simInput(em, Strategy::Zero3, flat(em.model.layers, 3e-3, 6e-3, 1e-10));
    si.steps = 3;
    const auto r = simulate(si);
    RunId id;
    {
      TraceStore store(db);
      id = writeSimulatedRun(store, r, "sim zero3");
    }
    TraceStore store(db, Database::Mode::ReadOnly);
    const auto run = store.run(id);
    QVERIFY(run);
    QVERIFY(run->source == RunSource::Simulated);
    QCOMPARE(run->worldSize, 2);
    QCOMPARE(run->strategy, std::string("zero3"));
    QCOMPARE(store.ranks(id).size(), std::size_t{2});
    QCOMPARE(store.steps(id).size(), std::size_t{6});
    const auto bd = computeStepBreakdown(store, id);
    double exposed = 0, comm = 0;
    int n = 0;
    for (const auto& b : bd)
      if (b.step >= 2) {
        exposed += static_cast<double>(b.exposedCommNs) * 1e-9;
        comm += static_cast<double>(b.commNs) * 1e-9;
        ++n;
      }
    QCOMPARE(n, 4);
    QVERIFY2(std::abs(exposed / n - r.steady.exposedCommS) < 1e-6 + 1e-3 * r.steady.exposedCommS,
             qPrintable(QString("analysis %1 s, simulator %2 s").arg(exposed / n).arg(r.steady.exposedCommS)));
    QVERIFY(std::abs(comm / n - r.steady.commS) < 1e-6 + 1e-3 * r.steady.commS);
    QVERIFY(!store.memoryEvents(store.ranks(id)[0].id).empty());
    QCOMPARE(*store.metric(id, std::nullopt, "step_time_ms"), r.steady.stepS * 1e3);
    // A simulated run is not a runtime run: no compute profile from it.
    QVERIFY_THROWS_EXCEPTION(Error, measuredProfile(store, id));
  }

  // How ranks wait on a collective round-trips: the simulator marks a collective on demand where
  // its wait follows its issue with no compute between (ZeRO-3 without prefetch: every all-gather),
  // the stored run says how long each rank waited, and the samples read from it classify each
  // instance the same way; the last starter's lateness comes back per class.
  void waitKindRoundTrip() {
    const ScratchDb scratch("wait.db");
    const std::string& db = scratch.file;
    TraceStore store(db);
    auto em = runtimeInput("small", 2);
    for (const std::int64_t prefetch : {std::int64_t{0}, std::int64_t{50000000}}) {
      em.prefetchBucketSize = prefetch;
      auto si = simInput(em, Strategy::Zero3, flat(em.model.layers, 3e-3, 6e-3, 1e-10));
      si.intraNode = LinkModel{"test", 1.0, 0, 100, "test"};
      si.interNode = si.intraNode;
      si.steps = 3;
      si.jitter = 0.2;
      si.lastLatenessByWait[1][0] = 0.1;
      si.lastLatenessByWait[1][1] = 0.5;
      const auto r = simulate(si);
      const RunId id = writeSimulatedRun(store, r, "wait " + std::to_string(prefetch));
      int onDemand = 0, ahead = 0;
      double late[2] = {0, 0}, dur[2] = {0, 0};
      for (const auto& smp : collectiveSamples(store, id)) {
        if (smp.kind != CollKind::AllGather) continue;
        QVERIFY(smp.waited != WaitKind::Unknown);
        const int k = smp.waited == WaitKind::OnDemand ? 1 : 0;
        (k ? onDemand : ahead) += 1;
        late[k] += smp.lastLatenessS;
        dur[k] += smp.durationS;
      }
      if (prefetch == 0) {
        QVERIFY2(onDemand > 0 && ahead == 0, qPrintable(QString("%1 on demand, %2 ahead").arg(onDemand).arg(ahead)));
      } else {
        QVERIFY2(onDemand > 0 && ahead > 0, qPrintable(QString("%1 on demand, %2 ahead").arg(onDemand).arg(ahead)));
        QVERIFY2(std::abs(late[0] / dur[0] - 0.1) < 0.005, qPrintable(QString::number(late[0] / dur[0])));
      }
      QVERIFY2(std::abs(late[1] / dur[1] - 0.5) < 0.005, qPrintable(QString::number(late[1] / dur[1])));
    }
  }

  // The link fitted from a stored run's collectives is the link it was simulated with: instances
  // matched across ranks (from the last rank's start), the warm-up step left out, all-reduce-like
  // and all-gather-like kinds fitted apart.
  void fittedLinkRoundTrip_data() {
    QTest::addColumn<int>("strategy");
    QTest::newRow("ddp") << static_cast<int>(Strategy::Ddp);
    QTest::newRow("zero3") << static_cast<int>(Strategy::Zero3);
    QTest::newRow("fsdp") << static_cast<int>(Strategy::FsdpFull);
  }
  void fittedLinkRoundTrip() {
    QFETCH(int, strategy);
    const ScratchDb scratch("fit.db");
    const std::string& db = scratch.file;
    auto em = runtimeInput("small", 4);
    em.bucketCapMb = 2;  // DDP: buckets of several sizes
    auto si = simInput(em, static_cast<Strategy>(strategy), flat(em.model.layers, 3e-3, 6e-3, 1e-10));
    si.intraNode = LinkModel{"test", 1.0, 0, 100, "test"};
    si.intraNode.allReduceBusBwGBps = 0.5;
    si.intraNode.allReduceAlphaUs = 300;
    si.interNode = si.intraNode;
    si.steps = 4;
    si.jitter = 0.2;  // ranks arrive apart: the waiting is not link time
    // The last rank to start ends 40 % of the time after the others; their mean end is unchanged,
    // so the fit below is not moved by it, and the samples give the 40 % back.
    si.lastLatenessAllReduce = si.lastLatenessOther = 0.4;
    const auto r = simulate(si);
    TraceStore store(db);
    const RunId id = writeSimulatedRun(store, r, "fit");
    const auto samples = collectiveSamples(store, id);
    QCOMPARE(static_cast<std::int64_t>(samples.size()), r.collectivesPerStep * 3);  // steps 2..4
    double late = 0, dur = 0;
    for (const auto& s : samples) {
      late += s.lastLatenessS;
      dur += s.durationS;
    }
    QVERIFY2(std::abs(late / dur - 0.4) < 0.005, qPrintable(QString("lateness %1 of the time").arg(late / dur)));
    const auto f = fitLink(samples, "fit");
    if (static_cast<Strategy>(strategy) == Strategy::Ddp) {  // all-reduces only
      QVERIFY2(std::abs(f.link.arBw() - 0.5) < 1e-3, qPrintable(QString("all-reduce bandwidth %1 GB/s").arg(f.link.arBw())));
      QVERIFY2(std::abs(f.link.arAlphaUs() - 300) < 1, qPrintable(QString("all-reduce latency %1 us").arg(f.link.arAlphaUs())));
    } else {  // all-gathers and reduce-scatters
      QVERIFY2(std::abs(f.link.busBwGBps - 1.0) < 1e-3, qPrintable(QString("bus bandwidth %1 GB/s").arg(f.link.busBwGBps)));
      QVERIFY2(std::abs(f.link.alphaUs - 100) < 1, qPrintable(QString("latency %1 us").arg(f.link.alphaUs)));
    }
    QVERIFY(f.meanAbsRelError < 1e-3);
  }

  // The rank-to-rank variation measured from a run is the one that made it: a simulation with a
  // known jitter, stored and read back as if our runtime had recorded it, gives that jitter back
  // (and none without jitter), with its per-block compute means.
  void measuredJitterRoundTrip_data() {
    QTest::addColumn<double>("jitter");
    QTest::newRow("none") << 0.0;
    QTest::newRow("10%") << 0.10;
    QTest::newRow("25%") << 0.25;
  }
  void measuredJitterRoundTrip() {
    QFETCH(double, jitter);
    const ScratchDb scratch("jit.db");
    const std::string& db = scratch.file;
    auto em = runtimeInput("small", 4);
    auto prof = flat(em.model.layers, 4e-3, 8e-3, 1e-9);
    prof.forwardS[1] = 6e-3;  // blocks of different lengths
    auto si = simInput(em, Strategy::Ddp, prof);
    si.steps = 12;
    si.jitter = jitter;
    si.seed = 7;
    const auto r = simulate(si);
    TraceStore store(db);
    const RunId id = writeSimulatedRun(store, r, "jitter");
    shardscope::core::storeDb(store).exec("UPDATE runs SET source='runtime' WHERE id=" + std::to_string(id.value()));
    const auto mp = measuredProfile(store, id);
    if (jitter == 0) {
      QVERIFY2(mp.computeJitter < 1e-4, qPrintable(QString::number(mp.computeJitter)));
    } else {
      QVERIFY2(std::abs(mp.computeJitter - jitter) < 0.2 * jitter,
               qPrintable(QString("measured %1, simulated with %2").arg(mp.computeJitter).arg(jitter)));
    }
    QCOMPARE(mp.steps, 12);
    QVERIFY(std::abs(mp.compute.forwardS[1] - 6e-3) < 6e-3 * (0.02 + jitter / 3));
    QVERIFY(std::abs(mp.compute.backwardS[2] - 8e-3) < 8e-3 * (0.02 + jitter / 3));
  }

  // A measured jitter distribution is drawn from as it is: every op 50 % late takes the compute to
  // 1.5 times, and a distribution with a tail (one op in ten 40 % late, the rest on time), stored
  // and read back as a run of ours, gives quantiles centred on 0 that keep the tail the robust
  // standard deviation does not see.
  void measuredJitterKeepsItsTail() {
    auto em = runtimeInput("small", 4);
    const auto prof = flat(em.model.layers, 4e-3, 8e-3, 1e-9);
    auto si = simInput(em, Strategy::Ddp, prof);
    si.steps = 12;
    si.seed = 3;
    const double plain = simulate(si).steady.computeS;
    for (auto& q : si.jitterQuantiles) q.assign(kJitterQuantiles, 0.5);
    QVERIFY(std::abs(simulate(si).steady.computeS / plain - 1.5) < 1e-6);

    for (auto& q : si.jitterQuantiles) {
      q.assign(kJitterQuantiles, 0.0);
      for (int i = kJitterQuantiles * 9 / 10; i < kJitterQuantiles; ++i) q[static_cast<std::size_t>(i)] = 0.4;
    }
    const ScratchDb scratch("tail.db");
    const std::string& db = scratch.file;
    const auto r = simulate(si);
    TraceStore store(db);
    const RunId id = writeSimulatedRun(store, r, "tail");
    shardscope::core::storeDb(store).exec("UPDATE runs SET source='runtime' WHERE id=" + std::to_string(id.value()));
    const auto mp = measuredProfile(store, id);
    for (int p : {0, 1}) {
      const auto& q = mp.jitterQuantiles[static_cast<std::size_t>(p)];
      QCOMPARE(static_cast<int>(q.size()), kJitterQuantiles);
      QVERIFY(std::is_sorted(q.begin(), q.end()));
      double mean = 0;
      for (double x : q) mean += x;
      QVERIFY(std::abs(mean / kJitterQuantiles) < 1e-9);
      // One rank of four 40 % late: (1.4 - 1.1) / 1.1 x sqrt(4/3) = 0.31 above the mean.
      QVERIFY2(q[static_cast<std::size_t>(kJitterQuantiles * 97 / 100)] > 0.2,
               qPrintable(QString::number(q[static_cast<std::size_t>(kJitterQuantiles * 97 / 100)])));
      QVERIFY(std::abs(q[static_cast<std::size_t>(kJitterQuantiles / 2)]) < 0.12);
      QVERIFY2(mp.phaseJitter[p] < 0.15, qPrintable(QString::number(mp.phaseJitter[p])));
    }
  }
  // A ZeRO-3 rank waits for each parameter's all-gather inside a block, so a block's pass is stored
  // in pieces of different lengths. Read back, each block's pass is one interference sample (its
  // pieces summed, its overlap their duration-weighted mean): the fit's premise is that a group's
  // samples would take the same time alone, which pieces of one block break (a measured ZeRO-3 run's
  // k came out at 0.09 piece by piece, 0.34 block by block). Each block's time alone comes back.
  void zero3PiecesAreSummedPerBlock() {
    auto em = runtimeInput("small", 2);
    auto si = simInput(em, Strategy::Zero3, flat(em.model.layers, 4e-3, 8e-3, 1e-9));
    si.steps = 6;
    si.interference = kCpuGlooInterference;
    si.intraNode = LinkModel{"slow", 0.2, 0, 300, "test"};  // collectives long enough to overlap compute
    const auto r = simulate(si);
    const ScratchDb scratch("pieces.db");
    const std::string& db = scratch.file;
    TraceStore store(db);
    const RunId id = storeAsCpuRuntimeRun(store, r, "pieces");
    int pieces = 0;
    for (const auto& t : store.tracks(id))
      if (t.kind == TrackKind::CpuThread && t.name.rfind("compute", 0) == 0)
        store.forEachEvent(
            t.id, [&](const Event& e) { pieces += e.step && *e.step == 3 && e.name == "forward layers.1"; }, false);
    QVERIFY2(pieces > 2 * 2, qPrintable(QString("%1 pieces of block 1's forward in step 3 on 2 ranks").arg(pieces)));
    const auto mp = measuredProfile(store, id);
    // One sample per rank, steady step, pass and block (embedding, the layers, the head).
    QCOMPARE(mp.interference.samples, static_cast<std::int64_t>(2 * (si.steps - 1) * 2 * (em.model.layers + 2)));
    QVERIFY2(mp.interference.meanOverlap > 0.05 && mp.interference.meanOverlap < 1, mp.interference.note.c_str());
    QCOMPARE(mp.interference.k, kCpuGlooInterference);
    for (int l = 1; l <= em.model.layers; ++l) {
      const double f = mp.compute.forwardS[static_cast<std::size_t>(l)];
      // Within 3 %: the simulation settles each op's stretch to 0.5 % and averages it over the ranks
      // (blocks 2-4 come back at 4.000 ms, block 1, next to the embedding's gathers, at 3.90).
      QVERIFY2(std::abs(f / 4e-3 - 1) < 0.03, qPrintable(QString("block %1 forward %2 ms").arg(l).arg(f * 1e3)));
    }
    // `simulate --interference K` takes the spans apart with K: with 0 each block keeps its
    // measured time, stretched by the collectives beside it, so it comes back longer than its
    // 4 ms alone by about k x its overlap; with the default it is the profile above.
    const auto none = measuredProfile(store, id, 0.0);
    QCOMPARE(none.interference.k, 0.0);
    QVERIFY(!none.interference.identified);
    QVERIFY2(none.interference.note.find("--interference") != std::string::npos, none.interference.note.c_str());
    const auto same = measuredProfile(store, id, kCpuGlooInterference);
    double stretched = 0, alone = 0;
    for (int l = 1; l <= em.model.layers; ++l) {
      const auto i = static_cast<std::size_t>(l);
      QCOMPARE(same.compute.forwardS[i], mp.compute.forwardS[i]);
      stretched += none.compute.forwardS[i];
      alone += mp.compute.forwardS[i];
    }
    QVERIFY2(stretched > alone * (1 + 0.5 * kCpuGlooInterference * mp.interference.meanOverlap),
             qPrintable(QString("forward blocks %1 ms with k 0, %2 ms alone").arg(stretched * 1e3).arg(alone * 1e3)));
  }

  // A checkpointed run's spans are turned back into a plain profile with the run's own
  // checkpointing probe: a simulation whose checkpointing costs a forward share 1.0 and a
  // recomputation share 0.95 (what the probe measures on a machine where arithmetic, not memory,
  // costs) reads back as its plain 4 / 8 ms blocks with the probe's shares; with the constants
  // (0.86 / 0.80) the forward would come back 16 % too long. The knob's prediction says which it used.
  void checkpointedRunReadsBackWithItsProbe() {
    const SimulateInput si = checkpointedSmall(Strategy::FsdpFull, 0.95);
    const EstimateInput& em = si.model;
    const auto r = simulate(si);
    const ScratchDb scratch("ckpt.db");
    const std::string& db = scratch.file;
    TraceStore store(db);
    const RunId id = storeAsCpuRuntimeRun(store, r, "ckpt");
    const auto noProbe = measuredProfile(store, id);
    QVERIFY(noProbe.input.activationCheckpointing);
    QVERIFY(!noProbe.compute.checkpointProbed);
    QCOMPARE(noProbe.compute.checkpointedForwardShare, kCheckpointedForwardShare);
    QVERIFY2(noProbe.compute.forwardS[1] > 4e-3 * 1.1, qPrintable(QString::number(noProbe.compute.forwardS[1] * 1e3)));
    addCheckpointProbe(store, id, [](int rank) { return rank == 0 ? 0.90 : 1.00; });
    const auto mp = measuredProfile(store, id);
    QVERIFY(mp.compute.checkpointProbed);
    QCOMPARE(mp.compute.checkpointedForwardShare, 1.0);
    QVERIFY(std::abs(mp.compute.recomputeShare - 0.95) < 1e-12);  // the mean over the ranks
    for (int l = 1; l <= em.model.layers; ++l) {
      const auto i = static_cast<std::size_t>(l);
      // Within 3 %, as zero3PiecesAreSummedPerBlock: the simulation settles each op's stretch to 0.5 %.
      QVERIFY2(std::abs(mp.compute.forwardS[i] / 4e-3 - 1) < 0.03, qPrintable(QString::number(mp.compute.forwardS[i] * 1e3)));
      QVERIFY2(std::abs(mp.compute.backwardS[i] / 8e-3 - 1) < 0.03, qPrintable(QString::number(mp.compute.backwardS[i] * 1e3)));
    }
    const JsonValue j = toJson(mp);
    QCOMPARE(j.find("checkpointing")->find("source")->asString(), std::string("probe"));
    QVERIFY(std::abs(j.find("checkpointing")->find("recompute_share")->asDouble() - 0.95) < 1e-12);
    // The prediction of the plain configuration carries the shares and says where they came from.
    Calibration cal;
    cal.profile = mp;
    cal.link.link = LinkModel{"l", 1.0, 0, 100, "l"};
    SimulateInput plain = si;
    plain.model.activationCheckpointing = false;
    const PredictionCheck c = applyCalibration(plain, cal, false, false);
    QCOMPARE(c.change, std::string("knob"));
    QCOMPARE(plain.compute.recomputeShare, mp.compute.recomputeShare);
    SimulationResult pr = simulate(plain);
    annotatePrediction(pr, cal, c);
    QVERIFY2(pr.prediction->checkpointing.find("recomputation 0.95 of a plain forward (the run's checkpointing probe)") !=
                 std::string::npos,
             pr.prediction->checkpointing.c_str());
  }

  // Where the run's spans hold the recomputation apart ("recompute <block>": our runtime since
  // session 15, and the simulator's ZeRO-3), its share is read from them, not from the probe: a
  // simulation recomputing 0.80 of a plain forward reads back at 0.80 although its probe says 1.20,
  // its backward spans stay the backward alone (8 ms, none of the probe's share taken off them), and
  // the prediction says where the recomputation came from.
  void recomputationMeasuredInTheSteps() {
    const SimulateInput si = checkpointedSmall(Strategy::Zero3, 0.80);
    const EstimateInput& em = si.model;
    const auto r = simulate(si);
    const ScratchDb scratch("recompute.db");
    const std::string& db = scratch.file;
    TraceStore store(db);
    const RunId id = storeAsCpuRuntimeRun(store, r, "recompute");
    addCheckpointProbe(store, id, [](int) { return 1.2; });
    const auto mp = measuredProfile(store, id);
    QVERIFY(mp.compute.checkpointProbed);
    QVERIFY(mp.compute.recomputeMeasured);
    QVERIFY2(std::abs(mp.compute.recomputeShare / 0.80 - 1) < 0.03, qPrintable(QString::number(mp.compute.recomputeShare)));
    for (int l = 1; l <= em.model.layers; ++l) {
      const auto i = static_cast<std::size_t>(l);
      QVERIFY2(std::abs(mp.compute.forwardS[i] / 4e-3 - 1) < 0.03, qPrintable(QString::number(mp.compute.forwardS[i] * 1e3)));
      QVERIFY2(std::abs(mp.compute.backwardS[i] / 8e-3 - 1) < 0.03, qPrintable(QString::number(mp.compute.backwardS[i] * 1e3)));
    }
    const JsonValue j = toJson(mp);
    QCOMPARE(j.find("checkpointing")->find("recompute_source")->asString(), std::string("steps"));
    Calibration cal;
    cal.profile = mp;
    cal.link.link = LinkModel{"l", 1.0, 0, 100, "l"};
    SimulateInput plain = si;
    plain.model.activationCheckpointing = false;
    const PredictionCheck c = applyCalibration(plain, cal, false, false);
    SimulationResult pr = simulate(plain);
    annotatePrediction(pr, cal, c);
    QVERIFY2(pr.prediction->checkpointing.find("the recomputation measured in the run's steps") != std::string::npos,
             pr.prediction->checkpointing.c_str());
  }
};

QTEST_GUILESS_MAIN(TestSimulator)
#include "tst_simulator.moc"
