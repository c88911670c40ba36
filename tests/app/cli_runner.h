#pragma once
// Runs the real shardscope-cli (SHARDSCOPE_CLI, defined for every tests/app target) and collects its
// exit code and output: the CLI tests' one way to call it.
#include <QDir>
#include <QFileInfo>
#include <QProcess>
#include <QProcessEnvironment>
#include <QString>
#include <QStringList>

#include <memory>

namespace shardscope::test {

struct CliResult {
  int code = -1;  // -1: did not finish in time (killed); -2: crashed
  QString out, err;
};

// Progress bars off; `unsetEnv` names variables the CLI must not inherit.
inline CliResult runCli(const QStringList& args, int timeoutMs = 120000, const QStringList& unsetEnv = {}) {
  QProcess p;
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.insert("SHARDSCOPE_NO_PROGRESS", "1");
  for (const QString& v : unsetEnv) env.remove(v);
  p.setProcessEnvironment(env);
  p.start(SHARDSCOPE_CLI, args);
  if (!p.waitForFinished(timeoutMs)) {
    p.kill();
    p.waitForFinished();
    return {};
  }
  return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -2, QString::fromUtf8(p.readAllStandardOutput()),
          QString::fromUtf8(p.readAllStandardError())};
}

// Starts the CLI without waiting (concurrent writers, the app following a database): progress bars
// off, one intra-op thread per process. The caller waits for it.
inline std::unique_ptr<QProcess> startCli(const QStringList& args) {
  auto p = std::make_unique<QProcess>();
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.insert("SHARDSCOPE_NO_PROGRESS", "1");
  env.insert("OMP_NUM_THREADS", "1");
  p->setProcessEnvironment(env);
  p->start(SHARDSCOPE_CLI, args);
  return p;
}

// Whether shardscope-worker was built beside the CLI (it needs LibTorch): tests that launch real
// runs skip without it.
inline bool workerBuilt() { return QFileInfo::exists(QFileInfo(SHARDSCOPE_CLI).dir().filePath("../profiler/shardscope-worker")); }

}  // namespace shardscope::test
