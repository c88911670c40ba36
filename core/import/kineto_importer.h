#pragma once
// Streaming importer for torch.profiler / Kineto Chrome-trace JSON (.json or .json.gz), one file per
// rank. Several files of one job land as one run; the whole import is one transaction.
#include <cstdint>
#include <string>
#include <vector>

#include "core/util/json_reader.h"
#include "core/model/types.h"
#include "core/storage/trace_store.h"
#include "core/util/progress.h"

namespace shardscope::core {

struct KinetoImportOptions {
  std::string runName;        // default: derived from the inputs
  bool keepArgs = true;       // store each event's args JSON in event_args
  bool separateRuns = false;  // one run per file instead of one run for all files
  JsonLimits limits;
  ProgressFn progress;  // called from the calling thread
  const CancelToken* cancel = nullptr;
};

struct KinetoFileStats {
  std::string path;
  int rank = 0;
  bool rankFromFile = false;  // true when distributedInfo (or HTA's "rank": N rule) gave the rank
  int worldSize = 0;
  std::uint64_t bytes = 0;        // bytes on disk
  std::uint64_t jsonBytes = 0;    // uncompressed JSON bytes
  std::uint64_t traceEvents = 0;  // entries of traceEvents
  std::uint64_t events = 0;       // rows written to events
  std::uint64_t counters = 0;
  std::uint64_t flows = 0;        // non-launch flows stored
  std::uint64_t launchFlows = 0;  // ac2g flow records (implied by correlation)
  std::uint64_t memoryEvents = 0;
  std::uint64_t steps = 0;
  std::uint64_t kernels = 0;
  std::uint64_t ncclKernels = 0;
  std::uint64_t skipped = 0;  // records we do not import (B/E, async, unknown phases)
  std::uint64_t negativeDurations = 0;
};

struct KinetoImportResult {
  std::vector<Id> runIds;
  std::vector<KinetoFileStats> files;
  std::vector<std::string> warnings;
  std::uint64_t events = 0;
  std::uint64_t bytes = 0;
  std::uint64_t jsonBytes = 0;
  double seconds = 0;
};

// Expands directories into their *.json / *.json.gz files (non-recursive, sorted by name), keeps
// files as given. Throws if an input does not exist or a directory has no trace files.
std::vector<std::string> collectTraceFiles(const std::vector<std::string>& inputs);

// Imports the files. On any error nothing is written (the transaction rolls back) and core::Error is
// thrown with a one-line message naming the file and the byte offset or event index.
KinetoImportResult importKineto(TraceStore& store, const std::vector<std::string>& files,
                                const KinetoImportOptions& options = {});

// Parses a Kineto timestamp/duration literal (µs, maybe with decimals or an exponent) into integer
// nanoseconds, rounding half away from zero. False if it is not finite or outside ±4.6e18 ns.
bool parseMicrosToNs(std::string_view raw, std::int64_t& ns, bool& isFloat);

}  // namespace shardscope::core
