#include "ui/launch/run_controller.h"

#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>
#include <QStandardPaths>
#include <QTemporaryFile>
#include <QTimer>

#include <algorithm>
#include <csignal>

#ifdef Q_OS_LINUX
#include <sys/types.h>
#include <unistd.h>
#endif

#include "core/config/run_config.h"

namespace shardscope::ui {

namespace {

const QString kCliName = QStringLiteral("shardscope-cli");

bool isExecutable(const QString& path) {
  const QFileInfo fi(path);
  return fi.exists() && fi.isFile() && fi.isExecutable();
}

QString qs(std::string_view v) { return QString::fromUtf8(v.data(), static_cast<qsizetype>(v.size())); }

#ifdef Q_OS_LINUX
// (pid, pgid) of the direct children of `parent`, from /proc.
QList<QPair<pid_t, pid_t>> childrenOf(pid_t parent) {
  QList<QPair<pid_t, pid_t>> out;
  const QStringList entries = QDir(QStringLiteral("/proc")).entryList(QDir::Dirs | QDir::NoDotAndDotDot);
  for (const QString& e : entries) {
    bool ok = false;
    const pid_t pid = static_cast<pid_t>(e.toInt(&ok));
    if (!ok) continue;
    QFile f(QStringLiteral("/proc/%1/stat").arg(pid));
    if (!f.open(QIODevice::ReadOnly)) continue;
    const QByteArray stat = f.readAll();
    const qsizetype close = stat.lastIndexOf(')');
    if (close < 0) continue;
    const QList<QByteArray> fields = stat.mid(close + 2).split(' ');  // state ppid pgrp ...
    if (fields.size() < 3) continue;
    if (static_cast<pid_t>(fields[1].toInt()) == parent) out.append({pid, static_cast<pid_t>(fields[2].toInt())});
  }
  return out;
}
#endif

}  // namespace

RunController::RunController(QObject* parent) : QObject(parent) {
  killTimer_ = new QTimer(this);
  killTimer_->setSingleShot(true);
  connect(killTimer_, &QTimer::timeout, this, [this] {
    if (!process_) return;
    Q_EMIT logLine(tr("shardscope-cli did not stop within %1 s: killing it and its ranks").arg(graceMs_ / 1000.0), true);
    killTree();
  });
}

RunController::~RunController() {
  if (!process_) return;
  // Stop the comparison for real: the CLI stops its ranks on SIGTERM; kill whatever is left after that.
  process_->disconnect(this);
  process_->terminate();
  if (!process_->waitForFinished(graceMs_)) {
    killTree();
    process_->waitForFinished(2000);
  }
}

QString RunController::locateCli() {
  const QString env = qEnvironmentVariable("SHARDSCOPE_CLI");
  if (!env.isEmpty()) return env;
  if (QCoreApplication::instance()) {
    const QString dir = QCoreApplication::applicationDirPath();
    for (const QString& p : {dir + QLatin1Char('/') + kCliName, dir + QStringLiteral("/../app/") + kCliName,
                             dir + QStringLiteral("/../bin/") + kCliName})
      if (isExecutable(p)) return QDir::cleanPath(p);
  }
  return QStandardPaths::findExecutable(kCliName);
}

qint64 RunController::processId() const { return process_ ? process_->processId() : 0; }

QList<qint64> RunController::runIds() const {
  QList<qint64> out;
  for (const auto& s : strategies_)
    if (s.runId) out << s.runId;
  return out;
}

bool RunController::start(const QString& dbPath, const core::RunConfig& base, const QStringList& strategies, const QString& name,
                          int repeats) {
  if (process_) return false;
  db_ = dbPath;
  strategies_.clear();
  QStringList names;
  for (const QString& item : strategies) {
    const auto st = core::strategyFromString(item.trimmed().toStdString());
    names << (st ? qs(core::toString(*st)) : item.trimmed());  // as compare names it ("fsdp_full" -> "fsdp")
  }
  repeats = std::max(1, repeats);
  for (int r = 0; r < repeats; ++r)  // compare runs the repeats interleaved: A B C A B C
    for (const QString& n : names) {
      StrategyState s;
      s.name = n;
      strategies_ << s;
    }
  current_ = -1;
  cancelling_ = false;
  killed_ = false;
  exitCode_ = 0;
  lastError_.clear();
  lastErrLine_.clear();
  lastStderr_.clear();
  errorEvent_.clear();
  errorKey_.clear();
  outBuf_.clear();
  errBuf_.clear();
  args_.clear();
  auto refuse = [this](const QString& why) {
    exitCode_ = -1;
    lastError_ = why;
    Q_EMIT logLine(lastError_, true);
    Q_EMIT failed(exitCode_, lastError_);
    Q_EMIT ended();
    return false;
  };
  if (strategies_.isEmpty()) return refuse(tr("No strategy to run"));
  // The configuration as our run-config JSON: the CLI reads exactly what the dialog holds.
  configFile_ = std::make_unique<QTemporaryFile>(QDir::tempPath() + QStringLiteral("/shardscope-launch-XXXXXX.json"));
  if (!configFile_->open()) return refuse(tr("cannot write the run configuration to %1").arg(QDir::tempPath()));
  configFile_->write(QByteArray::fromStdString(core::toJson(base).dump()));
  configFile_->close();
  args_ = QStringList{QStringLiteral("compare"),    QStringLiteral("--db"),         dbPath,
                      QStringLiteral("--progress"), QStringLiteral("json"),         QStringLiteral("--config"),
                      configFile_->fileName(),      QStringLiteral("--strategies"), names.join(QLatin1Char(','))};
  if (!name.trimmed().isEmpty()) args_ << QStringLiteral("--name") << name.trimmed();
  if (repeats > 1) args_ << QStringLiteral("--repeats") << QString::number(repeats);
  const QString cli = cliPath();
  if (cli.isEmpty() || !isExecutable(cli))
    return refuse(cli.isEmpty() ? tr("shardscope-cli was not found (beside the application, $SHARDSCOPE_CLI or PATH)")
                                : tr("shardscope-cli is not an executable file: %1").arg(cli));
  process_ = new QProcess(this);
  process_->setProgram(cli);
  process_->setArguments(args_);
  process_->setStandardInputFile(QProcess::nullDevice());
  connect(process_, &QProcess::readyReadStandardOutput, this, &RunController::readOut);
  connect(process_, &QProcess::readyReadStandardError, this, &RunController::readErr);
  connect(process_, &QProcess::finished, this, &RunController::processEnded);
  connect(process_, &QProcess::errorOccurred, this, [this](QProcess::ProcessError e) {
    if (e != QProcess::FailedToStart || !process_) return;
    exitCode_ = -1;
    lastError_ = tr("cannot start %1: %2").arg(process_->program(), process_->errorString());
    QMetaObject::invokeMethod(
        this, [this] { finish(); }, Qt::QueuedConnection);
  });
  clock_.start();
  process_->start();
  pid_ = process_->processId();
  Q_EMIT logLine(QStringLiteral("$ %1 %2").arg(cli, args_.join(QLatin1Char(' '))), false);
  Q_EMIT runningChanged(true);
  Q_EMIT started(names);
  return true;
}

void RunController::cancel() {
  if (!process_ || cancelling_) return;
  cancelling_ = true;
  Q_EMIT logLine(tr("Cancelling: asking shardscope-cli to stop its ranks…"), false);
  process_->terminate();  // SIGTERM: the CLI cancels like Ctrl-C and stores the run as cancelled
  killTimer_->start(graceMs_);
}

void RunController::killTree() {
  if (!process_) return;
  killed_ = true;
#ifdef Q_OS_LINUX
  const pid_t cli = static_cast<pid_t>(process_->processId());
  if (cli > 0) {
    const pid_t self = getpgrp();
    // The launcher starts each rank in its own process group: kill those groups, then the CLI.
    for (const auto& [pid, pgid] : childrenOf(cli)) {
      if (pgid > 0 && pgid != self) ::kill(-pgid, SIGKILL);
      ::kill(pid, SIGKILL);
    }
  }
#endif
  process_->kill();
}

void RunController::readOut() {
  if (!process_) return;
  outBuf_ += process_->readAllStandardOutput();
  qsizetype nl;
  while ((nl = outBuf_.indexOf('\n')) >= 0) {
    const QString line = QString::fromUtf8(outBuf_.left(nl)).trimmed();
    outBuf_.remove(0, nl + 1);
    if (!line.isEmpty()) handleOutLine(line);
  }
}

void RunController::readErr() {
  if (!process_) return;
  errBuf_ += process_->readAllStandardError();
  qsizetype nl;
  while ((nl = errBuf_.indexOf('\n')) >= 0) {
    // The terminal progress bar is not drawn into a pipe, but be safe with carriage returns.
    QByteArray raw = errBuf_.left(nl);
    errBuf_.remove(0, nl + 1);
    if (const qsizetype cr = raw.lastIndexOf('\r'); cr >= 0) raw = raw.mid(cr + 1);
    const QString line = QString::fromUtf8(raw).trimmed();
    if (!line.isEmpty()) handleErrLine(line);
  }
}

int RunController::strategyIndex(const QString& name, qint64 runId) const {
  if (runId > 0)
    for (int i = 0; i < strategies_.size(); ++i)
      if (strategies_[i].runId == runId) return i;
  // The first strategy of that name not started yet (the same strategy may be listed twice).
  for (int i = std::max(0, current_); i < strategies_.size(); ++i)
    if (strategies_[i].name == name && strategies_[i].status == Status::Queued) return i;
  return -1;
}

void RunController::handleOutLine(const QString& line) {
  const QJsonDocument doc = QJsonDocument::fromJson(line.toUtf8());
  if (!doc.isObject()) {  // not an event: pass it on
    Q_EMIT logLine(line, false);
    return;
  }
  const QJsonObject o = doc.object();
  const QString event = o.value(QLatin1String("event")).toString();
  const qint64 runId = static_cast<qint64>(o.value(QLatin1String("run_id")).toDouble());
  const QString strategy = o.value(QLatin1String("strategy")).toString();
  if (event == QLatin1String("run")) {
    const QString status = o.value(QLatin1String("status")).toString();
    const int i = strategyIndex(strategy, runId);
    if (i < 0) return;
    StrategyState& s = strategies_[i];
    s.runId = runId;
    if (status == QLatin1String("running")) {
      current_ = i;
      s.status = Status::Running;
      Q_EMIT strategyStarted(i, s.name);
    } else if (status == QLatin1String("completed")) {
      current_ = i;
      s.status = Status::Done;
      if (s.steps > 0) s.step = s.steps;
      Q_EMIT strategyFinished(i, s.name, s.runId);
    } else if (status == QLatin1String("failed")) {
      s.status = Status::Failed;
    } else if (status == QLatin1String("cancelled")) {
      s.status = Status::Cancelled;
    }
  } else if (event == QLatin1String("progress")) {
    const int i = strategyIndex(strategy, runId);
    if (i < 0) return;
    StrategyState& s = strategies_[i];
    s.step = o.value(QLatin1String("done")).toInt();
    s.steps = o.value(QLatin1String("total")).toInt();
    const double loss = o.value(QLatin1String("loss")).toDouble(qQNaN());
    const double ms = o.value(QLatin1String("step_ms")).toDouble(qQNaN());
    s.stepNumbers << s.step;
    s.loss << loss;
    s.stepMs << ms;
    Q_EMIT stepProgress(i, s.name, s.step, s.steps, loss, ms);
  } else if (event == QLatin1String("warning")) {
    Q_EMIT logLine(QStringLiteral("warning: ") + o.value(QLatin1String("message")).toString(), false);
  } else if (event == QLatin1String("error")) {
    errorEvent_ = o.value(QLatin1String("message")).toString();
    errorKey_ = o.value(QLatin1String("key")).toString();
  }
  // "done" carries the exit code and the run ids, which the process' end and the run events give.
}

void RunController::handleErrLine(const QString& line) {
  if (line.startsWith(QLatin1String("warning: "))) return;  // its warning event says it
  lastStderr_ = line;
  if (line.startsWith(QLatin1String("error:"))) lastErrLine_ = line;
  Q_EMIT logLine(line, !line.startsWith(QLatin1String("== ")));
}

void RunController::processEnded(int code, QProcess::ExitStatus status) {
  readOut();
  readErr();
  if (!outBuf_.trimmed().isEmpty()) handleOutLine(QString::fromUtf8(outBuf_).trimmed());
  if (!errBuf_.trimmed().isEmpty()) handleErrLine(QString::fromUtf8(errBuf_).trimmed());
  outBuf_.clear();
  errBuf_.clear();
  exitCode_ = status == QProcess::NormalExit ? code : -1;
  finish();
}

void RunController::finish() {
  if (!process_) return;
  killTimer_->stop();
  const bool ok = exitCode_ == 0 && lastError_.isEmpty();
  const bool wasCancelled = !ok && (cancelling_ || exitCode_ == 130) && lastError_.isEmpty();
  for (auto& s : strategies_) {
    if (s.status == Status::Running)
      s.status = ok ? Status::Done : (wasCancelled ? Status::Cancelled : Status::Failed);
    else if (s.status == Status::Queued && !ok)
      s.status = Status::NotRun;
  }
  if (!ok && !wasCancelled && lastError_.isEmpty()) {
    lastError_ = !errorEvent_.isEmpty() ? errorEvent_ : (!lastErrLine_.isEmpty() ? lastErrLine_ : lastStderr_);
    if (lastError_.isEmpty())
      lastError_ = exitCode_ < 0 ? tr("shardscope-cli was killed") : tr("shardscope-cli exited with code %1").arg(exitCode_);
  }
  process_->disconnect(this);
  process_->deleteLater();
  process_ = nullptr;
  configFile_.reset();  // the CLI has read it
  cancelling_ = false;
  Q_EMIT runningChanged(false);
  if (ok) {
    Q_EMIT logLine(tr("Comparison finished in %1 s").arg(static_cast<double>(elapsedMs()) / 1000.0, 0, 'f', 1), false);
    Q_EMIT finished(exitCode_);
  } else if (wasCancelled) {
    Q_EMIT logLine(tr("Comparison cancelled (exit code %1)").arg(exitCode_), false);
    Q_EMIT cancelled(exitCode_);
  } else {
    Q_EMIT failed(exitCode_, lastError_);
  }
  Q_EMIT ended();
}

}  // namespace shardscope::ui
