// `validate` (issue 47): published rows read strictly, mapped to the estimator's own options or
// refused with what they lack, predicted through the estimate's code path, compared measure with
// measure.
#include <QtTest>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

#include "core/estimator/calibration.h"
#include "core/estimator/estimator_options.h"
#include "core/estimator/recommend.h"
#include "core/estimator/scenarios.h"
#include "core/estimator/validation.h"
#include "core/util/error.h"
#include "tests/common/test_support.h"

using namespace shardscope::core;
using namespace shardscope::core::estimator;

namespace {

// A torchtitan-like row (Llama 3.1 8B on 8 H100, FSDP2), its figures made up: the test is about the
// mapping, not the source.
const char* kRow =
    R"({"id": "R1", "source_id": "test", "model": {"name": "Llama 3.1 8B", "hidden": 4096, "layers": 32, "heads": 32,
 "kv_heads": 8, "head_dim": 128, "ffn": 14336, "vocab": 128256, "tied_embeddings": false, "qkv_bias": false,
 "qk_norm": false, "moe": null}, "parameters": 8030000000, "gpu": {"name": "h100-sxm", "memory_gib": 80}, "gpus": 8,
 "nodes": 1, "gpus_per_node": 8, "interconnect": {"intra": "nvlink", "inter": null, "nics_per_node": null},
 "strategy": "fsdp2", "parallel": {"tp": 1, "pp": 1, "cp": 1, "ep": 1}, "shard_group": 8, "replicate_group": 1,
 "precision": "bf16_mixed", "reduce_dtype": "fp32", "activation_checkpointing": "full", "compile": false,
 "fused_optimizer": null, "optimizer": "adamw", "finetune": "full", "lora": null, "quantization": null,
 "offload": {"optimizer": null, "params": null}, "micro_batch": 2, "grad_accum": 1, "global_batch": 16,
 "seq_len": 8192, "packed": null, "measured": {"peak_memory_gib": 40.0, "peak_memory_measure": "allocated",
 "tokens_per_s_per_gpu": 5000, "step_time_s": null, "mfu": null, "tokens_per_s_derived": false, "notes": null},
 "comparison_set": null, "pure_dp": true, "source": {}})";

std::string with(std::string row, const std::string& from, const std::string& to) {
  const auto at = row.find(from);
  if (at == std::string::npos) throw std::logic_error("fixture: " + from);
  return row.replace(at, from.size(), to);
}

std::string rows(const std::string& a, const std::string& b = {}) { return "[" + a + (b.empty() ? "" : "," + b) + "]"; }

bool has(const std::vector<std::string>& list, const std::string& what) {
  for (const auto& s : list)
    if (s.find(what) != std::string::npos) return true;
  return false;
}

}  // namespace

class TestValidation : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  // The prediction is the estimate's own: the row's options through the estimator's option mapping
  // (as `estimate --scenario`), the strategy assessed; the error is against the same measure.
  void predictsThroughTheEstimatesCodePath() {
    const auto parsed = parsePublishedRows(rows(kRow), "t.json");
    QCOMPARE(parsed.size(), std::size_t(1));
    const RowPrediction p = predictRow(parsed[0]);
    QVERIFY2(p.expressible(), p.missing.empty() ? "" : p.missing[0].c_str());
    QVERIFY(p.memoryMissing.empty());
    QVERIFY(p.speedMissing.empty());
    QVERIFY(has(p.assumptions, "fsdp2 as fsdp"));
    const RecommendInput ri = scenarioInput(Scenario{"R1", "", p.options});
    QCOMPARE(ri.model.gpus, 8);
    QCOMPARE(ri.model.microBatch, std::int64_t(2));
    QCOMPARE(ri.model.seqLen, std::int64_t(8192));
    QVERIFY(ri.model.activationCheckpointing);
    QCOMPARE(ri.deviceBytes, std::int64_t(80) << 30);
    const StrategyAssessment a = assess(ri, Strategy::FsdpFull);
    QCOMPARE(*p.predictedPeakGib, static_cast<double>(a.memory.peakBytes) / (1024.0 * 1024.0 * 1024.0));
    QCOMPARE(*p.fits, a.fit.fits);
    QCOMPARE(*p.predictedTokensPerSPerGpu, a.tokensPerSPerDevice);
    QCOMPARE(*p.memoryErrorPct, (*p.predictedPeakGib - 40.0) / 40.0 * 100.0);
    QCOMPARE(*p.speedErrorPct, (*p.predictedTokensPerSPerGpu - 5000.0) / 5000.0 * 100.0);
    // Uncalibrated, an interval: the estimate at the published efficiency band.
    QCOMPARE(*p.tokensIntervalLow, *tokensPerSPerGpuAt(p, calib::kEfficiencyLow));
    QCOMPARE(*p.tokensIntervalHigh, *tokensPerSPerGpuAt(p, calib::kEfficiencyHigh));
    QVERIFY(*p.tokensIntervalLow < *p.predictedTokensPerSPerGpu && *p.predictedTokensPerSPerGpu < *p.tokensIntervalHigh);
    QCOMPARE(p.intervalCovers(), 5000.0 >= *p.tokensIntervalLow && 5000.0 <= *p.tokensIntervalHigh);
    const JsonValue j = toJson(p);
    QCOMPARE(j.find("expressible")->asBool(), true);
    QCOMPARE(j.find("predicted")->find("measure")->asString(), std::string("allocated"));
  }

  // Never approximated in silence: what the estimator lacks is named, and then nothing is predicted;
  // another memory measure is not compared as an error; an unknown device keeps the speed out.
  void refusesWhatItCannotExpress() {
    const std::string tp = with(with(kRow, "\"tp\": 1", "\"tp\": 8"), "\"id\": \"R1\"", "\"id\": \"TP\"");
    const std::string moe = with(
        with(kRow, "\"moe\": null", R"("moe": {"experts": 8, "experts_per_token": 2, "expert_ffn": 14336, "shared_experts": 0})"),
        "\"id\": \"R1\"", "\"id\": \"MOE\"");
    for (const auto& [text, what] : std::vector<std::pair<std::string, std::string>>{
             {tp, "tensor parallel"},
             {moe, "mixture of experts"},
             {with(kRow, "\"activation_checkpointing\": \"full\"", "\"activation_checkpointing\": \"selective\""),
              "selective activation checkpointing"},
             {with(kRow, "\"precision\": \"bf16_mixed\"", "\"precision\": \"fp8_mixed\""), "float8"},
             {with(kRow, "\"compile\": false", "\"compile\": true"), "torch.compile"}}) {
      const RowPrediction p = predictRow(parsePublishedRows(rows(text), "t.json").at(0));
      QVERIFY(!p.expressible());
      QVERIFY2(has(p.missing, what), what.c_str());
      QVERIFY(!p.predictedPeakGib && !p.fits && !p.predictedTokensPerSPerGpu && !p.memoryErrorPct);
    }
    const RowPrediction reserved =
        predictRow(parsePublishedRows(rows(with(kRow, "\"allocated\"", "\"reserved\"")), "t.json").at(0));
    QVERIFY(reserved.expressible());
    QVERIFY(has(reserved.memoryMissing, "reserved memory"));
    QVERIFY(!reserved.memoryErrorPct);
    QVERIFY(reserved.memoryOtherMeasurePct.has_value());
    QVERIFY(reserved.speedErrorPct.has_value());
    const RowPrediction v100 = predictRow(parsePublishedRows(rows(with(kRow, "\"h100-sxm\"", "\"v100\"")), "t.json").at(0));
    QVERIFY(v100.expressible());
    QVERIFY(has(v100.speedMissing, "GPU type v100"));
    QVERIFY(v100.memoryErrorPct.has_value());
    QVERIFY(!v100.predictedTokensPerSPerGpu);
    const auto concepts = missingConcepts({reserved, v100});
    QCOMPARE(concepts.size(), std::size_t(2));
  }

  // A comparison set is ordered as the measurements order it, or the estimate ties (cannot tell).
  void comparisonSetsCompareOrders() {
    const std::string a =
        with(with(kRow, "\"comparison_set\": null", "\"comparison_set\": \"s\""), "\"id\": \"R1\"", "\"id\": \"A\"");
    // B: 16 GPUs (less memory per GPU once sharded), published with less memory and more tokens/s.
    const std::string b = with(with(with(with(a, "\"id\": \"A\"", "\"id\": \"B\""), "\"gpus\": 8", "\"gpus\": 16"),
                                    "\"peak_memory_gib\": 40.0", "\"peak_memory_gib\": 30.0"),
                               "\"tokens_per_s_per_gpu\": 5000", "\"tokens_per_s_per_gpu\": 4000");
    std::vector<RowPrediction> preds;
    for (const auto& r : parsePublishedRows(rows(a, b), "t.json")) preds.push_back(predictRow(r));
    const auto checks = comparisonSetChecks(preds);
    QCOMPARE(checks.size(), std::size_t(2));
    const auto& mem = checks[0].figure == "peak_memory_gib" ? checks[0] : checks[1];
    QCOMPARE(mem.publishedOrder, (std::vector<std::string>{"B", "A"}));
    QVERIFY(*preds[1].predictedPeakGib < *preds[0].predictedPeakGib);  // sharded over 16: less per GPU
    QVERIFY(mem.sameOrder());
    // The same configuration twice: the estimate ties, which is not the published order.
    const std::string b2 =
        with(with(a, "\"id\": \"A\"", "\"id\": \"C\""), "\"peak_memory_gib\": 40.0", "\"peak_memory_gib\": 30.0");
    std::vector<RowPrediction> same;
    for (const auto& r : parsePublishedRows(rows(a, b2), "t.json")) same.push_back(predictRow(r));
    for (const auto& c : comparisonSetChecks(same)) {
      QVERIFY(c.predictedTie);
      QVERIFY(!c.sameOrder());
    }
  }

  // --calibrate leave-one-out: a row is calibrated on the nearest other row of its source and GPU:
  // the efficiency at which the estimate meets that row's published tokens/s, carried through the
  // same estimate. Calibrated on a twin (same configuration, published 5000 tokens/s) a row predicts
  // exactly 5000; a row of another GPU type is not calibrated from it.
  void leaveOneOutCalibration() {
    const std::string a = kRow;
    const std::string twin = with(with(a, "\"id\": \"R1\"", "\"id\": \"TWIN\""), "\"gpus\": 8", "\"gpus\": 16");
    const std::string other = with(with(a, "\"id\": \"R1\"", "\"id\": \"H200\""), "\"h100-sxm\"", "\"h200\"");
    std::vector<RowPrediction> preds;
    for (const auto& r : parsePublishedRows("[" + a + "," + twin + "," + other + "]", "t.json")) preds.push_back(predictRow(r));
    const auto eff = efficiencyMatching(preds[1]);
    QVERIFY(eff && *eff > 0 && *eff < 1);
    QVERIFY(std::abs(*tokensPerSPerGpuAt(preds[1], *eff) - 5000.0) < 0.01);
    calibrateLeaveOneOut(preds);
    QCOMPARE(preds[0].calibratedFrom, std::string("TWIN"));
    QCOMPARE(*preds[0].calibratedEfficiency, *eff);
    QCOMPARE(*preds[0].calibratedTokensPerSPerGpu, *tokensPerSPerGpuAt(preds[0], *eff));
    QCOMPARE(*preds[0].calibratedSpeedErrorPct, (*preds[0].calibratedTokensPerSPerGpu - 5000.0) / 5000.0 * 100.0);
    QVERIFY(preds[2].calibratedFrom.empty());  // no other h200 row
    const auto summary = calibratedSpeedErrorSummary(preds);
    QCOMPARE(summary.front().group, std::string("all"));
    QCOMPARE(summary.front().rows, 2);
    for (const auto& g : summary) QVERIFY(g.group.rfind("measure", 0) != 0);  // speed is not grouped by memory measure
  }

  // Every constant of the calibration table is listed in docs/ESTIMATOR.md with its value, unit,
  // source and the rows it was fitted on, and the list has nothing else.
  void calibrationTableIsDocumented() {
    std::ifstream f(std::filesystem::path(SHARDSCOPE_SOURCE_DIR) / "docs" / "ESTIMATOR.md");
    QVERIFY(f.good());
    std::string doc((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    int documented = 0;
    std::istringstream lines(doc.substr(doc.find("**The calibration table**")));
    std::string line;
    std::getline(lines, line);
    while (std::getline(lines, line) && line.find("validate-table: begin") == std::string::npos)
      if (line.rfind("| ", 0) == 0 && line.find("| name |") == std::string::npos) ++documented;
    QCOMPARE(documented, static_cast<int>(calibrationTable().size()));
    for (const auto& c : calibrationTable()) {
      const std::string row = "| " + std::string(c.name) + " | " + formatDouble(c.value) + " | " + std::string(c.unit) + " | " +
                              std::string(c.source) + " | " + std::string(c.fittedOn) + (c.fittedOn.empty() ? "|" : " |");
      QVERIFY2(doc.find(row) != std::string::npos, row.c_str());
    }
    QVERIFY(calib::kEfficiencyLow < calib::kEfficiency && calib::kEfficiency < calib::kEfficiencyHigh);
    RecommendInput defaults;
    QCOMPARE(defaults.efficiency, calib::kEfficiency);
    QCOMPARE(defaults.headroom, calib::kHeadroom);
  }

  // The schema is strict: a missing key, a wrong type, an unknown value or a repeated id is an error
  // naming the file, the row and the field.
  void schemaErrorsNameRowAndField() {
    const std::vector<std::pair<std::string, std::string>> bad = {
        {with(kRow, "\"gpus\": 8,", ""), "t.json: row 1 (R1): missing key 'gpus'"},
        {with(kRow, "\"gpus\": 8", "\"gpus\": \"8\""), "'gpus' must be an integer"},
        {with(kRow, "\"strategy\": \"fsdp2\"", "\"strategy\": \"fsdp3\""), "'strategy' is 'fsdp3', not one of"},
        {with(kRow, "\"tp\": 1, ", ""), "missing key 'parallel.tp'"},
    };
    for (const auto& [text, says] : bad) {
      try {
        parsePublishedRows(rows(text), "t.json");
        QFAIL(says.c_str());
      } catch (const Error& e) {
        QVERIFY2(std::string(e.what()).find(says) != std::string::npos, e.what());
      }
    }
    try {
      parsePublishedRows(rows(kRow, kRow), "t.json");
      QFAIL("a repeated id");
    } catch (const Error& e) {
      QVERIFY2(std::string(e.what()).find("row 2 (R1): the id is used twice") != std::string::npos, e.what());
    }
  }

  // The published rows, where the checkout has them: every row reads and every expressible one is
  // predicted.
  void publishedRowsRead() {
    // $SHARDSCOPE_PUBLISHED, else ../shared/published/rows.json beside the checkout.
    const char* env = std::getenv("SHARDSCOPE_PUBLISHED");
    const std::string file =
        env ? std::string(env)
            : (std::filesystem::path(SHARDSCOPE_SOURCE_DIR).parent_path() / "shared" / "published" / "rows.json").string();
    if (!std::filesystem::exists(file)) QSKIP("../shared/published/rows.json is not beside this checkout");
    const auto all = readPublishedRows(file);
    QVERIFY(all.size() >= 100);
    int expressible = 0;
    for (const auto& r : all) {
      const RowPrediction p = predictRow(r);
      expressible += p.expressible();
      QCOMPARE(p.id, r.id);
      if (p.expressible()) QVERIFY(p.predictedPeakGib.has_value() && *p.predictedPeakGib > 0);
    }
    QVERIFY(expressible > 0);
    qInfo("%zu published rows, %d expressible", all.size(), expressible);
  }
};

QTEST_GUILESS_MAIN(TestValidation)
#include "tst_validation.moc"
