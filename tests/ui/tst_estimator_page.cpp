// The Estimator page: the form drives core::estimator's recommend(); the charts and the ranking
// show exactly its figures and follow every change; bad input shows an error at the form.
#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QPushButton>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QLineEdit>
#include <QSpinBox>
#include <QTableWidget>
#include <QJsonArray>
#include <QJsonObject>
#include <QElapsedTimer>
#include <QtTest>

#include "ui/charts/qcp.h"

#include "core/storage/store_access.h"
#include "core/estimator/estimator_options.h"
#include "core/estimator/fit_advice.h"
#include "core/estimator/recommend.h"
#include "core/estimator/scenarios.h"
#include "core/estimator/simulator.h"
#include "core/estimator/prediction.h"
#include "core/estimator/simulator_store.h"
#include "core/storage/trace_store.h"
#include "ui/charts/bar_chart.h"
#include "ui/charts/chart_style.h"
#include "ui/charts/stacked_bar_chart.h"
#include "ui/pages/estimator_page.h"

using namespace shardscope;
namespace est = shardscope::core::estimator;

namespace {
// A new, empty database in `dir`.
QString emptyDatabase(const QTemporaryDir& dir) {
  const QString db = dir.filePath("sim.db");
  core::TraceStore create(db.toStdString());
  return db;
}
}  // namespace

class TestEstimatorPage : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void showsCoresRanking() {
    ui::EstimatorPage page;
    page.resize(1400, 900);
    QVERIFY(!page.busy());
    QCOMPARE(page.modelCombo()->currentText(), QString("llama3-8b"));
    QVERIFY(page.errorText().isEmpty());
    const auto expected = est::recommend(page.input());
    const auto& shown = page.assessments();
    QCOMPARE(shown.size(), expected.size());
    QTableWidget* t = page.rankingTable();
    QCOMPARE(t->rowCount(), static_cast<int>(expected.size()));
    for (std::size_t i = 0; i < expected.size(); ++i) {
      QCOMPARE(t->item(static_cast<int>(i), 1)->text(), QString::fromStdString(est::strategyName(expected[i].strategy)));
      QCOMPARE(t->item(static_cast<int>(i), 3)->text(), expected[i].fit.fits ? QString("yes") : QString("no"));
      // The stacked bar of strategy i adds up to its estimated peak; what does not fit is marked.
      QCOMPARE(page.memoryChart()->totalBytes(static_cast<int>(i)), expected[i].memory.peakBytes);
      QCOMPARE(page.memoryChart()->overLimit(static_cast<int>(i)), !expected[i].fit.fits);
      QCOMPARE(page.memoryChart()->totalLabel(static_cast<int>(i)).endsWith("no fit"), !expected[i].fit.fits);
    }
    // The fit test's line: the device's memory less the headroom.
    QCOMPARE(page.memoryChart()->limit().value_or(0), expected[0].fit.usableBytes);
    // The label of a strategy that does not fit is drawn (not hidden as too wide for its bar).
    page.show();
    (void)page.memoryChart()->grab();  // laid out at its real size
    int marked = 0;
    for (int i = 0; i < page.memoryChart()->itemCount(); ++i)
      if (auto* label = qobject_cast<QCPItemText*>(page.memoryChart()->item(i)); label && label->text().endsWith("no fit")) {
        QVERIFY(label->visible());
        ++marked;
      }
    QVERIFY(marked >= 1);  // DDP at least
    QCOMPARE(page.stepChart()->barCount(), expected.size());
    // Llama-3-8B with DDP does not fit 80 GiB (fp32 master + Adam replicated on every GPU).
    bool ddpRow = false;
    for (int r = 0; r < t->rowCount(); ++r)
      if (t->item(r, 1)->text() == "ddp") {
        ddpRow = true;
        QCOMPARE(t->item(r, 3)->text(), QString("no"));
      }
    QVERIFY(ddpRow);
  }

  void followsTheInputs() {
    ui::EstimatorPage page;
    const std::int64_t before = page.assessments().front().memory.peakBytes;
    // More GPUs shard more: the best peak does not grow.
    page.gpusSpin()->setValue(64);
    QCOMPARE(page.input().model.gpus, 64);
    QVERIFY(page.assessments().front().memory.peakBytes <= before);
    // Checkpointing shrinks activations: every strategy's activations at the peak are at most what they were.
    const auto without = page.assessments();
    page.checkpointingCheck()->setChecked(true);
    QVERIFY(page.input().model.activationCheckpointing);
    for (const auto& a : page.assessments())
      for (const auto& b : without)
        if (a.strategy == b.strategy) QVERIFY(a.memory.atPeak.activations <= b.memory.atPeak.activations);
    // A smaller device: fewer strategies fit.
    page.memoryEdit()->setText("24GiB");
    Q_EMIT page.memoryEdit()->editingFinished();
    QCOMPARE(page.input().deviceBytes, std::int64_t(24) << 30);
    // A runtime preset.
    page.modelCombo()->setCurrentText("small");
    QCOMPARE(page.input().model.model.name, std::string("small"));
    QCOMPARE(est::parameterCount(page.input().model.model), std::int64_t(3950848));
  }

  // LoRA and QLoRA: the base is frozen (its own bar segment), what trains is small; the page asks the
  // estimator what the CLI asks (same input, same figures).
  void fineTuningModes() {
    ui::EstimatorPage page;
    page.modelCombo()->setCurrentText("llama3-8b");
    page.memoryEdit()->setText("24GiB");
    Q_EMIT page.memoryEdit()->editingFinished();
    QVERIFY(!page.loraRankSpin()->isEnabled());
    const auto full = page.assessments();
    page.fineTuningCombo()->setCurrentIndex(1);  // LoRA
    QVERIFY(page.loraRankSpin()->isEnabled());
    page.loraRankSpin()->setValue(8);
    QCOMPARE(page.input().model.loraRank, 8);
    QVERIFY(!page.input().model.qlora);
    const auto lora = page.assessments();
    const auto expected = est::recommend(page.input());
    QCOMPARE(lora.size(), expected.size());
    for (std::size_t i = 0; i < lora.size(); ++i) {
      QCOMPARE(lora[i].memory.peakBytes, expected[i].memory.peakBytes);
      QVERIFY(lora[i].memory.atPeak.frozen > 0);
      QCOMPARE(page.memoryChart()->totalBytes(static_cast<int>(i)), lora[i].memory.peakBytes);
    }
    // DDP under LoRA holds far less than under full fine-tuning (no fp32 master, grads or Adam of the base).
    auto ddpPeak = [](const auto& v) {
      for (const auto& a : v)
        if (a.strategy == est::Strategy::Ddp) return a.memory.peakBytes;
      return std::int64_t{0};
    };
    QVERIFY(ddpPeak(lora) * 3 < ddpPeak(full));
    // QLoRA holds the frozen projections in NF4: less frozen base still.
    page.fineTuningCombo()->setCurrentIndex(2);
    QVERIFY(page.input().model.qlora);
    QVERIFY(ddpPeak(page.assessments()) < ddpPeak(lora));
    // A bad target list is an error on the page, not a crash.
    page.loraTargetsEdit()->setText("q,qkv");
    QVERIFY(page.errorText().contains("qkv"));
    QVERIFY(page.assessments().empty());
  }

  void badInputIsAnErrorNotACrash() {
    ui::EstimatorPage page;
    page.memoryEdit()->setText("eighty gigs");
    Q_EMIT page.memoryEdit()->editingFinished();
    QVERIFY(page.errorText().contains("GPU memory"));
    QVERIFY(page.assessments().empty());
    QCOMPARE(page.rankingTable()->rowCount(), 0);
    page.memoryEdit()->setText("80GiB");
    Q_EMIT page.memoryEdit()->editingFinished();
    QVERIFY(page.errorText().isEmpty());
    QVERIFY(!page.assessments().empty());
    // A custom shape whose heads do not divide by the KV heads.
    page.modelCombo()->setCurrentText("custom");
    page.headsSpin()->setValue(7);
    QVERIFY2(!page.errorText().isEmpty(), "a bad shape must be refused");
    QVERIFY(page.assessments().empty());
  }

  // "Simulate": every strategy that fits is simulated off the GUI thread, the table shows the
  // simulator's own figures (the same input through core gives the same step time), and with
  // "Store as runs" each simulation is a run with source simulated in the open database.
  void simulatesWhatFitsAndStoresRuns() {
    QTemporaryDir dir;
    const QString db = emptyDatabase(dir);
    ui::EstimatorPage page;
    page.modelCombo()->setCurrentText("small");
    page.gpusSpin()->setValue(4);
    page.setContext(db, {});
    QVERIFY(page.storeSimulationsCheck()->isEnabled());
    page.storeSimulationsCheck()->setChecked(true);
    page.simulationStepsSpin()->setValue(2);
    std::vector<est::Strategy> fitting;
    for (const auto& a : page.assessments())
      if (a.fit.fits) fitting.push_back(a.strategy);
    QVERIFY(!fitting.empty());
    QSignalSpy done(&page, &ui::EstimatorPage::simulationFinished);
    QSignalSpy added(&page, &ui::EstimatorPage::runsAdded);
    page.simulateButton()->click();
    QVERIFY(page.busy());
    QVERIFY(!page.simulateButton()->isEnabled());
    QVERIFY(done.wait(60000));
    QCOMPARE(done.takeFirst().at(0).toBool(), true);
    QCOMPARE(added.count(), 1);
    QVERIFY(!page.busy());
    QCOMPARE(page.simulated().size(), fitting.size());
    QCOMPARE(page.simulationTable()->rowCount(), static_cast<int>(fitting.size()));
    // The first row against core directly.
    const auto in = page.input();
    est::SimulateInput si;
    si.model = in.model;
    si.strategy = page.simulated().front().strategy;
    si.compute = est::flopsComputeProfile(in.model, in.deviceTflops, in.efficiency, 3350);
    si.intraNode = in.intraNode;
    si.interNode = in.interNode;
    si.comm = in.comm;
    si.steps = 2;
    const auto r = est::simulate(si);
    QCOMPARE(page.simulated().front().stepS, r.steady.stepS);
    QCOMPARE(page.simulated().front().peakBytes, r.peakBytes);
    // Stored: one simulated run per row, ids in the table.
    core::TraceStore store(db.toStdString(), core::Database::Mode::ReadOnly);
    const auto runs = store.runs();
    QCOMPARE(runs.size(), fitting.size());
    for (const auto& run : runs) QVERIFY(run.source == core::RunSource::Simulated);
    QCOMPARE(page.simulationTable()->item(0, 11)->text(), QString::number((page.simulated().front().runId).value()));
    // A change of input marks the result stale.
    page.gpusSpin()->setValue(8);
    QVERIFY2(page.simulationStatus().contains("simulate again"), qPrintable(page.simulationStatus()));
  }

  // "Profile from the selected run": compute per block, link and jitter measured in that run (as
  // `simulate --profile-run`), carried to the page's model. The run here is a simulated one with a
  // known jitter, relabelled as a runtime run.
  void simulatesFromASelectedRun() {
    QTemporaryDir dir;
    const QString db = dir.filePath("sim.db");
    core::RunId id;
    {
      core::TraceStore store(db.toStdString());
      est::SimulateInput si;
      si.model.model = *est::modelShapePreset("small");
      si.model.gpus = 2;
      si.model.gpusPerNode = 2;
      si.model.precision = est::Precision::Fp32;
      si.model.microBatch = 4;
      si.model.seqLen = 128;
      si.strategy = est::Strategy::FsdpFull;
      si.compute = est::flopsComputeProfile(si.model, 0.05, 1, 10);
      si.intraNode = *est::linkPreset("gloo-cpu-local");
      si.interNode = si.intraNode;
      si.steps = 4;
      si.jitter = 0.1;
      id = est::writeSimulatedRun(store, est::simulate(si), "measured");
      shardscope::core::storeDb(store).exec("UPDATE runs SET source='runtime' WHERE id=" + std::to_string(id.value()));
    }
    ui::EstimatorPage page;
    page.modelCombo()->setCurrentText("small");
    page.gpusSpin()->setValue(8);
    QVERIFY(!page.profileFromRunCheck()->isEnabled());
    page.setContext(db, {id});
    QVERIFY(page.profileFromRunCheck()->isEnabled());
    page.profileFromRunCheck()->setChecked(true);
    QSignalSpy done(&page, &ui::EstimatorPage::simulationFinished);
    page.simulateButton()->click();
    QVERIFY(done.wait(60000));
    QCOMPARE(done.takeFirst().at(0).toBool(), true);
    QVERIFY2(page.simulationStatus().contains(QString("from run %1").arg(id.value())), qPrintable(page.simulationStatus()));
    // The same through core's prediction path (what `simulate --profile-run` takes).
    core::TraceStore store(db.toStdString(), core::Database::Mode::ReadOnly);
    const est::Calibration cal = est::calibrate(store, id);
    QVERIFY(cal.profile.computeJitter > 0.05);
    const auto in = page.input();
    est::SimulateInput si;
    si.model = in.model;
    si.strategy = page.simulated().front().strategy;
    si.intraNode = in.intraNode;
    si.comm = in.comm;
    si.steps = page.simulationStepsSpin()->value();
    const est::PredictionCheck check = est::applyCalibration(si, cal, /*keepJitter=*/false, /*allowExtrapolation=*/false);
    si.interNode = si.intraNode;
    auto r = est::simulate(si);
    est::annotatePrediction(r, cal, check);
    const auto& row = page.simulated().front();
    QCOMPARE(row.stepS, r.steady.stepS);
    // A prediction: 8 ranks from a 2-rank run is a change of scale, marked as an extrapolation,
    // with its interval in the table.
    QVERIFY(row.predicted);
    QCOMPARE(row.change, std::string("scale"));
    QCOMPARE(row.lowS, r.prediction->lowS);
    QVERIFY(row.lowS < row.stepS && row.stepS < row.highS);
    QVERIFY(!row.extrapolation.empty());
    QVERIFY(page.simulationTable()->item(0, 13)->text().contains("extrapolates"));
    QVERIFY(page.simulationTable()->item(0, 12)->text().contains(QStringLiteral("–")));
    QVERIFY(page.simulationStatus().contains("extrapolate"));
    // Without the run: FLOPs at the page's device figures, a different step.
    page.profileFromRunCheck()->setChecked(false);
    page.simulateButton()->click();
    QVERIFY(done.wait(60000));
    QVERIFY(page.simulationStatus().contains("from FLOPs"));
  }

  // The GPU type: the CLI's --gpu table through core's one mapping (applyDevicePreset); the peak of
  // the chosen precision; a hand-edited memory or peak makes it custom.
  void gpuTypeSetsTheDevice() {
    ui::EstimatorPage page;
    QCOMPARE(page.deviceCombo()->currentText(), QString("h100-sxm"));  // the estimator's defaults
    QCOMPARE(page.deviceCombo()->count(), static_cast<int>(est::devicePresetNames().size()) + 1);
    QCOMPARE(page.deviceCombo()->itemText(page.deviceCombo()->count() - 1), QString("custom"));
    page.modelCombo()->setCurrentText("qwen3-8b");
    page.gpusSpin()->setValue(4);
    const double h100Step = page.assessments().front().stepS;
    page.deviceCombo()->setCurrentText("a10");
    est::RecommendInput expected = page.input();
    est::applyDevicePreset(*est::devicePreset("a10"), expected);
    QCOMPARE(est::firstInputDifference(page.input(), expected), std::string());
    QCOMPARE(page.input().deviceBytes, std::int64_t(24) << 30);
    QCOMPARE(page.tflopsSpin()->value(), 125.0);
    QCOMPARE(page.memBwSpin()->value(), 600.0);
    QCOMPARE(page.input().intraNode.name, std::string("pcie4"));
    QCOMPARE(page.memoryEdit()->text(), QString("24GiB"));
    QVERIFY(page.assessments().front().stepS > 5 * h100Step);  // an A10 computes 8x slower
    QVERIFY2(page.summaryText().contains("125.0 TFLOPS x 0.40 MFU (a10)"), qPrintable(page.summaryText()));
    // fp32: the preset's fp32 peak.
    page.precisionCombo()->setCurrentText("fp32");
    QCOMPARE(page.input().deviceTflops, 31.2);
    QCOMPARE(page.deviceCombo()->currentText(), QString("a10"));
    page.precisionCombo()->setCurrentText("bf16");
    QCOMPARE(page.input().deviceTflops, 125.0);
    // The efficiency is the page's too.
    page.efficiencySpin()->setValue(0.5);
    QCOMPARE(page.input().efficiency, 0.5);
    // Memory by hand: custom, the other figures kept.
    page.memoryEdit()->setText("30GiB");
    Q_EMIT page.memoryEdit()->editingFinished();
    QCOMPARE(page.deviceCombo()->currentText(), QString("custom"));
    QVERIFY(page.input().device.empty());
    QCOMPARE(page.input().deviceBytes, std::int64_t(30) << 30);
    QCOMPARE(page.input().deviceTflops, 125.0);
    // TFLOPS by hand: custom too.
    page.deviceCombo()->setCurrentText("h200");
    QCOMPARE(page.input().device, std::string("h200"));
    page.tflopsSpin()->setValue(500);
    QCOMPARE(page.deviceCombo()->currentText(), QString("custom"));
    QCOMPARE(page.input().deviceTflops, 500.0);
  }

  // The scenarios fill the form through core's option mapping (the path of `estimate --scenario`):
  // the form shows every field (setInput's difference is empty), and the seeds' Qwen3 LoRA on
  // 4 x A10 gives the CLI's step time and peak per strategy (2,066 ms with DDP, not an H100's 262).
  void scenariosAreTheClis() {
    ui::EstimatorPage page;
    QCOMPARE(page.scenarioCombo()->count(), static_cast<int>(est::scenarios().size()) + 1);
    for (const auto& sc : est::scenarios()) {
      const QString problem = page.applyScenario(QString::fromStdString(sc.name));
      QVERIFY2(problem.isEmpty(), qPrintable(QString::fromStdString(sc.name) + ": " + problem));
      QVERIFY2(page.errorText().isEmpty(), qPrintable(page.errorText()));
      QCOMPARE(est::firstInputDifference(page.input(), est::scenarioInput(sc)), std::string());
    }
    // Chosen in the combo, as a user does.
    page.scenarioCombo()->setCurrentText("(none)");
    page.scenarioCombo()->setCurrentText("qwen3-lora-4xa10");
    QCOMPARE(page.deviceCombo()->currentText(), QString("a10"));
    QCOMPARE(page.fineTuningCombo()->currentIndex(), 1);
    QVERIFY(page.checkpointingCheck()->isChecked());
    // The CLI's input: `estimate --scenario qwen3-lora-4xa10` parses through the same function.
    core::ParsedArgs cliArgs;
    cliArgs.options.emplace_back("scenario", "qwen3-lora-4xa10");
    est::RecommendInput cli;
    est::applyEstimatorOptions(est::withScenario(cliArgs), cli);
    const auto expected = est::recommend(cli);
    const auto& shown = page.assessments();
    QCOMPARE(shown.size(), expected.size());
    for (std::size_t i = 0; i < shown.size(); ++i) {
      QVERIFY(shown[i].strategy == expected[i].strategy);
      QCOMPARE(shown[i].stepS, expected[i].stepS);
      QCOMPARE(shown[i].memory.peakBytes, expected[i].memory.peakBytes);
      QCOMPARE(page.rankingTable()->item(static_cast<int>(i), 8)->text(), ui::charts::formatMs(expected[i].stepS * 1e3));
      if (shown[i].strategy == est::Strategy::Ddp) QVERIFY2(std::abs(shown[i].stepS - 2.0662) < 0.001, "2,066 ms a step");
    }
    // A hand edit: no longer the scenario.
    page.gpusSpin()->setValue(8);
    QCOMPARE(page.scenarioCombo()->currentIndex(), 0);
    // A form that cannot show an input says which field.
    est::RecommendInput odd = cli;
    odd.model.gradientAsBucketView = true;  // no widget for it
    QVERIFY(page.setInput(odd).contains("gradient as bucket view: on vs off"));
    QVERIFY(page.errorText().contains("gradient as bucket view"));
  }

  // What would fit: the "To fit" column shows each strategy's cheapest change (core's cheapestFit),
  // and when nothing fits the summary says what would.
  void toFitColumn() {
    ui::EstimatorPage page;
    page.modelCombo()->setCurrentText("llama2-7b");
    page.gpusSpin()->setValue(8);
    page.deviceCombo()->setCurrentText("a10");
    QTableWidget* t = page.rankingTable();
    int col = -1;
    for (int c = 0; c < t->columnCount(); ++c)
      if (t->horizontalHeaderItem(c)->text() == "To fit") col = c;
    QVERIFY(col >= 0);
    const auto in = page.input();
    for (int r = 0; r < t->rowCount(); ++r) {
      const auto& a = page.assessments()[static_cast<std::size_t>(r)];
      QVERIFY(!a.fit.fits);
      const auto fit = est::cheapestFit(in, a.strategy);
      QVERIFY(fit);
      QCOMPARE(t->item(r, col)->text(), QString::fromStdString(est::describeFitChange(*fit)));
      if (a.strategy == est::Strategy::FsdpFull) QVERIFY(t->item(r, col)->text().startsWith("activation checkpointing: peak "));
    }
    QVERIFY2(page.summaryText().startsWith("<b>Nothing fits in 24.00 GiB: fsdp fits with activation checkpointing (peak "),
             qPrintable(page.summaryText()));
    // The page JSON: core's serialisation of each strategy (estimate --json's), to_fit included.
    const QJsonObject json = page.describe();
    QCOMPARE(json["device"].toString(), QString("a10"));
    const QJsonArray strategies = json["strategies"].toArray();
    QCOMPARE(strategies.size(), t->rowCount());
    for (int r = 0; r < t->rowCount(); ++r) {
      const auto& a = page.assessments()[static_cast<std::size_t>(r)];
      const QJsonObject fit = strategies[r].toObject()["to_fit"].toObject();
      QCOMPARE(fit["knob"].toString(), QString::fromStdString(a.toFit->knob));
      QCOMPARE(fit["step_s"].toDouble(), a.toFit->stepS);
      QCOMPARE(static_cast<std::int64_t>(fit["peak_bytes"].toDouble()), a.toFit->peakBytes);
    }
    // Recomputing on every change (the fit search included) stays interactive.
    QElapsedTimer timer;
    timer.start();
    for (int k = 0; k < 10; ++k) page.gpusSpin()->setValue(k % 2 ? 8 : 16);
    const double msPerChange = static_cast<double>(timer.nsecsElapsed()) / 1e6 / 10;
    qInfo("estimate with the fit search: %.1f ms per change (llama2-7b, 8/16 x a10, nothing fits)", msPerChange);
    page.gpusSpin()->setValue(8);
    // Taking the advice: FSDP fits, its cell is empty, checkpointing is never offered again.
    page.checkpointingCheck()->setChecked(true);
    for (int r = 0; r < t->rowCount(); ++r) {
      const auto& a = page.assessments()[static_cast<std::size_t>(r)];
      if (a.strategy == est::Strategy::FsdpFull) {
        QVERIFY(a.fit.fits);
        QCOMPARE(t->item(r, col)->text(), QString("-"));
      }
      if (a.toFit) QVERIFY(a.toFit->knob != "activation_checkpointing");
    }
    QVERIFY(!page.summaryText().contains("Nothing fits"));
  }

  // After Simulate, a pair the simulation orders otherwise than the estimate is named with the part
  // of the step that moved: the seeds' Llama-2-7B on 8 x A100, ZeRO-3 ahead of FSDP.
  void simulationSaysWhereTheRankingsDiffer() {
    ui::EstimatorPage page;
    QVERIFY(page.applyScenario("llama-7b-full-8xa100").isEmpty());
    page.simulationStepsSpin()->setValue(2);
    QSignalSpy done(&page, &ui::EstimatorPage::simulationFinished);
    page.simulateButton()->click();
    QVERIFY(done.wait(120000));
    QCOMPARE(done.takeFirst().at(0).toBool(), true);
    // Core's comparison over the rows the table shows.
    std::vector<est::StrategySteps> steps;
    for (const auto& r : page.simulated()) {
      est::SimStepFigures f;
      f.stepS = r.stepS;
      f.computeS = r.computeS;
      f.commS = r.commS;
      f.exposedCommS = r.exposedCommS;
      steps.push_back({r.strategy, r.estimated, est::simulatedParts(f)});
      const auto* a = [&] {
        for (const auto& x : page.assessments())
          if (x.strategy == r.strategy) return &x;
        return static_cast<const est::StrategyAssessment*>(nullptr);
      }();
      QVERIFY(a);
      QCOMPARE(r.estimated.exposedCommS, a->exposedCommS);
    }
    const auto expected = est::rankingReversals(steps);
    QCOMPARE(page.rankingReversals().size(), expected.size());
    bool zero3First = false;
    for (const auto& r : page.rankingReversals()) {
      if (r.simFirst == est::Strategy::Zero3 && r.estFirst == est::Strategy::FsdpFull) {
        zero3First = true;
        QVERIFY(r.part == est::StepPart::ExposedComm);
      }
    }
    QVERIFY(zero3First);
    // The status shows the first pairs, every one is in its tooltip.
    QVERIFY2(page.simulationStatus().contains(QString::fromStdString(expected.front().text)),
             qPrintable(page.simulationStatus()));
    QVERIFY2(page.rankingNotes().contains("Simulation ranks zero3 ahead of fsdp"), qPrintable(page.rankingNotes()));
    QCOMPARE(page.rankingNotes().count("Simulation ranks"), static_cast<int>(expected.size()));
  }

  // A long simulation can be cancelled: nothing is stored, the page is usable again.
  void simulationCancels() {
    QTemporaryDir dir;
    const QString db = emptyDatabase(dir);
    ui::EstimatorPage page;
    page.modelCombo()->setCurrentText("llama3-70b");
    page.gpusSpin()->setValue(1024);
    page.checkpointingCheck()->setChecked(true);
    page.simulationStepsSpin()->setValue(4);
    page.setContext(db, {});
    page.storeSimulationsCheck()->setChecked(true);
    QSignalSpy done(&page, &ui::EstimatorPage::simulationFinished);
    page.simulateButton()->click();
    QVERIFY(page.busy());
    page.cancelSimulation();
    QVERIFY(done.wait(60000));
    QCOMPARE(done.takeFirst().at(0).toBool(), false);
    QVERIFY(!page.busy());
    QVERIFY(page.simulateButton()->isEnabled());
    QVERIFY2(page.simulationStatus().contains("cancelled"), qPrintable(page.simulationStatus()));
    core::TraceStore store(db.toStdString(), core::Database::Mode::ReadOnly);
    QCOMPARE(store.runs().size(), std::size_t{0});
  }
};

QTEST_MAIN(TestEstimatorPage)
#include "tst_estimator_page.moc"
