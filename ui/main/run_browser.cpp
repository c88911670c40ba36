#include "ui/main/run_browser.h"

#include <QComboBox>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QTimer>
#include <QTreeView>
#include <QVBoxLayout>

#include <algorithm>
#include <map>

#include "core/storage/trace_store.h"
#include "ui/common/background.h"
#include "ui/session/run_session.h"

namespace shardscope::ui {

namespace {
constexpr int kDefaultPollMs = 1000;  // cheap: one pragma while nothing changes
constexpr int kSelectionDebounceMs = 150;
}  // namespace

RunBrowser::RunBrowser(RunSession* session, QWidget* parent) : QWidget(parent), session_(session) {
  setObjectName(QStringLiteral("runBrowser"));
  model_ = new RunListModel(this);
  auto* bl = new QVBoxLayout(this);
  bl->setContentsMargins(4, 4, 0, 4);
  auto* top = new QHBoxLayout;
  auto* groupLabel = new QLabel(tr("Group by"), this);
  groupCombo_ = new QComboBox(this);
  groupCombo_->setObjectName(QStringLiteral("groupingCombo"));
  groupCombo_->addItem(tr("Source"), QVariant::fromValue(static_cast<int>(RunListModel::Grouping::Source)));
  groupCombo_->addItem(tr("Strategy"), QVariant::fromValue(static_cast<int>(RunListModel::Grouping::Strategy)));
  groupCombo_->addItem(tr("Status"), QVariant::fromValue(static_cast<int>(RunListModel::Grouping::Status)));
  groupCombo_->addItem(tr("None"), QVariant::fromValue(static_cast<int>(RunListModel::Grouping::None)));
  groupLabel->setBuddy(groupCombo_);
  top->addWidget(groupLabel);
  top->addWidget(groupCombo_, 1);
  bl->addLayout(top);

  view_ = new QTreeView(this);
  view_->setObjectName(QStringLiteral("runView"));
  view_->setModel(model_);
  view_->setSelectionMode(QAbstractItemView::ExtendedSelection);
  view_->setSelectionBehavior(QAbstractItemView::SelectRows);
  view_->setEditTriggers(QAbstractItemView::EditKeyPressed);
  view_->setAlternatingRowColors(true);
  view_->setUniformRowHeights(true);
  view_->setAllColumnsShowFocus(true);
  view_->setContextMenuPolicy(Qt::CustomContextMenu);
  view_->header()->setStretchLastSection(true);
  view_->header()->resizeSection(RunListModel::NameColumn, 150);
  view_->header()->resizeSection(RunListModel::StrategyColumn, 64);
  view_->header()->resizeSection(RunListModel::StatusColumn, 76);
  view_->header()->resizeSection(RunListModel::WorldSizeColumn, 44);
  view_->header()->resizeSection(RunListModel::EventsColumn, 70);
  view_->header()->resizeSection(RunListModel::CreatedColumn, 116);
  bl->addWidget(view_, 1);
  selectionLabel_ = new QLabel(this);
  selectionLabel_->setObjectName(QStringLiteral("selectionLabel"));
  selectionLabel_->setWordWrap(true);
  selectionLabel_->setStyleSheet(QStringLiteral("color: palette(mid);"));
  bl->addWidget(selectionLabel_);

  pollTimer_ = new QTimer(this);
  pollTimer_->setInterval(kDefaultPollMs);
  connect(pollTimer_, &QTimer::timeout, this, &RunBrowser::poll);
  selectionTimer_ = new QTimer(this);
  selectionTimer_->setSingleShot(true);
  selectionTimer_->setInterval(kSelectionDebounceMs);
  connect(selectionTimer_, &QTimer::timeout, this, &RunBrowser::applySelectionNow);

  connect(model_, &RunListModel::errorOccurred, this, [this](const QString& m) { Q_EMIT errorOccurred(m, true); });
  connect(groupCombo_, &QComboBox::currentIndexChanged, this,
          [this](int i) { setGrouping(static_cast<RunListModel::Grouping>(groupCombo_->itemData(i).toInt())); });
  connect(view_->selectionModel(), &QItemSelectionModel::selectionChanged, this, &RunBrowser::onSelectionChanged);
  connect(view_, &QTreeView::customContextMenuRequested, this, [this](const QPoint& pos) {
    if (model_->runId(view_->indexAt(pos))) Q_EMIT contextMenuRequested(view_->viewport()->mapToGlobal(pos));
  });
  connect(view_, &QTreeView::collapsed, this, [this](const QModelIndex& i) {
    const QString key = i.data(RunListModel::GroupKeyRole).toString();
    if (!collapsedGroups_.contains(key)) collapsedGroups_ << key;
  });
  connect(view_, &QTreeView::expanded, this,
          [this](const QModelIndex& i) { collapsedGroups_.removeAll(i.data(RunListModel::GroupKeyRole).toString()); });
  connect(model_, &QAbstractItemModel::rowsInserted, this, [this](const QModelIndex& under) {
    if (!under.isValid()) expandGroups();
  });
  connect(model_, &QAbstractItemModel::modelReset, this, [this] {
    expandGroups();
    restoreSelection(applied_);
  });
  applySelectionNow();
}

RunBrowser::~RunBrowser() {
  pollTimer_->stop();
  for (const auto& t : deleteTasks_) {
    if (!t) continue;
    t->disconnect(this);
    t->wait(60000);  // a deletion is one transaction: let it end rather than kill it
  }
  if (runsTask_) session_->tasks()->cancel(QStringLiteral("runs"));
}

void RunBrowser::setDatabase(const QString& path, core::TraceStore* store, bool writable) {
  clear();
  dbPath_ = path;
  store_ = store;
  model_->setStore(writable ? store : nullptr);
  firstLoad_ = true;
  reloadRuns();
  pollTimer_->start();
}

void RunBrowser::clear() {
  pollTimer_->stop();
  if (runsTask_) session_->tasks()->cancel(QStringLiteral("runs"));
  runsTask_ = nullptr;
  ++runsGeneration_;
  reloadAgain_ = false;
  {
    const QSignalBlocker block(view_->selectionModel());
    view_->selectionModel()->clear();
  }
  selectionOrder_.clear();
  applied_.clear();
  pendingSelection_.reset();
  model_->setStore(nullptr);
  model_->clear();
  store_ = nullptr;
  dbPath_.clear();
  fingerprint_.reset();
  dataVersion_.reset();
  runsError_.clear();
  lastPollError_.clear();
  applySelectionNow();
}

bool RunBrowser::deleting() const {
  return std::any_of(deleteTasks_.begin(), deleteTasks_.end(), [](const auto& t) { return !t.isNull(); });
}

void RunBrowser::setPollInterval(int ms) { pollTimer_->setInterval(ms); }

void RunBrowser::reloadRuns() {
  if (dbPath_.isEmpty()) return;
  if (runsTask_) {
    reloadAgain_ = true;  // one more once this one is in
    return;
  }
  const int gen = ++runsGeneration_;
  using Loaded = std::pair<RunsFingerprint, std::vector<RunRow>>;
  runsTask_ = session_->run<Loaded>(
      this, QStringLiteral("runs"), tr("Loading the run list"),
      [](core::TraceStore& s, RunCache&, core::CancelToken&, const core::ProgressFn&) {
        // The fingerprint before the rows: a run written in between is in the rows and makes the next
        // poll see a change (reloading once more), never the other way round (a run never shown).
        RunsFingerprint f = runsFingerprint(s);
        return Loaded{f, loadRunRows(s)};
      },
      [this, gen](Loaded loaded) { onRunsLoaded(std::move(loaded.second), gen, loaded.first); },
      [this, gen](QString error) {
        if (gen != runsGeneration_) return;
        runsTask_ = nullptr;
        // The watch tries again at every poll: one message for one problem, not one every poll.
        const QString msg = tr("Cannot read the runs of %1: %2").arg(dbPath_, error);
        // A read failure is the window's to check and say, once it knows what the file is.
        if (msg != runsError_ && !session_->readFailureReported()) Q_EMIT errorOccurred(msg, true);
        runsError_ = msg;
        Q_EMIT activityChanged();
      });
  Q_EMIT activityChanged();
}

void RunBrowser::onRunsLoaded(std::vector<RunRow> rows, int generation, const RunsFingerprint& fingerprint) {
  if (generation != runsGeneration_) return;
  runsTask_ = nullptr;
  if (!runsError_.isEmpty()) {
    Q_EMIT message(tr("The runs of %1 can be read again").arg(dbPath_));
    runsError_.clear();
  }
  // Statuses of the runs the pages show: a change (a run finished) makes the session forget them.
  std::map<core::RunId, core::RunStatus> before;
  for (core::RunId id : applied_)
    if (const auto* r = model_->runRow(id)) before[id] = r->run.status;

  const QList<core::RunId> keep = selectionOrder_;
  restoring_ = true;
  model_->setRuns(std::move(rows));
  restoring_ = false;

  QList<core::RunId> want;
  if (pendingSelection_) {
    want = *pendingSelection_;
    // Runs written after this load started come with the next one (reloadAgain_): keep waiting.
    const bool all = std::all_of(want.begin(), want.end(), [this](core::RunId id) { return model_->runRow(id) != nullptr; });
    if (all || !reloadAgain_) pendingSelection_.reset();
  } else if (firstLoad_ && autoSelect_) {
    const QList<core::RunId> all = model_->runIds();
    if (!all.isEmpty()) want = {*std::max_element(all.begin(), all.end())};
  } else {
    want = keep;
  }
  firstLoad_ = false;
  QList<core::RunId> existing;
  for (core::RunId id : want)
    if (model_->runRow(id) && !existing.contains(id)) existing << id;
  if (existing != selectedInViewOrdered()) restoreSelection(existing);
  selectionOrder_ = existing;
  if (!view_->currentIndex().isValid() && !existing.isEmpty())
    view_->selectionModel()->setCurrentIndex(model_->indexOfRun(existing.first()), QItemSelectionModel::NoUpdate);

  QList<core::RunId> changed;
  for (const auto& [id, status] : before) {
    const auto* r = model_->runRow(id);
    if (r && r->run.status != status) changed << id;
  }
  if (!changed.isEmpty()) {
    Q_EMIT message(tr("A selected run changed status: reloading the page"));
    for (core::RunId id : changed) session_->cache()->invalidate(id);
    applied_.clear();  // applied again below: the pages reload
  }
  applySelectionNow();
  fingerprint_ = fingerprint;
  Q_EMIT activityChanged();
  Q_EMIT runsLoaded();
  if (reloadAgain_) {
    reloadAgain_ = false;
    reloadRuns();
  }
}

void RunBrowser::poll() {
  if (!store_ || runsTask_) return;
  try {
    // The session drops the analyses of runs that changed (another process finished or deleted one).
    try {
      session_->poll();
    } catch (const core::DatabaseError& e) {
      if (e.readFailure()) {
        session_->reportReadFailure(QString::fromUtf8(e.what()));
        return;
      }
      // else reported below, from this connection's look, once
    } catch (const std::exception&) {
      // reported below, from this connection's look, once
    }
    // data_version changes when another connection (any process) commits: nothing else to read
    // while it stays the same.
    const std::int64_t dv = store_->dataVersion();
    if (dataVersion_ && *dataVersion_ == dv && fingerprint_ && runsError_.isEmpty()) return;
    const auto f = runsFingerprint(*store_);
    dataVersion_ = dv;
    lastPollError_.clear();
    if (!fingerprint_ || !(f == *fingerprint_) || f.active > 0 || !runsError_.isEmpty()) reloadRuns();
  } catch (const core::DatabaseError& e) {
    if (e.readFailure()) {
      session_->reportReadFailure(QString::fromUtf8(e.what()));
      return;
    }
    const QString msg = tr("Watching %1: %2").arg(dbPath_, QString::fromUtf8(e.what()));
    if (msg != lastPollError_) Q_EMIT errorOccurred(msg, false);
    lastPollError_ = msg;
  } catch (const std::exception& e) {
    const QString msg = tr("Watching %1: %2").arg(dbPath_, QString::fromUtf8(e.what()));
    if (msg != lastPollError_) Q_EMIT errorOccurred(msg, false);  // once, not every poll
    lastPollError_ = msg;
  }
}

void RunBrowser::setGrouping(RunListModel::Grouping grouping) {
  const int i = groupCombo_->findData(static_cast<int>(grouping));
  if (i >= 0 && groupCombo_->currentIndex() != i) {
    groupCombo_->setCurrentIndex(i);  // comes back here through the signal
    return;
  }
  if (model_->grouping() == grouping) return;
  const QList<core::RunId> keep = selectionOrder_;
  restoring_ = true;
  model_->setGrouping(grouping);  // a reset: the view forgets its selection
  restoring_ = false;
  restoreSelection(keep);
  selectionOrder_ = keep;
  expandGroups();
}

void RunBrowser::expandGroups() {
  if (model_->grouping() == RunListModel::Grouping::None) return;
  for (int g = 0; g < model_->rowCount(); ++g) {
    const QModelIndex i = model_->index(g, 0);
    view_->setFirstColumnSpanned(g, QModelIndex(), true);  // the group's label uses the whole row
    view_->setExpanded(i, !collapsedGroups_.contains(i.data(RunListModel::GroupKeyRole).toString()));
  }
}

QList<core::RunId> RunBrowser::selectedInView() const {
  QList<core::RunId> ids;
  for (const auto& i : view_->selectionModel()->selectedRows(0)) {
    const core::RunId id = model_->runId(i);
    if (id) ids << id;
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

QList<core::RunId> RunBrowser::selectedInViewOrdered() const {
  // The view's selection in selection order (for comparing with a wanted order).
  const QList<core::RunId> inView = selectedInView();
  QList<core::RunId> out;
  for (core::RunId id : selectionOrder_)
    if (inView.contains(id)) out << id;
  for (core::RunId id : inView)
    if (!out.contains(id)) out << id;
  return out;
}

core::RunId RunBrowser::currentRun() const {
  const core::RunId cur = model_->runId(view_->currentIndex());
  if (cur && selectionOrder_.contains(cur)) return cur;
  return selectionOrder_.isEmpty() ? core::RunId{} : selectionOrder_.first();
}

void RunBrowser::restoreSelection(const QList<core::RunId>& ids) {
  auto* sm = view_->selectionModel();
  const bool old = restoring_;
  restoring_ = true;
  sm->clearSelection();
  for (core::RunId id : ids) {
    const QModelIndex i = model_->indexOfRun(id);
    if (i.isValid()) sm->select(i, QItemSelectionModel::Select | QItemSelectionModel::Rows);
  }
  restoring_ = old;
}

void RunBrowser::selectRuns(const QList<core::RunId>& ids) {
  if (runsLoading()) {
    pendingSelection_ = ids;
    return;
  }
  QList<core::RunId> existing;
  for (core::RunId id : ids)
    if (model_->runRow(id) && !existing.contains(id)) existing << id;
  restoreSelection(existing);
  selectionOrder_ = existing;
  if (!existing.isEmpty()) {
    const QModelIndex i = model_->indexOfRun(existing.first());
    view_->selectionModel()->setCurrentIndex(i, QItemSelectionModel::NoUpdate);
    view_->scrollTo(i);
  }
  Q_EMIT selectionEdited();
  selectionTimer_->start();
}

bool RunBrowser::selectionPending() const { return selectionTimer_->isActive(); }

void RunBrowser::onSelectionChanged() {
  if (restoring_) return;
  // Keep the order of selection: drop what is no longer selected, append what is new (view order).
  const QList<core::RunId> now = selectedInView();
  QList<core::RunId> order;
  for (core::RunId id : selectionOrder_)
    if (now.contains(id)) order << id;
  QList<core::RunId> added;
  for (const auto& i : view_->selectionModel()->selectedRows(0)) {
    const core::RunId id = model_->runId(i);
    if (id && !order.contains(id) && !added.contains(id)) added << id;
  }
  std::sort(added.begin(), added.end(), [this](core::RunId a, core::RunId b) {
    const QModelIndex ia = model_->indexOfRun(a), ib = model_->indexOfRun(b);
    const int ga = ia.parent().isValid() ? ia.parent().row() : -1, gb = ib.parent().isValid() ? ib.parent().row() : -1;
    return ga != gb ? ga < gb : ia.row() < ib.row();
  });
  order += added;
  selectionOrder_ = order;
  Q_EMIT selectionEdited();
  selectionTimer_->start();
}

void RunBrowser::applySelectionNow() {
  selectionTimer_->stop();
  const QList<core::RunId> runs = selectionOrder_;
  QStringList names;
  for (core::RunId id : runs)
    if (const auto* r = model_->runRow(id)) names << QString::fromStdString(core::runLabel(r->run.name, id));
  if (runs.isEmpty())
    selectionLabel_->setText(dbPath_.isEmpty() ? tr("Open a database to see its runs.") : tr("No run selected."));
  else if (runs.size() == 1)
    selectionLabel_->setText(tr("Selected: %1").arg(names.value(0)));
  else
    selectionLabel_->setText(
        tr("%1 runs selected; baseline: %2 (Ctrl+B makes the current run the baseline)").arg(runs.size()).arg(names.value(0)));
  if (runs == applied_) return;
  applied_ = runs;
  Q_EMIT selectionApplied(runs);
}

void RunBrowser::makeBaseline(core::RunId id) {
  if (!id || !selectionOrder_.contains(id) || selectionOrder_.first() == id) return;
  selectionOrder_.removeAll(id);
  selectionOrder_.prepend(id);
  Q_EMIT message(tr("Run %1 is now the baseline").arg(id.value()));
  applySelectionNow();
}

void RunBrowser::renameRun(core::RunId id) {
  const QModelIndex i = model_->indexOfRun(id, RunListModel::NameColumn);
  if (!i.isValid() || !model_->isEditable()) return;
  view_->setCurrentIndex(i);
  view_->edit(i);
}

void RunBrowser::editTags(core::RunId id) {
  const QModelIndex i = model_->indexOfRun(id, RunListModel::TagsColumn);
  if (!i.isValid() || !model_->isEditable()) return;
  view_->scrollTo(i);
  view_->edit(i);
}

void RunBrowser::deleteRuns(const QList<core::RunId>& ids) {
  if (ids.isEmpty() || !model_->isEditable()) return;
  QStringList names;
  bool active = false;
  for (core::RunId id : ids) {
    if (const auto* r = model_->runRow(id)) {
      names << QString::fromStdString(core::runLabel(r->run.name, id));
      active = active || r->run.status == core::RunStatus::Running || r->run.status == core::RunStatus::Pending;
    }
  }
  QString question = tr("Delete %n run(s) from %1?\n\n%2\n\nTheir ranks, events, metrics and memory records are removed. "
                        "This cannot be undone.",
                        nullptr, static_cast<int>(ids.size()))
                         .arg(QFileInfo(dbPath_).fileName(), names.join(QStringLiteral("\n")));
  if (active) question += tr("\n\nA run still pending or running is being written by its job: deleting it makes the job fail.");
  if (!confirm_ || !confirm_(question)) {
    Q_EMIT message(tr("Deletion cancelled"));
    return;
  }
  // The pages stop showing the runs about to go.
  QList<core::RunId> keep;
  for (core::RunId id : selectionOrder_)
    if (!ids.contains(id)) keep << id;
  restoreSelection(keep);
  selectionOrder_ = keep;
  applySelectionNow();

  // Deleting a big run (millions of events, memory records) takes seconds: on a thread with its
  // own connection, never on the GUI thread. The list follows when it is done.
  const QString db = dbPath_;
  const QString what = names.join(QStringLiteral(", "));
  // Its own slot: a second deletion never drops the first's result. Not cancellable: one transaction.
  const QString slot = QStringLiteral("delete.%1").arg(++deleteSerial_);
  auto finished = [this, db, what](QList<qint64> deleted, const QString& error) {
    deleteTasks_.erase(
        std::remove_if(deleteTasks_.begin(), deleteTasks_.end(), [](const auto& t) { return t.isNull() || t->isCancelled(); }),
        deleteTasks_.end());
    for (qint64 id : deleted) session_->cache()->invalidate(core::RunId{id});
    if (error.isEmpty())
      Q_EMIT message(tr("Deleted %n run(s): %1", nullptr, static_cast<int>(deleted.size())).arg(what));
    else
      Q_EMIT errorOccurred(tr("Cannot delete %1: %2").arg(what, error), true);
    if (db == dbPath_) reloadRuns();
    Q_EMIT activityChanged();
    Q_EMIT runsDeleted(deleted);
  };
  auto deleted = std::make_shared<QList<qint64>>();
  BackgroundTask* task = session_->tasks()->start<QList<qint64>>(
      this, slot, tr("Deleting %1").arg(what),
      [db, ids, deleted](core::CancelToken&, const core::ProgressFn&) {
        core::TraceStore store(db.toStdString());
        for (core::RunId id : ids) {
          store.deleteRun(id);
          *deleted << qint64(id.value());
        }
        return *deleted;
      },
      [finished](QList<qint64> done) { finished(done, QString()); },
      [finished, deleted](QString error) { finished(*deleted, error); });
  deleteTasks_ << QPointer<BackgroundTask>(task);
  connect(task, &QObject::destroyed, this, [this] {
    deleteTasks_.erase(std::remove_if(deleteTasks_.begin(), deleteTasks_.end(), [](const auto& t) { return t.isNull(); }),
                       deleteTasks_.end());
    Q_EMIT activityChanged();
  });
  Q_EMIT activityChanged();
}

}  // namespace shardscope::ui
