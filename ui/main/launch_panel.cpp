#include "ui/main/launch_panel.h"

#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QProgressBar>
#include <QScrollArea>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

#include "ui/charts/chart_style.h"
#include "ui/charts/qcp.h"

namespace shardscope::ui {

namespace {

QCustomPlot* makePlot(const QString& title, const QString& yLabel, QWidget* parent) {
  auto* plot = new QCustomPlot(parent);
  charts::applyPlotStyle(plot);
  plot->plotLayout()->insertRow(0);
  auto* t = new QCPTextElement(plot, title, QFont(plot->font().family(), 9, QFont::Bold));
  plot->plotLayout()->addElement(0, 0, t);
  plot->xAxis->setLabel(QObject::tr("step"));
  plot->yAxis->setLabel(yLabel);
  plot->legend->setVisible(true);
  plot->legend->setFont(QFont(plot->font().family(), 8));
  plot->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignRight);
  plot->setMinimumSize(220, 120);
  return plot;
}

}  // namespace

LaunchPanel::LaunchPanel(QWidget* parent) : QWidget(parent) {
  setObjectName(QStringLiteral("launchPanel"));
  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(4, 2, 4, 2);
  auto* left = new QVBoxLayout;
  command_ = new QLabel(tr("No comparison launched yet (File ▸ Launch Runs…)."), this);
  command_->setWordWrap(true);
  command_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  command_->setStyleSheet(QStringLiteral("color: palette(mid);"));
  left->addWidget(command_);
  rowsBox_ = new QWidget(this);
  grid_ = new QGridLayout(rowsBox_);
  grid_->setContentsMargins(0, 0, 0, 0);
  grid_->setColumnStretch(1, 1);
  auto* scroll = new QScrollArea(this);
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  scroll->setWidget(rowsBox_);
  left->addWidget(scroll, 1);
  layout->addLayout(left, 2);
  loss_ = makePlot(tr("Loss (rank 0)"), tr("loss"), this);
  stepTime_ = makePlot(tr("Step time (rank 0)"), tr("ms"), this);
  layout->addWidget(loss_, 2);
  layout->addWidget(stepTime_, 2);
}

void LaunchPanel::setState(Row& r, const QString& text, const QString& color) {
  r.state->setText(text);
  r.state->setStyleSheet(color.isEmpty() ? QString() : QStringLiteral("color: %1;").arg(color));
}

void LaunchPanel::start(const QStringList& strategies, const QString& commandLine) {
  for (auto& r : rows_) {
    delete r.label;
    delete r.bar;
    delete r.state;
  }
  rows_.clear();
  current_ = -1;
  command_->setText(commandLine);
  for (int i = 0; i < strategies.size(); ++i) {
    Row r;
    r.name = strategies[i];
    r.label = new QLabel(QStringLiteral("<b>%1</b>").arg(strategies[i].toHtmlEscaped()), rowsBox_);
    r.bar = new QProgressBar(rowsBox_);
    r.bar->setRange(0, 1);
    r.bar->setValue(0);
    r.bar->setFormat(tr("queued"));
    r.bar->setMaximumHeight(16);
    r.state = new QLabel(rowsBox_);
    r.state->setMinimumWidth(120);
    grid_->addWidget(r.label, i, 0);
    grid_->addWidget(r.bar, i, 1);
    grid_->addWidget(r.state, i, 2);
    rows_.push_back(r);
    setState(rows_.back(), tr("queued"), QStringLiteral("gray"));
  }
  replot();
}

void LaunchPanel::strategyStarted(int index) {
  if (index < 0 || index >= rows_.size()) return;
  current_ = index;
  Row& r = rows_[index];
  r.bar->setRange(0, 0);  // busy until its first step
  r.bar->setFormat(tr("starting"));
  setState(r, tr("starting ranks…"), QStringLiteral("#1565c0"));
}

void LaunchPanel::stepProgress(int index, int step, int steps, double loss, double stepMs) {
  if (index < 0 || index >= rows_.size()) return;
  current_ = index;
  Row& r = rows_[index];
  r.step = step;
  r.steps = steps;
  r.bar->setRange(0, std::max(1, steps));
  r.bar->setValue(std::clamp(step, 0, std::max(1, steps)));
  r.bar->setFormat(tr("step %v of %m"));
  setState(r, std::isfinite(stepMs) ? tr("running, %1 ms/step").arg(stepMs, 0, 'f', 0) : tr("running"),
           QStringLiteral("#1565c0"));
  r.x << step;
  r.loss << loss;
  r.ms << stepMs;
  replot();
}

void LaunchPanel::strategyFinished(int index, qint64 runId) {
  if (index < 0 || index >= rows_.size()) return;
  Row& r = rows_[index];
  r.done = true;
  if (r.steps > 0) r.step = r.steps;
  r.bar->setRange(0, std::max(1, r.steps));
  r.bar->setValue(std::max(1, r.steps));
  r.bar->setFormat(tr("done"));
  setState(r, tr("done: run %1").arg(runId), QStringLiteral("#2e7d32"));
}

void LaunchPanel::ended(const QString& outcome, bool ok) {
  for (auto& r : rows_) {
    if (r.done) continue;
    const bool started = r.bar->maximum() == 0 || r.step > 0;
    r.bar->setRange(0, std::max(1, r.steps));
    r.bar->setValue(r.step);
    r.bar->setFormat(started ? outcome : tr("not run"));
    setState(r, started ? outcome : tr("not run"), ok ? QStringLiteral("#2e7d32") : QStringLiteral("#c62828"));
  }
}

QString LaunchPanel::stateText(int index) const { return index >= 0 && index < rows_.size() ? rows_[index].state->text() : QString(); }
int LaunchPanel::stepOf(int index) const { return index >= 0 && index < rows_.size() ? rows_[index].step : 0; }
int LaunchPanel::stepsOf(int index) const { return index >= 0 && index < rows_.size() ? rows_[index].steps : 0; }
int LaunchPanel::pointCount(int index) const {
  return index >= 0 && index < rows_.size() ? static_cast<int>(rows_[index].loss.size()) : 0;
}

int LaunchPanel::overallPercent() const {
  if (rows_.isEmpty()) return -1;
  double sum = 0;
  bool any = false;
  for (const auto& r : rows_) {
    if (r.done) {
      sum += 1;
      any = true;
    } else if (r.steps > 0) {
      sum += static_cast<double>(r.step) / r.steps;
      any = true;
    }
  }
  return any ? static_cast<int>(100.0 * sum / static_cast<double>(rows_.size())) : -1;
}

QString LaunchPanel::currentText() const {
  if (current_ < 0 || current_ >= rows_.size()) return tr("starting");
  const Row& r = rows_[current_];
  const QString of = tr("%1 of %2").arg(current_ + 1).arg(rows_.size());
  if (r.steps > 0) return tr("%1: step %2 of %3 (%4)").arg(r.name).arg(r.step).arg(r.steps).arg(of);
  return tr("%1: starting (%2)").arg(r.name, of);
}

void LaunchPanel::replot() {
  for (auto* plot : {loss_, stepTime_}) {
    plot->clearGraphs();
    for (int i = 0; i < rows_.size(); ++i) {
      const Row& r = rows_[i];
      auto* g = plot->addGraph();
      g->setName(r.name);
      QPen pen(charts::seriesColor(i));
      pen.setWidthF(1.6);
      g->setPen(pen);
      g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, 4));
      g->setData(r.x, plot == loss_ ? r.loss : r.ms, true);
    }
    plot->rescaleAxes();
    if (plot == stepTime_ && plot->yAxis->range().lower > 0) plot->yAxis->setRangeLower(0);
    plot->xAxis->setRangeLower(0);
    plot->replot(QCustomPlot::rpQueuedReplot);
  }
}

}  // namespace shardscope::ui
