#pragma once
// Importing traces from the GUI: runs `shardscope-cli import --db DB FILES...` as a child process (the
// import's threads and its SQLite transaction live there, never on the GUI thread), forwards its
// output line by line and reports the runs it created. Cancel sends SIGTERM: the CLI stops and rolls
// the import back (nothing of it is kept), SIGKILL follows after a grace period.
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

  // Parses "imported N file(s) into run(s) 4 5 of ..." (the CLI's last line).
  static QList<qint64> parseRunIds(const QString& output);

 Q_SIGNALS:
  void output(const QString& line, bool isError);
  // ok: exit 0; cancelled: stopped by cancel() (exit 130 or killed); message: the CLI's last words.
  void finished(bool ok, bool cancelled, const QString& message, const QList<qint64>& runIds);

 private:
  void readChannel(QProcess::ProcessChannel channel);
  void flushLine(QString& buffer, bool isError, bool all);
  void onFinished(int exitCode, QProcess::ExitStatus status);
  void onError(QProcess::ProcessError error);

  QProcess* process_ = nullptr;
  QTimer* killTimer_ = nullptr;
  QString dbPath_;
  QStringList paths_;
  QString outBuffer_;
  QString errBuffer_;
  QString allOutput_;
  QString lastError_;
  bool cancelled_ = false;
  bool done_ = true;
  int killGraceMs_ = 5000;
};

}  // namespace shardscope::ui
