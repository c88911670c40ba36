#include "ui/pages/describe.h"
#include "ui/pages/communication_page.h"
#include "ui/common/flow_layout.h"

#include <QComboBox>
#include <QFont>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSplitter>
#include <QStackedWidget>
#include <QTableView>
#include <QTableWidget>
#include <QTextBrowser>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "core/analysis/comparison.h"
#include "core/analysis/run_analysis.h"
#include "ui/charts/chart_style.h"
#include "ui/charts/qcp.h"
#include "ui/common/background.h"

namespace shardscope::ui {

// What the background task hands over.
struct CommunicationPage::Loaded {
  core::RunId runId;
  std::vector<std::pair<core::RunId, QString>> names;  // every run of the selection
  QString info;                                        // "fsdp · runtime · 2 ranks · completed"
  std::vector<core::CollectiveStats> collectives;
  std::vector<core::StepBreakdown> steps;
  std::vector<BottleneckRow> bottlenecks;
  std::optional<core::CollectiveComparison> runsCompared;  // two or more runs selected
  core::StragglerReport stragglers;
  QStringList runLabels;  // "ddp #7", in the selection's order
};

namespace {

constexpr std::size_t kBottleneckLimit = 50;

const QColor kExposedColor(0xd6, 0x4f, 0x3f);
const QColor kOverlappedColor(0x9c, 0xb8, 0xd9);
const QColor kOverlapLineColor(0x1d, 0x4e, 0x89);

QLabel* sectionTitle(const QString& text) {
  auto* l = new QLabel(text);
  QFont f = l->font();
  f.setBold(true);
  f.setPointSizeF(f.pointSizeF() * 1.05);
  l->setFont(f);
  return l;
}

QTableView* makeTable(QAbstractItemModel* model) {
  auto* v = new QTableView;
  v->setModel(model);
  v->setSortingEnabled(true);
  v->setSelectionBehavior(QAbstractItemView::SelectRows);
  v->setSelectionMode(QAbstractItemView::SingleSelection);
  v->setAlternatingRowColors(true);
  v->setWordWrap(false);
  v->setEditTriggers(QAbstractItemView::NoEditTriggers);
  v->verticalHeader()->setVisible(false);
  v->verticalHeader()->setDefaultSectionSize(v->fontMetrics().height() + 8);
  v->horizontalHeader()->setHighlightSections(false);
  v->horizontalHeader()->setStretchLastSection(false);
  v->horizontalHeader()->setDefaultAlignment(Qt::AlignRight | Qt::AlignVCenter);
  v->setShowGrid(false);
  return v;
}

// The event a bottleneck is, looked up on its rank's device lanes (Bottleneck does not carry its id).
core::Id findEventId(core::TraceStore& store, const std::vector<core::Rank>& ranks, const std::vector<core::Track>& tracks,
                     const core::Bottleneck& b) {
  core::RankId rankId;
  for (const auto& r : ranks)
    if (r.rank == b.rank) rankId = r.id;
  if (!rankId) return 0;
  for (const auto& t : tracks) {
    if (t.rankId != rankId || (t.kind != core::TrackKind::GpuStream && t.kind != core::TrackKind::Comm)) continue;
    for (const auto& e : store.eventsInWindow(t.id, b.startNs, b.startNs + 1))
      if (e.startNs == b.startNs && e.endNs - e.startNs == b.durNs && e.collOp == b.op) return e.id;
  }
  return 0;
}

}  // namespace

CommunicationPage::CommunicationPage(QWidget* parent) : Page(parent) {
  collectives_ = new CollectivesModel(this);
  proxy_ = new CollectivesFilterProxy(this);
  proxy_->setSourceModel(collectives_);
  bottlenecks_ = new BottleneckModel(this);
  bnProxy_ = new CollectivesFilterProxy(this);
  bnProxy_->setSourceModel(bottlenecks_);
  bnProxy_->setSortRole(BottleneckModel::SortRole);

  auto* outer = new QVBoxLayout(this);
  outer->setContentsMargins(0, 0, 0, 0);
  stack_ = new QStackedWidget;
  outer->addWidget(stack_);

  placeholder_ = new QLabel(tr("Select a run in the run browser to see its communication."));
  placeholder_->setAlignment(Qt::AlignCenter);
  placeholder_->setWordWrap(true);
  placeholder_->setStyleSheet(QStringLiteral("color: palette(mid); font-size: 11pt;"));
  stack_->addWidget(placeholder_);

  auto* content = new QWidget;
  auto* v = new QVBoxLayout(content);
  v->setContentsMargins(8, 8, 8, 8);
  v->setSpacing(6);
  stack_->addWidget(content);

  // Run choice.
  auto* top = new QHBoxLayout;
  top->addWidget(new QLabel(tr("Run:")));
  runCombo_ = new QComboBox;
  runCombo_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);  // long run names: the popup shows them
  runCombo_->setMinimumContentsLength(18);
  runCombo_->setToolTip(tr("The run shown; the first of the selection is the baseline"));
  top->addWidget(runCombo_);
  runInfo_ = new QLabel;
  runInfo_->setStyleSheet(QStringLiteral("color: palette(mid);"));
  top->addSpacing(8);
  top->addWidget(runInfo_, 1);
  v->addLayout(top);

  auto* split = new QSplitter(Qt::Vertical);
  split->setChildrenCollapsible(false);
  v->addWidget(split, 1);

  // 0. The selected runs side by side, per operation (core::compareCollectives): shown with two runs
  // or more.
  {
    runsPanel_ = new QWidget;
    auto* l = new QVBoxLayout(runsPanel_);
    l->setContentsMargins(0, 0, 0, 0);
    auto* bar = new QHBoxLayout;
    bar->addWidget(sectionTitle(tr("Collectives of the selected runs")));
    runsNote_ = new QLabel;
    runsNote_->setStyleSheet(QStringLiteral("color: palette(mid);"));
    runsNote_->setWordWrap(true);
    bar->addWidget(runsNote_, 1);
    l->addLayout(bar);
    runsTable_ = new QTableWidget;
    runsTable_->setObjectName(QStringLiteral("collectivesByRun"));
    runsTable_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    runsTable_->setSelectionBehavior(QAbstractItemView::SelectRows);
    runsTable_->verticalHeader()->hide();
    runsTable_->horizontalHeader()->setStretchLastSection(true);
    l->addWidget(runsTable_, 1);
    split->addWidget(runsPanel_);
    runsPanel_->hide();
  }

  // 1. Collectives table.
  {
    auto* w = new QWidget;
    auto* l = new QVBoxLayout(w);
    l->setContentsMargins(0, 0, 0, 0);
    auto* bar = new FlowLayout;  // wraps on a narrow window
    bar->addWidget(sectionTitle(tr("Collectives")));
    collCount_ = new QLabel;
    collCount_->setStyleSheet(QStringLiteral("color: palette(mid);"));
    bar->addWidget(collCount_);
    filter_ = new QLineEdit;
    filter_->setPlaceholderText(tr("Filter operation or group…"));
    filter_->setClearButtonEnabled(true);
    filter_->setMinimumWidth(200);
    bar->addWidget(filter_);
    bar->addWidget(new QLabel(tr("Operation:")));
    opCombo_ = new QComboBox;
    opCombo_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    opCombo_->setMinimumContentsLength(16);
    bar->addWidget(opCombo_);
    bar->addWidget(new QLabel(tr("Group:")));
    groupCombo_ = new QComboBox;
    groupCombo_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    groupCombo_->setMinimumContentsLength(16);
    bar->addWidget(groupCombo_);
    l->addLayout(bar);
    collView_ = makeTable(proxy_);
    collView_->sortByColumn(CollectivesModel::Total, Qt::DescendingOrder);
    l->addWidget(collView_, 1);
    split->addWidget(w);
  }

  // 2. Per-step chart.
  {
    auto* w = new QWidget;
    auto* l = new QVBoxLayout(w);
    l->setContentsMargins(0, 0, 0, 0);
    auto* bar = new FlowLayout;  // wraps on a narrow window
    bar->addWidget(sectionTitle(tr("Overlap and exposed communication per step")));
    chartNote_ = new QLabel;
    chartNote_->setStyleSheet(QStringLiteral("color: palette(mid);"));
    bar->addWidget(chartNote_);
    bar->addWidget(new QLabel(tr("Ranks:")));
    rankCombo_ = new QComboBox;
    rankCombo_->setSizeAdjustPolicy(QComboBox::AdjustToContents);
    bar->addWidget(rankCombo_);
    l->addLayout(bar);

    chart_ = new QCustomPlot;
    chart_->setMinimumHeight(180);
    charts::applyPlotStyle(chart_);
    chart_->xAxis->setLabel(tr("Step"));
    chart_->yAxis->setLabel(tr("Communication (ms)"));
    chart_->yAxis2->setLabel(tr("Overlap (%)"));
    chart_->yAxis2->setVisible(true);
    chart_->yAxis2->setRange(0, 100);
    QSharedPointer<QCPAxisTickerFixed> steps(new QCPAxisTickerFixed);
    steps->setTickStep(1.0);
    steps->setScaleStrategy(QCPAxisTickerFixed::ssMultiples);
    chart_->xAxis->setTicker(steps);
    // The right axis looks like the left one.
    chart_->yAxis2->setTickLabelFont(chart_->yAxis->tickLabelFont());
    chart_->yAxis2->setLabelFont(chart_->yAxis->labelFont());
    chart_->yAxis2->setTickLabelColor(chart_->yAxis->tickLabelColor());
    chart_->yAxis2->setLabelColor(chart_->yAxis->labelColor());
    chart_->yAxis2->setBasePen(chart_->yAxis->basePen());
    chart_->yAxis2->setTickPen(chart_->yAxis->tickPen());
    chart_->yAxis2->setSubTickPen(chart_->yAxis->subTickPen());
    chart_->yAxis2->grid()->setVisible(false);
    chart_->xAxis->grid()->setVisible(false);
    // Legend in its own row above the plot.
    chart_->legend->setVisible(true);
    chart_->legend->setBrush(Qt::NoBrush);
    chart_->legend->setFillOrder(QCPLegend::foColumnsFirst);
    chart_->legend->setIconSize(14, 10);
    chart_->axisRect()->insetLayout()->take(chart_->legend);
    chart_->plotLayout()->insertRow(0);
    auto* legendRow = new QCPLayoutGrid;
    chart_->plotLayout()->addElement(0, 0, legendRow);
    legendRow->addElement(0, 0, chart_->legend);
    legendRow->addElement(0, 1, new QCPLayoutElement(chart_));  // takes the rest: the legend stays left
    legendRow->setColumnStretchFactor(0, 0.001);
    legendRow->setColumnStretchFactor(1, 1);
    legendRow->setMargins(QMargins(0, 0, 0, 0));
    chart_->plotLayout()->setRowStretchFactor(0, 0.001);
    chart_->legend->setMargins(QMargins(4, 2, 4, 0));

    auto* exposed = new QCPBars(chart_->xAxis, chart_->yAxis);
    exposed->setName(tr("Exposed communication (ms)"));
    exposed->setPen(QPen(kExposedColor.darker(115)));
    exposed->setBrush(kExposedColor);
    exposed->setWidth(0.7);
    auto* overlapped = new QCPBars(chart_->xAxis, chart_->yAxis);
    overlapped->setName(tr("Overlapped communication (ms)"));
    overlapped->setPen(QPen(kOverlappedColor.darker(115)));
    overlapped->setBrush(kOverlappedColor);
    overlapped->setWidth(0.7);
    overlapped->moveAbove(exposed);
    auto* overlap = chart_->addGraph(chart_->xAxis, chart_->yAxis2);
    overlap->setName(tr("Overlap (%)"));
    overlap->setPen(QPen(kOverlapLineColor, 2));
    overlap->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, kOverlapLineColor, Qt::white, 5));
    l->addWidget(chart_, 1);
    split->addWidget(w);
  }

  // 3. Bottlenecks with their details.
  {
    auto* w = new QWidget;
    auto* l = new QVBoxLayout(w);
    l->setContentsMargins(0, 0, 0, 0);
    auto* bar = new FlowLayout;  // wraps on a narrow window
    bar->addWidget(sectionTitle(tr("Exposed collectives, grouped by what you can change")));
    bnCount_ = new QLabel;
    bnCount_->setStyleSheet(QStringLiteral("color: palette(mid);"));
    bar->addWidget(bnCount_);
    l->addLayout(bar);
    auto* h = new QSplitter(Qt::Horizontal);
    h->setChildrenCollapsible(false);
    bnView_ = makeTable(bnProxy_);
    bnView_->setToolTip(tr("Double-click a row to show the collective in the timeline"));
    bnView_->horizontalHeader()->setStretchLastSection(true);
    h->addWidget(bnView_);
    auto* side = new QWidget;
    auto* sl = new QVBoxLayout(side);
    sl->setContentsMargins(0, 0, 0, 0);
    details_ = new QTextBrowser;
    details_->setOpenLinks(false);
    details_->setMinimumWidth(260);
    sl->addWidget(details_, 1);
    jumpButton_ = new QPushButton(tr("Show in timeline"));
    jumpButton_->setEnabled(false);
    tryButton_ = new QPushButton;
    tryButton_->hide();
    auto* buttons = new QHBoxLayout;
    buttons->addStretch(1);
    buttons->addWidget(tryButton_);
    buttons->addWidget(jumpButton_);
    sl->addLayout(buttons);
    h->addWidget(side);
    h->setStretchFactor(0, 2);
    h->setStretchFactor(1, 1);
    h->setSizes({880, 420});
    l->addWidget(h, 1);
    split->addWidget(w);
  }

  // 4. Arrivals: who reaches the collectives last, how often, and how long the others waited.
  {
    auto* w = new QWidget;
    auto* l = new QVBoxLayout(w);
    l->setContentsMargins(0, 0, 0, 0);
    auto* bar = new QHBoxLayout;
    bar->addWidget(sectionTitle(tr("Arrivals at collectives")));
    arrivalsNote_ = new QLabel;
    arrivalsNote_->setObjectName(QStringLiteral("arrivalsNote"));
    arrivalsNote_->setWordWrap(true);
    arrivalsNote_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    bar->addWidget(arrivalsNote_, 1);
    l->addLayout(bar);
    arrivals_ = new QTableWidget;
    arrivals_->setObjectName(QStringLiteral("arrivals"));
    arrivals_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    arrivals_->setSelectionBehavior(QAbstractItemView::SelectRows);
    arrivals_->verticalHeader()->hide();
    arrivals_->horizontalHeader()->setStretchLastSection(true);
    l->addWidget(arrivals_, 1);
    split->addWidget(w);
  }
  split->setStretchFactor(0, 2);
  split->setStretchFactor(1, 3);
  split->setStretchFactor(2, 3);
  split->setStretchFactor(3, 4);
  split->setStretchFactor(4, 2);

  connect(runCombo_, &QComboBox::activated, this, [this](int i) {
    const core::RunId id{runCombo_->itemData(i).toLongLong()};
    if (id != runId_) showRun(id);
  });
  // Every filter applies to the collectives and to the bottlenecks.
  connect(filter_, &QLineEdit::textChanged, proxy_, &CollectivesFilterProxy::setText);
  connect(filter_, &QLineEdit::textChanged, bnProxy_, &CollectivesFilterProxy::setText);
  connect(opCombo_, &QComboBox::currentIndexChanged, this, [this](int) {
    proxy_->setOperation(opCombo_->currentData().toString());
    bnProxy_->setOperation(opCombo_->currentData().toString());
  });
  connect(groupCombo_, &QComboBox::currentIndexChanged, this, [this](int) {
    proxy_->setGroup(groupCombo_->currentData().toString());
    bnProxy_->setGroup(groupCombo_->currentData().toString());
  });
  auto count = [this] {
    const int shown = proxy_->rowCount(), all = collectives_->rowCount();
    collCount_->setText(shown == all ? tr("%n row(s)", nullptr, all) : tr("%1 of %2 rows").arg(shown).arg(all));
  };
  connect(proxy_, &QAbstractItemModel::rowsInserted, this, count);
  connect(proxy_, &QAbstractItemModel::rowsRemoved, this, count);
  connect(proxy_, &QAbstractItemModel::modelReset, this, count);
  connect(proxy_, &QAbstractItemModel::layoutChanged, this, count);
  connect(rankCombo_, &QComboBox::currentIndexChanged, this, [this](int i) {
    if (i >= 0) setChartRank(rankCombo_->itemData(i).toInt());
  });
  connect(bnView_->selectionModel(), &QItemSelectionModel::currentRowChanged, this, [this] { showDetails(); });
  connect(bnView_, &QTableView::doubleClicked, this,
          [this](const QModelIndex& idx) { activateBottleneck(sourceRowOfBottleneck(idx)); });
  connect(jumpButton_, &QPushButton::clicked, this,
          [this] { activateBottleneck(sourceRowOfBottleneck(bnView_->currentIndex())); });
  connect(tryButton_, &QPushButton::clicked, this, [this] {
    const int row = sourceRowOfBottleneck(bnView_->currentIndex());
    if (row < 0 || row >= bottlenecks_->rowCount() || !bottlenecks_->rowAt(row).b.tryIt) return;
    Q_EMIT tryChange(runId_, *bottlenecks_->rowAt(row).b.tryIt);
  });

  stack_->setCurrentWidget(placeholder_);
}

CommunicationPage::~CommunicationPage() { cancelTask(); }

void CommunicationPage::setContext(const QString& dbPath, const QList<core::RunId>& runs) {
  sessionFor(dbPath);
  const core::RunId keep = (dbPath == dbPath_ && runs.contains(runId_)) ? runId_ : core::RunId{};
  dbPath_ = dbPath;
  runs_ = runs;
  runCombo_->clear();
  for (core::RunId id : runs_) runCombo_->addItem(tr("run %1").arg(id.value()), QVariant::fromValue<qlonglong>(id.value()));
  runCombo_->setEnabled(runs_.size() > 1);
  if (dbPath_.isEmpty() || runs_.isEmpty()) {
    cancelTask();
    runId_ = {};
    runsCompared_.reset();
    showRunsCompared();
    collectives_->clear();
    bottlenecks_->clear();
    steps_.clear();
    rebuildFilters();
    rebuildChart();
    showDetails();
    showPlaceholder(dbPath_.isEmpty() ? tr("Open a database to see the communication of its runs.")
                                      : tr("Select a run in the run browser to see its communication."));
    return;
  }
  showRun(keep ? keep : runs_.front());
}

void CommunicationPage::showRun(core::RunId runId) {
  runId_ = runId;
  const int i = runCombo_->findData(QVariant::fromValue<qlonglong>(runId.value()));
  if (i >= 0) runCombo_->setCurrentIndex(i);
  load();
}

void CommunicationPage::cancelTask() {
  if (task_) {
    session()->tasks()->cancel(taskSlot());
    task_->disconnect(this);
  }
  task_.clear();
}

void CommunicationPage::setBusy(bool b) {
  Q_EMIT busyChanged(b);
  if (!b) Q_EMIT progress(100, QString());
}

void CommunicationPage::showPlaceholder(const QString& text) {
  placeholder_->setText(text);
  stack_->setCurrentWidget(placeholder_);
}

void CommunicationPage::load() {
  cancelTask();
  lastError_.clear();
  const core::RunId runId = runId_;
  const QList<core::RunId> runs = runs_;
  if (stack_->currentWidget() == placeholder_) showPlaceholder(tr("Analysing run %1…").arg(runId.value()));
  Q_EMIT statusMessage(tr("Analysing the communication of run %1…").arg(runId.value()));
  Q_EMIT progress(-1, tr("Analysing communication"));
  task_ = session()->run<Loaded>(
      this, taskSlot(), tr("Analysing the communication of run %1").arg(runId.value()),
      [runId, runs](core::TraceStore& store, RunCache& cache, core::CancelToken& cancel, const core::ProgressFn&) {
        Loaded out;
        out.runId = runId;
        for (core::RunId id : runs) {
          auto r = store.run(id);
          out.names.emplace_back(id, r ? QString::fromStdString(r->name) : QString());
        }
        const auto run = store.run(runId);
        if (!run) throw core::Error("run " + std::to_string(runId.value()) + " is not in the database");
        out.info = Page::runInfoText(*run);
        // The session's analysis of the run (shared with every page), then the other runs' for the
        // side-by-side table.
        const auto a = RunSession::analysis(cache, store, runId, &cancel);
        out.collectives = a->collectives;
        out.steps = a->steps;
        out.stragglers = a->stragglers;
        const auto ranks = store.ranks(runId);
        const auto tracks = store.tracks(runId);
        for (std::size_t k = 0; k < a->bottlenecks.size() && k < kBottleneckLimit; ++k) {
          cancel.throwIfCancelled();
          BottleneckRow row;
          row.b = a->bottlenecks[k];
          row.eventId = findEventId(store, ranks, tracks, row.b);
          out.bottlenecks.push_back(std::move(row));
        }
        if (runs.size() > 1) {
          std::vector<core::RunId> ids(runs.begin(), runs.end());
          std::vector<std::shared_ptr<const core::RunAnalysis>> all;
          std::vector<const core::RunAnalysis*> raw;
          std::vector<core::RunFigures> figures;
          for (core::RunId id : ids) {
            all.push_back(id == runId ? a : RunSession::analysis(cache, store, id, &cancel));
            raw.push_back(all.back().get());
            figures.push_back(core::runFigures(store, id, all.back()->steps, all.back()->memoryPeaks));
          }
          out.runsCompared = core::compareCollectives(ids, raw, figures, 0);
          for (const auto& [id, name] : out.names)
            out.runLabels << QString::fromStdString(core::runLabel(name.toStdString(), id));
        }
        return out;
      },
      [this](Loaded loaded) { apply(std::move(loaded)); },
      [this, runId](const QString& error) {
        lastError_ = error;
        showPlaceholder(tr("Could not analyse run %1:\n%2").arg(runId.value()).arg(error));
        Q_EMIT errorMessage(tr("Communication page: run %1: %2").arg(runId.value()).arg(error));
      });
  followLoad(task_, [this] {
    task_.clear();
    setBusy(false);
  });
  setBusy(true);
}

void CommunicationPage::apply(Loaded loaded) {
  if (loaded.runId != runId_) return;
  for (const auto& [id, name] : loaded.names)
    if (!name.isEmpty()) labelRun(runCombo_, id, name.toStdString());
  runInfo_->setText(loaded.info);
  runsCompared_ = std::move(loaded.runsCompared);
  stragglers_ = std::move(loaded.stragglers);
  showArrivals();
  runLabels_ = loaded.runLabels;
  showRunsCompared();
  collectives_->setRows(std::move(loaded.collectives));
  bottlenecks_->setRows(std::move(loaded.bottlenecks));
  steps_ = std::move(loaded.steps);
  rebuildFilters();

  // Rank choice: keep the current one if the run has it.
  std::set<int> ranks;
  for (const auto& s : steps_) ranks.insert(s.rank);
  const int wanted = chartRank_;
  {
    QSignalBlocker block(rankCombo_);
    rankCombo_->clear();
    rankCombo_->addItem(ranks.size() > 1 ? tr("Mean over %1 ranks").arg(ranks.size()) : tr("All ranks"), -1);
    for (int r : ranks) rankCombo_->addItem(tr("Rank %1").arg(r), r);
    const int i = rankCombo_->findData(wanted);
    rankCombo_->setCurrentIndex(i >= 0 ? i : 0);
    chartRank_ = rankCombo_->currentData().toInt();
  }
  rebuildChart();

  bnView_->sortByColumn(BottleneckModel::Total, Qt::DescendingOrder);
  for (QTableView* t : {collView_, bnView_}) {
    t->resizeColumnsToContents();
    for (int c = 0; c + (t == bnView_ ? 1 : 0) < t->model()->columnCount(); ++c)
      t->setColumnWidth(c, std::min(t->columnWidth(c) + 8, 420));
  }
  const int n = bottlenecks_->rowCount();
  bnCount_->setText(n ? tr("%n group(s), costliest first; exposed time summed over steps and ranks", nullptr, n) : QString());
  if (n) bnView_->selectRow(0);
  showDetails();
  stack_->setCurrentIndex(1);
  Q_EMIT statusMessage(tr("Run %1: %n collective row(s)", nullptr, collectives_->rowCount()).arg(runId_.value()));
}

void CommunicationPage::rebuildFilters() {
  const QString op = opCombo_->currentData().toString();
  const QString group = groupCombo_->currentData().toString();
  for (auto [combo, items, current] :
       {std::tuple{opCombo_, collectives_->operations(), op}, std::tuple{groupCombo_, collectives_->groups(), group}}) {
    QSignalBlocker block(combo);
    combo->clear();
    combo->addItem(tr("All"), QString());
    for (const QString& s : items) combo->addItem(s, s);
    const int i = combo->findData(current);
    combo->setCurrentIndex(i >= 0 ? i : 0);
  }
  proxy_->setOperation(opCombo_->currentData().toString());
  proxy_->setGroup(groupCombo_->currentData().toString());
  bnProxy_->setOperation(opCombo_->currentData().toString());
  bnProxy_->setGroup(groupCombo_->currentData().toString());
}

void CommunicationPage::setChartRank(int rank) {
  chartRank_ = rank;
  const int i = rankCombo_->findData(rank);
  if (i >= 0 && rankCombo_->currentIndex() != i) {
    QSignalBlocker block(rankCombo_);
    rankCombo_->setCurrentIndex(i);
  }
  rebuildChart();
}

void CommunicationPage::rebuildChart() {
  series_.clear();
  bool anyStep = false;
  for (const auto& s : steps_) anyStep = anyStep || s.step >= 0;
  // Per step: sums over the chosen ranks (then means), overlap time-weighted.
  struct Acc {
    double exposed = 0, overlapped = 0, comm = 0;
    int n = 0;
  };
  std::map<std::int64_t, Acc> acc;
  for (const auto& s : steps_) {
    if (anyStep && s.step < 0) continue;
    if (chartRank_ >= 0 && s.rank != chartRank_) continue;
    Acc& a = acc[s.step];
    a.exposed += static_cast<double>(s.exposedCommNs) / 1e6;
    a.overlapped += static_cast<double>(s.overlappedCommNs) / 1e6;
    a.comm += static_cast<double>(s.commNs) / 1e6;
    a.n += 1;
  }
  for (const auto& [step, a] : acc) {
    StepPoint p;
    p.step = step;
    p.exposedMs = a.exposed / a.n;
    p.overlappedMs = a.overlapped / a.n;
    if (a.comm > 0) p.overlapPct = a.overlapped / a.comm * 100.0;
    series_.push_back(p);
  }

  auto* exposed = qobject_cast<QCPBars*>(chart_->plottable(0));
  auto* overlapped = qobject_cast<QCPBars*>(chart_->plottable(1));
  QCPGraph* line = chart_->graph(0);
  QVector<double> x, ex, ov, pct;
  for (const auto& p : series_) {
    x << static_cast<double>(anyStep ? p.step : 0);
    ex << p.exposedMs;
    ov << p.overlappedMs;
    pct << (p.overlapPct ? *p.overlapPct : std::nan(""));
  }
  exposed->setData(x, ex, true);
  overlapped->setData(x, ov, true);
  line->setData(x, pct, true);
  if (!anyStep && !series_.empty()) {
    QSharedPointer<QCPAxisTickerText> t(new QCPAxisTickerText);
    t->addTick(0, tr("whole trace"));
    chart_->xAxis->setTicker(t);
    chart_->xAxis->setLabel(QString());
  } else if (!chart_->xAxis->ticker().dynamicCast<QCPAxisTickerFixed>()) {
    QSharedPointer<QCPAxisTickerFixed> t(new QCPAxisTickerFixed);
    t->setTickStep(1.0);
    t->setScaleStrategy(QCPAxisTickerFixed::ssMultiples);
    chart_->xAxis->setTicker(t);
    chart_->xAxis->setLabel(tr("Step"));
  }
  if (series_.empty()) {
    chart_->xAxis->setRange(0, 1);
    chart_->yAxis->setRange(0, 1);
  } else {
    chart_->xAxis->setRange(x.front() - 0.7, x.back() + 0.7);
    double top = 0;
    for (int i = 0; i < ex.size(); ++i) top = std::max(top, ex[i] + ov[i]);
    chart_->yAxis->setRange(0, top > 0 ? top * 1.12 : 1);
  }
  QString note;
  if (steps_.empty())
    note = tr("no steps");
  else if (!anyStep)
    note = tr("(the trace has no step windows)");
  else if (chartRank_ < 0 && rankCombo_->count() > 2)
    note = tr("(mean over ranks; overlap time-weighted)");
  chartNote_->setText(note);
  chart_->replot();
}

int CommunicationPage::sourceRowOfBottleneck(const QModelIndex& viewIndex) const {
  if (!viewIndex.isValid()) return -1;
  return bnProxy_->mapToSource(viewIndex).row();
}

void CommunicationPage::showDetails() {
  const int row = sourceRowOfBottleneck(bnView_->currentIndex());
  if (row < 0 || row >= bottlenecks_->rowCount()) {
    details_->setHtml(bottlenecks_->rowCount() || !runId_
                          ? tr("<p style='color:gray'>Select a row to see why it is exposed and what to try.</p>")
                          : tr("<p style='color:gray'>No exposed collective in this run.</p>"));
    jumpButton_->setEnabled(false);
    tryButton_->hide();
    return;
  }
  const BottleneckRow& r = bottlenecks_->rowAt(row);
  details_->setHtml(BottleneckModel::detailsHtml(r));
  jumpButton_->setEnabled(true);
  if (r.b.tryIt) {
    const QString change = QString::fromStdString(r.b.tryIt->text());
    tryButton_->setText(tr("Try it: %1").arg(change));
    tryButton_->setToolTip(
        tr("Launch this run's configuration with %1 into the open database, then compare the two runs").arg(change));
  }
  tryButton_->setVisible(r.b.tryIt.has_value());
}

void CommunicationPage::activateBottleneck(int row) {
  if (row < 0 || row >= bottlenecks_->rowCount()) return;
  const BottleneckRow& r = bottlenecks_->rowAt(row);
  Q_EMIT jumpToEvent(runId_, r.eventId, r.b.startNs, r.b.startNs + r.b.durNs);
}

void CommunicationPage::showRunsCompared() {
  const bool show = runsCompared_.has_value() && runs_.size() > 1;
  runsPanel_->setVisible(show);
  runsTable_->clear();
  runsTable_->setRowCount(0);
  if (!show) return;
  const auto& cc = *runsCompared_;
  const int n = static_cast<int>(cc.runs.size());
  runsTable_->setColumnCount(1 + n);
  QStringList header{tr("Operation")};
  for (int i = 0; i < n; ++i)
    header << (i < runLabels_.size() ? runLabels_[i] : tr("run %1").arg((cc.runs[static_cast<std::size_t>(i)]).value())) +
                  (static_cast<std::size_t>(i) == cc.baseline ? tr(" (baseline)") : QString());
  runsTable_->setHorizontalHeaderLabels(header);
  runsTable_->setRowCount(static_cast<int>(cc.rows.size()));
  const QLocale en(QLocale::English);
  for (int r = 0; r < static_cast<int>(cc.rows.size()); ++r) {
    const auto& row = cc.rows[static_cast<std::size_t>(r)];
    auto* op = new QTableWidgetItem(
        QString::fromUtf8(core::toString(row.op).data(), static_cast<qsizetype>(core::toString(row.op).size())));
    runsTable_->setItem(r, 0, op);
    for (int i = 0; i < n; ++i) {
      const auto k = static_cast<std::size_t>(i);
      QString text = QStringLiteral("–");
      QColor color;
      if (row.ms[k]) {
        text = tr("%1 ms (exposed %2) · %3 calls")
                   .arg(en.toString(*row.ms[k], 'f', 3), en.toString(row.exposedMs[k].value_or(0), 'f', 3),
                        en.toString(row.count[k].value_or(0), 'f', 2));
        if (row.bytes[k] && *row.bytes[k] > 0) text += QStringLiteral(" · ") + charts::formatBytes(*row.bytes[k]);
        if (k != cc.baseline && row.deltaPct[k]) {
          const double d = *row.deltaPct[k];
          text += QStringLiteral(" (%1%2 %%3)")
                      .arg(d >= 0 ? QStringLiteral("+") : QString(), en.toString(d, 'f', 1),
                           row.withinNoise[k] ? tr(", within noise") : QString());
          // Coloured only when the change is larger than the runs' step-to-step spread.
          if (!row.withinNoise[k]) color = d > 0 ? QColor(0xc6, 0x28, 0x28) : QColor(0x2e, 0x7d, 0x32);
        }
      }
      auto* item = new QTableWidgetItem(text);
      item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
      if (color.isValid()) item->setForeground(color);
      runsTable_->setItem(r, 1 + i, item);
    }
  }
  runsTable_->resizeColumnsToContents();
  // Tall enough for every operation (up to 6) without scrolling.
  const int shown = std::min(6, runsTable_->rowCount());
  runsPanel_->setMinimumHeight(runsTable_->horizontalHeader()->sizeHint().height() +
                               shown * runsTable_->verticalHeader()->defaultSectionSize() + 2 * runsTable_->frameWidth() + 28);
  bool perStep = true;
  for (auto rs : cc.rankSteps) perStep = perStep && rs > 0;
  runsNote_->setText(perStep ? tr("per rank and step (the change: of the time, against the baseline)")
                             : tr("per rank and step where the run has steps, else the run's totals"));
}

QTableWidget* CommunicationPage::runsTable() const { return runsTable_; }

QSortFilterProxyModel* CommunicationPage::bottleneckProxy() const { return bnProxy_; }

QString CommunicationPage::arrivalsNote() const { return arrivalsNote_->text(); }

void CommunicationPage::showArrivals() {
  const auto& st = stragglers_;
  arrivals_->clear();
  arrivals_->setRowCount(0);
  arrivals_->setColumnCount(6);
  arrivals_->setHorizontalHeaderLabels({tr("Rank / collective"), tr("Matched"), tr("Arrived last"), tr("Late in total (ms)"),
                                        tr("Others waited for it (ms)"), tr("Skew mean / max (ms)")});
  if (st.matched == 0) {
    arrivalsNote_->setText(tr("No collective could be matched across ranks (one rank, or no collectives)."));
    return;
  }
  const QString evidence = QString::fromStdString(st.evidence);
  arrivalsNote_->setText(st.straggler ? tr("<b>Straggler: rank %1.</b> %2").arg(*st.straggler).arg(evidence.toHtmlEscaped())
                                      : evidence.toHtmlEscaped());
  auto cell = [this](int row, int col, const QString& text, bool left = false) {
    auto* it = new QTableWidgetItem(text);
    it->setTextAlignment((left ? Qt::AlignLeft : Qt::AlignRight) | Qt::AlignVCenter);
    arrivals_->setItem(row, col, it);
    return it;
  };
  for (const auto& a : st.ranks) {
    const int row = arrivals_->rowCount();
    arrivals_->insertRow(row);
    auto* r = cell(row, 0, tr("rank %1").arg(a.rank) + (st.straggler && *st.straggler == a.rank ? tr(" (straggler)") : QString()),
                   true);
    if (st.straggler && *st.straggler == a.rank) r->setForeground(QColor(0xc6, 0x28, 0x28));
    cell(row, 1, units::count(a.instances));
    cell(row, 2,
         a.instances ? tr("%1 (%2)").arg(units::count(a.lastCount),
                                         units::percent(static_cast<double>(a.lastCount) / static_cast<double>(a.instances)))
                     : QStringLiteral("–"));
    cell(row, 3, units::ms(a.lateNs));
    cell(row, 4, units::ms(a.causedWaitNs));
    cell(row, 5, QString());
  }
  for (const auto& g : st.groups) {
    const int row = arrivals_->rowCount();
    arrivals_->insertRow(row);
    cell(row, 0,
         units::opName(g.op) +
             (g.processGroup.empty() ? QString() : QStringLiteral(" (%1)").arg(QString::fromStdString(g.processGroup))),
         true);
    cell(row, 1, units::count(g.matched));
    cell(row, 2,
         g.mostOftenLast >= 0 ? tr("rank %1: %2").arg(g.mostOftenLast).arg(units::count(g.mostOftenLastCount))
                              : QStringLiteral("–"));
    cell(row, 3, QString());
    cell(row, 4, units::ms(g.waitNs));
    cell(row, 5, QStringLiteral("%1 / %2").arg(units::ms(g.meanSkewNs), units::ms(g.maxSkewNs)));
  }
  arrivals_->resizeColumnsToContents();
}

QJsonObject CommunicationPage::describe() const {
  using namespace describe;
  QJsonObject out = Page::describe();
  out[QStringLiteral("run")] = static_cast<double>(runId_.value());
  QJsonArray rows;
  for (int r = 0; r < collectives_->rowCount(); ++r) {
    const auto& c = collectives_->rowAt(r);
    rows.append(QJsonObject{{QStringLiteral("op"), qs(std::string(core::toString(c.op)))},
                            {QStringLiteral("group"), qs(c.processGroup)},
                            {QStringLiteral("count"), static_cast<double>(c.count)},
                            {QStringLiteral("bytes"), static_cast<double>(c.bytes)},
                            {QStringLiteral("total_ns"), static_cast<double>(c.totalNs)},
                            {QStringLiteral("exposed_ns"), static_cast<double>(c.exposedNs)}});
  }
  out[QStringLiteral("collectives")] = rows;
  out[QStringLiteral("bottlenecks")] = bottlenecks_->rowCount();
  out[QStringLiteral("chart_series")] = QJsonArray{QJsonObject{{QStringLiteral("name"), QStringLiteral("per step")},
                                                               {QStringLiteral("length"), static_cast<int>(series_.size())}}};
  if (runsCompared_) {
    QJsonArray runs;
    for (std::size_t i = 0; i < runsCompared_->runs.size(); ++i)
      runs.append(
          runRef(runsCompared_->runs[i], static_cast<int>(i) < runLabels_.size() ? runLabels_[static_cast<int>(i)] : QString()));
    out[QStringLiteral("runs")] = runs;
    QJsonArray byRun;
    for (const auto& r : runsCompared_->rows) {
      QJsonArray ms, exposed, delta, noise;
      for (std::size_t i = 0; i < r.ms.size(); ++i) {
        ms.append(number(r.ms[i]));
        exposed.append(number(r.exposedMs[i]));
        delta.append(number(r.deltaPct[i]));
        noise.append(static_cast<bool>(r.withinNoise[i]));
      }
      byRun.append(QJsonObject{{QStringLiteral("op"), qs(std::string(core::toString(r.op)))},
                               {QStringLiteral("unit"), QStringLiteral("ms per rank and step")},
                               {QStringLiteral("ms_per_rank_step"), ms},
                               {QStringLiteral("exposed_ms_per_rank_step"), exposed},
                               {QStringLiteral("delta_pct"), delta},
                               {QStringLiteral("within_noise"), noise}});
    }
    out[QStringLiteral("collectives_by_run")] = byRun;
  }
  return out;
}

}  // namespace shardscope::ui
