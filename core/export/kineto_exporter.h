#pragma once
// Kineto-compatible Chrome-trace JSON, one file per rank (traces.md §2.1), readable by HTA, TraceLens,
// Perfetto, chrome://tracing and our own importer.
#include <string>

#include "core/export/export_types.h"
#include "core/model/types.h"
#include "core/storage/trace_store.h"

namespace shardscope::core {

// Writes OUTDIR/rank<R>.pt.trace.json.gz (or .json when !gzip) for every rank of the run, creating
// OUTDIR if needed. All files are written under temporary names and renamed only once every rank
// succeeded, so a failure or a cancel leaves no partial file behind. Throws core::Error
// ("<path>: <what>") or core::Cancelled.
ExportResult exportKineto(TraceStore& store, RunId runId, const std::string& outDir, const ExportOptions& options = {});

}  // namespace shardscope::core
