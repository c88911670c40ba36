#pragma once
// Stacked bars of byte amounts (QCustomPlot QCPBars stacked with moveAbove): one bar per group (e.g.
// a rank), one layer per category (parameters, gradients, ...), the total written above each bar
// and a legend of the categories beside the plot.
#include <QColor>
#include <QString>
#include <QStringList>

#include <cstdint>
#include <optional>
#include <vector>

#include "ui/charts/chart_style.h"
#include "ui/charts/qcp.h"

namespace shardscope::ui::charts {

class StackedBarChart : public QCustomPlot {
  Q_OBJECT

 public:
  struct Category {
    QString name;
    QColor color;
    std::vector<std::int64_t> bytes;  // one per group (nanoseconds with Unit::Nanoseconds)
  };

  // What the amounts are: bytes (binary units) or nanoseconds (shown in ms).
  enum class Unit { Bytes, Nanoseconds };

  explicit StackedBarChart(QWidget* parent = nullptr);
  void setUnit(Unit u) { unit_ = u; }
  Unit unit() const { return unit_; }

  void setStacks(const QString& title, const QStringList& groups, const std::vector<Category>& categories);
  // A limit across the chart (a dashed red line at `amount`, e.g. the device's memory) with its label;
  // groups above it get their total label in red with `overNote` ("does not fit"). Call after
  // setStacks; nullopt removes it.
  void setLimit(std::optional<std::int64_t> amount, const QString& label, const QString& overNote = QString());
  std::optional<std::int64_t> limit() const { return limit_; }
  bool overLimit(int group) const { return limit_ && totalBytes(group) > *limit_; }
  QString totalLabel(int group) const;
  void clearStacks(const QString& title);

  const ByteScale& scale() const { return scale_; }
  int groupCount() const { return static_cast<int>(totals_.size()); }
  int categoryCount() const { return static_cast<int>(bars_.size()); }
  QCPBars* bars(int category) const { return bars_.at(static_cast<std::size_t>(category)); }
  // The plotted height of group g's stack (sum of its layers, in scale() units) and its exact bytes.
  double plottedTotal(int group) const;
  std::int64_t totalBytes(int group) const { return totals_.at(static_cast<std::size_t>(group)); }
  // Its own minimum, not the legend's: on a narrow window the plot gives up width first.
  QSize minimumSizeHint() const override { return minimumSize(); }

 private:
  QCPTextElement* title_ = nullptr;
  std::vector<QCPBars*> bars_;
  std::vector<QCPItemText*> labels_;
  std::vector<std::int64_t> totals_;
  std::optional<std::int64_t> limit_;
  QCPItemLine* limitLine_ = nullptr;
  QCPItemText* limitText_ = nullptr;
  ByteScale scale_;  // for Unit::Nanoseconds: factor 1e6, suffix "ms"
  Unit unit_ = Unit::Bytes;
};

}  // namespace shardscope::ui::charts
