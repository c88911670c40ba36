#pragma once
// One exception type for everything core reports to a user: the message is a complete,
// one-line sentence that names the file (and offset/event) or object involved.
#include <stdexcept>
#include <string>

namespace shardscope::core {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// The database itself is the problem (not SQLite, read-only, newer schema, I/O failure on it).
class DatabaseError : public Error {
 public:
  // What SQLite said, so that a surface can tell a file it cannot read now (locked, unreadable, a
  // read that saw pages it could not make sense of) from one that is truly damaged: only
  // checkDatabase's PRAGMA quick_check decides the latter (core/storage/database_check.h).
  enum class Problem { Other, Locked, Unreadable, Corrupt, NotADatabase, Full, ReadOnly };
  explicit DatabaseError(const std::string& message, Problem problem = Problem::Other) : Error(message), problem_(problem) {}
  Problem problem() const { return problem_; }
  // Corrupt, NotADatabase or Unreadable: reopening the file (every connection of the process) may
  // read it again, and checkDatabase says whether it is damaged.
  bool readFailure() const {
    return problem_ == Problem::Corrupt || problem_ == Problem::NotADatabase || problem_ == Problem::Unreadable;
  }

 private:
  Problem problem_;
};

// Thrown when a CancelToken was triggered; callers treat it as "stopped by the user", not a failure.
class Cancelled : public Error {
 public:
  Cancelled() : Error("cancelled by user") {}
};

}  // namespace shardscope::core
