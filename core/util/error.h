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
  explicit DatabaseError(const std::string& message) : Error(message) {}
};

// Thrown when a CancelToken was triggered; callers treat it as "stopped by the user", not a failure.
class Cancelled : public Error {
 public:
  Cancelled() : Error("cancelled by user") {}
};

}  // namespace shardscope::core
