// Predictions from a measured run (#28): the link interpolated between a probe's points, the link
// calibration (probe x contention, or a run fit and its conditioning), the interference fit on
// spans with a known slowdown, the host-load refusal and the extrapolation marks, and the interval.
#include <QtTest>

#include <cmath>
#include <string>
#include <vector>

#include "core/estimator/comm_model.h"
#include "core/estimator/interference.h"
#include "core/estimator/link_calibration.h"
#include "core/estimator/prediction.h"
#include "core/estimator/simulator.h"
#include "core/estimator/simulator_store.h"
#include "core/util/error.h"

using namespace shardscope::core;
using namespace shardscope::core::estimator;

namespace {

// A link whose one instance takes 200 µs + wire / 1 GB/s up to 1 MiB and twice the slope beyond (a
// protocol change), measured at 2 ranks.
double truthS(double wire) { return 200e-6 + (wire <= 1048576 ? wire : 1048576 + 2 * (wire - 1048576)) / 1e9; }

std::vector<CollectiveSample> probeSamples() {
  std::vector<CollectiveSample> v;
  for (std::int64_t bytes = 4096; bytes <= (std::int64_t{16} << 20); bytes *= 4)
    for (CollKind k : {CollKind::AllReduce, CollKind::AllGather})
      for (int rep = 0; rep < 3; ++rep) {
        CollectiveSample s;
        s.kind = k;
        s.groupSize = 2;
        s.messageBytes = bytes;
        s.durationS = truthS(static_cast<double>(bytes) * ringFactor(k, 2));
        v.push_back(s);
      }
  return v;
}

// A 2-rank all-gather matched across its ranks: its time, its last starter's lateness as a share
// of it, and how its ranks waited on it.
CollectiveSample matchedAllGather(std::int64_t bytes, double durationS, double lateness, WaitKind waited) {
  CollectiveSample s;
  s.kind = CollKind::AllGather;
  s.groupSize = 2;
  s.messageBytes = bytes;
  s.durationS = durationS;
  s.lastLatenessS = lateness * durationS;
  s.waited = waited;
  s.matched = true;
  return s;
}

MeasuredProfile profileOn(int cpus, int threads, int ranks) {
  MeasuredProfile mp;
  mp.runId = RunId{7};
  mp.input.model = *modelShapePreset("small");
  mp.input.gpus = ranks;
  mp.input.gpusPerNode = ranks;
  mp.input.precision = Precision::Fp32;
  mp.input.microBatch = 4;
  mp.input.seqLen = 128;
  mp.strategy = Strategy::Ddp;
  mp.gloo = true;
  mp.host.known = true;
  mp.host.cpus = cpus;
  mp.host.threadsPerRank = threads;
  mp.host.ranksOnHost = ranks;
  const int L = mp.input.model.layers;
  mp.compute.forwardS.assign(static_cast<std::size_t>(L + 2), 1e-3);
  mp.compute.backwardS.assign(static_cast<std::size_t>(L + 2), 2e-3);
  mp.compute.optimizerSPerElement = 1e-9;
  mp.stepS = 0.1;
  mp.stepCv = 0.03;
  mp.steps = 4;
  return mp;
}

SimulateInput targetOf(const MeasuredProfile& mp, Strategy s, int gpus) {
  SimulateInput si;
  si.model = mp.input;
  si.model.gpus = gpus;
  si.model.gpusPerNode = gpus;
  si.strategy = s;
  si.steps = 3;
  return si;
}

}  // namespace

class TestPrediction : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  // Between the measured points the time is interpolated (exact at them); outside, the line is
  // scaled to meet the nearest point.
  void interpolatesMeasuredPoints() {
    LinkModel l;
    l.busBwGBps = 1;
    l.alphaUs = 200;
    for (double w : {4096.0, 65536.0, 1048576.0, 4194304.0, 16777216.0}) {
      l.allReducePoints.push_back({w, truthS(w)});
      l.otherPoints.push_back({w, truthS(w)});
    }
    for (const auto& [w, t] : l.allReducePoints) QVERIFY(std::abs(l.instanceS(true, w) - t) < 1e-12);
    // Past the protocol change a straight line would be 2x off; the points follow it.
    QVERIFY(std::abs(l.instanceS(true, 8388608.0) / truthS(8388608.0) - 1) < 0.05);
    QVERIFY(std::abs(l.instanceS(false, 8388608.0) / truthS(8388608.0) - 1) < 0.05);
    // Below the first point: the line through alpha, scaled to meet it.
    const double below = l.instanceS(true, 1024.0);
    QVERIFY(below < truthS(4096.0) && below > 150e-6);
    // Without points: alpha-beta.
    LinkModel plain{"p", 1.0, 0, 200, "p"};
    QVERIFY(std::abs(plain.instanceS(true, 1e6) - (200e-6 + 1e6 / 1e9)) < 1e-12);
  }

  // The probe gives the link; the run's own collectives, 1.5x slower, give the contention.
  void calibratesProbeAndContention() {
    const auto probe = probeSamples();
    std::vector<CollectiveSample> steps;
    for (std::int64_t bytes : {std::int64_t{1} << 20, std::int64_t{15} << 20}) {
      CollectiveSample s;
      s.kind = CollKind::AllReduce;
      s.groupSize = 2;
      s.messageBytes = bytes;
      s.durationS = 1.5 * truthS(static_cast<double>(bytes));
      steps.push_back(s);
    }
    const LinkCalibration c = calibrateLink(probe, steps, "run3");
    QCOMPARE(c.source, std::string("probe"));
    QVERIFY(c.wellConditioned);
    QCOMPARE(c.minBytes, std::int64_t{4096});
    QCOMPARE(c.maxBytes, std::int64_t{16} << 20);
    QCOMPARE(c.groupSize, 2);
    QVERIFY2(std::abs(c.contentionAllReduce - 1.5) < 0.03, qPrintable(QString::number(c.contentionAllReduce)));
    // No all-gather in the run: the probe's time stands for it (a kind's contention is its own).
    QCOMPARE(c.contentionOther, 1.0);
    QCOMPARE(c.contentionSamples, std::int64_t{2});
    // The link predicts the run's own collectives.
    for (const auto& s : steps)
      QVERIFY(std::abs(c.link.instanceS(true, static_cast<double>(s.messageBytes)) / s.durationS - 1) < 0.05);
    QVERIFY(c.relError < 0.05);
    QVERIFY(c.note.find("link probe") != std::string::npos);
  }

  // A run whose all-reduces all ran beside compute (a DDP run with small buckets) tells the
  // slowdown beside compute, not the time alone: fitted freely, d = p·c0·(1 + m·g) put c0 at 0.7
  // there, so a bucket that runs alone came out 30 % faster than the probe measured it alone.
  // c0 is held at the probe and m fitted alone; a run slower than the probe keeps its c0.
  void contentionNotBelowTheProbe() {
    const auto probe = probeSamples();
    const auto steps = [](double c0, double m) {
      std::vector<CollectiveSample> v;
      for (int i = 0; i < 12; ++i) {
        CollectiveSample s;
        s.kind = CollKind::AllReduce;
        s.groupSize = 2;
        s.messageBytes = std::int64_t{1} << (i % 2 ? 22 : 20);  // at the probe's points: its time is exact
        s.computeOverlap = 0.4 + 0.05 * i;                      // 0.40 .. 0.95: never alone
        s.durationS = c0 * truthS(static_cast<double>(s.messageBytes)) * (1 + m * s.computeOverlap);
        v.push_back(s);
      }
      return v;
    };
    const LinkCalibration below = calibrateLink(probe, steps(0.7, 2.5), "ddp5");
    QVERIFY(below.commInterferenceFittedAllReduce);
    QCOMPARE(below.contentionAllReduce, 1.0);
    // d = p·(1 + m·g) through 0.7·(1 + 2.5·g) for g in 0.4 .. 0.95: m between 1.0 and 1.45.
    QVERIFY2(below.commInterferenceAllReduce > 1.0 && below.commInterferenceAllReduce < 1.45,
             qPrintable(QString::number(below.commInterferenceAllReduce)));
    const double alone = static_cast<double>(std::int64_t{13} << 20);
    QVERIFY2(std::abs(below.link.instanceS(true, alone) / truthS(alone) - 1) < 0.02,
             qPrintable(QString::number(below.link.instanceS(true, alone) / truthS(alone))));
    const LinkCalibration above = calibrateLink(probe, steps(1.3, 0.5), "zero3");
    QVERIFY(above.commInterferenceFittedAllReduce);
    QVERIFY2(std::abs(above.contentionAllReduce - 1.3) < 0.01, qPrintable(QString::number(above.contentionAllReduce)));
    QVERIFY2(std::abs(above.commInterferenceAllReduce - 0.5) < 0.01,
             qPrintable(QString::number(above.commInterferenceAllReduce)));
    // Too few instances to fit m (a ZeRO-1 run's all-gather after the step, nothing beside it),
    // faster than the probe: held at the probe too, so no target's all-gathers are sped up by it.
    std::vector<CollectiveSample> after;
    for (int i = 0; i < 3; ++i) {
      CollectiveSample s;
      s.kind = CollKind::AllGather;
      s.groupSize = 2;
      s.messageBytes = std::int64_t{1} << 22;
      s.durationS = 0.6 * truthS(static_cast<double>(s.messageBytes) * 0.5);
      after.push_back(s);
    }
    const LinkCalibration alone2 = calibrateLink(probe, after, "zero1");
    QVERIFY(!alone2.commInterferenceFittedOther);
    QCOMPARE(alone2.contentionOther, 1.0);
    for (auto& s : after) s.durationS *= 1.4 / 0.6;
    const LinkCalibration slower = calibrateLink(probe, after, "zero1b");
    QVERIFY2(slower.contentionOther > 1.2, qPrintable(QString::number(slower.contentionOther)));
  }

  // At the sizes the run's steps used three times or more their own mean time stands (without the
  // slowdown beside compute); elsewhere the probe's curve times the contention. The last rank to
  // start a collective is late by a share of the instances' time. In-run sizes are dropped for a
  // target whose groups are of another size.
  void inRunSizesAndLateness() {
    const auto probe = probeSamples();
    const auto wire = [](std::int64_t bytes) { return static_cast<double>(bytes) * ringFactor(CollKind::AllGather, 2); };
    const auto sample = [&](std::int64_t bytes, double slower, double g) {
      CollectiveSample s;
      s.kind = CollKind::AllGather;
      s.groupSize = 2;
      s.messageBytes = bytes;
      s.durationS = slower * truthS(wire(bytes)) * (1 + 0.5 * g);
      s.computeOverlap = g;
      s.lastLatenessS = 0.25 * s.durationS;
      return s;
    };
    std::vector<CollectiveSample> steps;
    for (int i = 0; i < 6; ++i) {
      steps.push_back(sample(1024, 5.0, i % 2 ? 0.8 : 0.0));  // small: 5x the probe under load
      steps.push_back(sample(std::int64_t{4} << 20, 1.2, 0.0));
    }
    steps.push_back(sample(65536, 1.2, 0.0));  // two instances: not enough to stand for the size
    steps.push_back(sample(65536, 1.2, 0.0));
    const LinkCalibration c = calibrateLink(probe, steps, "run6", /*defaultCommInterference=*/0.5);
    QCOMPARE(c.link.otherInRun.size(), std::size_t{2});
    QVERIFY(c.link.allReduceInRun.empty());
    QVERIFY2(std::abs(c.link.instanceS(false, wire(1024)) / (5.0 * truthS(wire(1024))) - 1) < 1e-9,
             qPrintable(QString::number(c.link.instanceS(false, wire(1024)))));
    QVERIFY(std::abs(c.link.instanceS(false, wire(std::int64_t{4} << 20)) / (1.2 * truthS(wire(std::int64_t{4} << 20))) - 1) <
            1e-9);
    // 64 KiB follows the probe times the fitted contention, which the 5x small ones pull above 1.2.
    const double mid = c.link.instanceS(false, wire(65536)) / truthS(wire(65536));
    QVERIFY2(std::abs(mid - c.contentionOther) < 1e-6 && mid > 1.2 && mid < 5.0, qPrintable(QString::number(mid)));
    QVERIFY(std::abs(c.lastLatenessOther - 0.25) < 1e-12);
    QCOMPARE(c.lastLatenessAllReduce, 0.0);
    QVERIFY2(c.note.find("2 of its sizes as the run measured them") != std::string::npos, c.note.c_str());
    QVERIFY(c.note.find("ends 0% / 25% of the time later") != std::string::npos);
    // The same sizes at 4 ranks carry other wire bytes and another group: not used there.
    Calibration cal;
    cal.profile = profileOn(16, 1, 2);
    cal.link = c;
    SimulateInput same = targetOf(cal.profile, Strategy::Zero3, 2), wider = targetOf(cal.profile, Strategy::Zero3, 4);
    applyCalibration(same, cal, false, true);
    applyCalibration(wider, cal, false, true);
    QCOMPARE(same.intraNode.otherInRun.size(), std::size_t{2});
    QCOMPARE(wider.intraNode.measuredGroupSize, 2);
    for (const auto& s : same.intraNode.otherInRun) {
      QVERIFY(same.intraNode.inRunSize(false, s.wireBytes, WaitKind::Unknown, 2) != nullptr);
      QVERIFY(wider.intraNode.inRunSize(false, s.wireBytes, WaitKind::Unknown, 4) == nullptr);
    }
    QCOMPARE(same.lastLatenessOther, 0.25);
  }

  // The loaded probe (all-gathers waited on at once with compute right after) sets the time and the
  // lateness of a size waited on at once, unless a quarter or more of the run's own instances of it
  // were waited on at once: a run with prefetch (a few on-demand instances at the step's edges,
  // most issued ahead) takes the probe's; a run without prefetch keeps its own.
  void loadedProbeForSizesWaitedOnAtOnce() {
    const auto probe = probeSamples();
    const std::int64_t bytes = 720896;  // a small-model MLP weight gathered at 2 ranks
    const double wire = static_cast<double>(bytes) * ringFactor(CollKind::AllGather, 2);
    const auto sample = [&](double durationS, double lateness, WaitKind w) {
      return matchedAllGather(bytes, durationS, lateness, w);
    };
    // A ZeRO-3 run's instances of the size: `onDemand` waited on at once (each `durationS`, its
    // last starter `lateness` late), `ahead` issued ahead (0.7 ms, 0.2).
    const auto zero3Run = [&](int onDemand, double durationS, double lateness, int ahead) {
      std::vector<CollectiveSample> v;
      for (int i = 0; i < onDemand; ++i) v.push_back(sample(durationS, lateness, WaitKind::OnDemand));
      for (int i = 0; i < ahead; ++i) v.push_back(sample(0.7e-3, 0.2, WaitKind::Ahead));
      return v;
    };
    std::vector<CollectiveSample> loaded;
    for (int i = 0; i < 12; ++i) loaded.push_back(sample(i % 2 ? 1.4e-3 : 1.6e-3, 0.9, WaitKind::OnDemand));
    loaded.push_back(sample(1.5e-3, 0.9, WaitKind::OnDemand));
    loaded.back().matched = false;  // an unmatched instance has no lateness: left out
    loaded.back().durationS = 50e-3;

    // With prefetch: 8 waited on at once (0.95 ms, lateness 0.06), 40 issued ahead.
    const std::vector<CollectiveSample> withPrefetch = zero3Run(8, 0.95e-3, 0.06, 40);
    const LinkCalibration a = calibrateLink(probe, withPrefetch, "zero3", 0.0, loaded);
    QCOMPARE(a.loadedProbeSizes(), 1);
    const auto* od = a.link.inRunSize(false, wire, WaitKind::OnDemand);
    QVERIFY(od && od->fromLoadedProbe);
    QVERIFY2(std::abs(od->timeS - 1.5e-3) < 1e-9, qPrintable(QString::number(od->timeS)));
    QVERIFY2(std::abs(od->lastLateness - 0.9) < 1e-9, qPrintable(QString::number(od->lastLateness)));
    QVERIFY2(std::abs(a.link.instanceS(false, wire, WaitKind::OnDemand) - 1.5e-3) < 1e-9, "");
    // Issued ahead: the run's own.
    QVERIFY2(std::abs(a.link.instanceS(false, wire, WaitKind::Ahead) - 0.7e-3) < 1e-9, "");
    QVERIFY(a.note.find("loaded probe") != std::string::npos);
    // Without the probe the run's few on-demand instances stand.
    const LinkCalibration a0 = calibrateLink(probe, withPrefetch, "zero3", 0.0);
    QCOMPARE(a0.loadedProbeSizes(), 0);
    QVERIFY2(std::abs(a0.link.instanceS(false, wire, WaitKind::OnDemand) - 0.95e-3) < 1e-9, "");

    // Without prefetch: 20 waited on at once (1.3 ms, 0.8), 28 ahead (42 %): the run's own stand.
    const std::vector<CollectiveSample> noPrefetch = zero3Run(20, 1.3e-3, 0.8, 28);
    const LinkCalibration b = calibrateLink(probe, noPrefetch, "zero3p0", 0.0, loaded);
    QCOMPARE(b.loadedProbeSizes(), 0);
    const auto* own = b.link.inRunSize(false, wire, WaitKind::OnDemand);
    QVERIFY(own && !own->fromLoadedProbe);
    QCOMPARE(own->instances, 20);
    QVERIFY2(std::abs(own->timeS - 1.3e-3) < 1e-9, qPrintable(QString::number(own->timeS)));

    // A run that never used the size (DDP) takes the probe's for it; other sizes are untouched.
    std::vector<CollectiveSample> ddp;
    for (int i = 0; i < 6; ++i) {
      CollectiveSample s = sample(5e-3, 0.0, WaitKind::Ahead);
      s.kind = CollKind::AllReduce;
      s.messageBytes = std::int64_t{4} << 20;
      ddp.push_back(s);
    }
    const LinkCalibration d = calibrateLink(probe, ddp, "ddp", 0.0, loaded);
    QCOMPARE(d.loadedProbeSizes(), 1);
    QVERIFY2(std::abs(d.link.instanceS(false, wire, WaitKind::OnDemand) - 1.5e-3) < 1e-9, "");
    QVERIFY(d.link.inRunSize(false, wire, WaitKind::Ahead) == nullptr);
    // Fewer than six probe instances of a size: not enough to stand for it.
    const std::vector<CollectiveSample> few(loaded.begin(), loaded.begin() + 5);
    QCOMPARE(calibrateLink(probe, ddp, "ddp", 0.0, few).loadedProbeSizes(), 0);
    // In the JSON, with where each size came from.
    const std::string json = toJson(a).dump();
    QVERIFY(json.find("\"loaded_probe_sizes\":1") != std::string::npos);
    QVERIFY(json.find("\"source\":\"loaded_probe\"") != std::string::npos);
  }

  // A size whose instances were waited on at once and issued ahead, six or more of each, keeps a
  // time and a lateness per class (an on-demand ZeRO-3 all-gather took 1.5-3x one issued ahead);
  // the pooled figures stay for a class the run did not see, and a target of another group size
  // drops the classes with the sizes.
  void inRunSizesByWait() {
    const auto probe = probeSamples();
    const std::int64_t big = std::int64_t{4} << 20;
    const double w = static_cast<double>(big) * ringFactor(CollKind::AllGather, 2);
    const auto sample = [&](double slower, WaitKind waited, double lateness) {
      return matchedAllGather(big, slower * truthS(w), lateness, waited);
    };
    std::vector<CollectiveSample> steps;
    for (int i = 0; i < 6; ++i) {
      steps.push_back(sample(1.0, WaitKind::Ahead, 0.1));
      steps.push_back(sample(3.0, WaitKind::OnDemand, 0.5));
    }
    LinkCalibration c = calibrateLink(probe, steps, "run7", /*defaultCommInterference=*/0.5);
    const double t = truthS(w);
    QVERIFY2(std::abs(c.link.instanceS(false, w, WaitKind::OnDemand) / (3.0 * t) - 1) < 1e-9,
             qPrintable(QString::number(c.link.instanceS(false, w, WaitKind::OnDemand) / t)));
    QVERIFY(std::abs(c.link.instanceS(false, w, WaitKind::Ahead) / t - 1) < 1e-9);
    QVERIFY(std::abs(c.link.instanceS(false, w) / (2.0 * t) - 1) < 1e-9);  // the pooled mean
    QVERIFY(std::abs(c.lastLatenessByWait[1][1] - 0.5) < 1e-12);
    // Each size keeps its own lateness, per class and pooled.
    QVERIFY(std::abs(c.link.otherInRunByWait[1].at(0).lastLateness - 0.5) < 1e-12);
    QVERIFY(std::abs(c.link.otherInRunByWait[0].at(0).lastLateness - 0.1) < 1e-12);
    QVERIFY(std::abs(c.link.otherInRun.at(0).lastLateness - (6 * 0.1 + 6 * 0.5 * 3) / 24.0) < 1e-12);
    QVERIFY(std::abs(c.lastLatenessByWait[1][0] - 0.1) < 1e-12);
    QVERIFY(std::abs(c.lastLatenessOther - (6 * 0.1 + 6 * 0.5 * 3) / 24.0) < 1e-12);
    QCOMPARE(c.lastLatenessByWait[0][0], -1.0);  // no all-reduce
    QVERIFY2(c.note.find("(1 waited on at once, 1 issued ahead, apart)") != std::string::npos, c.note.c_str());
    const JsonValue j = toJson(c);
    QVERIFY(j.find("in_run_sizes_on_demand") && j.find("in_run_sizes_on_demand")->asInt() == std::int64_t{1});
    QVERIFY(j.find("last_lateness_on_demand_all_reduce") && j.find("last_lateness_on_demand_all_reduce")->isNull());
    // Five of a class do not stand for it: that class takes the pooled time.
    steps.pop_back();
    c = calibrateLink(probe, steps, "run7", 0.5);
    QVERIFY(c.link.otherInRunByWait[1].empty());
    QCOMPARE(c.link.otherInRunByWait[0].size(), std::size_t{1});
    QVERIFY(std::abs(c.link.instanceS(false, w, WaitKind::OnDemand) / ((6 + 5 * 3.0) / 11 * t) - 1) < 1e-9);
    // Carried to a simulation at the same group size only; the lateness classes always.
    Calibration cal;
    cal.profile = profileOn(16, 1, 2);
    cal.link = calibrateLink(probe, steps, "run7", 0.5);
    SimulateInput same = targetOf(cal.profile, Strategy::Zero3, 2), wider = targetOf(cal.profile, Strategy::Zero3, 4);
    applyCalibration(same, cal, false, true);
    applyCalibration(wider, cal, false, true);
    QCOMPARE(same.intraNode.otherInRunByWait[0].size(), std::size_t{1});
    QVERIFY(same.intraNode.inRunSize(false, w, WaitKind::Ahead, 2) != nullptr);
    QVERIFY(wider.intraNode.inRunSize(false, w, WaitKind::Ahead, 4) == nullptr);
    QVERIFY(std::abs(same.lastLatenessByWait[1][0] - 0.1) < 1e-12);
    QVERIFY(std::abs(wider.lastLatenessByWait[1][1] - 0.5) < 1e-12);
  }

  // Another model from a GPU run whose device idled through its blocks: the idle share of a block
  // (the host launching ops) is carried unchanged, its busy share by the GEMM rates and the
  // activations, as a CPU run's whole block is; the host work outside the blocks follows the
  // parameter tensors where the device idles, the elements where it is busy.
  void launchBoundBlocksFollowTheirOps() {
    MeasuredProfile mp = profileOn(16, 1, 2);
    mp.gemmGflops = {{64, 100.0}, {4096, 100.0}};
    mp.compute.stepOverheadS = 1e-3;
    const auto toMedium = [&](double busy) {
      mp.deviceBusyShare = busy;
      SimulateInput si = targetOf(mp, Strategy::Ddp, 2);
      si.model.model = *modelShapePreset("medium");
      applyMeasuredProfile(si, mp, false);
      return si;
    };
    const SimulateInput hostBound = toMedium(0.0), cpu = toMedium(-1.0), half = toMedium(0.5);
    const ModelShape small = mp.input.model, medium = *modelShapePreset("medium");
    QCOMPARE(hostBound.compute.forwardS.size(), static_cast<std::size_t>(medium.layers + 2));
    for (int l = 1; l <= medium.layers; ++l) {
      const auto i = static_cast<std::size_t>(l);
      QVERIFY(std::abs(hostBound.compute.forwardS[i] - 1e-3) < 1e-15);  // as measured per block
      QVERIFY(std::abs(hostBound.compute.backwardS[i] - 2e-3) < 1e-15);
      QVERIFY2(cpu.compute.forwardS[i] > 1.5e-3, qPrintable(QString::number(cpu.compute.forwardS[i])));  // wider: slower
      QVERIFY(std::abs(half.compute.forwardS[i] - (0.5 * cpu.compute.forwardS[i] + 0.5e-3)) < 1e-15);
    }
    const double tensors = static_cast<double>(parameterTensorCount(medium)) / static_cast<double>(parameterTensorCount(small));
    const double elements = static_cast<double>(parameterCount(medium)) / static_cast<double>(parameterCount(small));
    QVERIFY(elements > 2 * tensors);
    QVERIFY(std::abs(hostBound.compute.stepOverheadS - 1e-3 * tensors) < 1e-15);
    QVERIFY(std::abs(cpu.compute.stepOverheadS - 1e-3 * elements) < 1e-15);
    QVERIFY(hostBound.compute.source.find("busy 0% of the blocks' host time") != std::string::npos);
    QVERIFY(cpu.compute.source.find("host time") == std::string::npos);
    // The extrapolation mark says how the compute was carried.
    mp.deviceBusyShare = 0.1;
    SimulateInput medium10 = targetOf(mp, Strategy::Ddp, 2);
    medium10.model.model = medium;
    const PredictionCheck gpuCheck = checkPrediction(mp, medium10, nullptr);
    QVERIFY(!gpuCheck.extrapolation.empty());
    QVERIFY2(gpuCheck.extrapolation[0].find("for the 10% of the blocks the GPU was busy, by op count for the rest") !=
                 std::string::npos,
             gpuCheck.extrapolation[0].c_str());
    mp.deviceBusyShare = -1;
    QVERIFY(checkPrediction(mp, medium10, nullptr).extrapolation[0].find("op count") == std::string::npos);
  }

  // The device class comes from the ranks' devices, not the backend: a CUDA run that shares its GPU
  // through Gloo is a GPU run.
  void deviceClassFromRanks() {
    Rank cpu, gpu;
    cpu.device = "cpu";
    gpu.device = "cuda:0";
    QVERIFY(!ranOnCuda({cpu, cpu}));
    QVERIFY(ranOnCuda({gpu, gpu}));
    QVERIFY(!ranOnCuda({}));
  }

  // Without a probe: the run's fit, marked poorly conditioned when it has one kind only.
  void runFitConditioning() {
    std::vector<CollectiveSample> steps;
    for (std::int64_t bytes : {std::int64_t{1} << 20, std::int64_t{15} << 20}) {
      CollectiveSample s;
      s.kind = CollKind::AllReduce;
      s.groupSize = 2;
      s.messageBytes = bytes;
      s.durationS = truthS(static_cast<double>(bytes));
      steps.push_back(s);
    }
    const LinkCalibration c = calibrateLink({}, steps, "run4");
    QCOMPARE(c.source, std::string("run-fit"));
    QVERIFY(!c.wellConditioned);
    QVERIFY(c.note.find("poorly conditioned") != std::string::npos);
    QVERIFY_THROWS_EXCEPTION(Error, calibrateLink({}, {}, "run5"));
  }

  // A compute probe point below both neighbours by more than kGemmProbeDipShare is interpolated
  // between them (log-log); a level-off, a fall at the end and a small dip stay as measured.
  void smoothsGemmProbeDips() {
    std::vector<std::pair<double, double>> c{{64, 26.0}, {128, 31.0}, {256, 31.4}, {512, 32.1}, {1024, 24.9}, {2048, 30.1}};
    const auto replaced = smoothGemmDips(c);
    QCOMPARE(replaced.size(), std::size_t{1});
    QCOMPARE(replaced[0].first, 1024.0);
    QCOMPARE(replaced[0].second, 24.9);
    // Halfway in log d between 512 and 2048: the geometric mean of their rates.
    QVERIFY2(std::abs(c[4].second - std::sqrt(32.1 * 30.1)) < 1e-9, qPrintable(QString::number(c[4].second)));
    QCOMPARE(c[5].second, 30.1);
    QCOMPARE(c[0].second, 26.0);
    std::vector<std::pair<double, double>> fine{{64, 26.8}, {128, 31.0}, {256, 29.5}, {512, 31.9}, {1024, 32.3}, {2048, 20.0}};
    QVERIFY(smoothGemmDips(fine).empty());  // 29.5 is 4.8 % below 31.0: within the probe's noise
    QCOMPARE(fine[2].second, 29.5);
    QCOMPARE(fine[5].second, 20.0);
    std::vector<std::pair<double, double>> two{{64, 10}, {128, 5}};
    QVERIFY(smoothGemmDips(two).empty());
  }

  // Spans slowed by (1 + 0.6 f) around three bases: k comes back; without spread, the default.
  void fitsInterference() {
    std::vector<InterferenceSample> v;
    const double bases[] = {1e-3, 2e-3, 5e-4};
    for (int g = 0; g < 3; ++g)
      for (int i = 0; i < 30; ++i) {
        const double f = (i % 10) / 9.0;
        v.push_back({g, f, bases[g] * (1 + 0.6 * f)});
      }
    const InterferenceFit fit = fitInterference(v, 0.2);
    QVERIFY(fit.identified);
    QVERIFY2(std::abs(fit.k - 0.6) < 0.01, qPrintable(QString::number(fit.k)));
    QVERIFY(std::abs(baseDuration(v[5], fit.k) - bases[0]) < 1e-5);
    for (auto& s : v) s.overlap = 0.3;
    const InterferenceFit flat = fitInterference(v, 0.2);
    QVERIFY(!flat.identified);
    QCOMPARE(flat.k, 0.2);
    QVERIFY(flat.note.find("default") != std::string::npos);
    // Overlap that spreads but does not slow the spans (each group's time the same whatever its
    // overlap, with a little noise): the fit's optimum sits at k = 0 and explains nothing, so the
    // default stands.
    for (std::size_t i = 0; i < v.size(); ++i) {
      v[i].overlap = static_cast<double>(i % 10) / 9.0;
      v[i].durS = bases[v[i].group] * (1 + 0.01 * ((i * 7) % 3 == 0 ? 1 : -1));
    }
    const InterferenceFit unexplained = fitInterference(v, 0.2);
    QVERIFY(!unexplained.identified);
    QCOMPARE(unexplained.k, 0.2);
    QVERIFY2(unexplained.note.find("lowered their residual by only") != std::string::npos, unexplained.note.c_str());
    // Overlap of a span with merged intervals.
    const auto merged = mergeIntervals({{0, 1}, {0.5, 2}, {3, 4}});
    QCOMPARE(merged.size(), std::size_t{2});
    QVERIFY(std::abs(overlapFraction(1.5, 3.5, merged) - 0.5) < 1e-12);
    QCOMPARE(overlapFraction(2, 3, merged), 0.0);
  }

  // More ranks per core than the calibration had: refused, with the reason, unless allowed; then
  // the compute is scaled by the load and marked.
  void refusesAnotherHostLoad() {
    const MeasuredProfile mp = profileOn(2, 1, 2);
    SimulateInput t = targetOf(mp, Strategy::Ddp, 4);
    PredictionCheck c = checkPrediction(mp, t, nullptr);
    QCOMPARE(c.change, std::string("scale"));
    QCOMPARE(c.refused.size(), std::size_t{1});
    QVERIFY2(c.refused[0].find("share cores") != std::string::npos, c.refused[0].c_str());
    QCOMPARE(c.loadFactor, 2.0);
    QVERIFY(!c.extrapolation.empty());  // another world size
    Calibration cal;
    cal.profile = mp;
    cal.link.link = LinkModel{"l", 1.0, 0, 100, "l"};
    cal.link.source = "preset";
    cal.link.wellConditioned = true;
    SimulateInput a = t;
    QVERIFY_THROWS_EXCEPTION(Error, applyCalibration(a, cal, false, false));
    SimulateInput b = t;
    const PredictionCheck allowed = applyCalibration(b, cal, false, true);
    QVERIFY(std::abs(b.compute.forwardS[1] - 2e-3) < 1e-12);  // 1 ms x load 2
    bool marked = false;
    for (const auto& e : allowed.extrapolation) {
      if (e.find("host load") == std::string::npos) continue;
      marked = true;
      // Says what the sharing is, not how to get past the refusal the user already passed.
      QVERIFY2(e.find("2.00 per core") != std::string::npos && e.find("--allow-extrapolation") == std::string::npos, e.c_str());
    }
    QVERIFY(marked);
    QVERIFY(c.sharing.find("4 rank(s) on the host") != std::string::npos);
    // A machine with a core per rank at 4 ranks: no refusal, still an extrapolation of scale.
    const MeasuredProfile big = profileOn(16, 1, 2);
    const PredictionCheck ok = checkPrediction(big, targetOf(big, Strategy::Zero3, 4), nullptr);
    QVERIFY(ok.refused.empty());
    QCOMPARE(ok.change, std::string("scale"));
  }

  // A Gloo link measured at 2 ranks, carried to 4: its latency by the ring's steps (3 against 1),
  // its bandwidth by the wire bytes; the run's own sizes only in groups of the size they were
  // measured in; an NCCL link's latency as measured.
  void ringLatencyFollowsTheGroupSize() {
    LinkModel l{"run1", 1.0, 0, 300, "fit"};
    l.measuredGroupSize = 2;
    l.ringLatency = true;
    l.otherInRun.push_back({2e6, 5e-3, 0.1, false, 8});
    const auto near = [](double a, double b) { return std::abs(a - b) < 1e-9; };
    QVERIFY(near(l.instanceS(false, 1e6), 1.3e-3));  // as measured: 300 us + 1 MB at 1 GB/s
    QVERIFY(near(l.instanceS(false, 1e6, WaitKind::Unknown, 2), 1.3e-3));
    QVERIFY(near(l.instanceS(false, 1e6, WaitKind::Unknown, 4), 1.9e-3));  // 3 steps of 300 us
    QVERIFY(near(l.instanceS(false, 1e6, WaitKind::Unknown, 8), 3.1e-3));  // 7 steps
    QVERIFY(near(l.instanceS(false, 2e6, WaitKind::Unknown, 2), 5e-3));    // the run's own size
    QVERIFY(near(l.instanceS(false, 2e6, WaitKind::Unknown, 4), 2.9e-3));  // not at 4 ranks
    QVERIFY(l.inRunSize(false, 2e6, WaitKind::Unknown, 2) != nullptr);
    QVERIFY(l.inRunSize(false, 2e6, WaitKind::Unknown, 4) == nullptr);
    // Measured at 4, carried down to 2: two steps fewer.
    LinkModel four = l;
    four.measuredGroupSize = 4;
    four.otherInRun.clear();
    QVERIFY(near(four.instanceS(false, 1e6, WaitKind::Unknown, 2), 1.3e-3 - 200e-6));
    // NCCL: latency as measured at any size.
    LinkModel nccl = l;
    nccl.ringLatency = false;
    QVERIFY(near(nccl.instanceS(false, 1e6, WaitKind::Unknown, 4), 1.3e-3));
    // Through a prediction: the calibration's link is carried and the note says how.
    const MeasuredProfile big = profileOn(16, 1, 2);
    Calibration cal;
    cal.profile = big;
    cal.link.link = l;
    cal.link.groupSize = 2;
    cal.link.source = "probe";
    cal.link.wellConditioned = true;
    SimulateInput t = targetOf(big, Strategy::Zero3, 4);
    const PredictionCheck c = applyCalibration(t, cal, false, false);
    QVERIFY(c.refused.empty());
    QVERIFY(near(t.intraNode.instanceS(false, 1e6, WaitKind::Unknown, 4), 1.9e-3));
    bool said = false;
    for (const auto& e : c.extrapolation) said = said || e.find("ring's steps") != std::string::npos;
    QVERIFY(said);
  }

  // What changes is named; the interval covers the step spread and the class's validation error.
  void namesTheChangeAndGivesAnInterval() {
    const MeasuredProfile mp = profileOn(2, 1, 2);
    QCOMPARE(checkPrediction(mp, targetOf(mp, Strategy::Ddp, 2), nullptr).change, std::string("replay"));
    QCOMPARE(checkPrediction(mp, targetOf(mp, Strategy::Zero3, 2), nullptr).change, std::string("strategy"));
    SimulateInput knob = targetOf(mp, Strategy::Ddp, 2);
    knob.model.bucketCapMb = 5;
    QCOMPARE(checkPrediction(mp, knob, nullptr).change, std::string("knob"));
    SimulateInput model = targetOf(mp, Strategy::Ddp, 2);
    model.model.model = *modelShapePreset("medium");
    const PredictionCheck mc = checkPrediction(mp, model, nullptr);
    QCOMPARE(mc.change, std::string("model"));
    QVERIFY(!mc.extrapolation.empty() && mc.extrapolation[0].find("medium") != std::string::npos);

    Calibration cal;
    cal.profile = mp;
    cal.link.link = LinkModel{"l", 1.0, 0, 100, "l"};
    cal.link.relError = 0.1;
    SimulateInput si = targetOf(mp, Strategy::Zero3, 2);
    const PredictionCheck c = applyCalibration(si, cal, false, false);
    SimulationResult r = simulate(si);
    annotatePrediction(r, cal, c);
    QVERIFY(r.prediction.has_value());
    const auto& p = *r.prediction;
    QCOMPARE(p.calibrationRun, std::int64_t{7});
    QCOMPARE(p.change, std::string("strategy"));
    QVERIFY(p.lowS < r.steady.stepS && p.highS > r.steady.stepS);
    const double share = r.steady.exposedCommS / r.steady.stepS;
    const double rel = std::sqrt(0.03 * 0.03 + std::pow(0.1 * share, 2) + std::pow(validationRmsError("strategy"), 2));
    QVERIFY2(std::abs(p.relSe - rel) < 1e-12, qPrintable(QString("%1 vs %2").arg(p.relSe).arg(rel)));
    QVERIFY(std::abs(p.highS - r.steady.stepS * (1 + 2 * rel)) < 1e-12);
    const JsonValue j = toJson(r);
    QVERIFY(j.find("prediction") != nullptr);
    // From a GPU run the class term is the GPU validation's, and the basis says where it was measured.
    Calibration gpu = cal;
    gpu.profile.gloo = false;
    const PredictionInterval g = predictionInterval(gpu.profile, r, &gpu.link, c);
    QVERIFY(validationRmsError("strategy", false) > 3 * validationRmsError("strategy"));
    QVERIFY(g.relSe > 3 * p.relSe / 2);
    QVERIFY2(g.basis.find("on one GPU shared by Gloo ranks") != std::string::npos, g.basis.c_str());
    QVERIFY(p.intervalBasis.find("GPU") == std::string::npos);
  }
  // Host work outside the blocks follows the strategy on CPU (cpuHostOverheadWeight); GPU runs keep
  // the calibration's. The optimizer's whole-model part stays whatever the shard.
  void hostOverheadAndOptimizerFollowTheStrategy() {
    MeasuredProfile mp = profileOn(2, 1, 2);
    mp.compute.stepOverheadS = 2e-3;
    mp.compute.optimizerSPerModelElement = 0.5e-9;
    Calibration cal;
    cal.profile = mp;
    cal.link.link = LinkModel{"l", 1.0, 0, 100, "l"};
    SimulateInput fsdp = targetOf(mp, Strategy::FsdpFull, 2);
    applyCalibration(fsdp, cal, false, false);
    QVERIFY(std::abs(fsdp.compute.stepOverheadS - 2e-3 * cpuHostOverheadWeight(Strategy::FsdpFull)) < 1e-15);
    QVERIFY(cpuHostOverheadWeight(Strategy::FsdpFull) > cpuHostOverheadWeight(Strategy::Zero3));
    QVERIFY(cpuHostOverheadWeight(Strategy::Zero3) > cpuHostOverheadWeight(Strategy::Ddp));
    SimulateInput same = targetOf(mp, Strategy::Ddp, 2);
    applyCalibration(same, cal, false, false);
    QCOMPARE(same.compute.stepOverheadS, 2e-3);
    cal.profile.gloo = false;  // a GPU run: nothing measured per strategy there
    SimulateInput gpu = targetOf(mp, Strategy::FsdpFull, 2);
    applyCalibration(gpu, cal, false, false);
    QCOMPARE(gpu.compute.stepOverheadS, 2e-3);

    // The optimizer step of a simulated ZeRO-1 rank (half the elements) keeps the whole-model part.
    cal.profile.gloo = true;
    SimulateInput z1 = targetOf(mp, Strategy::Zero1, 2);
    applyCalibration(z1, cal, false, false);
    z1.interference = 0;
    const SimulationResult r = simulate(z1);
    const std::int64_t P = parameterCount(mp.input.model);
    double opt = -1;
    for (const auto& sp : r.ranks.front().spans)
      if (sp.kind == SimSpan::Kind::Compute && r.names[static_cast<std::size_t>(sp.name)] == "optimizer step" && sp.step == 1)
        opt = sp.endS - sp.startS;
    const double want = 0.5e-9 * static_cast<double>(P) + 1e-9 * static_cast<double>((P + 1) / 2);
    QVERIFY2(std::abs(opt / want - 1) < 0.01, qPrintable(QString("%1 vs %2").arg(opt).arg(want)));
  }
  // Steps slowed by something outside the run are left out of a profile; a run's own spread is not.
  void findsDisturbedSteps() {
    const auto steps = [](std::vector<double> xs) {
      std::vector<std::pair<std::int64_t, double>> v;
      for (std::size_t i = 0; i < xs.size(); ++i) v.push_back({static_cast<std::int64_t>(i) + 2, xs[i]});
      return v;
    };
    // A medium-model run of the validation: three disturbed steps of seven.
    const DisturbedSteps medium = disturbedSteps(steps({1.058, 1.077, 1.009, 1.057, 1.548, 1.399, 1.363}));
    QCOMPARE(medium.steps, (std::vector<std::int64_t>{6, 7, 8}));
    QCOMPARE(medium.median, 1.077);  // what the note names them against
    // One slow step of a noisy ZeRO-3 run (CV 16 %): only the outlier.
    QCOMPARE(disturbedSteps(steps({0.3174, 0.2294, 0.2331, 0.2070, 0.2560, 0.2159, 0.2148})).steps,
             (std::vector<std::int64_t>{2}));
    // Within 15 % of the median: kept, however regular the rest.
    QVERIFY(disturbedSteps(steps({1.0, 1.0, 1.0, 1.0, 1.0, 1.14})).steps.empty());
    // A run whose steps spread widely on both sides: its slow steps are its own.
    QVERIFY(disturbedSteps(steps({1.0, 1.3, 0.7, 1.25, 0.75, 1.2, 0.8})).steps.empty());
    // Too few steps to tell.
    QVERIFY(disturbedSteps(steps({1.0, 1.0, 2.0})).steps.empty());
  }
};

QTEST_GUILESS_MAIN(TestPrediction)
#include "tst_prediction.moc"
