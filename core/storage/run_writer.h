#pragma once
// Writes of a run while it runs, for the processes that produce one live (the embedded runtime's
// ranks): the run row and its outcome, a rank with its lanes and process groups, and batches of
// spans, steps, memory records, counters and metrics. Each call is one short write transaction
// (BEGIN IMMEDIATE ... COMMIT with the store's bounded busy wait), so readers in other processes see
// the run grow (WAL) and a crash loses only the batch being written. The runtime (profiler/) writes
// through these and nothing else: no SQL outside core/storage.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/model/job.h"
#include "core/model/types.h"

namespace shardscope::core {

class TraceStore;

// Creates the run row, committed at once (the other ranks and the launcher read its id).
RunId createRunRow(TraceStore& store, const Run& run);
// Sets a run's status (and failure reason), committed at once.
void setRunOutcome(TraceStore& store, RunId runId, RunStatus status, const std::string& failureReason = {});
// Records the run as a node's part of a job (runs.metadata_json "job", core/model/job.h), the rest
// of its metadata kept; committed at once.
void setRunJob(TraceStore& store, RunId runId, const JobPart& job);

// One span of a live run as the runtime records it: on a lane of its rank (RankWriter::addLane),
// names and process group by name (interned and resolved when written).
struct LiveSpan {
  int lane = 0;
  TimeNs startNs = 0;
  TimeNs endNs = 0;
  std::string name;
  std::string cat;  // "cpu_op", "user_annotation", "collective", "wait"
  Category category = Category::Other;
  std::optional<std::int64_t> step;
  CollectiveOp op = CollectiveOp::None;
  std::string group;  // process group name for collectives
  std::optional<std::int64_t> bytes;
  std::optional<int> groupSize;
  std::string dtype;
  std::string argsJson;                     // "" or a JSON object
  std::optional<std::int64_t> correlation;  // GPU records: the launch's CUPTI correlation id
  std::optional<std::int64_t> externalId;   // GPU records: our span that launched it
  bool gpuRow = false;                      // a GPU stream record (EventFlags::HtaGpuRow: HTA counts it as GPU work)
};

// What a rank recorded since its last write.
struct LiveBatch {
  std::vector<LiveSpan> spans;
  std::vector<Step> steps;
  std::vector<MemoryEvent> memory;                                // on the rank's memory tracks of (deviceType, deviceId)
  std::vector<std::tuple<std::string, TimeNs, double>> counters;  // (counter lane name, time, value)
  std::vector<std::pair<std::string, double>> rankMetrics;
  std::vector<std::pair<std::string, double>> runMetrics;

  bool empty() const;
  // Appends what came later (a batch whose write failed goes back in front of what came since).
  void append(LiveBatch&& later);
};

// One rank of a live run, on a connection of its own. Not thread-safe: one caller at a time.
class RankWriter {
 public:
  // Opens (creates) the store at dbPath and adds the rank.
  RankWriter(const std::string& dbPath, const Rank& rank);
  ~RankWriter();
  RankWriter(const RankWriter&) = delete;
  RankWriter& operator=(const RankWriter&) = delete;

  RankId rankId() const { return rank_.id; }
  int laneCount() const { return static_cast<int>(laneTracks_.size()); }
  // A lane of this rank (track.rankId is set here); returns its index for LiveSpan::lane.
  int addLane(Track track);
  // Registers a process group of the run; spans name it.
  void addProcessGroup(const ProcessGroup& pg);
  // Replaces the rank's metadata JSON.
  void setMetadata(const std::string& json);
  // Writes the batch in one transaction: spans as event chunks, memory records and counters on the
  // rank's tracks (created at first use), steps, metrics. Throws on failure with nothing of the
  // batch stored (the caller keeps it and retries).
  void write(const LiveBatch& batch);

 private:
  std::unique_ptr<TraceStore> store_;
  Rank rank_;
  std::vector<TrackId> laneTracks_;
  std::map<std::string, Id> groupIds_;
  std::map<std::pair<int, int>, std::pair<TrackId, TrackId>> memTracks_;  // (devType, dev) -> (allocated, reserved)
  std::map<std::string, TrackId> counterTracks_;
};

}  // namespace shardscope::core
