#pragma once
// Streaming importer for torch.profiler / Kineto Chrome-trace JSON (.json or .json.gz), one file per
// rank. Several files of one job land as one run; the whole import is one transaction.
//
// The reader is four rooms (docs/ARCHITECTURE.md "Data flow"): kineto_pipeline (reading, cutting
// into segments, the threads, cancel), kineto_event_reader (one event's JSON text -> its fields),
// kineto_parser (those fields -> typed records) and kineto_writer (tracks, steps, launches and
// collectives matched across events, writing through storage). `KinetoReader` (kineto_reader.cpp)
// is its TraceReader.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/import/trace_reader.h"
#include "core/model/types.h"
#include "core/storage/trace_store.h"
#include "core/util/progress.h"

namespace shardscope::core {

using KinetoImportOptions = ImportOptions;
using KinetoFileStats = ImportFileStats;
using KinetoImportResult = ImportResult;

// Expands directories into their *.json / *.json.gz files (non-recursive, sorted by name), keeps
// files as given. Throws if an input does not exist or a directory has no trace files.
std::vector<std::string> collectTraceFiles(const std::vector<std::string>& inputs);

// Imports the files. On any error nothing is written (the transaction rolls back) and core::Error is
// thrown with a one-line message naming the file and the byte offset or event index. Each file gets
// its import_log row (format "kineto") in the same transaction.
KinetoImportResult importKineto(TraceStore& store, const std::vector<std::string>& files,
                                const KinetoImportOptions& options = {});

// Parses a Kineto timestamp/duration literal (µs, maybe with decimals or an exponent) into integer
// nanoseconds, rounding half away from zero. False if it is not finite or outside ±4.6e18 ns.
bool parseMicrosToNs(std::string_view raw, std::int64_t& ns, bool& isFloat);

}  // namespace shardscope::core
