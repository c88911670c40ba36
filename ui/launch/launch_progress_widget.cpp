#include "ui/launch/launch_progress_widget.h"

#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QStyle>
#include <QTimer>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

#include "ui/charts/chart_style.h"
#include "ui/charts/qcp.h"
#include "ui/launch/run_controller.h"

namespace shardscope::ui {

namespace {

QString clock(qint64 ms) {
  const qint64 s = ms / 1000;
  return QStringLiteral("%1:%2").arg(s / 60).arg(s % 60, 2, 10, QLatin1Char('0'));
}

QCustomPlot* makePlot(const QString& yLabel) {
  auto* p = new QCustomPlot;
  charts::applyPlotStyle(p);
  p->xAxis->setLabel(QObject::tr("Step"));
  p->yAxis->setLabel(yLabel);
  QSharedPointer<QCPAxisTickerFixed> t(new QCPAxisTickerFixed);
  t->setTickStep(1.0);
  t->setScaleStrategy(QCPAxisTickerFixed::ssMultiples);
  p->xAxis->setTicker(t);
  p->setMinimumHeight(150);
  p->xAxis->setRange(0, 1);
  p->yAxis->setRange(0, 1);
  return p;
}

}  // namespace

LaunchProgressWidget::LaunchProgressWidget(QWidget* parent) : QWidget(parent) {
  auto* v = new QVBoxLayout(this);
  v->setContentsMargins(8, 8, 8, 8);
  v->setSpacing(6);

  auto* head = new QHBoxLayout;
  title_ = new QLabel(tr("Strategy comparison"));
  QFont bold = title_->font();
  bold.setBold(true);
  title_->setFont(bold);
  head->addWidget(title_);
  state_ = new QLabel;
  state_->setStyleSheet(QStringLiteral("color: #57606a;"));
  state_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  head->addWidget(state_, 1);
  cancel_ = new QPushButton(style()->standardIcon(QStyle::SP_MediaStop), tr("Cancel"));
  cancel_->setToolTip(tr("Stop the comparison: the CLI stops every rank; the run is kept as cancelled"));
  head->addWidget(cancel_);
  v->addLayout(head);

  overall_ = new QProgressBar;
  overall_->setRange(0, 1000);
  overall_->setTextVisible(true);
  overall_->setFormat(tr("Overall %p%"));
  v->addWidget(overall_);

  rowsBox_ = new QWidget;
  rowsGrid_ = new QGridLayout(rowsBox_);
  rowsGrid_->setContentsMargins(0, 0, 0, 0);
  rowsGrid_->setHorizontalSpacing(10);
  rowsGrid_->setVerticalSpacing(3);
  rowsGrid_->setColumnStretch(1, 1);
  v->addWidget(rowsBox_);

  auto* plots = new QHBoxLayout;
  lossPlot_ = makePlot(tr("Loss (rank 0)"));
  timePlot_ = makePlot(tr("Step time, rank 0 (ms)"));
  plots->addWidget(lossPlot_, 1);
  plots->addWidget(timePlot_, 1);
  v->addLayout(plots, 1);

  message_ = new QLabel;
  message_->setWordWrap(true);
  message_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  message_->setVisible(false);
  v->addWidget(message_);

  tick_ = new QTimer(this);
  tick_->setInterval(1000);
  connect(tick_, &QTimer::timeout, this, &LaunchProgressWidget::refresh);
  replot_ = new QTimer(this);
  replot_->setSingleShot(true);
  replot_->setInterval(100);
  connect(replot_, &QTimer::timeout, this, [this] {
    for (QCustomPlot* p : {lossPlot_, timePlot_}) {
      p->rescaleAxes(true);
      QCPRange x = p->xAxis->range();
      p->xAxis->setRange(std::min(x.lower, 1.0) - 0.3, std::max(x.upper, 2.0) + 0.3);
      QCPRange y = p->yAxis->range();
      const double pad = std::max(y.size() * 0.08, std::abs(y.upper) * 0.01 + 1e-9);
      p->yAxis->setRange(p == timePlot_ ? 0.0 : y.lower - pad, y.upper + pad);
      p->replot(QCustomPlot::rpQueuedReplot);
    }
  });
  connect(cancel_, &QPushButton::clicked, this, [this] {
    if (controller_) controller_->cancel();
    refresh();
  });
  refresh();
}

QProgressBar* LaunchProgressWidget::strategyBar(int index) const {
  return index >= 0 && index < rows_.size() ? rows_[index].bar : nullptr;
}

QLabel* LaunchProgressWidget::strategyStatus(int index) const {
  return index >= 0 && index < rows_.size() ? rows_[index].status : nullptr;
}

void LaunchProgressWidget::setController(RunController* controller) {
  for (const auto& c : connections_) disconnect(c);
  connections_.clear();
  controller_ = controller;
  rebuild();
  if (!controller) return;
  connections_ << connect(controller, &RunController::started, this, [this] {
    message_->setVisible(false);
    outcome_ = Outcome::None;
    rebuild();
    tick_->start();
  });
  connections_ << connect(controller, &RunController::strategyStarted, this, [this] { refresh(); });
  connections_ << connect(controller, &RunController::stepProgress, this,
                          [this](int index, const QString&, int step, int, double loss, double ms) {
                            addPoint(index, step, loss, ms);
                            refresh();
                          });
  connections_ << connect(controller, &RunController::strategyFinished, this, [this] { refresh(); });
  connections_ << connect(controller, &RunController::runningChanged, this, [this] { refresh(); });
  connections_ << connect(controller, &RunController::finished, this, [this] {
    tick_->stop();
    outcome_ = Outcome::Finished;
    message_->setVisible(false);
    refresh();
  });
  connections_ << connect(controller, &RunController::cancelled, this, [this](int code) {
    tick_->stop();
    outcome_ = Outcome::Cancelled;
    message_->setText(tr("Cancelled (exit code %1). What each rank captured is kept; the run is marked cancelled.").arg(code));
    message_->setStyleSheet(QStringLiteral("color: #57606a;"));
    message_->setVisible(true);
    refresh();
  });
  connections_ << connect(controller, &RunController::failed, this, [this](int code, const QString& error) {
    tick_->stop();
    outcome_ = Outcome::Failed;
    message_->setText(tr("Failed (exit code %1): %2").arg(code).arg(error));
    message_->setStyleSheet(QStringLiteral("color: #c62828;"));
    message_->setVisible(true);
    refresh();
  });
  if (controller->isRunning()) tick_->start();
}

void LaunchProgressWidget::rebuild() {
  for (const Row& r : rows_) {
    delete r.name;
    delete r.bar;
    delete r.status;
  }
  rows_.clear();
  lossPlot_->clearGraphs();
  timePlot_->clearGraphs();
  if (controller_) {
    const auto& states = controller_->strategies();
    for (int i = 0; i < states.size(); ++i) {
      const QColor color = charts::seriesColor(i);
      Row r;
      r.name = new QLabel(
          QStringLiteral("<span style='color:%1'>&#9632;</span> %2").arg(color.name(), states[i].name.toHtmlEscaped()));
      r.bar = new QProgressBar;
      r.bar->setTextVisible(true);
      r.bar->setMaximumHeight(r.bar->fontMetrics().height() + 6);
      r.status = new QLabel;
      r.status->setMinimumWidth(r.status->fontMetrics().horizontalAdvance(QStringLiteral("done · run #0000")));
      rowsGrid_->addWidget(r.name, i, 0);
      rowsGrid_->addWidget(r.bar, i, 1);
      rowsGrid_->addWidget(r.status, i, 2);
      rows_ << r;
      for (QCustomPlot* p : {lossPlot_, timePlot_}) {
        QCPGraph* g = p->addGraph();
        g->setName(states[i].name);
        g->setPen(QPen(color, 2));
        g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, color, Qt::white, 4));
      }
      // Points already reported (the widget attached to a running comparison).
      for (int k = 0; k < states[i].stepNumbers.size(); ++k)
        addPoint(i, states[i].stepNumbers[k], states[i].loss.value(k), states[i].stepMs.value(k));
    }
  }
  replotSoon();
  refresh();
}

void LaunchProgressWidget::addPoint(int index, int step, double loss, double stepMs) {
  if (index < 0 || index >= lossPlot_->graphCount() || index >= timePlot_->graphCount()) return;
  if (std::isfinite(loss)) lossPlot_->graph(index)->addData(step, loss);
  if (std::isfinite(stepMs)) timePlot_->graph(index)->addData(step, stepMs);
  replotSoon();
}

void LaunchProgressWidget::replotSoon() {
  if (!replot_->isActive()) replot_->start();
}

void LaunchProgressWidget::refresh() {
  RunController* c = controller_;
  if (!c || c->strategies().isEmpty()) {
    state_->setText(tr("No comparison has run yet."));
    cancel_->setEnabled(false);
    overall_->setValue(0);
    return;
  }
  using S = RunController::Status;
  const auto& states = c->strategies();
  double done = 0;
  int finished = 0;
  for (int i = 0; i < states.size() && i < rows_.size(); ++i) {
    const auto& s = states[i];
    Row& r = rows_[i];
    r.bar->setRange(0, std::max(1, s.steps));
    r.bar->setValue(s.status == S::Done ? std::max(1, s.steps) : std::min(s.step, std::max(1, s.steps)));
    r.bar->setFormat(s.steps > 0 ? tr("step %1 / %2").arg(s.step).arg(s.steps) : QString());
    QString text;
    QString color = QStringLiteral("#57606a");
    switch (s.status) {
      case S::Queued:
        text = tr("queued");
        break;
      case S::Running:
        text = s.steps ? tr("running") : tr("starting…");
        color = QStringLiteral("#0969da");
        break;
      case S::Done:
        text = s.runId ? tr("done · run #%1").arg(s.runId) : tr("done");
        color = QStringLiteral("#1a7f37");
        ++finished;
        break;
      case S::Failed:
        text = tr("failed");
        color = QStringLiteral("#c62828");
        break;
      case S::Cancelled:
        text = tr("cancelled");
        break;
      case S::NotRun:
        text = tr("not run");
        break;
    }
    r.status->setText(text);
    r.status->setStyleSheet(QStringLiteral("color: %1;").arg(color));
    if (s.status == S::Done)
      done += 1;
    else if (s.steps > 0)
      done += static_cast<double>(s.step) / s.steps;
  }
  overall_->setValue(static_cast<int>(1000.0 * done / static_cast<double>(states.size())));
  const QString elapsed = clock(c->elapsedMs());
  if (c->isRunning()) {
    const int cur = c->currentStrategy();
    if (c->isCancelling())
      state_->setText(tr("Cancelling… stopping the ranks (%1)").arg(elapsed));
    else if (cur >= 0)
      state_->setText(tr("Running %1 (%2 of %3) · %4").arg(states[cur].name).arg(cur + 1).arg(states.size()).arg(elapsed));
    else
      state_->setText(tr("Starting… · %1").arg(elapsed));
  } else if (outcome_ == Outcome::Cancelled) {
    state_->setText(tr("Cancelled after %1").arg(elapsed));
  } else if (outcome_ == Outcome::Failed) {
    state_->setText(tr("Failed after %1").arg(elapsed));
  } else if (finished == states.size()) {
    state_->setText(tr("Finished: %n run(s) in %1", nullptr, finished).arg(elapsed));
  } else {
    state_->setText(tr("Stopped after %1").arg(elapsed));
  }
  cancel_->setEnabled(c->isRunning() && !c->isCancelling());
  cancel_->setText(c->isCancelling() ? tr("Cancelling…") : tr("Cancel"));
}

}  // namespace shardscope::ui
