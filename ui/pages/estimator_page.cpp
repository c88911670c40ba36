#include "ui/pages/estimator_page.h"

#include "core/config/run_config.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QGroupBox>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollArea>
#include <QSpinBox>
#include <QSplitter>
#include <QTableWidget>
#include <QVBoxLayout>

#include <algorithm>
#include <memory>
#include <optional>
#include <stdexcept>

#include "core/estimator/comm_model.h"
#include "core/estimator/estimator_options.h"
#include "core/estimator/fit_advice.h"
#include "core/estimator/scenarios.h"
#include "core/estimator/simulator.h"
#include "core/estimator/prediction.h"
#include "core/estimator/simulator_store.h"
#include "core/storage/trace_store.h"
#include "ui/charts/bar_chart.h"
#include "ui/common/flow_layout.h"
#include "ui/charts/chart_style.h"
#include "ui/charts/stacked_bar_chart.h"
#include "ui/common/background.h"

namespace shardscope::ui {

namespace est = core::estimator;

namespace {

QSpinBox* spin(int lo, int hi, int value, QWidget* parent) {
  auto* s = new QSpinBox(parent);
  s->setRange(lo, hi);
  s->setValue(value);
  s->setKeyboardTracking(false);
  return s;
}

QString gib(double bytes) { return charts::formatBytes(bytes); }

// The estimator's defaults (what the form starts from where no GPU type sets them).
using RecommendDefaults = est::RecommendInput;

// The ranking table's "To fit" column (the "why" column follows it).
constexpr int kToFitColumn = 10;

core::Precision precisionOf(const QComboBox* c) {
  return core::knobFromString<core::Precision>(c->currentText().toStdString()).value_or(core::Precision::Bf16);
}

}  // namespace

EstimatorPage::EstimatorPage(QWidget* parent) : Page(parent) {
  auto* outer = new QHBoxLayout(this);
  outer->setContentsMargins(4, 4, 4, 4);
  auto* split = new QSplitter(Qt::Horizontal, this);
  outer->addWidget(split);

  auto* formHost = new QWidget(split);
  auto* form = new QFormLayout(formHost);
  // The setups of core::estimator::scenarios(), as `estimate --scenario NAME` reads them.
  scenario_ = new QComboBox(formHost);
  scenario_->addItem(tr("(none)"));
  for (const auto& sc : est::scenarios()) {
    scenario_->addItem(QString::fromStdString(sc.name));
    scenario_->setItemData(scenario_->count() - 1, QString::fromStdString(sc.summary), Qt::ToolTipRole);
  }
  scenario_->setToolTip(tr("Fill the form with a preset setup (the CLI's estimate --scenario NAME)"));
  form->addRow(tr("Scenario"), scenario_);
  model_ = new QComboBox(formHost);
  for (const auto& n : est::modelShapePresetNames()) model_->addItem(QString::fromStdString(n));
  model_->addItem(QStringLiteral("custom"));
  model_->setCurrentText(QStringLiteral("llama3-8b"));
  form->addRow(tr("Model"), model_);
  layers_ = spin(1, 512, 32, formHost);
  hidden_ = spin(8, 65536, 4096, formHost);
  heads_ = spin(1, 1024, 32, formHost);
  kvHeads_ = spin(1, 1024, 8, formHost);
  ffn_ = spin(8, 262144, 14336, formHost);
  vocab_ = spin(2, 1000000, 128256, formHost);
  form->addRow(tr("Layers"), layers_);
  form->addRow(tr("Hidden size"), hidden_);
  form->addRow(tr("Attention heads"), heads_);
  form->addRow(tr("KV heads"), kvHeads_);
  form->addRow(tr("FFN size"), ffn_);
  form->addRow(tr("Vocabulary"), vocab_);
  gpus_ = spin(1, 65536, 8, formHost);
  gpusPerNode_ = spin(1, 64, 8, formHost);
  form->addRow(tr("GPUs"), gpus_);
  form->addRow(tr("GPUs per node"), gpusPerNode_);
  // The CLI's --gpu table (core/estimator/scenarios.h): memory, dense peak, bandwidth and link.
  device_ = new QComboBox(formHost);
  for (const auto& n : est::devicePresetNames()) {
    device_->addItem(QString::fromStdString(n));
    if (auto d = est::devicePreset(n))
      device_->setItemData(device_->count() - 1, QString::fromStdString(d->source), Qt::ToolTipRole);
  }
  device_->addItem(QStringLiteral("custom"));
  device_->setToolTip(
      tr("GPU type: sets the memory, the dense TFLOPS of the precision, the memory bandwidth and the link "
         "in a node (as the CLI's --gpu); editing the memory or TFLOPS makes it custom"));
  form->addRow(tr("GPU type"), device_);
  memory_ = new QLineEdit(QStringLiteral("80GiB"), formHost);
  memory_->setToolTip(tr("Device memory: 80GiB, 141 GB, 24GiB…"));
  form->addRow(tr("GPU memory"), memory_);
  headroom_ = new QDoubleSpinBox(formHost);
  headroom_->setRange(0, 90);
  headroom_->setValue(10);
  headroom_->setSuffix(QStringLiteral(" %"));
  headroom_->setToolTip(tr("Memory kept free for the CUDA context, fragmentation and the allocator"));
  form->addRow(tr("Headroom"), headroom_);
  precision_ = new QComboBox(formHost);
  precision_->addItems({QStringLiteral("bf16"), QStringLiteral("fp16"), QStringLiteral("fp32")});
  form->addRow(tr("Precision"), precision_);
  tflops_ = new QDoubleSpinBox(formHost);
  tflops_->setRange(0.1, 100000);
  tflops_->setDecimals(1);
  tflops_->setValue(989);
  tflops_->setKeyboardTracking(false);
  tflops_->setToolTip(tr("Dense peak of the compute dtype (the GPU type's bf16 or fp32 figure): the step time's compute"));
  form->addRow(tr("Dense TFLOPS"), tflops_);
  efficiency_ = new QDoubleSpinBox(formHost);
  efficiency_->setRange(0.01, 1);
  efficiency_->setDecimals(3);
  efficiency_->setSingleStep(0.05);
  efficiency_->setValue(RecommendDefaults().efficiency);
  efficiency_->setKeyboardTracking(false);
  efficiency_->setToolTip(tr("Achieved fraction of the peak (MFU): compute = FLOPs / (TFLOPS x MFU)"));
  form->addRow(tr("MFU"), efficiency_);
  memBw_ = new QDoubleSpinBox(formHost);
  memBw_->setRange(1, 100000);
  memBw_->setDecimals(0);
  memBw_->setValue(RecommendDefaults().memBwGBps);
  memBw_->setSuffix(QStringLiteral(" GB/s"));
  memBw_->setKeyboardTracking(false);
  memBw_->setToolTip(tr("Device memory bandwidth: the simulation's optimizer step and embedding (not the estimate)"));
  form->addRow(tr("Memory bandwidth"), memBw_);
  // Fine-tuning: LoRA freezes the base (held in the compute dtype, no gradients, no optimizer state)
  // and trains adapters; QLoRA holds the frozen projections in NF4 (docs/ESTIMATOR.md).
  fineTuning_ = new QComboBox(formHost);
  fineTuning_->addItems({tr("full"), tr("LoRA"), tr("QLoRA")});
  form->addRow(tr("Fine-tuning"), fineTuning_);
  loraRank_ = spin(1, 4096, 8, formHost);
  form->addRow(tr("LoRA rank"), loraRank_);
  loraAlpha_ = new QDoubleSpinBox(formHost);
  loraAlpha_->setRange(0.001, 100000);
  loraAlpha_->setDecimals(3);
  loraAlpha_->setValue(RecommendDefaults().model.loraAlpha);
  loraAlpha_->setKeyboardTracking(false);
  form->addRow(tr("LoRA alpha"), loraAlpha_);
  loraTargets_ = new QLineEdit(QStringLiteral("q,k,v,o,gate,up,down"), formHost);
  loraTargets_->setToolTip(tr("projections with adapters: q, k, v, o, gate, up, down (or all-linear)"));
  form->addRow(tr("LoRA targets"), loraTargets_);
  microBatch_ = spin(1, 4096, 1, formHost);
  seqLen_ = spin(1, 1 << 20, 2048, formHost);
  form->addRow(tr("Micro-batch"), microBatch_);
  form->addRow(tr("Sequence length"), seqLen_);
  checkpointing_ = new QCheckBox(tr("Activation checkpointing"), formHost);
  offloadOptimizer_ = new QCheckBox(tr("Offload optimizer to CPU"), formHost);
  offloadParam_ = new QCheckBox(tr("Offload parameters to CPU"), formHost);
  form->addRow(checkpointing_);
  form->addRow(offloadOptimizer_);
  form->addRow(offloadParam_);
  link_ = new QComboBox(formHost);
  interLink_ = new QComboBox(formHost);
  for (const auto& n : est::linkPresetNames()) {
    link_->addItem(QString::fromStdString(n));
    interLink_->addItem(QString::fromStdString(n));
  }
  link_->setCurrentText(QStringLiteral("nvlink-h100"));
  interLink_->setCurrentText(QStringLiteral("ib-ndr"));
  form->addRow(tr("Link in a node"), link_);
  form->addRow(tr("Link between nodes"), interLink_);
  error_ = new QLabel(formHost);
  error_->setWordWrap(true);
  error_->setStyleSheet(QStringLiteral("color: #c0392b"));
  form->addRow(error_);
  auto* scroll = new QScrollArea(split);
  scroll->setWidget(formHost);
  scroll->setWidgetResizable(true);
  scroll->setMinimumWidth(260);
  split->addWidget(scroll);

  auto* right = new QWidget(split);
  auto* rv = new QVBoxLayout(right);
  summary_ = new QLabel(right);
  summary_->setWordWrap(true);
  rv->addWidget(summary_);
  auto* charts = new QHBoxLayout;
  memoryChart_ = new charts::StackedBarChart(right);
  stepChart_ = new charts::BarChart(right);
  memoryChart_->setMinimumSize(220, 260);  // both fit beside the form on a 1280 px wide window
  stepChart_->setMinimumSize(200, 260);
  charts->addWidget(memoryChart_, 3);
  charts->addWidget(stepChart_, 2);
  rv->addLayout(charts, 3);
  table_ = new QTableWidget(right);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->verticalHeader()->hide();
  table_->horizontalHeader()->setStretchLastSection(true);
  rv->addWidget(table_, 2);

  auto* simBox = new QGroupBox(tr("Simulation: event by event, every strategy that fits"), right);
  auto* sv = new QVBoxLayout(simBox);
  auto* controls = new FlowLayout;  // wraps on a narrow window
  simulate_ = new QPushButton(tr("Simulate"), simBox);
  simulate_->setToolTip(
      tr("Simulate training steps of every strategy that fits: compute per block from FLOPs, "
         "collectives on their own streams with the strategy's dependencies and prefetch, memory over time"));
  simCancel_ = new QPushButton(tr("Cancel"), simBox);
  simCancel_->setEnabled(false);
  simSteps_ = spin(1, 50, 3, simBox);
  simSteps_->setToolTip(tr("Simulated steps; the first is the warm-up, as in a measured run"));
  simJitter_ = new QDoubleSpinBox(simBox);
  simJitter_->setRange(0, 50);
  simJitter_->setDecimals(1);
  simJitter_->setSuffix(QStringLiteral(" %"));
  simJitter_->setToolTip(tr("Rank-to-rank variation of compute (relative standard deviation per op): stragglers"));
  simStore_ = new QCheckBox(tr("Store as runs"), simBox);
  simStore_->setToolTip(tr("Write each simulation into the open database as a run with source 'simulated'"));
  simStore_->setEnabled(false);
  simFromRun_ = new QCheckBox(tr("Profile from the selected run"), simBox);
  simFromRun_->setToolTip(
      tr("A prediction calibrated on the first selected run of our runtime: its compute per block (carried to "
         "this model by its measured GEMM rates), its link probe and rank-to-rank jitter; each result gets an "
         "interval and says what it extrapolates (select a run in the browser)"));
  simFromRun_->setEnabled(false);
  simAllowExtrapolation_ = new QCheckBox(tr("Allow extrapolation"), simBox);
  simAllowExtrapolation_->setToolTip(
      tr("Predict even where ranks would share cores or GPUs differently from the run (its compute is scaled by "
         "the load; the result says so). Without it such a prediction is refused with the reason."));
  simAllowExtrapolation_->setEnabled(false);
  controls->addWidget(simulate_);
  controls->addWidget(simCancel_);
  controls->addWidget(new QLabel(tr("Steps"), simBox));
  controls->addWidget(simSteps_);
  controls->addWidget(new QLabel(tr("Jitter"), simBox));
  controls->addWidget(simJitter_);
  controls->addWidget(simStore_);
  controls->addWidget(simFromRun_);
  controls->addWidget(simAllowExtrapolation_);
  simProgress_ = new QProgressBar(simBox);
  simProgress_->setRange(0, 100);
  simProgress_->setVisible(false);
  sv->addLayout(controls);
  sv->addWidget(simProgress_);
  simStatus_ = new QLabel(tr("Not simulated yet."), simBox);
  simStatus_->setWordWrap(true);
  sv->addWidget(simStatus_);
  simTable_ = new QTableWidget(simBox);
  simTable_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  simTable_->verticalHeader()->hide();
  simTable_->horizontalHeader()->setStretchLastSection(true);
  sv->addWidget(simTable_);
  rv->addWidget(simBox, 1);
  connect(simulate_, &QPushButton::clicked, this, &EstimatorPage::simulate);
  connect(simCancel_, &QPushButton::clicked, this, &EstimatorPage::cancelSimulation);
  split->addWidget(right);
  split->setStretchFactor(0, 0);
  split->setStretchFactor(1, 1);

  const auto changed = [this] {
    if (filling_) return;
    scenario_->setCurrentIndex(0);  // edited by hand: no longer the scenario
    recompute();
    markSimulationStale();
  };
  // Editing a figure of the device by hand: no longer that preset.
  const auto customDevice = [this, changed] {
    if (filling_) return;
    if (auto d = est::devicePreset(device_->currentText().toStdString())) {
      const auto bytes = est::parseByteSize(memory_->text().trimmed().toStdString());
      const double presetTflops = est::presetTflops(*d, precisionOf(precision_));
      if (!bytes || *bytes != d->memoryBytes || tflops_->value() != presetTflops || memBw_->value() != d->memBwGBps) {
        filling_ = true;
        device_->setCurrentText(QStringLiteral("custom"));
        filling_ = false;
      }
    }
    changed();
  };
  connect(device_, &QComboBox::currentIndexChanged, this, [this, changed] {
    if (filling_) return;
    onDeviceChanged();
    changed();
  });
  connect(scenario_, &QComboBox::currentIndexChanged, this, [this] {
    if (filling_) return;
    (void)applyScenario(scenario_->currentText());
  });
  connect(precision_, &QComboBox::currentIndexChanged, this, [this] {
    if (filling_) return;
    // The preset's peak of the new precision (bf16 or fp32).
    if (auto d = est::devicePreset(device_->currentText().toStdString())) {
      filling_ = true;
      tflops_->setValue(est::presetTflops(*d, precisionOf(precision_)));
      filling_ = false;
    }
  });
  connect(model_, &QComboBox::currentIndexChanged, this, [this] { onModelChanged(); });
  for (QSpinBox* s : {layers_, hidden_, heads_, kvHeads_, ffn_, vocab_, gpus_, gpusPerNode_, microBatch_, seqLen_})
    connect(s, &QSpinBox::valueChanged, this, changed);
  connect(headroom_, &QDoubleSpinBox::valueChanged, this, changed);
  connect(memory_, &QLineEdit::editingFinished, this, customDevice);
  for (QDoubleSpinBox* d : {tflops_, memBw_}) connect(d, &QDoubleSpinBox::valueChanged, this, customDevice);
  for (QDoubleSpinBox* d : {efficiency_, loraAlpha_}) connect(d, &QDoubleSpinBox::valueChanged, this, changed);
  for (QComboBox* c : {precision_, link_, interLink_, fineTuning_}) connect(c, &QComboBox::currentIndexChanged, this, changed);
  connect(loraRank_, &QSpinBox::valueChanged, this, changed);
  connect(loraTargets_, &QLineEdit::textChanged, this, changed);
  const auto loraEnabled = [this] {
    const bool on = fineTuning_->currentIndex() > 0;
    loraRank_->setEnabled(on);
    loraAlpha_->setEnabled(on);
    loraTargets_->setEnabled(on);
  };
  connect(fineTuning_, &QComboBox::currentIndexChanged, this, loraEnabled);
  loraEnabled();
  for (QCheckBox* c : {checkpointing_, offloadOptimizer_, offloadParam_}) connect(c, &QCheckBox::toggled, this, changed);
  filling_ = true;
  device_->setCurrentText(QStringLiteral("h100-sxm"));  // the estimator's defaults are an H100 SXM's
  applyDevice("h100-sxm");
  filling_ = false;
  onModelChanged();
}

void EstimatorPage::applyDevice(const std::string& name) {
  const auto d = est::devicePreset(name);
  if (!d) return;
  // Through core's one mapping (the CLI's --gpu): the page shows what it sets.
  est::RecommendInput ri;
  ri.model.precision = precisionOf(precision_);
  est::applyDevicePreset(*d, ri);
  memory_->setText(QString::fromStdString(est::exactByteSize(ri.deviceBytes)));
  tflops_->setValue(ri.deviceTflops);
  memBw_->setValue(ri.memBwGBps);
  link_->setCurrentText(QString::fromStdString(ri.intraNode.name));
}

void EstimatorPage::onDeviceChanged() {
  const bool was = filling_;
  filling_ = true;
  applyDevice(device_->currentText().toStdString());
  filling_ = was;
}

QString EstimatorPage::setInput(const est::RecommendInput& in) {
  const bool was = filling_;
  filling_ = true;
  const est::EstimateInput& m = in.model;
  const bool preset = est::modelShapePreset(m.model.name).has_value();
  model_->setCurrentText(preset ? QString::fromStdString(m.model.name) : QStringLiteral("custom"));
  onModelChanged();  // enables the shape for custom; no recompute while filling
  layers_->setValue(m.model.layers);
  hidden_->setValue(static_cast<int>(m.model.hidden));
  heads_->setValue(m.model.heads);
  kvHeads_->setValue(m.model.kvHeads);
  ffn_->setValue(static_cast<int>(m.model.ffn));
  vocab_->setValue(static_cast<int>(m.model.vocab));
  gpus_->setValue(m.gpus);
  gpusPerNode_->setValue(m.gpusPerNode);
  precision_->setCurrentText(
      QString::fromUtf8(core::toString(m.precision).data(), static_cast<qsizetype>(core::toString(m.precision).size())));
  device_->setCurrentText(in.device.empty() ? QStringLiteral("custom") : QString::fromStdString(in.device));
  memory_->setText(QString::fromStdString(est::exactByteSize(in.deviceBytes)));
  headroom_->setValue(in.headroom * 100.0);
  tflops_->setValue(in.deviceTflops);
  efficiency_->setValue(in.efficiency);
  memBw_->setValue(in.memBwGBps);
  fineTuning_->setCurrentIndex(m.loraRank <= 0 ? 0 : m.qlora ? 2 : 1);
  if (m.loraRank > 0) {
    loraRank_->setValue(m.loraRank);
    loraAlpha_->setValue(m.loraAlpha);
    loraTargets_->setText(QString::fromStdString(m.loraTargets));
  }
  microBatch_->setValue(static_cast<int>(m.microBatch));
  seqLen_->setValue(static_cast<int>(m.seqLen));
  checkpointing_->setChecked(m.activationCheckpointing);
  offloadOptimizer_->setChecked(m.offloadOptimizer);
  offloadParam_->setChecked(m.offloadParam);
  link_->setCurrentText(QString::fromStdString(in.intraNode.name));
  interLink_->setCurrentText(QString::fromStdString(in.interNode.name));
  filling_ = was;
  recompute();
  markSimulationStale();
  std::string diff;
  try {
    diff = est::firstInputDifference(in, input());
  } catch (const std::exception& e) {
    diff = e.what();
  }
  if (diff.empty()) return {};
  QString text = tr("The form cannot show this input's %1").arg(QString::fromStdString(diff));
  result_.clear();
  showError(text);
  return text;
}

QString EstimatorPage::applyScenario(const QString& name) {
  if (name.isEmpty() || scenario_->findText(name) <= 0) {
    const bool was = filling_;
    filling_ = true;
    scenario_->setCurrentIndex(0);
    filling_ = was;
    return name.isEmpty() || name == scenario_->itemText(0) ? QString() : tr("unknown scenario %1").arg(name);
  }
  const est::Scenario* sc = est::findScenario(name.toStdString());
  est::RecommendInput in;
  try {
    in = est::scenarioInput(*sc);
  } catch (const std::exception& e) {
    showError(QString::fromUtf8(e.what()));
    return QString::fromUtf8(e.what());
  }
  const bool was = filling_;
  filling_ = true;
  scenario_->setCurrentText(name);
  filling_ = was;
  return setInput(in);
}

QString EstimatorPage::summaryText() const { return summary_->text(); }

void EstimatorPage::setContext(const QString& dbPath, const QList<core::RunId>& runs) {
  dbPath_ = dbPath;
  runs_ = dbPath.isEmpty() ? QList<core::RunId>() : runs;
  simStore_->setEnabled(!dbPath.isEmpty());
  if (dbPath.isEmpty()) simStore_->setChecked(false);
  simFromRun_->setEnabled(!runs_.isEmpty());
  simFromRun_->setText(runs_.isEmpty() ? tr("Profile from the selected run")
                                       : tr("Profile from run %1").arg(runs_.first().value()));
  if (runs_.isEmpty()) simFromRun_->setChecked(false);
  simAllowExtrapolation_->setEnabled(!runs_.isEmpty());
}

QString EstimatorPage::simulationStatus() const { return simStatus_->text(); }

QString EstimatorPage::rankingNotes() const { return simStatus_->toolTip(); }

void EstimatorPage::markSimulationStale() {
  if (simRows_.empty() || simulating()) return;
  simStatus_->setText(tr("The inputs changed since this simulation: simulate again."));
}

void EstimatorPage::simulate() {
  if (simulating()) return;
  est::RecommendInput ri;
  try {
    ri = input();
  } catch (const std::exception& e) {
    simStatus_->setText(tr("Cannot simulate: %1").arg(QString::fromUtf8(e.what())));
    Q_EMIT simulationFinished(false);
    return;
  }
  std::vector<std::pair<est::Strategy, est::StepParts>> todo;  // (strategy, the estimate's step)
  QStringList skipped;
  for (const auto& a : result_) {
    if (a.fit.fits)
      todo.push_back({a.strategy, est::estimatedParts(a)});
    else
      skipped << QString::fromStdString(est::strategyName(a.strategy));
  }
  if (todo.empty()) {
    simStatus_->setText(tr("Nothing to simulate: no strategy fits."));
    Q_EMIT simulationFinished(false);
    return;
  }
  const int steps = simSteps_->value();
  const double jitter = simJitter_->value() / 100.0;
  const QString db = simStore_->isChecked() ? dbPath_ : QString();
  const core::RunId profileRun = simFromRun_->isChecked() && !runs_.isEmpty() ? runs_.first() : core::RunId{};
  const QString profileDb = dbPath_;
  const bool allowExtrapolation = simAllowExtrapolation_->isChecked();
  simRows_.clear();
  reversals_.clear();
  simStatus_->setToolTip(QString());
  simTable_->setRowCount(0);
  simulate_->setEnabled(false);
  simCancel_->setEnabled(true);
  simProgress_->setValue(0);
  simProgress_->setVisible(true);
  simStatus_->setText(tr("Simulating %1 strateg%2…").arg(todo.size()).arg(todo.size() == 1 ? "y" : "ies"));
  Q_EMIT busyChanged(true);
  auto work = [ri, todo, steps, jitter, db, profileRun, profileDb, allowExtrapolation](core::CancelToken& cancel,
                                                                                       const core::ProgressFn& progress) {
    std::vector<SimulatedRow> rows;
    // The measured run's profile, link and jitter (simulate --profile-run), read before anything is
    // written.
    std::optional<est::Calibration> cal;
    if (profileRun) {
      core::TraceStore read(profileDb.toStdString(), core::Database::Mode::ReadOnly);
      cal = est::calibrate(read, profileRun);
    }
    std::unique_ptr<core::TraceStore> store;
    if (!db.isEmpty()) store = std::make_unique<core::TraceStore>(db.toStdString());
    for (std::size_t i = 0; i < todo.size(); ++i) {
      est::SimulateInput si;
      si.model = ri.model;
      si.strategy = todo[i].first;
      si.compute = est::flopsComputeProfile(ri.model, ri.deviceTflops, ri.efficiency, ri.memBwGBps);
      si.intraNode = ri.intraNode;
      si.interNode = ri.interNode;
      si.comm = ri.comm;
      si.steps = steps;
      si.jitter = jitter;
      std::optional<est::PredictionCheck> check;
      if (cal) {
        check = est::applyCalibration(si, *cal, /*keepJitter=*/jitter > 0, allowExtrapolation);
        si.interNode = si.intraNode;
      }
      // Progress over every strategy: each reports its own 0..total.
      const core::ProgressFn each = [&, i](const core::Progress& p) {
        if (!progress || p.total == 0) return;
        core::Progress q = p;
        q.total = 1000 * static_cast<std::uint64_t>(todo.size());
        q.done = 1000 * static_cast<std::uint64_t>(i) + 1000 * std::min(p.done, p.total) / p.total;
        q.stage = "simulating " + est::strategyName(todo[i].first);
        progress(q);
      };
      auto r = est::simulate(si, &cancel, each);
      if (cal) est::annotatePrediction(r, *cal, *check);
      SimulatedRow row;
      if (r.prediction) {
        row.predicted = true;
        row.lowS = r.prediction->lowS;
        row.highS = r.prediction->highS;
        row.change = r.prediction->change;
        row.intervalBasis = r.prediction->intervalBasis;
        if (!r.prediction->checkpointing.empty()) row.intervalBasis += "\ncheckpointing: " + r.prediction->checkpointing;
        row.extrapolation = r.prediction->extrapolation;
        row.leftOutNote = cal->profile.leftOutNote;
      }
      row.strategy = todo[i].first;
      row.estimated = todo[i].second;
      row.estimatedStepS = todo[i].second.stepS;
      row.stepS = r.steady.stepS;
      row.computeS = r.steady.computeS;
      row.commS = r.steady.commS;
      row.exposedCommS = r.steady.exposedCommS;
      row.overlap = r.steady.overlap();
      row.slowestRankStepS = r.slowestRankStepS;
      row.tokensPerSPerDevice = r.tokensPerSPerDevice;
      row.peakBytes = r.peakBytes;
      row.collectivesPerStep = r.collectivesPerStep;
      if (store)
        row.runId = est::writeSimulatedRun(
            *store, r, "sim " + est::strategyName(si.strategy) + " " + ri.model.model.name + " x" + std::to_string(ri.model.gpus),
            &cancel);
      rows.push_back(row);
    }
    return rows;
  };
  // In the session's task runner like every page's work (progress and Cancel in the task centre).
  auto* task = session()->tasks()->start<std::vector<SimulatedRow>>(
      this, taskSlot(), tr("Simulating %n strateg(ies)", nullptr, static_cast<int>(todo.size())), work,
      [this, skipped, stored = !db.isEmpty(), profileRun](std::vector<SimulatedRow> rows) {
        simRows_ = std::move(rows);
        showSimulation();
        // Where the simulation orders two strategies otherwise than the estimate: which part of the
        // step moved (core/estimator/ranking_check.h).
        std::vector<est::StrategySteps> compared;
        for (const auto& r : simRows_) {
          est::SimStepFigures f;
          f.stepS = r.stepS;
          f.computeS = r.computeS;
          f.commS = r.commS;
          f.exposedCommS = r.exposedCommS;
          compared.push_back({r.strategy, r.estimated, est::simulatedParts(f)});
        }
        reversals_ = est::rankingReversals(compared);
        QString text =
            tr("Simulated %1 step(s) of %2 strateg%3, compute %4.")
                .arg(simSteps_->value())
                .arg(simRows_.size())
                .arg(simRows_.size() == 1 ? "y" : "ies")
                .arg(profileRun ? tr("per block, link and jitter from run %1").arg(profileRun.value()) : tr("from FLOPs"));
        bool extrapolates = false;
        for (const auto& r : simRows_) extrapolates = extrapolates || !r.extrapolation.empty();
        if (extrapolates) text += QLatin1Char(' ') + tr("Some predictions extrapolate: see the prediction column.");
        if (!simRows_.empty() && !simRows_.front().leftOutNote.empty())
          text += QLatin1Char(' ') + tr("Calibration: %1.").arg(QString::fromStdString(simRows_.front().leftOutNote));
        if (!skipped.isEmpty())
          text += QLatin1Char(' ') + tr("Not simulated (does not fit): %1.").arg(skipped.join(QStringLiteral(", ")));
        if (stored) text += QLatin1Char(' ') + tr("Stored as runs in the database.");
        if (simRows_.size() > 1 && reversals_.empty())
          text += QLatin1Char(' ') + tr("The simulation ranks them in the estimate's order.");
        // The first few in the status, every one in its tooltip.
        constexpr std::size_t kShown = 3;
        QStringList all;
        for (const auto& r : reversals_) all << QString::fromStdString(r.text) + QLatin1Char('.');
        for (std::size_t i = 0; i < std::min(kShown, reversals_.size()); ++i) text += QLatin1Char(' ') + all[static_cast<int>(i)];
        if (reversals_.size() > kShown)
          text += QLatin1Char(' ') + tr("%1 more pair(s) differ (tooltip).").arg(reversals_.size() - kShown);
        simStatus_->setToolTip(all.join(QLatin1Char('\n')));
        simStatus_->setText(text);
        if (stored) Q_EMIT runsAdded();
        Q_EMIT statusMessage(text);
      },
      [this](const QString& error) {
        simStatus_->setText(tr("Simulation failed: %1").arg(error));
        Q_EMIT errorMessage(tr("Estimator: simulation failed: %1").arg(error));
      });
  simTask_ = task;
  connect(task, &BackgroundTask::progress, this, [this](int pct, const QString& stage) {
    if (pct >= 0) simProgress_->setValue(pct);
    Q_EMIT progress(pct, stage);
  });
  connect(task, &BackgroundTask::cancelled, this, [this] { simStatus_->setText(tr("Simulation cancelled; nothing stored.")); });
  auto over = [this](bool ok) {
    simTask_ = nullptr;  // the task deletes itself later; the page is free now
    simulate_->setEnabled(true);
    simCancel_->setEnabled(false);
    simProgress_->setVisible(false);
    Q_EMIT busyChanged(false);
    Q_EMIT simulationFinished(ok);
  };
  connect(task, &BackgroundTask::finished, this, [over] { over(true); });
  connect(task, &BackgroundTask::failed, this, [over] { over(false); });
  connect(task, &BackgroundTask::cancelled, this, [over] { over(false); });
}

void EstimatorPage::cancelSimulation() {
  if (simTask_) simTask_->cancel();
}

void EstimatorPage::showSimulation() {
  const QStringList headers = {tr("strategy"),          tr("simulated step"),     tr("estimated step"),
                               tr("compute"),           tr("communication"),      tr("exposed"),
                               tr("overlap"),           tr("slowest rank"),       tr("peak / device"),
                               tr("tokens/s / device"), tr("collectives / step"), tr("run"),
                               tr("step interval"),     tr("prediction")};
  simTable_->clear();
  simTable_->setColumnCount(static_cast<int>(headers.size()));
  simTable_->setHorizontalHeaderLabels(headers);
  simTable_->setRowCount(static_cast<int>(simRows_.size()));
  for (std::size_t i = 0; i < simRows_.size(); ++i) {
    const auto& r = simRows_[i];
    const QStringList cells = {
        QString::fromStdString(est::strategyName(r.strategy)),
        charts::formatMs(r.stepS * 1e3),
        charts::formatMs(r.estimatedStepS * 1e3),
        charts::formatMs(r.computeS * 1e3),
        charts::formatMs(r.commS * 1e3),
        charts::formatMs(r.exposedCommS * 1e3),
        charts::formatPercent(r.overlap * 100, 1),
        charts::formatMs(r.slowestRankStepS * 1e3),
        gib(static_cast<double>(r.peakBytes)),
        charts::formatNumber(r.tokensPerSPerDevice),
        QString::number(r.collectivesPerStep),
        r.runId ? QString::number(r.runId.value()) : QStringLiteral("-"),
        r.predicted ? charts::formatMs(r.lowS * 1e3) + QStringLiteral(" – ") + charts::formatMs(r.highS * 1e3)
                    : QStringLiteral("-"),
        r.predicted ? QString::fromStdString(r.change) + (r.extrapolation.empty() ? QString() : tr(", extrapolates"))
                    : tr("from FLOPs")};
    for (int c = 0; c < cells.size(); ++c) simTable_->setItem(static_cast<int>(i), c, new QTableWidgetItem(cells[c]));
    if (r.predicted) {
      QStringList why;
      for (const auto& e : r.extrapolation) why << QString::fromStdString(e);
      simTable_->item(static_cast<int>(i), 12)->setToolTip(QString::fromStdString(r.intervalBasis));
      simTable_->item(static_cast<int>(i), 13)
          ->setToolTip(why.isEmpty() ? tr("inside the calibrated range") : why.join(QLatin1Char('\n')));
    }
  }
  simTable_->resizeColumnsToContents();
}

void EstimatorPage::onModelChanged() {
  const std::string name = model_->currentText().toStdString();
  const bool custom = name == "custom";
  for (QSpinBox* s : {layers_, hidden_, heads_, kvHeads_, ffn_, vocab_}) s->setEnabled(custom);
  if (filling_) return;  // setInput fills the rest
  if (!custom) {
    if (auto m = est::modelShapePreset(name)) {
      filling_ = true;
      layers_->setValue(m->layers);
      hidden_->setValue(static_cast<int>(m->hidden));
      heads_->setValue(m->heads);
      kvHeads_->setValue(m->kvHeads);
      ffn_->setValue(static_cast<int>(m->ffn));
      vocab_->setValue(static_cast<int>(m->vocab));
      // Our runtime's presets train short sequences on CPU ranks; the published models long ones.
      const bool runtime = m->hidden < 1024;
      seqLen_->setValue(runtime ? 128 : 2048);
      filling_ = false;
    }
  }
  recompute();
}

est::RecommendInput EstimatorPage::input() const {
  est::RecommendInput in;
  const std::string name = model_->currentText().toStdString();
  if (name == "custom") {
    est::ModelShape m;
    m.name = "custom";
    m.layers = layers_->value();
    m.hidden = hidden_->value();
    m.heads = heads_->value();
    m.kvHeads = kvHeads_->value();
    m.ffn = ffn_->value();
    m.vocab = vocab_->value();
    est::validateShape(m);
    in.model.model = m;
  } else {
    auto m = est::modelShapePreset(name);
    if (!m) throw std::invalid_argument("model: unknown preset " + name);
    in.model.model = *m;
  }
  in.model.gpus = gpus_->value();
  in.model.gpusPerNode = std::min(gpusPerNode_->value(), gpus_->value());
  in.model.precision = precisionOf(precision_);
  in.model.microBatch = microBatch_->value();
  in.model.seqLen = seqLen_->value();
  in.model.activationCheckpointing = checkpointing_->isChecked();
  if (fineTuning_->currentIndex() > 0) {
    in.model.loraRank = loraRank_->value();
    in.model.loraAlpha = loraAlpha_->value();
    std::string problem;
    (void)core::loraTargetList(loraTargets_->text().toStdString(), &problem);
    if (!problem.empty()) throw std::invalid_argument("LoRA targets: " + problem);
    in.model.loraTargets = loraTargets_->text().toStdString();
    in.model.qlora = fineTuning_->currentIndex() == 2;
  }
  in.model.offloadOptimizer = offloadOptimizer_->isChecked();
  in.model.offloadParam = offloadParam_->isChecked();
  const auto bytes = est::parseByteSize(memory_->text().trimmed().toStdString());
  if (!bytes || *bytes <= 0)
    throw std::invalid_argument("GPU memory: '" + memory_->text().toStdString() + "' is not a size (80GiB, 141 GB, …)");
  in.deviceBytes = *bytes;
  in.headroom = headroom_->value() / 100.0;
  in.deviceTflops = tflops_->value();
  in.efficiency = efficiency_->value();
  in.memBwGBps = memBw_->value();
  in.device = est::devicePreset(device_->currentText().toStdString()) ? device_->currentText().toStdString() : std::string();
  if (auto l = est::linkPreset(link_->currentText().toStdString())) in.intraNode = *l;
  if (auto l = est::linkPreset(interLink_->currentText().toStdString())) in.interNode = *l;
  in.comm.emulatedReduceScatter = est::linkImpliesGloo(in.intraNode.name);
  return in;
}

void EstimatorPage::recompute() {
  try {
    const est::RecommendInput in = input();
    result_ = est::recommend(in);
    if (result_.empty()) throw std::invalid_argument("no strategy applies to this input");
    error_->clear();
    showResult();
  } catch (const std::exception& e) {
    result_.clear();
    showError(QString::fromUtf8(e.what()));
  }
}

QString EstimatorPage::errorText() const { return error_->text(); }

QJsonObject EstimatorPage::describe() const {
  QJsonObject out = Page::describe();
  out[QStringLiteral("scenario")] = scenario_->currentText();
  out[QStringLiteral("device")] = device_->currentText();
  out[QStringLiteral("summary")] = summary_->text();
  out[QStringLiteral("error")] = errorText();
  QJsonArray strategies;
  for (const auto& a : result_)  // core's serialisation, the CLI's estimate --json
    strategies.append(QJsonDocument::fromJson(QByteArray::fromStdString(core::estimator::toJson(a).dump())).object());
  out[QStringLiteral("strategies")] = strategies;
  QJsonArray simulated;
  for (const auto& r : simRows_)
    simulated.append(QJsonObject{{QStringLiteral("strategy"), QString::fromStdString(core::estimator::strategyName(r.strategy))},
                                 {QStringLiteral("estimated_step_s"), r.estimatedStepS},
                                 {QStringLiteral("step_s"), r.stepS},
                                 {QStringLiteral("exposed_comm_s"), r.exposedCommS},
                                 {QStringLiteral("peak_bytes"), static_cast<double>(r.peakBytes)}});
  out[QStringLiteral("simulated")] = simulated;
  out[QStringLiteral("simulation_status")] = simulationStatus();
  out[QStringLiteral("ranking_notes")] = rankingNotes();
  return out;
}

void EstimatorPage::showError(const QString& text) {
  error_->setText(text);
  summary_->setText(tr("Cannot estimate: %1").arg(text));
  memoryChart_->clearStacks(tr("Peak memory per device"));
  stepChart_->clearBars(tr("Expected step time"), tr("no estimate"));
  table_->setRowCount(0);
  Q_EMIT statusMessage(tr("Estimator: %1").arg(text));
}

void EstimatorPage::showResult() {
  const est::RecommendInput in = input();
  // Charts in ranking order.
  QStringList names;
  std::vector<charts::StackedBarChart::Category> cats = {
      {tr("parameters"), QColor(0x4e, 0x79, 0xa7), {}},   {tr("frozen base"), QColor(0x9c, 0x75, 0x5f), {}},
      {tr("gradients"), QColor(0xf2, 0x8e, 0x2b), {}},    {tr("optimizer state"), QColor(0x59, 0xa1, 0x4f), {}},
      {tr("comm buffers"), QColor(0x76, 0xb7, 0xb2), {}}, {tr("gathered units"), QColor(0xb0, 0x7a, 0xa1), {}},
      {tr("activations"), QColor(0xe1, 0x57, 0x59), {}}};
  std::vector<std::optional<double>> steps;
  std::optional<std::size_t> best;
  for (std::size_t i = 0; i < result_.size(); ++i) {
    const auto& a = result_[i];
    // Short axis labels (the table has the full names).
    QString label = QString::fromStdString(est::strategyName(a.strategy));
    label.replace(QStringLiteral("fsdp_grad_op"), QStringLiteral("grad-op"))
        .replace(QStringLiteral("zeropp_hpz"), QStringLiteral("hpZ"));
    names << label;
    const auto& p = a.memory.atPeak;
    cats[0].bytes.push_back(p.parameters);
    cats[1].bytes.push_back(p.frozen);
    cats[2].bytes.push_back(p.gradients);
    cats[3].bytes.push_back(p.optimizer);
    cats[4].bytes.push_back(p.buffers);
    cats[5].bytes.push_back(p.gathered);
    cats[6].bytes.push_back(p.activations);
    steps.push_back(a.stepS * 1000.0);
    if (a.rank == 1 && a.fit.fits) best = i;
  }
  // Ranked left to right: the rank and, for a strategy that does not fit, why it is last.
  for (std::size_t i = 0; i < result_.size(); ++i)
    names[static_cast<int>(i)] = QStringLiteral("%1. %2").arg(result_[i].rank).arg(names[static_cast<int>(i)]);
  memoryChart_->setStacks(tr("Peak memory per device (ranked: fits first, then by step time)"), names, cats);
  if (!result_.empty() && result_.front().fit.deviceBytes > 0) {
    const auto& f = result_.front().fit;
    // The line is what the fit test uses: the device's memory less the headroom.
    memoryChart_->setLimit(f.usableBytes > 0 ? f.usableBytes : f.deviceBytes,
                           tr("usable memory %1 of the device's %2 (headroom kept free)")
                               .arg(charts::formatBytes(static_cast<double>(f.usableBytes)),
                                    charts::formatBytes(static_cast<double>(f.deviceBytes))),
                           tr("no fit"));
  }
  stepChart_->setBars(
      tr("Expected step time"), names, steps, best, [](double ms) { return charts::formatMs(ms); }, tr("ms per step"));
  const QStringList headers = {tr("rank"),        tr("strategy"),  tr("peak / device"), tr("fits"), tr("free after headroom"),
                               tr("comm / step"), tr("comm time"), tr("exposed"),       tr("step"), tr("tokens/s / device"),
                               tr("To fit"),      tr("why")};
  table_->clear();
  table_->setColumnCount(static_cast<int>(headers.size()));
  table_->setHorizontalHeaderLabels(headers);
  table_->setRowCount(static_cast<int>(result_.size()));
  for (std::size_t i = 0; i < result_.size(); ++i) {
    const auto& a = result_[i];
    QString why;
    for (const auto& r : a.reasons) why += (why.isEmpty() ? QString() : QStringLiteral("; ")) + QString::fromStdString(r);
    // The cheapest single change that makes it fit (core/estimator/fit_advice.h).
    const QString toFit = a.fit.fits ? QStringLiteral("-")
                          : a.toFit  ? QString::fromStdString(est::describeFitChange(*a.toFit))
                                     : tr("no single change fits");
    const QStringList cells = {QString::number(a.rank),
                               QString::fromStdString(est::strategyName(a.strategy)),
                               gib(static_cast<double>(a.memory.peakBytes)),
                               a.fit.fits ? tr("yes") : tr("no"),
                               gib(static_cast<double>(a.fit.freeBytes)),
                               gib(a.comm.wireBytes),
                               charts::formatMs(a.comm.timeS * 1e3),
                               charts::formatMs(a.exposedCommS * 1e3),
                               charts::formatMs(a.stepS * 1e3),
                               charts::formatNumber(a.tokensPerSPerDevice),
                               toFit,
                               why};
    for (int c = 0; c < cells.size(); ++c) {
      auto* item = new QTableWidgetItem(cells[c]);
      if (c == kToFitColumn) item->setToolTip(toFit);
      if (c == kToFitColumn + 1) item->setToolTip(why);
      if (c == 3) item->setForeground(a.fit.fits ? charts::betterColor() : charts::worseColor());
      table_->setItem(static_cast<int>(i), c, item);
    }
  }
  table_->resizeColumnsToContents();
  const auto& top = result_.front();
  summary_->setText(
      top.fit.fits
          ? tr("<b>%1</b> is recommended for %2 on %3 GPU(s): peak %4 per device of %5 usable (%6 with "
               "%7 headroom), %8 per step expected.")
                .arg(QString::fromStdString(est::strategyName(top.strategy)), QString::fromStdString(in.model.model.name),
                     QString::number(in.model.gpus), gib(static_cast<double>(top.memory.peakBytes)),
                     gib(static_cast<double>(in.deviceBytes) * (1 - in.headroom)), gib(static_cast<double>(in.deviceBytes)),
                     charts::formatPercent(in.headroom * 100, 0), charts::formatMs(top.stepS * 1e3))
          : QStringLiteral("<b>%1</b>")
                .arg(QString::fromStdString(est::nothingFitsSummary(result_, in.deviceBytes)).toHtmlEscaped() +
                     QLatin1Char('.')));
  // The figures the step time rests on.
  summary_->setText(summary_->text() + QLatin1Char(' ') +
                    tr("Compute from %1 TFLOPS x %2 MFU (%3).")
                        .arg(QString::number(in.deviceTflops, 'f', 1), QString::number(in.efficiency, 'f', 2),
                             in.device.empty() ? tr("custom device") : QString::fromStdString(in.device)));
}

}  // namespace shardscope::ui
