#include "core/storage/run_writer.h"
#include "core/storage/store_access.h"

#include <algorithm>
#include <iterator>

#include "core/storage/trace_store.h"
#include "core/util/error.h"
#include "core/util/json.h"

namespace shardscope::core {

RunId createRunRow(TraceStore& store, const Run& run) {
  Transaction tx(storeDb(store));
  const RunId id = store.createRun(run);
  tx.commit();
  return id;
}

void setRunOutcome(TraceStore& store, RunId runId, RunStatus status, const std::string& failureReason) {
  Transaction tx(storeDb(store));
  store.setRunStatus(runId, status, failureReason);
  tx.commit();
}

void setRunJob(TraceStore& store, RunId runId, const JobPart& job) {
  Transaction tx(storeDb(store));
  const auto run = store.run(runId);
  if (!run) throw Error(store.path() + ": run " + std::to_string(runId.value()) + " does not exist");
  JsonValue meta = JsonValue::object();
  try {
    meta = parseJson(run->metadataJson.empty() ? std::string("{}") : run->metadataJson, "run metadata");
  } catch (const std::exception&) {
  }
  if (!meta.isObject()) meta = JsonValue::object();
  meta.set("job", job.toJson());
  store.setRunMetadata(runId, meta.dump());
  tx.commit();
}

bool LiveBatch::empty() const {
  return spans.empty() && steps.empty() && memory.empty() && counters.empty() && rankMetrics.empty() && runMetrics.empty();
}

void LiveBatch::append(LiveBatch&& later) {
  spans.insert(spans.end(), std::make_move_iterator(later.spans.begin()), std::make_move_iterator(later.spans.end()));
  steps.insert(steps.end(), later.steps.begin(), later.steps.end());
  memory.insert(memory.end(), later.memory.begin(), later.memory.end());
  counters.insert(counters.end(), later.counters.begin(), later.counters.end());
  rankMetrics.insert(rankMetrics.end(), later.rankMetrics.begin(), later.rankMetrics.end());
  runMetrics.insert(runMetrics.end(), later.runMetrics.begin(), later.runMetrics.end());
}

RankWriter::RankWriter(const std::string& dbPath, const Rank& rank) : store_(std::make_unique<TraceStore>(dbPath)), rank_(rank) {
  Transaction tx(storeDb(*store_));
  rank_.id = store_->addRank(rank_);
  tx.commit();
}

RankWriter::~RankWriter() = default;

int RankWriter::addLane(Track track) {
  track.rankId = rank_.id;
  Transaction tx(storeDb(*store_));
  const TrackId id = store_->addTrack(track);
  tx.commit();
  laneTracks_.push_back(id);
  return static_cast<int>(laneTracks_.size() - 1);
}

void RankWriter::addProcessGroup(const ProcessGroup& pg) {
  Transaction tx(storeDb(*store_));
  const Id id = store_->addProcessGroup(pg);
  tx.commit();
  groupIds_[pg.name] = id;
}

void RankWriter::setMetadata(const std::string& json) {
  for (auto r : store_->ranks(rank_.runId)) {
    if (r.id != rank_.id) continue;
    r.metadataJson = json;
    Transaction tx(storeDb(*store_));
    store_->updateRank(r);
    tx.commit();
  }
}

void RankWriter::write(const LiveBatch& batch) {
  try {
    Transaction tx(storeDb(*store_));
    BulkWriter w(*store_);
    for (const auto& s : batch.spans) {
      EventRecord e;
      e.trackId = laneTracks_.at(static_cast<std::size_t>(s.lane));
      e.startNs = s.startNs;
      e.endNs = std::max(s.endNs, s.startNs);
      e.nameId = store_->intern(s.name);
      e.catId = store_->intern(s.cat);
      e.category = s.category;
      e.step = s.step;
      e.collOp = s.op;
      if (s.op != CollectiveOp::None) e.flags |= EventFlags::CollectiveMeta;
      if (s.gpuRow) e.flags |= EventFlags::HtaGpuRow;
      e.correlation = s.correlation;
      e.externalId = s.externalId;
      if (!s.group.empty()) {
        auto it = groupIds_.find(s.group);
        if (it != groupIds_.end()) e.processGroupId = it->second;
      }
      e.bytes = s.bytes;
      e.groupSize = s.groupSize;
      if (!s.dtype.empty()) e.dtypeId = store_->intern(s.dtype);
      w.addEvent(e, s.argsJson);
    }
    for (const auto& m : batch.memory) {
      const auto key = std::make_pair(m.deviceType, m.deviceId);
      auto it = memTracks_.find(key);
      if (it == memTracks_.end()) it = memTracks_.emplace(key, store_->addMemoryTracks(rank_.id, m.deviceType, m.deviceId)).first;
      w.addMemoryEvent(m);
      w.noteSample(it->second.first, m.tsNs);
      w.noteSample(it->second.second, m.tsNs);
    }
    for (const auto& [name, ts, value] : batch.counters) {
      auto it = counterTracks_.find(name);
      if (it == counterTracks_.end()) {
        Track t;
        t.rankId = rank_.id;
        t.kind = TrackKind::Counter;
        t.name = name;
        t.sortIndex = 900 + static_cast<int>(counterTracks_.size());
        it = counterTracks_.emplace(name, store_->addTrack(t)).first;
      }
      w.addCounter(it->second, ts, value);
    }
    w.finish();
    for (const auto& s : batch.steps) store_->addStep(s);
    for (const auto& [k, v] : batch.rankMetrics) store_->setMetric(rank_.runId, rank_.id, k, v);
    for (const auto& [k, v] : batch.runMetrics) store_->setMetric(rank_.runId, std::nullopt, k, v);
    tx.commit();
  } catch (...) {
    store_->invalidateCaches();  // interned strings of the rolled-back transaction are gone
    throw;
  }
}

}  // namespace shardscope::core
