#include "core/import/kineto_writer.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <limits>
#include <regex>

#include "core/util/error.h"
#include "core/util/json.h"

namespace shardscope::core::kineto {
namespace fs = std::filesystem;

constexpr std::string_view kFormat = "kineto";  // the reader's name, import_log.format

struct RankState {
  RunId runId;
  RankId rankId;
  // Per parser thread: local track/group id - 1 -> db id (and whether the track is CPU-side).
  std::vector<std::vector<TrackId>> trackIds;
  std::vector<std::vector<char>> trackIsCpu;
  std::vector<std::vector<Id>> groupIds;
  std::unordered_map<std::string, std::pair<TrackId, bool>> trackByKey;  // key -> (db id, CPU-side)
  std::vector<TrackId> allTracks, cpuTracks;
  ImportFileStats stats;              // summed over the file's batches
  std::vector<std::string> warnings;  // this file's, as they reach the result's
  FileHeader partial;                 // tsFloat, thread and process names from the parser threads
  bool anyTime = false;
  std::int64_t minTime = 0, maxTime = 0;                    // for a late baseTimeNanoseconds
  std::vector<PStep> steps;                                 // sorted by start
  std::unordered_map<std::int64_t, std::int64_t> corrStep;  // CPU correlation -> step
  // The collectives the CPU side names (nccl:all_to_all annotations, c10d ops), per CPU track in
  // file order, and the one enclosing each launch (by its correlation): the kernel it launched is
  // that collective, whatever NCCL calls its kernel (all-to-all runs as SendRecv kernels).
  struct CpuCollective {
    std::int64_t start, end;
    CollectiveOp op;
    std::optional<std::int64_t> bytes;
    std::optional<Id> dtype, pg;
    std::optional<int> groupSize;
  };
  std::unordered_map<std::int64_t, CpuCollective> corrCollective;
  // Per CPU track: its collective spans sorted by start, a cursor at the last one starting at or
  // before the latest launch (launches come in time order: no search per launch), and a ring of the
  // last 64 launches (start, correlation), so that a span written after the launches it encloses
  // still finds them.
  struct CpuTrackCollectives {
    std::vector<CpuCollective> spans;
    std::size_t cursor = 0;  // spans[0, cursor) start at or before the last launch
    std::array<std::pair<std::int64_t, std::int64_t>, 64> ring{};
    std::size_t next = 0, size = 0;
  };
  std::unordered_map<TrackId, CpuTrackCollectives> cpuCollectives;
  TrackId lastCollTrack;
  CpuTrackCollectives* lastColl = nullptr;  // cpuCollectives[lastCollTrack] (node-stable)
  CpuTrackCollectives& collectivesOf(TrackId track) {
    if (!lastColl || lastCollTrack != track) {
      lastColl = &cpuCollectives[track];
      lastCollTrack = track;
    }
    return *lastColl;
  }
  bool unresolvedCollective = false;           // a collective kernel's launch was not matched yet
  std::unordered_map<TrackId, bool> gpuTrack;  // db track id -> is a GPU track
  // "pid\x1ftid" (source text) -> (db track id, is python), for thread names from M events.
  std::unordered_multimap<std::string, std::pair<TrackId, bool>> tracksByIds;
  bool unresolvedGpu = false;
  bool cpuEventsSeen = false;
  std::int64_t cpuMin = 0, cpuMax = 0;
  std::vector<PStep> lateSteps;  // step windows that arrived after CPU events they may contain
};

namespace {

std::optional<std::int64_t> stepAt(const std::vector<PStep>& steps, std::int64_t ts) {
  // Windows rarely nest; the latest-starting window containing ts wins (look back a few).
  auto it = std::upper_bound(steps.begin(), steps.end(), ts, [](std::int64_t t, const PStep& s) { return t < s.start; });
  for (int k = 0; k < 4 && it != steps.begin(); ++k) {
    --it;
    if (ts >= it->start && ts < it->end) return it->step;
  }
  return std::nullopt;
}

// Gives GPU events without a step the step of their launch (same correlation), when known.
// A collective kernel whose name is all the trace says of it (no args): its launch's enclosing CPU
// collective may name it (an all-to-all runs as SendRecv kernels) and give its size.
bool collectiveNeedsLaunch(const EventChunk& c, std::size_t i) {
  const auto op = static_cast<CollectiveOp>(c.collOp[i]);
  return op != CollectiveOp::None && !(c.flags[i] & EventFlags::CollectiveMeta) && c.correlation[i] != EventChunk::kNull &&
         (op == CollectiveOp::SendRecv || c.bytes[i] == EventChunk::kNull);
}

// What a GPU event learns from its launch once the launch is known: its step, and for a collective
// kernel without args the collective the CPU side named around the launch.
bool fillFromLaunch(const RankState& rs, EventChunk& c) {
  bool changed = false;
  for (std::size_t i = 0; i < c.size(); ++i) {
    if (c.correlation[i] == EventChunk::kNull || (c.flags[i] & EventFlags::Instant)) continue;
    if (c.step[i] == EventChunk::kNull) {
      if (auto it = rs.corrStep.find(c.correlation[i]); it != rs.corrStep.end()) {
        c.step[i] = it->second;
        changed = true;
      }
    }
    if (!collectiveNeedsLaunch(c, i)) continue;
    auto cc = rs.corrCollective.find(c.correlation[i]);
    if (cc == rs.corrCollective.end()) continue;
    const auto& k = cc->second;
    if (static_cast<CollectiveOp>(c.collOp[i]) == CollectiveOp::SendRecv) c.collOp[i] = static_cast<std::uint8_t>(k.op);
    if (c.bytes[i] == EventChunk::kNull && k.bytes) c.bytes[i] = *k.bytes;
    if (c.dtype[i] == 0 && k.dtype) c.dtype[i] = static_cast<std::uint32_t>(*k.dtype);
    if (c.pg[i] == 0 && k.pg) c.pg[i] = static_cast<std::uint32_t>(*k.pg);
    if (c.groupSize[i] == 0 && k.groupSize) c.groupSize[i] = *k.groupSize;
    changed = true;
  }
  return changed;
}

ProcessGroup toProcessGroup(RunId runId, const PGroup& g) {
  ProcessGroup pg;
  pg.runId = runId;
  pg.name = g.name;
  pg.description = g.description;
  pg.backend = g.backend;
  pg.size = g.size;
  pg.ranksJson = g.ranksJson;
  return pg;
}

// True while the chunk has GPU events whose launch step, or whose collective, may still become known.
bool hasUnresolvedGpu(const RankState& rs, const EventChunk& c) {
  for (std::size_t i = 0; i < c.size(); ++i) {
    if (c.step[i] == EventChunk::kNull && c.correlation[i] != EventChunk::kNull && !(c.flags[i] & EventFlags::Instant))
      return true;
    if (collectiveNeedsLaunch(c, i) && !rs.corrCollective.count(c.correlation[i])) return true;
  }
  return false;
}

std::string defaultRunName(const std::vector<std::string>& files) {
  if (files.empty()) return "import";
  fs::path p(files.front());
  if (files.size() > 1) {
    std::string parent = p.parent_path().filename().string();
    if (!parent.empty()) return parent;
  }
  std::string n = p.filename().string();
  for (const char* ext : {".gz", ".json", ".pt.trace"})
    if (n.size() > std::strlen(ext) && n.substr(n.size() - std::strlen(ext)) == ext) n.resize(n.size() - std::strlen(ext));
  return n;
}

// For files without distributedInfo: "rank3", "rank_3", "rank-3" in the file name.
std::optional<int> rankFromFileName(const std::string& path) {
  static const std::regex re(R"((?:^|[^a-z])rank[_-]?(\d+))", std::regex::icase);
  std::smatch m;
  const std::string name = fs::path(path).filename().string();
  if (!std::regex_search(name, m, re)) return std::nullopt;
  const std::string digits = m[1].str();
  int rank = 0;
  auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), rank);
  if (ec != std::errc() || rank > 1'000'000) return std::nullopt;  // not a plausible rank
  return rank;
}

void noteTime(RankState& rs, std::int64_t t) {
  if (!rs.anyTime || t < rs.minTime) rs.minTime = t;
  if (!rs.anyTime || t > rs.maxTime) rs.maxTime = t;
  rs.anyTime = true;
}

}  // namespace

KinetoWriter::KinetoWriter(TraceStore& store, ImportWriter& out, const ImportOptions& options,
                           const std::vector<std::string>& files, int workers, std::uint64_t totalBytes, ImportResult& result)
    : store_(store),
      out_(out),
      bulk_(store),
      opt_(options),
      files_(files),
      totalBytes_(totalBytes),
      result_(result),
      strIds_(static_cast<std::size_t>(workers), std::vector<Id>(1, 0)),
      ranks_(files.size()),
      fileStart_(std::chrono::steady_clock::now()) {
  for (auto& r : ranks_) {
    r.trackIds.resize(static_cast<std::size_t>(workers));
    r.trackIsCpu.resize(static_cast<std::size_t>(workers));
    r.groupIds.resize(static_cast<std::size_t>(workers));
  }
  bulk_.encodeOnThread();  // the writer is the import's slowest stage: chunks are encoded beside it
  bulk_.setBeforeFlush([this](TrackId trackId, EventChunk& c) {
    if (!current_ || !(current_->unresolvedGpu || current_->unresolvedCollective) || !current_->gpuTrack.count(trackId))
      return false;
    fillFromLaunch(*current_, c);
    return hasUnresolvedGpu(*current_, c);  // rewritten at the end of the file, when every launch is known
  });
}

KinetoWriter::~KinetoWriter() = default;

void KinetoWriter::warnFile(RankState& rs, const std::string& w) {
  result_.warnings.push_back(w);
  rs.warnings.push_back(w);
}

RunId KinetoWriter::ensureRun(int file) {
  if (!opt_.separateRuns && sharedRun_) return sharedRun_;
  Run run;
  run.name = opt_.runName.empty()
                 ? defaultRunName(opt_.separateRuns ? std::vector<std::string>{files_[static_cast<std::size_t>(file)]} : files_)
                 : (opt_.separateRuns && files_.size() > 1 ? opt_.runName + " #" + std::to_string(file + 1) : opt_.runName);
  run.source = RunSource::Kineto;
  run.status = RunStatus::Completed;
  const RunId id = store_.createRun(run);
  result_.runIds.push_back(id);
  if (!opt_.separateRuns) sharedRun_ = id;
  return id;
}

void KinetoWriter::write(Batch& batch) {
  Batch* b = &batch;
  RankState& rs = ranks_[static_cast<std::size_t>(b->file)];
  current_ = &rs;
  const std::string& path = files_[static_cast<std::size_t>(b->file)];
  if (!rs.rankId) {
    rs.runId = ensureRun(b->file);
    Rank r;
    r.runId = rs.runId;
    r.rank = -1 - b->file;  // provisional until distributedInfo has been read
    r.sourceFile = path;
    rs.rankId = store_.addRank(r);
    // Launch correlations of a rank's CPU events: tens of thousands per file; growing the table
    // from empty rehashes it a dozen times on the writer thread, which every parser waits for.
    rs.corrStep.reserve(1u << 15);
  }
  for (auto& wmsg : b->warnings)
    if (warningsSeen_.insert(wmsg).second) warnFile(rs, wmsg);
  mapIds(rs, *b);
  for (const auto& st : b->steps) {
    if (rs.cpuEventsSeen && st.end > rs.cpuMin && st.start <= rs.cpuMax) rs.lateSteps.push_back(st);
    rs.steps.insert(
        std::upper_bound(rs.steps.begin(), rs.steps.end(), st, [](const PStep& a, const PStep& c) { return a.start < c.start; }),
        st);
    store_.addStep(Step{rs.rankId, st.step, st.start, st.end});
  }
  if (!b->fileDone) {
    // Partial results of a parser thread for this file.
    ImportFileStats& fs = rs.stats;
    fs.events += b->stats.events;
    fs.counters += b->stats.counters;
    fs.flows += b->stats.flows;
    fs.launchFlows += b->stats.launchFlows;
    fs.memoryEvents += b->stats.memoryEvents;
    fs.steps += b->stats.steps;
    fs.kernels += b->stats.kernels;
    fs.ncclKernels += b->stats.ncclKernels;
    fs.skipped += b->stats.skipped;
    for (const auto& [reason, n] : b->stats.skippedByReason) fs.skippedByReason[reason] += n;
    fs.negativeDurations += b->stats.negativeDurations;
    if (b->header.tsFloat) rs.partial.tsFloat = true;
    for (auto& tn : b->header.threadNames) rs.partial.threadNames.push_back(std::move(tn));
    for (const auto& [pid, entry] : b->header.processes.members()) {
      const JsonValue* existing = rs.partial.processes.find(pid);
      JsonValue merged = existing ? *existing : JsonValue::object();
      for (const auto& [k, v] : entry.members()) merged.set(k, v);
      rs.partial.processes.set(pid, std::move(merged));
    }
  }
  writeEvents(rs, *b);
  const std::vector<TrackId>& wTracks = rs.trackIds[static_cast<std::size_t>(b->worker)];
  const std::vector<Id>& wStr = strIds_[static_cast<std::size_t>(b->worker)];
  for (std::size_t i = 0; i < b->memory.size(); ++i) {
    MemoryEvent m = b->memory[i];
    m.rankId = rs.rankId;
    bulk_.addMemoryEvent(m);
    bulk_.noteSample(wTracks[b->memoryTracks[2 * i] - 1], m.tsNs);
    bulk_.noteSample(wTracks[b->memoryTracks[2 * i + 1] - 1], m.tsNs);
    noteTime(rs, m.tsNs);
  }
  for (const auto& c : b->counters) {
    bulk_.addCounter(wTracks[c.track - 1], c.ts, c.value);
    noteTime(rs, c.ts);
  }
  for (const auto& f : b->flows) {
    Flow fl;
    fl.rankId = rs.rankId;
    fl.flowId = f.id;
    fl.catId = f.cat ? wStr[f.cat] : 0;
    fl.nameId = f.name ? wStr[f.name] : 0;
    fl.phase = f.phase;
    fl.trackId = wTracks[f.track - 1];
    noteTime(rs, f.ts);
    fl.tsNs = f.ts;
    fl.bindEnclosing = f.bindEnclosing;
    bulk_.addFlow(fl);
  }

  if (opt_.progress) {
    Progress p;
    p.stage = "import " + fileLabel(path);
    p.done = bytesDoneBefore_ + b->fileOffset;
    p.total = totalBytes_;
    p.unit = "bytes";
    opt_.progress(p);
  }

  if (b->fileDone) endFile(rs, *b);
}

// New strings, process groups and tracks of a batch get their database ids (several parser threads
// meet the same thread/stream: one track per key).
void KinetoWriter::mapIds(RankState& rs, const Batch& batch) {
  const Batch* b = &batch;
  const auto w = static_cast<std::size_t>(b->worker);
  for (auto& str : b->newStrings) strIds_[w].push_back(store_.intern(str));
  for (auto& g : b->newGroups) rs.groupIds[w].push_back(store_.addProcessGroup(toProcessGroup(rs.runId, g)));
  for (auto& t : b->newTracks) {
    // Several parser threads meet the same thread/stream: one track per key.
    auto found = rs.trackByKey.find(t.key);
    if (found != rs.trackByKey.end()) {
      rs.trackIds[w].push_back(found->second.first);
      rs.trackIsCpu[w].push_back(found->second.second);
      continue;
    }
    Track tr;
    tr.rankId = rs.rankId;
    tr.kind = t.kind;
    tr.name = t.name;
    tr.pid = t.pid;
    tr.tid = t.tid;
    tr.device = t.device;
    tr.stream = t.stream;
    tr.derivedFrom = t.derivedFrom;
    tr.sortIndex = static_cast<int>(rs.allTracks.size());
    const TrackId id = store_.addTrack(tr);
    const bool cpu = t.cls == TrackClass::Cpu;
    rs.trackByKey.emplace(t.key, std::make_pair(id, cpu));
    rs.trackIds[w].push_back(id);
    rs.trackIsCpu[w].push_back(cpu);
    rs.allTracks.push_back(id);
    if (cpu) rs.cpuTracks.push_back(id);
    if (t.cls == TrackClass::Gpu) rs.gpuTrack.emplace(id, true);
    if (t.cls != TrackClass::Counter)
      rs.tracksByIds.emplace(t.pidText + '\x1f' + t.tidText, std::make_pair(id, t.cls == TrackClass::Python));
  }
}

// The events of a batch: database ids, steps (their window, or their launch's), the collective a
// launch's CPU span names, then into the chunk writer.
void KinetoWriter::writeEvents(RankState& rs, const Batch& batch) {
  const Batch* b = &batch;
  const auto w = static_cast<std::size_t>(b->worker);
  const std::vector<TrackId>& wTracks = rs.trackIds[w];
  const std::vector<char>& wCpu = rs.trackIsCpu[w];
  const std::vector<Id>& wGroups = rs.groupIds[w];
  const std::vector<Id>& wStr = strIds_[w];
  EventRecord rec;
  for (const auto& e : b->events) {
    rec.trackId = wTracks[e.track - 1];
    rec.startNs = e.start;
    rec.endNs = e.end;
    rec.nameId = wStr[e.name];
    rec.catId = e.cat ? wStr[e.cat] : 0;
    rec.category = e.category;
    rec.flags = e.flags;
    rec.correlation = e.correlation != kNone ? std::optional<std::int64_t>(e.correlation) : std::nullopt;
    rec.externalId = e.externalId != kNone ? std::optional<std::int64_t>(e.externalId) : std::nullopt;
    rec.collOp = e.op;
    rec.processGroupId = e.pg ? std::optional<Id>(wGroups[e.pg - 1]) : std::nullopt;
    rec.bytes = e.bytes != kNone ? std::optional<std::int64_t>(e.bytes) : std::nullopt;
    rec.dtypeId = e.dtype ? std::optional<Id>(wStr[e.dtype]) : std::nullopt;
    rec.groupSize = e.groupSize ? std::optional<int>(e.groupSize) : std::nullopt;
    const bool cpu = wCpu[e.track - 1] != 0;
    noteTime(rs, e.start);
    noteTime(rs, e.end);
    rec.step.reset();
    bool defer = false;
    if (e.stepNum != kNone) {
      rec.step = e.stepNum;
    } else if (cpu) {
      rec.step = stepAt(rs.steps, e.start);
      if (!rs.cpuEventsSeen) {
        rs.cpuMin = rs.cpuMax = e.start;
        rs.cpuEventsSeen = true;
      } else {
        rs.cpuMin = std::min(rs.cpuMin, e.start);
        rs.cpuMax = std::max(rs.cpuMax, e.start);
      }
      if (rec.step && rec.correlation) rs.corrStep[*rec.correlation] = *rec.step;
      if (rec.collOp != CollectiveOp::None) {
        const RankState::CpuCollective cc{e.start, e.end, rec.collOp, rec.bytes, rec.dtypeId, rec.processGroupId, rec.groupSize};
        auto& tc = rs.collectivesOf(rec.trackId);
        // Kept sorted by start (file order need not be); the cursor stays on the same spans.
        const auto pos = std::upper_bound(tc.spans.begin(), tc.spans.end(), cc.start,
                                          [](std::int64_t t, const RankState::CpuCollective& x) { return t < x.start; });
        if (static_cast<std::size_t>(pos - tc.spans.begin()) < tc.cursor) ++tc.cursor;
        tc.spans.insert(pos, cc);
        for (std::size_t k = 0; k < tc.size; ++k) {
          const auto& [start, corr] = tc.ring[k];
          if (start >= e.start && start <= e.end) rs.corrCollective.emplace(corr, cc);
        }
      } else if (rec.correlation) {
        auto& tc = rs.collectivesOf(rec.trackId);
        tc.ring[tc.next] = {e.start, *rec.correlation};
        tc.next = (tc.next + 1) % tc.ring.size();
        tc.size = std::min(tc.size + 1, tc.ring.size());
        if (!tc.spans.empty()) {
          // The innermost collective span open at this launch: the latest-starting one containing it.
          if (tc.cursor > 0 && tc.spans[tc.cursor - 1].start > e.start) {  // out of time order: search
            tc.cursor = static_cast<std::size_t>(
                std::upper_bound(tc.spans.begin(), tc.spans.end(), e.start,
                                 [](std::int64_t t, const RankState::CpuCollective& x) { return t < x.start; }) -
                tc.spans.begin());
          }
          while (tc.cursor < tc.spans.size() && tc.spans[tc.cursor].start <= e.start) ++tc.cursor;
          for (std::size_t k = tc.cursor, seen = 0; k > 0 && seen < 8; --k, ++seen)
            if (tc.spans[k - 1].end >= e.start) {
              rs.corrCollective.emplace(*rec.correlation, tc.spans[k - 1]);
              break;
            }
        }
      }
    } else if (rec.correlation && !(e.flags & EventFlags::Instant)) {
      if (rec.collOp != CollectiveOp::None && !(e.flags & EventFlags::CollectiveMeta) &&
          (rec.collOp == CollectiveOp::SendRecv || !rec.bytes)) {
        // A collective kernel without its own metadata: the CPU side's collective that launched it
        // names it (SendRecv kernels of an all-to-all) and gives its size, type and group.
        if (auto c = rs.corrCollective.find(*rec.correlation); c != rs.corrCollective.end()) {
          if (rec.collOp == CollectiveOp::SendRecv) rec.collOp = c->second.op;
          if (!rec.bytes) rec.bytes = c->second.bytes;
          if (!rec.dtypeId) rec.dtypeId = c->second.dtype;
          if (!rec.processGroupId) rec.processGroupId = c->second.pg;
          if (!rec.groupSize) rec.groupSize = c->second.groupSize;
        } else {
          rs.unresolvedCollective = true;  // its launch comes later in the file: fixed when written
        }
      }
      auto it = rs.corrStep.find(*rec.correlation);
      if (it != rs.corrStep.end())
        rec.step = it->second;
      else
        defer = true;
    }
    // A GPU event whose launch has not been seen yet gets its step when its chunk is written
    // (beforeFlush) or, failing that, in the fix-up at the end of the file.
    if (defer) rs.unresolvedGpu = true;
    if (e.argsLen) {
      const std::string_view raw = std::string_view(b->args).substr(e.argsOff, e.argsLen);
      bulk_.addEvent(rec, raw);  // compacted by the parser
    } else {
      bulk_.addEvent(rec);
    }
  }
}

// The end of one file: its rank, late steps, deferred GPU steps, time base, import_log row.
void KinetoWriter::endFile(RankState& rs, Batch& batch) {
  Batch* b = &batch;
  const std::string& path = files_[static_cast<std::size_t>(b->file)];
  FileHeader& h = b->header;
  ImportFileStats st = rs.stats;
  st.path = b->stats.path;
  st.bytes = b->stats.bytes;
  st.jsonBytes = b->stats.jsonBytes;
  st.traceEvents = b->stats.traceEvents;
  h.tsFloat = rs.partial.tsFloat;
  h.threadNames = std::move(rs.partial.threadNames);
  h.processes = std::move(rs.partial.processes);
  if (st.negativeDurations)
    warnFile(rs, fileLabel(path) + ": " + std::to_string(st.negativeDurations) + " negative durations clamped to 0");
  if (h.baseAfterEvents && h.baseTimeNs && rs.anyTime &&
      (rs.maxTime > kMaxAbsNs - *h.baseTimeNs || rs.minTime < -kMaxAbsNs - *h.baseTimeNs))
    throw Error(path + ": 'baseTimeNanoseconds' (after the events) puts event timestamps out of range");
  bytesDoneBefore_ += st.bytes;
  Rank r;
  r.id = rs.rankId;
  r.runId = rs.runId;
  r.sourceFile = path;
  r.tsFloat = h.tsFloat;
  r.timeBaseNs = h.baseTimeNs.value_or(0);
  if (h.rank) {
    r.rank = *h.rank;
    st.rankFromFile = true;
  } else if (auto fr = rankFromFileName(path)) {
    r.rank = *fr;
    warnFile(rs, fileLabel(path) + ": no distributedInfo; rank " + std::to_string(r.rank) + " taken from the file name");
  } else {
    int guess = 0;
    while (usedRanks_.count(guess)) ++guess;
    r.rank = guess;
    warnFile(rs, fileLabel(path) + ": no distributedInfo; assigned rank " + std::to_string(guess));
  }
  if (usedRanks_.count(r.rank) && !opt_.separateRuns)
    throw Error(path + ": rank " + std::to_string(r.rank) + " is also the rank of " + rankFiles_[r.rank] +
                "; one import must not contain the same rank twice");
  usedRanks_.insert(r.rank);
  rankFiles_[r.rank] = path;
  st.rank = r.rank;
  st.worldSize = h.worldSize.value_or(0);
  if (!opt_.separateRuns && h.worldSize) {
    if (sharedWorld_ && *sharedWorld_ != *h.worldSize)
      throw Error(path + ": world size " + std::to_string(*h.worldSize) + " differs from " + std::to_string(*sharedWorld_) +
                  " in " + sharedWorldFile_ +
                  ": these are not ranks of one job (import them separately, or use --separate-runs)");
    sharedWorld_ = h.worldSize;
    sharedWorldFile_ = path;
  }
  {
    JsonValue meta = std::move(h.metadata);
    if (!h.distributedInfoJson.empty()) meta.set("distributedInfo", parseJson(h.distributedInfoJson, path));
    if (!h.devicePropertiesJson.empty()) {
      JsonValue dp = parseJson(h.devicePropertiesJson, path);
      meta.set("deviceProperties", dp);
      if (devicesAll_.items().empty()) devicesAll_ = dp;
    }
    meta.set("json_bytes", JsonValue::number(static_cast<std::int64_t>(st.jsonBytes)));
    r.metadataJson = meta.dump();
  }
  if (!h.processes.members().empty()) {
    JsonValue meta = parseJson(r.metadataJson, path);
    meta.set("processes", std::move(h.processes));
    r.metadataJson = meta.dump();
  }
  store_.updateRank(r);
  out_.setRankDeviceFromTracks(rs.rankId);
  for (const auto& g : h.groups) store_.addProcessGroup(toProcessGroup(rs.runId, g));
  // Thread names from M events, matched on the source's pid/tid text (string tids such as
  // "stream 7 " included).
  if (!h.threadNames.empty()) {
    for (const auto& [pid, tid, name] : h.threadNames) {
      std::string n = name;
      while (!n.empty() && n.back() == ' ') n.pop_back();
      auto range = rs.tracksByIds.equal_range(pid + '\x1f' + tid);
      for (auto it = range.first; it != range.second; ++it) {
        // A python track keeps a marker so it stays distinguishable from its thread.
        out_.renameTrack(it->second.first, it->second.second ? n + " (python)" : n);
      }
    }
  }
  // Everything of this file is written before the fix-ups below rewrite chunks.
  bulk_.flush();
  const std::vector<TrackId>& cpuTracks = rs.cpuTracks;
  const std::vector<TrackId>& allTracks = rs.allTracks;
  std::vector<TrackId> gpuTracks;
  for (TrackId t : rs.allTracks)
    if (rs.gpuTrack.count(t)) gpuTracks.push_back(t);
  // Step windows that arrived after CPU events inside them.
  for (const auto& s : rs.lateSteps) {
    for (TrackId t : cpuTracks) {
      bulk_.rewriteChunks(t, s.start, s.end, [&](EventChunk& c) {
        bool changed = false;
        for (std::size_t i = 0; i < c.size(); ++i) {
          if (c.step[i] != EventChunk::kNull || c.start[i] < s.start || c.start[i] >= s.end) continue;
          c.step[i] = s.step;
          changed = true;
          if (c.correlation[i] != EventChunk::kNull) rs.corrStep.emplace(c.correlation[i], s.step);
        }
        return changed;
      });
    }
  }
  if (!rs.lateSteps.empty()) {
    // Late windows may give steps to launches of any GPU chunk.
    for (TrackId t : gpuTracks) {
      bulk_.rewriteChunks(t, std::numeric_limits<TimeNs>::min(), std::numeric_limits<TimeNs>::max(),
                          [&](EventChunk& c) { return fillFromLaunch(rs, c); });
    }
  }
  // Chunks written while some of their launches were still unknown.
  bulk_.rewriteMarked([&](EventChunk& c) { return fillFromLaunch(rs, c); });
  if (h.baseAfterEvents && h.baseTimeNs && *h.baseTimeNs != 0) {
    // baseTimeNanoseconds came after traceEvents: shift what was written with base 0.
    const TimeNs base = *h.baseTimeNs;
    bulk_.shiftTracks(allTracks, base);
    out_.shiftRankRecords(rs.rankId, base);
  }
  bulk_.finish();
  // Free per-rank memory early; the state is not needed after its file.
  rs.corrStep = {};
  rs.gpuTrack = {};
  rs.tracksByIds = {};
  // (Kept until the end of the import, these grew the peak with the number of ranks.)
  rs.corrCollective = {};
  rs.cpuCollectives = {};
  rs.lastColl = nullptr;
  rs.steps = {};
  rs.lateSteps = {};
  rs.trackByKey = {};
  rs.trackIds = {};
  rs.trackIsCpu = {};
  rs.groupIds = {};
  rs.allTracks = {};
  rs.cpuTracks = {};
  // A trace that holds nothing to analyse is not a run (issue 46: an empty trace was stored as a
  // completed run with 0 events). The import is one transaction: nothing of it is kept.
  if (st.events == 0 && st.counters == 0 && st.memoryEvents == 0)
    throw Error(path + ": holds no events, counters or memory records ('traceEvents' has " + std::to_string(st.traceEvents) +
                (st.traceEvents == 1 ? " record" : " records") + ", none of them an event): nothing to import");
  // The file's import_log row, in the import's transaction.
  const auto now = std::chrono::steady_clock::now();
  st.seconds = std::chrono::duration<double>(now - fileStart_).count();
  fileStart_ = now;
  st.warnings = std::move(rs.warnings);
  ImportLogEntry log;
  log.runId = rs.runId;
  log.rank = st.rank;
  log.path = st.path;
  log.format = std::string(kFormat);
  log.bytes = static_cast<std::int64_t>(st.bytes);
  log.events = static_cast<std::int64_t>(st.events);
  log.skipped = static_cast<std::int64_t>(st.skipped);
  for (const auto& [reason, n] : st.skippedByReason) log.skippedByReason[reason] = static_cast<std::int64_t>(n);
  log.warnings = st.warnings;
  log.seconds = st.seconds;
  out_.addImportLog(log);
  result_.events += st.events;
  result_.bytes += st.bytes;
  result_.jsonBytes += st.jsonBytes;
  result_.files.push_back(std::move(st));
}

void KinetoWriter::finish() {
  // Run-level attributes.
  for (RunId runId : result_.runIds) {
    auto run = store_.run(runId);
    if (!run) continue;
    int world = 0;
    std::string backend;
    for (std::size_t i = 0; i < result_.files.size(); ++i) {
      if (ranks_[i].runId != runId) continue;
      world = std::max(world, result_.files[i].worldSize);
    }
    if (world == 0) {
      for (std::size_t i = 0; i < result_.files.size(); ++i)
        if (ranks_[i].runId == runId) ++world;
    }
    run->worldSize = world;
    run->devicesJson = devicesAll_.isArray() ? devicesAll_.dump() : "[]";
    JsonValue meta = JsonValue::object();
    JsonValue filesJson = JsonValue::array();
    for (std::size_t i = 0; i < result_.files.size(); ++i)
      if (ranks_[i].runId == runId) filesJson.push(JsonValue::string(result_.files[i].path));
    meta.set("imported_files", std::move(filesJson));
    meta.set("importer", JsonValue::string("kineto_json"));
    run->metadataJson = meta.dump();
    store_.updateRun(*run);
  }
}

}  // namespace shardscope::core::kineto
