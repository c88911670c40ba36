#pragma once
// The collectives table of the Communication page: one row per (operation, process group) of
// core::computeCollectives (docs/METRICS.md, "Collectives table"), with the units formatted for
// display (bytes, ms, GB/s) and the raw values under SortRole so a QSortFilterProxyModel sorts
// numbers as numbers. CollectivesFilterProxy adds the page's filters (free text, operation, group).
#include <QAbstractTableModel>
#include <QSortFilterProxyModel>
#include <QString>
#include <QStringList>

#include <cstdint>
#include <optional>
#include <vector>

#include "core/analysis/collectives.h"

namespace shardscope::ui {

// Display helpers shared by the Communication page's models and chart.
namespace units {
QString bytes(std::int64_t bytes);      // "2.77 MiB" (core/util/units.h: binary units)
QString count(std::int64_t n);          // "1,234"
QString ms(core::TimeNs ns);            // "3,714.625" (milliseconds, 3 decimals, grouped)
QString msWithUnit(core::TimeNs ns);    // "3,714.625 ms"
QString gbps(double gbPerS);            // "12.34"
QString percent(double share);          // share 0..1 -> "48.2 %"
QString opName(core::CollectiveOp op);  // core's spelling: "all_gather"
}  // namespace units

class CollectivesModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { Op, Group, Ranks, Count, Bytes, Total, Mean, Exposed, ExposedShare, AlgBw, BusBw, ColumnCount };
  enum Role {
    SortRole = Qt::UserRole + 1,  // the raw number (or text) of the cell; empty when undefined
    OpRole,                       // the row's operation name (for the operation filter)
    GroupRole,                    // the row's process group (for the group filter)
    TargetRole,                   // what the row is for (bottlenecks: parameter, bucket, unit), for the text filter
  };

  explicit CollectivesModel(QObject* parent = nullptr);

  void setRows(std::vector<core::CollectiveStats> rows);
  void clear() { setRows({}); }
  const std::vector<core::CollectiveStats>& rows() const { return rows_; }
  const core::CollectiveStats& rowAt(int row) const { return rows_.at(static_cast<std::size_t>(row)); }

  // Distinct operations and groups present, in table order (for the filter combos).
  QStringList operations() const;
  QStringList groups() const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

  static QString groupLabel(const core::CollectiveStats& s);

 private:
  std::vector<core::CollectiveStats> rows_;
};

// Filters a CollectivesModel by operation, process group and free text (matched against both).
// Sorting uses CollectivesModel::SortRole.
class CollectivesFilterProxy : public QSortFilterProxyModel {
  Q_OBJECT

 public:
  explicit CollectivesFilterProxy(QObject* parent = nullptr);
  void setOperation(const QString& op);  // empty: every operation
  void setGroup(const QString& group);   // empty: every group
  void setText(const QString& text);     // empty: no text filter

 protected:
  bool filterAcceptsRow(int sourceRow, const QModelIndex& sourceParent) const override;

 private:
  QString op_, group_, text_;
};

}  // namespace shardscope::ui
