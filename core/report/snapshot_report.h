#pragma once
// The memory-snapshot part of a report (issue #18): a run that has PyTorch memory snapshots shows,
// per rank and device, the figures of core/analysis/memory_snapshot_analysis.h (peak active, peak
// reserved, fragmentation, before-recording bytes, categories) and the top allocations at the peak.
// Kept apart from report.cpp so the writers only add one section.
#include "core/report/report.h"

namespace shardscope::core {

// True when any run of the report has a memory snapshot.
bool reportHasMemorySnapshots(const Report& report);
// One row per snapshot device: the figures.
ReportTable memorySnapshotTable(const ReportRun& run);
// The top allocations alive at each snapshot's peak (rank, device, bytes, count, category, owner, site).
ReportTable memorySnapshotTopTable(const ReportRun& run);

}  // namespace shardscope::core
