#pragma once
// The run comparison as a table: a row per figure of core::compareRuns (rows no run has a value for
// are left out), column 0 the figure's name, then a column per run. Values are formatted with their
// unit; each non-baseline cell carries its delta against the baseline, "(+12.3%)", coloured by whether
// the change is better or worse for that figure; the best run of a row is bold and tinted. Tooltips
// and ExactValueRole give the unrounded value.
#include <QAbstractTableModel>
#include <QString>

#include <optional>
#include <vector>

#include "core/analysis/comparison.h"

namespace shardscope::ui {

class ComparisonModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Role {
    ExactValueRole = Qt::UserRole + 1,  // double, invalid when the run has no value
    DeltaPctRole,                       // double vs the baseline, invalid for the baseline / no value
    IsBestRole,                         // bool
    DeltaStateRole,                     // DeltaState as int
    ValueTextRole,                      // "605.2 ms"
    DeltaTextRole,                      // "(+12.3%)" or empty
    RowKeyRole,                         // the core row key ("step_time_ms")
    LowerIsBetterRole,                  // bool
  };
  enum class DeltaState { None = 0, Better = 1, Worse = 2, Same = 3 };

  explicit ComparisonModel(QObject* parent = nullptr);

  void setComparison(core::Comparison comparison);
  void clear();
  const core::Comparison& comparison() const { return comparison_; }
  bool isEmpty() const { return comparison_.runs.empty(); }

  // Makes run `index` the baseline: deltas are recomputed exactly as compareRuns computes them
  // ((value - baseline) / baseline * 100, none for a zero or missing baseline); best does not change.
  void setBaseline(std::size_t baselineIndex);
  std::size_t baseline() const { return comparison_.baseline; }

  // The comparison row shown in table row `row`, and the table row of a key (-1: not shown).
  const core::ComparisonRow& rowAt(int row) const;
  int rowOfKey(const QString& key) const;
  int runCount() const { return static_cast<int>(comparison_.runs.size()); }

  // The whole table as CSV: the figure, its key, the exact value of each run, then each non-baseline
  // run's delta in percent. Values unformatted (full precision); missing ones empty.
  QString toCsv() const;

  // Formatting of one value of a row (unit from the key: _ms, _pct, _gib, _s, tokens_per_s).
  static QString formatValue(const std::string& key, double value);
  static QString formatDelta(double deltaPct);
  static QString formatDeltaPp(double deltaPp);  // "(+7.1 pp)"
  // The row label without the unit that the formatted values already show.
  static QString displayLabel(const core::ComparisonRow& row);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  DeltaState deltaState(const core::ComparisonRow& row, std::size_t run) const;

  core::Comparison comparison_;
  std::vector<std::size_t> shown_;  // table row -> index in comparison_.rows
};

}  // namespace shardscope::ui
