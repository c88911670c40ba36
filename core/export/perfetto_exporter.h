#pragma once
// One merged multi-rank Chrome-trace JSON for the Perfetto UI (traces.md §2.2): a common clock
// starting at 0, integer pids per rank host and GPU, strictly nested slices per thread.
#include <string>

#include "core/export/export_types.h"
#include "core/model/types.h"
#include "core/storage/trace_store.h"

namespace shardscope::core {

// Writes the run to outPath, gzip-compressed when outPath ends with ".gz" (options.gzip is not used).
// Layout: host of rank r -> pid r*100, GPU d of rank r -> pid r*100+1+d; slices that partially overlap
// an enclosing slice of their thread move to overflow threads (tid 1,000,000+k); flow ids become
// (r << 40) | id. Written to a temporary file and renamed; throws core::Error or core::Cancelled.
ExportResult exportPerfetto(TraceStore& store, RunId runId, const std::string& outPath, const ExportOptions& options = {});

}  // namespace shardscope::core
