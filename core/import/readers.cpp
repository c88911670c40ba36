// The registry of trace readers (trace_reader.h). A new format is a file in core/import/ defining a
// TraceReader and a factory `std::unique_ptr<TraceReader> makeXReader()`, plus one line below.
#include <filesystem>
#include <memory>

#include "core/import/trace_reader.h"
#include "core/storage/open_guard.h"
#include "core/util/error.h"
#include "core/util/input_source.h"

// Every reader's factory, one per line; on a tie of sniff scores the earlier reader wins.
#define SHARDSCOPE_TRACE_READERS(X) X(makeKinetoReader) X(makeMemsnapReader)

namespace shardscope::core {

#define SHARDSCOPE_DECLARE_READER(factory) std::unique_ptr<TraceReader> factory();
SHARDSCOPE_TRACE_READERS(SHARDSCOPE_DECLARE_READER)
#undef SHARDSCOPE_DECLARE_READER

namespace {

std::vector<std::unique_ptr<TraceReader>> makeReaders() {
  std::vector<std::unique_ptr<TraceReader>> all;
#define SHARDSCOPE_MAKE_READER(factory) all.push_back(factory());
  SHARDSCOPE_TRACE_READERS(SHARDSCOPE_MAKE_READER)
#undef SHARDSCOPE_MAKE_READER
  return all;
}

}  // namespace

const std::vector<const TraceReader*>& traceReaders() {
  static const std::vector<std::unique_ptr<TraceReader>> owned = makeReaders();
  static const std::vector<const TraceReader*> all = [] {
    std::vector<const TraceReader*> v;
    v.reserve(owned.size());
    for (const auto& r : owned) v.push_back(r.get());
    return v;
  }();
  return all;
}

const TraceReader* traceReader(std::string_view name) {
  for (const TraceReader* r : traceReaders())
    if (r->name() == name) return r;
  return nullptr;
}

std::string readHead(const std::string& path, std::size_t maxBytes) {
  auto in = openInput(path);
  std::string head(maxBytes, '\0');
  std::size_t got = 0;
  while (got < maxBytes) {
    const std::size_t n = in->read(head.data() + got, maxBytes - got);
    if (n == 0) break;
    got += n;
  }
  head.resize(got);
  return head;
}

const TraceReader& chooseReader(const std::vector<std::string>& files, const std::string& storePath) {
  if (files.empty()) throw Error("import: no trace files given");
  const TraceReader* chosen = nullptr;
  std::string chosenBy;
  for (const auto& f : files) {
    std::error_code ec;
    // Reading the database (or its -wal/-shm/-journal companions, where WAL keeps its locks) as a
    // trace would open and close a descriptor of it: that drops every POSIX lock this process holds
    // on the file (SQLite's own included).
    if (!storePath.empty())
      for (const char* suffix : {"", "-wal", "-shm", "-journal"})
        if (std::filesystem::equivalent(f, storePath + suffix, ec))
          throw Error(f + ": is the database being imported into (or one of its SQLite files), not a trace file");
    if (isHeldDatabaseFile(f))
      throw Error(f + ": is a database this process has open (or one of its SQLite files), not a trace file");
    const std::string head = readHead(f);
    const TraceReader* best = nullptr;
    int bestScore = 0;
    for (const TraceReader* r : traceReaders()) {
      const int score = r->sniff(head);
      if (score > bestScore) best = r, bestScore = score;
    }
    if (!best) {
      std::string names;
      for (const TraceReader* r : traceReaders()) names += (names.empty() ? "" : ", ") + std::string(r->name());
      throw Error(f + ": not a trace format Shardscope reads (" +
                  (head.empty() ? "the file is empty" : "its content is none of: " + names) + ")");
    }
    if (chosen && chosen != best)
      throw Error(f + ": is a " + std::string(best->name()) + " file but " + chosenBy + " is " + std::string(chosen->name()) +
                  "; import files of different formats separately");
    if (!chosen) chosen = best, chosenBy = f;
  }
  return *chosen;
}

}  // namespace shardscope::core
