#pragma once
// The all-gather / reduce-scatter bottleneck list of the Communication page: core's
// findCollectiveBottlenecks (docs/METRICS.md), costliest exposed instance first, with the event id
// of each instance where the page could find it in the store (for "show in timeline").
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
  // A row is one collective of a rank over its steps (core::Bottleneck): Steps, Total and Mean over
  // its exposed instances; Step, Exposed, Duration and Exposed % are its worst instance's.
  enum Column { Rank, Op, Steps, Total, Mean, Step, Exposed, Duration, ExposedShare, Bytes, Group, Unit, Finding, ColumnCount };
  enum Role { SortRole = Qt::UserRole + 1 };

  explicit BottleneckModel(QObject* parent = nullptr);

  void setRows(std::vector<BottleneckRow> rows);
  void clear() { setRows({}); }
  const std::vector<BottleneckRow>& rows() const { return rows_; }
  const BottleneckRow& rowAt(int row) const { return rows_.at(static_cast<std::size_t>(row)); }

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
