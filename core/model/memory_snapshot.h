#pragma once
// A PyTorch CUDA memory snapshot (torch.cuda.memory._dump_snapshot, the file PyTorch's memory_viz
// reads) as Shardscope holds it: every allocator event of device_traces with its stack, the
// segments and blocks at the dump, the external annotations, and the blocks that were alive before
// recording started, reconstructed as memory_viz does (reconstructPriorBlocks). Frames and stacks are
// interned: an event names its stack by index, a stack lists frame indices. Read by
// core/import/memsnap_reader (from the pickle), written and read by core/storage/memsnap_store, and
// analysed by core/analysis/memory_snapshot (curves, peaks, top allocations, comparison).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/model/types.h"

namespace shardscope::core {

// The trace entry actions of the caching allocator (torch/cuda/memory.py, TraceEntry).
enum class MemAction : std::uint8_t {
  Alloc = 0,
  FreeRequested = 1,
  FreeCompleted = 2,
  SegmentAlloc = 3,
  SegmentFree = 4,
  SegmentMap = 5,
  SegmentUnmap = 6,
  Snapshot = 7,
  Oom = 8,
};
std::string_view memActionName(MemAction a);
std::optional<MemAction> parseMemAction(std::string_view name);

using StackId = std::int32_t;  // index into MemorySnapshot::stacks; -1: no stack recorded

struct MemFrame {
  std::string name;
  std::string file;  // "??" or "" for C++ frames without a file; *.py for Python frames
  int line = 0;
  bool operator==(const MemFrame&) const = default;
};

struct MemTraceEvent {
  int device = 0;
  std::int64_t seq = 0;  // position in its device's trace (memory_viz's time step)
  TimeNs tsNs = 0;       // time_us * 1000 (the allocator's clock: µs since the epoch)
  MemAction action = MemAction::Alloc;
  std::uint64_t addr = 0;
  std::int64_t size = 0;
  std::int64_t stream = 0;
  StackId stack = -1;
};

struct MemSegment {
  int device = 0;
  std::uint64_t address = 0;
  std::int64_t totalSize = 0;
  std::int64_t allocatedSize = 0;
  std::int64_t activeSize = 0;
  std::int64_t requestedSize = 0;
  std::int64_t stream = 0;
  std::string segmentType;  // "large" / "small"
  bool expandable = false;
  StackId stack = -1;
};

struct MemBlock {
  std::int32_t segment = 0;  // index into MemorySnapshot::segments
  std::uint64_t address = 0;
  std::int64_t size = 0;
  std::int64_t requestedSize = 0;
  std::string state;  // "active_allocated", "active_pending_free", "inactive"
  StackId stack = -1;
};

struct MemAnnotation {
  int device = 0;
  TimeNs tsNs = 0;
  bool start = true;  // stage START / END
  std::string name;   // e.g. "FSDP::pre_forward (blocks.0)", "Optimizer.step#AdamW.step"
};

// A block alive before recording started: either freed in the trace without its alloc (fromFree:
// size and stack of that free) or active_allocated at the dump and never allocated in the trace
// (size = its requested_size, stack = the block's frames).
struct MemPriorBlock {
  int device = 0;
  std::uint64_t addr = 0;
  std::int64_t size = 0;
  StackId stack = -1;
  bool fromFree = false;
  bool operator==(const MemPriorBlock&) const = default;
};

struct MemorySnapshot {
  std::vector<MemFrame> frames;
  std::vector<std::vector<std::int32_t>> stacks;  // frame indices, innermost first
  std::vector<MemTraceEvent> events;              // device by device, each in trace order
  std::vector<MemSegment> segments;
  std::vector<MemBlock> blocks;
  std::vector<MemAnnotation> annotations;
  std::vector<MemPriorBlock> prior;  // reconstructPriorBlocks(*this), stored with the import
  std::string allocatorSettingsJson = "{}";

  // Devices with events or segments, ascending.
  std::vector<int> devices() const;
};

// The blocks alive before recording started, by memory_viz's rule (MemoryViz.js process_alloc_data):
// walking a device's trace, a free_completed of an address with no earlier alloc in the trace is a
// prior block; then every active_allocated block at the dump whose address is not allocated (and
// still alive) at the end of the trace. Their sum is where the active-memory curve starts.
std::vector<MemPriorBlock> reconstructPriorBlocks(const MemorySnapshot& s);

}  // namespace shardscope::core
