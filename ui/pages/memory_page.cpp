#include "ui/pages/memory_page.h"

#include <QCheckBox>
#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
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

#include "ui/charts/chart_style.h"
#include "ui/charts/memory_chart.h"
#include "ui/charts/stacked_bar_chart.h"
#include "ui/common/background.h"
#include "ui/models/memory_peaks_model.h"

namespace shardscope::ui {
namespace {

struct BreakdownCategory {
  const char* key;
  const char* label;
  QRgb color;
};
constexpr BreakdownCategory kBreakdown[] = {
    {"parameters", "parameters", 0x4e79a7},    {"gradients", "gradients", 0xf28e2b},
    {"optimizer_state", "optimizer state", 0x59a14f}, {"activations", "activations", 0xe15759},
    {"comm_buffers", "comm buffers", 0x76b7b2}, {"other", "other", 0xbab0ac},
};

QString deviceTypeName(int type) {
  switch (type) {
    case 0: return QObject::tr("CPU");
    case 1: return QObject::tr("GPU (CUDA)");
    case 6: return QObject::tr("GPU (HIP)");
    default: return QObject::tr("device type %1").arg(type);
  }
}

QString phaseText(const core::MemoryPeak& p) {
  QStringList parts;
  if (!p.annotation.empty()) parts << QString::fromStdString(p.annotation);
  if (!p.operation.empty() && p.operation != p.annotation) parts << QString::fromStdString(p.operation);
  return parts.join(QStringLiteral(" › "));
}

}  // namespace

MemoryRunData loadMemoryRun(core::TraceStore& store, core::Id runId, const std::vector<core::Id>& contextRuns,
                            const core::CancelToken* cancel, const core::ProgressFn& progress) {
  MemoryRunData d;
  for (core::Id id : contextRuns)
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
    store.forEachMemoryEvent(rank.id, [&](const core::MemoryEvent& m) {
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
    }, /*totalsOnly=*/true);
    d.records += n;
    ++done;
    for (auto& r : raw) {
      if (cancel) cancel->throwIfCancelled();
      MemoryRunData::Series s;
      s.rank = rank.rank;
      s.deviceType = r.deviceType;
      s.deviceId = r.deviceId;
      s.allocated = charts::MaxPyramid(std::move(r.allocated));
      s.reserved = charts::MaxPyramid(std::move(r.reserved));
      d.series.push_back(std::move(s));
    }
  }
  d.origin = summary.startNs.value_or(first.value_or(0));
  if (first) d.origin = std::min(d.origin, *first);
  d.end = summary.endNs.value_or(last.value_or(d.origin));
  if (last) d.end = std::max(d.end, *last);
  if (cancel) cancel->throwIfCancelled();
  if (progress) progress(core::Progress{"finding the peaks", done, total, "ranks"});
  if (d.records > 0) d.peaks = core::computeMemoryPeaks(store, runId);
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

  auto* bar = new QHBoxLayout;
  auto* runLabel = new QLabel(tr("Run:"), this);
  runCombo_ = new QComboBox(this);
  runCombo_->setSizeAdjustPolicy(QComboBox::AdjustToContents);
  runLabel->setBuddy(runCombo_);
  deviceLabel_ = new QLabel(tr("Device:"), this);
  deviceCombo_ = new QComboBox(this);
  deviceLabel_->setBuddy(deviceCombo_);
  allocated_ = new QCheckBox(tr("Allocated"), this);
  allocated_->setChecked(true);
  allocated_->setToolTip(tr("Memory held by live tensors (Total Allocated)"));
  reserved_ = new QCheckBox(tr("Reserved"), this);
  reserved_->setToolTip(tr("Memory reserved by the caching allocator (Total Reserved), dashed"));
  resetZoom_ = new QToolButton(this);
  resetZoom_->setText(tr("Reset zoom"));
  resetZoom_->setToolTip(tr("Show the whole run (wheel: zoom the time axis, drag: pan)"));
  info_ = new QLabel(this);
  info_->setStyleSheet(QStringLiteral("color: #6a737d;"));
  bar->addWidget(runLabel);
  bar->addWidget(runCombo_);
  bar->addSpacing(12);
  bar->addWidget(deviceLabel_);
  bar->addWidget(deviceCombo_);
  bar->addSpacing(12);
  bar->addWidget(allocated_);
  bar->addWidget(reserved_);
  bar->addSpacing(12);
  bar->addWidget(resetZoom_);
  bar->addStretch(1);
  bar->addWidget(info_);
  layout->addLayout(bar);

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
  modelState_->setHorizontalHeaderLabels({tr("Rank"), tr("Parameters"), tr("Gradients"), tr("Optimizer"), tr("Buffers"), tr("Model state")});
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
  layout->addWidget(stack_, 1);

  connect(runCombo_, &QComboBox::activated, this, &MemoryPage::showRun);
  connect(deviceCombo_, &QComboBox::currentIndexChanged, this, &MemoryPage::applyDeviceFilter);
  connect(allocated_, &QCheckBox::toggled, chart_, &charts::MemoryChart::setShowAllocated);
  connect(reserved_, &QCheckBox::toggled, chart_, &charts::MemoryChart::setShowReserved);
  connect(resetZoom_, &QToolButton::clicked, chart_, &charts::MemoryChart::resetZoom);
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

void MemoryPage::setContext(const QString& dbPath, const QList<core::Id>& runs) {
  if (dbPath == dbPath_ && runs == runs_ && (loaded_ || busy())) return;
  const bool keepRun = dbPath == dbPath_ && runs.contains(current_);
  dbPath_ = dbPath;
  runs_ = runs;
  if (!keepRun) current_ = runs.isEmpty() ? 0 : runs.first();
  {
    const QSignalBlocker block(runCombo_);
    runCombo_->clear();
    for (core::Id id : runs_) runCombo_->addItem(tr("run %1").arg(id), QVariant::fromValue<qlonglong>(id));
    runCombo_->setCurrentIndex(static_cast<int>(runs_.indexOf(current_)));
  }
  reload();
}

void MemoryPage::showRun(int index) {
  if (index < 0 || index >= runs_.size()) return;
  if (runs_[index] == current_ && (loaded_ || busy())) return;
  current_ = runs_[index];
  reload();
}

void MemoryPage::reload() {
  if (task_) task_->cancel();
  task_ = nullptr;
  ++generation_;
  loaded_ = false;
  error_.clear();
  runCombo_->setEnabled(runs_.size() > 1);
  if (dbPath_.isEmpty() || current_ == 0) {
    data_.reset();
    chart_->clearSeries();
    peaksModel_->clear();
    showMessage(dbPath_.isEmpty() ? tr("Open a database and select a run to see its memory.")
                                  : tr("Select a run in the run browser to see its memory over time."));
    setBusy(false);
    return;
  }
  start();
}

void MemoryPage::start() {
  const core::Id runId = current_;
  const std::vector<core::Id> context(runs_.begin(), runs_.end());
  const unsigned generation = generation_;
  showMessage(tr("Loading the memory records of run %1…").arg(runId));
  task_ = BackgroundTask::start<MemoryRunData>(
      this, dbPath_,
      [runId, context](core::TraceStore& store, core::CancelToken& cancel, const core::ProgressFn& progress) {
        return loadMemoryRun(store, runId, context, &cancel, progress);
      },
      [this, generation](MemoryRunData d) {
        if (generation != generation_) return;
        task_ = nullptr;
        showData(std::move(d));
        setBusy(false);
      },
      [this, generation](QString message) {
        if (generation != generation_) return;
        task_ = nullptr;
        error_ = message;
        data_.reset();
        chart_->clearSeries();
        peaksModel_->clear();
        showMessage(tr("Could not load the memory records: %1").arg(message));
        Q_EMIT errorMessage(tr("Memory: %1").arg(message));
        setBusy(false);
      });
  connect(task_, &BackgroundTask::progress, this, [this, generation](int pct, const QString& stage) {
    if (generation == generation_) Q_EMIT progress(pct, stage);
  });
  setBusy(true);
  Q_EMIT statusMessage(tr("loading run %1…").arg(runId));
}

void MemoryPage::cancelLoad() {
  if (!task_) return;
  task_->cancel();
  task_ = nullptr;
  ++generation_;
  if (!data_) showMessage(tr("Loading was cancelled."));
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

QString MemoryPage::messageText() const { return stack_->currentWidget() == message_ ? message_->text() : QString(); }

bool MemoryPage::breakdownShown() const { return !breakdown_->isHidden() && breakdown_->groupCount() > 0; }

void MemoryPage::showData(MemoryRunData d) {
  loaded_ = true;
  {
    const QSignalBlocker block(runCombo_);
    for (const auto& [id, name] : d.runNames) {
      const int i = runCombo_->findData(QVariant::fromValue<qlonglong>(id));
      if (i >= 0) runCombo_->setItemText(i, QString::fromStdString(core::runLabel(name, id)));
    }
  }
  data_ = std::move(d);
  MemoryRunData& data = *data_;

  // The chart gets the samples (moved: the page keeps only the peaks and metadata).
  std::map<std::pair<int, int>, int> perRankType;  // (rank, device type) -> series count
  for (const auto& s : data.series) ++perRankType[{s.rank, s.deviceType}];
  std::vector<charts::MemoryChart::Series> series;
  for (auto& s : data.series) {
    charts::MemoryChart::Series cs;
    cs.name = perRankType[{s.rank, s.deviceType}] > 1
                  ? tr("rank %1 · %2").arg(s.rank).arg(MemoryPeaksModel::deviceName(s.deviceType, s.deviceId))
                  : tr("rank %1").arg(s.rank);
    cs.color = charts::seriesColor(s.rank);
    cs.allocated = std::move(s.allocated);
    cs.reserved = std::move(s.reserved);
    s.allocated = charts::MaxPyramid();
    s.reserved = charts::MaxPyramid();
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
  chart_->setShowAllocated(allocated_->isChecked());
  chart_->setShowReserved(reserved_->isChecked());
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
  chart_->rebucket();  // drawn when the page stops being busy
  updateBreakdown();

  if (data.records == 0) {
    showMessage(tr("Run “%1” has no memory records.\n\nImported traces have them when torch.profiler ran with "
                   "profile_memory=True; runs of Shardscope's runtime always record them.")
                    .arg(QString::fromStdString(data.run.name)));
  } else {
    stack_->setCurrentIndex(1);
    for (QWidget* w : std::initializer_list<QWidget*>{allocated_, reserved_, resetZoom_, deviceCombo_}) w->setEnabled(true);
  }
  updateInfo();
  std::set<int> ranks;
  for (const auto& s : data.series) ranks.insert(s.rank);
  Q_EMIT statusMessage(tr("run “%1”: %2 memory records on %3 rank(s)")
                           .arg(QString::fromStdString(data.run.name), charts::formatNumber(static_cast<double>(data.records)))
                           .arg(ranks.size()));
}

void MemoryPage::applyDeviceFilter() {
  if (!data_) return;
  const int type = deviceCombo_->currentData().isValid() ? deviceCombo_->currentData().toInt() : -1;
  std::vector<bool> visible;
  for (const auto& s : data_->series) visible.push_back(type < 0 || s.deviceType == type);
  chart_->setSeriesVisible(visible);
}

void MemoryPage::updateBreakdown() {
  const bool runtime = data_ && data_->run.source == core::RunSource::Runtime;
  std::vector<const core::MemoryPeak*> withBreakdown;
  if (data_)
    for (const auto& p : data_->peaks)
      if (!p.breakdown.empty()) withBreakdown.push_back(&p);
  if (!withBreakdown.empty()) {
    QStringList groups;
    std::vector<charts::StackedBarChart::Category> cats;
    for (const auto& c : kBreakdown) cats.push_back({tr(c.label), QColor::fromRgb(c.color), {}});
    for (const core::MemoryPeak* p : withBreakdown) {
      groups << tr("rank %1").arg(p->rank);
      for (std::size_t k = 0; k < std::size(kBreakdown); ++k) {
        std::int64_t v = 0;
        for (const auto& [name, bytes] : p->breakdown)
          if (name == kBreakdown[k].key) v = bytes;
        cats[k].bytes.push_back(v);
      }
    }
    breakdown_->setStacks(tr("Live memory at each rank's peak"), groups, cats);
    breakdown_->show();
    breakdownNote_->setText(tr("What the runtime's allocator held at the moment of the allocated peak."));
  } else {
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
  if (!data_ || data_->records == 0) {
    info_->clear();
    return;
  }
  qsizetype drawn = 0;
  for (int i = 0; i < chart_->seriesCount(); ++i) {
    if (chart_->allocatedGraph(i)->visible()) drawn += chart_->allocatedGraph(i)->dataCount();
    if (chart_->reservedGraph(i)->visible()) drawn += chart_->reservedGraph(i)->dataCount();
  }
  info_->setText(tr("%1 records · %2 points drawn").arg(charts::formatNumber(static_cast<double>(data_->records)),
                                                      charts::formatNumber(static_cast<double>(drawn))));
}

void MemoryPage::zoomToPeak(int row) {
  if (!data_ || row < 0 || row >= peaksModel_->rowCount()) return;
  const core::MemoryPeak& p = peaksModel_->peakAt(row);
  const core::TimeNs span = std::max<core::TimeNs>(1000, (data_->end - data_->origin) / 20);
  chart_->zoomTo(p.allocatedAtNs - span / 2, p.allocatedAtNs + span / 2);
}

}  // namespace shardscope::ui
