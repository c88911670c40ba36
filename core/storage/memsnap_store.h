#pragma once
// Memory snapshots in the store (schema version 5, docs/SCHEMA.md "Memory snapshots"): one per rank,
// written inside the caller's import transaction (ImportWriter), read back whole.
#include <optional>
#include <string>
#include <vector>

#include "core/model/memory_snapshot.h"
#include "core/model/types.h"
#include "core/util/progress.h"

namespace shardscope::core {

class TraceStore;

// Writes `snapshot` as the memory snapshot of `rankId`. The caller holds the transaction (an
// ImportWriter); frame names and files are interned in the store's strings. Honours `cancel`
// between batches. Throws core::Error when the rank already has a snapshot.
void writeMemorySnapshot(TraceStore& store, RankId rankId, const MemorySnapshot& snapshot, const std::string& sourceFile,
                         const CancelToken* cancel = nullptr);

// The rank's snapshot; nullopt when it has none (or the file is older than schema version 5).
std::optional<MemorySnapshot> loadMemorySnapshot(TraceStore& store, RankId rankId);

// The ranks of a run that have a snapshot, in rank order.
std::vector<Rank> memorySnapshotRanks(TraceStore& store, RunId runId);

}  // namespace shardscope::core
