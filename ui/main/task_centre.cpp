#include "ui/main/task_centre.h"

#include <QDateTime>
#include <QHBoxLayout>
#include <QLabel>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QVBoxLayout>

#include <algorithm>

#include "ui/session/task_runner.h"

namespace shardscope::ui {

namespace {
constexpr int kRunnerPriority = 50;
}

TaskCentre::TaskCentre(QWidget* parent) : QWidget(parent) {
  auto* dl = new QVBoxLayout(this);
  dl->setContentsMargins(4, 2, 4, 4);
  auto* row = new QHBoxLayout;
  label_ = new QLabel(tr("Ready"), this);
  label_->setMinimumWidth(200);
  bar_ = new QProgressBar(this);
  bar_->setObjectName(QStringLiteral("taskProgress"));
  bar_->setMaximumHeight(18);
  cancel_ = new QPushButton(tr("Cancel"), this);
  cancel_->setObjectName(QStringLiteral("taskCancel"));
  connect(cancel_, &QPushButton::clicked, this, [this] {
    if (!shownKey_.isEmpty()) Q_EMIT cancelRequested(shownKey_);
  });
  row->addWidget(label_, 1);
  row->addWidget(bar_, 2);
  row->addWidget(cancel_);
  dl->addLayout(row);
  log_ = new QPlainTextEdit(this);
  log_->setObjectName(QStringLiteral("logView"));
  log_->setReadOnly(true);
  log_->setAcceptDrops(false);
  log_->setMaximumBlockCount(5000);
  log_->setPlaceholderText(tr("Messages, import output and errors appear here."));
  dl->addWidget(log_, 1);
  refresh();
}

void TaskCentre::setRunner(TaskRunner* runner) {
  if (runner_) runner_->disconnect(this);
  runner_ = runner;
  if (runner_) connect(runner_, &TaskRunner::changed, this, &TaskCentre::refresh);
  refresh();
}

void TaskCentre::setPreferredSlot(const QString& slot) {
  preferred_ = slot;
  refresh();
}

void TaskCentre::setSlotRule(const QString& prefix, int priority, bool cancellable) {
  slotRules_[prefix] = {priority, cancellable};
  refresh();
}

void TaskCentre::setActivity(const QString& key, const QString& label, int percent, bool cancellable, int priority) {
  activities_[key] = Activity{label, percent, cancellable, priority};
  refresh();
}

void TaskCentre::clearActivity(const QString& key) {
  if (activities_.erase(key)) refresh();
}

void TaskCentre::setIdleFull(bool full) {
  idleFull_ = full;
  refresh();
}

QString TaskCentre::shownLabel() const { return label_->text(); }

void TaskCentre::log(const QString& text, bool error) {
  const QString time = QDateTime::currentDateTime().toString(QStringLiteral("HH:mm:ss"));
  const QString escaped = text.toHtmlEscaped();
  if (error)
    log_->appendHtml(
        QStringLiteral("<span style='color:gray'>%1</span> <span style='color:#c62828'>%2</span>").arg(time, escaped));
  else
    log_->appendHtml(QStringLiteral("<span style='color:gray'>%1</span> %2").arg(time, escaped));
}

void TaskCentre::refresh() {
  struct Candidate {
    QString key, label;
    int percent = -1;
    bool cancellable = false;
    int priority = 0;
  };
  std::vector<Candidate> all;
  for (const auto& [key, a] : activities_) all.push_back({key, a.label, a.percent, a.cancellable, a.priority});
  if (runner_) {
    for (const auto& t : runner_->tasks()) {
      QString label = t.label;
      if (!t.stage.isEmpty()) label += QStringLiteral(": ") + t.stage;
      int priority = kRunnerPriority + (t.slot == preferred_ || t.slot.startsWith(preferred_ + QLatin1Char('.')) ? 1 : 0);
      bool cancellable = true;
      for (const auto& [prefix, rule] : slotRules_)
        if (t.slot == prefix || (prefix.endsWith(QLatin1Char('.')) && t.slot.startsWith(prefix))) {
          priority = rule.first;
          cancellable = rule.second;
        }
      all.push_back({QStringLiteral("task:") + t.slot, label, t.percent, cancellable, priority});
    }
  }
  const auto best =
      std::max_element(all.begin(), all.end(), [](const Candidate& a, const Candidate& b) { return a.priority < b.priority; });
  if (best == all.end()) {
    shownKey_.clear();
    label_->setText(tr("Ready"));
    bar_->setRange(0, 100);
    bar_->setValue(idleFull_ ? 100 : 0);
    cancel_->setEnabled(false);
    return;
  }
  shownKey_ = best->key;
  label_->setText(all.size() > 1 ? tr("%1 (and %n more)", nullptr, static_cast<int>(all.size() - 1)).arg(best->label)
                                 : best->label);
  if (best->percent < 0) {
    bar_->setRange(0, 0);
  } else {
    bar_->setRange(0, 100);
    bar_->setValue(std::clamp(best->percent, 0, 100));
  }
  cancel_->setEnabled(best->cancellable);
}

}  // namespace shardscope::ui
