#pragma once
// The open guard: nothing in this process may open a database file it holds through SQLite.
//
// POSIX record locks belong to the process, not to a descriptor: closing *any* descriptor of a file
// drops every lock the process holds on it, those of its open SQLite connections included (SQLite,
// "How To Corrupt An SQLite Database File", 2.2). A peer process then believes it is the last
// connection, checkpoints, and deletes the -shm that this process still maps; this process's next
// read says "database disk image is malformed" about a healthy file, and a write could corrupt it.
// Anything may open a file: Qt's file dialog sniffing the MIME type of every file in a folder it
// lists, drag and drop, a reader sniffing its input, a plugin.
//
// So every Database registers its file here (by device and inode, so another name of the same file
// counts), and the process's open(2) family — open, open64, openat, creat, fopen, freopen and their
// fortified forms, defined in open_guard.cpp and linked into every executable that links
// core/storage — refuses to open a held file or its -wal, -shm or -journal (errno EACCES) unless
// SQLite itself asks: SQLite's unix VFS opens through its own system-call table, which Database
// points at the C library's open before the first connection. A refused open is counted and said on
// stderr once per file; with SHARDSCOPE_OPEN_GUARD=abort (the test suite, debug builds by default)
// it also prints a backtrace and aborts, so that none of our own code can do it unseen.
//
// After fork() the child holds no lock (POSIX locks are not inherited): its registry starts empty.
#include <cstdint>
#include <string>

namespace shardscope::core {

// Registered by Database (one count per connection); release takes what hold returned.
struct HeldFile {
  std::uint64_t dev = 0, ino = 0;
  bool valid() const { return ino != 0 || dev != 0; }
};
HeldFile holdDatabaseFile(const std::string& path);
void releaseDatabaseFile(HeldFile file);

// Whether `path` (relative to dirfd when not absolute; AT_FDCWD: the working directory) is a database
// file this process holds open through SQLite, or that file's -wal, -shm or -journal. Never opens it.
bool isHeldDatabaseFile(const char* path, int dirfd);
inline bool isHeldDatabaseFile(const std::string& path) { return isHeldDatabaseFile(path.c_str(), -100 /*AT_FDCWD*/); }
// Whether `path` is an SQLite database: one this process holds (never opened to tell), or a file
// that starts with SQLite's header. An export, report or screenshot never replaces one: a rename
// over the file another process (the app) has open would lose the team's runs.
bool isSqliteDatabaseFile(const std::string& path);
// Throws core::Error naming the file when `path` is such a database ("what" names the output).
void refuseToReplaceDatabase(const std::string& path, const std::string& what);
// Connections of this process to the file `path` names (0 when it is not held).
int heldConnections(const std::string& path);

enum class OpenGuardMode { Refuse, Abort };
// From $SHARDSCOPE_OPEN_GUARD ("refuse" | "abort"); the default is Refuse in release builds
// (NDEBUG) and Abort otherwise. Tests may change it.
OpenGuardMode openGuardMode();
void setOpenGuardMode(OpenGuardMode mode);
// Opens refused so far by this process, and the last file refused.
std::int64_t refusedOpens();
std::string lastRefusedOpen();

namespace detail {
// Called by the interposed functions: true when the open must be refused (counted, said, maybe
// aborted here). `what` names the function.
bool refuseOpen(const char* what, int dirfd, const char* path);
// The C library's open, for SQLite's system-call table (never refused).
int libcOpen(const char* path, int flags, int mode);
}  // namespace detail

}  // namespace shardscope::core
