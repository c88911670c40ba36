#include "tests/common/test_support.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace shardscope::test {

std::optional<std::string> sharedTracesDir() {
  namespace fs = std::filesystem;
  if (const char* env = std::getenv("SHARDSCOPE_SHARED_TRACES")) {
    if (fs::is_directory(env)) return std::string(env);
    return std::nullopt;
  }
  // The committed fixtures (tests/data/traces), unpacked by the build: what CI reads.
  std::error_code ec;
  if (fs::is_directory(SHARDSCOPE_TEST_TRACES_DIR, ec)) return std::string(SHARDSCOPE_TEST_TRACES_DIR);
  const fs::path p = fs::path(SHARDSCOPE_SOURCE_DIR) / ".." / "shared" / "traces";
  if (fs::is_directory(p, ec)) return fs::canonical(p, ec).string();
  return std::nullopt;
}

std::string pathIn(const QTemporaryDir& dir, const std::string& name) {
  return (std::filesystem::path(dir.path().toStdString()) / name).string();
}

std::string writeFile(const QTemporaryDir& dir, const std::string& name, const std::string& bytes) {
  const std::string path = pathIn(dir, name);
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
  return path;
}

std::string writeGzip(const QTemporaryDir& dir, const std::string& name, const std::string& bytes) {
  const std::string path = pathIn(dir, name);
  gzFile f = gzopen(path.c_str(), "wb6");
  if (!f) throw std::runtime_error("cannot write " + path);
  if (!bytes.empty()) gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
  return path;
}

bool otherProcessSeesSharedLock(const std::string& path) {
  constexpr off_t kSharedFirst = 0x40000000 + 2;  // os_unix.c SHARED_FIRST / SHARED_SIZE
  constexpr off_t kSharedSize = 510;
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) _exit(3);
    struct flock fl {};
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    fl.l_start = kSharedFirst;
    fl.l_len = kSharedSize;
    if (fcntl(fd, F_GETLK, &fl) != 0) _exit(4);
    _exit(fl.l_type == F_UNLCK ? 1 : 0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace shardscope::test
