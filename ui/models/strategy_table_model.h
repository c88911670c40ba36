#pragma once
// The strategy table (core/analysis/strategy_table.h) as a Qt model: a row per run, column 0 the run,
// then core's shown columns. Cells are core's text (strategyCellText: "n/a" when a figure cannot be
// known); an n/a cell's tooltip says why, a known one's how it was measured. ExactValueRole gives the
// unrounded number.
#include <QAbstractTableModel>

#include "core/analysis/strategy_table.h"

namespace shardscope::ui {

class StrategyTableModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Role {
    ExactValueRole = Qt::UserRole + 1,  // double; invalid for text cells and n/a
    KnownRole,                          // bool: false for an n/a cell
    WhyRole,                            // QString: why n/a, or how the value was obtained
    ColumnKeyRole,                      // QString: core's JSON key ("peak_memory_gib"; "run" for column 0)
  };

  explicit StrategyTableModel(QObject* parent = nullptr);

  void setTable(core::StrategyTable table);
  void clear();
  const core::StrategyTable& table() const { return table_; }
  bool isEmpty() const { return table_.rows.empty(); }
  // The table column of a core column (-1 when not shown).
  int columnOf(core::StrategyColumn c) const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  core::StrategyTable table_;
};

}  // namespace shardscope::ui
