#include "ui/models/collectives_model.h"

#include <QLocale>

#include "core/util/units.h"

#include <cmath>

namespace shardscope::ui {

namespace units {

QString bytes(std::int64_t b) { return QString::fromStdString(core::formatBytes(static_cast<double>(b))); }

QString count(std::int64_t n) { return QString::fromStdString(core::formatCount(n)); }

QString ms(core::TimeNs ns) { return QString::fromStdString(core::formatGrouped(static_cast<double>(ns) / 1e6, 3)); }

QString msWithUnit(core::TimeNs ns) { return ms(ns) + QStringLiteral(" ms"); }

QString gbps(double v) { return QString::fromStdString(core::formatGrouped(v, 2)); }

QString percent(double share) { return QString::fromStdString(core::formatPercent(share * 100.0, 1)); }

QString opName(core::CollectiveOp op) {
  return QString::fromUtf8(core::toString(op).data(), static_cast<qsizetype>(core::toString(op).size()));
}

}  // namespace units

CollectivesModel::CollectivesModel(QObject* parent) : QAbstractTableModel(parent) {}

void CollectivesModel::setRows(std::vector<core::CollectiveStats> rows) {
  beginResetModel();
  rows_ = std::move(rows);
  endResetModel();
}

QString CollectivesModel::groupLabel(const core::CollectiveStats& s) {
  return s.processGroup.empty() ? QStringLiteral("unknown") : QString::fromStdString(s.processGroup);
}

QStringList CollectivesModel::operations() const {
  QStringList out;
  for (const auto& r : rows_)
    if (!out.contains(units::opName(r.op))) out << units::opName(r.op);
  return out;
}

QStringList CollectivesModel::groups() const {
  QStringList out;
  for (const auto& r : rows_)
    if (!out.contains(groupLabel(r))) out << groupLabel(r);
  return out;
}

int CollectivesModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : static_cast<int>(rows_.size()); }

int CollectivesModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant CollectivesModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() < 0 || index.row() >= rowCount() || index.column() < 0 || index.column() >= ColumnCount)
    return {};
  const core::CollectiveStats& s = rows_[static_cast<std::size_t>(index.row())];
  if (role == OpRole) return units::opName(s.op);
  if (role == GroupRole) return groupLabel(s);
  const bool hasBytes = s.countWithBytes > 0;
  const double exposedShare = s.totalNs > 0 ? static_cast<double>(s.exposedNs) / static_cast<double>(s.totalNs) : 0.0;
  if (role == SortRole) {
    switch (index.column()) {
      case Op:
        return units::opName(s.op);
      case Group:
        return groupLabel(s);
      case Ranks:
        return s.groupSize;
      case Count:
        return static_cast<qlonglong>(s.count);
      case Bytes:
        return hasBytes ? QVariant(static_cast<qlonglong>(s.bytes)) : QVariant(-1LL);
      case Total:
        return static_cast<qlonglong>(s.totalNs);
      case Mean:
        return static_cast<qlonglong>(s.meanNs);
      case Exposed:
        return static_cast<qlonglong>(s.exposedNs);
      case ExposedShare:
        return exposedShare;
      case AlgBw:
        return s.algBwGBps ? *s.algBwGBps : -1.0;
      case BusBw:
        return s.busBwGBps ? *s.busBwGBps : -1.0;
    }
    return {};
  }
  if (role == Qt::DisplayRole) {
    const QString none = QStringLiteral("—");
    switch (index.column()) {
      case Op:
        return units::opName(s.op);
      case Group:
        return groupLabel(s);
      case Ranks:
        return s.groupSize > 0 ? QString::number(s.groupSize) : none;
      case Count:
        return units::count(s.count);
      case Bytes:
        if (!hasBytes) return none;
        return s.countWithBytes < s.count ? units::bytes(s.bytes) + QStringLiteral("*") : units::bytes(s.bytes);
      case Total:
        return units::ms(s.totalNs);
      case Mean:
        return units::ms(s.meanNs);
      case Exposed:
        return units::ms(s.exposedNs);
      case ExposedShare:
        return s.totalNs > 0 ? units::percent(exposedShare) : none;
      case AlgBw:
        return s.algBwGBps ? units::gbps(*s.algBwGBps) : none;
      case BusBw:
        return s.busBwGBps ? units::gbps(*s.busBwGBps) : none;
    }
    return {};
  }
  if (role == Qt::TextAlignmentRole) {
    if (index.column() == Op || index.column() == Group) return QVariant(Qt::AlignLeft | Qt::AlignVCenter);
    return QVariant(Qt::AlignRight | Qt::AlignVCenter);
  }
  if (role == Qt::ToolTipRole) {
    switch (index.column()) {
      case Bytes:
        if (hasBytes && s.countWithBytes < s.count)
          return tr("Message size known for %1 of %2 instances (sum over those)")
              .arg(units::count(s.countWithBytes), units::count(s.count));
        if (hasBytes) return tr("%1 bytes").arg(units::count(s.bytes));
        return tr("No instance carries its message size");
      case AlgBw:
      case BusBw:
        if (!s.algBwGBps) return tr("Undefined: not every instance has a message size");
        return {};
      default:
        return {};
    }
  }
  return {};
}

QVariant CollectivesModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || section < 0 || section >= ColumnCount) return {};
  if (role == Qt::DisplayRole) {
    switch (section) {
      case Op:
        return tr("Operation");
      case Group:
        return tr("Group");
      case Ranks:
        return tr("Ranks");
      case Count:
        return tr("Count");
      case Bytes:
        return tr("Bytes");
      case Total:
        return tr("Total (ms)");
      case Mean:
        return tr("Mean (ms)");
      case Exposed:
        return tr("Exposed (ms)");
      case ExposedShare:
        return tr("Exposed %");
      case AlgBw:
        return tr("algBw (GB/s)");
      case BusBw:
        return tr("busBw (GB/s)");
    }
  }
  if (role == Qt::ToolTipRole) {
    switch (section) {
      case Op:
        return tr("Collective operation");
      case Group:
        return tr("Process group (c10d name)");
      case Ranks:
        return tr("Ranks in the process group (n)");
      case Count:
        return tr("Instances over all ranks");
      case Bytes:
        return tr(
            "Σ message size S as nccl-tests defines it: the gathered output for all-gather, the full input for reduce-scatter "
            "and all-reduce");
      case Total:
        return tr("Σ duration of the instances");
      case Mean:
        return tr("Mean duration of an instance");
      case Exposed:
        return tr("Σ of each instance's time not covered by computation on its rank");
      case ExposedShare:
        return tr("Exposed / total time");
      case AlgBw:
        return tr("Algorithm bandwidth: Σ bytes / Σ time over the instances");
      case BusBw:
        return tr("Bus bandwidth: algBw × 2(n−1)/n (all-reduce), (n−1)/n (all-gather, reduce-scatter, all-to-all), 1 (others)");
    }
  }
  if (role == Qt::TextAlignmentRole)
    return QVariant((section == Op || section == Group ? Qt::AlignLeft : Qt::AlignRight) | Qt::AlignVCenter);
  return {};
}

CollectivesFilterProxy::CollectivesFilterProxy(QObject* parent) : QSortFilterProxyModel(parent) {
  setSortRole(CollectivesModel::SortRole);
  setSortCaseSensitivity(Qt::CaseInsensitive);
}

void CollectivesFilterProxy::setOperation(const QString& op) {
  if (op == op_) return;
  op_ = op;
  invalidateFilter();
}

void CollectivesFilterProxy::setGroup(const QString& group) {
  if (group == group_) return;
  group_ = group;
  invalidateFilter();
}

void CollectivesFilterProxy::setText(const QString& text) {
  const QString t = text.trimmed();
  if (t == text_) return;
  text_ = t;
  invalidateFilter();
}

bool CollectivesFilterProxy::filterAcceptsRow(int sourceRow, const QModelIndex& sourceParent) const {
  const QModelIndex idx = sourceModel()->index(sourceRow, 0, sourceParent);
  const QString op = idx.data(CollectivesModel::OpRole).toString();
  const QString group = idx.data(CollectivesModel::GroupRole).toString();
  if (!op_.isEmpty() && op != op_) return false;
  if (!group_.isEmpty() && group != group_) return false;
  if (text_.isEmpty()) return true;
  // "allgather", "all-gather" and "all_gather" all find all_gather.
  auto norm = [](QString s) { return s.remove(QLatin1Char('_')).remove(QLatin1Char('-')).remove(QLatin1Char(' ')); };
  const QString t = norm(text_);
  return norm(op).contains(t, Qt::CaseInsensitive) || group.contains(text_, Qt::CaseInsensitive) ||
         idx.data(CollectivesModel::TargetRole).toString().contains(text_, Qt::CaseInsensitive);
}

}  // namespace shardscope::ui
