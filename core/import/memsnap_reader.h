#pragma once
// PyTorch memory snapshots (torch.cuda.memory._dump_snapshot: a pickled dict of segments,
// device_traces, allocator_settings, external_annotations; .pickle or .pickle.gz), read with the
// safe pickle reader (core/util/pickle.h) into a MemorySnapshot. The TraceReader "memsnap" of the
// registry (readers.cpp) imports one as a run of its own or as the memory of a rank of an existing
// run (ImportOptions::attachTo).
#include <string>
#include <string_view>

#include "core/model/memory_snapshot.h"
#include "core/util/pickle.h"
#include "core/util/progress.h"

namespace shardscope::core {

// The snapshot in `pickle` (the file's inflated bytes); `name` starts every error message. Entries
// of unknown action are skipped and counted in `skipped` (when given). Throws core::Error for a file
// that is not a memory snapshot or not a safe pickle.
MemorySnapshot parseMemorySnapshot(std::string_view pickle, const std::string& name, const PickleLimits& limits = {},
                                   const CancelToken* cancel = nullptr, std::uint64_t* skipped = nullptr);

}  // namespace shardscope::core
