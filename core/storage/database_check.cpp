#include "core/storage/database_check.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/storage/database.h"
#include "core/util/error.h"

namespace shardscope::core {

const char* DatabaseHealth::stateName(State s) {
  switch (s) {
    case State::Ok:
      return "ok";
    case State::Locked:
      return "locked";
    case State::Unreadable:
      return "unreadable";
    case State::Missing:
      return "missing";
    case State::NotADatabase:
      return "not-a-database";
    case State::Malformed:
      return "malformed";
  }
  return "unknown";
}

std::string DatabaseHealth::message(const std::string& path) const {
  switch (state) {
    case State::Ok:
      return path + ": reads correctly (PRAGMA quick_check: ok)";
    case State::Locked:
      return path + ": locked by another process (" + detail + "); it is not damaged";
    case State::Unreadable:
      return path + ": cannot be read (" + detail + ")";
    case State::Missing:
      return path + ": no such file (renamed, deleted or on a disk that is gone)";
    case State::NotADatabase:
      return path + ": is not a SQLite database (" + detail + ")";
    case State::Malformed:
      return path + ": is damaged: PRAGMA quick_check says: " + detail;
  }
  return path;
}

DatabaseHealth checkDatabase(const std::string& path, std::chrono::milliseconds lockWait) {
  using S = DatabaseHealth::State;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return {S::Missing, ec ? ec.message() : std::string()};
  if (std::filesystem::is_directory(path, ec)) return {S::NotADatabase, "it is a directory"};
  // access() asks the kernel without opening the file (nothing outside SQLite opens a database).
  if (::access(path.c_str(), R_OK) != 0) return {S::Unreadable, std::strerror(errno)};
  try {
    Database db(path, Database::Mode::ReadOnly, lockWait);
    Statement st(db, "PRAGMA quick_check(20)");
    std::string said;
    while (st.step()) {
      const std::string line = st.text(0);
      if (line == "ok") continue;
      if (!said.empty()) said += "; ";
      said += line;
    }
    if (said.empty()) return {S::Ok, "ok"};
    return {S::Malformed, said};
  } catch (const DatabaseError& e) {
    switch (e.problem()) {
      case DatabaseError::Problem::Locked:
        return {S::Locked, e.what()};
      case DatabaseError::Problem::NotADatabase:
        return {S::NotADatabase, e.what()};
      case DatabaseError::Problem::Corrupt:
        return {S::Malformed, e.what()};
      default:
        return {S::Unreadable, e.what()};
    }
  }
}

}  // namespace shardscope::core
