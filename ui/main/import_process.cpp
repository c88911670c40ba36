#include "ui/main/import_process.h"

#include <QCoreApplication>
#include <QDir>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>
#include <QStandardPaths>
#include <QTimer>

namespace shardscope::ui {

QString findShardscopeCli() {
  const QString env = qEnvironmentVariable("SHARDSCOPE_CLI");
  if (!env.isEmpty() && QFileInfo(env).isExecutable()) return env;
  const QString beside = QDir(QCoreApplication::applicationDirPath()).filePath(QStringLiteral("shardscope-cli"));
  if (QFileInfo(beside).isExecutable()) return beside;
  return QStandardPaths::findExecutable(QStringLiteral("shardscope-cli"));
}

ImportProcess::ImportProcess(QObject* parent) : QObject(parent) {
  killTimer_ = new QTimer(this);
  killTimer_->setSingleShot(true);
  connect(killTimer_, &QTimer::timeout, this, [this] {
    if (process_ && process_->state() != QProcess::NotRunning) process_->kill();
  });
}

ImportProcess::~ImportProcess() {
  if (process_ && process_->state() != QProcess::NotRunning) {
    // Never leave an orphan writing into the database: stop it and wait (it rolls back).
    process_->disconnect(this);
    process_->terminate();
    if (!process_->waitForFinished(killGraceMs_)) {
      process_->kill();
      process_->waitForFinished(2000);
    }
  }
}

bool ImportProcess::isRunning() const { return !done_; }

bool ImportProcess::start(const QString& cli, const QString& dbPath, const QStringList& paths, QString* error) {
  auto fail = [&](const QString& m) {
    if (error) *error = m;
    return false;
  };
  if (isRunning()) return fail(tr("An import is already running"));
  if (cli.isEmpty() || !QFileInfo(cli).isExecutable())
    return fail(tr("shardscope-cli was not found (beside the app, on PATH, or $SHARDSCOPE_CLI)"));
  if (dbPath.isEmpty()) return fail(tr("Open or create a database first"));
  if (paths.isEmpty()) return fail(tr("No trace file to import"));
  if (process_) process_->deleteLater();
  process_ = new QProcess(this);
  process_->setProgram(cli);
  QStringList args = {QStringLiteral("import"),     QStringLiteral("--db"), dbPath,
                      QStringLiteral("--progress"), QStringLiteral("json"), QStringLiteral("--")};
  args += paths;
  process_->setArguments(args);
  auto env = QProcessEnvironment::systemEnvironment();
  env.insert(QStringLiteral("SHARDSCOPE_NO_PROGRESS"), QStringLiteral("1"));
  process_->setProcessEnvironment(env);
  connect(process_, &QProcess::readyReadStandardOutput, this, [this] { readChannel(QProcess::StandardOutput); });
  connect(process_, &QProcess::readyReadStandardError, this, [this] { readChannel(QProcess::StandardError); });
  connect(process_, &QProcess::finished, this, &ImportProcess::onFinished);
  connect(process_, &QProcess::errorOccurred, this, &ImportProcess::onError);
  dbPath_ = dbPath;
  paths_ = paths;
  outBuffer_.clear();
  errBuffer_.clear();
  lastInfo_.clear();
  lastError_.clear();
  errorEvent_.clear();
  runIds_.clear();
  cancelled_ = false;
  done_ = false;
  process_->start();
  return true;
}

void ImportProcess::cancel() {
  if (!isRunning() || !process_) return;
  cancelled_ = true;
  process_->terminate();  // SIGTERM: the CLI cancels cleanly (exit 130) and rolls back
  killTimer_->start(killGraceMs_);
}

void ImportProcess::readChannel(QProcess::ProcessChannel channel) {
  if (!process_) return;
  const bool isError = channel == QProcess::StandardError;
  const QByteArray bytes = isError ? process_->readAllStandardError() : process_->readAllStandardOutput();
  QString& buffer = isError ? errBuffer_ : outBuffer_;
  buffer += QString::fromUtf8(bytes);
  flushLine(buffer, isError, false);
}

void ImportProcess::flushLine(QString& buffer, bool isError, bool all) {
  for (;;) {
    qsizetype nl = buffer.indexOf(QLatin1Char('\n'));
    // A terminal progress bar redraws with '\r'; keep only what follows the last one.
    if (nl < 0 && !(all && !buffer.isEmpty())) break;
    QString line = nl < 0 ? buffer : buffer.left(nl);
    buffer = nl < 0 ? QString() : buffer.mid(nl + 1);
    const qsizetype cr = line.lastIndexOf(QLatin1Char('\r'));
    if (cr >= 0) line = line.mid(cr + 1);
    line = line.trimmed();
    if (line.isEmpty()) continue;
    if (!isError) {  // stdout: the protocol's events
      handleEvent(line);
      continue;
    }
    if (line.startsWith(QLatin1String("warning: "))) continue;  // its warning event says it
    if (line.startsWith(QLatin1String("error")))
      lastError_ = line;
    else
      lastInfo_ = line;
    Q_EMIT output(line, isError);
  }
}

void ImportProcess::handleEvent(const QString& line) {
  const QJsonDocument doc = QJsonDocument::fromJson(line.toUtf8());
  if (!doc.isObject()) {  // not an event: pass it on
    Q_EMIT output(line, false);
    return;
  }
  const QJsonObject o = doc.object();
  const QString event = o.value(QLatin1String("event")).toString();
  if (event == QLatin1String("progress")) {
    Q_EMIT progress(static_cast<qint64>(o.value(QLatin1String("done")).toDouble()),
                    static_cast<qint64>(o.value(QLatin1String("total")).toDouble()), o.value(QLatin1String("label")).toString());
  } else if (event == QLatin1String("run")) {
    const auto id = static_cast<qint64>(o.value(QLatin1String("run_id")).toDouble());
    if (id > 0 && !runIds_.contains(id)) runIds_ << id;
  } else if (event == QLatin1String("warning")) {
    Q_EMIT output(QStringLiteral("warning: ") + o.value(QLatin1String("message")).toString(), true);
  } else if (event == QLatin1String("error")) {
    errorEvent_ = o.value(QLatin1String("message")).toString();
  }
}

void ImportProcess::onFinished(int exitCode, QProcess::ExitStatus status) {
  if (done_) return;
  killTimer_->stop();
  readChannel(QProcess::StandardOutput);
  readChannel(QProcess::StandardError);
  flushLine(outBuffer_, false, true);
  flushLine(errBuffer_, true, true);
  done_ = true;
  const bool ok = status == QProcess::NormalExit && exitCode == 0;
  const bool cancelled = !ok && (cancelled_ || exitCode == 130);
  QString message;
  if (ok) {
    message = lastInfo_.isEmpty() ? tr("import done") : lastInfo_;
  } else if (cancelled) {
    message = tr("Import cancelled: nothing of it was kept");
  } else if (status != QProcess::NormalExit) {
    message = tr("The import process crashed%1").arg(lastError_.isEmpty() ? QString() : QStringLiteral(": ") + lastError_);
  } else {
    message = !errorEvent_.isEmpty() ? QStringLiteral("error: ") + errorEvent_
                                     : (lastError_.isEmpty() ? tr("The import failed (exit code %1)").arg(exitCode) : lastError_);
  }
  Q_EMIT finished(ok, cancelled, message, ok ? runIds_ : QList<qint64>{});
}

void ImportProcess::onError(QProcess::ProcessError error) {
  if (error != QProcess::FailedToStart || done_) return;  // the others end in finished()
  done_ = true;
  killTimer_->stop();
  Q_EMIT finished(false, false, tr("Could not start %1: %2").arg(process_->program(), process_->errorString()), {});
}

}  // namespace shardscope::ui
