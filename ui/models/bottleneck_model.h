#pragma once
// The collective bottlenecks of the Communication page: core's findCollectiveBottlenecks
// (docs/METRICS.md), one row per group of exposed instances that one change would act on (operation,
// target, process group), costliest first, with the event id of its worst instance where the page
// could find it in the store (for "show in timeline"). The page's operation, group and text filters
// apply to it through CollectivesFilterProxy (OpRole, GroupRole, TargetRole).
#include <QAbstractTableModel>
#include <QString>

#include <vector>

#include "core/analysis/bottlenecks.h"

namespace shardscope::ui {

struct BottleneckRow {
  core::Bottleneck b;
  core::Id eventId = 0;  // 0: not found
};

class BottleneckModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  // Instances, Ranks, Steps, Total and Mean are over the group; Worst is its worst instance.
  enum Column { Op, Target, Group, Instances, Ranks, Steps, Total, Mean, Cause, Worst, Bytes, ColumnCount };
  enum Role { SortRole = Qt::UserRole + 1 };  // OpRole, GroupRole, TargetRole: CollectivesModel's

  explicit BottleneckModel(QObject* parent = nullptr);

  void setRows(std::vector<BottleneckRow> rows);
  void clear() { setRows({}); }
  const std::vector<BottleneckRow>& rows() const { return rows_; }
  const BottleneckRow& rowAt(int row) const { return rows_.at(static_cast<std::size_t>(row)); }

  // "waiting for a late rank (rank 7)", "nothing to overlap", ...
  static QString causeLabel(const core::Bottleneck& b);
  // The details pane of a row: what it is, why it is exposed, what to change (rich text).
  static QString detailsHtml(const BottleneckRow& row);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  std::vector<BottleneckRow> rows_;
};

}  // namespace shardscope::ui
