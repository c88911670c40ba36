// The open guard (open_guard.h): the registry of database files this process holds through SQLite,
// and the process's open(2) family, which refuses to open them.
//
// The functions at the end are defined with C linkage in whatever executable links core/storage
// (Database references this file, so the linker always takes it): the dynamic linker resolves
// open, open64, fopen ... of every shared library (Qt, GLib, a platform theme's file dialog, SQLite)
// to them first. They forward to the C library's (dlsym RTLD_NEXT) unless the file is held.
//
// Neither fortification nor 64-bit file offsets may rename the functions defined here.
#undef _FORTIFY_SOURCE
#undef _FILE_OFFSET_BITS

#include "core/storage/open_guard.h"

#include "core/util/error.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace shardscope::core {
namespace {

// A handful of databases at most are open at once (the app: one; merge: a few); a full table
// refuses to register more and the Database fails to open rather than run unguarded.
constexpr int kSlots = 64;
struct Slot {
  std::uint64_t dev = 0, ino = 0;
  int count = 0;
};

pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
Slot g_slots[kSlots];
Slot g_reported[kSlots];  // files already said on stderr (count unused)
int g_reportedCount = 0;
std::atomic<int> g_heldTotal{0};
std::atomic<std::int64_t> g_refused{0};
std::atomic<int> g_mode{-1};  // -1: read the environment first
char g_lastRefused[512] = {0};
pthread_once_t g_atforkOnce = PTHREAD_ONCE_INIT;

void lock() { pthread_mutex_lock(&g_mu); }
void unlock() { pthread_mutex_unlock(&g_mu); }

// fork(): the child inherits no POSIX lock, so it holds nothing; the mutex is taken around the fork
// so that the child never inherits it locked.
void atforkPrepare() { lock(); }
void atforkParent() { unlock(); }
void atforkChild() {
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  g_mu = fresh;
  for (auto& s : g_slots) s = Slot{};
  g_heldTotal.store(0);
}
void installAtfork() { pthread_atfork(&atforkPrepare, &atforkParent, &atforkChild); }

bool identify(int dirfd, const char* path, std::uint64_t& dev, std::uint64_t& ino) {
  struct stat st {};
  if (!path || fstatat(dirfd, path, &st, 0) != 0) return false;
  dev = static_cast<std::uint64_t>(st.st_dev);
  ino = static_cast<std::uint64_t>(st.st_ino);
  return true;
}

bool isHeldId(std::uint64_t dev, std::uint64_t ino) {
  lock();
  bool held = false;
  for (const auto& s : g_slots)
    if (s.count > 0 && s.dev == dev && s.ino == ino) held = true;
  unlock();
  return held;
}

// The database a -wal, -shm or -journal name belongs to (empty: not such a name).
std::string companionOf(const char* path) {
  const std::size_t n = std::strlen(path);
  for (const char* suffix : {"-wal", "-shm", "-journal"}) {
    const std::size_t k = std::strlen(suffix);
    if (n > k && std::strcmp(path + n - k, suffix) == 0) return std::string(path, n - k);
  }
  return {};
}

void say(const char* text) {
  const std::size_t n = std::strlen(text);
  [[maybe_unused]] const ssize_t w = ::write(2, text, n);
}

}  // namespace

HeldFile holdDatabaseFile(const std::string& path) {
  pthread_once(&g_atforkOnce, &installAtfork);
  HeldFile f;
  if (!identify(AT_FDCWD, path.c_str(), f.dev, f.ino)) return {};
  lock();
  Slot* free = nullptr;
  for (auto& s : g_slots) {
    if (s.count > 0 && s.dev == f.dev && s.ino == f.ino) {
      ++s.count;
      g_heldTotal.fetch_add(1);
      unlock();
      return f;
    }
    if (s.count == 0 && !free) free = &s;
  }
  if (!free) {
    unlock();
    return {};
  }
  *free = Slot{f.dev, f.ino, 1};
  g_heldTotal.fetch_add(1);
  unlock();
  return f;
}

void releaseDatabaseFile(HeldFile file) {
  if (!file.valid()) return;
  lock();
  for (auto& s : g_slots)
    if (s.count > 0 && s.dev == file.dev && s.ino == file.ino) {
      --s.count;
      g_heldTotal.fetch_sub(1);
      break;
    }
  unlock();
}

namespace {

// The held database `path` is, or belongs to as its -wal/-shm/-journal: its device and inode.
bool heldIdentity(int dirfd, const char* path, std::uint64_t& dev, std::uint64_t& ino) {
  if (g_heldTotal.load(std::memory_order_acquire) == 0 || !path) return false;
  if (identify(dirfd, path, dev, ino) && isHeldId(dev, ino)) return true;
  const std::string db = companionOf(path);
  return !db.empty() && identify(dirfd, db.c_str(), dev, ino) && isHeldId(dev, ino);
}

}  // namespace

bool isHeldDatabaseFile(const char* path, int dirfd) {
  std::uint64_t dev = 0, ino = 0;
  return heldIdentity(dirfd, path, dev, ino);
}

bool isSqliteDatabaseFile(const std::string& path) {
  if (isHeldDatabaseFile(path)) return true;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  // Not held by this process: reading its header cannot drop a lock of ours.
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  char head[16] = {0};
  const std::size_t got = std::fread(head, 1, sizeof head, f);
  std::fclose(f);
  return got == sizeof head && std::memcmp(head, "SQLite format 3\0", sizeof head) == 0;
}

void refuseToReplaceDatabase(const std::string& path, const std::string& what) {
  if (isSqliteDatabaseFile(path))
    throw Error(path + ": is a SQLite database; " + what + " would replace it (choose another file)");
}

int heldConnections(const std::string& path) {
  std::uint64_t dev = 0, ino = 0;
  if (!identify(AT_FDCWD, path.c_str(), dev, ino)) return 0;
  lock();
  int n = 0;
  for (const auto& s : g_slots)
    if (s.count > 0 && s.dev == dev && s.ino == ino) n = s.count;
  unlock();
  return n;
}

OpenGuardMode openGuardMode() {
  int m = g_mode.load();
  if (m < 0) {
#ifdef NDEBUG
    m = static_cast<int>(OpenGuardMode::Refuse);
#else
    m = static_cast<int>(OpenGuardMode::Abort);
#endif
    if (const char* env = std::getenv("SHARDSCOPE_OPEN_GUARD"); env && *env) {
      if (std::strcmp(env, "abort") == 0) m = static_cast<int>(OpenGuardMode::Abort);
      if (std::strcmp(env, "refuse") == 0) m = static_cast<int>(OpenGuardMode::Refuse);
    }
    g_mode.store(m);
  }
  return static_cast<OpenGuardMode>(m);
}

void setOpenGuardMode(OpenGuardMode mode) { g_mode.store(static_cast<int>(mode)); }

std::int64_t refusedOpens() { return g_refused.load(); }

std::string lastRefusedOpen() {
  lock();
  std::string s = g_lastRefused;
  unlock();
  return s;
}

namespace detail {

bool refuseOpen(const char* what, int dirfd, const char* path) {
  std::uint64_t dev = 0, ino = 0;
  if (!heldIdentity(dirfd, path, dev, ino)) return false;
  g_refused.fetch_add(1);
  bool first = true;
  lock();
  std::snprintf(g_lastRefused, sizeof g_lastRefused, "%s", path);
  for (int i = 0; i < g_reportedCount; ++i)
    if (g_reported[i].dev == dev && g_reported[i].ino == ino) first = false;
  if (first && g_reportedCount < kSlots) g_reported[g_reportedCount++] = Slot{dev, ino, 0};
  unlock();
  const bool abortNow = openGuardMode() == OpenGuardMode::Abort;
  if (first || abortNow) {
    char msg[768];
    std::snprintf(msg, sizeof msg,
                  "shardscope: refused %s(\"%s\"): this process holds that database open through SQLite, and "
                  "closing any other descriptor of it would drop the process's locks on it (docs/SCHEMA.md, "
                  "\"Many processes, one file\")%s\n",
                  what, path, abortNow ? "; SHARDSCOPE_OPEN_GUARD=abort: aborting" : "");
    say(msg);
  }
  if (abortNow) {
    void* frames[64];
    const int n = backtrace(frames, 64);
    backtrace_symbols_fd(frames, n, 2);
    std::abort();
  }
  errno = EACCES;
  return true;
}

}  // namespace detail
}  // namespace shardscope::core

// ------------------------------------------------------------------------------------------------
// The interposed functions.

namespace {

template <typename F>
F next(const char* name) {
  return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

using OpenFn = int (*)(const char*, int, ...);
using OpenatFn = int (*)(int, const char*, int, ...);
using Open2Fn = int (*)(const char*, int);
using Openat2Fn = int (*)(int, const char*, int);
using CreatFn = int (*)(const char*, mode_t);
using FopenFn = FILE* (*)(const char*, const char*);
using FreopenFn = FILE* (*)(const char*, const char*, FILE*);

// The mode argument exists only with O_CREAT or O_TMPFILE.
mode_t modeArg(int flags, va_list ap) {
  if ((flags & O_CREAT) != 0 || (flags & O_TMPFILE) == O_TMPFILE) return static_cast<mode_t>(va_arg(ap, int));
  return 0;
}

int missing() {
  errno = ENOSYS;
  return -1;
}

}  // namespace

int shardscope::core::detail::libcOpen(const char* path, int flags, int mode) {
  static const OpenFn real = next<OpenFn>("open64");
  return real ? real(path, flags, mode) : missing();
}

#define SHARDSCOPE_GUARD_OPEN(name)                                             \
  extern "C" int name(const char* path, int flags, ...) {                       \
    va_list ap;                                                                 \
    va_start(ap, flags);                                                        \
    const mode_t mode = modeArg(flags, ap);                                     \
    va_end(ap);                                                                 \
    if (shardscope::core::detail::refuseOpen(#name, AT_FDCWD, path)) return -1; \
    static const OpenFn real = next<OpenFn>(#name);                             \
    return real ? real(path, flags, mode) : missing();                          \
  }
#define SHARDSCOPE_GUARD_OPENAT(name)                                        \
  extern "C" int name(int dirfd, const char* path, int flags, ...) {         \
    va_list ap;                                                              \
    va_start(ap, flags);                                                     \
    const mode_t mode = modeArg(flags, ap);                                  \
    va_end(ap);                                                              \
    if (shardscope::core::detail::refuseOpen(#name, dirfd, path)) return -1; \
    static const OpenatFn real = next<OpenatFn>(#name);                      \
    return real ? real(dirfd, path, flags, mode) : missing();                \
  }
#define SHARDSCOPE_GUARD_OPEN2(name)                                            \
  extern "C" int name(const char* path, int flags) {                            \
    if (shardscope::core::detail::refuseOpen(#name, AT_FDCWD, path)) return -1; \
    static const Open2Fn real = next<Open2Fn>(#name);                           \
    return real ? real(path, flags) : missing();                                \
  }
#define SHARDSCOPE_GUARD_OPENAT2(name)                                       \
  extern "C" int name(int dirfd, const char* path, int flags) {              \
    if (shardscope::core::detail::refuseOpen(#name, dirfd, path)) return -1; \
    static const Openat2Fn real = next<Openat2Fn>(#name);                    \
    return real ? real(dirfd, path, flags) : missing();                      \
  }
#define SHARDSCOPE_GUARD_CREAT(name)                                            \
  extern "C" int name(const char* path, mode_t mode) {                          \
    if (shardscope::core::detail::refuseOpen(#name, AT_FDCWD, path)) return -1; \
    static const CreatFn real = next<CreatFn>(#name);                           \
    return real ? real(path, mode) : missing();                                 \
  }
#define SHARDSCOPE_GUARD_FOPEN(name)                                                 \
  extern "C" FILE* name(const char* __restrict path, const char* __restrict mode) {  \
    if (shardscope::core::detail::refuseOpen(#name, AT_FDCWD, path)) return nullptr; \
    static const FopenFn real = next<FopenFn>(#name);                                \
    if (!real) {                                                                     \
      errno = ENOSYS;                                                                \
      return nullptr;                                                                \
    }                                                                                \
    return real(path, mode);                                                         \
  }
#define SHARDSCOPE_GUARD_FREOPEN(name)                                                                       \
  extern "C" FILE* name(const char* __restrict path, const char* __restrict mode, FILE* __restrict stream) { \
    if (path && shardscope::core::detail::refuseOpen(#name, AT_FDCWD, path)) return nullptr;                 \
    static const FreopenFn real = next<FreopenFn>(#name);                                                    \
    if (!real) {                                                                                             \
      errno = ENOSYS;                                                                                        \
      return nullptr;                                                                                        \
    }                                                                                                        \
    return real(path, mode, stream);                                                                         \
  }

SHARDSCOPE_GUARD_OPEN(open)
SHARDSCOPE_GUARD_OPEN(open64)
SHARDSCOPE_GUARD_OPENAT(openat)
SHARDSCOPE_GUARD_OPENAT(openat64)
SHARDSCOPE_GUARD_OPEN2(__open_2)
SHARDSCOPE_GUARD_OPEN2(__open64_2)
SHARDSCOPE_GUARD_OPENAT2(__openat_2)
SHARDSCOPE_GUARD_OPENAT2(__openat64_2)
SHARDSCOPE_GUARD_CREAT(creat)
SHARDSCOPE_GUARD_CREAT(creat64)
SHARDSCOPE_GUARD_FOPEN(fopen)
SHARDSCOPE_GUARD_FOPEN(fopen64)
SHARDSCOPE_GUARD_FREOPEN(freopen)
SHARDSCOPE_GUARD_FREOPEN(freopen64)
