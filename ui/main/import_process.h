#pragma once
// Importing traces from the GUI: runs `shardscope-cli import --db DB --progress json FILES...` as a
// child process (the import's threads and its SQLite transaction live there, never on the GUI
// thread). It reads the CLI's JSON-lines protocol on stdout (app/cli/protocol.h, docs/ARCHITECTURE.md):
// progress events, one run event per run created (the run ids come from there), warnings, an error
// event naming the file; the CLI's human output (stderr) is forwarded line by line. Cancel sends
// SIGTERM: the CLI stops and rolls the import back (nothing of it is kept), SIGKILL follows after a
// grace period.
#include <QList>
#include <QObject>
#include <QProcess>
#include <QString>
#include <QStringList>

class QTimer;

namespace shardscope::ui {

// Where shardscope-cli is: $SHARDSCOPE_CLI, beside this executable, then PATH. Empty if not found.
QString findShardscopeCli();

class ImportProcess : public QObject {
  Q_OBJECT

 public:
  explicit ImportProcess(QObject* parent = nullptr);
  ~ImportProcess() override;

  // Starts the import; false (with *error) when it cannot start (no CLI, already running).
  bool start(const QString& cli, const QString& dbPath, const QStringList& paths, QString* error);
  bool isRunning() const;
  void cancel();
  QString dbPath() const { return dbPath_; }
  QStringList paths() const { return paths_; }
  int killGraceMs() const { return killGraceMs_; }
  void setKillGraceMs(int ms) { killGraceMs_ = ms; }

  // The runs the import created so far (its run events), in order.
  QList<qint64> runIds() const { return runIds_; }

 Q_SIGNALS:
  void output(const QString& line, bool isError);
  // A progress event: `done` of `total` (0: unknown) in `unit` ("bytes").
  void progress(qint64 done, qint64 total, const QString& label);
  // ok: exit 0; cancelled: stopped by cancel() (exit 130 or killed); message: the CLI's last words.
  void finished(bool ok, bool cancelled, const QString& message, const QList<qint64>& runIds);

 private:
  void readChannel(QProcess::ProcessChannel channel);
  void flushLine(QString& buffer, bool isError, bool all);
  void handleEvent(const QString& line);
  void onFinished(int exitCode, QProcess::ExitStatus status);
  void onError(QProcess::ProcessError error);

  QProcess* process_ = nullptr;
  QTimer* killTimer_ = nullptr;
  QString dbPath_;
  QStringList paths_;
  QString outBuffer_;
  QString errBuffer_;
  QString lastInfo_;    // the CLI's last human line ("imported 2 file(s) into run 4 of ...")
  QString lastError_;   // its last "error: ..." line on stderr
  QString errorEvent_;  // the message of its error event
  QList<qint64> runIds_;
  bool cancelled_ = false;
  bool done_ = true;
  int killGraceMs_ = 5000;
};

}  // namespace shardscope::ui
