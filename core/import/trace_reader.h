#pragma once
// One interface for every trace format Shardscope imports. A reader says whether the first bytes of a
// file look like its format (`sniff`) and imports files into the store (`import`); the registry
// (readers.cpp) picks the reader of a file by its content, never by its extension. Adding a format is
// one file defining a TraceReader and one line in readers.cpp (HACKING.md, "An importer").
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/model/types.h"
#include "core/storage/trace_store.h"
#include "core/util/json_reader.h"
#include "core/util/progress.h"

namespace shardscope::core {

struct ImportOptions {
  std::string runName;        // default: derived from the inputs
  bool keepArgs = true;       // store each event's args JSON in event_args
  bool separateRuns = false;  // one run per file instead of one run for all files
  JsonLimits limits;
  // Memory snapshots only: attach the snapshot to rank `attachRank` of this existing run (the
  // memory of a rank of a Kineto import of the same job) instead of making a run of its own.
  RunId attachTo;
  int attachRank = 0;
  ProgressFn progress;  // called from the calling thread
  const CancelToken* cancel = nullptr;
};

// What one file gave. Every reader fills path, rank, bytes, events, skipped and warnings (they are
// the file's import_log row); the rest where its format has them.
struct ImportFileStats {
  std::string path;
  int rank = 0;
  bool rankFromFile = false;  // true when the file itself (distributedInfo, HTA's "rank": N) gave the rank
  int worldSize = 0;
  std::uint64_t bytes = 0;        // bytes on disk
  std::uint64_t jsonBytes = 0;    // uncompressed bytes
  std::uint64_t traceEvents = 0;  // records of the file
  std::uint64_t events = 0;       // rows written to events
  std::uint64_t counters = 0;
  std::uint64_t flows = 0;        // non-launch flows stored
  std::uint64_t launchFlows = 0;  // ac2g flow records (implied by correlation)
  std::uint64_t memoryEvents = 0;
  std::uint64_t steps = 0;
  std::uint64_t kernels = 0;
  std::uint64_t ncclKernels = 0;
  std::uint64_t skipped = 0;                             // records not imported, all reasons
  std::map<std::string, std::uint64_t> skippedByReason;  // e.g. "phase 'B'" -> count
  std::uint64_t negativeDurations = 0;
  std::vector<std::string> warnings;  // this file's warnings, as in ImportResult::warnings
  double seconds = 0;                 // wall time spent on this file
};

struct ImportResult {
  std::vector<RunId> runIds;
  std::vector<ImportFileStats> files;
  std::vector<std::string> warnings;
  std::uint64_t events = 0;
  std::uint64_t bytes = 0;
  std::uint64_t jsonBytes = 0;
  double seconds = 0;
};

class TraceReader {
 public:
  virtual ~TraceReader() = default;
  // Short and stable: the import_log's `format` column and `shardscope-cli import --format`.
  virtual std::string_view name() const = 0;
  virtual std::string_view description() const = 0;
  // How sure the reader is that a file beginning with `head` (its first bytes, already inflated if
  // the file is gzip) is in its format: 0 = not mine, 100 = certainly mine. Cheap, never throws.
  virtual int sniff(std::string_view head) const = 0;
  // Imports the files as one transaction that also writes each file's import_log row: on any error
  // or cancellation nothing is written and core::Error (core::Cancelled) is thrown naming the file.
  virtual ImportResult import(TraceStore& store, const std::vector<std::string>& files, const ImportOptions& options) const = 0;
};

// Every registered reader, in registration order.
const std::vector<const TraceReader*>& traceReaders();
// The reader called `name`; nullptr if there is none.
const TraceReader* traceReader(std::string_view name);

// The first bytes of a file (inflated when it is gzip), at most maxBytes; what `sniff` reads.
std::string readHead(const std::string& path, std::size_t maxBytes = 64 * 1024);

// The reader for `files`, by content: the reader with the highest sniff of each file, which must be
// the same reader for all of them. Throws core::Error naming the file when no reader recognises it
// (or files of one import are in different formats). A file that is the database at `storePath`
// itself is refused before it is opened (opening it would drop this process' SQLite locks).
const TraceReader& chooseReader(const std::vector<std::string>& files, const std::string& storePath = {});

}  // namespace shardscope::core
