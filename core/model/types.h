#pragma once
// Plain value types shared by storage, import, export and analysis. Integer nanoseconds everywhere.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/model/ids.h"

namespace shardscope::core {

// Ids of strings, events, chunks, flows and process groups; runs, ranks and tracks have typed ids (ids.h).
using Id = std::int64_t;
using TimeNs = std::int64_t;

enum class RunSource { Runtime, Kineto, Simulated };
enum class RunStatus { Pending, Running, Completed, Failed, Cancelled };
enum class TrackKind { GpuStream, CpuThread, Comm, Counter, Python };

// Event categories assigned at import (HTA's kernel classification, traces.md §5.2).
enum class Category : int { Computation = 0, Communication = 1, Memory = 2, Other = 3 };

// Collective operation, stored as a small integer (documented in docs/SCHEMA.md).
enum class CollectiveOp : int {
  None = 0,
  AllReduce = 1,
  AllGather = 2,
  ReduceScatter = 3,
  AllToAll = 4,
  Broadcast = 5,
  Reduce = 6,
  Send = 7,
  Recv = 8,
  SendRecv = 9,
  Barrier = 10,
  Gather = 11,
  Scatter = 12,
  Other = 13,
};

// Bits of events.flags.
namespace EventFlags {
constexpr int Instant = 1;         // a ph:"i" instant (start == end)
constexpr int HtaGpuRow = 2;       // carries a numeric args.stream != -1: HTA counts it as GPU work (§5.9)
constexpr int CollectiveMeta = 4;  // collective fields came from args (not guessed from the name)
}  // namespace EventFlags

// Our runtime's link probe (profiler/runtime/link_probe.h) names its collectives "<op> link probe"
// ("<op> link probe warmup" for the untimed ones): calibration, recorded outside the steps, and
// left out of the run's communication analyses.
constexpr std::string_view kLinkProbeLabel = "link probe";
// The loaded probe (link_probe.h, runLoadedGatherProbe): all-gathers waited on at once, one rank
// late in turn, every rank computing right after, "<op> link probe loaded" (a link probe name).
constexpr std::string_view kLoadedProbeLabel = "link probe loaded";
bool isLoadedProbeName(std::string_view name);
bool isLinkProbeName(std::string_view name);

std::string_view toString(RunSource s);

// Runs imported from PyTorch memory snapshots alone (no trace) say so in their metadata
// ({"memory_snapshot": true}, written by the snapshot import): Kineto as a source, but no events.
constexpr std::string_view kMemorySnapshotRunKey = "memory_snapshot";
struct Run;
bool isMemorySnapshotRun(const Run& run);
// What a run is, for grouping and labels: "runtime", "kineto", "simulated" or "memory snapshot".
std::string_view runKind(const Run& run);
// How a run is named wherever runs sit side by side: its name and id, "ddp #7" (two runs may share a
// name; the id never repeats).
std::string runLabel(std::string_view name, RunId id);
std::string_view toString(RunStatus s);
std::string_view toString(TrackKind k);
std::string_view toString(Category c);
std::string_view toString(CollectiveOp op);
std::optional<RunSource> runSourceFromString(std::string_view s);
std::optional<RunStatus> runStatusFromString(std::string_view s);
std::optional<TrackKind> trackKindFromString(std::string_view s);
CollectiveOp collectiveOpFromString(std::string_view s);  // accepts c10d/NCCL spellings; Other if unknown

// Size in bytes of a PyTorch/NCCL dtype name ("BFloat16", "Float", "float", "bf16", "int8_t"...); 0 if unknown.
int dtypeSize(std::string_view dtype);

struct Run {
  RunId id;
  std::string name;
  RunSource source = RunSource::Kineto;
  std::string strategy;
  std::string configJson = "{}";
  int worldSize = 0;
  std::string devicesJson = "[]";
  std::string createdAt;  // ISO 8601 UTC
  RunStatus status = RunStatus::Pending;
  std::string failureReason;
  std::string tags;
  std::string metadataJson = "{}";
};

struct Rank {
  RankId id;
  RunId runId;
  int rank = 0;
  std::string host;
  std::string device;
  std::string sourceFile;
  TimeNs timeBaseNs = 0;  // Kineto baseTimeNanoseconds (0 when the file used absolute µs)
  bool tsFloat = false;   // file had floating-point ts (HTA µs rounding applies, traces.md §5.1)
  std::string metadataJson = "{}";
};

struct Track {
  TrackId id;
  RankId rankId;
  TrackKind kind = TrackKind::CpuThread;
  std::string name;
  std::optional<std::int64_t> pid;
  std::optional<std::int64_t> tid;
  std::optional<int> device;
  std::optional<std::int64_t> stream;
  int sortIndex = 0;
  // Counter tracks whose samples are not stored in `counters` but read from another table:
  // "memory_events:allocated:<device type>:<device id>" or "memory_events:reserved:...".
  std::string derivedFrom;
};

struct ProcessGroup {
  Id id = 0;
  RunId runId;
  std::string name;
  std::string description;
  std::string backend;
  int size = 0;
  std::string ranksJson = "[]";
};

// An event as written by the bulk writer (strings already interned).
struct EventRecord {
  TrackId trackId;
  TimeNs startNs = 0;
  TimeNs endNs = 0;
  Id nameId = 0;
  Id catId = 0;
  Category category = Category::Other;
  int flags = 0;
  std::optional<std::int64_t> step;
  std::optional<std::int64_t> correlation;
  std::optional<std::int64_t> externalId;
  CollectiveOp collOp = CollectiveOp::None;
  std::optional<Id> processGroupId;
  std::optional<std::int64_t> bytes;
  std::optional<Id> dtypeId;
  std::optional<int> groupSize;
};

// An event as read back. name/cat/dtype view the store's string cache: valid while the TraceStore
// lives (and until its caches are invalidated after a rolled-back import); copy them to keep them.
struct Event {
  Id id = 0;
  TrackId trackId;
  TimeNs startNs = 0;
  TimeNs endNs = 0;
  std::string_view name;
  std::string_view cat;
  Category category = Category::Other;
  int flags = 0;
  std::optional<std::int64_t> step;
  std::optional<std::int64_t> correlation;
  std::optional<std::int64_t> externalId;
  CollectiveOp collOp = CollectiveOp::None;
  std::optional<Id> processGroupId;
  std::optional<std::int64_t> bytes;
  std::string_view dtype;
  std::optional<int> groupSize;
  std::string argsJson;  // only when requested
};

struct Step {
  RankId rankId;
  std::int64_t step = 0;
  TimeNs startNs = 0;
  TimeNs endNs = 0;
};

struct CounterSample {
  TimeNs tsNs = 0;
  double value = 0;
};

// A flow arrow that is not a CPU→GPU launch (those are implied by `correlation`).
struct Flow {
  RankId rankId;
  std::int64_t flowId = 0;
  Id catId = 0;
  Id nameId = 0;
  char phase = 's';  // 's' start, 't' step, 'f' finish
  TrackId trackId;
  TimeNs tsNs = 0;
  bool bindEnclosing = false;  // "bp":"e"
};

// A [memory] allocation record (Kineto profile_memory=True, or our runtime's allocator hooks).
struct MemoryEvent {
  RankId rankId;
  TimeNs tsNs = 0;
  int deviceType = 0;  // c10::DeviceType: 0 CPU, 1 CUDA, 6 HIP
  int deviceId = 0;
  std::int64_t addr = 0;
  std::int64_t bytes = 0;  // negative for frees
  std::int64_t totalAllocated = 0;
  std::int64_t totalReserved = 0;
  bool outOfMemory = false;
};

}  // namespace shardscope::core
