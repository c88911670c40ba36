#pragma once
// File ▸ Merge Databases…: core::mergeDatabases (core/merge/job_merge.h) on a worker thread, so the
// window stays responsive while the per-node databases of a multi-node job become one run. Progress
// and the outcome come back as queued signals; cancel() stops it between chunks, and then nothing of
// the merge is kept (a new output file is removed).
#include <QObject>
#include <QString>
#include <QStringList>

#include <memory>
#include <thread>

#include "core/merge/job_merge.h"
#include "core/util/progress.h"

namespace shardscope::ui {

class MergeTask : public QObject {
  Q_OBJECT

 public:
  explicit MergeTask(QObject* parent = nullptr);
  ~MergeTask() override;  // cancels and joins a running merge

  // False when one is already running.
  bool start(const QStringList& inputs, const QString& out, const core::MergeOptions& options = {});
  bool isRunning() const { return running_; }
  void cancel();
  const core::MergeResult& result() const { return result_; }
  QString output() const { return out_; }

  // One line per job and a count of copied runs: what the log shows.
  static QString summary(const core::MergeResult& r);

 Q_SIGNALS:
  void progress(int percent, const QString& label);
  // ok: merged (result() has what); otherwise `message` says what went wrong, naming the file.
  void finished(bool ok, const QString& message);

 private:
  std::thread thread_;
  std::shared_ptr<core::CancelToken> cancel_;
  core::MergeResult result_;
  QString out_;
  bool running_ = false;
};

}  // namespace shardscope::ui
