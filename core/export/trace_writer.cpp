#include "core/export/trace_writer.h"

#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "core/storage/open_guard.h"
#include "core/util/json_reader.h"
#include "core/util/error.h"
#include "core/util/json.h"

namespace shardscope::core::exporting {
namespace {

namespace fs = std::filesystem;

bool startsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// A GPU track's device: recorded, else Kineto's pid (= device index), else 0.
std::int64_t gpuDevice(const Track& tr) {
  if (tr.device) return *tr.device;
  if (tr.pid && *tr.pid >= 0 && *tr.pid < 1024) return *tr.pid;
  return 0;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Formatting

void appendInt(std::string& out, std::int64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

void appendMicros(std::string& out, std::int64_t ns) {
  // Unsigned magnitude so INT64_MIN cannot overflow; Kineto's "{ns/1000}.{ns%1000:03}" otherwise.
  std::uint64_t u;
  if (ns < 0) {
    out.push_back('-');
    u = 0 - static_cast<std::uint64_t>(ns);
  } else {
    u = static_cast<std::uint64_t>(ns);
  }
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, u / 1000);
  out.append(buf, r.ptr);
  const auto f = static_cast<unsigned>(u % 1000);
  const char frac[4] = {'.', static_cast<char>('0' + f / 100), static_cast<char>('0' + f / 10 % 10),
                        static_cast<char>('0' + f % 10)};
  out.append(frac, 4);
}

bool appendDouble(std::string& out, double v) {
  if (!std::isfinite(v)) return false;
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  if (r.ec != std::errc()) return false;
  out.append(buf, r.ptr);
  return true;
}

// ---------------------------------------------------------------------------------------------
// OutputFile

struct OutputFile::Zlib {
  z_stream zs{};
  bool live = false;
  std::vector<unsigned char> out;
};

OutputFile::OutputFile(std::string path, bool gzip, int level) : path_(std::move(path)) {
  // The rename at the end would put the trace in the database's place.
  refuseToReplaceDatabase(path_, "writing the trace there");
  const fs::path p(path_);
  // Hidden and not ending in .json/.gz, so a leftover from a killed process is never taken for a trace
  // (HTA and our importer pick up every *.json / *.gz of a directory).
  static std::atomic<unsigned> counter{0};
  const auto stamp = static_cast<unsigned long long>(std::chrono::steady_clock::now().time_since_epoch().count());
  char suffix[48];
  const int n = std::snprintf(suffix, sizeof suffix, ".tmp%llx-%u", stamp & 0xffffffffffULL, counter.fetch_add(1));
  const std::string hidden = "." + p.filename().string() + std::string(suffix, static_cast<std::size_t>(n));
  tmpPath_ = (p.parent_path() / hidden).string();
  // "x": never clobber a file we did not create (and never delete one on cleanup).
  file_ = std::fopen(tmpPath_.c_str(), "wbx");
  if (!file_) fail("cannot create file", errno);
  if (gzip) {
    z_ = std::make_unique<Zlib>();
    const int lvl = std::clamp(level, 0, 9);
    // windowBits 15 + 16: a gzip wrapper, as gzip(1), Python's gzip and Perfetto expect.
    if (deflateInit2(&z_->zs, lvl, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
      fail("cannot initialise gzip compression", 0);
    z_->live = true;
    z_->out.resize(256u << 10);
  }
  buf_.reserve(kFlushBytes + (64u << 10));
}

OutputFile::~OutputFile() {
  if (z_ && z_->live) deflateEnd(&z_->zs);
  if (file_) std::fclose(file_);
  if (file_ || closed_) {
    if (!committed_) std::remove(tmpPath_.c_str());
  }
}

void OutputFile::fail(const std::string& what, int err) const {
  std::string msg = path_ + ": " + what;
  if (err) msg += std::string(": ") + std::strerror(err);
  throw Error(msg);
}

void OutputFile::writeRaw(const void* p, std::size_t n) {
  if (n == 0) return;
  errno = 0;
  if (std::fwrite(p, 1, n, file_) != n) fail("write failed", errno ? errno : EIO);
  written_ += n;
}

void OutputFile::deflateBuffer(bool finish) {
  z_stream& zs = z_->zs;
  zs.next_in = reinterpret_cast<Bytef*>(buf_.data());
  zs.avail_in = static_cast<uInt>(buf_.size());
  for (;;) {
    zs.next_out = z_->out.data();
    zs.avail_out = static_cast<uInt>(z_->out.size());
    const int rc = deflate(&zs, finish ? Z_FINISH : Z_NO_FLUSH);
    if (rc == Z_STREAM_ERROR) fail("gzip compression failed", 0);
    writeRaw(z_->out.data(), z_->out.size() - zs.avail_out);
    if (finish) {
      if (rc == Z_STREAM_END) break;
    } else if (zs.avail_in == 0 && zs.avail_out != 0) {
      break;
    }
  }
}

void OutputFile::flush() {
  if (buf_.empty()) return;
  if (z_)
    deflateBuffer(false);
  else
    writeRaw(buf_.data(), buf_.size());
  buf_.clear();
}

void OutputFile::close() {
  if (closed_) return;
  if (z_) {
    deflateBuffer(true);
    buf_.clear();
    deflateEnd(&z_->zs);
    z_->live = false;
  } else {
    flush();
  }
  errno = 0;
  // Disk-full often surfaces only here, when stdio pushes its last block.
  if (std::fflush(file_) != 0) fail("write failed", errno ? errno : EIO);
  std::FILE* f = file_;
  file_ = nullptr;
  closed_ = true;
  if (std::fclose(f) != 0) fail("write failed", errno ? errno : EIO);
}

void OutputFile::commit() {
  if (!closed_) close();
  std::error_code ec;
  fs::rename(tmpPath_, path_, ec);
  if (ec) throw Error(path_ + ": cannot move the finished file into place: " + ec.message());
  committed_ = true;
}

// ---------------------------------------------------------------------------------------------
// RunContext

RunContext::RunContext(TraceStore& s, RunId runId, const ExportOptions& o) : store(s), options(o), summary(s.summary(runId)) {
  for (auto& pg : s.processGroups(runId)) groups.emplace(pg.id, pg);
  steps = s.steps(runId);
}

void RunContext::checkpoint() {
  sinceCheck_ = 0;
  if (options.cancel) options.cancel->throwIfCancelled();
  if (options.progress) {
    Progress p;
    p.stage = stage;
    p.done = eventsDone;
    p.total = static_cast<std::uint64_t>(std::max<std::int64_t>(summary.eventCount, 0));
    p.unit = "events";
    options.progress(p);
  }
}

std::optional<TimeNs> rankMinNs(RunContext& ctx, const Rank& rank, bool withMemory) {
  std::optional<TimeNs> m;
  auto take = [&](TimeNs v) { m = m ? std::min(*m, v) : v; };
  // Track statistics cover events and counter samples.
  for (const auto& t : ctx.summary.tracks)
    if (t.track.rankId == rank.id && t.minStartNs) take(*t.minStartNs);
  if (auto f = ctx.store.firstFlowNs(rank.id)) take(*f);
  if (withMemory) {
    if (auto f = ctx.store.firstMemoryEventNs(rank.id)) take(*f);
  }
  return m;
}

// ---------------------------------------------------------------------------------------------
// RankWriter

RankWriter::RankWriter(RunContext& ctx, const Rank& rank, Layout layout, TimeNs origin, OutputFile& out, bool& first)
    : ctx_(ctx), rank_(rank), layout_(layout), origin_(origin), out_(out), first_(first) {
  setupLanes();
}

std::string& RankWriter::begin() {
  std::string& b = out_.buffer();
  if (first_)
    first_ = false;
  else
    b += ",\n";
  return b;
}

void RankWriter::end() { out_.maybeFlush(); }

std::int64_t RankWriter::syntheticTid(std::int64_t pid, std::int64_t from) {
  auto& used = usedTids_[pid];
  std::int64_t t = from;
  while (used.count(t)) ++t;
  used.insert(t);
  return t;
}

std::uint32_t RankWriter::addLane(std::int64_t pid, std::int64_t tid, std::string name) {
  Lane l;
  l.pid = pid;
  l.tid = tid;
  l.name = name.empty() ? "thread " + std::to_string(tid) : std::move(name);
  lanes_.push_back(std::move(l));
  return static_cast<std::uint32_t>(lanes_.size() - 1);
}

void RankWriter::setupLanes() {
  const bool perfetto = layout_ == Layout::Perfetto;
  for (const auto& ts : ctx_.summary.tracks) {
    if (ts.track.rankId != rank_.id) continue;
    if (ts.track.kind == TrackKind::Counter) {
      counters_.push_back(&ts);
      continue;
    }
    TrackOut t;
    t.summary = &ts;
    t.gpu = ts.track.kind == TrackKind::GpuStream;
    switch (ts.track.kind) {
      case TrackKind::GpuStream:
        t.defaultCat = "kernel";
        break;
      case TrackKind::Python:
        t.defaultCat = "python_function";
        break;
      case TrackKind::Comm:
        t.defaultCat = "collective_comm";
        break;
      default:
        t.defaultCat = "cpu_op";
        break;
    }
    trackIndex_[ts.track.id] = tracks_.size();
    tracks_.push_back(t);
  }

  if (perfetto) {
    hostPid_ = static_cast<std::int64_t>(rank_.rank) * 100;
  } else {
    // The rank's main process: the CPU pid with the most events (python tracks as a fallback).
    std::map<std::int64_t, std::int64_t> weight;
    for (const auto& t : tracks_)
      if (t.summary->track.kind == TrackKind::CpuThread && t.summary->track.pid)
        weight[*t.summary->track.pid] += t.summary->eventCount + 1;
    if (weight.empty())
      for (const auto& t : tracks_)
        if (t.summary->track.kind == TrackKind::Python && t.summary->track.pid)
          weight[*t.summary->track.pid] += t.summary->eventCount + 1;
    std::int64_t best = -1;
    for (const auto& [pid, w] : weight)
      if (w > best) {
        best = w;
        hostPid_ = pid;
      }
    if (weight.empty()) {
      // No pid recorded (runs from our runtime): a small pid that no GPU of the rank uses, since
      // Kineto's GPU pid is the device index and "GPU 0" must not also hold the CPU threads.
      std::set<std::int64_t> devices;
      for (const auto& t : tracks_)
        if (t.gpu) devices.insert(gpuDevice(t.summary->track));
      hostPid_ = 0;
      while (devices.count(hostPid_)) ++hostPid_;
    }
  }

  struct Want {
    std::int64_t pid = 0;
    std::optional<std::int64_t> tid;
  };
  std::vector<Want> want(tracks_.size());
  for (std::size_t i = 0; i < tracks_.size(); ++i) {
    TrackOut& t = tracks_[i];
    const Track& tr = t.summary->track;
    Want& w = want[i];
    if (perfetto) {
      const bool gpuSide = tr.kind == TrackKind::GpuStream || (tr.kind == TrackKind::Comm && tr.device);
      w.pid = gpuSide ? hostPid_ + 1 + gpuDevice(tr) : hostPid_;
      w.tid = tr.tid ? tr.tid : (tr.kind == TrackKind::GpuStream ? tr.stream : std::nullopt);
    } else if (tr.kind == TrackKind::GpuStream) {
      // Kineto: pid = device, tid = stream. The original tid wins when there is one, so a cuda_sync
      // track (tid = stream + 1,000,000) does not merge into its stream on re-import.
      w.pid = gpuDevice(tr);
      w.tid = tr.tid ? tr.tid : tr.stream;
      t.original = tr.tid.has_value();
    } else {
      w.pid = tr.pid.value_or(hostPid_);
      w.tid = tr.tid;
      t.original = tr.pid && tr.tid;
    }
    if (w.tid) usedTids_[w.pid].insert(*w.tid);
  }

  // CPU threads name their lane before python tracks sharing it (Kineto puts both on one thread).
  auto order = [](TrackKind k) {
    switch (k) {
      case TrackKind::CpuThread:
        return 0;
      case TrackKind::Comm:
        return 1;
      case TrackKind::GpuStream:
        return 2;
      default:
        return 3;
    }
  };
  std::vector<std::size_t> idx(tracks_.size());
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) {
    return order(tracks_[a].summary->track.kind) < order(tracks_[b].summary->track.kind);
  });

  std::map<std::pair<std::int64_t, std::int64_t>, std::uint32_t> laneOf;
  std::vector<bool> laneOriginal;
  for (std::size_t i : idx) {
    TrackOut& t = tracks_[i];
    const Track& tr = t.summary->track;
    const Want& w = want[i];
    if (w.tid) {
      const auto key = std::make_pair(w.pid, *w.tid);
      auto it = laneOf.find(key);
      if (it == laneOf.end()) {
        t.lane = addLane(w.pid, *w.tid, tr.name);
        laneOf.emplace(key, t.lane);
        laneOriginal.push_back(t.original);
        continue;
      }
      // Two tracks that shared one thread in the source file share it again (Kineto layout only);
      // any other clash (and every clash in Perfetto, where slices must nest per thread) gets a
      // thread of its own.
      if (!perfetto && t.original && laneOriginal[it->second]) {
        t.lane = it->second;
        continue;
      }
      t.lane = addLane(w.pid, syntheticTid(w.pid, 1), tr.name + " (" + std::string(toString(tr.kind)) + ")");
      laneOriginal.push_back(false);
      continue;
    }
    t.lane = addLane(w.pid, syntheticTid(w.pid, 1), tr.name);
    laneOriginal.push_back(false);
  }
}

std::uint32_t RankWriter::mainLane() {
  if (mainLane_) return *mainLane_;
  const TrackOut* best = nullptr;
  for (const auto& t : tracks_) {
    if (t.summary->track.kind != TrackKind::CpuThread || lanes_[t.lane].pid != hostPid_) continue;
    if (!best || t.summary->eventCount > best->summary->eventCount) best = &t;
  }
  if (best) {
    mainLane_ = best->lane;
  } else {
    mainLane_ = addLane(hostPid_, syntheticTid(hostPid_, 1), "main");
    writeThreadName(lanes_[*mainLane_]);
  }
  return *mainLane_;
}

std::uint32_t RankWriter::placeSlice(TrackOut& t, TimeNs start, TimeNs endNs) {
  // Events arrive by start, then end descending, so a lane's open slices form a stack: close those
  // that ended, then the event nests iff the innermost open slice outlasts it.
  auto fits = [&](Lane& l) {
    while (!l.open.empty() && l.open.back() <= start) l.open.pop_back();
    if (!l.open.empty() && l.open.back() < endNs) return false;
    l.open.push_back(endNs);
    return true;
  };
  if (fits(lanes_[t.lane])) return t.lane;
  for (std::uint32_t o : t.overflow)
    if (fits(lanes_[o])) return o;
  const Lane& base = lanes_[t.lane];
  const std::int64_t pid = base.pid;
  auto [it, fresh] = nextOverflowTid_.try_emplace(pid, 1'000'001);
  std::int64_t tid = it->second;
  auto& used = usedTids_[pid];
  while (used.count(tid)) ++tid;
  used.insert(tid);
  it->second = tid + 1;
  const std::uint32_t lane = addLane(pid, tid, base.name + " (overlap " + std::to_string(t.overflow.size() + 1) + ")");
  t.overflow.push_back(lane);
  lanes_[lane].open.push_back(endNs);
  writeThreadName(lanes_[lane]);
  return lane;
}

void RankWriter::writeThreadName(const Lane& lane) {
  std::string& b = begin();
  b += R"({"ph":"M","name":"thread_name","pid":)";
  appendInt(b, lane.pid);
  b += R"(,"tid":)";
  appendInt(b, lane.tid);
  b += R"(,"args":{"name":)";
  appendJsonString(b, lane.name);
  b += "}}";
  end();
}

void RankWriter::writeProcessMeta(std::int64_t pid, std::string_view what, std::string_view value, bool isString) {
  std::string& b = begin();
  b += R"({"ph":"M","name":")";
  b += what;
  b += R"(","pid":)";
  appendInt(b, pid);
  b += R"(,"tid":0,"args":{")";
  b += what == "process_name" ? "name" : what == "process_labels" ? "labels" : "sort_index";
  b += R"(":)";
  if (isString)
    appendJsonString(b, value);
  else
    b += value;
  b += "}}";
  end();
}

void RankWriter::writeMetadata() {
  // pid -> GPU device, for the processes that hold GPU streams.
  std::map<std::int64_t, std::int64_t> gpuPids;
  std::set<std::int64_t> pids{hostPid_};
  for (const auto& t : tracks_) {
    const Lane& l = lanes_[t.lane];
    pids.insert(l.pid);
    if (t.gpu) {
      const Track& tr = t.summary->track;
      const std::int64_t dev = tr.device ? *tr.device : (layout_ == Layout::Perfetto ? l.pid - hostPid_ - 1 : l.pid);
      gpuPids.emplace(l.pid, dev);
    }
  }
  if (layout_ == Layout::Perfetto) {
    const std::string r = std::to_string(rank_.rank);
    for (std::int64_t pid : pids) {
      auto g = gpuPids.find(pid);
      const bool gpu = g != gpuPids.end() || pid != hostPid_;
      const std::int64_t dev = g != gpuPids.end() ? g->second : pid - hostPid_ - 1;
      writeProcessMeta(pid, "process_name", gpu ? "rank " + r + " GPU " + std::to_string(dev) : "rank " + r + " host", true);
      writeProcessMeta(pid, "process_sort_index", std::to_string(pid), false);
    }
  } else {
    // Names as the source file had them (kept by the importer), else Kineto's defaults.
    JsonValue processes;
    try {
      const JsonValue meta = parseJson(rank_.metadataJson, "rank metadata");
      if (const JsonValue* p = meta.find("processes"); p && p->isObject()) processes = *p;
    } catch (const Error&) {
    }
    for (std::int64_t pid : pids) {
      auto g = gpuPids.find(pid);
      const bool gpu = g != gpuPids.end();
      const std::string label = gpu ? "GPU " + std::to_string(g->second) : "CPU";
      std::string name = label, labels = label;
      if (const JsonValue* p = processes.find(std::to_string(pid)); p && p->isObject()) {
        const JsonValue* n = p->find("name");
        if (n && n->isString() && !n->asString().empty()) name = n->asString();
        const JsonValue* l = p->find("labels");
        if (l && l->isString() && !l->asString().empty()) labels = l->asString();
      }
      writeProcessMeta(pid, "process_name", name, true);
      writeProcessMeta(pid, "process_labels", labels, true);
      if (gpu) writeProcessMeta(pid, "process_sort_index", std::to_string(0x1000000 + g->second), false);
    }
  }
  for (const auto& l : lanes_) writeThreadName(l);
}

std::int64_t RankWriter::flowId(std::int64_t id) const {
  if (layout_ == Layout::Kineto) return id;
  // Flow ids are only unique within one file: put the rank above bit 40.
  constexpr std::uint64_t kMask = (std::uint64_t{1} << 40) - 1;
  const std::uint64_t r = static_cast<std::uint64_t>(rank_.rank) << 40;
  return static_cast<std::int64_t>(r | (static_cast<std::uint64_t>(id) & kMask));
}

void RankWriter::writeSynthesizedArgs(const TrackOut& t, const Event& e) {
  std::string& b = out_.buffer();
  const std::size_t mark = b.size();
  b += R"(,"args":{)";
  bool any = false;
  auto key = [&](std::string_view k) {
    if (any) b.push_back(',');
    any = true;
    b += k;
  };
  if (e.externalId) {
    key(R"("External id":)");
    appendInt(b, *e.externalId);
  }
  if (t.gpu) {
    // Only GPU rows carry device/stream: a numeric stream on a CPU row makes HTA count it as GPU work.
    const Track& tr = t.summary->track;
    if (tr.device) {
      key(R"("device":)");
      appendInt(b, *tr.device);
    }
    // Kineto writes no stream arg on gpu_user_annotation rows, so HTA leaves them out; the flag
    // records whether the source row had one.
    const bool streamArg = (e.flags & EventFlags::HtaGpuRow) || e.cat != "gpu_user_annotation";
    if (tr.stream && streamArg) {
      key(R"("stream":)");
      appendInt(b, *tr.stream);
    }
  }
  if (e.correlation) {
    key(R"("correlation":)");
    appendInt(b, *e.correlation);
  }
  const bool collective = e.collOp != CollectiveOp::None && ((e.flags & EventFlags::CollectiveMeta) || e.bytes ||
                                                             !e.dtype.empty() || e.groupSize || e.processGroupId);
  if (collective) {
    // c10d spellings (what record_param_comms and Kineto write); our importer maps them back.
    static constexpr std::string_view kNames[] = {"",
                                                  "allreduce",
                                                  "_allgather_base",
                                                  "_reduce_scatter_base",
                                                  "alltoall_base",
                                                  "broadcast",
                                                  "reduce",
                                                  "send",
                                                  "recv",
                                                  "sendrecv",
                                                  "barrier",
                                                  "gather",
                                                  "scatter",
                                                  "other"};
    const auto op = static_cast<std::size_t>(e.collOp);
    key(R"("Collective name":)");
    appendJsonString(b, op < std::size(kNames) ? kNames[op] : std::string_view("other"));
    const int size = dtypeSize(e.dtype);
    if (e.bytes && size > 0) {
      // bytes = Out nelems x size for gathers, In nelems x size otherwise (traces.md §1.7).
      const std::int64_t n = *e.bytes / size;
      const std::int64_t g = e.groupSize.value_or(0);
      std::int64_t in = n, outN = n;
      if (e.collOp == CollectiveOp::AllGather || e.collOp == CollectiveOp::Gather) {
        if (g > 0 && n % g == 0) in = n / g;
      } else if (e.collOp == CollectiveOp::ReduceScatter || e.collOp == CollectiveOp::Scatter) {
        if (g > 0 && n % g == 0) outN = n / g;
      }
      key(R"("In msg nelems":)");
      appendInt(b, in);
      key(R"("Out msg nelems":)");
      appendInt(b, outN);
    }
    if (e.groupSize) {
      key(R"("Group size":)");
      appendInt(b, *e.groupSize);
    }
    if (!e.dtype.empty()) {
      key(R"("dtype":)");
      appendJsonString(b, e.dtype);
    }
    if (e.processGroupId) {
      auto it = ctx_.groups.find(*e.processGroupId);
      if (it != ctx_.groups.end()) {
        key(R"("Process Group Name":)");
        appendJsonString(b, it->second.name);
        if (!it->second.description.empty()) {
          key(R"("Process Group Description":)");
          appendJsonString(b, it->second.description);
        }
      }
    }
  }
  if (any)
    b.push_back('}');
  else
    b.resize(mark);
}

void RankWriter::writeEvent(TrackOut& t, const Event& e, bool cpuSide) {
  const bool instant = (e.flags & EventFlags::Instant) != 0;
  std::uint32_t laneIdx = t.lane;
  if (layout_ == Layout::Perfetto && !instant) laneIdx = placeSlice(t, e.startNs, e.endNs);
  const Lane& lane = lanes_[laneIdx];
  std::string& b = begin();
  b += instant ? R"({"ph":"i","s":"t","cat":)" : R"({"ph":"X","cat":)";
  appendJsonString(b, e.cat.empty() ? t.defaultCat : std::string_view(e.cat));
  b += R"(,"name":)";
  appendJsonString(b, e.name);
  b += R"(,"pid":)";
  appendInt(b, lane.pid);
  b += R"(,"tid":)";
  appendInt(b, lane.tid);
  b += R"(,"ts":)";
  appendMicros(b, e.startNs - origin_);
  if (!instant) {
    b += R"(,"dur":)";
    appendMicros(b, e.endNs - e.startNs);
  }
  if (!e.argsJson.empty()) {
    // The source file's own args, as the importer stored them (valid, compact JSON). A collective
    // whose args lack Kineto's collective fields (our runtime stores its timing args only: issue,
    // queue, wait) gets them added from the columns, or HTA cannot size it.
    const bool addCollective = e.collOp != CollectiveOp::None && e.argsJson.size() >= 2 && e.argsJson.back() == '}' &&
                               e.argsJson.find(R"("Collective name")") == std::string_view::npos;
    const std::size_t mark = b.size();
    if (addCollective) writeSynthesizedArgs(t, e);
    if (b.size() > mark) {
      constexpr std::string_view kOpen = R"(,"args":{)";
      const std::string added = b.substr(mark + kOpen.size());  // "fields}"
      b.resize(mark);
      b += R"(,"args":)";
      b.append(e.argsJson.data(), e.argsJson.size() - 1);  // "{stored" without its '}'
      if (e.argsJson.size() > 2) b.push_back(',');
      b += added;
    } else {
      b += R"(,"args":)";
      b += e.argsJson;
    }
  } else {
    writeSynthesizedArgs(t, e);
  }
  b.push_back('}');
  end();
  ++events_;
  ++ctx_.eventsDone;
  ctx_.tick();

  if (cpuSide) {
    if (e.correlation) launches_.push_back(Launch{*e.correlation, e.startNs, laneIdx, 0});
    if (e.step && e.cat == "user_annotation" && startsWith(e.name, "ProfilerStep")) stepsSeen_.insert(*e.step);
    return;
  }
  if (!e.correlation) return;
  // ac2g: one s/f pair per correlation, to its first GPU event (a graph launch shares one id).
  auto it = std::lower_bound(launches_.begin(), launches_.end(), *e.correlation,
                             [](const Launch& l, std::int64_t c) { return l.correlation < c; });
  if (it == launches_.end() || it->correlation != *e.correlation || it->used) return;
  it->used = 1;
  const std::int64_t id = flowId(*e.correlation);
  const Lane& src = lanes_[it->lane];
  std::string& f = begin();
  f += R"({"ph":"s","id":)";
  appendInt(f, id);
  f += R"(,"pid":)";
  appendInt(f, src.pid);
  f += R"(,"tid":)";
  appendInt(f, src.tid);
  f += R"(,"ts":)";
  appendMicros(f, it->ts - origin_);
  f += R"(,"cat":"ac2g","name":"ac2g"})";
  f += ",\n";
  f += R"({"ph":"f","id":)";
  appendInt(f, id);
  f += R"(,"pid":)";
  appendInt(f, lanes_[laneIdx].pid);
  f += R"(,"tid":)";
  appendInt(f, lanes_[laneIdx].tid);
  f += R"(,"ts":)";
  appendMicros(f, e.startNs - origin_);
  f += R"(,"cat":"ac2g","name":"ac2g","bp":"e"})";
  end();
}

void RankWriter::writeTrack(TrackOut& t, bool cpuSide) {
  ctx_.store.forEachEvent(
      t.summary->track.id, [&](const Event& e) { writeEvent(t, e, cpuSide); }, true);
}

void RankWriter::writeMissingSteps() {
  // Runs recorded by our runtime have step windows but no ProfilerStep#N slice; HTA needs the slice.
  std::optional<TrackOut> stepsTrack;
  for (const auto& s : ctx_.steps) {
    if (s.rankId != rank_.id || stepsSeen_.count(s.step)) continue;
    std::uint32_t laneIdx;
    if (layout_ == Layout::Kineto) {
      laneIdx = mainLane();
    } else {
      // Written after the main thread's slices, so they cannot join its nesting check: own thread.
      if (!stepsTrack) {
        stepsTrack.emplace();
        stepsTrack->lane = addLane(hostPid_, syntheticTid(hostPid_, 1), "steps");
        writeThreadName(lanes_[stepsTrack->lane]);
      }
      laneIdx = placeSlice(*stepsTrack, s.startNs, s.endNs);
    }
    const Lane& lane = lanes_[laneIdx];
    std::string& b = begin();
    b += R"({"ph":"X","cat":"user_annotation","name":"ProfilerStep#)";
    appendInt(b, s.step);
    b += R"(","pid":)";
    appendInt(b, lane.pid);
    b += R"(,"tid":)";
    appendInt(b, lane.tid);
    b += R"(,"ts":)";
    appendMicros(b, s.startNs - origin_);
    b += R"(,"dur":)";
    appendMicros(b, s.endNs - s.startNs);
    b.push_back('}');
    end();
  }
}

void RankWriter::writeFlows() {
  std::unordered_map<Id, std::string> strings;
  auto str = [&](Id id) -> const std::string& {
    auto it = strings.find(id);
    if (it == strings.end()) it = strings.emplace(id, ctx_.store.string(id)).first;
    return it->second;
  };
  // By flow id: the flows_rank index order, streamed without a sort.
  ctx_.store.forEachFlow(
      rank_.id,
      [&](const Flow& f) {
        auto ti = trackIndex_.find(f.trackId);
        const Lane& lane = lanes_[ti != trackIndex_.end() ? tracks_[ti->second].lane : mainLane()];
        std::string& b = begin();
        b += R"({"ph":")";
        b.push_back(f.phase);
        b += R"(","id":)";
        appendInt(b, flowId(f.flowId));
        b += R"(,"pid":)";
        appendInt(b, lane.pid);
        b += R"(,"tid":)";
        appendInt(b, lane.tid);
        b += R"(,"ts":)";
        appendMicros(b, f.tsNs - origin_);
        if (f.catId) {
          b += R"(,"cat":)";
          appendJsonString(b, str(f.catId));
        }
        if (f.nameId) {
          b += R"(,"name":)";
          appendJsonString(b, str(f.nameId));
        }
        if (f.bindEnclosing) b += R"(,"bp":"e")";
        b.push_back('}');
        end();
        ctx_.tick();
      },
      FlowOrder::FlowId);
}

void RankWriter::writeCounters() {
  if (counters_.empty()) return;
  // The importer rebuilds the "memory allocated/reserved" tracks from the [memory] records.
  const bool haveMemory = layout_ == Layout::Kineto && ctx_.store.hasMemoryEvents(rank_.id);
  for (const TrackSummary* ts : counters_) {
    const std::string& name = ts->track.name;
    if (haveMemory && startsWith(name, "memory ")) continue;
    const std::int64_t pid = (layout_ == Layout::Kineto && ts->track.pid) ? *ts->track.pid : hostPid_;
    // Derived tracks (memory curves) have no rows of their own: the store reads their samples from
    // what they derive from.
    ctx_.store.forEachCounterSample(ts->track.id, [&](TimeNs tsNs, double v) {
      if (!std::isfinite(v)) return;  // JSON has no inf/NaN
      std::string& b = begin();
      b += R"({"ph":"C","name":)";
      appendJsonString(b, name);
      b += R"(,"pid":)";
      appendInt(b, pid);
      b += R"(,"ts":)";
      appendMicros(b, tsNs - origin_);
      b += R"(,"args":{"value":)";
      appendDouble(b, v);
      b += "}}";
      end();
      ctx_.tick();
    });
  }
}

void RankWriter::writeMemory() {
  const Lane& lane = lanes_[mainLane()];
  ctx_.store.forEachMemoryEvent(rank_.id, [&](const MemoryEvent& m) {
    std::string& b = begin();
    b += m.outOfMemory ? R"({"ph":"i","s":"t","cat":"cpu_instant_event","name":"[OutOfMemory]","pid":)"
                       : R"({"ph":"i","s":"t","cat":"cpu_instant_event","name":"[memory]","pid":)";
    appendInt(b, lane.pid);
    b += R"(,"tid":)";
    appendInt(b, lane.tid);
    b += R"(,"ts":)";
    appendMicros(b, m.tsNs - origin_);
    b += R"(,"args":{"Total Reserved":)";
    appendInt(b, m.totalReserved);
    b += R"(,"Total Allocated":)";
    appendInt(b, m.totalAllocated);
    b += R"(,"Bytes":)";
    appendInt(b, m.bytes);
    if (!m.outOfMemory) {
      b += R"(,"Addr":)";
      appendInt(b, m.addr);
    }
    b += R"(,"Device Id":)";
    appendInt(b, m.deviceId);
    b += R"(,"Device Type":)";
    appendInt(b, m.deviceType);
    b += "}}";
    end();
    ctx_.tick();
  });
}

void RankWriter::write() {
  writeMetadata();
  for (auto& t : tracks_)
    if (!t.gpu) writeTrack(t, true);
  // Sorted once so every GPU event finds its launch by binary search; stable keeps the first
  // CPU event of a correlation in front.
  std::stable_sort(launches_.begin(), launches_.end(),
                   [](const Launch& a, const Launch& b) { return a.correlation < b.correlation; });
  for (auto& t : tracks_)
    if (t.gpu) writeTrack(t, false);
  launches_ = {};
  writeMissingSteps();
  writeFlows();
  writeCounters();
  if (layout_ == Layout::Kineto) writeMemory();
}

}  // namespace shardscope::core::exporting
