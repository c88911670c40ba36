#include "core/import/memsnap_reader.h"

#include <chrono>
#include <climits>
#include <cstdint>
#include <cmath>
#include <filesystem>
#include <unordered_map>

#include "core/import/trace_reader.h"
#include "core/storage/import_writer.h"
#include "core/storage/memsnap_store.h"
#include "core/util/error.h"
#include "core/util/input_source.h"
#include "core/util/json.h"

namespace shardscope::core {

namespace {

using PV = PickleValue;

// time_us (µs since the epoch) as ns; a time beyond int64 ns (±292 years) reads as 0.
TimeNs usToNs(std::int64_t us) {
  constexpr std::int64_t kMaxUs = INT64_MAX / 1000;
  return us > -kMaxUs && us < kMaxUs ? us * 1000 : 0;
}

std::int64_t intOf(const PV* d, std::string_view key, std::int64_t def = 0) {
  const PV* v = d ? d->get(key) : nullptr;
  if (!v) return def;
  if (v->isInt()) return v->asInt();
  if (v->kind() == PV::Kind::Float && std::isfinite(v->asFloat()) && std::fabs(v->asFloat()) < 9e18)
    return static_cast<std::int64_t>(v->asFloat());
  return def;
}

std::string strOf(const PV* d, std::string_view key) {
  const PV* v = d ? d->get(key) : nullptr;
  return v && (v->isString() || v->kind() == PV::Kind::Bytes) ? v->asString() : std::string();
}

// Plain data as JSON (allocator_settings), depth-bounded: deeper parts become null.
JsonValue toJson(const PV& v, int depth) {
  if (depth > 16) return JsonValue();
  switch (v.kind()) {
    case PV::Kind::None:
      return JsonValue();
    case PV::Kind::Bool:
      return JsonValue::boolean(v.asBool());
    case PV::Kind::Int:
      return JsonValue::number(v.asInt());
    case PV::Kind::Float:
      return std::isfinite(v.asFloat()) ? JsonValue::number(v.asFloat()) : JsonValue();
    case PV::Kind::String:
    case PV::Kind::Bytes:
      return JsonValue::string(v.asString());
    case PV::Kind::List:
    case PV::Kind::Tuple: {
      JsonValue a = JsonValue::array();
      for (const PV* i : v.items()) a.push(toJson(*i, depth + 1));
      return a;
    }
    case PV::Kind::Dict: {
      JsonValue o = JsonValue::object();
      for (const auto& [k, val] : v.entries())
        if (k->isString()) o.set(k->asString(), toJson(*val, depth + 1));
      return o;
    }
  }
  return JsonValue();
}

class SnapshotBuilder {
 public:
  SnapshotBuilder(const std::string& name, const CancelToken* cancel) : name_(name), cancel_(cancel) {}

  MemorySnapshot build(const PV& root, std::uint64_t* skipped) {
    if (!root.isDict())
      throw Error(name_ + ": not a PyTorch memory snapshot (the pickle holds a " + PV::kindName(root.kind()) + ", not a dict)");
    const PV* segments = root.get("segments");
    const PV* traces = root.get("device_traces");
    if (!segments && !traces)
      throw Error(name_ + ": not a PyTorch memory snapshot (a dict without 'segments' or 'device_traces')");
    if (segments && !segments->isList())
      throw Error(name_ + ": 'segments' is a " + std::string(PV::kindName(segments->kind())) + ", not a list");
    if (traces && !traces->isList())
      throw Error(name_ + ": 'device_traces' is a " + std::string(PV::kindName(traces->kind())) + ", not a list");

    if (traces) {
      for (std::size_t device = 0; device < traces->items().size(); ++device) {
        const PV* trace = traces->items()[device];
        if (!trace->isList()) throw Error(name_ + ": device_traces[" + std::to_string(device) + "] is not a list");
        std::int64_t seq = 0;
        for (const PV* e : trace->items()) {
          if ((++polls_ & 0xfff) == 0 && cancel_) cancel_->throwIfCancelled();
          if (!e->isDict())
            throw Error(name_ + ": device_traces[" + std::to_string(device) + "][" + std::to_string(seq) + "] is not a dict");
          const auto action = parseMemAction(strOf(e, "action"));
          if (!action) {
            if (skipped) ++*skipped;
            ++seq;
            continue;
          }
          MemTraceEvent ev;
          ev.device = static_cast<int>(device);
          ev.seq = seq++;
          const std::int64_t us = intOf(e, "time_us");
          ev.tsNs = usToNs(us);
          ev.action = *action;
          ev.addr = static_cast<std::uint64_t>(intOf(e, "addr"));
          ev.size = intOf(e, "size");
          ev.stream = intOf(e, "stream");
          ev.stack = stack(e->get("frames"));
          out_.events.push_back(ev);
        }
      }
    }
    if (segments) {
      for (const PV* g : segments->items()) {
        if (!g->isDict()) throw Error(name_ + ": segments[" + std::to_string(out_.segments.size()) + "] is not a dict");
        MemSegment seg;
        seg.device = static_cast<int>(intOf(g, "device"));
        seg.address = static_cast<std::uint64_t>(intOf(g, "address"));
        seg.totalSize = intOf(g, "total_size");
        seg.allocatedSize = intOf(g, "allocated_size");
        seg.activeSize = intOf(g, "active_size");
        seg.requestedSize = intOf(g, "requested_size");
        seg.stream = intOf(g, "stream");
        seg.segmentType = strOf(g, "segment_type");
        const PV* exp = g->get("is_expandable");
        seg.expandable = exp && exp->isInt() && exp->asBool();
        seg.stack = stack(g->get("frames"));
        const auto segIndex = static_cast<std::int32_t>(out_.segments.size());
        out_.segments.push_back(seg);
        const PV* blocks = g->get("blocks");
        if (!blocks || !blocks->isList()) continue;
        // Blocks tile their segment in order: a block's address is the segment's plus the sizes before
        // it (memory_viz computes it so when a file lacks 'address').
        std::uint64_t addr = seg.address;
        for (const PV* b : blocks->items()) {
          if ((++polls_ & 0xfff) == 0 && cancel_) cancel_->throwIfCancelled();
          if (!b->isDict()) continue;
          MemBlock blk;
          blk.segment = segIndex;
          blk.address = b->get("address") ? static_cast<std::uint64_t>(intOf(b, "address")) : addr;
          blk.size = intOf(b, "size");
          blk.requestedSize = b->get("requested_size") ? intOf(b, "requested_size") : blk.size;
          blk.state = strOf(b, "state");
          blk.stack = stack(b->get("frames"));
          addr = blk.address + static_cast<std::uint64_t>(blk.size);
          out_.blocks.push_back(std::move(blk));
        }
      }
    }
    if (const PV* ann = root.get("external_annotations"); ann && ann->isList()) {
      for (const PV* a : ann->items()) {
        if (!a->isDict()) continue;
        const std::int64_t us = intOf(a, "time_us");
        out_.annotations.push_back(
            {static_cast<int>(intOf(a, "device")), usToNs(us), strOf(a, "stage") != "END", strOf(a, "name")});
      }
    }
    if (const PV* settings = root.get("allocator_settings")) out_.allocatorSettingsJson = toJson(*settings, 0).dump();
    out_.prior = reconstructPriorBlocks(out_);
    return std::move(out_);
  }

 private:
  std::int32_t frame(const PV* f) {
    if (auto it = framesByNode_.find(f); it != framesByNode_.end()) return it->second;
    MemFrame fr{strOf(f, "name"), strOf(f, "filename"), static_cast<int>(intOf(f, "line"))};
    std::string key = fr.name + '\n' + fr.file + '\n' + std::to_string(fr.line);
    auto [it, fresh] = framesByKey_.try_emplace(std::move(key), static_cast<std::int32_t>(out_.frames.size()));
    if (fresh) out_.frames.push_back(std::move(fr));
    framesByNode_.emplace(f, it->second);
    return it->second;
  }

  StackId stack(const PV* frames) {
    if (!frames || !frames->isList() || frames->items().empty()) return -1;
    if (auto it = stacksByNode_.find(frames); it != stacksByNode_.end()) return it->second;
    std::vector<std::int32_t> ids;
    ids.reserve(frames->items().size());
    for (const PV* f : frames->items())
      if (f->isDict()) ids.push_back(frame(f));
    std::string key(reinterpret_cast<const char*>(ids.data()), ids.size() * sizeof(std::int32_t));
    auto [it, fresh] = stacksByKey_.try_emplace(std::move(key), static_cast<StackId>(out_.stacks.size()));
    if (fresh) out_.stacks.push_back(std::move(ids));
    stacksByNode_.emplace(frames, it->second);
    return it->second;
  }

  const std::string& name_;
  const CancelToken* cancel_;
  std::uint64_t polls_ = 0;
  MemorySnapshot out_;
  std::unordered_map<const PV*, std::int32_t> framesByNode_;
  std::unordered_map<std::string, std::int32_t> framesByKey_;
  std::unordered_map<const PV*, StackId> stacksByNode_;
  std::unordered_map<std::string, StackId> stacksByKey_;
};

std::string nowIso() {
  const auto t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

class MemsnapReader final : public TraceReader {
 public:
  std::string_view name() const override { return "memsnap"; }
  std::string_view description() const override {
    return "PyTorch CUDA memory snapshot, torch.cuda.memory._dump_snapshot (.pickle, .pickle.gz)";
  }
  int sniff(std::string_view head) const override {
    if (!looksLikePickle(head)) return 0;
    // The snapshot dict's keys are among the first strings of the file.
    for (const char* key : {"segments", "device_traces"})
      if (head.find(key) != std::string_view::npos) return 100;
    return 30;  // some other pickle: this reader says precisely why it is not a snapshot
  }

  ImportResult import(TraceStore& store, const std::vector<std::string>& files, const ImportOptions& options) const override {
    if (files.empty()) throw Error("import: no snapshot files given");
    if (options.attachTo && files.size() != 1) throw Error("import --attach-to: give one memory snapshot (the rank's)");
    const auto t0 = std::chrono::steady_clock::now();
    ImportResult result;
    ImportWriter out(store);
    std::optional<Run> attachRun;
    if (options.attachTo) {
      attachRun = store.run(options.attachTo);
      if (!attachRun)
        throw Error(store.path() + ": no run with id " + std::to_string(options.attachTo.value()) + " to attach the snapshot to");
      // A rank the run does not have (outside its world) is a mistake, not a new rank; a run made of
      // snapshots alone grows by the ranks attached to it.
      const bool snapshotRun = isMemorySnapshotRun(*attachRun);
      if (!snapshotRun && attachRun->worldSize > 0 && (options.attachRank < 0 || options.attachRank >= attachRun->worldSize))
        throw Error(store.path() + ": run " + std::to_string(attachRun->id.value()) + " has ranks 0.." +
                    std::to_string(attachRun->worldSize - 1) + "; --rank " + std::to_string(options.attachRank) +
                    " is not one of them");
    }
    RunId shared;  // one run for every file unless separateRuns
    int nextRank = 0;
    for (const std::string& path : files) {
      const auto f0 = std::chrono::steady_clock::now();
      ImportFileStats fs;
      fs.path = path;
      std::error_code ec;
      fs.bytes = std::filesystem::file_size(path, ec);
      if (options.progress) options.progress({"read " + std::filesystem::path(path).filename().string(), 0, fs.bytes, "bytes"});
      std::string data;
      {
        auto in = openInput(path);
        data = readAll(*in, 16ull << 30);
      }
      fs.jsonBytes = data.size();
      if (options.cancel) options.cancel->throwIfCancelled();
      MemorySnapshot snap;
      {
        PickleDocument doc = parsePickle(data, path);
        std::string().swap(data);
        snap = SnapshotBuilder(path, options.cancel).build(doc.root(), &fs.skipped);
      }
      if (fs.skipped) fs.skippedByReason["unknown action"] = fs.skipped;
      fs.traceEvents = snap.events.size() + fs.skipped;

      RankId rankId;
      int deviceId = snap.devices().empty() ? 0 : snap.devices().front();
      if (attachRun) {
        for (const Rank& r : store.ranks(attachRun->id))
          if (r.rank == options.attachRank) rankId = r.id;
        if (!rankId) {
          Rank r;
          r.runId = attachRun->id;
          r.rank = options.attachRank;
          r.device = "cuda:" + std::to_string(deviceId);
          r.sourceFile = path;
          rankId = store.addRank(r);
          if (options.attachRank >= attachRun->worldSize) {
            Run grown = *store.run(attachRun->id);
            grown.worldSize = options.attachRank + 1;
            store.updateRun(grown);
          }
        }
        fs.rank = options.attachRank;
        if (result.runIds.empty()) result.runIds.push_back(attachRun->id);
      } else {
        if (!shared || options.separateRuns) {
          Run run;
          run.name = !options.runName.empty() ? options.runName : std::filesystem::path(path).filename().string();
          run.source = RunSource::Kineto;  // an imported file; metadata says which kind
          run.createdAt = nowIso();
          run.status = RunStatus::Completed;
          run.worldSize = 1;
          run.devicesJson = "[\"cuda:" + std::to_string(deviceId) + "\"]";
          JsonValue meta = JsonValue::object();
          meta.set(std::string(kMemorySnapshotRunKey), JsonValue::boolean(true));
          run.metadataJson = meta.dump();
          shared = store.createRun(run);
          result.runIds.push_back(shared);
          nextRank = 0;
        }
        Rank r;
        r.runId = shared;
        r.rank = nextRank++;
        r.device = "cuda:" + std::to_string(deviceId);
        r.sourceFile = path;
        rankId = store.addRank(r);
        fs.rank = r.rank;
        if (!options.separateRuns && nextRank > 1) {
          Run run = *store.run(shared);
          run.worldSize = nextRank;
          store.updateRun(run);
        }
      }
      if (options.progress)
        options.progress({"store " + std::filesystem::path(path).filename().string(), 0, snap.events.size(), "events"});
      writeMemorySnapshot(store, rankId, snap, path, options.cancel);
      fs.memoryEvents = snap.events.size();
      fs.events = snap.events.size();
      fs.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - f0).count();
      ImportLogEntry log;
      log.runId = attachRun ? attachRun->id : shared;
      log.rank = fs.rank;
      log.path = path;
      log.format = std::string(name());
      log.bytes = static_cast<std::int64_t>(fs.bytes);
      log.events = static_cast<std::int64_t>(fs.events);
      log.skipped = static_cast<std::int64_t>(fs.skipped);
      for (const auto& [k, v] : fs.skippedByReason) log.skippedByReason[k] = static_cast<std::int64_t>(v);
      log.seconds = fs.seconds;
      out.addImportLog(log);
      result.events += fs.events;
      result.bytes += fs.bytes;
      result.jsonBytes += fs.jsonBytes;
      result.files.push_back(std::move(fs));
    }
    if (options.cancel) options.cancel->throwIfCancelled();
    out.commit();
    result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return result;
  }
};

}  // namespace

MemorySnapshot parseMemorySnapshot(std::string_view pickle, const std::string& name, const PickleLimits& limits,
                                   const CancelToken* cancel, std::uint64_t* skipped) {
  const PickleDocument doc = parsePickle(pickle, name, limits);
  return SnapshotBuilder(name, cancel).build(doc.root(), skipped);
}

std::unique_ptr<TraceReader> makeMemsnapReader() { return std::make_unique<MemsnapReader>(); }

}  // namespace shardscope::core
