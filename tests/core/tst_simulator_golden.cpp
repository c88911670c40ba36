// The simulator's results pinned bit for bit. These are golden values, generated from the
// simulator as it stood before it was split into check / build / run / collect (issue #26): the goal
// of that refit, and of any later one, is "no behaviour change", and only a fixed reference can
// say that nothing moved. They are not a statement that the figures are right (tst_simulator
// checks the figures against hand-worked schedules and the estimator); a deliberate change of the
// simulator's rules regenerates them: SHARDSCOPE_PRINT_GOLDEN=1 prints the new values.
//
// Each case pins the headline figures as text (what a reader can check at a glance) and an FNV-1a
// digest of the whole SimulationResult written out with every double as its exact bit pattern:
// every span (lane, group lane, start, end, name, kind, step, op, bytes, group size, issue time),
// every memory sample, the steps, names, process groups, lanes, the filled-in input's compute
// profile, figures and notes; only wallS (the time the simulation took) is left out. The
// arithmetic is IEEE double with no fused multiply-add (x86-64's SSE2, the project's CI target);
// a build that contracts a·b+c into an FMA may land elsewhere in the last bits.
#include <QtTest>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/estimator/comm_model.h"
#include "core/estimator/memory_estimator.h"
#include "core/estimator/simulator.h"

using namespace shardscope::core;
using namespace shardscope::core::estimator;

namespace {

// -- the input cases ------------------------------------------------------------------------------

EstimateInput model(const char* preset, int gpus, int gpusPerNode) {
  EstimateInput in;
  in.model = *modelShapePreset(preset);
  in.gpus = gpus;
  in.gpusPerNode = gpusPerNode;
  in.precision = Precision::Fp32;
  in.microBatch = 2;
  in.seqLen = 64;
  return in;
}

ComputeProfile ramp(int layers) {
  ComputeProfile p;
  p.source = "golden";
  for (int b = 0; b < layers + 2; ++b) {
    p.forwardS.push_back(1e-3 * (1 + 0.25 * b));
    p.backwardS.push_back(2e-3 * (1 + 0.125 * b));
  }
  p.optimizerSPerElement = 3e-9;
  p.stepOverheadS = 2e-4;
  return p;
}

SimulateInput sim(const EstimateInput& em, Strategy s) {
  SimulateInput si;
  si.model = em;
  si.strategy = s;
  si.compute = ramp(em.model.layers);
  si.intraNode = LinkModel{"golden-intra", 2.0, 0, 30, "test"};
  si.interNode = LinkModel{"golden-inter", 0.5, 0, 80, "test"};
  si.steps = 3;
  return si;
}

void addCases() {
  QTest::addColumn<SimulateInput>("input");
  QTest::addColumn<QString>("figures");
  QTest::addColumn<QString>("digest");
  auto add = [](const char* tag, const SimulateInput& si, const char* figures, const char* digest) {
    QTest::newRow(tag) << si << QString::fromLatin1(figures) << QString::fromLatin1(digest);
  };
  {
    auto si = sim(model("tiny", 2, 2), Strategy::Ddp);
    add("ddp-2", si,
        "step=0.015856240000000008 compute=0.015575744000000002 comm=0.00028049599999999987 exposed=0.00028049599999999987 "
        "slowest=0:0.015856240000000008 peak=4318720 tok=8072.5316973002391 msg=500992 wire=500992 colls=1 events=198 ranks=2 "
        "spans=96 samples=68",
        "d2e15c7837052a51");
  }
  {
    auto em = model("small", 8, 8);
    em.bucketCapMb = 0.25;
    auto si = sim(em, Strategy::Ddp);
    si.jitter = 0.05;
    si.seed = 7;
    add("ddp-8-buckets-jitter", si,
        "step=0.041887486044394559 compute=0.037599067358026768 comm=0.016177055100825743 exposed=0.004288418686367792 "
        "slowest=7:0.042638204325863099 peak=79899136 tok=3055.8052556398079 msg=15803392 wire=27655936 colls=35 events=2664 "
        "ranks=8 spans=1495 samples=416",
        "cdf410ee0a2275db");
  }
  {
    auto em = model("small", 8, 4);
    em.bucketCapMb = 0.5;
    em.gradientAsBucketView = true;
    em.activationCheckpointing = true;
    add("ddp-8-bucket-view-ckpt-2-nodes", sim(em, Strategy::Ddp),
        "step=0.081294415999999883 compute=0.041842543999999988 comm=0.057151871999999881 "
        "exposed=0.039451871999999888 slowest=0:0.081294415999999897 peak=67511296 tok=1574.523888578032 "
        "msg=15803392 wire=27655936 colls=23 events=2112 ranks=8 spans=1392 samples=440",
        "c05f9799c57ad97d");
  }
  {
    auto em = model("tiny", 2, 2);
    em.reduceBucketSize = 20000;
    em.allgatherBucketSize = 15000;
    add("zero1-2", sim(em, Strategy::Zero1),
        "step=0.016123616000000004 compute=0.015387872000000002 comm=0.00073574399999999651 exposed=0.00073574399999999651 "
        "slowest=0:0.016123616000000004 peak=3817728 tok=7938.6658675076342 msg=1001984 wire=751488 colls=12 events=360 ranks=2 "
        "spans=228 samples=98",
        "61fbce4a033b9150");
  }
  {
    auto em = model("small", 8, 8);
    em.reduceBucketSize = 60000;
    em.allgatherBucketSize = 40000;
    em.overlapComm = true;
    em.activationCheckpointing = true;
    auto si = sim(em, Strategy::Zero2);
    si.jitter = 0.03;
    si.seed = 11;
    add("zero2-8-overlap-ckpt-jitter", si,
        "step=0.051616775176431456 compute=0.031441571955053205 comm=0.023283950116730463 "
        "exposed=0.020175203221378269 slowest=3:0.051622851503544509 peak=26507392 "
        "tok=2479.8139667285068 msg=31606784 wire=41483904 colls=52 events=4128 ranks=8 spans=2808 "
        "samples=1064",
        "4c3fab1f4d13400b");
  }
  {
    auto em = model("tiny", 2, 2);
    em.reduceBucketSize = 9000;
    em.overlapComm = false;
    add("zero2-2-no-overlap", sim(em, Strategy::Zero2),
        "step=0.016183616000000005 compute=0.015387872000000002 comm=0.00079574400000000101 exposed=0.00079574400000000101 "
        "slowest=0:0.016183616000000005 peak=3603232 tok=7909.233634806953 msg=1001984 wire=751488 colls=14 events=336 ranks=2 "
        "spans=252 samples=50",
        "ce5e40b1384ef91a");
  }
  {
    auto em = model("small", 8, 8);
    em.paramPersistenceThreshold = 1000;
    em.prefetchBucketSize = 200000;
    em.reduceBucketSize = 100000;
    em.activationCheckpointing = true;
    auto si = sim(em, Strategy::Zero3);
    si.jitter = 0.04;
    si.seed = 3;
    si.slowRanks = {{5, 1.3}};
    si.keepRanks = 4;
    add("zero3-8-prefetch-ckpt-jitter-slow", si,
        "step=0.043678977512383407 compute=0.0326968186150014 comm=0.032974070340190037 "
        "exposed=0.010982158897382008 slowest=5:0.043696831900671404 peak=28718336 "
        "tok=2930.4715286366486 msg=31606784 wire=27655936 colls=62 events=9264 ranks=5 spans=3513 "
        "samples=1745",
        "900f50d6f3884643");
  }
  {
    auto em = model("tiny", 2, 2);
    em.paramPersistenceThreshold = 500;
    em.prefetchBucketSize = 0;
    em.maxLiveParameters = 20000;
    em.maxReuseDistance = 0;
    em.overlapComm = false;
    auto si = sim(em, Strategy::Zero3);
    si.comm.emulatedReduceScatter = true;
    add("zero3-2-no-prefetch-no-overlap-gloo", si,
        "step=0.016982159999999996 compute=0.015387872000000002 comm=0.0015942879999999906 exposed=0.0015942879999999906 "
        "slowest=0:0.016982159999999996 peak=3884544 tok=7537.3215185818544 msg=1436160 wire=968576 colls=37 events=1244 ranks=2 "
        "spans=736 samples=474",
        "c2f944fe842add13");
  }
  {
    auto em = model("tiny", 2, 2);
    add("zero3-2-all-persistent", sim(em, Strategy::Zero3),
        "step=0.016298367999999994 compute=0.015387872000000002 comm=0.00091049599999998981 exposed=0.00091049599999998981 "
        "slowest=0:0.016298367999999994 peak=4819712 tok=7853.5470545271801 msg=1001984 wire=500992 colls=22 events=876 ranks=2 "
        "spans=552 samples=290",
        "f97fc060b0e8e51b");
  }
  {
    auto em = model("small", 8, 4);
    em.paramPersistenceThreshold = 1000;
    em.prefetchBucketSize = 100000;
    add("zeropp-hpz-8-2-nodes", sim(em, Strategy::ZeroPPHpz),
        "step=0.079192782976056308 compute=0.027181568000000031 comm=0.058511872000000097 exposed=0.052011214976056333 "
        "slowest=0:0.079192782976056281 peak=75948288 tok=1616.3089007580452 msg=31606784 wire=27655936 colls=40 events=7152 "
        "ranks=8 spans=4384 samples=2600",
        "51ff428b7d65b5a2");
  }
  {
    auto si = sim(model("small", 8, 8), Strategy::FsdpFull);
    si.forwardPrefetch = true;
    si.backwardPrefetch = BackwardPrefetch::Pre;
    si.jitter = 0.02;
    si.phaseJitter[0] = 0.05;
    si.phaseJitter[2] = 0.01;
    si.seed = 5;
    add("fsdp-8-pre-forward-prefetch-phase-jitter", si,
        "step=0.029896596212988329 compute=0.027165416516671061 comm=0.021719489861397975 exposed=0.0027311796963172641 "
        "slowest=3:0.029915165642397528 peak=29587456 tok=4281.423847989473 msg=45312000 wire=39648000 colls=17 events=2328 "
        "ranks=8 spans=986 samples=944",
        "63f25cc1219455b6");
  }
  {
    auto si = sim(model("tiny", 2, 2), Strategy::FsdpFull);
    si.backwardPrefetch = BackwardPrefetch::Post;
    si.limitAllGathers = false;
    add("fsdp-2-post-unlimited", si,
        "step=0.015878304000000003 compute=0.015387872000000002 comm=0.00068929599999999897 exposed=0.00049043199999999725 "
        "slowest=0:0.015878304000000003 peak=3382528 tok=8061.3143569993354 msg=1437184 wire=718592 colls=11 events=402 ranks=2 "
        "spans=198 samples=152",
        "0d061bdf10ebc61d");
  }
  {
    auto em = model("small", 8, 8);
    em.activationCheckpointing = true;
    auto si = sim(em, Strategy::FsdpGradOp);
    si.backwardPrefetch = BackwardPrefetch::None;
    add("fsdp-grad-op-8-no-prefetch-ckpt", si,
        "step=0.039513056000000019 compute=0.031471567999999998 comm=0.014187967999999981 "
        "exposed=0.0080414879999999994 slowest=0:0.039513056000000026 peak=28960128 "
        "tok=3239.4355931366063 msg=31606784 wire=27655936 colls=12 events=2040 ranks=8 spans=888 "
        "samples=896",
        "58c0ad597df02529");
  }
  {
    auto em = model("small", 8, 4);
    auto si = sim(em, Strategy::Hsdp);
    si.jitter = 0.03;
    si.seed = 9;
    si.slowRanks = {{2, 1.1}, {6, 1.2}};
    si.keepRanks = 0;
    add("hsdp-8-2-nodes-jitter-slow", si,
        "step=0.042941183577939815 compute=0.029720576006437783 comm=0.027183426722151675 exposed=0.013220607571502032 "
        "slowest=7:0.04302026446514539 peak=37489152 tok=2980.8214244415349 msg=49262848 wire=37934848 colls=23 events=2616 "
        "ranks=8 spans=1265 samples=944",
        "4946c8efd9cb33e7");
  }
  {
    auto em = model("tiny", 8, 8);
    em.shardGroupSize = 2;
    add("hsdp-8-shard-2", sim(em, Strategy::Hsdp),
        "step=0.015734080000000008 compute=0.015387871999999999 comm=0.00089611200000000099 exposed=0.00034620799999999889 "
        "slowest=0:0.015734080000000004 peak=3567360 tok=8135.2071427118672 msg=1687680 wire=1094336 colls=15 events=1800 "
        "ranks=8 spans=840 samples=608",
        "d86fc4c252d6b8bd");
  }
  {
    // FLOPs compute (an empty profile is filled in), bf16, one step.
    auto em = model("small", 2, 2);
    em.precision = Precision::Bf16;
    auto si = sim(em, Strategy::Zero3);
    si.compute = ComputeProfile{};
    si.steps = 1;
    add("zero3-2-flops-one-step", si,
        "step=0.0072092267696132126 compute=5.7322769613207972e-05 comm=0.0071519040000000049 exposed=0.0071519040000000049 "
        "slowest=0:0.0072092267696132126 peak=59439104 tok=17755.024788444465 msg=22127616 wire=11063808 colls=54 events=626 "
        "ranks=2 spans=382 samples=234",
        "447b75b0a6ecb70b");
  }
}

// -- writing a result out, every double by its bits ------------------------------------------------

struct Writer {
  std::string s;
  void bits(double v) {
    std::uint64_t u = 0;
    std::memcpy(&u, &v, sizeof u);
    char buf[24];
    std::snprintf(buf, sizeof buf, "%016" PRIx64 ",", u);
    s += buf;
  }
  void i(std::int64_t v) { s += std::to_string(v) + ","; }
  void str(const std::string& v) { s += "\"" + v + "\","; }
};

std::string fullDump(const SimulationResult& r) {
  Writer w;
  w.str(r.input.compute.source);
  for (double v : r.input.compute.forwardS) w.bits(v);
  for (double v : r.input.compute.backwardS) w.bits(v);
  w.bits(r.input.compute.optimizerSPerElement);
  w.bits(r.input.compute.stepOverheadS);
  w.str(r.input.interNode.name);
  w.s += "names:";
  for (const auto& n : r.names) w.str(n);
  w.s += "groups:";
  for (const auto& g : r.groups) {
    w.str(g.name);
    w.i(g.size);
    for (int x : g.ranks) w.i(x);
  }
  w.s += "lanes:";
  for (const auto& k : r.laneGroupKind) w.str(k);
  for (const auto& tr : r.ranks) {
    w.s += "\nrank:";
    w.i(tr.rank);
    for (const auto& sp : tr.spans) {
      w.i(static_cast<int>(sp.lane));
      w.i(sp.commLane);
      w.bits(sp.startS);
      w.bits(sp.endS);
      w.i(sp.name);
      w.i(static_cast<int>(sp.kind));
      w.i(sp.step);
      w.i(static_cast<int>(sp.op));
      w.i(sp.bytes);
      w.i(sp.groupSize);
      w.i(sp.emulated);
      w.bits(sp.issueS);
      w.s += ";";
    }
    w.s += "mem:";
    for (const auto& m : tr.memory) {
      w.bits(m.tS);
      w.i(m.delta);
      w.i(m.total);
    }
    w.s += "steps:";
    for (const auto& [a, b] : tr.steps) {
      w.bits(a);
      w.bits(b);
    }
  }
  w.s += "\nfigures:";
  w.bits(r.steady.stepS);
  w.bits(r.steady.computeS);
  w.bits(r.steady.commS);
  w.bits(r.steady.exposedCommS);
  w.bits(r.slowestRankStepS);
  w.i(r.slowestRank);
  w.i(r.peakBytes);
  for (auto b : r.peakByCategory) w.i(b);
  w.bits(r.tokensPerSPerDevice);
  w.i(r.messageBytesPerStep);
  w.bits(r.wireBytesPerStep);
  w.i(r.collectivesPerStep);
  w.i(r.eventsSimulated);
  for (const auto& n : r.notes) w.str(n);
  return w.s;
}

std::string fnv1a(const std::string& s) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, h);
  return buf;
}

// The headline figures, readable (%.17g: enough digits to tell any two doubles apart).
std::string figures(const SimulationResult& r) {
  std::size_t spans = 0, samples = 0;
  for (const auto& tr : r.ranks) {
    spans += tr.spans.size();
    samples += tr.memory.size();
  }
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "step=%.17g compute=%.17g comm=%.17g exposed=%.17g slowest=%d:%.17g peak=%" PRId64 " tok=%.17g msg=%" PRId64
                " wire=%.17g colls=%" PRId64 " events=%" PRId64 " ranks=%zu spans=%zu samples=%zu",
                r.steady.stepS, r.steady.computeS, r.steady.commS, r.steady.exposedCommS, r.slowestRank, r.slowestRankStepS,
                r.peakBytes, r.tokensPerSPerDevice, r.messageBytesPerStep, r.wireBytesPerStep, r.collectivesPerStep,
                r.eventsSimulated, r.ranks.size(), spans, samples);
  return buf;
}

}  // namespace

Q_DECLARE_METATYPE(SimulateInput)

class TestSimulatorGolden : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void resultIsUnchanged_data() { addCases(); }
  void resultIsUnchanged() {
    QFETCH(SimulateInput, input);
    QFETCH(QString, figures);
    QFETCH(QString, digest);
    const SimulationResult r = simulate(input);
    const std::string gotFigures = ::figures(r), gotDigest = fnv1a(fullDump(r));
    if (std::getenv("SHARDSCOPE_PRINT_GOLDEN"))
      std::printf("GOLDEN %s\n  \"%s\",\n  \"%s\"\n", QTest::currentDataTag(), gotFigures.c_str(), gotDigest.c_str());
    QCOMPARE(QString::fromStdString(gotFigures), figures);
    QCOMPARE(QString::fromStdString(gotDigest), digest);
  }

  // The same input twice gives the same result (the digest above would be meaningless otherwise).
  void resultIsDeterministic() {
    auto em = model("small", 8, 8);
    auto si = sim(em, Strategy::Zero3);
    si.jitter = 0.05;
    QCOMPARE(fullDump(simulate(si)), fullDump(simulate(si)));
  }
};

QTEST_APPLESS_MAIN(TestSimulatorGolden)
#include "tst_simulator_golden.moc"
