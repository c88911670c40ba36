#include "ui/models/snapshot_models.h"

#include "ui/charts/chart_style.h"

namespace shardscope::ui {
namespace {

QString categoryText(const std::string& c) {
  if (c == "optimizer_state") return QObject::tr("optimizer state");
  if (c == "comm_buffers") return QObject::tr("comm buffers");
  return QString::fromStdString(c);
}

QVariant bytesCell(std::int64_t bytes, int role) {
  if (role == Qt::DisplayRole) return charts::formatBytes(static_cast<double>(bytes), 2);
  if (role == Qt::ToolTipRole) return QObject::tr("%1 bytes").arg(charts::formatNumber(static_cast<double>(bytes)));
  if (role == Qt::TextAlignmentRole) return QVariant::fromValue(Qt::Alignment(Qt::AlignRight | Qt::AlignVCenter));
  return {};
}

}  // namespace

SnapshotTopModel::SnapshotTopModel(QObject* parent) : QAbstractTableModel(parent) {}

void SnapshotTopModel::setGroups(std::vector<core::SnapshotStackGroup> groups) {
  beginResetModel();
  groups_ = std::move(groups);
  endResetModel();
}

void SnapshotTopModel::clear() { setGroups({}); }

int SnapshotTopModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(groups_.size());
}

int SnapshotTopModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant SnapshotTopModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const core::SnapshotStackGroup& g = groups_[static_cast<std::size_t>(index.row())];
  if (role == StackRole) return g.stack;
  switch (index.column()) {
    case Bytes:
      if (role == RawValueRole) return static_cast<qlonglong>(g.bytes);
      return bytesCell(g.bytes, role);
    case Count:
      if (role == RawValueRole || role == Qt::DisplayRole) return static_cast<qlonglong>(g.count);
      if (role == Qt::TextAlignmentRole) return QVariant::fromValue(Qt::Alignment(Qt::AlignRight | Qt::AlignVCenter));
      return {};
    case Category:
      if (role == Qt::DisplayRole) return categoryText(g.category);
      return {};
    case Owner:
      if (role == Qt::DisplayRole || role == Qt::ToolTipRole) return QString::fromStdString(g.owner);
      return {};
    case Site:
      if (role == Qt::DisplayRole || role == Qt::ToolTipRole) return QString::fromStdString(g.site);
      return {};
    default:
      return {};
  }
}

QVariant SnapshotTopModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole)
    return QAbstractTableModel::headerData(section, orientation, role);
  switch (section) {
    case Bytes:
      return tr("Bytes");
    case Count:
      return tr("Count");
    case Category:
      return tr("Category");
    case Owner:
      return tr("Owner frame");
    case Site:
      return tr("Allocation site");
    default:
      return {};
  }
}

SnapshotGrowthModel::SnapshotGrowthModel(QObject* parent) : QAbstractTableModel(parent) {}

void SnapshotGrowthModel::setRows(std::vector<core::SnapshotStackDelta> rows) {
  beginResetModel();
  rows_ = std::move(rows);
  endResetModel();
}

void SnapshotGrowthModel::clear() { setRows({}); }

int SnapshotGrowthModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

int SnapshotGrowthModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant SnapshotGrowthModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const core::SnapshotStackDelta& d = rows_[static_cast<std::size_t>(index.row())];
  switch (index.column()) {
    case Owner:
      if (role == Qt::DisplayRole) return QString::fromStdString(d.owner);
      if (role == Qt::ToolTipRole) return tr("%1\nsite: %2").arg(QString::fromStdString(d.owner), QString::fromStdString(d.site));
      return {};
    case Category:
      if (role == Qt::DisplayRole) return categoryText(d.category);
      return {};
    case BytesA:
      if (role == RawValueRole) return static_cast<qlonglong>(d.bytesA);
      return bytesCell(d.bytesA, role);
    case BytesB:
      if (role == RawValueRole) return static_cast<qlonglong>(d.bytesB);
      return bytesCell(d.bytesB, role);
    case Growth: {
      const std::int64_t g = d.bytesB - d.bytesA;
      if (role == RawValueRole) return static_cast<qlonglong>(g);
      if (role == Qt::DisplayRole) return QStringLiteral("+") + charts::formatBytes(static_cast<double>(g), 2);
      return bytesCell(g, role);
    }
    default:
      return {};
  }
}

QVariant SnapshotGrowthModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole)
    return QAbstractTableModel::headerData(section, orientation, role);
  switch (section) {
    case Owner:
      return tr("Owner frame");
    case Category:
      return tr("Category");
    case BytesA:
      return tr("Bytes (A)");
    case BytesB:
      return tr("Bytes (B)");
    case Growth:
      return tr("Growth");
    default:
      return {};
  }
}

}  // namespace shardscope::ui
