#include "core/merge/job_merge.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <unordered_map>

#include "core/analysis/stragglers.h"
#include "core/launch/launcher.h"
#include "core/model/job.h"
#include "core/storage/import_log.h"
#include "core/storage/import_writer.h"
#include "core/storage/memsnap_store.h"
#include "core/storage/trace_store.h"
#include "core/util/error.h"
#include "core/util/json.h"

namespace shardscope::core {

const char* toString(ClockAlign a) {
  switch (a) {
    case ClockAlign::Auto:
      return "auto";
    case ClockAlign::Collectives:
      return "collectives";
    case ClockAlign::None:
      return "none";
  }
  return "auto";
}

ClockAlign clockAlignFromString(const std::string& s) {
  if (s == "auto") return ClockAlign::Auto;
  if (s == "collectives") return ClockAlign::Collectives;
  if (s == "none") return ClockAlign::None;
  throw Error("--clock-align: '" + s + "' is not one of auto, collectives, none");
}

namespace {

namespace fs = std::filesystem;

JsonValue parseObject(const std::string& text) {
  try {
    JsonValue v = parseJson(text.empty() ? std::string("{}") : text, "metadata");
    if (v.isObject()) return v;
  } catch (const std::exception&) {
  }
  return JsonValue::object();
}

std::string jsonString(const JsonValue& o, const char* key) {
  const JsonValue* v = o.find(key);
  return v && v->isString() ? v->asString() : std::string();
}

// FNV-1a, 64 bits: a fingerprint that is the same on every machine and build.
std::uint64_t fnv1a(std::string_view s, std::uint64_t h = 1469598103934665603ULL) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

// One input database, open read-only, and its runs.
struct Input {
  std::string path;
  std::unique_ptr<TraceStore> store;
  std::vector<Run> runs;
  std::map<RunId, RunCounts> counts;
};

struct PartRef {
  Input* in = nullptr;
  Run run;
  JobPart job;
  std::int64_t events = 0;
  std::string identity;  // runIdentity
};

// The identity of a run for idempotency: its metadata's "uid", else a fingerprint of its row, its
// size and its time span (two runs made in the same second with the same name and shape still differ
// in their times).
std::string runIdentity(TraceStore& store, const Run& r) {
  const JsonValue meta = parseObject(r.metadataJson);
  if (std::string uid = jsonString(meta, "uid"); !uid.empty()) return uid;
  const RunSummary sum = store.summary(r.id);
  std::string key = r.name + '\x1f' + std::string(toString(r.source)) + '\x1f' + r.createdAt + '\x1f' + r.strategy + '\x1f' +
                    r.configJson + '\x1f' + std::to_string(r.worldSize) + '\x1f' + std::to_string(sum.ranks.size()) + '\x1f' +
                    std::to_string(sum.eventCount) + '\x1f' + std::to_string(sum.counterSamples) + '\x1f' +
                    std::to_string(sum.stepCount) + '\x1f' + std::to_string(sum.startNs.value_or(0)) + '\x1f' +
                    std::to_string(sum.endNs.value_or(0));
  char buf[24];
  std::snprintf(buf, sizeof buf, "fp:%016llx", static_cast<unsigned long long>(fnv1a(key)));
  return buf;
}

// The configuration with what differs between the nodes of one job removed.
std::string configWithoutNode(const std::string& configJson) {
  const JsonValue c = parseObject(configJson);
  JsonValue out = JsonValue::object();
  for (const auto& [k, v] : c.members())
    if (k != "node_rank") out.set(k, v);
  return out.dump();
}

std::string nodeLabel(const PartRef& p) {
  return "node " + std::to_string(p.job.nodeRank) + " (" + p.in->path + " run " + std::to_string(p.run.id.value()) + ")";
}

// Copies runs, rank by rank, from input stores into OUT inside the caller's transaction.
class Copier {
 public:
  Copier(TraceStore& dst, BulkWriter& bulk, const CancelToken* cancel, const ProgressFn& progress, std::uint64_t total)
      : dst_(dst), bulk_(bulk), cancel_(cancel), progress_(progress), total_(total) {}

  // The process groups of `srcRun` joined into dstRun's by name: src id -> dst id.
  std::unordered_map<Id, Id> processGroups(TraceStore& src, RunId srcRun, RunId dstRun) {
    std::unordered_map<Id, Id> map;
    for (const auto& pg : src.processGroups(srcRun)) {
      ProcessGroup q = pg;
      q.id = 0;
      q.runId = dstRun;
      map[pg.id] = dst_.addProcessGroup(q);
    }
    return map;
  }

  struct CopiedRank {
    RankId rank;
    std::vector<TrackId> tracks;
  };

  CopiedRank rank(TraceStore& src, const Rank& r, RunId srcRun, RunId dstRun, const std::unordered_map<Id, Id>& pgMap,
                  const std::vector<TraceStore::MetricRow>& metrics, const std::vector<Step>& steps) {
    CopiedRank out;
    Rank nr = r;
    nr.id = RankId{};
    nr.runId = dstRun;
    out.rank = dst_.addRank(nr);
    std::unordered_map<TrackId, TrackId> trackMap;
    std::vector<Track> srcTracks;
    for (const auto& t : src.tracks(srcRun))
      if (t.rankId == r.id) srcTracks.push_back(t);
    for (const auto& t : srcTracks) {
      Track nt = t;
      nt.id = TrackId{};
      nt.rankId = out.rank;
      const TrackId id = dst_.addTrack(nt);
      trackMap[t.id] = id;
      out.tracks.push_back(id);
    }
    for (const auto& t : srcTracks) {
      const TrackId to = trackMap[t.id];
      src.forEachEvent(
          t.id,
          [&](const Event& e) {
            EventRecord rec;
            rec.trackId = to;
            rec.startNs = e.startNs;
            rec.endNs = e.endNs;
            rec.nameId = dst_.intern(e.name);
            rec.catId = e.cat.empty() ? 0 : dst_.intern(e.cat);
            rec.category = e.category;
            rec.flags = e.flags;
            rec.step = e.step;
            rec.correlation = e.correlation;
            rec.externalId = e.externalId;
            rec.collOp = e.collOp;
            if (e.processGroupId) {
              const auto it = pgMap.find(*e.processGroupId);
              if (it != pgMap.end()) rec.processGroupId = it->second;
            }
            rec.bytes = e.bytes;
            if (!e.dtype.empty()) rec.dtypeId = dst_.intern(e.dtype);
            rec.groupSize = e.groupSize;
            bulk_.addEvent(rec, e.argsJson);
            if ((++events_ & 0x3fff) == 0) tick();
          },
          true);
      if (t.kind == TrackKind::Counter && t.derivedFrom.empty())
        src.forEachCounterSample(t.id, [&](TimeNs ts, double v) { bulk_.addCounter(to, ts, v); });
    }
    src.forEachFlow(r.id, [&](const Flow& f) {
      Flow nf = f;
      nf.rankId = out.rank;
      const auto it = trackMap.find(f.trackId);
      if (it == trackMap.end()) return;
      nf.trackId = it->second;
      nf.catId = f.catId ? dst_.intern(src.string(f.catId)) : 0;
      nf.nameId = f.nameId ? dst_.intern(src.string(f.nameId)) : 0;
      bulk_.addFlow(nf);
    });
    src.forEachMemoryEvent(r.id, [&](const MemoryEvent& m) {
      MemoryEvent nm = m;
      nm.rankId = out.rank;
      bulk_.addMemoryEvent(nm);
    });
    for (const auto& s : steps)
      if (s.rankId == r.id) {
        Step ns = s;
        ns.rankId = out.rank;
        dst_.addStep(ns);
      }
    for (const auto& m : metrics)
      if (m.rankId && *m.rankId == r.id) {
        TraceStore::MetricRow nm = m;
        nm.rankId = out.rank;
        dst_.setMetricRow(dstRun, nm);
      }
    if (auto snap = loadMemorySnapshot(src, r.id)) writeMemorySnapshot(dst_, out.rank, *snap, r.sourceFile, cancel_);
    tick();
    return out;
  }

  std::int64_t events() const { return events_; }

 private:
  void tick() {
    if (cancel_) cancel_->throwIfCancelled();
    if (progress_) {
      Progress p;
      p.stage = "merge";
      p.done = static_cast<std::uint64_t>(events_);
      p.total = total_;
      p.unit = "events";
      progress_(p);
    }
  }

  TraceStore& dst_;
  BulkWriter& bulk_;
  const CancelToken* cancel_;
  const ProgressFn& progress_;
  std::uint64_t total_ = 0;
  std::int64_t events_ = 0;
};

void copyImportLog(TraceStore& src, RunId srcRun, RunId dstRun, ImportWriter& w) {
  for (auto e : importLog(src, srcRun)) {
    e.id = 0;
    e.runId = dstRun;
    w.addImportLog(e);
  }
}

std::string statusText(RunStatus s) { return std::string(toString(s)); }

}  // namespace

MergeResult mergeDatabases(const std::string& out, const std::vector<std::string>& inputs, const MergeOptions& options,
                           const CancelToken* cancel, const ProgressFn& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  if (inputs.empty()) throw Error("merge: no input database given");
  std::error_code ec;
  const fs::path outPath = fs::absolute(out, ec);
  std::vector<Input> ins;
  ins.reserve(inputs.size());
  std::set<std::string> seen;
  for (const auto& p : inputs) {
    const fs::path abs = fs::absolute(p, ec);
    if (fs::equivalent(abs, outPath, ec))
      throw Error("merge: " + p + " is the output database too; write the merge to a new or other file (--db OUT)");
    if (!fs::exists(abs, ec)) throw Error("merge: " + p + ": no such file");
    if (!seen.insert(fs::weakly_canonical(abs, ec).string()).second) continue;  // the same file twice
    Input in;
    in.path = p;
    in.store = std::make_unique<TraceStore>(p, Database::Mode::ReadOnly);
    in.runs = in.store->runs();
    for (const auto& c : in.store->runCounts()) in.counts[c.runId] = c;
    ins.push_back(std::move(in));
  }

  // Parts of multi-node jobs, by job id; every other run is copied as it is.
  std::map<std::string, std::vector<PartRef>> jobs;
  std::vector<PartRef> singles;
  std::uint64_t totalEvents = 0;
  for (auto& in : ins)
    for (const auto& r : in.runs) {
      PartRef p;
      p.in = &in;
      p.run = r;
      p.events = in.counts.count(r.id) ? in.counts[r.id].events : 0;
      p.identity = runIdentity(*in.store, r);
      totalEvents += static_cast<std::uint64_t>(p.events);
      auto job = JobPart::fromRunMetadata(r.metadataJson);
      if (job && job->multiNode()) {
        p.job = *job;
        jobs[job->id].push_back(std::move(p));
      } else {
        singles.push_back(std::move(p));
      }
    }

  // Check every job before anything is written.
  struct Plan {
    std::string id;
    std::vector<PartRef> parts;  // one per node present, in node order
    std::vector<int> missing;
  };
  std::vector<Plan> plans;
  for (auto& [id, parts] : jobs) {
    Plan plan;
    plan.id = id;
    std::sort(parts.begin(), parts.end(), [](const PartRef& a, const PartRef& b) { return a.job.nodeRank < b.job.nodeRank; });
    const PartRef& first = parts.front();
    for (const auto& p : parts) {
      if (p.job.nnodes != first.job.nnodes)
        throw Error("merge: job " + id + ": " + nodeLabel(p) + " says the job has " + std::to_string(p.job.nnodes) + " nodes, " +
                    nodeLabel(first) + " says " + std::to_string(first.job.nnodes));
      if (p.run.worldSize != first.run.worldSize)
        throw Error("merge: job " + id + ": world sizes differ: " + nodeLabel(first) + " has " +
                    std::to_string(first.run.worldSize) + " ranks, " + nodeLabel(p) + " has " + std::to_string(p.run.worldSize));
      if (p.run.strategy != first.run.strategy)
        throw Error("merge: job " + id + ": strategies differ: " + nodeLabel(first) + " ran " + first.run.strategy + ", " +
                    nodeLabel(p) + " ran " + p.run.strategy);
      if (p.run.source == RunSource::Runtime && first.run.source == RunSource::Runtime &&
          configWithoutNode(p.run.configJson) != configWithoutNode(first.run.configJson))
        throw Error("merge: job " + id + ": the configurations of " + nodeLabel(first) + " and " + nodeLabel(p) +
                    " differ (beyond the node rank)");
    }
    for (const auto& p : parts) {
      if (!plan.parts.empty() && plan.parts.back().job.nodeRank == p.job.nodeRank) {
        const PartRef& q = plan.parts.back();
        const bool same = q.identity == p.identity;
        if (same) continue;  // the same node's database given twice (or copied)
        throw Error("merge: job " + id + ": node " + std::to_string(p.job.nodeRank) +
                    " appears twice with different data: " + nodeLabel(q) + " and " + nodeLabel(p));
      }
      plan.parts.push_back(p);
    }
    for (int n = 0, k = 0; n < first.job.nnodes; ++n) {
      if (k < static_cast<int>(plan.parts.size()) && plan.parts[static_cast<std::size_t>(k)].job.nodeRank == n)
        ++k;
      else
        plan.missing.push_back(n);
    }
    if (!plan.missing.empty() && !options.partial) {
      std::string list;
      for (int n : plan.missing) list += (list.empty() ? "" : ", ") + std::to_string(n);
      throw Error(
          "merge: job " + id + ": node(s) " + list + " of " + std::to_string(first.job.nnodes) +
          " are missing from the inputs (give every node's database, or --partial to merge what is there as a failed run)");
    }
    // Ranks must not overlap between nodes.
    std::set<int> ranksSeen;
    for (const auto& p : plan.parts)
      for (const auto& r : p.in->store->ranks(p.run.id))
        if (!ranksSeen.insert(r.rank).second)
          throw Error("merge: job " + id + ": rank " + std::to_string(r.rank) + " is in more than one node's part (" +
                      nodeLabel(p) + ")");
    plans.push_back(std::move(plan));
  }

  const bool existed = fs::exists(outPath, ec);
  MergeResult result;
  try {
    TraceStore dst(out);
    // What OUT already holds: merged jobs and copied runs are not added twice.
    std::map<std::string, RunId> have;
    {
      for (const auto& r : dst.runs()) {
        const JsonValue meta = parseObject(r.metadataJson);
        if (const JsonValue* j = meta.find("job"); j && j->isObject()) {
          const JsonValue* merged = j->find("merged");
          if (merged && merged->isBool() && merged->asBool()) have["job:" + jsonString(*j, "id")] = r.id;
        }
        have[runIdentity(dst, r)] = r.id;
      }
    }
    ImportWriter w(dst);
    BulkWriter bulk(dst);
    Copier copier(dst, bulk, cancel, progress, totalEvents);

    for (auto& plan : plans) {
      MergedJob mj;
      mj.jobId = plan.id;
      const PartRef& head = plan.parts.front();
      mj.nnodes = head.job.nnodes;
      mj.missingNodes = plan.missing;
      if (auto it = have.find("job:" + plan.id); it != have.end()) {
        mj.skipped = true;
        mj.run = it->second;
        result.jobs.push_back(std::move(mj));
        continue;
      }
      // The run row: node 0's (or the first node present), status combined.
      Run run = head.run;
      run.id = RunId{};
      RunStatus status = RunStatus::Completed;
      std::string reason;
      auto rankOf = [](RunStatus s) {
        switch (s) {
          case RunStatus::Failed:
            return 4;
          case RunStatus::Cancelled:
            return 3;
          case RunStatus::Running:
          case RunStatus::Pending:
            return 2;
          default:
            return 1;
        }
      };
      // A failed node whose own error is the root cause (not its peers' failure) speaks for the run.
      const PartRef* cause = nullptr;
      for (const auto& p : plan.parts)
        if (p.run.status == RunStatus::Failed &&
            (!cause || (isSecondaryFailure(cause->run.failureReason) && !isSecondaryFailure(p.run.failureReason))))
          cause = &p;
      for (const auto& p : plan.parts)
        if (rankOf(p.run.status) > rankOf(status) && (!cause || &p == cause)) {
          status = p.run.status == RunStatus::Pending ? RunStatus::Running : p.run.status;
          reason = p.run.status == RunStatus::Running || p.run.status == RunStatus::Pending
                       ? "node " + std::to_string(p.job.nodeRank) + " was still running when merged"
                       : "node " + std::to_string(p.job.nodeRank) + " (" + p.job.host + "): " + p.run.failureReason;
        }
      if (!plan.missing.empty()) {
        std::string list;
        for (int n : plan.missing) list += (list.empty() ? "" : ", ") + std::to_string(n);
        status = RunStatus::Failed;
        reason = "node(s) " + list + " of " + std::to_string(head.job.nnodes) + " missing from the merge" +
                 (reason.empty() ? std::string() : "; " + reason);
      }
      run.status = status;
      run.failureReason = status == RunStatus::Completed ? std::string() : reason;
      const RunId runId = dst.createRun(run);
      const std::int64_t eventsBefore = copier.events();
      mj.run = runId;
      mj.status = status;
      mj.failureReason = run.failureReason;

      // Every node's ranks (clocks as recorded), then the offsets.
      std::vector<std::vector<Copier::CopiedRank>> copied(plan.parts.size());
      std::set<std::string> runMetricKeys;
      for (std::size_t i = 0; i < plan.parts.size(); ++i) {
        const PartRef& p = plan.parts[i];
        TraceStore& src = *p.in->store;
        const auto pgMap = copier.processGroups(src, p.run.id, runId);
        const auto metrics = src.metrics(p.run.id);
        const auto steps = src.steps(p.run.id);
        for (const auto& r : src.ranks(p.run.id))
          copied[i].push_back(copier.rank(src, r, p.run.id, runId, pgMap, metrics, steps));
        for (const auto& m : metrics)
          if (!m.rankId && runMetricKeys.insert(m.key).second) dst.setMetricRow(runId, m);
        copyImportLog(src, p.run.id, runId, w);
        MergedNode node;
        node.nodeRank = p.job.nodeRank;
        node.sourceFile = p.in->path;
        node.sourceRun = p.run.id;
        node.host = p.job.host;
        node.status = p.run.status;
        node.ranks = static_cast<int>(copied[i].size());
        mj.ranks += node.ranks;
        mj.nodes.push_back(node);
      }
      bulk.finish();
      mj.events = copier.events() - eventsBefore;

      // Clock offsets per node, relative to the first node present.
      bool needAlign = false;
      for (const auto& n : mj.nodes)
        if (options.align == ClockAlign::Collectives || (options.align == ClockAlign::Auto && n.host != mj.nodes.front().host))
          needAlign = true;
      mj.nodes.front().offsetMethod = "reference";
      if (needAlign) {
        const StragglerReport rep = detectStragglers(dst, runId, cancel);
        std::map<int, TimeNs> byRank;
        for (const auto& a : rep.ranks) byRank[a.rank] = a.clockOffsetNs;
        auto nodeMedian = [&](std::size_t i, bool& any) {
          std::vector<TimeNs> v;
          for (const auto& r : plan.parts[i].in->store->ranks(plan.parts[i].run.id))
            if (auto it = byRank.find(r.rank); it != byRank.end()) v.push_back(it->second);
          any = !v.empty();
          if (v.empty()) return TimeNs{0};
          std::sort(v.begin(), v.end());
          return v[v.size() / 2];
        };
        bool anyRef = false;
        const TimeNs ref = nodeMedian(0, anyRef);
        for (std::size_t i = 1; i < plan.parts.size(); ++i) {
          MergedNode& n = mj.nodes[i];
          if (options.align == ClockAlign::Auto && n.host == mj.nodes.front().host) {
            n.offsetMethod = "same host";
            continue;
          }
          bool any = false;
          const TimeNs off = nodeMedian(i, any);
          if (!any || !anyRef || rep.matched == 0) {
            n.offsetMethod = "none (no collective matched across nodes)";
            continue;
          }
          n.clockOffsetNs = off - ref;
          n.offsetMethod = "collectives (" + std::to_string(rep.matched) + " matched)";
          if (n.clockOffsetNs != 0) {
            BulkWriter shifter(dst);
            for (const auto& cr : copied[i]) {
              shifter.shiftTracks(cr.tracks, -n.clockOffsetNs);
              w.shiftRankRecords(cr.rank, -n.clockOffsetNs);
            }
            shifter.finish();
          }
        }
      } else {
        for (std::size_t i = 1; i < mj.nodes.size(); ++i)
          mj.nodes[i].offsetMethod = options.align == ClockAlign::None ? "none" : "same host";
      }

      // The metadata: node 0's, with the job's nodes.
      JsonValue meta = parseObject(head.run.metadataJson);
      JsonValue job = head.job.toJson();
      job.set("merged", JsonValue::boolean(true));
      job.set("clock_align", JsonValue::string(toString(options.align)));
      JsonValue nodes = JsonValue::array();
      for (const auto& n : mj.nodes) {
        JsonValue o = JsonValue::object();
        o.set("node_rank", JsonValue::number(static_cast<std::int64_t>(n.nodeRank)));
        o.set("source_file", JsonValue::string(n.sourceFile));
        o.set("source_run", JsonValue::number(n.sourceRun.value()));
        o.set("host", JsonValue::string(n.host));
        o.set("status", JsonValue::string(statusText(n.status)));
        o.set("ranks", JsonValue::number(static_cast<std::int64_t>(n.ranks)));
        o.set("clock_offset_ns", JsonValue::number(static_cast<std::int64_t>(n.clockOffsetNs)));
        o.set("clock_offset_method", JsonValue::string(n.offsetMethod));
        nodes.push(std::move(o));
      }
      job.set("nodes", std::move(nodes));
      if (!plan.missing.empty()) {
        JsonValue miss = JsonValue::array();
        for (int n : plan.missing) miss.push(JsonValue::number(static_cast<std::int64_t>(n)));
        job.set("missing_nodes", std::move(miss));
      }
      meta.set("job", std::move(job));
      meta.set("uid", JsonValue::string("job:" + plan.id));
      dst.setRunMetadata(runId, meta.dump());
      have["job:" + plan.id] = runId;
      result.jobs.push_back(std::move(mj));
    }

    for (const auto& p : singles) {
      CopiedRun cr;
      cr.sourceFile = p.in->path;
      cr.sourceRun = p.run.id;
      const std::string& ident = p.identity;
      if (auto it = have.find(ident); it != have.end()) {
        cr.skipped = true;
        cr.run = it->second;
        result.copied.push_back(cr);
        continue;
      }
      TraceStore& src = *p.in->store;
      Run run = p.run;
      run.id = RunId{};
      JsonValue meta = parseObject(run.metadataJson);
      meta.set("uid", JsonValue::string(ident));
      run.metadataJson = meta.dump();
      const RunId runId = dst.createRun(run);
      const std::int64_t before = copier.events();
      const auto pgMap = copier.processGroups(src, p.run.id, runId);
      const auto metrics = src.metrics(p.run.id);
      const auto steps = src.steps(p.run.id);
      for (const auto& r : src.ranks(p.run.id)) copier.rank(src, r, p.run.id, runId, pgMap, metrics, steps);
      for (const auto& m : metrics)
        if (!m.rankId) dst.setMetricRow(runId, m);
      copyImportLog(src, p.run.id, runId, w);
      cr.run = runId;
      cr.events = copier.events() - before;
      have[ident] = runId;
      result.copied.push_back(cr);
    }
    bulk.finish();
    w.commit();
    result.events = copier.events();
  } catch (...) {
    if (!existed) {
      fs::remove(outPath, ec);
      fs::remove(outPath.string() + "-wal", ec);
      fs::remove(outPath.string() + "-shm", ec);
    }
    throw;
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

}  // namespace shardscope::core
