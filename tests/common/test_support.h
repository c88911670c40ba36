#pragma once
// Helpers shared by the test suites: scratch directories, the shared development traces, writing
// small fixture files.
#include <QString>
#include <QTemporaryDir>

#include <optional>
#include <string>

namespace shardscope::test {

// ../shared/traces beside the repository (or $SHARDSCOPE_SHARED_TRACES); nullopt when absent, so
// tests can QSKIP cleanly.
std::optional<std::string> sharedTracesDir();

// Writes bytes to dir/name and returns the full path.
std::string writeFile(const QTemporaryDir& dir, const std::string& name, const std::string& bytes);
// Writes bytes gzip-compressed.
std::string writeGzip(const QTemporaryDir& dir, const std::string& name, const std::string& bytes);

std::string pathIn(const QTemporaryDir& dir, const std::string& name);

}  // namespace shardscope::test
