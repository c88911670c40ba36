#pragma once
// Runs the real shardscope-cli (SHARDSCOPE_CLI, defined for every tests/app target) and collects its
// exit code and output: the CLI tests' one way to call it.
#include <QProcess>
#include <QProcessEnvironment>
#include <QString>
#include <QStringList>

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

}  // namespace shardscope::test
