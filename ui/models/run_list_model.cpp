#include "ui/models/run_list_model.h"

#include <QBrush>
#include <QColor>
#include <QDateTime>
#include <QFont>
#include <QLocale>
#include <QStringList>

#include <algorithm>
#include <exception>
#include <optional>
#include <unordered_map>
#include <utility>

#include "core/storage/store_transaction.h"
#include "core/storage/trace_store.h"
#include "core/util/error.h"

namespace shardscope::ui {

namespace {

QString qs(const std::string& s) { return QString::fromStdString(s); }
QString qs(std::string_view s) { return QString::fromUtf8(s.data(), static_cast<qsizetype>(s.size())); }

QString formatCount(std::int64_t n) { return QLocale(QLocale::English).toString(static_cast<qlonglong>(n)); }

QString formatCreated(const std::string& iso) {
  const QDateTime t = QDateTime::fromString(qs(iso), Qt::ISODate);
  if (!t.isValid()) return qs(iso);
  return t.toLocalTime().toString(QStringLiteral("yyyy-MM-dd HH:mm"));
}

int strategyOrder(const QString& s) {
  static const QStringList known = {QStringLiteral("ddp"),          QStringLiteral("zero1"),
                                    QStringLiteral("zero2"),        QStringLiteral("zero3"),
                                    QStringLiteral("fsdp"),         QStringLiteral("fsdp_full_shard"),
                                    QStringLiteral("fsdp_grad_op"), QStringLiteral("fsdp_shard_grad_op"),
                                    QStringLiteral("hsdp")};
  if (s.isEmpty()) return 1000;  // imported traces last
  const auto i = known.indexOf(s);
  return i >= 0 ? static_cast<int>(i) : 100;
}

}  // namespace

bool RunRow::operator==(const RunRow& o) const {
  const auto& a = run;
  const auto& b = o.run;
  return events == o.events && ranks == o.ranks && a.id == b.id && a.name == b.name && a.source == b.source &&
         a.strategy == b.strategy && a.configJson == b.configJson && a.worldSize == b.worldSize &&
         a.devicesJson == b.devicesJson && a.createdAt == b.createdAt && a.status == b.status &&
         a.failureReason == b.failureReason && a.tags == b.tags && a.metadataJson == b.metadataJson;
}

std::vector<RunRow> loadRunRows(core::TraceStore& store) {
  std::vector<RunRow> rows;
  std::unordered_map<core::RunId, std::size_t> pos;
  for (auto& r : store.runs()) {
    pos[r.id] = rows.size();
    rows.push_back(RunRow{std::move(r), 0, 0});
  }
  // Counts from the per-track statistics the writers keep: no event is read.
  for (const auto& c : store.runCounts()) {
    const auto it = pos.find(c.runId);
    if (it == pos.end()) continue;  // a run created between the two queries
    rows[it->second].ranks = c.ranks;
    rows[it->second].events = c.events;
  }
  return rows;
}

RunsFingerprint runsFingerprint(core::TraceStore& store) { return store.runsFingerprint(); }

// ------------------------------------------------------------------------------------------------

RunListModel::RunListModel(QObject* parent) : QAbstractItemModel(parent) { regroup({}); }

RunListModel::~RunListModel() = default;

QString RunListModel::groupingName(Grouping g) {
  switch (g) {
    case Grouping::None:
      return QStringLiteral("none");
    case Grouping::Source:
      return QStringLiteral("source");
    case Grouping::Strategy:
      return QStringLiteral("strategy");
    case Grouping::Status:
      return QStringLiteral("status");
  }
  return QStringLiteral("source");
}

RunListModel::Grouping RunListModel::groupingFromName(const QString& name) {
  for (auto g : {Grouping::None, Grouping::Source, Grouping::Strategy, Grouping::Status})
    if (groupingName(g) == name) return g;
  return Grouping::Source;
}

QString RunListModel::groupKeyOf(const core::Run& run) const {
  switch (grouping_) {
    case Grouping::None:
      return {};
    case Grouping::Source:
      return qs(core::runKind(run));
    case Grouping::Strategy:
      return qs(run.strategy);
    case Grouping::Status:
      return qs(core::toString(run.status));
  }
  return {};
}

int RunListModel::groupOrder(const QString& key) const {
  switch (grouping_) {
    case Grouping::None:
      return 0;
    case Grouping::Source: {
      if (key == QLatin1String("runtime")) return 0;
      if (key == QLatin1String("kineto")) return 1;
      if (key == QLatin1String("memory snapshot")) return 2;
      return 3;
    }
    case Grouping::Strategy:
      return strategyOrder(key);
    case Grouping::Status: {
      static const QStringList order = {QStringLiteral("running"), QStringLiteral("pending"), QStringLiteral("completed"),
                                        QStringLiteral("failed"), QStringLiteral("cancelled")};
      const auto i = order.indexOf(key);
      return i >= 0 ? static_cast<int>(i) : 100;
    }
  }
  return 0;
}

bool RunListModel::groupLess(const QString& a, const QString& b) const {
  const int oa = groupOrder(a), ob = groupOrder(b);
  return oa != ob ? oa < ob : a < b;
}

QString RunListModel::groupLabel(const Group& g) const {
  QString label;
  switch (grouping_) {
    case Grouping::None:
      break;
    case Grouping::Source:
      if (g.key == QLatin1String("runtime"))
        label = tr("Runtime runs");
      else if (g.key == QLatin1String("kineto"))
        label = tr("Imported traces");
      else if (g.key == QLatin1String("simulated"))
        label = tr("Simulated");
      else if (g.key == QLatin1String("memory snapshot"))
        label = tr("Memory snapshots");
      else
        label = g.key;
      break;
    case Grouping::Strategy:
      label = g.key.isEmpty() ? tr("No strategy (imported)") : g.key;
      break;
    case Grouping::Status:
      label = g.key.isEmpty() ? tr("(unknown)") : g.key.left(1).toUpper() + g.key.mid(1);
      break;
  }
  return QStringLiteral("%1 (%2)").arg(label).arg(g.runs.size());
}

int RunListModel::groupPos(quintptr uid) const {
  for (std::size_t i = 0; i < groups_.size(); ++i)
    if (groups_[i].uid == uid) return static_cast<int>(i);
  return -1;
}

QModelIndex RunListModel::groupIndex(int pos, int column) const {
  if (grouping_ == Grouping::None || pos < 0) return {};
  return createIndex(pos, column, quintptr(0));
}

QModelIndex RunListModel::runParent(int groupPosition) const { return groupIndex(groupPosition); }

QModelIndex RunListModel::index(int row, int column, const QModelIndex& parent) const {
  if (row < 0 || column < 0 || column >= ColumnCount) return {};
  if (grouping_ == Grouping::None) {
    if (parent.isValid() || groups_.empty() || row >= static_cast<int>(groups_[0].runs.size())) return {};
    return createIndex(row, column, groups_[0].uid);
  }
  if (!parent.isValid()) {
    if (row >= static_cast<int>(groups_.size())) return {};
    return createIndex(row, column, quintptr(0));
  }
  if (parent.internalId() != 0 || parent.column() != 0) return {};  // runs have no children
  const int g = parent.row();
  if (g < 0 || g >= static_cast<int>(groups_.size()) || row >= static_cast<int>(groups_[g].runs.size())) return {};
  return createIndex(row, column, groups_[g].uid);
}

QModelIndex RunListModel::parent(const QModelIndex& child) const {
  if (!child.isValid() || grouping_ == Grouping::None || child.internalId() == 0) return {};
  return groupIndex(groupPos(child.internalId()));
}

int RunListModel::rowCount(const QModelIndex& parent) const {
  if (grouping_ == Grouping::None) {
    if (parent.isValid() || groups_.empty()) return 0;
    return static_cast<int>(groups_[0].runs.size());
  }
  if (!parent.isValid()) return static_cast<int>(groups_.size());
  if (parent.column() != 0 || parent.internalId() != 0) return 0;
  const int g = parent.row();
  return g >= 0 && g < static_cast<int>(groups_.size()) ? static_cast<int>(groups_[g].runs.size()) : 0;
}

int RunListModel::columnCount(const QModelIndex& parent) const {
  if (parent.isValid() && parent.column() != 0) return 0;
  return ColumnCount;
}

bool RunListModel::isGroup(const QModelIndex& index) const {
  return index.isValid() && index.model() == this && grouping_ != Grouping::None && index.internalId() == 0;
}

const RunRow* RunListModel::rowAt(const QModelIndex& index) const {
  if (!index.isValid() || index.model() != this || isGroup(index)) return nullptr;
  const int g = groupPos(index.internalId());
  if (g < 0 || index.row() >= static_cast<int>(groups_[g].runs.size())) return nullptr;
  return &groups_[g].runs[index.row()];
}

RunRow* RunListModel::rowAt(const QModelIndex& index) {
  return const_cast<RunRow*>(static_cast<const RunListModel*>(this)->rowAt(index));
}

QVariant RunListModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.model() != this) return {};
  if (isGroup(index)) {
    const auto& g = groups_[index.row()];
    switch (role) {
      case Qt::DisplayRole:
        return index.column() == NameColumn ? groupLabel(g) : QVariant();
      case IsGroupRole:
        return true;
      case GroupKeyRole:
        return g.key;
      case RunIdRole:
        return qlonglong(0);
      case SortRole:
        return index.column() == NameColumn ? QVariant(groupOrder(g.key)) : QVariant();
      case Qt::FontRole:
        if (index.column() == NameColumn) {
          QFont f;
          f.setBold(true);
          return f;
        }
        return {};
      default:
        return {};
    }
  }
  const RunRow* row = rowAt(index);
  if (!row) return {};
  const auto& r = row->run;
  switch (role) {
    case Qt::DisplayRole:
      switch (index.column()) {
        case NameColumn:
          return qs(r.name);
        case StrategyColumn:
          return r.strategy.empty() ? QStringLiteral("—") : qs(r.strategy);
        case StatusColumn:
          return qs(core::toString(r.status));
        case WorldSizeColumn:
          return r.worldSize;
        case EventsColumn:
          return formatCount(row->events);
        case CreatedColumn:
          return formatCreated(r.createdAt);
        case TagsColumn:
          return qs(r.tags);
        default:
          return {};
      }
    case Qt::EditRole:
      switch (index.column()) {
        case NameColumn:
          return qs(r.name);
        case TagsColumn:
          return qs(r.tags);
        default:
          return data(index, Qt::DisplayRole);
      }
    case SortRole:
      switch (index.column()) {
        case WorldSizeColumn:
          return r.worldSize;
        case EventsColumn:
          return qlonglong(row->events);
        case NameColumn:
          return qs(r.name);
        default:
          return data(index, Qt::DisplayRole);
      }
    case Qt::ToolTipRole: {
      QStringList lines;
      lines << tr("Run %1: %2").arg(r.id.value()).arg(qs(r.name));
      lines << tr("%1, %2 rank(s), %3 events").arg(qs(core::runKind(r))).arg(row->ranks).arg(formatCount(row->events));
      if (!r.failureReason.empty()) lines << tr("%1: %2").arg(qs(core::toString(r.status)), qs(r.failureReason));
      if (!r.tags.empty()) lines << tr("Tags: %1").arg(qs(r.tags));
      return lines.join(QLatin1Char('\n'));
    }
    case Qt::ForegroundRole:
      if (index.column() == StatusColumn) {
        switch (r.status) {
          case core::RunStatus::Failed:
            return QBrush(QColor(0xc6, 0x28, 0x28));
          case core::RunStatus::Running:
            return QBrush(QColor(0x15, 0x65, 0xc0));
          case core::RunStatus::Pending:
          case core::RunStatus::Cancelled:
            return QBrush(QColor(0x75, 0x75, 0x75));
          case core::RunStatus::Completed:
            return {};
        }
      }
      return {};
    case Qt::TextAlignmentRole:
      if (index.column() == WorldSizeColumn || index.column() == EventsColumn)
        return QVariant::fromValue(Qt::Alignment(Qt::AlignRight | Qt::AlignVCenter));
      return {};
    case RunIdRole:
      return qlonglong(r.id.value());
    case IsGroupRole:
      return false;
    case GroupKeyRole:
      return groupKeyOf(r);
    default:
      return {};
  }
}

Qt::ItemFlags RunListModel::flags(const QModelIndex& index) const {
  if (!index.isValid()) return Qt::NoItemFlags;
  if (isGroup(index)) return Qt::ItemIsEnabled;
  Qt::ItemFlags f = Qt::ItemIsEnabled | Qt::ItemIsSelectable | Qt::ItemNeverHasChildren;
  if (store_ && (index.column() == NameColumn || index.column() == TagsColumn)) f |= Qt::ItemIsEditable;
  return f;
}

bool RunListModel::setData(const QModelIndex& index, const QVariant& value, int role) {
  if (role != Qt::EditRole || !(flags(index) & Qt::ItemIsEditable)) return false;
  const core::RunId id = runId(index);
  if (index.column() == NameColumn) return renameRun(id, value.toString());
  if (index.column() == TagsColumn) return setRunTags(id, value.toString());
  return false;
}

QVariant RunListModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case NameColumn:
      return tr("Run");
    case StrategyColumn:
      return tr("Strategy");
    case StatusColumn:
      return tr("Status");
    case WorldSizeColumn:
      return tr("World");
    case EventsColumn:
      return tr("Events");
    case CreatedColumn:
      return tr("Created");
    case TagsColumn:
      return tr("Tags");
    default:
      return {};
  }
}

// ------------------------------------------------------------------------------------------------

void RunListModel::regroup(std::vector<RunRow> rows) {
  groups_.clear();
  std::sort(rows.begin(), rows.end(), [](const RunRow& a, const RunRow& b) { return a.run.id < b.run.id; });
  if (grouping_ == Grouping::None) {
    groups_.push_back(Group{nextUid_++, QString(), std::move(rows)});
    return;
  }
  for (auto& r : rows) {
    const QString key = groupKeyOf(r.run);
    auto it = std::find_if(groups_.begin(), groups_.end(), [&](const Group& g) { return g.key == key; });
    if (it == groups_.end()) {
      groups_.push_back(Group{nextUid_++, key, {}});
      it = groups_.end() - 1;
    }
    it->runs.push_back(std::move(r));
  }
  std::sort(groups_.begin(), groups_.end(), [this](const Group& a, const Group& b) { return groupLess(a.key, b.key); });
}

void RunListModel::setGrouping(Grouping g) {
  if (g == grouping_) return;
  std::vector<RunRow> all;
  for (auto& grp : groups_)
    for (auto& r : grp.runs) all.push_back(std::move(r));
  beginResetModel();
  grouping_ = g;
  regroup(std::move(all));
  endResetModel();
}

void RunListModel::clear() { setRuns({}); }

void RunListModel::setRuns(std::vector<RunRow> rows) {
  std::sort(rows.begin(), rows.end(), [](const RunRow& a, const RunRow& b) { return a.run.id < b.run.id; });
  // Desired groups, in display order, each with its runs in id order.
  std::vector<std::pair<QString, std::vector<RunRow>>> want;
  for (auto& r : rows) {
    const QString key = groupKeyOf(r.run);
    auto it = std::find_if(want.begin(), want.end(), [&](const auto& w) { return w.first == key; });
    if (it == want.end()) {
      want.emplace_back(key, std::vector<RunRow>{});
      it = want.end() - 1;
    }
    it->second.push_back(std::move(r));
  }
  if (grouping_ == Grouping::None && want.empty()) want.emplace_back(QString(), std::vector<RunRow>{});
  std::sort(want.begin(), want.end(), [this](const auto& a, const auto& b) { return groupLess(a.first, b.first); });
  auto wanted = [&](const QString& key) -> const std::vector<RunRow>* {
    for (const auto& w : want)
      if (w.first == key) return &w.second;
    return nullptr;
  };
  auto contains = [](const std::vector<RunRow>* v, core::RunId id) {
    return v && std::any_of(v->begin(), v->end(), [id](const RunRow& r) { return r.run.id == id; });
  };

  // 1. Remove runs that left their group (deleted, or moved to another group).
  for (int g = 0; g < static_cast<int>(groups_.size()); ++g) {
    const auto* w = wanted(groups_[g].key);
    auto& runs = groups_[g].runs;
    for (int i = static_cast<int>(runs.size()) - 1; i >= 0; --i) {
      if (contains(w, runs[i].run.id)) continue;
      beginRemoveRows(runParent(g), i, i);
      runs.erase(runs.begin() + i);
      endRemoveRows();
    }
  }
  // 2. Remove groups that are gone (empty by now).
  if (grouping_ != Grouping::None) {
    for (int g = static_cast<int>(groups_.size()) - 1; g >= 0; --g) {
      if (wanted(groups_[g].key)) continue;
      beginRemoveRows(QModelIndex(), g, g);
      groups_.erase(groups_.begin() + g);
      endRemoveRows();
    }
  }
  // 3. Insert new groups where they belong (the remaining ones are already in display order).
  for (int g = 0; g < static_cast<int>(want.size()); ++g) {
    if (g < static_cast<int>(groups_.size()) && groups_[g].key == want[g].first) continue;
    beginInsertRows(QModelIndex(), g, g);
    groups_.insert(groups_.begin() + g, Group{nextUid_++, want[g].first, {}});
    endInsertRows();
  }
  // 4. Insert new runs, update the others.
  for (int g = 0; g < static_cast<int>(want.size()); ++g) {
    auto& runs = groups_[g].runs;
    auto& target = want[g].second;
    for (int i = 0; i < static_cast<int>(target.size()); ++i) {
      if (i < static_cast<int>(runs.size()) && runs[i].run.id == target[i].run.id) {
        if (!(runs[i] == target[i])) {
          runs[i] = std::move(target[i]);
          const QModelIndex parent = runParent(g);
          Q_EMIT dataChanged(index(i, 0, parent), index(i, ColumnCount - 1, parent));
        }
        continue;
      }
      beginInsertRows(runParent(g), i, i);
      runs.insert(runs.begin() + i, std::move(target[i]));
      endInsertRows();
    }
    if (grouping_ != Grouping::None) {
      // The label shows the count.
      Q_EMIT dataChanged(groupIndex(g), groupIndex(g));
    }
  }
}

// ------------------------------------------------------------------------------------------------

void RunListModel::setStore(core::TraceStore* store) {
  if (store_ == store) return;
  store_ = store;
  // Editability changed for every row.
  if (runCount() > 0) {
    beginResetModel();
    endResetModel();
  }
}

bool RunListModel::fail(const QString& message) {
  lastError_ = message;
  Q_EMIT errorOccurred(message);
  return false;
}

void RunListModel::updateRun(const RunRow& row) {
  std::vector<RunRow> all;
  for (const auto& g : groups_)
    for (const auto& r : g.runs) all.push_back(r.run.id == row.run.id ? row : r);
  setRuns(std::move(all));
}

QString RunListModel::normalizeTags(const QString& tags) {
  QStringList out;
  for (const auto& t : tags.split(QLatin1Char(','))) {
    const QString s = t.simplified();
    if (!s.isEmpty() && !out.contains(s)) out << s;
  }
  return out.join(QLatin1Char(','));
}

bool RunListModel::renameRun(core::RunId id, const QString& name) {
  if (!store_) return fail(tr("Cannot rename run %1: the database is open read-only").arg(id.value()));
  const QString n = name.trimmed();
  if (n.isEmpty()) return fail(tr("Cannot rename run %1: a run name cannot be empty").arg(id.value()));
  const RunRow* current = runRow(id);
  if (!current) return fail(tr("Cannot rename run %1: no such run in the list").arg(id.value()));
  try {
    // Re-read inside the transaction so a status written meanwhile by a running job is kept.
    std::optional<core::Run> r;
    core::writeInTransaction(*store_, [&] {
      r = store_->run(id);
      if (!r) throw core::Error(store_->path() + ": no run with id " + std::to_string(id.value()));
      r->name = n.toStdString();
      store_->updateRun(*r);
    });
    RunRow row = *current;
    row.run = *r;
    updateRun(row);
  } catch (const std::exception& e) {
    return fail(tr("Cannot rename run %1: %2").arg(id.value()).arg(QString::fromUtf8(e.what())));
  }
  Q_EMIT runRenamed(id, n);
  return true;
}

bool RunListModel::setRunTags(core::RunId id, const QString& tags) {
  if (!store_) return fail(tr("Cannot tag run %1: the database is open read-only").arg(id.value()));
  const RunRow* current = runRow(id);
  if (!current) return fail(tr("Cannot tag run %1: no such run in the list").arg(id.value()));
  try {
    std::optional<core::Run> r;
    core::writeInTransaction(*store_, [&] {
      r = store_->run(id);
      if (!r) throw core::Error(store_->path() + ": no run with id " + std::to_string(id.value()));
      r->tags = normalizeTags(tags).toStdString();
      store_->updateRun(*r);
    });
    RunRow row = *current;
    row.run = *r;
    updateRun(row);
  } catch (const std::exception& e) {
    return fail(tr("Cannot tag run %1: %2").arg(id.value()).arg(QString::fromUtf8(e.what())));
  }
  return true;
}

bool RunListModel::deleteRuns(const QList<core::RunId>& ids) {
  if (ids.isEmpty()) return true;
  if (!store_) return fail(tr("Cannot delete runs: the database is open read-only"));
  QList<core::RunId> deleted;
  QString error;
  for (core::RunId id : ids) {
    try {
      store_->deleteRun(id);
      deleted << id;
    } catch (const std::exception& e) {
      error = tr("Cannot delete run %1: %2").arg(id.value()).arg(QString::fromUtf8(e.what()));
      break;
    }
  }
  std::vector<RunRow> keep;
  for (const auto& g : groups_)
    for (const auto& r : g.runs)
      if (!deleted.contains(r.run.id)) keep.push_back(r);
  setRuns(std::move(keep));
  return error.isEmpty() ? true : fail(error);
}

// ------------------------------------------------------------------------------------------------

QModelIndex RunListModel::indexOfRun(core::RunId id, int column) const {
  for (int g = 0; g < static_cast<int>(groups_.size()); ++g) {
    const auto& runs = groups_[g].runs;
    for (int i = 0; i < static_cast<int>(runs.size()); ++i)
      if (runs[i].run.id == id) return index(i, column, runParent(g));
  }
  return {};
}

QModelIndex RunListModel::indexOfGroup(const QString& key) const {
  if (grouping_ == Grouping::None) return {};
  for (int g = 0; g < static_cast<int>(groups_.size()); ++g)
    if (groups_[g].key == key) return groupIndex(g);
  return {};
}

core::RunId RunListModel::runId(const QModelIndex& index) const {
  const RunRow* r = rowAt(index);
  return r ? r->run.id : core::RunId{};
}

const RunRow* RunListModel::runRow(core::RunId id) const {
  for (const auto& g : groups_)
    for (const auto& r : g.runs)
      if (r.run.id == id) return &r;
  return nullptr;
}

int RunListModel::runCount() const {
  int n = 0;
  for (const auto& g : groups_) n += static_cast<int>(g.runs.size());
  return n;
}

QList<core::RunId> RunListModel::runIds() const {
  QList<core::RunId> out;
  for (const auto& g : groups_)
    for (const auto& r : g.runs) out << r.run.id;
  return out;
}

}  // namespace shardscope::ui
