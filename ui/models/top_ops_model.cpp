#include "ui/models/top_ops_model.h"

#include "ui/models/collectives_model.h"

namespace shardscope::ui {

TopOpsModel::TopOpsModel(Kind kind, QObject* parent) : QAbstractTableModel(parent), kind_(kind) {
  if (kind_ == Kind::Kernels)
    fixed_ = {Column::Name, Column::Class, Column::Count, Column::Time, Column::Mean, Column::Max, Column::Share};
  else
    fixed_ = {Column::Name, Column::Count, Column::Time, Column::Mean, Column::Max, Column::Share, Column::Inclusive};
}

void TopOpsModel::setTable(const core::TopOpsTable& table, const std::vector<int>& ranks) {
  beginResetModel();
  table_ = table;
  ranks_ = ranks;
  endResetModel();
}

void TopOpsModel::clear() { setTable({}, {}); }

TopOpsModel::Column TopOpsModel::columnKind(int c) const {
  if (c >= 0 && c < static_cast<int>(fixed_.size())) return fixed_[static_cast<std::size_t>(c)];
  return Column::Rank;
}

int TopOpsModel::columnOf(Column c) const {
  for (std::size_t i = 0; i < fixed_.size(); ++i)
    if (fixed_[i] == c) return static_cast<int>(i);
  return c == Column::Rank && !ranks_.empty() ? firstRankColumn() : -1;
}

int TopOpsModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : static_cast<int>(table_.rows.size()); }

int TopOpsModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(fixed_.size() + ranks_.size());
}

QString TopOpsModel::displayName(const core::TopOpRow& r) {
  if (r.other) return tr("other (%n name(s))", nullptr, static_cast<int>(r.names));
  return QString::fromStdString(r.name);
}

QVariant TopOpsModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() < 0 || index.row() >= rowCount() || index.column() < 0 || index.column() >= columnCount())
    return {};
  const core::TopOpRow& r = table_.rows[static_cast<std::size_t>(index.row())];
  if (role == OtherRole) return r.other;
  if (role == NameRole) return r.other ? QString() : QString::fromStdString(r.name);
  const Column col = columnKind(index.column());
  const std::size_t rankIdx = static_cast<std::size_t>(index.column() - firstRankColumn());
  const core::TimeNs rankNs = col == Column::Rank && rankIdx < r.perRankNs.size() ? r.perRankNs[rankIdx] : 0;
  const QString category =
      r.other ? QString()
              : QString::fromUtf8(core::toString(r.category).data(), static_cast<qsizetype>(core::toString(r.category).size()));
  if (role == SortRole) {
    switch (col) {
      case Column::Name:
        return displayName(r);
      case Column::Class:
        return category;
      case Column::Count:
        return static_cast<qlonglong>(r.count);
      case Column::Time:
        return static_cast<qlonglong>(r.timeNs);
      case Column::Mean:
        return static_cast<qlonglong>(r.meanNs);
      case Column::Max:
        return static_cast<qlonglong>(r.maxNs);
      case Column::Share:
        return r.share;
      case Column::Inclusive:
        return static_cast<qlonglong>(r.totalNs);
      case Column::Rank:
        return static_cast<qlonglong>(rankNs);
    }
    return {};
  }
  if (role == Qt::DisplayRole) {
    switch (col) {
      case Column::Name:
        return displayName(r);
      case Column::Class:
        return category;
      case Column::Count:
        return units::count(r.count);
      case Column::Time:
        return units::ms(r.timeNs);
      case Column::Mean:
        return units::ms(r.meanNs);
      case Column::Max:
        return units::ms(r.maxNs);
      case Column::Share:
        return units::percent(r.share);
      case Column::Inclusive:
        return units::ms(r.totalNs);
      case Column::Rank:
        return units::ms(rankNs);
    }
    return {};
  }
  if (role == Qt::ToolTipRole) {
    if (col == Column::Name) return displayName(r);
    if (col == Column::Rank && rankIdx < ranks_.size() && table_.perRankNs.size() > rankIdx && table_.perRankNs[rankIdx] > 0)
      return tr("rank %1: %2 ms, %3 of the rank's time")
          .arg(ranks_[rankIdx])
          .arg(units::ms(rankNs))
          .arg(units::percent(static_cast<double>(rankNs) / static_cast<double>(table_.perRankNs[rankIdx])));
    return {};
  }
  if (role == Qt::TextAlignmentRole) {
    if (col == Column::Name || col == Column::Class) return QVariant::fromValue(Qt::Alignment(Qt::AlignLeft | Qt::AlignVCenter));
    return QVariant::fromValue(Qt::Alignment(Qt::AlignRight | Qt::AlignVCenter));
  }
  return {};
}

QVariant TopOpsModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || section < 0 || section >= columnCount()) return {};
  const Column col = columnKind(section);
  const bool kernels = kind_ == Kind::Kernels;
  if (role == Qt::DisplayRole) {
    switch (col) {
      case Column::Name:
        return kernels ? tr("Kernel") : tr("Operator");
      case Column::Class:
        return tr("Class");
      case Column::Count:
        return tr("Count");
      case Column::Time:
        return kernels ? tr("Total (ms)") : tr("Self (ms)");
      case Column::Mean:
        return tr("Mean (ms)");
      case Column::Max:
        return tr("Max (ms)");
      case Column::Share:
        return kernels ? tr("Share of device time") : tr("Share of op time");
      case Column::Inclusive:
        return tr("Incl. (ms)");
      case Column::Rank:
        return tr("Rank %1 (ms)").arg(ranks_[static_cast<std::size_t>(section - firstRankColumn())]);
    }
  }
  if (role == Qt::TextAlignmentRole)
    return QVariant::fromValue(
        Qt::Alignment((col == Column::Name || col == Column::Class ? Qt::AlignLeft : Qt::AlignRight) | Qt::AlignVCenter));
  if (role == Qt::ToolTipRole) {
    switch (col) {
      case Column::Time:
        return kernels ? tr("Σ duration over every rank") : tr("Σ self time: duration minus nested cpu_op time, over every rank");
      case Column::Share:
        return kernels ? tr("of the run's device time (Σ of every kernel's duration)") : tr("of Σ self time of every operator");
      case Column::Inclusive:
        return tr("Σ duration including nested operators");
      case Column::Class:
        return tr("HTA's kernel class, given at import");
      case Column::Rank:
        return kernels ? tr("this rank's total time") : tr("this rank's self time");
      default:
        return {};
    }
  }
  return {};
}

TopOpsFilterProxy::TopOpsFilterProxy(QObject* parent) : QSortFilterProxyModel(parent) { setSortRole(TopOpsModel::SortRole); }

void TopOpsFilterProxy::setText(const QString& text) {
  const QString t = text.trimmed();
  if (t == text_) return;
  text_ = t;
  invalidateFilter();
}

bool TopOpsFilterProxy::filterAcceptsRow(int sourceRow, const QModelIndex& sourceParent) const {
  if (text_.isEmpty()) return true;
  const QModelIndex i = sourceModel()->index(sourceRow, 0, sourceParent);
  if (i.data(TopOpsModel::OtherRole).toBool()) return false;
  return i.data(TopOpsModel::NameRole).toString().contains(text_, Qt::CaseInsensitive);
}

bool TopOpsFilterProxy::lessThan(const QModelIndex& left, const QModelIndex& right) const {
  const bool lo = left.data(TopOpsModel::OtherRole).toBool(), ro = right.data(TopOpsModel::OtherRole).toBool();
  if (lo != ro) {
    // The other row last in either order.
    const bool ascending = sortOrder() == Qt::AscendingOrder;
    return ascending ? ro : lo;
  }
  return QSortFilterProxyModel::lessThan(left, right);
}

}  // namespace shardscope::ui
