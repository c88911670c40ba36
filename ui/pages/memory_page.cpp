#include "ui/charts/qcp.h"
#include "ui/pages/describe.h"
#include "ui/common/flow_layout.h"
#include "ui/pages/memory_page.h"

#include <QCheckBox>
#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QJsonDocument>
#include <QLabel>
#include <QSplitter>
#include <QStackedWidget>
#include <QTableView>
#include <QTableWidget>
#include <QToolButton>
#include <QVBoxLayout>

#include <algorithm>
#include <map>
#include <set>

#include "core/model/config_knobs.h"
#include "core/model/memory_category.h"
#include "ui/charts/chart_style.h"
#include "ui/charts/memory_chart.h"
#include "ui/charts/stacked_bar_chart.h"
#include "ui/common/background.h"
#include "ui/models/memory_peaks_model.h"
#include "ui/pages/snapshot_view.h"

namespace shardscope::ui {
namespace {

QString deviceTypeName(int type) {
  switch (type) {
    case 0:
      return QObject::tr("CPU");
    case 1:
      return QObject::tr("GPU (CUDA)");
    case 6:
      return QObject::tr("GPU (HIP)");
    default:
      return QObject::tr("device type %1").arg(type);
  }
}

QString phaseText(const core::MemoryPeak& p) {
  QStringList parts;
  if (!p.annotation.empty()) parts << QString::fromStdString(p.annotation);
  if (!p.operation.empty() && p.operation != p.annotation) parts << QString::fromStdString(p.operation);
  return parts.join(QStringLiteral(" › "));
}

}  // namespace

MemoryRunData loadMemoryRun(core::TraceStore& store, core::RunId runId, const std::vector<core::RunId>& contextRuns,
                            const core::CancelToken* cancel, const core::ProgressFn& progress,
                            const std::vector<core::MemoryPeak>* peaks) {
  MemoryRunData d;
  for (core::RunId id : contextRuns)
    if (auto r = store.run(id)) d.runNames.emplace_back(id, r->name);
  const core::RunSummary summary = store.summary(runId);  // throws for an unknown run
  d.run = summary.run;
  std::optional<core::TimeNs> first, last;
  const std::uint64_t total = summary.ranks.size() + 1;
  std::uint64_t done = 0;
  for (const core::Rank& rank : summary.ranks) {
    if (cancel) cancel->throwIfCancelled();
    if (progress) progress(core::Progress{"reading memory records, rank " + std::to_string(rank.rank), done, total, "ranks"});
    struct Raw {
      int deviceType = 0, deviceId = 0;
      std::vector<core::CounterSample> allocated, reserved;
    };
    std::vector<Raw> raw;  // this rank's devices
    Raw* cur = nullptr;
    std::uint64_t n = 0;
    store.forEachMemoryEvent(
        rank.id,
        [&](const core::MemoryEvent& m) {
          if ((++n & 0xFFFF) == 0 && cancel) cancel->throwIfCancelled();
          if (!cur || cur->deviceType != m.deviceType || cur->deviceId != m.deviceId) {
            cur = nullptr;
            for (auto& r : raw)
              if (r.deviceType == m.deviceType && r.deviceId == m.deviceId) cur = &r;
            if (!cur) {
              raw.push_back(Raw{m.deviceType, m.deviceId, {}, {}});
              cur = &raw.back();
            }
          }
          cur->allocated.push_back({m.tsNs, static_cast<double>(m.totalAllocated)});
          const double reserved = static_cast<double>(m.totalReserved);
          if (cur->reserved.empty() || cur->reserved.back().value != reserved) cur->reserved.push_back({m.tsNs, reserved});
          if (!first || m.tsNs < *first) first = m.tsNs;
          if (!last || m.tsNs > *last) last = m.tsNs;
        },
        /*totalsOnly=*/true);
    d.records += n;
    ++done;
    for (auto& r : raw) {
      if (cancel) cancel->throwIfCancelled();
      MemoryRunData::Series s;
      s.rank = rank.rank;
      s.deviceType = r.deviceType;
      s.deviceId = r.deviceId;
      s.allocated = std::make_shared<const charts::MaxPyramid>(std::move(r.allocated));
      s.reserved = std::make_shared<const charts::MaxPyramid>(std::move(r.reserved));
      d.series.push_back(std::move(s));
    }
  }
  d.origin = summary.startNs.value_or(first.value_or(0));
  if (first) d.origin = std::min(d.origin, *first);
  d.end = summary.endNs.value_or(last.value_or(d.origin));
  if (last) d.end = std::max(d.end, *last);
  if (cancel) cancel->throwIfCancelled();
  if (progress) progress(core::Progress{"finding the peaks", done, total, "ranks"});
  if (d.records > 0) d.peaks = peaks ? *peaks : core::computeMemoryPeaks(store, runId);
  for (auto& tl : core::memoryCategoryTimelines(store, runId, cancel)) {
    MemoryRunData::CategoryStack st;
    std::vector<double> sum(tl.times.size(), 0.0);
    for (const auto& bytes : tl.bytes) {
      std::vector<core::CounterSample> samples(tl.times.size());
      for (std::size_t i = 0; i < tl.times.size(); ++i) {
        sum[i] += bytes[i];
        samples[i] = {tl.times[i], sum[i]};
      }
      st.cumulative.push_back(std::make_shared<const charts::MaxPyramid>(std::move(samples)));
    }
    st.timeline = std::make_shared<const core::MemoryCategoryTimeline>(std::move(tl));
    d.categoryStacks.push_back(std::move(st));
  }
  for (const core::Rank& rank : summary.ranks) {
    MemoryRunData::ModelState ms;
    ms.rank = rank.rank;
    ms.parameters = store.metric(runId, rank.id, "model_state.parameters_bytes");
    ms.gradients = store.metric(runId, rank.id, "model_state.gradients_bytes");
    ms.optimizer = store.metric(runId, rank.id, "model_state.optimizer_bytes");
    ms.buffers = store.metric(runId, rank.id, "model_state.buffers_bytes");
    if (ms.parameters || ms.gradients || ms.optimizer || ms.buffers) d.modelState.push_back(ms);
  }
  return d;
}

MemoryPage::MemoryPage(QWidget* parent) : Page(parent), peaksModel_(new MemoryPeaksModel(this)) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(8, 8, 8, 8);
  layout->setSpacing(6);

  auto* bar = new FlowLayout;  // wraps on a narrow window
  auto* runLabel = new QLabel(tr("Run:"), this);
  runCombo_ = new QComboBox(this);
  runCombo_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);  // long run names: the popup shows them
  runCombo_->setMinimumContentsLength(24);
  runLabel->setBuddy(runCombo_);
  deviceLabel_ = new QLabel(tr("Device:"), this);
  deviceCombo_ = new QComboBox(this);
  deviceLabel_->setBuddy(deviceCombo_);
  viewLabel_ = new QLabel(tr("Show:"), this);
  viewCombo_ = new QComboBox(this);
  viewCombo_->setSizeAdjustPolicy(QComboBox::AdjustToContents);  // short entries: shown whole
  viewCombo_->setToolTip(tr("Every rank's total, or what one rank's memory held over time by category (stacked)"));
  viewLabel_->setBuddy(viewCombo_);
  allocated_ = new QCheckBox(tr("Allocated"), this);
  allocated_->setChecked(true);
  allocated_->setToolTip(tr("Memory held by live tensors (Total Allocated)"));
  reserved_ = new QCheckBox(tr("Reserved"), this);
  reserved_->setToolTip(tr("Memory reserved by the caching allocator (Total Reserved), dashed"));
  resetZoom_ = new QToolButton(this);
  resetZoom_->setText(tr("Reset zoom"));
  resetZoom_->setToolTip(tr("Show the whole run (wheel: zoom the time axis, drag: pan)"));
  snapshotButton_ = new QToolButton(this);
  snapshotButton_->setText(tr("Memory snapshot"));
  snapshotButton_->setCheckable(true);
  snapshotButton_->setToolTip(tr("The run's PyTorch memory snapshot: every allocation of the allocator's trace"));
  snapshotButton_->hide();
  info_ = new QLabel(this);
  info_->setStyleSheet(QStringLiteral("color: #6a737d;"));
  bar->addWidget(runLabel);
  bar->addWidget(runCombo_);
  bar->addWidget(deviceLabel_);
  bar->addWidget(deviceCombo_);
  bar->addWidget(viewLabel_);
  bar->addWidget(viewCombo_);
  bar->addWidget(allocated_);
  bar->addWidget(reserved_);
  bar->addWidget(resetZoom_);
  bar->addWidget(snapshotButton_);
  info_->setWordWrap(true);
  auto* row = new QHBoxLayout;
  row->addLayout(bar, 2);
  row->addWidget(info_, 1);
  layout->addLayout(row);

  stack_ = new QStackedWidget(this);
  message_ = new QLabel(stack_);
  message_->setAlignment(Qt::AlignCenter);
  message_->setWordWrap(true);
  message_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  message_->setStyleSheet(QStringLiteral("QLabel { color: #57606a; font-size: 11pt; padding: 24px; }"));
  stack_->addWidget(message_);

  auto* content = new QSplitter(Qt::Vertical, stack_);
  chart_ = new charts::MemoryChart(content);
  content->addWidget(chart_);
  auto* bottom = new QSplitter(Qt::Horizontal, content);
  peaksTable_ = new QTableView(bottom);
  peaksTable_->setModel(peaksModel_);
  peaksTable_->verticalHeader()->hide();
  peaksTable_->setSelectionBehavior(QAbstractItemView::SelectRows);
  peaksTable_->setSelectionMode(QAbstractItemView::SingleSelection);
  peaksTable_->setAlternatingRowColors(true);
  peaksTable_->setWordWrap(false);
  peaksTable_->horizontalHeader()->setStretchLastSection(true);
  peaksTable_->setToolTip(tr("Double-click a peak to zoom the chart to it"));
  bottom->addWidget(peaksTable_);
  // With several runs: one row per run, its peak (core::RunFigures) and where it happened.
  runPeaks_ = new QTableWidget(bottom);
  runPeaks_->setObjectName(QStringLiteral("runPeaks"));
  runPeaks_->setColumnCount(8);
  runPeaks_->setHorizontalHeaderLabels({tr("Run"), tr("Peak allocated"), tr("Change"), tr("Peak reserved"), tr("Rank"),
                                        tr("Step"), tr("At (ms after step start)"), tr("Phase / operation")});
  runPeaks_->verticalHeader()->hide();
  runPeaks_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  runPeaks_->setSelectionBehavior(QAbstractItemView::SelectRows);
  runPeaks_->horizontalHeader()->setStretchLastSection(true);
  runPeaks_->hide();
  bottom->addWidget(runPeaks_);

  breakdownPanel_ = new QWidget(bottom);
  auto* bl = new QVBoxLayout(breakdownPanel_);
  bl->setContentsMargins(0, 0, 0, 0);
  bl->setSpacing(4);
  breakdown_ = new charts::StackedBarChart(breakdownPanel_);
  bl->addWidget(breakdown_, 1);
  breakdownNote_ = new QLabel(breakdownPanel_);
  breakdownNote_->setWordWrap(true);
  breakdownNote_->setStyleSheet(QStringLiteral("color: #6a737d;"));
  bl->addWidget(breakdownNote_);
  modelState_ = new QTableWidget(breakdownPanel_);
  modelState_->setColumnCount(6);
  modelState_->setHorizontalHeaderLabels(
      {tr("Rank"), tr("Parameters"), tr("Gradients"), tr("Optimizer"), tr("Buffers"), tr("Model state")});
  modelState_->verticalHeader()->hide();
  modelState_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  modelState_->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  modelState_->setToolTip(tr("Exact model-state bytes each rank owns (model_state.* metrics of the runtime)"));
  modelState_->verticalHeader()->setSectionResizeMode(QHeaderView::Fixed);
  modelState_->verticalHeader()->setDefaultSectionSize(modelState_->fontMetrics().height() + 8);
  modelState_->setVerticalScrollMode(QAbstractItemView::ScrollPerPixel);
  bl->addWidget(modelState_);
  bottom->addWidget(breakdownPanel_);
  bottom->setStretchFactor(0, 3);
  bottom->setStretchFactor(1, 2);
  content->addWidget(bottom);
  content->setStretchFactor(0, 3);
  content->setStretchFactor(1, 2);
  content->setSizes({600, 340});
  bottom->setSizes({600, 450});
  stack_->addWidget(content);
  snapshotView_ = new SnapshotView(stack_);
  stack_->addWidget(snapshotView_);
  layout->addWidget(stack_, 1);

  connect(runCombo_, &QComboBox::activated, this, [this](int comboIndex) {
    const int offset = overlayAvailable() ? 1 : 0;
    if (comboIndex < offset)
      showOverlay();
    else
      showRun(comboIndex - offset);
  });
  connect(deviceCombo_, &QComboBox::currentIndexChanged, this, &MemoryPage::applyDeviceFilter);
  connect(viewCombo_, &QComboBox::activated, this, [this] {
    showCurves();
    chart_->rebucket();
    updateInfo();
  });
  connect(allocated_, &QCheckBox::toggled, chart_, &charts::MemoryChart::setShowAllocated);
  connect(reserved_, &QCheckBox::toggled, chart_, &charts::MemoryChart::setShowReserved);
  connect(resetZoom_, &QToolButton::clicked, chart_, &charts::MemoryChart::resetZoom);
  connect(snapshotButton_, &QToolButton::toggled, this, [this] { showContent(); });
  connect(snapshotView_, &SnapshotView::statusMessage, this, &Page::statusMessage);
  connect(chart_, &charts::MemoryChart::viewChanged, this, &MemoryPage::updateInfo);
  connect(peaksTable_, &QTableView::doubleClicked, this, [this](const QModelIndex& i) { zoomToPeak(i.row()); });
  showMessage(tr("Open a database and select a run to see its memory."));
}

MemoryPage::~MemoryPage() {
  if (task_) {
    task_->cancel();
    task_->wait(2000);
  }
}

bool MemoryPage::overlayAvailable() const { return runs_.size() > 1; }

void MemoryPage::setContext(const QString& dbPath, const QList<core::RunId>& runs) {
  if (!rangeFollowed_) {
    rangeFollowed_ = true;
    // The session's time range (the timeline's window) is shown when it is about the run shown.
    connect(session(), &RunSession::timeRangeChanged, this, [this] { applySessionRange(); });
  }
  if (dbPath == dbPath_ && runs == runs_ && (loaded_ || busy())) return;
  sessionFor(dbPath);
  const bool keepRun = dbPath == dbPath_ && runs.contains(current_) && !overlay_;
  dbPath_ = dbPath;
  runs_ = runs;
  // Several runs: their curves overlaid, unless the user was looking at one of them.
  overlay_ = overlayAvailable() && !keepRun;
  if (!keepRun) current_ = runs.isEmpty() ? core::RunId{} : runs.first();
  {
    const QSignalBlocker block(runCombo_);
    runCombo_->clear();
    if (overlayAvailable()) runCombo_->addItem(tr("All %1 runs, overlaid").arg(runs_.size()), QVariant());
    for (core::RunId id : runs_) runCombo_->addItem(tr("run %1").arg(id.value()), QVariant::fromValue<qlonglong>(id.value()));
    syncCombo();
  }
  reload();
}

void MemoryPage::syncCombo() {
  const QSignalBlocker block(runCombo_);
  const int offset = overlayAvailable() ? 1 : 0;
  runCombo_->setCurrentIndex(overlay_ ? 0 : static_cast<int>(runs_.indexOf(current_)) + offset);
}

void MemoryPage::showRun(int index) {
  if (index < 0 || index >= runs_.size()) return;
  if (!overlay_ && runs_[index] == current_ && (loaded_ || busy())) return;
  overlay_ = false;
  current_ = runs_[index];
  syncCombo();
  reload();
}

void MemoryPage::showOverlay() {
  if (!overlayAvailable() || (overlay_ && (loaded_ || busy()))) return;
  overlay_ = true;
  syncCombo();
  reload();
}

void MemoryPage::reload() {
  if (task_) session()->tasks()->cancel(taskSlot());
  task_ = nullptr;
  ++generation_;
  loaded_ = false;
  error_.clear();
  runCombo_->setEnabled(runs_.size() > 1);
  snapshot_.reset();
  snapshotView_->clear();
  snapshotButton_->hide();
  if (dbPath_.isEmpty() || !current_) {
    data_.reset();
    overlayRuns_.clear();
    chart_->clearSeries();
    peaksModel_->clear();
    runPeaks_->setRowCount(0);
    showMessage(dbPath_.isEmpty() ? tr("Open a database and select a run to see its memory.")
                                  : tr("Select a run in the run browser to see its memory over time."));
    setBusy(false);
    return;
  }
  if (overlay_)
    startOverlay();
  else
    start();
}

namespace {

// A run's memory curves, once per session (the session's analysis gives the peaks).
std::shared_ptr<const MemoryRunData> cachedMemory(core::TraceStore& store, RunCache& cache, core::RunId runId,
                                                  const core::CancelToken* cancel, const core::ProgressFn& progress) {
  const auto analysis = RunSession::analysis(cache, store, runId, cancel);
  return cache.get<MemoryRunData>("memory-curves", runId, cancel, [&] {
    return std::make_shared<const MemoryRunData>(loadMemoryRun(store, runId, {}, cancel, progress, &analysis->memoryPeaks));
  });
}

std::vector<std::pair<core::RunId, std::string>> runNames(core::TraceStore& store, const std::vector<core::RunId>& ids) {
  std::vector<std::pair<core::RunId, std::string>> out;
  for (core::RunId id : ids)
    if (auto r = store.run(id)) out.emplace_back(id, r->name);
  return out;
}

}  // namespace

void MemoryPage::start() {
  const core::RunId runId = current_;
  const std::vector<core::RunId> context(runs_.begin(), runs_.end());
  const unsigned generation = generation_;
  showMessage(tr("Loading the memory records of run %1…").arg(runId.value()));
  struct Loaded {
    std::shared_ptr<const MemoryRunData> memory;
    std::vector<std::pair<core::RunId, std::string>> names;
    std::shared_ptr<const SnapshotRunData> snapshot;
  };
  task_ = session()->run<Loaded>(
      this, taskSlot(), tr("Loading the memory of run %1").arg(runId.value()),
      [runId, context](core::TraceStore& store, RunCache& cache, core::CancelToken& cancel, const core::ProgressFn& progress) {
        Loaded out{cachedMemory(store, cache, runId, &cancel, progress), runNames(store, context), nullptr};
        if (progress) progress(core::Progress{"reading the memory snapshots", 1, 1, "runs"});
        out.snapshot = cache.get<SnapshotRunData>("memory-snapshot", runId, &cancel, [&] {
          return std::make_shared<const SnapshotRunData>(loadSnapshotRun(store, runId, &cancel));
        });
        return out;
      },
      [this, generation](Loaded d) {
        if (generation != generation_) return;
        task_ = nullptr;
        applyRunNames(d.names);
        showData(std::move(d.memory), std::move(d.snapshot));
        setBusy(false);
      },
      [this, generation](QString message) {
        if (generation != generation_) return;
        task_ = nullptr;
        showLoadError(message);
      });
  connect(task_, &BackgroundTask::progress, this, [this, generation](int pct, const QString& stage) {
    if (generation == generation_) Q_EMIT progress(pct, stage);
  });
  setBusy(true);
  Q_EMIT statusMessage(tr("loading run %1…").arg(runId.value()));
}

void MemoryPage::startOverlay() {
  const std::vector<core::RunId> ids(runs_.begin(), runs_.end());
  const unsigned generation = generation_;
  showMessage(tr("Loading the memory records of %1 runs…").arg(ids.size()));
  using Loaded = std::pair<std::vector<OverlayRun>, std::vector<std::pair<core::RunId, std::string>>>;
  task_ = session()->run<Loaded>(
      this, taskSlot(), tr("Loading the memory of %1 runs").arg(ids.size()),
      [ids](core::TraceStore& store, RunCache& cache, core::CancelToken& cancel, const core::ProgressFn& progress) {
        Loaded out;
        out.second = runNames(store, ids);
        for (core::RunId id : ids) {
          OverlayRun o;
          o.id = id;
          const auto analysis = RunSession::analysis(cache, store, id, &cancel);
          o.figures = core::runFigures(store, id, analysis->steps, analysis->memoryPeaks);
          o.data = cachedMemory(store, cache, id, &cancel, progress);
          // The peak the run figure is about (device memory where the run has any, else the host's).
          const bool device = o.figures.peakDevice == "GPU";
          for (std::size_t k = 0; k < o.data->peaks.size(); ++k) {
            const auto& p = o.data->peaks[k];
            if ((p.deviceType != 0) != device) continue;
            if (o.peak < 0 || p.peakAllocatedBytes > o.data->peaks[static_cast<std::size_t>(o.peak)].peakAllocatedBytes)
              o.peak = static_cast<int>(k);
          }
          for (std::size_t k = 0; k < o.data->series.size() && o.peak >= 0; ++k) {
            const auto& p = o.data->peaks[static_cast<std::size_t>(o.peak)];
            const auto& sr = o.data->series[k];
            if (sr.rank == p.rank && sr.deviceType == p.deviceType && sr.deviceId == p.deviceId) o.series = static_cast<int>(k);
          }
          // Aligned on the start of the first counted step on the peak's rank (else the run start).
          o.alignNs = o.data->origin;
          const int rank = o.peak >= 0 ? o.data->peaks[static_cast<std::size_t>(o.peak)].rank : 0;
          for (const auto& st : analysis->steps) {
            if (st.rank != rank) continue;
            if (o.figures.steps.count > 0 && st.step == o.figures.steps.first) o.alignNs = st.startNs;
            if (o.peak >= 0 && o.data->peaks[static_cast<std::size_t>(o.peak)].step == st.step) o.peakStepStartNs = st.startNs;
          }
          out.first.push_back(std::move(o));
        }
        return out;
      },
      [this, generation](Loaded d) {
        if (generation != generation_) return;
        task_ = nullptr;
        applyRunNames(d.second);
        for (auto& o : d.first)
          for (const auto& [id, name] : d.second)
            if (id == o.id) o.label = QString::fromStdString(core::runLabel(name, id));
        showOverlayData(std::move(d.first));
        setBusy(false);
      },
      [this, generation](QString message) {
        if (generation != generation_) return;
        task_ = nullptr;
        showLoadError(message);
      });
  connect(task_, &BackgroundTask::progress, this, [this, generation](int pct, const QString& stage) {
    if (generation == generation_) Q_EMIT progress(pct, stage);
  });
  setBusy(true);
  Q_EMIT statusMessage(tr("loading %1 runs…").arg(ids.size()));
}

void MemoryPage::applyRunNames(const std::vector<std::pair<core::RunId, std::string>>& names) {
  const QSignalBlocker block(runCombo_);
  for (const auto& [id, name] : names) labelRun(runCombo_, id, name);
}

void MemoryPage::showLoadError(const QString& message) {
  error_ = message;
  data_.reset();
  overlayRuns_.clear();
  snapshot_.reset();
  snapshotView_->clear();
  snapshotButton_->hide();
  chart_->clearSeries();
  peaksModel_->clear();
  runPeaks_->setRowCount(0);
  showMessage(tr("Could not load the memory records: %1").arg(message));
  Q_EMIT errorMessage(tr("Memory: %1").arg(message));
  setBusy(false);
}

void MemoryPage::cancelLoad() {
  if (!task_) return;
  session()->tasks()->cancel(taskSlot());
  task_ = nullptr;
  ++generation_;
  if (!data_ && overlayRuns_.empty()) showMessage(tr("Loading was cancelled."));
  setBusy(false);
  Q_EMIT statusMessage(tr("loading cancelled"));
}

void MemoryPage::setBusy(bool b) {
  Q_EMIT busyChanged(b);
  if (!b) Q_EMIT progress(100, QString());
}

void MemoryPage::showMessage(const QString& text) {
  message_->setText(text);
  stack_->setCurrentWidget(message_);
  for (QWidget* w : std::initializer_list<QWidget*>{allocated_, reserved_, resetZoom_, deviceCombo_}) w->setEnabled(false);
  info_->clear();
}

bool MemoryPage::snapshotShown() const {
  return snapshot_ && snapshotButton_->isChecked() && stack_->currentWidget() == snapshotView_;
}

void MemoryPage::setSnapshotShown(bool shown) { snapshotButton_->setChecked(shown && snapshot_); }

// The records' chart, the snapshot view or the note saying why there is neither.
void MemoryPage::showContent() {
  if (!data_ || overlay_) return;
  if (snapshot_ && snapshotButton_->isChecked()) {
    stack_->setCurrentWidget(snapshotView_);
    for (QWidget* w : std::initializer_list<QWidget*>{allocated_, reserved_, resetZoom_, deviceCombo_}) w->setEnabled(false);
    info_->setText(tr("memory snapshot · %1 event(s) · loaded in %2 ms")
                       .arg(snapshotView_->entry() ? snapshotView_->entry()->figures.events : 0)
                       .arg(snapshot_->loadMs, 0, 'f', 0));
    return;
  }
  if (data_->records == 0) {
    showMessage(tr("Run “%1” has no memory records.\n\nImported traces have them when torch.profiler ran with "
                   "profile_memory=True; runs of Shardscope's runtime always record them.")
                    .arg(QString::fromStdString(core::runLabel(data_->run.name, data_->run.id))));
    return;
  }
  stack_->setCurrentIndex(1);
  for (QWidget* w : std::initializer_list<QWidget*>{allocated_, reserved_, resetZoom_, deviceCombo_}) w->setEnabled(true);
  if (categoriesRank() >= 0)
    for (QWidget* w : std::initializer_list<QWidget*>{allocated_, reserved_, deviceCombo_}) w->setEnabled(false);
  updateInfo();
}

QString MemoryPage::messageText() const { return stack_->currentWidget() == message_ ? message_->text() : QString(); }

bool MemoryPage::breakdownShown() const { return !breakdown_->isHidden() && breakdown_->groupCount() > 0; }

void MemoryPage::showData(std::shared_ptr<const MemoryRunData> d, std::shared_ptr<const SnapshotRunData> snapshot) {
  loaded_ = true;
  overlayRuns_.clear();
  peaksTable_->show();
  runPeaks_->hide();
  data_ = std::move(d);
  snapshot_ = snapshot && !snapshot->entries.empty() ? std::move(snapshot) : nullptr;
  snapshotView_->setData(snapshot_);
  snapshotButton_->setVisible(snapshot_ != nullptr);
  {
    // A run with a snapshot and no memory records opens on the snapshot.
    const QSignalBlocker block(snapshotButton_);
    snapshotButton_->setChecked(snapshot_ && data_->records == 0);
  }
  const MemoryRunData& data = *data_;
  {
    // The view: every rank, or one rank's memory by category (runtime runs).
    const QSignalBlocker block(viewCombo_);
    const int previous = viewCombo_->currentData().isValid() ? viewCombo_->currentData().toInt() : -1;
    viewCombo_->clear();
    viewCombo_->addItem(tr("every rank's total"), -1);
    std::set<int> stackRanks;
    for (const auto& st : data.categoryStacks) stackRanks.insert(st.timeline->rank);
    for (int rank : stackRanks) viewCombo_->addItem(tr("rank %1 by category").arg(rank), rank);
    const int keep = viewCombo_->findData(previous);
    viewCombo_->setCurrentIndex(keep >= 0 ? keep : 0);
  }
  viewLabel_->setVisible(viewCombo_->count() > 1);
  viewCombo_->setVisible(viewCombo_->count() > 1);
  showCurves();
  peaksModel_->setPeaks(data.peaks, data.origin);
  peaksTable_->resizeColumnsToContents();

  // Device filter: one entry per device type; GPU memory first when there is any.
  std::set<int> types;
  for (const auto& s : data.series) types.insert(s.deviceType);
  {
    const QSignalBlocker block(deviceCombo_);
    deviceCombo_->clear();
    std::vector<int> ordered(types.begin(), types.end());
    std::stable_partition(ordered.begin(), ordered.end(), [](int t) { return t != 0; });
    for (int t : ordered) deviceCombo_->addItem(deviceTypeName(t), t);
    deviceCombo_->setCurrentIndex(0);
  }
  deviceLabel_->setVisible(types.size() > 1);
  deviceCombo_->setVisible(types.size() > 1);
  applyDeviceFilter();
  applySessionRange();
  chart_->rebucket();  // drawn when the page stops being busy
  updateBreakdown();
  showContent();
  std::set<int> ranks;
  for (const auto& s : data.series) ranks.insert(s.rank);
  Q_EMIT statusMessage(tr("run “%1”: %2 memory records on %3 rank(s)")
                           .arg(QString::fromStdString(data.run.name), charts::formatNumber(static_cast<double>(data.records)))
                           .arg(ranks.size()));
}

void MemoryPage::showCategories(int rank) {
  const int i = viewCombo_->findData(rank);
  if (i < 0 || i == viewCombo_->currentIndex()) return;
  viewCombo_->setCurrentIndex(i);
  showCurves();
  chart_->rebucket();
  updateInfo();
}

int MemoryPage::categoriesRank() const {
  return !overlay_ && viewCombo_->isVisible() && viewCombo_->currentData().isValid() ? viewCombo_->currentData().toInt() : -1;
}

void MemoryPage::showCurves() {
  if (!data_) return;
  const MemoryRunData& data = *data_;
  const int categoryRank = viewCombo_->currentData().isValid() ? viewCombo_->currentData().toInt() : -1;
  if (categoryRank >= 0) {
    // One rank by category: the running sums stacked (parameters at the bottom), its peak on top.
    std::vector<charts::MemoryChart::Series> series;
    std::vector<charts::MemoryChart::Peak> peaks;
    for (const auto& st : data.categoryStacks) {
      if (st.timeline->rank != categoryRank) continue;
      const std::size_t first = series.size();
      for (std::size_t k = 0; k < st.cumulative.size(); ++k) {
        charts::MemoryChart::Series cs;
        const core::MemoryCategory c = st.timeline->categories[k];
        cs.name = describe::qs(std::string(core::memoryCategoryLabel(c)));
        if (st.timeline->deviceType != 0)
          cs.name += QStringLiteral(" · ") + MemoryPeaksModel::deviceName(st.timeline->deviceType, st.timeline->deviceId);
        cs.color = charts::memoryCategoryColor(c);
        cs.allocated = st.cumulative[k];
        cs.stacked = true;
        series.push_back(std::move(cs));
      }
      for (const auto& p : data.peaks) {
        if (p.rank != categoryRank || p.deviceType != st.timeline->deviceType || p.deviceId != st.timeline->deviceId ||
            series.size() == first)
          continue;
        charts::MemoryChart::Peak a;
        a.series = static_cast<int>(series.size()) - 1;
        a.atNs = p.allocatedAtNs;
        a.bytes = static_cast<double>(p.peakAllocatedBytes);
        QStringList lines{tr("rank %1 peak %2").arg(p.rank).arg(charts::formatBytes(a.bytes, 1))};
        QStringList tip{tr("rank %1: peak allocated %2 at %3 ms since the run start")
                            .arg(p.rank)
                            .arg(charts::formatBytes(a.bytes, 2),
                                 charts::formatNumber(static_cast<double>(p.allocatedAtNs - data.origin) / 1e6, 3))};
        for (const auto& [c, bytes] : st.timeline->at(p.allocatedAtNs))
          if (bytes > 0)
            tip << tr("%1: %2").arg(describe::qs(std::string(core::memoryCategoryLabel(c))),
                                    charts::formatBytes(static_cast<double>(bytes), 2));
        const QString phase = phaseText(p);
        if (!phase.isEmpty()) lines << phase;
        a.label = lines.join(QLatin1Char('\n'));
        a.tooltip = tip.join(QLatin1Char('\n'));
        peaks.push_back(a);
      }
    }
    chart_->setSeries(data.origin, data.end, std::move(series), std::move(peaks), {});
    chart_->xAxis->setLabel(tr("time since run start (ms)"));
    chart_->setShowAllocated(true);
    chart_->setShowReserved(false);
    allocated_->setEnabled(false);
    reserved_->setEnabled(false);
    return;
  }
  allocated_->setEnabled(true);
  reserved_->setEnabled(true);
  // The chart gets the samples (moved: the page keeps only the peaks and metadata).
  std::map<std::pair<int, int>, int> perRankType;  // (rank, device type) -> series count
  for (const auto& s : data.series) ++perRankType[{s.rank, s.deviceType}];
  std::vector<charts::MemoryChart::Series> series;
  for (const auto& s : data.series) {
    charts::MemoryChart::Series cs;
    cs.name = perRankType[{s.rank, s.deviceType}] > 1
                  ? tr("rank %1 · %2").arg(s.rank).arg(MemoryPeaksModel::deviceName(s.deviceType, s.deviceId))
                  : tr("rank %1").arg(s.rank);
    cs.color = charts::seriesColor(s.rank);
    cs.allocated = s.allocated;
    cs.reserved = s.reserved;
    series.push_back(std::move(cs));
  }
  auto seriesOf = [&](const core::MemoryPeak& p) {
    for (std::size_t i = 0; i < data.series.size(); ++i)
      if (data.series[i].rank == p.rank && data.series[i].deviceType == p.deviceType && data.series[i].deviceId == p.deviceId)
        return static_cast<int>(i);
    return -1;
  };
  std::vector<charts::MemoryChart::Peak> allocatedPeaks, reservedPeaks;
  for (const auto& p : data.peaks) {
    const int si = seriesOf(p);
    const QString who = si >= 0 ? series[static_cast<std::size_t>(si)].name : tr("rank %1").arg(p.rank);
    const double atMs = static_cast<double>(p.allocatedAtNs - data.origin) / 1e6;
    const QString phase = phaseText(p);
    charts::MemoryChart::Peak a;
    a.series = si;
    a.atNs = p.allocatedAtNs;
    a.bytes = static_cast<double>(p.peakAllocatedBytes);
    QStringList lines;
    lines << tr("%1 peak %2").arg(who, charts::formatBytes(a.bytes, 1));
    lines << (p.step ? tr("%1 · step %2").arg(charts::formatMs(atMs)).arg(*p.step) : charts::formatMs(atMs));
    if (!phase.isEmpty()) lines << phase;
    a.label = lines.join(QLatin1Char('\n'));
    a.tooltip = tr("%1: peak allocated %2 (%3 bytes)\nat %4 ms since the run start%5%6%7")
                    .arg(who, charts::formatBytes(a.bytes, 2), charts::formatNumber(a.bytes), charts::formatNumber(atMs, 3),
                         p.step ? tr("\nstep %1").arg(*p.step) : QString(),
                         p.annotation.empty() ? QString() : tr("\nphase: %1").arg(QString::fromStdString(p.annotation)),
                         p.operation.empty() ? QString() : tr("\noperation: %1").arg(QString::fromStdString(p.operation)));
    allocatedPeaks.push_back(a);
    charts::MemoryChart::Peak r;
    r.series = si;
    r.atNs = p.reservedAtNs;
    r.bytes = static_cast<double>(p.peakReservedBytes);
    const double rMs = static_cast<double>(p.reservedAtNs - data.origin) / 1e6;
    r.label = tr("%1 reserved peak %2\n%3").arg(who, charts::formatBytes(r.bytes, 1), charts::formatMs(rMs));
    r.tooltip = tr("%1: peak reserved %2 (%3 bytes)\nat %4 ms since the run start")
                    .arg(who, charts::formatBytes(r.bytes, 2), charts::formatNumber(r.bytes), charts::formatNumber(rMs, 3));
    reservedPeaks.push_back(r);
  }
  chart_->setSeries(data.origin, data.end, std::move(series), std::move(allocatedPeaks), std::move(reservedPeaks));
  chart_->xAxis->setLabel(tr("time since run start (ms)"));
  chart_->setShowAllocated(allocated_->isChecked());
  chart_->setShowReserved(reserved_->isChecked());
  applyDeviceFilter();
}

void MemoryPage::applySessionRange() {
  const auto r = session()->timeRange();
  if (!r || overlay_ || !data_ || r->run != current_ || data_->records == 0) return;
  chart_->zoomTo(r->startNs, r->endNs);
}

void MemoryPage::applyDeviceFilter() {
  if (!data_ || (viewCombo_->currentData().isValid() && viewCombo_->currentData().toInt() >= 0)) return;  // one rank by category
  const int type = deviceCombo_->currentData().isValid() ? deviceCombo_->currentData().toInt() : -1;
  std::vector<bool> visible;
  for (const auto& s : data_->series) visible.push_back(type < 0 || s.deviceType == type);
  chart_->setSeriesVisible(visible);
}

void MemoryPage::updateBreakdown() {
  bool runtime = data_ && data_->run.source == core::RunSource::Runtime;
  std::vector<const core::MemoryPeak*> withBreakdown;
  QStringList groups;
  if (data_)
    for (const auto& p : data_->peaks)
      if (!p.breakdown.empty()) {
        withBreakdown.push_back(&p);
        groups << tr("rank %1").arg(p.rank);
      }
  for (const auto& o : overlayRuns_) {  // several runs: each at its own peak
    runtime = runtime || o.data->run.source == core::RunSource::Runtime;
    if (o.peak < 0) continue;
    const auto& p = o.data->peaks[static_cast<std::size_t>(o.peak)];
    if (p.breakdown.empty()) continue;
    withBreakdown.push_back(&p);
    groups << o.label;
  }
  if (!withBreakdown.empty()) {
    std::vector<charts::StackedBarChart::Category> cats;
    for (const core::MemoryCategory c : core::memoryCategories())
      cats.push_back({describe::qs(std::string(core::memoryCategoryLabel(c))), charts::memoryCategoryColor(c), {}});
    for (const core::MemoryPeak* p : withBreakdown) {
      for (std::size_t k = 0; k < cats.size(); ++k) {
        std::int64_t v = 0;
        for (const auto& [name, bytes] : p->breakdown)
          if (name == core::memoryCategoryKey(core::memoryCategories()[k])) v = bytes;
        cats[k].bytes.push_back(v);
      }
    }
    // Why (core::explainPeak / explainPeakDifference): one run's largest part and its knob, or each
    // run against the first (the baseline) at their own peaks.
    explanations_.clear();
    if (overlayRuns_.empty()) {
      if (data_ && !withBreakdown.empty()) {
        const core::MemoryPeak* top = withBreakdown.front();
        for (const core::MemoryPeak* p : withBreakdown)
          if (p->peakAllocatedBytes > top->peakAllocatedBytes) top = p;
        if (auto e = core::explainPeak(*top, core::configKnobs(data_->run)))
          explanations_ << tr("rank %1: ").arg(top->rank) + describe::qs(e->text);
      }
    } else {
      const OverlayRun* base = nullptr;
      for (const auto& o : overlayRuns_) {
        if (o.peak < 0) continue;
        const auto& p = o.data->peaks[static_cast<std::size_t>(o.peak)];
        if (p.breakdown.empty()) continue;
        if (!base) {
          base = &o;
          if (auto e = core::explainPeak(p, core::configKnobs(o.data->run)))
            explanations_ << o.label + QStringLiteral(": ") + describe::qs(e->text);
          continue;
        }
        const auto& bp = base->data->peaks[static_cast<std::size_t>(base->peak)];
        const core::ConfigKnobs knobs = core::configKnobs(o.data->run);
        if (auto d = core::explainPeakDifference(bp, base->label.toStdString(), p, o.label.toStdString(), knobs))
          explanations_ << describe::qs(d->text);  // it names both runs
        else if (auto e = core::explainPeak(p, knobs))
          explanations_ << o.label + QStringLiteral(": ") + describe::qs(e->text);
      }
    }
    breakdown_->setStacks(overlayRuns_.empty() ? tr("Live memory at each rank's peak") : tr("Live memory at each run's peak"),
                          groups, cats);
    breakdown_->show();
    breakdownNote_->setText(tr("What the runtime's allocator held at the moment of the allocated peak.") +
                            (explanations_.isEmpty() ? QString() : QStringLiteral("\n") + explanations_.join(QLatin1Char('\n'))));
  } else {
    explanations_.clear();
    breakdown_->clearStacks(QString());
    breakdown_->hide();
    breakdownNote_->setText(runtime ? tr("This run stored no breakdown at its peaks.")
                                    : tr("The breakdown at the peak (parameters, gradients, optimizer state, activations, "
                                         "communication buffers) is measured by Shardscope's runtime; imported traces "
                                         "only carry the totals."));
  }
  modelState_->setRowCount(0);
  if (data_ && !data_->modelState.empty()) {
    modelState_->setRowCount(static_cast<int>(data_->modelState.size()));
    int row = 0;
    for (const auto& ms : data_->modelState) {
      auto cell = [&](int col, const QString& text, Qt::Alignment align = Qt::AlignRight | Qt::AlignVCenter) {
        auto* item = new QTableWidgetItem(text);
        item->setTextAlignment(align);
        modelState_->setItem(row, col, item);
        return item;
      };
      cell(0, QString::number(ms.rank));
      double total = 0;
      int col = 1;
      for (const auto& v : {ms.parameters, ms.gradients, ms.optimizer, ms.buffers}) {
        auto* item = cell(col++, v ? charts::formatBytes(*v, 1) : QStringLiteral("—"));
        if (v) {
          item->setToolTip(tr("%1 bytes").arg(charts::formatNumber(*v)));
          total += *v;
        }
      }
      auto* t = cell(5, charts::formatBytes(total, 1));
      t->setToolTip(tr("%1 bytes").arg(charts::formatNumber(total)));
      QFont f = t->font();
      f.setBold(true);
      t->setFont(f);
      ++row;
    }
    // Tall enough for up to 8 ranks without scrolling.
    const int rows = std::min(8, modelState_->rowCount());
    modelState_->setFixedHeight(modelState_->horizontalHeader()->sizeHint().height() +
                                rows * modelState_->verticalHeader()->defaultSectionSize() + 2 * modelState_->frameWidth());
    modelState_->show();
  } else {
    modelState_->hide();
  }
  breakdownPanel_->setVisible(true);
}

void MemoryPage::updateInfo() {
  if (!overlayRuns_.empty() || snapshotShown()) return;  // the overlay's and the snapshot's notes stay
  if (!data_ || data_->records == 0) {
    info_->clear();
    return;
  }
  qsizetype drawn = 0;
  for (int i = 0; i < chart_->seriesCount(); ++i) {
    if (chart_->allocatedGraph(i)->visible()) drawn += chart_->allocatedGraph(i)->dataCount();
    if (chart_->reservedGraph(i)->visible()) drawn += chart_->reservedGraph(i)->dataCount();
  }
  info_->setText(
      tr("%1 records · %2 points drawn")
          .arg(charts::formatNumber(static_cast<double>(data_->records)), charts::formatNumber(static_cast<double>(drawn))));
}

void MemoryPage::zoomToPeak(int row) {
  if (!data_ || row < 0 || row >= peaksModel_->rowCount()) return;
  const core::MemoryPeak& p = peaksModel_->peakAt(row);
  const core::TimeNs span = std::max<core::TimeNs>(1000, (data_->end - data_->origin) / 20);
  chart_->zoomTo(p.allocatedAtNs - span / 2, p.allocatedAtNs + span / 2);
}

void MemoryPage::showOverlayData(std::vector<OverlayRun> runs) {
  loaded_ = true;
  data_.reset();
  snapshot_.reset();
  snapshotView_->clear();
  snapshotButton_->hide();
  overlayRuns_ = std::move(runs);
  peaksModel_->clear();
  peaksTable_->hide();
  runPeaks_->show();
  std::vector<charts::MemoryChart::Series> series;
  std::vector<charts::MemoryChart::Peak> allocatedPeaks, reservedPeaks;
  core::TimeNs end = 0;
  std::uint64_t records = 0;
  for (std::size_t i = 0; i < overlayRuns_.size(); ++i) {
    const OverlayRun& o = overlayRuns_[i];
    records += o.data->records;
    if (o.series < 0) continue;
    const auto& sr = o.data->series[static_cast<std::size_t>(o.series)];
    const auto& p = o.data->peaks[static_cast<std::size_t>(o.peak)];
    charts::MemoryChart::Series cs;
    cs.name = tr("%1 · rank %2").arg(o.label).arg(sr.rank);
    if (sr.deviceType != 0) cs.name += QStringLiteral(" ") + MemoryPeaksModel::deviceName(sr.deviceType, sr.deviceId);
    cs.color = charts::seriesColor(static_cast<int>(i));
    cs.allocated = sr.allocated;
    cs.reserved = sr.reserved;
    cs.shiftNs = o.alignNs;
    end = std::max(end, o.data->end - o.alignNs);
    const int si = static_cast<int>(series.size());
    series.push_back(cs);
    const double atMs = static_cast<double>(p.allocatedAtNs - o.alignNs) / 1e6;
    charts::MemoryChart::Peak a;
    a.series = si;
    a.atNs = p.allocatedAtNs - o.alignNs;
    a.bytes = static_cast<double>(p.peakAllocatedBytes);
    QStringList lines{tr("%1 peak %2").arg(o.label, charts::formatBytes(a.bytes, 1))};
    lines << (p.step ? tr("%1 · step %2").arg(charts::formatMs(atMs)).arg(*p.step) : charts::formatMs(atMs));
    a.label = lines.join(QLatin1Char('\n'));
    a.tooltip = tr("%1, rank %2: peak allocated %3\n%4 ms after the start of its first counted step")
                    .arg(o.label)
                    .arg(p.rank)
                    .arg(charts::formatBytes(a.bytes, 2), charts::formatNumber(atMs, 3));
    allocatedPeaks.push_back(a);
    charts::MemoryChart::Peak r;
    r.series = si;
    r.atNs = p.reservedAtNs - o.alignNs;
    r.bytes = static_cast<double>(p.peakReservedBytes);
    r.label = tr("%1 reserved peak %2").arg(o.label, charts::formatBytes(r.bytes, 1));
    r.tooltip = r.label;
    reservedPeaks.push_back(r);
  }
  chart_->setSeries(0, end, std::move(series), std::move(allocatedPeaks), std::move(reservedPeaks));
  chart_->xAxis->setLabel(tr("time since the start of each run's first counted step (ms)"));
  chart_->setShowAllocated(allocated_->isChecked());
  chart_->setShowReserved(reserved_->isChecked());
  deviceLabel_->hide();
  deviceCombo_->hide();
  chart_->rebucket();

  // One row per run: the run figure (RunFigures: the peak every surface shows) and its moment.
  runPeaks_->setRowCount(static_cast<int>(overlayRuns_.size()));
  const auto base = overlayRuns_.empty() ? std::nullopt : overlayRuns_.front().figures.peakAllocatedBytes;
  for (int row = 0; row < static_cast<int>(overlayRuns_.size()); ++row) {
    const OverlayRun& o = overlayRuns_[static_cast<std::size_t>(row)];
    const auto& f = o.figures;
    auto cell = [&](int col, const QString& text, Qt::Alignment align = Qt::AlignRight | Qt::AlignVCenter) {
      auto* item = new QTableWidgetItem(text);
      item->setTextAlignment(align);
      runPeaks_->setItem(row, col, item);
      return item;
    };
    cell(0, o.label, Qt::AlignLeft | Qt::AlignVCenter)->setForeground(charts::seriesColor(row));
    cell(1, f.peakAllocatedBytes ? charts::formatBytes(static_cast<double>(*f.peakAllocatedBytes), 2) + QStringLiteral(" ") +
                                       (f.peakDevice == "GPU" ? tr("(GPU)") : tr("(host)"))
                                 : QStringLiteral("—"));
    QString change;
    if (row > 0 && base && *base > 0 && f.peakAllocatedBytes) {
      const double d =
          100.0 * (static_cast<double>(*f.peakAllocatedBytes) - static_cast<double>(*base)) / static_cast<double>(*base);
      change =
          QStringLiteral("%1%2 %").arg(d >= 0 ? QStringLiteral("+") : QString(), QLocale(QLocale::English).toString(d, 'f', 1));
    }
    cell(2, change);
    cell(3, f.peakReservedBytes && *f.peakReservedBytes > 0 ? charts::formatBytes(static_cast<double>(*f.peakReservedBytes), 2)
                                                            : QStringLiteral("—"));
    if (o.peak >= 0) {
      const auto& p = o.data->peaks[static_cast<std::size_t>(o.peak)];
      cell(4, QString::number(p.rank));
      cell(5, p.step ? QString::number(*p.step) : QStringLiteral("—"));
      cell(6, p.step && o.peakStepStartNs
                  ? charts::formatNumber(static_cast<double>(p.allocatedAtNs - *o.peakStepStartNs) / 1e6, 3)
                  : QStringLiteral("—"));
      cell(7, phaseText(p), Qt::AlignLeft | Qt::AlignVCenter);
    } else {
      cell(7, tr("no memory records"), Qt::AlignLeft | Qt::AlignVCenter);
    }
  }
  runPeaks_->resizeColumnsToContents();
  updateBreakdown();
  if (records == 0) {
    showMessage(tr("None of the %1 selected runs has memory records.").arg(overlayRuns_.size()));
  } else {
    stack_->setCurrentIndex(1);
    for (QWidget* w : std::initializer_list<QWidget*>{allocated_, reserved_, resetZoom_}) w->setEnabled(true);
  }
  info_->setText(tr("%1 runs · each aligned at the start of its first counted step (0 ms)").arg(overlayRuns_.size()));
  Q_EMIT statusMessage(tr("%1 runs overlaid").arg(overlayRuns_.size()));
}

QJsonObject MemoryPage::describe() const {
  using namespace describe;
  QJsonObject out = Page::describe();
  out[QStringLiteral("mode")] = overlay_ ? QStringLiteral("overlay") : QStringLiteral("run");
  QJsonArray series;
  for (int i = 0; i < chart_->seriesCount(); ++i)
    series.append(QJsonObject{{QStringLiteral("name"), chart_->allocatedGraph(i)->name()},
                              {QStringLiteral("length"), chart_->allocatedGraph(i)->dataCount()},
                              {QStringLiteral("visible"), chart_->allocatedGraph(i)->visible()}});
  out[QStringLiteral("series")] = series;
  QJsonArray markers;
  for (int i = 0; i < chart_->markerCount(); ++i)
    markers.append(QJsonObject{{QStringLiteral("bytes"), chart_->markerPeak(i).bytes},
                               {QStringLiteral("label"), chart_->markerPeak(i).label}});
  out[QStringLiteral("peak_markers")] = markers;
  QJsonArray runs;
  if (overlay_) {
    for (const auto& o : overlayRuns_) {
      QJsonObject r = runRef(o.id, o.label);
      r[QStringLiteral("figures")] =
          QJsonArray{figure(QStringLiteral("peak_allocated_bytes"), number(o.figures.peakAllocatedBytes), QStringLiteral("B")),
                     figure(QStringLiteral("peak_reserved_bytes"), number(o.figures.peakReservedBytes), QStringLiteral("B"))};
      r[QStringLiteral("peak_device")] = qs(o.figures.peakDevice);
      if (o.peak >= 0) {
        const auto& p = o.data->peaks[static_cast<std::size_t>(o.peak)];
        r[QStringLiteral("peak_rank")] = p.rank;
        r[QStringLiteral("peak_step")] = p.step ? QJsonValue(static_cast<double>(*p.step)) : QJsonValue();
      }
      r[QStringLiteral("aligned_at_ns")] = static_cast<double>(o.alignNs);
      runs.append(r);
    }
  } else if (data_) {
    QJsonObject r = runRef(data_->run.id, qs(core::runLabel(data_->run.name, data_->run.id)));
    r[QStringLiteral("records")] = static_cast<double>(data_->records);
    runs.append(r);
  }
  out[QStringLiteral("runs")] = runs;
  QJsonArray rows;
  if (overlay_) {
    for (int r = 0; r < runPeaks_->rowCount(); ++r) {
      QJsonArray cells;
      for (int c = 0; c < runPeaks_->columnCount(); ++c)
        cells.append(runPeaks_->item(r, c) ? runPeaks_->item(r, c)->text() : QString());
      rows.append(cells);
    }
  } else {
    for (const auto& p : peaksModel_->peaks())
      rows.append(QJsonObject{{QStringLiteral("rank"), p.rank},
                              {QStringLiteral("device_type"), p.deviceType},
                              {QStringLiteral("peak_allocated_bytes"), static_cast<double>(p.peakAllocatedBytes)},
                              {QStringLiteral("peak_reserved_bytes"), static_cast<double>(p.peakReservedBytes)},
                              {QStringLiteral("step"), p.step ? QJsonValue(static_cast<double>(*p.step)) : QJsonValue()}});
  }
  out[QStringLiteral("table_rows")] = rows;
  // The snapshots' figures as core writes them (analyze --json's "memory_snapshots").
  QJsonArray snaps;
  if (snapshot_)
    for (const auto& e : snapshot_->entries)
      snaps.append(QJsonDocument::fromJson(QByteArray::fromStdString(e.figures.toJson().dump())).object());
  out[QStringLiteral("memory_snapshots")] = snaps;
  out[QStringLiteral("snapshot_shown")] = snapshotShown();
  out[QStringLiteral("peak_explanations")] = QJsonArray::fromStringList(explanations_);
  // The breakdown over time: the ranks that have it, the one shown by category (-1: every rank's
  // total) and, for it, what each category held at the rank's allocated peak (read off the curves).
  QJsonArray stackRanks;
  QJsonArray atPeak;
  if (data_ && !overlay_) {
    for (const auto& st : data_->categoryStacks) stackRanks.append(st.timeline->rank);
    const int shown = categoriesRank();
    for (const auto& st : data_->categoryStacks) {
      if (st.timeline->rank != shown) continue;
      for (const auto& p : data_->peaks) {
        if (p.rank != shown || p.deviceType != st.timeline->deviceType || p.deviceId != st.timeline->deviceId) continue;
        for (const auto& [c, bytes] : st.timeline->at(p.allocatedAtNs))
          atPeak.append(QJsonObject{{QStringLiteral("category"), qs(std::string(core::memoryCategoryKey(c)))},
                                    {QStringLiteral("label"), qs(std::string(core::memoryCategoryLabel(c)))},
                                    {QStringLiteral("bytes"), static_cast<double>(bytes)}});
      }
    }
  }
  out[QStringLiteral("category_ranks")] = stackRanks;
  out[QStringLiteral("category_rank_shown")] = categoriesRank();
  out[QStringLiteral("categories_at_peak")] = atPeak;
  out[QStringLiteral("message")] = messageText();
  return out;
}

}  // namespace shardscope::ui
