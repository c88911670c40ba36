#pragma once
// Helpers shared by the test suites: scratch directories, the shared development traces, writing
// small fixture files.
#include <QString>
#include <QTemporaryDir>

#include <optional>
#include <string>

namespace shardscope::test {

// The real traces the tests read: $SHARDSCOPE_SHARED_TRACES when set, else the committed fixtures
// of tests/data/traces as the build unpacked them (build/test-data/traces: the HTA pair, the B200
// trace, the H100 runtime database cut to runs 1, 2 and 4), else ../shared/traces beside the
// repository; nullopt when none is there, so tests can QSKIP cleanly.
std::optional<std::string> sharedTracesDir();

// Writes bytes to dir/name and returns the full path.
std::string writeFile(const QTemporaryDir& dir, const std::string& name, const std::string& bytes);
// Writes bytes gzip-compressed.
std::string writeGzip(const QTemporaryDir& dir, const std::string& name, const std::string& bytes);

std::string pathIn(const QTemporaryDir& dir, const std::string& name);

// Whether another process sees a lock held on the SHARED range of the SQLite database `path` (a WAL
// connection holds it as long as it is open: os_unix.c SHARED_FIRST / SHARED_SIZE). Asked from a
// forked child with fcntl(F_GETLK), as SQLite's peers see it: POSIX locks are per process, so the
// asking process must not be the holder (the child's open guard registry is empty after fork).
bool otherProcessSeesSharedLock(const std::string& path);

}  // namespace shardscope::test
