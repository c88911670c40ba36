#include "ui/pages/kernels_page.h"

#include <QComboBox>
#include <QFont>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QSplitter>
#include <QStackedWidget>
#include <QTableView>
#include <QVBoxLayout>

#include <algorithm>

#include "core/analysis/run_analysis.h"
#include "ui/charts/bar_chart.h"
#include "ui/common/flow_layout.h"
#include "ui/charts/chart_style.h"
#include "ui/charts/stacked_bar_chart.h"
#include "ui/common/background.h"
#include "ui/models/collectives_model.h"
#include "ui/pages/describe.h"

namespace shardscope::ui {

// What the background task hands over.
struct KernelsPage::Loaded {
  core::RunId runId;
  std::vector<std::pair<core::RunId, QString>> names;  // every run of the selection
  QString info;                                        // "fsdp · runtime · world size 2 · completed"
  std::shared_ptr<const core::TopOps> top;
  core::HtaFigures hta;
};

namespace {

constexpr int kAllRanks = -1;
constexpr int kNoRanks = -2;
// Per-rank columns shown by default up to this many ranks (past it: none until chosen).
constexpr std::size_t kDefaultRankColumns = 8;

QLabel* sectionTitle(const QString& text) {
  auto* l = new QLabel(text);
  QFont f = l->font();
  f.setBold(true);
  f.setPointSizeF(f.pointSizeF() * 1.05);
  l->setFont(f);
  return l;
}

QLabel* muted() {
  auto* l = new QLabel;
  l->setStyleSheet(QStringLiteral("color: palette(mid);"));
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
  v->setTextElideMode(Qt::ElideMiddle);
  v->setEditTriggers(QAbstractItemView::NoEditTriggers);
  v->verticalHeader()->setVisible(false);
  v->verticalHeader()->setDefaultSectionSize(v->fontMetrics().height() + 8);
  v->horizontalHeader()->setHighlightSections(false);
  v->horizontalHeader()->setStretchLastSection(false);
  v->horizontalHeader()->setDefaultAlignment(Qt::AlignRight | Qt::AlignVCenter);
  v->setShowGrid(false);
  return v;
}

QString perRankLine(const std::vector<int>& ranks, const std::vector<core::TimeNs>& perRank) {
  if (ranks.size() < 2) return {};
  QStringList parts;
  core::TimeNs lo = -1, hi = 0;
  for (std::size_t i = 0; i < ranks.size() && i < perRank.size(); ++i) {
    if (i < 8) parts << QObject::tr("rank %1: %2").arg(ranks[i]).arg(units::msWithUnit(perRank[i]));
    lo = lo < 0 ? perRank[i] : std::min(lo, perRank[i]);
    hi = std::max(hi, perRank[i]);
  }
  if (ranks.size() > 8) parts << QObject::tr("… %1 more").arg(ranks.size() - 8);
  QString line = parts.join(QStringLiteral(" · "));
  if (hi > 0)
    line += QObject::tr("  (lightest rank %1 below the heaviest)")
                .arg(units::percent(static_cast<double>(hi - lo) / static_cast<double>(hi)));
  return line;
}

}  // namespace

KernelsPage::KernelsPage(QWidget* parent) : Page(parent) {
  kernels_ = new TopOpsModel(TopOpsModel::Kind::Kernels, this);
  operators_ = new TopOpsModel(TopOpsModel::Kind::Operators, this);
  kernelsProxy_ = new TopOpsFilterProxy(this);
  kernelsProxy_->setSourceModel(kernels_);
  operatorsProxy_ = new TopOpsFilterProxy(this);
  operatorsProxy_->setSourceModel(operators_);

  auto* outer = new QVBoxLayout(this);
  outer->setContentsMargins(0, 0, 0, 0);
  stack_ = new QStackedWidget;
  outer->addWidget(stack_);

  placeholder_ = new QLabel(tr("Select a run in the run browser to see its top kernels and operators."));
  placeholder_->setAlignment(Qt::AlignCenter);
  placeholder_->setWordWrap(true);
  placeholder_->setStyleSheet(QStringLiteral("color: palette(mid); font-size: 11pt;"));
  stack_->addWidget(placeholder_);

  auto* content = new QWidget;
  auto* v = new QVBoxLayout(content);
  v->setContentsMargins(8, 8, 8, 8);
  v->setSpacing(6);
  stack_->addWidget(content);

  // Run choice, filter, per-rank columns.
  auto* top = new FlowLayout;  // wraps on a narrow window; the run's note keeps the rest of the row
  top->addWidget(new QLabel(tr("Run:")));
  runCombo_ = new QComboBox;
  runCombo_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);  // long run names: the popup shows them
  runCombo_->setMinimumContentsLength(18);
  runCombo_->setToolTip(tr("The run shown; the first of the selection is the baseline"));
  top->addWidget(runCombo_);
  runInfo_ = muted();
  runInfo_->setWordWrap(true);  // wraps instead of widening the window
  filter_ = new QLineEdit;
  filter_->setPlaceholderText(tr("Filter kernel or operator name…"));
  filter_->setClearButtonEnabled(true);
  filter_->setMinimumWidth(220);
  top->addWidget(filter_);
  top->addWidget(new QLabel(tr("Per-rank columns:")));
  rankCombo_ = new QComboBox;
  rankCombo_->setSizeAdjustPolicy(QComboBox::AdjustToContents);
  rankCombo_->setToolTip(tr("Which ranks get a column of their own in both tables"));
  top->addWidget(rankCombo_);
  auto* row = new QHBoxLayout;
  row->addLayout(top, 2);
  row->addWidget(runInfo_, 1);
  v->addLayout(row);

  auto* split = new QSplitter(Qt::Vertical);
  split->setChildrenCollapsible(false);
  v->addWidget(split, 1);

  auto section = [&](const QString& title, QLabel*& count, QLabel*& note, QTableView*& view, QAbstractItemModel* model) {
    auto* w = new QWidget;
    auto* l = new QVBoxLayout(w);
    l->setContentsMargins(0, 0, 0, 0);
    l->setSpacing(2);
    auto* bar = new QHBoxLayout;
    bar->addWidget(sectionTitle(title));
    count = muted();
    bar->addWidget(count);
    bar->addStretch(1);
    l->addLayout(bar);
    note = muted();
    note->setWordWrap(true);
    note->setTextInteractionFlags(Qt::TextSelectableByMouse);
    l->addWidget(note);
    view = makeTable(model);
    l->addWidget(view, 1);
    split->addWidget(w);
  };
  section(tr("Top kernels"), kernelsCount_, kernelsNote_, kernelsView_, kernelsProxy_);
  kernelsNote_->setObjectName(QStringLiteral("kernelsNote"));
  section(tr("Top operators (cpu_op, by self time)"), operatorsCount_, operatorsNote_, operatorsView_, operatorsProxy_);
  operatorsNote_->setObjectName(QStringLiteral("operatorsNote"));
  kernelsView_->setObjectName(QStringLiteral("topKernels"));
  operatorsView_->setObjectName(QStringLiteral("topOperators"));

  // HTA's figures: the temporal breakdown per rank and the kernel types.
  {
    auto* w = new QWidget;
    htaSection_ = w;
    auto* l = new QVBoxLayout(w);
    l->setContentsMargins(0, 0, 0, 0);
    l->setSpacing(2);
    auto* bar = new QHBoxLayout;
    bar->addWidget(sectionTitle(tr("HTA breakdowns")));
    htaNote_ = muted();
    htaNote_->setObjectName(QStringLiteral("htaNote"));
    htaNote_->setWordWrap(true);
    bar->addWidget(htaNote_, 1);
    l->addLayout(bar);
    htaCharts_ = new QWidget;
    auto* h = new QHBoxLayout(htaCharts_);
    h->setContentsMargins(0, 0, 0, 0);
    temporal_ = new charts::StackedBarChart;
    temporal_->setUnit(charts::StackedBarChart::Unit::Nanoseconds);
    temporal_->setMinimumHeight(200);
    kernelTypes_ = new charts::BarChart;
    kernelTypes_->setMinimumHeight(200);
    h->addWidget(temporal_, 1);
    h->addWidget(kernelTypes_, 1);
    l->addWidget(htaCharts_, 1);
    split->addWidget(w);
  }
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 3);
  split->setStretchFactor(2, 2);

  connect(runCombo_, &QComboBox::activated, this, [this](int i) {
    const core::RunId id{runCombo_->itemData(i).toLongLong()};
    if (id != runId_) showRun(id);
  });
  connect(filter_, &QLineEdit::textChanged, this, [this](const QString& t) {
    kernelsProxy_->setText(t);
    operatorsProxy_->setText(t);
    updateCounts();
  });
  connect(rankCombo_, &QComboBox::activated, this, [this](int i) {
    if (i < 0) return;
    rankChoiceSet_ = true;
    setRankColumns(rankCombo_->itemData(i).toInt());
  });
  stack_->setCurrentWidget(placeholder_);
}

KernelsPage::~KernelsPage() { cancelLoad(); }

void KernelsPage::setContext(const QString& dbPath, const QList<core::RunId>& runs) {
  sessionFor(dbPath);
  const core::RunId keep = (dbPath == dbPath_ && runs.contains(runId_)) ? runId_ : core::RunId{};
  dbPath_ = dbPath;
  runs_ = runs;
  runCombo_->clear();
  for (core::RunId id : runs_) runCombo_->addItem(tr("run %1").arg(id.value()), QVariant::fromValue<qlonglong>(id.value()));
  runCombo_->setEnabled(runs_.size() > 1);
  if (dbPath_.isEmpty() || runs_.isEmpty()) {
    cancelLoad();
    runId_ = {};
    top_.reset();
    hta_ = {};
    kernels_->clear();
    operators_->clear();
    rebuildCharts();
    updateCounts();
    showPlaceholder(dbPath_.isEmpty() ? tr("Open a database to see the top kernels and operators of its runs.")
                                      : tr("Select a run in the run browser to see its top kernels and operators."));
    return;
  }
  showRun(keep ? keep : runs_.front());
}

void KernelsPage::showRun(core::RunId runId) {
  runId_ = runId;
  const int i = runCombo_->findData(QVariant::fromValue<qlonglong>(runId.value()));
  if (i >= 0) runCombo_->setCurrentIndex(i);
  load();
}

void KernelsPage::reload() {
  if (runId_ && !dbPath_.isEmpty()) load();
}

void KernelsPage::cancelLoad() {
  if (task_) {
    session()->tasks()->cancel(taskSlot());
    task_->disconnect(this);
    task_.clear();
    setBusy(false);
  }
}

void KernelsPage::setBusy(bool b) {
  Q_EMIT busyChanged(b);
  if (!b) Q_EMIT progress(100, QString());
}

void KernelsPage::showPlaceholder(const QString& text) {
  placeholder_->setText(text);
  stack_->setCurrentWidget(placeholder_);
}

void KernelsPage::load() {
  if (task_) {
    session()->tasks()->cancel(taskSlot());
    task_->disconnect(this);
    task_.clear();
  }
  lastError_.clear();
  const core::RunId runId = runId_;
  const QList<core::RunId> runs = runs_;
  if (stack_->currentWidget() == placeholder_) showPlaceholder(tr("Analysing run %1…").arg(runId.value()));
  Q_EMIT statusMessage(tr("Finding the top kernels and operators of run %1…").arg(runId.value()));
  Q_EMIT progress(-1, tr("Top kernels and operators"));
  task_ = session()->run<Loaded>(
      this, taskSlot(), tr("Top kernels and operators of run %1").arg(runId.value()),
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
        out.top = cache.get<core::TopOps>(kTopOpsProduct, runId, &cancel, [&] {
          return std::make_shared<const core::TopOps>(core::computeTopOps(store, runId, core::kTopOpsDefaultLimit, &cancel));
        });
        // HTA's figures: the session's analysis of the run (shared with every page).
        out.hta = RunSession::analysis(cache, store, runId, &cancel)->hta;
        return out;
      },
      [this](Loaded loaded) { apply(std::move(loaded)); },
      [this, runId](const QString& error) {
        lastError_ = error;
        showPlaceholder(tr("Could not analyse run %1:\n%2").arg(runId.value()).arg(error));
        Q_EMIT errorMessage(tr("Kernels page: run %1: %2").arg(runId.value()).arg(error));
      });
  followLoad(task_, [this] {
    task_.clear();
    setBusy(false);
  });
  setBusy(true);
}

void KernelsPage::apply(Loaded loaded) {
  if (loaded.runId != runId_) return;
  for (const auto& [id, name] : loaded.names)
    if (!name.isEmpty()) labelRun(runCombo_, id, name.toStdString());
  runInfo_->setText(loaded.info);
  top_ = loaded.top;
  hta_ = std::move(loaded.hta);
  kernels_->setTable(top_->kernels, top_->ranks);
  operators_->setTable(top_->operators, top_->ranks);
  kernelsView_->sortByColumn(kernels_->columnOf(TopOpsModel::Column::Time), Qt::DescendingOrder);
  operatorsView_->sortByColumn(operators_->columnOf(TopOpsModel::Column::Time), Qt::DescendingOrder);

  // The rank chooser: every rank, none, or one; the user's choice is kept while the run has it.
  rankCombo_->clear();
  rankCombo_->addItem(tr("all ranks"), kAllRanks);
  rankCombo_->addItem(tr("none"), kNoRanks);
  for (int r : top_->ranks) rankCombo_->addItem(tr("rank %1").arg(r), r);
  int choice = rankChoice_;
  if (!rankChoiceSet_ || (choice >= 0 && std::find(top_->ranks.begin(), top_->ranks.end(), choice) == top_->ranks.end()))
    choice = top_->ranks.size() <= kDefaultRankColumns ? kAllRanks : kNoRanks;
  setRankColumns(choice);

  for (QTableView* view : {kernelsView_, operatorsView_}) {
    view->resizeColumnsToContents();
    view->setColumnWidth(0, std::clamp(view->columnWidth(0), 160, 520));
  }
  kernelsNote_->setText(kernelsNote());
  operatorsNote_->setText(operatorsNote());
  updateCounts();
  rebuildCharts();
  stack_->setCurrentIndex(1);
  Q_EMIT statusMessage(tr("Run %1: %2 kernel name(s), %3 operator name(s)")
                           .arg(runId_.value())
                           .arg(top_->kernels.distinctNames)
                           .arg(top_->operators.distinctNames));
}

QString KernelsPage::kernelsNote() const {
  if (!top_) return {};
  const auto& t = top_->kernels;
  if (t.rows.empty())
    return top_->deviceLanes == "none"
               ? tr("No device lanes: this imported trace has no GPU work (its CPU operators are below).")
               : tr("No kernels on the device lanes (%1).").arg(QString::fromStdString(top_->deviceLanes));
  QString s = tr("Device lanes: %1. Device time %2 (Σ of every kernel's duration, all ranks; %3).")
                  .arg(QString::fromStdString(top_->deviceLanes))
                  .arg(units::msWithUnit(t.timeNs))
                  .arg(QString::fromStdString(top_->measuredOver));
  const QString ranks = perRankLine(top_->ranks, t.perRankNs);
  if (!ranks.isEmpty()) s += QStringLiteral("\n") + tr("Per rank: %1").arg(ranks);
  return s;
}

QString KernelsPage::operatorsNote() const {
  if (!top_) return {};
  const auto& t = top_->operators;
  if (t.rows.empty()) return tr("No cpu_op events in this run.");
  QString s =
      tr("Self time: duration minus the nested cpu_op time on the same thread. Σ self time %1.").arg(units::msWithUnit(t.timeNs));
  const QString ranks = perRankLine(top_->ranks, t.perRankNs);
  if (!ranks.isEmpty()) s += QStringLiteral("\n") + tr("Per rank: %1").arg(ranks);
  return s;
}

void KernelsPage::setRankColumns(int choice) {
  rankChoice_ = choice;
  const int i = rankCombo_->findData(choice);
  if (i >= 0) rankCombo_->setCurrentIndex(i);
  applyRankColumns();
}

void KernelsPage::setFilterText(const QString& text) { filter_->setText(text); }

void KernelsPage::applyRankColumns() {
  for (auto [model, view] : {std::pair{kernels_, kernelsView_}, std::pair{operators_, operatorsView_}}) {
    const int first = model->firstRankColumn();
    for (std::size_t k = 0; k < model->ranks().size(); ++k) {
      const int rank = model->ranks()[k];
      const bool show = rankChoice_ == kAllRanks || rankChoice_ == rank;
      view->setColumnHidden(first + static_cast<int>(k), !show);
    }
  }
}

void KernelsPage::updateCounts() {
  auto text = [this](TopOpsModel* m, TopOpsFilterProxy* p) {
    const int shown = p->rowCount(), all = m->rowCount();
    return shown == all ? tr("%n row(s)", nullptr, all) : tr("%1 of %2 rows").arg(shown).arg(all);
  };
  kernelsCount_->setText(text(kernels_, kernelsProxy_));
  operatorsCount_->setText(text(operators_, operatorsProxy_));
}

void KernelsPage::rebuildCharts() {
  const QString temporalTitle = tr("Temporal breakdown per rank (HTA)");
  const QString typesTitle = tr("Kernel types, all ranks (HTA)");
  bool anyGpu = false;
  for (const auto& r : hta_.ranks) anyGpu = anyGpu || r.kernelTimeUs > 0;
  if (!anyGpu) {
    temporal_->clearStacks(temporalTitle);
    kernelTypes_->clearBars(typesTitle, top_ ? tr("no GPU kernels") : QString());
    htaNote_->setText(top_ ? tr("HTA's temporal and kernel-type breakdowns are about GPU kernels; this run has none.")
                           : QString());
    htaCharts_->setVisible(false);
    htaSection_->setMaximumHeight(htaSection_->minimumSizeHint().height());  // the note only
    return;
  }
  htaCharts_->setVisible(true);
  htaSection_->setMaximumHeight(QWIDGETSIZE_MAX);
  QStringList groups;
  std::vector<charts::StackedBarChart::Category> cats = {
      {tr("compute"), QColor::fromRgb(0x4c78a8), {}},
      {tr("non-compute"), QColor::fromRgb(0xe45756), {}},
      {tr("idle"), QColor::fromRgb(0xd0d0d0), {}},
  };
  for (const auto& r : hta_.ranks) {
    groups << tr("rank %1").arg(r.rank);
    cats[0].bytes.push_back(r.computeUs * 1000);
    cats[1].bytes.push_back(r.nonComputeUs * 1000);
    cats[2].bytes.push_back(r.idleUs * 1000);
  }
  temporal_->setStacks(temporalTitle, groups, cats);
  QStringList labels;
  std::vector<std::optional<double>> values;
  for (const auto& k : hta_.kernelTypes) {
    // "COMPUTATION overlapping COMMUNICATION" -> "compute + comm": short enough for the bar slots.
    QString label = QString::fromStdString(k.label).toLower();
    label.replace(QStringLiteral("computation"), QStringLiteral("compute"))
        .replace(QStringLiteral("communication"), QStringLiteral("comm"))
        .replace(QStringLiteral(" overlapping "), QStringLiteral(" + "));
    labels << label;
    values.push_back(static_cast<double>(k.sumUs) / 1000.0);
  }
  kernelTypes_->setBars(
      typesTitle, labels, values, std::nullopt, [](double msV) { return charts::formatMs(msV); }, tr("ms"), 1.0,
      tr("no kernels"));
  htaNote_->setText(
      tr("HTA @f4d0062c rules (µs; the last ProfilerStep dropped when there are several): the figures "
         "shardscope-cli analyze prints."));
}

QJsonObject KernelsPage::describe() const {
  using namespace describe;
  QJsonObject out = Page::describe();
  out[QStringLiteral("run")] = static_cast<double>(runId_.value());
  out[QStringLiteral("filter")] = filter_->text();
  if (!top_) return out;
  out[QStringLiteral("device_lanes")] = qs(top_->deviceLanes);
  out[QStringLiteral("measured_over")] = qs(top_->measuredOver);
  QJsonArray ranks;
  for (int r : top_->ranks) ranks.append(r);
  out[QStringLiteral("ranks")] = ranks;
  out[QStringLiteral("figures")] =
      QJsonArray{figure(QStringLiteral("device_time"), static_cast<double>(top_->kernels.timeNs), QStringLiteral("ns")),
                 figure(QStringLiteral("cpu_op_self_time"), static_cast<double>(top_->operators.timeNs), QStringLiteral("ns")),
                 figure(QStringLiteral("kernel_names"), static_cast<double>(top_->kernels.distinctNames), QString()),
                 figure(QStringLiteral("operator_names"), static_cast<double>(top_->operators.distinctNames), QString())};
  // The rows shown (after the filter, in the view's order).
  auto rows = [](const TopOpsModel* m, const TopOpsFilterProxy* p) {
    QJsonArray a;
    for (int i = 0; i < p->rowCount(); ++i) {
      const int src = p->mapToSource(p->index(i, 0)).row();
      const core::TopOpRow& r = m->rowAt(src);
      QJsonArray perRank;
      for (core::TimeNs v : r.perRankNs) perRank.append(static_cast<double>(v));
      a.append(QJsonObject{{QStringLiteral("name"), qs(r.name)},
                           {QStringLiteral("other"), r.other},
                           {QStringLiteral("count"), static_cast<double>(r.count)},
                           {QStringLiteral("time_ns"), static_cast<double>(r.timeNs)},
                           {QStringLiteral("total_ns"), static_cast<double>(r.totalNs)},
                           {QStringLiteral("share"), r.share},
                           {QStringLiteral("per_rank_ns"), perRank}});
    }
    return a;
  };
  out[QStringLiteral("kernels")] = rows(kernels_, kernelsProxy_);
  out[QStringLiteral("operators")] = rows(operators_, operatorsProxy_);
  QJsonArray temporal;
  for (const auto& r : hta_.ranks)
    temporal.append(QJsonObject{{QStringLiteral("rank"), r.rank},
                                {QStringLiteral("compute_us"), static_cast<double>(r.computeUs)},
                                {QStringLiteral("non_compute_us"), static_cast<double>(r.nonComputeUs)},
                                {QStringLiteral("idle_us"), static_cast<double>(r.idleUs)},
                                {QStringLiteral("kernel_time_us"), static_cast<double>(r.kernelTimeUs)}});
  out[QStringLiteral("temporal_breakdown")] = temporal;
  QJsonArray types;
  for (const auto& k : hta_.kernelTypes)
    types.append(QJsonObject{{QStringLiteral("label"), qs(k.label)},
                             {QStringLiteral("sum_us"), static_cast<double>(k.sumUs)},
                             {QStringLiteral("pct"), k.pct}});
  out[QStringLiteral("kernel_types")] = types;
  out[QStringLiteral("chart_series")] =
      QJsonArray{QJsonObject{{QStringLiteral("name"), QStringLiteral("temporal breakdown per rank")},
                             {QStringLiteral("length"), temporal_->groupCount()}},
                 QJsonObject{{QStringLiteral("name"), QStringLiteral("kernel types")},
                             {QStringLiteral("length"), static_cast<int>(kernelTypes_->barCount())}}};
  return out;
}

}  // namespace shardscope::ui
