#pragma once
// Whether a database file reads, and if not why: what a surface says when a read of it failed.
// A file is called damaged (Malformed) only when SQLite's PRAGMA quick_check says so on a fresh
// connection; a read that failed for any other reason (another process holding the lock, a file
// that cannot be read now, a connection of this process left with a stale view) is not damage.
#include <chrono>
#include <string>

namespace shardscope::core {

struct DatabaseHealth {
  enum class State {
    Ok,            // quick_check passed: the file is healthy
    Locked,        // another process kept it locked for longer than the wait
    Unreadable,    // exists but cannot be read (permissions, an I/O error)
    Missing,       // no such file (renamed, deleted, an unmounted disk)
    NotADatabase,  // not a SQLite file (its header)
    Malformed,     // quick_check found damage: `detail` is what it said
  };
  State state = State::Ok;
  std::string detail;  // SQLite's or the system's words
  bool ok() const { return state == State::Ok; }
  // One sentence naming the file: "x.db: locked by another process for 5.0 s ...".
  std::string message(const std::string& path) const;
  static const char* stateName(State s);  // "ok", "locked", "unreadable", "missing", "not-a-database", "malformed"
};

// Checks `path` on a new read-only connection (PRAGMA quick_check; waits up to `lockWait` for
// another writer's lock). Connections this process already holds on the file share SQLite's
// in-process state of it (os_unix.c shares one inode's locks and -shm mapping): close them first
// for a verdict about the file rather than about them (heldConnections in open_guard.h).
DatabaseHealth checkDatabase(const std::string& path, std::chrono::milliseconds lockWait);

}  // namespace shardscope::core
