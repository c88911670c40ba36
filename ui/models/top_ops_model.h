#pragma once
// The Kernels page's two tables: the top kernels or the top CPU operators of a run
// (core::computeTopOps, docs/METRICS.md "Top kernels and operators"), one row per name plus the
// "other" row, a column per rank with that rank's time. Raw numbers under SortRole so a
// QSortFilterProxyModel sorts them as numbers; TopOpsFilterProxy filters by a name substring and
// keeps the "other" row last whatever the sort.
#include <QAbstractTableModel>
#include <QSortFilterProxyModel>
#include <QString>

#include <vector>

#include "core/analysis/top_ops.h"

namespace shardscope::ui {

class TopOpsModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum class Kind { Kernels, Operators };
  // Kernels: Name, Class, Count, Time (total), Mean, Max, Share, rank columns.
  // Operators: Name, Count, Time (self), Mean, Max, Share, Inclusive, rank columns.
  enum class Column { Name, Class, Count, Time, Mean, Max, Share, Inclusive, Rank };
  enum Role {
    SortRole = Qt::UserRole + 1,  // the raw number (ns, count, share 0..1) or the name
    OtherRole,                    // true for the "other" row
    NameRole,                     // the full name (the filter matches it)
  };

  explicit TopOpsModel(Kind kind, QObject* parent = nullptr);

  Kind kind() const { return kind_; }
  void setTable(const core::TopOpsTable& table, const std::vector<int>& ranks);
  void clear();
  const core::TopOpsTable& table() const { return table_; }
  const std::vector<int>& ranks() const { return ranks_; }
  const core::TopOpRow& rowAt(int row) const { return table_.rows.at(static_cast<std::size_t>(row)); }

  // What column `c` shows, and the first rank column.
  Column columnKind(int c) const;
  int firstRankColumn() const { return static_cast<int>(fixed_.size()); }
  int columnOf(Column c) const;  // -1 when this kind has no such column

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

  static QString displayName(const core::TopOpRow& r);  // "other (12 names)" for the other row

 private:
  Kind kind_;
  std::vector<Column> fixed_;
  core::TopOpsTable table_;
  std::vector<int> ranks_;
};

class TopOpsFilterProxy : public QSortFilterProxyModel {
  Q_OBJECT

 public:
  explicit TopOpsFilterProxy(QObject* parent = nullptr);
  // Case-insensitive substring of the name; empty: every row. The "other" row shows only unfiltered.
  void setText(const QString& text);
  QString text() const { return text_; }

 protected:
  bool filterAcceptsRow(int sourceRow, const QModelIndex& sourceParent) const override;
  bool lessThan(const QModelIndex& left, const QModelIndex& right) const override;

 private:
  QString text_;
};

}  // namespace shardscope::ui
