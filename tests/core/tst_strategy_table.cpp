// The strategy table (core/analysis/strategy_table.h): two runtime-like runs whose metrics are written
// by hand with the runtime's keys and one imported-like run with none: exact values, and n/a with a
// reason where a figure cannot be known.
#include <QTemporaryDir>
#include <QtTest>

#include "core/analysis/comparison.h"
#include "core/analysis/strategy_table.h"
#include "core/estimator/memory_estimator.h"
#include "core/model/model_presets.h"
#include "tests/common/test_support.h"
#include "tests/common/fine_tuning_runs.h"

using namespace shardscope::core;
using shardscope::test::pathIn;

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

using shardscope::test::fineTuningConfig;

struct Fixture {
  QTemporaryDir dir;
  TraceStore store{pathIn(dir, "t.db")};
  RunId lora, full, imported;

  Fixture() {
    const auto runs = shardscope::test::writeFineTuningRuns(store);
    lora = runs.lora;
    full = runs.full;
    imported = runs.imported;
  }
};

double value(const StrategyRow& r, StrategyColumn c) {
  const auto& cell = r.at(c);
  if (!cell.value) throw std::runtime_error("n/a: " + std::string(strategyColumn(c).key) + ": " + cell.why);
  return *cell.value;
}

}  // namespace

class TestStrategyTable : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  // The preset's parameter count (what full fine-tuning trains) is the estimator's Ψ, for every
  // preset and a cut depth.
  void presetParameterCountIsTheEstimators() {
    const ModelPreset* tiny = findModelPreset("tiny");
    QVERIFY(tiny);
    // 256·64 embedding + 2 blocks of (2·64 norms + 64·64 q + 2·32·64 k, v + 64·64 o + 3·176·64 MLP)
    // + 64 final norm + 256·64 head.
    QCOMPARE(presetParameterCount(*tiny), std::int64_t{125248});
    for (const auto& p : modelPresets())
      for (int layers : {0, 1}) {
        const auto shape = estimator::modelShapePreset(p.name, layers);
        QVERIFY(shape);
        QCOMPARE(presetParameterCount(p, layers), estimator::parameterCount(*shape));
      }
  }

  void valuesAndNotKnown() {
    Fixture fx;
    const Comparison c = compareRuns(fx.store, {fx.lora, fx.full, fx.imported}, 0);
    const StrategyTable& t = c.strategies;
    QCOMPARE(t.rows.size(), std::size_t{3});
    using C = StrategyColumn;

    // The LoRA fp16 run: every parameter figure as stored.
    const StrategyRow& a = t.rows[0];
    QCOMPARE(a.run, fx.lora);
    QCOMPARE(a.at(C::Strategy).text, std::string("fsdp"));
    QCOMPARE(a.at(C::Precision).text, std::string("fp16"));
    QCOMPARE(a.at(C::Tuning).text, std::string("LoRA r=8"));
    QCOMPARE(value(a, C::Ranks), 2.0);
    // Rank 1's host peak (96 MiB + 1 MiB): no GPU memory, so host, and said so.
    QCOMPARE(value(a, C::PeakMemoryGib), 97.0 * 1024 * 1024 / kGiB);
    QCOMPARE(a.at(C::PeakMemoryOf).text, std::string("host"));
    QCOMPARE(value(a, C::InitSeconds), 0.5);
    // micro_batch 4 × seq_len 128 × grad_accum 1 × world_size 2 = 1024 tokens per 10 ms step.
    QCOMPARE(value(a, C::TokensPerSecond), 102400.0);
    QCOMPARE(value(a, C::TokensPerSecondPerGpu), 51200.0);
    QCOMPARE(value(a, C::CommPct), 30.0);  // 3 ms of communication in a 10 ms step
    QCOMPARE(value(a, C::CommPct), *c.figures[0].commPct);
    QCOMPARE(value(a, C::ExposedCommPct), *c.figures[0].exposedCommPct);
    QVERIFY(value(a, C::ExposedCommPct) > 0 && value(a, C::ExposedCommPct) < 30.0);
    QVERIFY(!a.at(C::CheckpointSaveSeconds).known());
    QVERIFY2(a.at(C::CheckpointSaveSeconds).why.find("save_checkpoint off") != std::string::npos,
             a.at(C::CheckpointSaveSeconds).why.c_str());
    QCOMPARE(value(a, C::TrainableParams), 1234567.0);
    QCOMPARE(value(a, C::FrozenParams), 7654321.0);
    QCOMPARE(value(a, C::SkippedSteps), 3.0);

    // The full fine-tuning bf16 run without the metrics: the tiny preset's parameters train, nothing
    // is frozen, bf16 never skips.
    const StrategyRow& b = t.rows[1];
    QCOMPARE(b.at(C::Strategy).text, std::string("zero3"));
    QCOMPARE(b.at(C::Precision).text, std::string("bf16"));
    QCOMPARE(b.at(C::Tuning).text, std::string("full"));
    QCOMPARE(value(b, C::PeakMemoryGib), 201.0 * 1024 * 1024 / kGiB);
    QCOMPARE(value(b, C::InitSeconds), 2.5);
    QCOMPARE(value(b, C::CommPct), 40.0);
    QCOMPARE(value(b, C::CheckpointSaveSeconds), 1.25);
    QCOMPARE(value(b, C::TrainableParams), 125248.0);
    QCOMPARE(value(b, C::FrozenParams), 0.0);
    QCOMPARE(value(b, C::SkippedSteps), 0.0);
    QVERIFY(b.at(C::SkippedSteps).why.find("bf16") != std::string::npos);

    // The imported trace: its steps give the shares (every step counts); nothing else is known,
    // each n/a with its reason.
    const StrategyRow& i = t.rows[2];
    // 3 ms of communication in an 8 ms step: an imported trace's step is measured from its events.
    QCOMPARE(value(i, C::CommPct), 37.5);
    QCOMPARE(value(i, C::CommPct), *c.figures[2].commPct);
    QCOMPARE(value(i, C::Ranks), 2.0);
    for (C col : {C::Strategy, C::Precision, C::Tuning, C::PeakMemoryGib, C::PeakMemoryOf, C::InitSeconds, C::TokensPerSecond,
                  C::TokensPerSecondPerGpu, C::CheckpointSaveSeconds, C::TrainableParams, C::FrozenParams, C::SkippedSteps}) {
      QVERIFY2(!i.at(col).known(), strategyColumn(col).key.data());
      QVERIFY2(!i.at(col).why.empty(), strategyColumn(col).key.data());
      QCOMPARE(strategyCellText(col, i.at(col)), std::string("n/a"));
    }
    QVERIFY(i.at(C::InitSeconds).why.find("imported trace") != std::string::npos);

    // Every column is shown (the optional ones have values in some run).
    QCOMPARE(t.columns.size(), strategyColumns().size());
    // The text every surface shows.
    QCOMPARE(strategyCellText(C::TokensPerSecond, a.at(C::TokensPerSecond)), std::string("102,400"));
    QCOMPARE(strategyCellText(C::TrainableParams, b.at(C::TrainableParams)), std::string("125,248"));
    QCOMPARE(strategyCellText(C::CommPct, b.at(C::CommPct)), std::string("40.0"));
    QCOMPARE(strategyCellText(C::InitSeconds, b.at(C::InitSeconds)), std::string("2.50"));
    // The notes name the run, the columns and the reason.
    bool noted = false;
    for (const auto& n : strategyTableNotes(t))
      noted = noted || (n.rfind("imported #" + std::to_string(fx.imported.value()), 0) == 0 &&
                        n.find("init s") != std::string::npos && n.find("imported trace") != std::string::npos);
    QVERIFY(noted);
  }

  // JSON: one object per run, null for n/a with the reason under not_known.
  void json() {
    Fixture fx;
    const Comparison c = compareRuns(fx.store, {fx.lora, fx.full, fx.imported}, 0);
    const JsonValue j = toJson(c.strategies);
    QVERIFY(j.isArray());
    QCOMPARE(j.items().size(), std::size_t{3});
    const JsonValue& b = j.items()[1];
    QCOMPARE(b.find("run_id")->asDouble(), static_cast<double>(fx.full.value()));
    QCOMPARE(b.find("strategy")->asString(), std::string("zero3"));
    QCOMPARE(b.find("trainable_params")->asDouble(), 125248.0);
    QCOMPARE(b.find("checkpoint_save_s")->asDouble(), 1.25);
    const JsonValue& i = j.items()[2];
    QVERIFY(i.find("init_time_s")->isNull());
    QVERIFY(i.find("not_known")->find("init_time_s")->isString());
    QVERIFY(i.find("comm_pct")->isNumber());
    QVERIFY(!i.find("not_known")->find("comm_pct"));
  }

  // Only imported traces: the parameter and skipped-step columns are left out (no run has them);
  // the seeds' columns stay, n/a.
  void optionalColumnsOnlyWhenKnown() {
    Fixture fx;
    const Comparison c = compareRuns(fx.store, {fx.imported}, 0);
    for (StrategyColumn col : c.strategies.columns) QVERIFY(!strategyColumn(col).optional);
    QCOMPARE(c.strategies.columns.size(), strategyColumns().size() - 3);
  }

  // Issue 46: "peak GiB/GPU" and "tokens/s/GPU" on CPU runs. The per-device headers say "rank"
  // when no run of the table has GPU memory, "GPU" as soon as one has.
  void perDeviceHeadersSayRankOnCpu() {
    RunFigures cpu;
    cpu.peakAllocatedBytes = 1 << 30;
    cpu.peakDevice = "host";
    RunFigures gpu = cpu;
    gpu.peakDevice = "GPU";
    const StrategyTable hostOnly = strategyTable({"a", "b"}, {cpu, cpu});
    QCOMPARE(strategyColumnHeader(hostOnly, StrategyColumn::PeakMemoryGib), std::string("peak GiB/rank"));
    QCOMPARE(strategyColumnHeader(hostOnly, StrategyColumn::TokensPerSecondPerGpu), std::string("tokens/s/rank"));
    QCOMPARE(strategyColumnHeader(hostOnly, StrategyColumn::TokensPerSecond), std::string("tokens/s"));
    const StrategyTable mixed = strategyTable({"a", "b"}, {cpu, gpu});
    QCOMPARE(strategyColumnHeader(mixed, StrategyColumn::PeakMemoryGib), std::string("peak GiB/GPU"));
    QCOMPARE(strategyColumnHeader(mixed, StrategyColumn::TokensPerSecondPerGpu), std::string("tokens/s/GPU"));
  }

  // A LoRA run that stored no parameter metrics: n/a, not the full model's count.
  void loraWithoutMetricsIsNotKnown() {
    QTemporaryDir dir;
    TraceStore store(pathIn(dir, "t.db"));
    shardscope::test::RunSpec s;
    s.configJson = fineTuningConfig(Strategy::Ddp, Precision::Fp16, 4, false);
    const RunId id = shardscope::test::writeRun(store, s);
    const RunFigures f = computeRunFigures(store, id);
    QVERIFY(!f.trainableParams.known());
    QVERIFY(!f.frozenParams.known());
    QVERIFY(!f.skippedSteps.known());  // fp16 can skip: unknown without the metric
    QVERIFY(f.trainableParams.why.find("LoRA") != std::string::npos);
    QCOMPARE(*f.loraRank, 4);
  }
};

QTEST_GUILESS_MAIN(TestStrategyTable)
#include "tst_strategy_table.moc"
