#pragma once
// A titled bar chart of one value per run (QCustomPlot): run names under the bars, each value written
// above its bar, the best bar in a highlight colour, runs without a value marked "n/a".
#include <QString>
#include <QStringList>

#include <functional>
#include <optional>
#include <vector>

#include "ui/charts/qcp.h"

namespace shardscope::ui::charts {

class BarChart : public QCustomPlot {
  Q_OBJECT

 public:
  explicit BarChart(QWidget* parent = nullptr);

  // valueText formats a value for its label above the bar; the y axis is labelled axisLabel and
  // plots value * axisScale (e.g. GiB values shown in MiB).
  void setBars(const QString& title, const QStringList& labels, const std::vector<std::optional<double>>& values,
               std::optional<std::size_t> best, const std::function<QString(double)>& valueText, const QString& axisLabel,
               double axisScale = 1.0, const QString& emptyText = QString());
  void clearBars(const QString& title, const QString& emptyText = QString());

  QString title() const;
  // What is drawn, for tests: the plotted value of bar i (nullopt: n/a) and the highlighted bar.
  std::optional<double> plottedValue(std::size_t i) const;
  std::optional<std::size_t> highlighted() const { return best_; }
  std::size_t barCount() const { return values_.size(); }
  QString valueLabel(std::size_t i) const;
  // The note drawn instead of bars when no run has a value ("" otherwise).
  QString emptyNote() const;
  QSize minimumSizeHint() const override { return minimumSize(); }  // its own minimum, not the legend's

 protected:
  void resizeEvent(QResizeEvent* event) override;
  void mouseMoveEvent(QMouseEvent* event) override;

 private:
  void rebuildTicker();

  QStringList names_;
  QCPTextElement* title_ = nullptr;
  QCPBars* bars_ = nullptr;
  QCPBars* bestBars_ = nullptr;
  std::vector<std::optional<double>> values_;  // plotted (scaled) values
  QStringList valueTexts_;
  std::vector<QCPItemText*> labels_;
  QCPItemText* empty_ = nullptr;
  std::optional<std::size_t> best_;
};

}  // namespace shardscope::ui::charts
