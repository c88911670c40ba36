#pragma once
// Table models of a PyTorch memory snapshot (core/analysis/memory_snapshot_analysis.h): the
// allocations alive at the active peak grouped by stack (SnapshotTopModel, the Memory page) and the
// groups that grew from one snapshot to another (SnapshotGrowthModel, the Compare page). Both show
// core's figures as they are; nothing is recomputed here.
#include <QAbstractTableModel>

#include <vector>

#include "core/analysis/memory_snapshot_analysis.h"

namespace shardscope::ui {

class SnapshotTopModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { Bytes, Count, Category, Owner, Site, ColumnCount };
  enum Role { RawValueRole = Qt::UserRole + 1, StackRole };  // bytes / count; the group's StackId

  explicit SnapshotTopModel(QObject* parent = nullptr);

  void setGroups(std::vector<core::SnapshotStackGroup> groups);
  void clear();
  const std::vector<core::SnapshotStackGroup>& groups() const { return groups_; }
  const core::SnapshotStackGroup& groupAt(int row) const { return groups_.at(static_cast<std::size_t>(row)); }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  std::vector<core::SnapshotStackGroup> groups_;
};

class SnapshotGrowthModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { Owner, Category, BytesA, BytesB, Growth, ColumnCount };
  enum Role { RawValueRole = Qt::UserRole + 1 };  // bytes (Growth: bytesB - bytesA)

  explicit SnapshotGrowthModel(QObject* parent = nullptr);

  void setRows(std::vector<core::SnapshotStackDelta> rows);
  void clear();
  const std::vector<core::SnapshotStackDelta>& rows() const { return rows_; }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  std::vector<core::SnapshotStackDelta> rows_;
};

}  // namespace shardscope::ui
