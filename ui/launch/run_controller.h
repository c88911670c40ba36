#pragma once
// Runs a strategy comparison the way a user would: `shardscope-cli compare --db DB --progress json
// --config FILE --strategies a,b` as a child process (the GUI never links LibTorch), without ever
// blocking the GUI thread. The configuration travels as the run-config JSON (core::toJson, in a
// temporary file removed when the CLI ends), never re-spelled as flags. The CLI answers in the
// JSON-lines protocol of app/cli/protocol.h (docs/ARCHITECTURE.md), one event per stdout line:
//   {"event":"run","run_id":7,"strategy":"ddp","status":"running"}   -> that strategy started
//   {"event":"progress","strategy":"ddp","run_id":7,"done":3,"total":20,"loss":5.1,"step_ms":250.2,...}
//   {"event":"run","run_id":7,"strategy":"ddp","status":"completed"} -> its run is complete
//   {"event":"error","message":"...","key":"world_size"}              -> why it failed (the key when named)
//   {"event":"done","run_ids":[7,8],"exit":0}
// Its stderr (summaries, the ranks' messages) is passed on as log lines. It reports per strategy its
// progress (rank 0's step of steps), the loss and step time of each step, the run id, and at the end
// finished / failed (exit code and the error event's message) / cancelled. cancel() sends SIGTERM to
// the CLI, which stops every rank and stores the run as cancelled (exit 130); if it is still running
// after the grace period (10 s) the CLI and the worker processes it started are killed.
#include <QElapsedTimer>
#include <QList>
#include <QObject>
#include <QProcess>
#include <QString>
#include <QStringList>
#include <QVector>

#include <memory>

#include "core/config/run_config.h"

class QTemporaryFile;
class QTimer;

namespace shardscope::ui {

class RunController : public QObject {
  Q_OBJECT

 public:
  enum class Status { Queued, Running, Done, Failed, Cancelled, NotRun };
  struct StrategyState {
    QString name;
    Status status = Status::Queued;
    int step = 0;   // rank 0's last reported step
    int steps = 0;  // of this many
    qint64 runId = 0;
    QVector<int> stepNumbers;  // per reported step (rank 0)
    QVector<double> loss;
    QVector<double> stepMs;
  };

  explicit RunController(QObject* parent = nullptr);
  // A comparison still running is cancelled (SIGTERM, then kill after the grace period): this blocks
  // at most the grace period, so ask the user before closing the window while isRunning().
  ~RunController() override;

  // $SHARDSCOPE_CLI, else shardscope-cli beside the application's executable, else on PATH; empty when
  // none is found.
  static QString locateCli();
  void setCliPath(const QString& path) { cli_ = path; }
  QString cliPath() const { return cli_.isEmpty() ? locateCli() : cli_; }
  void setKillGraceMs(int ms) { graceMs_ = ms; }

  // Starts `compare --db dbPath --progress json --config FILE --strategies S,...`: `base` (every knob
  // but the strategy) as JSON, the strategies in order (core's names or aliases). False when a
  // comparison is already running, no strategy is given or the CLI cannot be found / started
  // (failed() is emitted for the latter two). `name` prefixes the run names (--name); `repeats` runs
  // each configuration that many times, interleaved (--repeats): strategies() lists every run.
  bool start(const QString& dbPath, const core::RunConfig& base, const QStringList& strategies, const QString& name = {},
             int repeats = 1);
  // SIGTERM to the CLI (it stops its ranks); kill after the grace period. No effect when idle.
  void cancel();

  bool isRunning() const { return process_ != nullptr; }
  bool isCancelling() const { return cancelling_; }
  qint64 processId() const;  // the CLI's pid (0 when idle)
  QString databasePath() const { return db_; }
  QStringList arguments() const { return args_; }  // the full argument list of the last start
  const QList<StrategyState>& strategies() const { return strategies_; }
  int currentStrategy() const { return current_; }  // -1 before the first starts
  QList<qint64> runIds() const;                     // runs of the last comparison, in order
  int exitCode() const { return exitCode_; }
  QString lastError() const { return lastError_; }
  // The run-config key the CLI's error event named ("world_size"), empty when none.
  QString errorKey() const { return errorKey_; }
  qint64 elapsedMs() const { return clock_.isValid() ? clock_.elapsed() : 0; }

 Q_SIGNALS:
  void started(const QStringList& strategies);
  void runningChanged(bool running);
  void strategyStarted(int index, const QString& name);
  // Rank 0 finished `step` of `steps`; loss and step time of that step.
  void stepProgress(int index, const QString& strategy, int step, int steps, double loss, double stepMs);
  void strategyFinished(int index, const QString& name, qint64 runId);
  // Every other line of the CLI (its summaries, the ranks' messages, errors) for a log view.
  void logLine(const QString& line, bool isError);
  void finished(int exitCode);                          // every strategy completed (exit 0)
  void failed(int exitCode, const QString& lastError);  // a run failed, bad arguments, CLI not found (-1)
  void cancelled(int exitCode);                         // cancel() (exit 130, or killed)
  void ended();                                         // after any of the three

 private:
  void readOut();
  void readErr();
  void handleOutLine(const QString& line);
  int strategyIndex(const QString& name, qint64 runId) const;
  void handleErrLine(const QString& line);
  void processEnded(int code, QProcess::ExitStatus status);
  void killTree();
  void finish();

  QProcess* process_ = nullptr;
  QTimer* killTimer_ = nullptr;
  QString cli_;
  QString db_;
  QStringList args_;
  QByteArray outBuf_, errBuf_;
  QList<StrategyState> strategies_;
  int current_ = -1;
  bool cancelling_ = false;
  bool killed_ = false;
  int graceMs_ = 10000;
  int exitCode_ = 0;
  QString lastError_, lastErrLine_, lastStderr_, errorEvent_, errorKey_;
  std::unique_ptr<QTemporaryFile> configFile_;
  qint64 pid_ = 0;
  QElapsedTimer clock_;
};

}  // namespace shardscope::ui
