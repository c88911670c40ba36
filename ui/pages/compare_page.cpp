#include "ui/charts/qcp.h"
#include "ui/pages/describe.h"
#include "ui/pages/compare_page.h"

#include <set>

#include <QAction>
#include <QApplication>
#include <QClipboard>
#include <QComboBox>
#include <QGridLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QJsonDocument>
#include <QLabel>
#include <QMenu>
#include <QPainter>
#include <QScrollBar>
#include <QSplitter>
#include <QStyledItemDelegate>
#include <QTableView>
#include <QTableWidget>
#include <QToolButton>
#include <QVBoxLayout>

#include <algorithm>

#include "ui/charts/bar_chart.h"
#include "ui/charts/stacked_bar_chart.h"
#include "ui/charts/chart_style.h"
#include "core/report/report.h"
#include "ui/common/background.h"
#include "ui/models/comparison_model.h"
#include "ui/models/snapshot_models.h"
#include "ui/models/strategy_table_model.h"

namespace shardscope::ui {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Paints a comparison cell as "value  (delta)": the value in the cell's font (bold for the best run),
// the delta right-aligned in a fixed slot, green when better, red when worse, grey when unchanged.
class ComparisonDelegate : public QStyledItemDelegate {
 public:
  using QStyledItemDelegate::QStyledItemDelegate;

  void paint(QPainter* painter, const QStyleOptionViewItem& option, const QModelIndex& index) const override {
    if (index.column() == 0) {
      QStyledItemDelegate::paint(painter, option, index);
      return;
    }
    QStyleOptionViewItem opt = option;
    initStyleOption(&opt, index);
    const QString value = index.data(ComparisonModel::ValueTextRole).toString();
    const QString delta = index.data(ComparisonModel::DeltaTextRole).toString();
    opt.text.clear();
    const QWidget* w = opt.widget;
    QStyle* style = w ? w->style() : QApplication::style();
    style->drawControl(QStyle::CE_ItemViewItem, &opt, painter, w);

    painter->save();
    const bool selected = opt.state & QStyle::State_Selected;
    const QRect r = opt.rect.adjusted(6, 0, -8, 0);
    const int slot = deltaSlot(opt.font);
    painter->setFont(opt.font);
    QColor valueColor = selected ? opt.palette.color(QPalette::HighlightedText) : opt.palette.color(QPalette::Text);
    if (const QVariant fg = index.data(Qt::ForegroundRole); fg.isValid())
      valueColor = index.data(Qt::ForegroundRole).value<QBrush>().color();
    painter->setPen(valueColor);
    QRect valueRect = r;
    if (!isBaselineColumn(index)) valueRect.setRight(r.right() - slot - 6);
    painter->drawText(valueRect, Qt::AlignRight | Qt::AlignVCenter, value);
    if (!delta.isEmpty()) {
      QColor c = charts::mutedTextColor();
      switch (static_cast<ComparisonModel::DeltaState>(index.data(ComparisonModel::DeltaStateRole).toInt())) {
        case ComparisonModel::DeltaState::Better:
          c = charts::betterColor();
          break;
        case ComparisonModel::DeltaState::Worse:
          c = charts::worseColor();
          break;
        default:
          break;
      }
      if (selected) c = opt.palette.color(QPalette::HighlightedText);
      QFont f = opt.font;
      f.setBold(false);
      painter->setFont(f);
      painter->setPen(c);
      painter->drawText(r, Qt::AlignRight | Qt::AlignVCenter, delta);
    }
    painter->restore();
  }

  QSize sizeHint(const QStyleOptionViewItem& option, const QModelIndex& index) const override {
    QSize s = QStyledItemDelegate::sizeHint(option, index);
    if (index.column() == 0) return s + QSize(12, 6);
    QFont f = option.font;
    f.setBold(true);
    const QFontMetrics fm(f);
    const int w = fm.horizontalAdvance(index.data(ComparisonModel::ValueTextRole).toString()) + deltaSlot(f) + 28;
    return {std::max(s.width(), w), s.height() + 6};
  }

 private:
  static int deltaSlot(const QFont& font) { return QFontMetrics(font).horizontalAdvance(QStringLiteral("(+8,888.8%)")); }
  static bool isBaselineColumn(const QModelIndex& index) {
    const auto* m = qobject_cast<const ComparisonModel*>(index.model());
    return m && static_cast<std::size_t>(index.column() - 1) == m->baseline();
  }
};

struct ChartSpec {
  const char* key;
  const char* title;
  const char* empty;  // why there can be no value
};
constexpr ChartSpec kCharts[] = {
    {"step_time_ms", QT_TRANSLATE_NOOP("ComparePage", "Step time"), QT_TRANSLATE_NOOP("ComparePage", "No steps in these runs")},
    {core::metric_keys::kTokensPerSecond, QT_TRANSLATE_NOOP("ComparePage", "Throughput"),
     QT_TRANSLATE_NOOP("ComparePage", "Throughput is measured by Shardscope's runtime;\nimported traces do not record it")},
    {"peak_allocated_gib", QT_TRANSLATE_NOOP("ComparePage", "Peak memory allocated (max over ranks)"),
     QT_TRANSLATE_NOOP("ComparePage", "No memory records in these runs\n(torch.profiler records them with profile_memory=True)")},
    {"exposed_comm_pct", QT_TRANSLATE_NOOP("ComparePage", "Exposed communication"),
     QT_TRANSLATE_NOOP("ComparePage", "No steps in these runs")},
};

}  // namespace

ComparePage::ComparePage(QWidget* parent)
    : Page(parent), model_(new ComparisonModel(this)), strategyModel_(new StrategyTableModel(this)) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(8, 8, 8, 8);
  layout->setSpacing(6);

  auto* bar = new QHBoxLayout;
  auto* baselineLabel = new QLabel(tr("Baseline:"), this);
  baseline_ = new QComboBox(this);
  baseline_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);  // long run names: the popup shows them
  baseline_->setMinimumContentsLength(24);
  baseline_->setToolTip(tr("Deltas are computed against this run"));
  baselineLabel->setBuddy(baseline_);
  copyButton_ = new QToolButton(this);
  copyButton_->setText(tr("Copy as CSV"));
  copyButton_->setToolTip(tr("Copy the comparison table as CSV (Ctrl+C)"));
  bar->addWidget(baselineLabel);
  bar->addWidget(baseline_);
  bar->addStretch(1);
  bar->addWidget(copyButton_);
  layout->addLayout(bar);

  note_ = new QLabel(this);
  note_->setWordWrap(true);
  note_->setStyleSheet(QStringLiteral(
      "QLabel { background: #fff8e1; border: 1px solid #f0d999; border-radius: 3px; padding: 6px; color: #5d4b00; }"));
  layout->addWidget(note_);
  measured_ = new QLabel(this);
  measured_->setWordWrap(true);
  measured_->setStyleSheet(QStringLiteral("QLabel { color: #555; }"));
  measured_->hide();
  layout->addWidget(measured_);
  configDiff_ = new QLabel(this);
  configDiff_->setTextFormat(Qt::RichText);
  configDiff_->setWordWrap(true);
  configDiff_->hide();
  layout->addWidget(configDiff_);
  // The verdict and its reasons: the report's recommendation (core::buildReport), the same text the
  // exported reports carry.
  recommendation_ = new QLabel(this);
  recommendation_->setObjectName(QStringLiteral("recommendation"));
  recommendation_->setTextFormat(Qt::RichText);
  recommendation_->setWordWrap(true);
  recommendation_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  recommendation_->setStyleSheet(QStringLiteral("QLabel { background: #f3f7fb; border: 1px solid #d0dbe6; padding: 6px; }"));
  recommendation_->hide();
  layout->addWidget(recommendation_);
  errorLabel_ = new QLabel(this);
  errorLabel_->setWordWrap(true);
  errorLabel_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  errorLabel_->setStyleSheet(QStringLiteral(
      "QLabel { background: #fdecea; border: 1px solid #f5c2c0; border-radius: 3px; padding: 6px; color: #8a1c1c; }"));
  errorLabel_->hide();
  layout->addWidget(errorLabel_);

  // The strategy table: one row per run, as tall as its rows (a handful of runs).
  strategyTable_ = new QTableView(this);
  strategyTable_->setObjectName(QStringLiteral("strategyTable"));
  strategyTable_->setModel(strategyModel_);
  strategyTable_->verticalHeader()->hide();
  strategyTable_->setAlternatingRowColors(true);
  strategyTable_->setSelectionBehavior(QAbstractItemView::SelectRows);
  strategyTable_->setWordWrap(false);
  strategyTable_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  strategyTable_->verticalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  strategyTable_->setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
  strategyTable_->setToolTip(
      tr("The strategy table: peak memory per GPU (max over ranks), initialisation, throughput, "
         "communication shares and checkpoint save time per run; n/a where a figure cannot be known"));
  strategyTable_->hide();
  layout->addWidget(strategyTable_);

  // Two runs with memory snapshots: core's compareSnapshots, figures side by side and what grew.
  snapshotBox_ = new QGroupBox(tr("Memory snapshots"), this);
  snapshotBox_->setObjectName(QStringLiteral("snapshotComparison"));
  auto* sl = new QHBoxLayout(snapshotBox_);
  auto* figs = new QVBoxLayout;
  snapshotNote_ = new QLabel(snapshotBox_);
  snapshotNote_->setWordWrap(true);
  figs->addWidget(snapshotNote_);
  snapshotFigures_ = new QTableWidget(3, 4, snapshotBox_);
  snapshotFigures_->setObjectName(QStringLiteral("snapshotFigures"));
  snapshotFigures_->setHorizontalHeaderLabels({tr("Figure"), tr("A"), tr("B"), tr("B − A")});
  snapshotFigures_->verticalHeader()->hide();
  snapshotFigures_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  snapshotFigures_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  snapshotFigures_->setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Fixed);
  figs->addWidget(snapshotFigures_);
  figs->addStretch(1);
  sl->addLayout(figs, 2);
  growthModel_ = new SnapshotGrowthModel(this);
  growthTable_ = new QTableView(snapshotBox_);
  growthTable_->setObjectName(QStringLiteral("snapshotGrowth"));
  growthTable_->setModel(growthModel_);
  growthTable_->verticalHeader()->hide();
  growthTable_->setAlternatingRowColors(true);
  growthTable_->setSelectionBehavior(QAbstractItemView::SelectRows);
  growthTable_->setWordWrap(false);
  growthTable_->horizontalHeader()->setStretchLastSection(true);
  growthTable_->setToolTip(tr("Allocation groups alive at the peak (by owner and site) that hold more bytes in B than in A"));
  sl->addWidget(growthTable_, 3);
  snapshotBox_->setMaximumHeight(260);
  snapshotBox_->hide();
  layout->addWidget(snapshotBox_);

  splitter_ = new QSplitter(Qt::Vertical, this);
  table_ = new QTableView(splitter_);
  table_->setModel(model_);
  table_->setItemDelegate(new ComparisonDelegate(table_));
  table_->verticalHeader()->hide();
  table_->setAlternatingRowColors(true);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setContextMenuPolicy(Qt::CustomContextMenu);
  table_->setWordWrap(false);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->horizontalHeader()->setStretchLastSection(false);
  table_->horizontalHeader()->setMinimumSectionSize(110);
  table_->verticalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  splitter_->addWidget(table_);

  chartPanel_ = new QWidget(splitter_);
  auto* grid = new QGridLayout(chartPanel_);
  grid->setContentsMargins(0, 0, 0, 0);
  grid->setSpacing(6);
  int i = 0;
  for (const auto& spec : kCharts) {
    auto* chart = new charts::BarChart(chartPanel_);
    chart->clearBars(tr(spec.title), QStringLiteral(" "));
    grid->addWidget(chart, i / 2, i % 2);
    charts_.push_back(chart);
    ++i;
  }
  breakdown_ = new charts::StackedBarChart(chartPanel_);
  breakdown_->setUnit(charts::StackedBarChart::Unit::Nanoseconds);
  breakdown_->clearStacks(tr("Where a step goes (mean of counted steps)"));
  grid->addWidget(breakdown_, (i + 1) / 2, 0, 1, 2);
  splitter_->addWidget(chartPanel_);
  splitter_->setStretchFactor(0, 2);
  splitter_->setStretchFactor(1, 3);
  layout->addWidget(splitter_, 1);

  auto* copy = new QAction(tr("Copy table as CSV"), this);
  copy->setShortcut(QKeySequence::Copy);
  copy->setShortcutContext(Qt::WidgetWithChildrenShortcut);
  addAction(copy);
  connect(copy, &QAction::triggered, this, &ComparePage::copyCsv);
  connect(copyButton_, &QToolButton::clicked, this, &ComparePage::copyCsv);
  connect(table_, &QTableView::customContextMenuRequested, this, &ComparePage::showContextMenu);
  connect(baseline_, &QComboBox::currentIndexChanged, this, [this](int index) {
    if (index >= 0 && !model_->isEmpty()) model_->setBaseline(static_cast<std::size_t>(index));
  });
  updateNote();
}

ComparePage::~ComparePage() {
  if (task_) {
    task_->cancel();
    task_->wait(2000);
  }
}

bool ComparePage::busy() const { return !task_.isNull(); }

void ComparePage::setContext(const QString& dbPath, const QList<core::RunId>& runs) {
  if (dbPath == dbPath_ && runs == runs_ && (loaded_ || busy())) return;
  sessionFor(dbPath);
  dbPath_ = dbPath;
  runs_ = runs;
  reload();
}

void ComparePage::reload() {
  session()->tasks()->cancel(taskSlot());
  task_ = nullptr;
  ++generation_;
  loaded_ = false;
  error_.clear();
  errorLabel_->hide();
  {
    const QSignalBlocker block(baseline_);
    baseline_->clear();
  }
  model_->clear();
  strategyModel_->clear();
  strategyTable_->hide();
  recommendation_->clear();
  recommendation_->hide();
  snapshotComparison_.reset();
  growthModel_->clear();
  snapshotBox_->hide();
  updateCharts();
  updateNote();
  if (dbPath_.isEmpty() || runs_.isEmpty()) {
    setBusy(false);
    return;
  }
  start();
}

void ComparePage::start() {
  const std::vector<core::RunId> ids(runs_.begin(), runs_.end());
  const unsigned generation = generation_;
  // The comparison and the recommendation, from the session's analyses (each run analysed once for
  // every page): core::buildReport without its memory charts.
  task_ = session()->run<core::Report>(
      this, taskSlot(), tr("Comparing %n run(s)", nullptr, static_cast<int>(ids.size())),
      [ids](core::TraceStore& store, RunCache& cache, core::CancelToken& cancel, const core::ProgressFn& progress) {
        core::ReportOptions options;
        options.memoryCharts = false;
        options.analysisSource = RunSession::analysisSource(cache, store, &cancel);
        options.generatedAt = "-";
        return core::buildReport(store, ids, options, &cancel, progress);
      },
      [this, generation](core::Report r) {
        if (generation != generation_) return;
        task_ = nullptr;
        showRecommendation(r);
        showSnapshots(r);
        showComparison(std::move(r.comparison));
        setBusy(false);
      },
      [this, generation](QString message) {
        if (generation != generation_) return;
        task_ = nullptr;
        showError(message);
        setBusy(false);
      });
  connect(task_, &BackgroundTask::progress, this, [this, generation](int pct, const QString& stage) {
    if (generation == generation_) Q_EMIT progress(pct, stage);
  });
  connect(task_, &BackgroundTask::cancelled, this, [this, generation] {
    if (generation == generation_ && task_.isNull()) setBusy(false);
  });
  setBusy(true);
  Q_EMIT statusMessage(tr("comparing %1 runs…").arg(ids.size()));
}

void ComparePage::showRecommendation(const core::Report& r) {
  const auto& rec = r.recommendation;
  if (rec.sentences.empty()) {
    recommendation_->hide();
    return;
  }
  QStringList sentences;
  for (const auto& s : rec.sentences) sentences << QString::fromStdString(s).toHtmlEscaped();
  QString html =
      QStringLiteral("<b>%1</b> %2").arg(r.runs.size() > 1 ? tr("Verdict:") : tr("Summary:"), sentences.join(QLatin1Char(' ')));
  if (!rec.reasons.empty()) {
    html += QStringLiteral("<br><span style='color:#555'>%1</span><ul style='margin:0'>").arg(tr("Why:"));
    for (const auto& s : rec.reasons) html += QStringLiteral("<li>%1</li>").arg(QString::fromStdString(s).toHtmlEscaped());
    html += QStringLiteral("</ul>");
  }
  recommendation_->setText(html);
  recommendation_->show();
  recommendationPlain_ = sentences.join(QLatin1Char(' '));
  recommendedRun_ = rec.recommended && *rec.recommended < r.runs.size() ? r.runs[*rec.recommended].id : core::RunId{};
}

void ComparePage::showSnapshots(const core::Report& r) {
  // Each run's snapshot with the largest peak (its peak device); A = the first such run, B = the next.
  std::vector<std::pair<const core::ReportRun*, const core::SnapshotFigures*>> with;
  for (const auto& run : r.runs) {
    const core::SnapshotFigures* best = nullptr;
    for (const auto& f : run.analysis.memorySnapshots)
      if (!best || f.peakActiveBytes > best->peakActiveBytes) best = &f;
    if (best) with.emplace_back(&run, best);
  }
  if (with.size() < 2) {
    snapshotComparison_.reset();
    growthModel_->clear();
    snapshotBox_->hide();
    return;
  }
  const auto& [runA, a] = with[0];
  const auto& [runB, b] = with[1];
  snapshotComparison_ = core::compareSnapshots(*a, *b);
  const core::SnapshotComparison& c = *snapshotComparison_;
  const auto label = [](const core::ReportRun* run, const core::SnapshotFigures* f) {
    return QObject::tr("%1 (rank %2, cuda:%3)")
        .arg(QString::fromStdString(core::runLabel(run->name, run->id)))
        .arg(f->rank)
        .arg(f->device);
  };
  QString note = tr("A: %1 · B: %2").arg(label(runA, a), label(runB, b));
  if (with.size() > 2) note += tr(" (%1 runs have snapshots: the first two are compared)").arg(with.size());
  snapshotNote_->setText(note);
  struct Row {
    QString name;
    std::int64_t a, b, delta;
  };
  const Row rows[] = {{tr("Peak active"), c.a.peakActiveBytes, c.b.peakActiveBytes, c.peakActiveDelta},
                      {tr("Peak reserved"), c.a.peakReservedBytes, c.b.peakReservedBytes, c.peakReservedDelta},
                      {tr("Fragmentation at the peak"), c.a.fragmentationBytes, c.b.fragmentationBytes, c.fragmentationDelta}};
  for (int i = 0; i < 3; ++i) {
    const Row& row = rows[i];
    snapshotFigures_->setItem(i, 0, new QTableWidgetItem(row.name));
    int col = 1;
    for (std::int64_t v : {row.a, row.b, row.delta}) {
      QString text = charts::formatBytes(static_cast<double>(v), 2);
      if (col == 3) {
        if (v > 0) text.prepend(QLatin1Char('+'));
        if (row.a != 0)
          text +=
              QStringLiteral(" (%1%2 %)")
                  .arg(v > 0 ? QStringLiteral("+") : QString(),
                       QLocale(QLocale::English).toString(100.0 * static_cast<double>(v) / static_cast<double>(row.a), 'f', 1));
      }
      auto* item = new QTableWidgetItem(text);
      item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
      item->setToolTip(tr("%1 bytes").arg(charts::formatNumber(static_cast<double>(v))));
      item->setData(Qt::UserRole, static_cast<qlonglong>(v));
      if (col == 3 && v != 0) item->setForeground(v > 0 ? charts::worseColor() : charts::betterColor());
      snapshotFigures_->setItem(i, col++, item);
    }
  }
  snapshotFigures_->setFixedHeight(snapshotFigures_->horizontalHeader()->sizeHint().height() +
                                   snapshotFigures_->verticalHeader()->length() + 2 * snapshotFigures_->frameWidth());
  growthModel_->setRows(c.grew);
  growthTable_->resizeColumnsToContents();
  snapshotBox_->show();
}

QString ComparePage::recommendationText() const { return recommendation_->isHidden() ? QString() : recommendationPlain_; }

void ComparePage::cancelLoad() {
  if (!task_) return;
  session()->tasks()->cancel(taskSlot());
  task_ = nullptr;
  ++generation_;
  setBusy(false);
  Q_EMIT statusMessage(tr("comparison cancelled"));
}

void ComparePage::setBusy(bool b) {
  Q_EMIT busyChanged(b);
  if (!b) Q_EMIT progress(100, QString());
}

void ComparePage::showComparison(core::Comparison c) {
  loaded_ = true;
  const std::size_t runs = c.runs.size();
  QStringList names;
  for (std::size_t i = 0; i < runs; ++i) names << QString::fromStdString(core::runLabel(c.names[i], c.runs[i]));
  strategyModel_->setTable(c.strategies);
  model_->setComparison(std::move(c));
  fitStrategyTable();
  {
    const QSignalBlocker block(baseline_);
    baseline_->clear();
    for (std::size_t i = 0; i < runs; ++i) baseline_->addItem(names[static_cast<int>(i)]);
    baseline_->setCurrentIndex(0);
  }
  table_->resizeColumnsToContents();
  fitTable();
  updateCharts();
  updateNote();
  {
    // How the step time (and so every share) was measured, per run where they differ (docs/METRICS.md).
    const auto& cmp = model_->comparison();
    QStringList lines;
    std::set<std::string> kinds;
    for (const auto& f : cmp.figures) kinds.insert(core::describeStepTime(f));
    if (kinds.size() == 1 && !kinds.begin()->empty()) {
      lines << tr("Step time: %1.").arg(QString::fromStdString(*kinds.begin()));
    } else {
      for (std::size_t i = 0; i < cmp.figures.size() && i < cmp.names.size(); ++i) {
        const std::string how = core::describeStepTime(cmp.figures[i]);
        lines << tr("%1 (run %2): step time from %3.")
                     .arg(QString::fromStdString(cmp.names[i]))
                     .arg(cmp.runs[i].value())
                     .arg(how.empty() ? tr("nothing (no steps)") : QString::fromStdString(how));
      }
    }
    bool counter = false;
    for (const auto& f : cmp.figures)
      for (const auto& p : f.peaks) counter = counter || p.fromCounter;
    if (counter) lines << tr("Peak memory: the caching allocator's peak counter where it is above every memory sample.");
    measured_->setText(lines.join(QLatin1Char('\n')));
    measured_->setHidden(lines.isEmpty());
    // What differs in the runs' configurations (the first 12 keys; the CLI and JSON list them all).
    QString html;
    if (!cmp.configDiff.empty()) {
      html = QStringLiteral("<b>%1</b> ").arg(tr("Configuration differences:"));
      QStringList items;
      const std::size_t shown = std::min<std::size_t>(cmp.configDiff.size(), 12);
      for (std::size_t k = 0; k < shown; ++k) {
        const auto& d = cmp.configDiff[k];
        QStringList vals;
        for (const auto& v : d.values) vals << (v ? QString::fromStdString(*v).toHtmlEscaped() : QStringLiteral("–"));
        items << QStringLiteral("%1: %2").arg(QString::fromStdString(d.key).toHtmlEscaped(), vals.join(QStringLiteral(" | ")));
      }
      html += items.join(QStringLiteral("; "));
      if (cmp.configDiff.size() > shown) html += tr("; and %1 more").arg(cmp.configDiff.size() - shown);
    }
    configDiff_->setText(html);
    configDiff_->setHidden(html.isEmpty());
  }
  Q_EMIT statusMessage(runs == 1 ? tr("figures of 1 run") : tr("compared %1 runs").arg(runs));
}

void ComparePage::fitStrategyTable() {
  strategyTable_->setHidden(strategyModel_->isEmpty());
  if (strategyModel_->isEmpty()) return;
  strategyTable_->resizeColumnsToContents();
  strategyTable_->resizeRowsToContents();
  const int h = strategyTable_->horizontalHeader()->sizeHint().height() + strategyTable_->verticalHeader()->length() +
                2 * strategyTable_->frameWidth() + strategyTable_->horizontalScrollBar()->sizeHint().height();
  strategyTable_->setFixedHeight(h);
}

void ComparePage::fitTable() {
  // The whole table when it fits, the charts get the rest (at least 320 px).
  const int total = splitter_->height();
  if (total <= 0 || model_->rowCount() == 0) return;
  const int want = table_->horizontalHeader()->height() + table_->verticalHeader()->length() + 2 * table_->frameWidth() + 2 +
                   (table_->horizontalScrollBar()->isVisible() ? table_->horizontalScrollBar()->height() : 0);
  const int tableHeight = std::clamp(want, 120, std::max(120, total - 320));
  splitter_->setSizes({tableHeight, total - tableHeight});
}

void ComparePage::showEvent(QShowEvent* event) {
  Page::showEvent(event);
  fitTable();
}

void ComparePage::showError(const QString& message) {
  error_ = message;
  errorLabel_->setText(tr("Could not compare the runs: %1").arg(message));
  errorLabel_->show();
  Q_EMIT errorMessage(tr("Compare: %1").arg(message));
}

void ComparePage::setBaselineIndex(int index) { baseline_->setCurrentIndex(index); }

QString ComparePage::noteText() const { return note_->isHidden() ? QString() : note_->text(); }

QString ComparePage::measuredText() const { return measured_->isHidden() ? QString() : measured_->text(); }

QString ComparePage::configDiffText() const { return configDiff_->isHidden() ? QString() : configDiff_->text(); }

void ComparePage::updateNote() {
  QString text;
  if (dbPath_.isEmpty())
    text = tr("Open a database to compare its runs.");
  else if (runs_.isEmpty())
    text = tr("Select two or more runs in the run browser to compare them.");
  else if (runs_.size() < 2)
    text =
        tr("Only one run is selected: select at least one more run in the run browser (Ctrl+click) to see deltas "
           "and the best run per figure.");
  note_->setText(text);
  note_->setHidden(text.isEmpty());
  baseline_->setEnabled(baseline_->count() > 1);
  copyButton_->setEnabled(!model_->isEmpty());
}

void ComparePage::updateCharts() {
  const auto& c = model_->comparison();
  QStringList names;
  for (std::size_t i = 0; i < c.names.size() && i < c.runs.size(); ++i)
    names << QString::fromStdString(core::runLabel(c.names[i], c.runs[i]));
  {
    // The stacked step: compute + exposed communication + other device work + idle = the mean step
    // (core::StepMeans, the figures the table shows as shares).
    // The parts' names and colours are the reports' (core/report/palette.h).
    using core::palette::StepPart;
    std::vector<charts::StackedBarChart::Category> cats;
    for (StepPart part : {StepPart::Compute, StepPart::ExposedCommunication, StepPart::OtherDeviceWork, StepPart::Idle})
      cats.push_back({tr(core::palette::stepPartName(part)), charts::stepPartColor(part), {}});
    bool any = false;
    for (std::size_t i = 0; i < c.figures.size() && i < static_cast<std::size_t>(names.size()); ++i) {
      const auto& m = c.figures[i].means;
      any = any || m.rows > 0;
      cats[0].bytes.push_back(static_cast<std::int64_t>(m.computeNs));
      cats[1].bytes.push_back(static_cast<std::int64_t>(m.exposedNs));
      cats[2].bytes.push_back(static_cast<std::int64_t>(m.otherNs));
      cats[3].bytes.push_back(static_cast<std::int64_t>(m.idleNs));
    }
    const QString title = tr("Where a step goes (mean of counted steps)");
    if (any)
      breakdown_->setStacks(title, names.mid(0, static_cast<int>(cats[0].bytes.size())), cats);
    else
      breakdown_->clearStacks(title);
  }
  for (std::size_t i = 0; i < charts_.size(); ++i) {
    const ChartSpec& spec = kCharts[i];
    charts::BarChart* chart = charts_[i];
    const core::ComparisonRow* row = nullptr;
    for (const auto& r : c.rows)
      if (r.key == spec.key) row = &r;
    if (!row) {
      chart->clearBars(tr(spec.title), c.runs.empty() ? QStringLiteral(" ") : tr(spec.empty));
      continue;
    }
    const std::string key = row->key;
    if (key == "peak_allocated_gib") {
      double maxV = 0;
      for (const auto& v : row->values) maxV = std::max(maxV, v.value_or(0.0));
      const charts::ByteScale scale = charts::byteScaleFor(maxV * kGiB);
      chart->setBars(
          tr(spec.title), names, row->values, row->best, [](double v) { return charts::formatBytes(v * kGiB); }, scale.suffix,
          kGiB / scale.factor, tr(spec.empty));
    } else {
      QString axis;
      if (key == "step_time_ms")
        axis = tr("ms per step");
      else if (key == core::metric_keys::kTokensPerSecond)
        axis = tr("tokens/s");
      else if (key == "exposed_comm_pct")
        axis = tr("% of step time");
      chart->setBars(
          tr(spec.title), names, row->values, row->best, [key](double v) { return ComparisonModel::formatValue(key, v); }, axis,
          1.0, tr(spec.empty));
    }
  }
}

QString ComparePage::csv() const { return model_->toCsv(); }

void ComparePage::copyCsv() {
  if (model_->isEmpty()) return;
  QApplication::clipboard()->setText(csv());
  Q_EMIT statusMessage(tr("table copied as CSV"));
}

void ComparePage::showContextMenu(const QPoint& pos) {
  QMenu menu(this);
  QAction* copy = menu.addAction(tr("Copy table as CSV"), this, &ComparePage::copyCsv);
  copy->setShortcut(QKeySequence::Copy);
  copy->setEnabled(!model_->isEmpty());
  const QModelIndex index = table_->indexAt(pos);
  if (index.isValid() && index.column() > 0) {
    const int run = index.column() - 1;
    menu.addAction(
        tr("Use “%1” as baseline").arg(QString::fromStdString(model_->comparison().names[static_cast<std::size_t>(run)])), this,
        [this, run] { setBaselineIndex(run); });
  }
  menu.exec(table_->viewport()->mapToGlobal(pos));
}

QJsonObject ComparePage::describe() const {
  using namespace describe;
  QJsonObject out = Page::describe();
  const auto& c = model_->comparison();
  QJsonArray runs;
  for (std::size_t i = 0; i < c.runs.size(); ++i) runs.append(runRef(c.runs[i], qs(core::runLabel(c.names[i], c.runs[i]))));
  out[QStringLiteral("runs")] = runs;
  out[QStringLiteral("baseline")] = static_cast<int>(c.baseline);
  QJsonArray rows;
  for (const auto& r : c.rows) {
    QJsonArray values, deltaPct, deltaPp, noise;
    for (std::size_t i = 0; i < r.values.size(); ++i) {
      values.append(number(r.values[i]));
      deltaPct.append(number(i < r.deltaPct.size() ? r.deltaPct[i] : std::nullopt));
      deltaPp.append(number(i < r.deltaPp.size() ? r.deltaPp[i] : std::nullopt));
      noise.append(i < r.withinNoise.size() && r.withinNoise[i]);
    }
    rows.append(QJsonObject{{QStringLiteral("key"), qs(r.key)},
                            {QStringLiteral("label"), ComparisonModel::displayLabel(r)},
                            {QStringLiteral("unit"), rowUnit(r.key)},
                            {QStringLiteral("values"), values},
                            {QStringLiteral("delta_pct"), deltaPct},
                            {QStringLiteral("delta_pp"), deltaPp},
                            {QStringLiteral("within_noise"), noise},
                            {QStringLiteral("best"), r.best ? QJsonValue(static_cast<int>(*r.best)) : QJsonValue()}});
  }
  out[QStringLiteral("rows")] = rows;
  // The strategy table as core writes it (compare-runs --json's "strategy_table").
  out[QStringLiteral("strategy_table")] =
      QJsonDocument::fromJson(QByteArray::fromStdString(core::toJson(strategyModel_->table()).dump())).array();
  QJsonArray charts;
  {
    QJsonArray series;
    for (int k = 0; k < breakdown_->categoryCount(); ++k) {
      QJsonArray ms;
      for (int g = 0; g < breakdown_->groupCount(); ++g) {
        const auto* bars = breakdown_->bars(k);
        ms.append(g < bars->data()->size() ? bars->data()->at(g)->value : 0.0);  // one bar per run, in order
      }
      series.append(QJsonObject{{QStringLiteral("name"), breakdown_->bars(k)->name()},
                                {QStringLiteral("length"), breakdown_->groupCount()},
                                {QStringLiteral("values_ms"), ms}});
    }
    charts.append(QJsonObject{{QStringLiteral("title"), QStringLiteral("step breakdown")}, {QStringLiteral("series"), series}});
  }
  for (const auto* chart : charts_) {
    QJsonArray values;
    for (std::size_t i = 0; i < chart->barCount(); ++i) values.append(number(chart->plottedValue(i)));
    charts.append(QJsonObject{
        {QStringLiteral("title"), chart->title()},
        {QStringLiteral("series"), QJsonArray{QJsonObject{{QStringLiteral("name"), chart->title()},
                                                          {QStringLiteral("length"), static_cast<int>(chart->barCount())},
                                                          {QStringLiteral("values"), values}}}}});
  }
  out[QStringLiteral("charts")] = charts;
  out[QStringLiteral("verdict")] = recommendationText();
  out[QStringLiteral("recommended_run")] = static_cast<double>(recommendedRun_.value());
  // The comparison's verdict as core writes it (toJson(ComparisonVerdict)): `compare-runs --json`'s.
  out[QStringLiteral("verdict_detail")] =
      QJsonDocument::fromJson(QByteArray::fromStdString(core::toJson(c.verdict, c.runs).dump())).object();
  QJsonArray diff;
  for (const auto& d : c.configDiff) diff.append(qs(d.key));
  out[QStringLiteral("config_diff_keys")] = diff;
  out[QStringLiteral("measured")] = measuredText();
  // The snapshot comparison as core writes it (SnapshotComparison::toJson); null when not shown.
  out[QStringLiteral("memory_snapshots")] =
      snapshotComparison_
          ? QJsonValue(QJsonDocument::fromJson(QByteArray::fromStdString(snapshotComparison_->toJson().dump())).object())
          : QJsonValue();
  return out;
}

}  // namespace shardscope::ui
