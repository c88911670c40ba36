// The estimator's device presets, scenarios and advice (docs/ESTIMATOR.md, "Scenarios and device
// presets", "What would fit", "Estimate and simulation"): `--gpu` and the Estimator page set the same
// figures through applyDevicePreset; a scenario is read by the CLI's own option mapping (an unknown
// key is refused); every strategy that does not fit gets the cheapest single change that makes it
// fit, re-estimated and never a knob already set; two strategies ordered otherwise by the
// simulation than by the estimate are named with the part of the step that moved.
#include <QtTest>

#include <set>
#include <string>
#include <vector>

#include "core/estimator/estimator_options.h"
#include "core/estimator/fit_advice.h"
#include "core/estimator/ranking_check.h"
#include "core/estimator/recommend.h"
#include "core/estimator/scenarios.h"
#include "core/estimator/simulator.h"

using namespace shardscope::core;
using namespace shardscope::core::estimator;

namespace {

constexpr std::int64_t kGiB = 1024LL * 1024 * 1024;

ParsedArgs argsOf(std::vector<std::pair<std::string, std::string>> options) {
  ParsedArgs a;
  for (const auto& [k, v] : options) {
    a.options.emplace_back(k, v);
    if (v == "true") a.flags.push_back(k);
  }
  return a;
}

const StrategyAssessment* find(const std::vector<StrategyAssessment>& v, Strategy s) {
  for (const auto& a : v)
    if (a.strategy == s) return &a;
  return nullptr;
}

// Llama-2-7B full fine-tuning, bf16 + fp32 Adam, 8 x A10 (24 GiB), 1 x 2048 tokens.
RecommendInput llama7bOnA10s() {
  return [] {
    RecommendInput ri;
    applyEstimatorOptions(argsOf({{"model", "llama2-7b"}, {"gpus", "8"}, {"gpu", "a10"}}), ri);
    return ri;
  }();
}

}  // namespace

class TestEstimatorAdvice : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  // --gpu NAME and the page set the same figures: applyDevicePreset, the dense peak of the precision.
  void devicePresetSetsWhatTheCliSets() {
    const auto a10 = devicePreset("a10");
    QVERIFY(a10);
    RecommendInput bf16;
    applyDevicePreset(*a10, bf16);
    QCOMPARE(bf16.device, std::string("a10"));
    QCOMPARE(bf16.deviceBytes, 24 * kGiB);
    QCOMPARE(bf16.deviceTflops, 125.0);
    QCOMPARE(bf16.memBwGBps, 600.0);
    QCOMPARE(bf16.intraNode.name, std::string("pcie4"));
    RecommendInput fp32;
    fp32.model.precision = Precision::Fp32;
    applyDevicePreset(*a10, fp32);
    QCOMPARE(fp32.deviceTflops, 31.2);
    // A100 40GB (NVIDIA's A100 datasheet): the 80GB's compute, half its memory, HBM2's bandwidth.
    RecommendInput a100;
    applyDevicePreset(*devicePreset("a100-40gb"), a100);
    QCOMPARE(a100.deviceBytes, 40 * kGiB);
    QCOMPARE(a100.deviceTflops, 312.0);
    QCOMPARE(a100.memBwGBps, 1555.0);
    QCOMPARE(a100.intraNode.name, std::string("nvlink-a100"));
    // The CLI's options path gives the same input, and an override makes it custom.
    RecommendInput cli;
    applyEstimatorOptions(argsOf({{"model", "llama3-8b"}, {"gpus", "4"}, {"gpu", "a10"}}), cli);
    QCOMPARE(cli.device, std::string("a10"));
    QCOMPARE(cli.deviceTflops, 125.0);
    QCOMPARE(cli.memBwGBps, 600.0);
    QCOMPARE(cli.intraNode.name, std::string("pcie4"));
    RecommendInput over;
    applyEstimatorOptions(argsOf({{"model", "llama3-8b"}, {"gpus", "4"}, {"gpu", "a10"}, {"gpu-memory", "48GiB"}}), over);
    QVERIFY(over.device.empty());
    QCOMPARE(over.deviceBytes, 48 * kGiB);
    QCOMPARE(firstInputDifference(over, cli), std::string("device: custom vs a10"));
    // Without --gpu: the defaults are an H100 SXM's, exactly.
    RecommendInput plain, h100;
    applyEstimatorOptions(argsOf({{"model", "llama3-8b"}, {"gpus", "4"}}), plain);
    h100 = plain;
    applyDevicePreset(*devicePreset("h100-sxm"), h100);
    h100.device.clear();
    QCOMPARE(firstInputDifference(plain, h100), std::string());
    QCOMPARE(exactByteSize(24 * kGiB), std::string("24GiB"));
    QCOMPARE(exactByteSize(141LL * 1000 * 1000 * 1000), std::string("141GB"));
    QCOMPARE(parseByteSize(exactByteSize(123457)).value_or(0), std::int64_t{123457});
  }

  // A scenario is the CLI's options through the CLI's own mapping; the seeds' Qwen3 LoRA on 4 x A10.
  void scenariosReadThroughTheOptions() {
    const Scenario* sc = findScenario("qwen3-lora-4xa10");
    QVERIFY(sc);
    const RecommendInput ri = scenarioInput(*sc);
    QCOMPARE(ri.device, std::string("a10"));
    QCOMPARE(ri.deviceBytes, 24 * kGiB);
    QCOMPARE(ri.deviceTflops, 125.0);
    QCOMPARE(ri.model.loraRank, 8);
    QVERIFY(ri.model.activationCheckpointing);
    // withScenario + applyEstimatorOptions (what `estimate --scenario` runs) gives the same input.
    RecommendInput cli;
    applyEstimatorOptions(withScenario(argsOf({{"scenario", "qwen3-lora-4xa10"}})), cli);
    QCOMPARE(firstInputDifference(ri, cli), std::string());
    // The step the issue quotes for `--gpu a10`: 2,066 ms with DDP (not an H100's 262 ms).
    const auto ranked = recommend(ri);
    const auto* ddp = find(ranked, Strategy::Ddp);
    QVERIFY(ddp);
    QVERIFY2(std::abs(ddp->stepS - 2.0662) < 0.001, std::to_string(ddp->stepS).c_str());
    // Every scenario reads; an option that is not an estimator option is refused by name.
    for (const auto& s : scenarios()) (void)scenarioInput(s);
    Scenario bad{"bad", "", {{"model", "qwen3-8b"}, {"gpus", "4"}, {"gpu-typo", "a10"}}};
    bool threw = false;
    try {
      (void)scenarioInput(bad);
    } catch (const std::invalid_argument& e) {
      threw = std::string(e.what()).find("gpu-typo") != std::string::npos;
    }
    QVERIFY(threw);
  }

  // Llama-2-7B full fine-tuning on 8 x 24 GiB: nothing fits. FSDP and ZeRO-3 fit with activation
  // checkpointing alone; DDP replicates 16 bytes a parameter, so only a 141 GB H200 holds it (LoRA
  // leaves it 1.2 GiB short, checkpointing and more GPUs do not shrink what it replicates).
  void cheapestChangeOnEightA10s() {
    const RecommendInput ri = llama7bOnA10s();
    const auto ranked = recommend(ri);
    for (const auto& a : ranked) QVERIFY2(!a.fit.fits, strategyName(a.strategy).c_str());
    const auto* ddp = find(ranked, Strategy::Ddp);
    QVERIFY(ddp && ddp->toFit);
    QCOMPARE(ddp->toFit->knob, std::string("gpu"));
    QCOMPARE(ddp->toFit->value, std::string("h200"));
    QVERIFY(ddp->toFit->tier == FitTier::Device);
    {
      // Its re-estimate really fits, with the figures reported.
      RecommendInput x = ri;
      applyDevicePreset(*devicePreset("h200"), x);
      const auto a = assess(x, Strategy::Ddp);
      QVERIFY(a.fit.fits);
      QCOMPARE(a.memory.peakBytes, ddp->toFit->peakBytes);
      QCOMPARE(a.stepS, ddp->toFit->stepS);
      QCOMPARE(a.fit.usableBytes, ddp->toFit->usableBytes);
      // The cheaper tiers were tried and do not fit: LoRA, and no count of A10s.
      bool sawLora = false, sawGpus = false;
      for (const auto& c : fitCandidates(ri, Strategy::Ddp)) {
        if (c.change.knob == "lora") {
          sawLora = true;
          QVERIFY(!c.fits);
          QVERIFY(c.change.changesMethod);
        }
        if (c.change.knob == "gpus") {
          sawGpus = true;
          QVERIFY(!c.fits);
        }
        QVERIFY(c.change.knob != "offload_optimizer" && c.change.knob != "offload_param");  // DDP has neither
      }
      QVERIFY(sawLora && sawGpus);
    }
    const auto* fsdp = find(ranked, Strategy::FsdpFull);
    QVERIFY(fsdp && fsdp->toFit);
    QCOMPARE(fsdp->toFit->knob, std::string("activation_checkpointing"));
    {
      RecommendInput x = ri;
      x.model.activationCheckpointing = true;
      const auto a = assess(x, Strategy::FsdpFull);
      QVERIFY(a.fit.fits);
      QCOMPARE(a.memory.peakBytes, fsdp->toFit->peakBytes);
      QCOMPARE(a.stepS, fsdp->toFit->stepS);
      // Cheapest: no other setup change that fits is faster.
      for (const auto& c : fitCandidates(ri, Strategy::FsdpFull))
        if (c.fits && c.change.tier == FitTier::Setup) QVERIFY(c.change.stepS >= a.stepS);
    }
    const std::string summary = nothingFitsSummary(ranked, ri.deviceBytes);
    QVERIFY2(summary.rfind("Nothing fits in 24.00 GiB: fsdp fits with activation checkpointing (peak ", 0) == 0, summary.c_str());
    // The JSON carries it; a strategy that fits has null.
    const JsonValue j = toJson(*fsdp);
    QVERIFY(j.find("to_fit") && j.find("to_fit")->find("knob"));
    QCOMPARE(j.find("to_fit")->find("knob")->asString(), std::string("activation_checkpointing"));
    RecommendInput big = ri;
    applyDevicePreset(*devicePreset("h200"), big);
    for (const auto& a : recommend(big))
      if (a.fit.fits) {
        const JsonValue f = toJson(a);
        QVERIFY(f.find("to_fit") && f.find("to_fit")->isNull());
      }
  }

  // A knob already set is never suggested; QLoRA only from LoRA, LoRA only from full fine-tuning.
  void neverSuggestsWhatIsSet() {
    RecommendInput ri = llama7bOnA10s();
    ri.model.activationCheckpointing = true;
    ri.model.offloadOptimizer = true;
    ri.model.offloadParam = true;
    ri.model.loraRank = 8;
    ri.model.qlora = true;
    for (Strategy s : allStrategies())
      for (const auto& c : fitCandidates(ri, s)) {
        QVERIFY2(c.change.knob != "activation_checkpointing" && c.change.knob != "offload_optimizer" &&
                     c.change.knob != "offload_param" && c.change.knob != "qlora" && c.change.knob != "lora" &&
                     c.change.knob != "micro_batch",
                 c.change.knob.c_str());
      }
    // Full fine-tuning is offered LoRA, never QLoRA; LoRA is offered QLoRA, never LoRA.
    const RecommendInput full = llama7bOnA10s();
    std::set<std::string> knobs;
    for (const auto& c : fitCandidates(full, Strategy::Zero2)) knobs.insert(c.change.knob);
    QVERIFY(knobs.count("lora") && !knobs.count("qlora"));
    RecommendInput lora = full;
    lora.model.loraRank = 8;
    knobs.clear();
    for (const auto& c : fitCandidates(lora, Strategy::Zero2)) knobs.insert(c.change.knob);
    QVERIFY(knobs.count("qlora") && !knobs.count("lora"));
    // A device is offered only larger than the one given; none beyond the largest.
    RecommendInput h200 = full;
    applyDevicePreset(*devicePreset("h200"), h200);
    h200.model.microBatch = 64;
    for (const auto& c : fitCandidates(h200, Strategy::Ddp)) QVERIFY(c.change.knob != "gpu");
  }

  // A smaller micro-batch keeps the global batch: its step is the accumulation steps together, at
  // the largest halving that fits; more GPUs: the smallest count of whole nodes that fits.
  void microBatchAndGpuCounts() {
    RecommendInput ri = llama7bOnA10s();
    ri.model.activationCheckpointing = true;
    ri.model.microBatch = 8;
    const Strategy s = Strategy::Zero3;
    QVERIFY(!assess(ri, s).fit.fits);
    const FitCandidate* mb = nullptr;
    const FitCandidate* gpus = nullptr;
    const auto all = fitCandidates(ri, s);
    for (const auto& c : all) {
      if (c.change.knob == "micro_batch") mb = &c;
      if (c.change.knob == "gpus") gpus = &c;
    }
    QVERIFY(mb && mb->fits);
    const std::int64_t m = std::stoll(mb->change.value);
    RecommendInput x = ri;
    x.model.microBatch = m;
    const auto at = assess(x, s);
    QVERIFY(at.fit.fits);
    QCOMPARE(mb->change.stepS, at.stepS * static_cast<double>(8 / m));
    x.model.microBatch = m * 2;  // the halving before it does not fit
    QVERIFY(!assess(x, s).fit.fits);
    QVERIFY(gpus);
    if (gpus->fits) {
      const int n = std::stoi(gpus->change.value);
      QCOMPARE(n % 8, 0);
      RecommendInput y = ri;
      y.model.gpus = n;
      QVERIFY(assess(y, s).fit.fits);
      y.model.gpus = n - 8;  // a node fewer does not
      QVERIFY(!assess(y, s).fit.fits);
    }
  }

  // Two strategies ordered otherwise: the part of the step that moved the gap most.
  void rankingReversalsNameThePart() {
    std::vector<StrategySteps> steps = {
        {Strategy::FsdpFull, {1.10, 1.00, 0.10, 0}, {1.25, 1.00, 0.25, 0}},
        {Strategy::Zero3, {1.12, 1.00, 0.12, 0}, {1.21, 1.00, 0.21, 0}},
        {Strategy::Ddp, {2.00, 1.00, 1.00, 0}, {2.10, 1.00, 1.10, 0}},
    };
    const auto r = rankingReversals(steps);
    QCOMPARE(r.size(), std::size_t{1});
    QVERIFY(r[0].simFirst == Strategy::Zero3);
    QVERIFY(r[0].estFirst == Strategy::FsdpFull);
    QVERIFY(r[0].part == StepPart::ExposedComm);
    QVERIFY(std::abs(r[0].shiftS - 0.06) < 1e-12);
    QVERIFY2(r[0].text.rfind("Simulation ranks zero3 ahead of fsdp (1.21 s vs 1.25 s) where the estimate ranks fsdp first "
                             "(1.10 s vs 1.12 s): exposed communication moved most",
                             0) == 0,
             r[0].text.c_str());
    // Compute that moved: the simulation's optimizer step, say.
    steps[1].simulated = {1.21, 0.95, 0.26, 0};
    steps[0].simulated = {1.25, 1.10, 0.15, 0};
    const auto c = rankingReversals(steps);
    QCOMPARE(c.size(), std::size_t{1});
    QVERIFY(c[0].part == StepPart::Compute);
    // Same order, or a tie within 0.1 %: nothing to say.
    steps[1].simulated.stepS = 1.2505;
    QVERIFY(rankingReversals(steps).empty());
    // The seeds' full fine-tuning on 8 x A100: the simulation puts ZeRO-3 ahead of FSDP, and the
    // exposed communication (FSDP's all-gathers waiting in the simulation) is what moved.
    RecommendInput ri;
    applyEstimatorOptions(scenarioArgs(*findScenario("llama-7b-full-8xa100")), ri);
    std::vector<StrategySteps> real;
    for (Strategy s : {Strategy::FsdpFull, Strategy::Zero3}) {
      SimulateInput si;
      si.model = ri.model;
      si.strategy = s;
      si.compute = flopsComputeProfile(ri.model, ri.deviceTflops, ri.efficiency, ri.memBwGBps);
      si.intraNode = ri.intraNode;
      si.interNode = ri.interNode;
      si.steps = 2;
      real.push_back({s, estimatedParts(assess(ri, s)), simulatedParts(simulate(si).steady)});
    }
    const auto rr = rankingReversals(real);
    QCOMPARE(rr.size(), std::size_t{1});
    QVERIFY(rr[0].simFirst == Strategy::Zero3);
    QVERIFY(rr[0].part == StepPart::ExposedComm);
    QVERIFY(rr[0].estFirstSim.exposedCommS > rr[0].estFirstEst.exposedCommS + 0.02);
  }
};

QTEST_APPLESS_MAIN(TestEstimatorAdvice)
#include "tst_estimator_advice.moc"
