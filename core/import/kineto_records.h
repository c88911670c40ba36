#pragma once
// The records the Kineto reader's stages pass to each other (docs/ARCHITECTURE.md "Data flow"):
// the splitter cuts a file into Segments of raw event text, the parser threads turn a Segment into a
// Batch of compact records with parser-local string/track/group ids, and the writer maps those ids
// to database ids. Internal to core/import (the tests read them too).
#include <cstdint>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "core/import/trace_reader.h"
#include "core/model/types.h"
#include "core/util/json.h"

namespace shardscope::core::kineto {

constexpr std::int64_t kNone = std::numeric_limits<std::int64_t>::min();
constexpr std::int64_t kMaxAbsNs = 4'600'000'000'000'000'000LL;
constexpr std::int64_t kMaxDurNs = 1'000'000'000'000'000LL;  // 11.6 days: longer is not a profile

// ------------------------------------------------------------------------------------------
// Records passed from the parsing thread to the writing thread. Strings, tracks and process groups
// are referred to by parser-local ids, resolved to database ids by the writer.

enum class TrackClass : char { Cpu = 'c', Gpu = 'g', Python = 'p', Counter = 'k' };

struct PTrack {
  std::string key;  // identity within the file (class + pid + tid, or the counter key)
  TrackClass cls = TrackClass::Cpu;
  TrackKind kind = TrackKind::CpuThread;
  std::string name;
  std::optional<std::int64_t> pid, tid, stream;
  std::optional<int> device;
  std::string pidText, tidText;  // original ids, for M-event name matching
  std::string derivedFrom;
};

struct PGroup {
  std::string name, description, backend, ranksJson;
  int size = 0;
};

struct PEvent {
  std::uint32_t track = 0;
  std::uint32_t name = 0;
  std::uint32_t cat = 0;
  std::uint32_t dtype = 0;
  std::uint32_t pg = 0;  // 1-based local group id, 0 = none
  std::int32_t groupSize = 0;
  Category category = Category::Other;
  CollectiveOp op = CollectiveOp::None;
  int flags = 0;
  std::int64_t start = 0, end = 0;
  std::int64_t correlation = kNone, externalId = kNone, bytes = kNone;
  std::uint32_t argsOff = 0, argsLen = 0;
  std::int64_t stepNum = kNone;  // set on the ProfilerStep#N annotation itself
};

struct PCounter {
  std::uint32_t track;
  std::int64_t ts;
  double value;
};

struct PFlow {
  std::uint32_t track, cat, name;
  std::int64_t id, ts;
  char phase;
  bool bindEnclosing;
};

struct PStep {
  std::int64_t step, start, end;
};

struct FileHeader {
  std::optional<int> rank;  // from distributedInfo
  std::optional<int> worldSize;
  std::string backend;
  std::vector<PGroup> groups;
  std::optional<std::int64_t> baseTimeNs;
  bool baseAfterEvents = false;
  bool tsFloat = false;
  std::string distributedInfoJson;
  std::string devicePropertiesJson;
  JsonValue metadata = JsonValue::object();                                    // other top-level scalars
  JsonValue processes = JsonValue::object();                                   // pid -> {name, labels} from M events
  std::vector<std::tuple<std::string, std::string, std::string>> threadNames;  // pid, tid, name
};

struct Batch {
  int file = 0;
  int worker = 0;         // whose local string/track/group ids the batch uses
  std::uint64_t seq = 0;  // batches are written in this order (file order)
  std::vector<std::string> warnings;
  std::vector<std::string> newStrings;
  std::vector<PTrack> newTracks;
  std::vector<PGroup> newGroups;
  std::vector<PStep> steps;
  std::vector<PEvent> events;
  std::string args;
  std::vector<PCounter> counters;
  std::vector<PFlow> flows;
  std::vector<MemoryEvent> memory;          // rankId filled by the writer
  std::vector<std::uint32_t> memoryTracks;  // (allocated, reserved) counter tracks per memory event, pairs
  std::uint64_t fileOffset = 0;
  bool fileDone = false;
  FileHeader header;
  ImportFileStats stats;
  std::exception_ptr error;
  bool last = false;

  // Empties the batch for reuse, keeping the capacity of its buffers (the parser threads fill
  // recycled batches: growing fresh megabyte buffers for every batch cost them a seventh of their
  // time in page faults).
  void clear();
};

// Batches the writer is done with, emptied, for the parser threads to fill again. Bounded: a batch
// given back to a full pool is freed.
class BatchPool {
 public:
  explicit BatchPool(std::size_t cap) : cap_(cap) {}
  void give(std::unique_ptr<Batch> b) {
    if (!b) return;
    b->clear();
    std::lock_guard lk(m_);
    if (free_.size() < cap_) free_.push_back(std::move(b));
  }
  std::unique_ptr<Batch> take() {  // nullptr when empty
    std::lock_guard lk(m_);
    if (free_.empty()) return nullptr;
    auto b = std::move(free_.back());
    free_.pop_back();
    return b;
  }

 private:
  std::size_t cap_;
  std::mutex m_;
  std::vector<std::unique_ptr<Batch>> free_;
};

// A run of consecutive events of one file, as raw JSON text, for a parser thread.
struct Segment {
  int file = 0;
  std::uint64_t seq = 0;
  std::string text;                        // "[" ev "," ev ... "]"
  std::vector<std::uint64_t> localStart;   // offset of each event in `text`
  std::vector<std::uint64_t> fileStart;    // offset of each event in the (uncompressed) file
  std::uint64_t firstEvent = 0;            // index of the first event in traceEvents
  std::optional<std::int64_t> baseTimeNs;  // known when the segment was cut
  std::uint64_t fileOffset = 0;            // bytes of the file consumed, for progress
};

// ------------------------------------------------------------------------------------------
// Small helpers the stages share.

inline bool startsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// Heterogeneous lookup: find a string_view in the intern table without building a std::string.
struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
using InternMap = std::unordered_map<std::string, std::uint32_t, StringHash, std::equal_to<>>;

// A plain decimal integer (the fast path: ids, correlations, sizes), or an integral double.
std::optional<std::int64_t> parseInt(std::string_view s);

// The file name of a path, for warnings ("rank0.json: ...").
std::string fileLabel(const std::string& path);

}  // namespace shardscope::core::kineto
