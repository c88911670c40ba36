#include "ui/pages/describe.h"
#include "ui/pages/timeline_page.h"

#include <QCheckBox>
#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QScrollArea>
#include <QSpinBox>
#include <QSplitter>
#include <QStackedWidget>
#include <QTableWidget>
#include <QTextBrowser>
#include <QToolButton>
#include <QVBoxLayout>

#include <algorithm>

#include "core/storage/trace_store.h"
#include "ui/common/flow_layout.h"
#include "ui/charts/chart_style.h"
#include "ui/common/background.h"
#include "ui/timeline/step_compare_widget.h"
#include "ui/timeline/timeline_widget.h"

namespace shardscope::ui {

namespace tl = core::timeline;
using core::TimeNs;

std::vector<CollectivePeer> sameCollectiveOnOtherRanks(const tl::TimelineIndex& index, std::uint32_t lane, std::uint32_t event) {
  std::vector<CollectivePeer> out;
  const tl::Lane& l = index.lane(lane);
  if (!(l.bits[event] & tl::EventBits::Collective)) return out;
  const auto op = tl::keyOp(l.key[event]);
  // Instances of this op on a lane, in start order.
  auto instances = [&](const tl::Lane& ln) {
    std::vector<std::uint32_t> v;
    for (std::uint32_t i = 0; i < ln.eventCount(); ++i)
      if ((ln.bits[i] & tl::EventBits::Collective) && tl::keyOp(ln.key[i]) == op) v.push_back(i);
    std::sort(v.begin(), v.end(), [&](std::uint32_t a, std::uint32_t b) { return ln.start[a] < ln.start[b]; });
    return v;
  };
  const auto mine = instances(l);
  const auto at = std::find(mine.begin(), mine.end(), event);
  if (at == mine.end()) return out;
  const std::size_t k = static_cast<std::size_t>(at - mine.begin());
  // The same lane on another rank: same kind and process group (our comm lanes: same name).
  for (std::uint32_t li = 0; li < index.lanes().size(); ++li) {
    const tl::Lane& o = index.lane(li);
    if (o.rankIndex == l.rankIndex || o.kind != l.kind) continue;
    const bool sameGroup = l.kind == tl::LaneKind::CommGroup ? o.processGroupId == l.processGroupId
                           : l.kind == tl::LaneKind::Comm    ? o.name == l.name
                                                             : o.stream == l.stream && o.name == l.name;
    if (!sameGroup) continue;
    const auto theirs = instances(o);
    if (k >= theirs.size()) continue;
    const std::uint32_t i = theirs[k];
    out.push_back({index.ranks()[static_cast<std::size_t>(o.rankIndex)].rank, li, i, o.start[i], o.end[i]});
  }
  std::sort(out.begin(), out.end(), [](const CollectivePeer& a, const CollectivePeer& b) { return a.rank < b.rank; });
  return out;
}

namespace {

QString ms(TimeNs ns) { return charts::formatMs(static_cast<double>(ns) / 1e6); }

QToolButton* toolButton(const QString& text, const QString& tip, QWidget* parent) {
  auto* b = new QToolButton(parent);
  b->setText(text);
  b->setToolTip(tip);
  b->setAutoRaise(true);
  return b;
}

}  // namespace

TimelinePage::TimelinePage(QWidget* parent) : Page(parent) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  // The controls wrap onto a second row on a narrow window; the info text keeps the rest of the row.
  auto* bar = new FlowLayout;
  viewCombo_ = new QComboBox(this);
  viewCombo_->setObjectName(QStringLiteral("timelineView"));
  viewCombo_->addItem(tr("One run"));
  viewCombo_->addItem(tr("Same step of each run"));
  viewCombo_->addItem(tr("Runs stacked (counted steps)"));
  viewCombo_->setToolTip(
      tr("With several runs selected: one run's full timeline, the same counted step of every run on "
         "one relative axis, or every run's counted steps one above the other"));
  bar->addWidget(viewCombo_);
  stepLabel_ = new QLabel(tr("Step:"), this);
  bar->addWidget(stepLabel_);
  stepSpin_ = new QSpinBox(this);
  stepSpin_->setToolTip(tr("Which counted step of each run (1 = the first counted step; the warm-up is not counted)"));
  stepSpin_->setMinimum(1);
  bar->addWidget(stepSpin_);
  runLabel_ = new QLabel(tr("Run:"), this);
  bar->addWidget(runLabel_);
  runCombo_ = new QComboBox(this);
  runCombo_->setMinimumContentsLength(18);
  bar->addWidget(runCombo_);
  fit_ = toolButton(tr("Fit steps"), tr("Show the training steps (F)"), this);
  fitAll_ = toolButton(tr("Whole run"), tr("Show the whole run, initialisation included (Home)"), this);
  back_ = toolButton(tr("◀ Back"), tr("Previous zoom (Alt+Left, Backspace)"), this);
  forward_ = toolButton(tr("Forward ▶"), tr("Next zoom (Alt+Right)"), this);
  zoomSel_ = toolButton(tr("Zoom to selection"), tr("Zoom to the selected range or event (Z, double-click)"), this);
  for (auto* b : {fit_, fitAll_, back_, forward_, zoomSel_}) bar->addWidget(b);
  search_ = new QLineEdit(this);
  search_->setPlaceholderText(tr("Search event names…"));
  search_->setClearButtonEnabled(true);
  search_->setMinimumWidth(180);
  search_->setMaximumWidth(280);
  bar->addWidget(search_);
  prev_ = toolButton(tr("▲"), tr("Previous match (Shift+Enter)"), this);
  next_ = toolButton(tr("▼"), tr("Next match (Enter)"), this);
  bar->addWidget(prev_);
  bar->addWidget(next_);
  lanes_ = toolButton(tr("Lanes"),
                      tr("Show or hide lanes by kind, collapse or expand every rank "
                         "(right-click a lane label to hide or move one lane)"),
                      this);
  lanes_->setPopupMode(QToolButton::InstantPopup);
  lanesMenu_ = new QMenu(lanes_);
  lanes_->setMenu(lanesMenu_);
  bar->addWidget(lanes_);
  python_ = new QCheckBox(tr("Python lanes"), this);
  python_->setToolTip(tr("Load the python_function tracks too (rebuilds the timeline)"));
  bar->addWidget(python_);
  info_ = new QLabel(this);
  info_->setStyleSheet(QStringLiteral("color: #777"));
  info_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);  // never widens the page
  info_->setMinimumWidth(80);
  auto* row = new QHBoxLayout;
  row->addLayout(bar, 1);
  row->addWidget(info_, 1);
  layout->addLayout(row);
  legend_ = new QLabel(this);
  legend_->setObjectName(QStringLiteral("timelineLegend"));
  legend_->setTextFormat(Qt::RichText);
  legend_->setWordWrap(true);
  legend_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  legend_->setToolTip(
      tr("Colours of this run's events. A folded block (events too narrow to draw, \"N events\") takes the "
         "colour of the operation covering most of its time, paler the less of its span they cover. "
         "A compact or collapsed rank's header is its summary track: per pixel, the share of time "
         "computing, in exposed communication, in other work; idle above."));
  layout->addWidget(legend_);

  auto* split = new QSplitter(Qt::Vertical, this);
  stack_ = new QStackedWidget(split);
  message_ = new QLabel(stack_);
  message_->setAlignment(Qt::AlignCenter);
  message_->setWordWrap(true);
  widget_ = new TimelineWidget(stack_);
  stack_->addWidget(message_);
  stack_->addWidget(widget_);
  compare_ = new StepCompareWidget;
  compareScroll_ = new QScrollArea(stack_);
  compareScroll_->setWidget(compare_);
  compareScroll_->setWidgetResizable(true);
  stack_->addWidget(compareScroll_);
  detailStack_ = new QStackedWidget(split);
  details_ = new QTextBrowser(detailStack_);
  details_->setOpenLinks(false);
  rangeTable_ = new QTableWidget(detailStack_);
  rangeTable_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  rangeTable_->verticalHeader()->hide();
  rangeTable_->horizontalHeader()->setStretchLastSection(true);
  detailStack_->addWidget(details_);
  detailStack_->addWidget(rangeTable_);
  split->addWidget(stack_);
  split->addWidget(detailStack_);
  split->setStretchFactor(0, 4);
  split->setStretchFactor(1, 1);
  split->setSizes({700, 160});
  layout->addWidget(split, 1);
  clearDetails();

  connect(runCombo_, &QComboBox::currentIndexChanged, this, &TimelinePage::showRun);
  connect(viewCombo_, &QComboBox::activated, this, [this](int i) { setView(static_cast<View>(i)); });
  connect(stepSpin_, &QSpinBox::valueChanged, this, [this](int v) { compare_->setStepOrdinal(v - 1); });
  connect(fit_, &QToolButton::clicked, widget_, &TimelineWidget::fitSteps);
  connect(fitAll_, &QToolButton::clicked, widget_, &TimelineWidget::fitAll);
  connect(back_, &QToolButton::clicked, widget_, &TimelineWidget::zoomBack);
  connect(forward_, &QToolButton::clicked, widget_, &TimelineWidget::zoomForward);
  connect(zoomSel_, &QToolButton::clicked, widget_, &TimelineWidget::zoomToSelection);
  auto find = [this](bool forward) {
    if (search_->text().isEmpty() || !widget_->index()) return;
    widget_->findNext(search_->text(), forward);  // searchFinished reports (at once, or from a thread on big runs)
    if (widget_->searching()) Q_EMIT statusMessage(tr("searching for “%1”…").arg(search_->text()));
  };
  connect(widget_, &TimelineWidget::searchFinished, this, [this](bool found, int matches) {
    if (!found)
      Q_EMIT statusMessage(tr("no event named like “%1”").arg(search_->text()));
    else
      Q_EMIT statusMessage(tr("%1 matches").arg(matches));
  });
  connect(search_, &QLineEdit::returnPressed, this, [find] { find(true); });
  connect(next_, &QToolButton::clicked, this, [find] { find(true); });
  connect(prev_, &QToolButton::clicked, this, [find] { find(false); });
  // The Lanes menu, rebuilt each time it opens: one checkable entry per lane kind the run has.
  connect(lanesMenu_, &QMenu::aboutToShow, this, [this] {
    lanesMenu_->clear();
    const auto* idx = widget_->index();
    if (!idx) return;
    using tl::LaneKind;
    const std::pair<LaneKind, QString> kinds[] = {
        {LaneKind::GpuStream, tr("GPU streams")},      {LaneKind::CpuThread, tr("CPU threads")},
        {LaneKind::Comm, tr("Communication threads")}, {LaneKind::CommGroup, tr("Process-group lanes")},
        {LaneKind::Counter, tr("Memory counters")},    {LaneKind::Python, tr("Python lanes")}};
    for (const auto& [kind, label] : kinds) {
      const bool present =
          std::any_of(idx->lanes().begin(), idx->lanes().end(), [kind = kind](const tl::Lane& l) { return l.kind == kind; });
      if (!present) continue;
      QAction* a = lanesMenu_->addAction(label);
      a->setCheckable(true);
      a->setChecked(!widget_->laneKindHidden(kind));
      connect(a, &QAction::toggled, widget_, [w = widget_, kind = kind](bool on) { w->setLaneKindHidden(kind, !on); });
    }
    lanesMenu_->addSeparator();
    lanesMenu_->addAction(tr("Collapse all ranks"), widget_, [w = widget_] { w->setAllRanksCollapsed(true); });
    lanesMenu_->addAction(tr("Compact all ranks (compute and communication lanes)"), widget_,
                          [w = widget_] { w->setAllRanksMode(TimelineWidget::RankMode::Compact); });
    lanesMenu_->addAction(tr("Expand all ranks"), widget_, [w = widget_] { w->setAllRanksCollapsed(false); });
    lanesMenu_->addAction(tr("Show all lanes"), widget_, &TimelineWidget::showAllLanes);
  });
  connect(python_, &QCheckBox::toggled, this, [this](bool on) {
    withPython_ = on;
    reload();
  });
  connect(widget_, &TimelineWidget::eventSelected, this, &TimelinePage::onEventSelected);
  connect(widget_, &TimelineWidget::rangeSelected, this, &TimelinePage::onRangeSelected);
  connect(widget_, &TimelineWidget::viewChanged, this, [this] { updateButtons(); });
  connect(widget_, &TimelineWidget::drawListReady, this, [this] {
    if (!task_ && index_) setBusy(false);
    if (const auto* l = widget_->drawList())
      info_->setText(tr("%1 events in view · %2 rectangles · draw list %3 ms")
                         .arg(charts::formatNumber(static_cast<double>(l->eventsInView)))
                         .arg(l->rects.size())
                         .arg(widget_->lastBuildMs(), 0, 'f', 1));
  });
  showMessage(tr("Open a database and select a run to see its timeline."));
  updateButtons();
}

bool TimelinePage::busy() const {
  if (view_ != View::OneRun) return !compareTask_.isNull();
  return !task_.isNull() || (index_ && widget_->index() && !widget_->drawList());
}

TimelinePage::~TimelinePage() {
  if (task_) task_->cancel();
  if (argsTask_) argsTask_->cancel();
}

void TimelinePage::followSessionRange() {
  if (rangeFollowed_) return;
  rangeFollowed_ = true;
  // The session's time range: shown when it is about the run shown; the user's zooms go back to it
  // (not the first fit a run opens on), so the Memory page can show the same window.
  connect(session(), &RunSession::timeRangeChanged, this, [this] {
    const auto r = session()->timeRange();
    if (!r || view_ != View::OneRun || !index_ || r->run != current_) return;
    if (widget_->viewStart() != r->startNs || widget_->viewEnd() != r->endNs) widget_->setViewRange(r->startNs, r->endNs);
  });
  connect(widget_, &TimelineWidget::viewChanged, this, [this](qint64 t0, qint64 t1) {
    if (!index_ || !widget_->canZoomBack()) return;
    session()->setTimeRange(RunSession::TimeRange{current_, t0, t1});
  });
}

void TimelinePage::setContext(const QString& dbPath, const QList<core::RunId>& runs) {
  sessionFor(dbPath);
  followSessionRange();
  const bool sameRuns = dbPath == dbPath_ && runs == runs_;
  const bool same = dbPath == dbPath_ && !runs.isEmpty() && runs.contains(current_) && index_;
  dbPath_ = dbPath;
  runs_ = runs;
  // Several runs: aligned steps first (the comparison), unless the user chose a view for these runs.
  if (!sameRuns) view_ = runs_.size() > 1 ? View::SameStep : View::OneRun;
  updateViewControls();
  if (view_ != View::OneRun) {
    {
      const QSignalBlocker block(runCombo_);
      runCombo_->clear();
      for (core::RunId id : runs_) runCombo_->addItem(tr("run %1").arg(id.value()), QVariant::fromValue<qlonglong>(id.value()));
    }
    current_ = runs.contains(current_) ? current_ : runs.first();
    {
      const QSignalBlocker block(runCombo_);
      runCombo_->setCurrentIndex(static_cast<int>(runs_.indexOf(current_)));
    }
    if (!sameRuns || compare_->runs().empty())
      loadCompare();
    else
      stack_->setCurrentWidget(compareScroll_);
    return;
  }
  {
    const QSignalBlocker block(runCombo_);
    runCombo_->clear();
    for (core::RunId id : runs_) runCombo_->addItem(tr("run %1").arg(id.value()), QVariant::fromValue<qlonglong>(id.value()));
  }
  if (same) {
    const QSignalBlocker block(runCombo_);
    runCombo_->setCurrentIndex(static_cast<int>(runs_.indexOf(current_)));
    runCombo_->setEnabled(runs_.size() > 1);
    return;
  }
  current_ = runs.isEmpty() ? core::RunId{} : runs.first();
  reload();
}

void TimelinePage::showRun(int i) {
  if (i < 0 || i >= runs_.size() || runs_[i] == current_) return;
  current_ = runs_[i];
  reload();
}

void TimelinePage::clearDetails() {
  details_->setHtml(
      tr("<span style='color:#777'>Click an event for its details; Shift+drag selects a range for its "
         "statistics. wheel or W/S zoom, A/D or drag pan, Alt+wheel scrolls the lanes, F fits the run.</span>"));
  rangeTable_->clear();
  rangeTable_->setRowCount(0);
  rangeTable_->setColumnCount(0);
  detailStack_->setCurrentWidget(details_);
}

void TimelinePage::reload() {
  if (task_) session()->tasks()->cancel(taskSlot());
  task_ = nullptr;
  ++generation_;
  error_.clear();
  // Another run (or the same one again): nothing of the previous one's event or range stays shown.
  clearDetails();
  runCombo_->setEnabled(runs_.size() > 1);
  if (dbPath_.isEmpty() || !current_) {
    index_.reset();
    widget_->setIndex(nullptr);
    showMessage(dbPath_.isEmpty() ? tr("Open a database and select a run to see its timeline.")
                                  : tr("Select a run in the run browser to see its timeline."));
    setBusy(false);
    return;
  }
  start();
}

void TimelinePage::start() {
  const core::RunId runId = current_;
  const unsigned generation = generation_;
  tl::BuildOptions opts;
  opts.withPython = withPython_;
  showMessage(tr("Building the timeline of run %1…").arg(runId.value()));
  // The index is a product of the session: built once per run (and lane choice) for every visit.
  task_ = session()->run<std::shared_ptr<const tl::TimelineIndex>>(
      this, taskSlot(), tr("Building the timeline of run %1").arg(runId.value()),
      [runId, opts](core::TraceStore& store, RunCache& cache, core::CancelToken& cancel, const core::ProgressFn& progress) {
        return cache.get<tl::TimelineIndex>(opts.withPython ? "timeline+python" : "timeline", runId, &cancel,
                                            [&] { return tl::TimelineIndex::build(store, runId, opts, &cancel, progress); });
      },
      [this, generation](std::shared_ptr<const tl::TimelineIndex> idx) {
        if (generation != generation_) return;
        task_ = nullptr;
        index_ = std::move(idx);
        widget_->setIndex(index_);
        updateLegend();
        if (const auto r = session()->timeRange(); r && r->run == current_) widget_->setViewRange(r->startNs, r->endNs);
        stack_->setCurrentWidget(widget_);
        Q_EMIT statusMessage(tr("run %1: %2 events on %3 ranks, %4 lanes")
                                 .arg(current_.value())
                                 .arg(charts::formatNumber(static_cast<double>(index_->eventCount())))
                                 .arg(index_->ranks().size())
                                 .arg(index_->lanes().size()));
        // Not busy once the first draw list is painted (drawListReady).
        if (widget_->drawList()) setBusy(false);
        applyPendingJump();
        updateButtons();
      },
      [this, generation](QString message) {
        if (generation != generation_) return;
        task_ = nullptr;
        error_ = message;
        index_.reset();
        widget_->setIndex(nullptr);
        showMessage(tr("Could not build the timeline: %1").arg(message));
        Q_EMIT errorMessage(tr("Timeline: %1").arg(message));
        setBusy(false);
      });
  connect(task_, &BackgroundTask::progress, this, [this, generation](int pct, const QString& stage) {
    if (generation == generation_) Q_EMIT progress(pct, stage.isEmpty() ? tr("building the timeline") : stage);
  });
  setBusy(true);
}

void TimelinePage::cancelLoad() {
  if (compareTask_) {
    session()->tasks()->cancel(taskSlot() + QStringLiteral(".compare"));
    compareTask_ = nullptr;
    ++compareGeneration_;
    if (compare_->runs().empty()) showMessage(tr("Loading was cancelled."));
    setBusy(false);
  }
  if (!task_) return;
  session()->tasks()->cancel(taskSlot());
  task_ = nullptr;
  ++generation_;
  if (!index_) showMessage(tr("Loading was cancelled."));
  setBusy(false);
  Q_EMIT statusMessage(tr("timeline loading cancelled"));
}

void TimelinePage::setBusy(bool b) {
  if (b == busyReported_) return;
  busyReported_ = b;
  Q_EMIT busyChanged(b);
  if (!b) Q_EMIT progress(100, QString());
}

void TimelinePage::showMessage(const QString& text) {
  message_->setText(text);
  stack_->setCurrentWidget(message_);
  info_->clear();
  legend_->clear();
  legend_->setVisible(false);
}

void TimelinePage::updateLegend() {
  if (!index_ || view_ != View::OneRun) {
    legend_->clear();
    legend_->setVisible(false);
    return;
  }
  auto swatch = [](const QColor& c, const QString& label) {
    return QStringLiteral("<span style='color:%1'>&#9632;</span>&nbsp;%2").arg(c.name(), label.toHtmlEscaped());
  };
  QStringList parts;
  for (const auto& e : timelineLegend(index_->keyMask())) parts << swatch(e.color, e.label);
  QString html = parts.join(QStringLiteral(" &nbsp; "));
  html += tr(" &nbsp;|&nbsp; summary track: %1 &nbsp; %2 &nbsp; %3 &nbsp; %4 &nbsp;|&nbsp; folded blocks: dominant operation, "
             "paler = sparser")
              .arg(swatch(timeline_palette::summaryCompute(), tr("computation")),
                   swatch(timeline_palette::exposed(), tr("exposed communication")),
                   swatch(timeline_palette::summaryOther(), tr("other work")),
                   swatch(timeline_palette::summaryIdle().darker(115), tr("idle")));
  legend_->setText(QStringLiteral("<span style='color:#444'>%1</span>").arg(html));
  legend_->setVisible(true);
}

void TimelinePage::updateButtons() {
  const bool have = widget_->index() != nullptr;
  fit_->setEnabled(have);
  fitAll_->setEnabled(have);
  back_->setEnabled(have && widget_->canZoomBack());
  forward_->setEnabled(have && widget_->canZoomForward());
  zoomSel_->setEnabled(have);
  search_->setEnabled(have);
  prev_->setEnabled(have);
  next_->setEnabled(have);
}

void TimelinePage::showEvent(qint64 runIdValue, qint64 eventId, qint64 startNs, qint64 endNs) {
  const core::RunId runId{runIdValue};  // Q_INVOKABLE: the id arrives as a plain integer
  pendingJump_ = Jump{runId, eventId, startNs, endNs};
  if (view_ != View::OneRun) {  // an event is shown in its run's own timeline
    view_ = View::OneRun;
    updateViewControls();
    if (runId == current_ && index_) stack_->setCurrentWidget(widget_);
  }
  if (runId != current_ || !index_) {
    if (!runs_.contains(runId)) runs_.prepend(runId);
    {
      const QSignalBlocker block(runCombo_);
      runCombo_->clear();
      for (core::RunId id : runs_) runCombo_->addItem(tr("run %1").arg(id.value()), QVariant::fromValue<qlonglong>(id.value()));
      runCombo_->setCurrentIndex(static_cast<int>(runs_.indexOf(runId)));
    }
    if (current_ != runId || (!index_ && !task_)) {
      current_ = runId;
      reload();
    }
    return;  // applied when the index arrives
  }
  applyPendingJump();
}

void TimelinePage::applyPendingJump() {
  if (!pendingJump_ || !index_ || pendingJump_->run != current_) return;
  const Jump j = *pendingJump_;
  pendingJump_.reset();
  if (auto hit = widget_->findEvent(j.event)) {
    widget_->selectEvent(hit->first, hit->second, true);
    widget_->zoomToSelection();
  } else if (j.end > j.start) {
    const TimeNs pad = std::max<TimeNs>((j.end - j.start) / 2, 1000);
    widget_->setViewRange(j.start - pad, j.end + pad);
    Q_EMIT statusMessage(tr("event %1 is not in the timeline; showing its time").arg(j.event));
  }
}

void TimelinePage::onEventSelected(quint32 lane, quint32 index) {
  if (!index_) return;
  detailStack_->setCurrentWidget(details_);
  const tl::Lane& l = index_->lane(lane);
  QString html = widget_->describeEvent(lane, index);
  const auto peers = sameCollectiveOnOtherRanks(*index_, lane, index);
  if (!peers.empty()) {
    html +=
        tr("<p><b>The same collective on every rank</b> (the same instance of its operation on its group's lane):</p>"
           "<table cellspacing=4><tr><th align=left>rank</th><th align=right>start</th><th align=right>duration</th>"
           "<th align=right>ends after the first</th></tr>");
    TimeNs firstEnd = INT64_MAX;
    std::vector<CollectivePeer> all = peers;
    all.push_back({index_->ranks()[static_cast<std::size_t>(l.rankIndex)].rank, lane, index, l.start[index], l.end[index]});
    std::sort(all.begin(), all.end(), [](const CollectivePeer& a, const CollectivePeer& b) { return a.rank < b.rank; });
    for (const auto& p : all) firstEnd = std::min(firstEnd, p.endNs);
    for (const auto& p : all)
      html += QStringLiteral("<tr><td>%1%2</td><td align=right>+%3</td><td align=right>%4</td><td align=right>%5</td></tr>")
                  .arg(p.rank)
                  .arg(p.lane == lane && p.index == index ? QStringLiteral(" ◀") : QString())
                  .arg(ms(p.startNs - index_->minStart()), ms(p.endNs - p.startNs), ms(p.endNs - firstEnd));
    html += QStringLiteral("</table>");
  }
  details_->setHtml(html + tr("<p style='color:#777'>loading args…</p>"));
  // Args and the correlated launch come from the store, off the GUI thread.
  if (argsTask_) argsTask_->cancel();
  const core::Id eventId = l.eventId[index];
  const core::RunId runId = current_;
  const unsigned generation = generation_;
  argsTask_ = session()->run<EventExtras>(
      this, taskSlot() + QStringLiteral(".args"), tr("Reading the event's args"),
      [eventId, runId](core::TraceStore& store, RunCache&, core::CancelToken&, const core::ProgressFn&) {
        return loadEventExtras(store, runId, eventId);
      },
      [this, html, generation, lane, index](EventExtras x) {
        if (generation != generation_ || widget_->selectedEvent() != std::make_pair(lane, index)) return;
        // The flow arrow from the launch (its CPU thread is always in the index).
        if (x.launchEventId)
          if (const auto launch = widget_->findEventOnTrack(x.launchTrackId, x.launchEventId, x.launchStartNs))
            widget_->setFlow({launch->first, launch->second, lane, index});
        QString more;
        if (!x.launchName.empty())
          more += tr("<p>launched by <b>%1</b> on %2, %3 before it started (correlation %4)</p>")
                      .arg(QString::fromStdString(x.launchName).toHtmlEscaped(),
                           QString::fromStdString(x.launchTrack).toHtmlEscaped(), ms(x.launchLeadNs))
                      .arg(x.correlation);
        else if (x.correlation)
          more += tr("<p style='color:#777'>correlation %1 (no launch found on the rank's CPU threads)</p>").arg(x.correlation);
        more += x.args.empty()
                    ? tr("<p style='color:#777'>no args</p>")
                    : QStringLiteral("<p><b>args</b></p><pre>%1</pre>").arg(QString::fromStdString(x.args).toHtmlEscaped());
        details_->setHtml(html + more);
      },
      [this, html](QString message) {
        details_->setHtml(html + tr("<p style='color:#d62728'>args: %1</p>").arg(message.toHtmlEscaped()));
      });
}

EventExtras loadEventExtras(core::TraceStore& store, core::RunId runId, core::Id eventId) {
  EventExtras x;
  const auto ev = store.event(eventId, true);
  if (!ev) return x;
  x.args = ev->argsJson;
  if (!ev->correlation) return x;
  x.correlation = *ev->correlation;
  // The launch: the event with the same correlation on a CPU thread of the same rank, shortly before.
  const auto tracks = store.tracks(runId);
  const auto mine = std::find_if(tracks.begin(), tracks.end(), [&](const core::Track& t) { return t.id == ev->trackId; });
  if (mine == tracks.end() || mine->kind != core::TrackKind::GpuStream) return x;
  constexpr TimeNs kLookBack = 200'000'000;  // launches queue at most this far ahead of their kernels
  for (const auto& t : tracks) {
    if (t.rankId != mine->rankId || t.kind != core::TrackKind::CpuThread) continue;
    for (const auto& e : store.eventsInWindow(t.id, ev->startNs - kLookBack, ev->startNs + 1))
      if (e.correlation && *e.correlation == x.correlation && e.id != ev->id) {
        x.launchName = std::string(e.name);
        x.launchTrack = t.name;
        x.launchLeadNs = ev->startNs - e.startNs;
        x.launchTrackId = t.id;
        x.launchEventId = e.id;
        x.launchStartNs = e.startNs;
      }
    if (!x.launchName.empty()) break;
  }
  return x;
}

void TimelinePage::onRangeSelected(qint64 t0, qint64 t1) {
  if (!index_) return;
  detailStack_->setCurrentWidget(rangeTable_);
  const QStringList headers = {tr("rank"),         tr("range"),   tr("compute"), tr("communication"), tr("overlapped"),
                               tr("exposed comm"), tr("overlap"), tr("idle"),    tr("collectives"),   tr("bytes")};
  rangeTable_->clear();
  rangeTable_->setColumnCount(static_cast<int>(headers.size()));
  rangeTable_->setHorizontalHeaderLabels(headers);
  rangeTable_->setRowCount(static_cast<int>(index_->ranks().size()));
  for (std::size_t r = 0; r < index_->ranks().size(); ++r) {
    const tl::RangeStats s = tl::rangeStatistics(*index_, static_cast<int>(r), t0, t1);
    const QStringList cells = {QString::number(index_->ranks()[r].rank),
                               ms(s.rangeNs),
                               ms(s.computeNs),
                               ms(s.commNs),
                               ms(s.overlappedCommNs),
                               ms(s.exposedCommNs),
                               s.overlap ? charts::formatPercent(*s.overlap * 100.0) : QStringLiteral("—"),
                               ms(s.idleNs),
                               QString::number(s.collectives),
                               s.collectivesWithBytes ? charts::formatBytes(static_cast<double>(s.bytes)) : QStringLiteral("—")};
    for (int c = 0; c < cells.size(); ++c) {
      auto* item = new QTableWidgetItem(cells[c]);
      item->setTextAlignment(c == 0 ? Qt::AlignLeft | Qt::AlignVCenter : Qt::AlignRight | Qt::AlignVCenter);
      rangeTable_->setItem(static_cast<int>(r), c, item);
    }
  }
  rangeTable_->resizeColumnsToContents();
  Q_EMIT statusMessage(tr("range %1 – %2 selected").arg(ms(t0 - index_->minStart()), ms(t1 - index_->minStart())));
}

// ------------------------------------------------------------------------------------------------
// Several runs on one relative axis

void TimelinePage::updateViewControls() {
  const bool several = runs_.size() > 1;
  viewCombo_->setVisible(several);
  {
    const QSignalBlocker block(viewCombo_);
    viewCombo_->setCurrentIndex(static_cast<int>(view_));
  }
  const bool one = view_ == View::OneRun;
  stepLabel_->setVisible(view_ == View::SameStep);
  stepSpin_->setVisible(view_ == View::SameStep);
  runLabel_->setVisible(one);
  runCombo_->setVisible(one);
  for (QWidget* w :
       std::initializer_list<QWidget*>{fit_, fitAll_, back_, forward_, zoomSel_, search_, prev_, next_, lanes_, python_})
    w->setEnabled(one);
  detailStack_->setVisible(one);  // the details are about one run's events
  if (legend_) legend_->setVisible(one && index_ && !legend_->text().isEmpty());
  compare_->setMode(view_ == View::WholeRuns ? StepCompareWidget::Mode::WholeRuns : StepCompareWidget::Mode::OneStep);
}

void TimelinePage::setView(View view) {
  if (view == View::OneRun || runs_.size() < 2) {
    const bool was = view_ != View::OneRun;
    view_ = View::OneRun;
    updateViewControls();
    if (was) {
      if (compareTask_) session()->tasks()->cancel(taskSlot() + QStringLiteral(".compare"));
      compareTask_ = nullptr;
      if (index_ && index_->runId() == current_)
        stack_->setCurrentWidget(widget_);
      else
        reload();
    }
    return;
  }
  view_ = view;
  updateViewControls();
  if (compare_->runs().empty() || compareRuns_ != runs_)
    loadCompare();
  else
    stack_->setCurrentWidget(compareScroll_);
}

void TimelinePage::loadCompare() {
  const std::vector<core::RunId> ids(runs_.begin(), runs_.end());
  compareRuns_ = runs_;
  const unsigned generation = ++compareGeneration_;
  showMessage(tr("Building the timelines of %1 runs…").arg(ids.size()));
  tl::BuildOptions opts;  // device lanes are all the comparison draws
  using Loaded = std::vector<StepCompareRun>;
  compareTask_ = session()->run<Loaded>(
      this, taskSlot() + QStringLiteral(".compare"), tr("Aligning the steps of %1 runs").arg(ids.size()),
      [ids, opts](core::TraceStore& store, RunCache& cache, core::CancelToken& cancel, const core::ProgressFn& progress) {
        Loaded out;
        for (core::RunId id : ids) {
          StepCompareRun r;
          r.id = id;
          const auto run = store.run(id);
          if (!run) throw core::Error(store.path() + ": no run with id " + std::to_string(id.value()));
          r.label = QString::fromStdString(core::runLabel(run->name, id));
          r.analysis = RunSession::analysis(cache, store, id, &cancel);
          r.counted = core::countedSteps(r.analysis->steps, run->source);
          r.index = cache.get<tl::TimelineIndex>("timeline", id, &cancel,
                                                 [&] { return tl::TimelineIndex::build(store, id, opts, &cancel, progress); });
          out.push_back(std::move(r));
        }
        return out;
      },
      [this, generation](Loaded runs) {
        if (generation != compareGeneration_) return;
        compareTask_ = nullptr;
        compare_->setRuns(std::move(runs));
        {
          const QSignalBlocker block(stepSpin_);
          stepSpin_->setMaximum(std::max(1, compare_->ordinalCount()));
          stepSpin_->setValue(compare_->stepOrdinal() + 1);
        }
        if (view_ != View::OneRun) stack_->setCurrentWidget(compareScroll_);
        info_->setText(tr("%1 counted steps in common · 0 ms: each row's step start").arg(compare_->ordinalCount()));
        info_->setToolTip(tr("%1 runs; each row is a rank of a run, its window the step breakdown's (0 ms = the start of "
                             "that step on that rank)")
                              .arg(compare_->runs().size()));
        setBusy(false);
      },
      [this, generation](QString message) {
        if (generation != compareGeneration_) return;
        compareTask_ = nullptr;
        error_ = message;
        showMessage(tr("Could not align the runs: %1").arg(message));
        Q_EMIT errorMessage(tr("Timeline: %1").arg(message));
        setBusy(false);
      });
  connect(compareTask_, &BackgroundTask::progress, this, [this, generation](int pct, const QString& stage) {
    if (generation == compareGeneration_) Q_EMIT progress(pct, stage.isEmpty() ? tr("building the timelines") : stage);
  });
  setBusy(true);
}

QJsonObject TimelinePage::describe() const {
  using namespace describe;
  QJsonObject out = Page::describe();
  static const char* views[] = {"one_run", "same_step", "runs_stacked"};
  out[QStringLiteral("view")] = QString::fromLatin1(views[static_cast<int>(view_)]);
  if (view_ == View::OneRun) {
    out[QStringLiteral("run")] = static_cast<double>(current_.value());
    if (const auto* idx = widget_->index()) {
      out[QStringLiteral("view_start_ns")] = static_cast<double>(widget_->viewStart());
      out[QStringLiteral("view_end_ns")] = static_cast<double>(widget_->viewEnd());
      QJsonArray lanes, collapsed;
      for (std::uint32_t i = 0; i < idx->lanes().size(); ++i) {
        const auto& l = idx->lane(i);
        if (widget_->laneHidden(i) || widget_->laneFolded(i)) continue;
        lanes.append(
            QJsonObject{{QStringLiteral("name"), qs(l.name)},
                        {QStringLiteral("rank"), idx->ranks()[static_cast<std::size_t>(l.rankIndex)].rank},
                        {QStringLiteral("events"), static_cast<double>(l.isCounter() ? l.sampleTs.size() : l.eventCount())}});
      }
      QJsonArray compact, legend;
      for (std::size_t r = 0; r < idx->ranks().size(); ++r) {
        if (widget_->rankCollapsed(static_cast<int>(r))) collapsed.append(idx->ranks()[r].rank);
        if (widget_->rankMode(static_cast<int>(r)) == TimelineWidget::RankMode::Compact) compact.append(idx->ranks()[r].rank);
      }
      for (const auto& e : timelineLegend(idx->keyMask())) legend.append(e.label);
      int shown = 0;  // ranks whose header (or summary track) is on screen
      for (std::size_t r = 0; r < idx->ranks().size(); ++r)
        if (widget_->rankY(static_cast<int>(r))) ++shown;
      out[QStringLiteral("lanes")] = lanes;
      out[QStringLiteral("collapsed_ranks")] = collapsed;
      out[QStringLiteral("compact_ranks")] = compact;
      out[QStringLiteral("ranks_on_screen")] = shown;
      out[QStringLiteral("legend")] = legend;
      if (const auto* l = widget_->drawList()) out[QStringLiteral("events_in_view")] = static_cast<double>(l->eventsInView);
    }
  } else {
    QJsonArray runs;
    for (const auto& r : compare_->runs()) runs.append(runRef(r.id, r.label));
    out[QStringLiteral("runs")] = runs;
    out[QStringLiteral("step_ordinal")] = compare_->stepOrdinal();
    out[QStringLiteral("axis_ms")] = static_cast<double>(compare_->axisSpanNs()) / 1e6;
    QJsonArray rows;
    for (const auto& row : compare_->rows())
      rows.append(QJsonObject{{QStringLiteral("run"), static_cast<double>((compare_->runs()[row.run].id).value())},
                              {QStringLiteral("rank"), row.rank},
                              {QStringLiteral("step"), static_cast<double>(row.step)},
                              {QStringLiteral("window_ns"), static_cast<double>(row.endNs - row.startNs)},
                              {QStringLiteral("compute_ns"), static_cast<double>(row.computeNs)},
                              {QStringLiteral("comm_ns"), static_cast<double>(row.commNs)},
                              {QStringLiteral("exposed_ns"), static_cast<double>(row.exposedNs)}});
    out[QStringLiteral("rows")] = rows;
  }
  return out;
}

}  // namespace shardscope::ui
