#include "ui/main/merge_task.h"

#include <QMetaObject>
#include <QPointer>

#include <exception>

#include "core/util/error.h"

namespace shardscope::ui {

MergeTask::MergeTask(QObject* parent) : QObject(parent) {}

MergeTask::~MergeTask() {
  if (cancel_) cancel_->cancel();
  if (thread_.joinable()) thread_.join();
}

bool MergeTask::start(const QStringList& inputs, const QString& out, const core::MergeOptions& options) {
  if (running_) return false;
  if (thread_.joinable()) thread_.join();
  running_ = true;
  out_ = out;
  result_ = {};
  cancel_ = std::make_shared<core::CancelToken>();
  std::vector<std::string> in;
  for (const auto& p : inputs) in.push_back(p.toStdString());
  QPointer<MergeTask> self(this);
  thread_ = std::thread([self, in, out = out.toStdString(), options, cancel = cancel_] {
    core::MergeResult r;
    QString error;
    bool ok = false;
    try {
      int lastPct = -1;
      r = core::mergeDatabases(out, in, options, cancel.get(), [&](const core::Progress& p) {
        const int pct = p.total ? static_cast<int>(100.0 * static_cast<double>(p.done) / static_cast<double>(p.total)) : -1;
        if (pct == lastPct) return;
        lastPct = pct;
        QMetaObject::invokeMethod(
            self.data(),
            [self, pct] {
              if (self) Q_EMIT self->progress(pct, tr("Merging databases…"));
            },
            Qt::QueuedConnection);
      });
      ok = true;
    } catch (const core::Cancelled&) {
      error = tr("Merge cancelled: nothing was written");
    } catch (const std::exception& e) {
      error = QString::fromStdString(e.what());
    }
    QMetaObject::invokeMethod(
        self.data(),
        [self, r = std::move(r), ok, error] {
          if (!self) return;
          self->result_ = r;
          self->running_ = false;
          Q_EMIT self->finished(ok, error);
        },
        Qt::QueuedConnection);
  });
  return true;
}

void MergeTask::cancel() {
  if (cancel_) cancel_->cancel();
}

QString MergeTask::summary(const core::MergeResult& r) {
  QStringList lines;
  for (const auto& j : r.jobs) {
    if (j.skipped) {
      lines << tr("Job %1: already merged as run %2").arg(QString::fromStdString(j.jobId)).arg(j.run.value());
      continue;
    }
    QString line =
        tr("Job %1: %2 of %3 node(s), %4 ranks → run %5 (%6)")
            .arg(QString::fromStdString(j.jobId))
            .arg(j.nodes.size())
            .arg(j.nnodes)
            .arg(j.ranks)
            .arg(j.run.value())
            .arg(QString::fromUtf8(core::toString(j.status).data(), static_cast<qsizetype>(core::toString(j.status).size())));
    if (!j.failureReason.empty()) line += QStringLiteral(": ") + QString::fromStdString(j.failureReason);
    lines << line;
  }
  int copied = 0, skipped = 0;
  for (const auto& c : r.copied) (c.skipped ? skipped : copied)++;
  if (copied || skipped) lines << tr("%1 other run(s) copied, %2 already there").arg(copied).arg(skipped);
  lines << tr("%1 events in %2 s").arg(r.events).arg(r.seconds, 0, 'f', 2);
  return lines.join(QLatin1Char('\n'));
}

}  // namespace shardscope::ui
