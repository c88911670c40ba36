#include "core/import/kineto_parser.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "core/import/kineto_importer.h"
#include "core/model/kernel_classify.h"
#include "core/util/error.h"
#include "core/util/json.h"

namespace shardscope::core::kineto {

std::optional<std::int64_t> parseInt(std::string_view s) {
  // Fast path: plain decimal integers (ids, correlations, sizes) of up to 18 digits.
  {
    std::size_t i = (!s.empty() && s[0] == '-') ? 1 : 0;
    const std::size_t n = s.size();
    if (n > i && n - i <= 18) {
      std::int64_t v = 0;
      for (; i < n; ++i) {
        const unsigned d = static_cast<unsigned>(s[i] - '0');
        if (d > 9) break;
        v = v * 10 + static_cast<std::int64_t>(d);
      }
      if (i == n) return s[0] == '-' ? -v : v;
    }
  }
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec == std::errc() && p == s.data() + s.size()) return v;
  double d = 0;
  auto [p2, ec2] = std::from_chars(s.data(), s.data() + s.size(), d);
  if (ec2 == std::errc() && p2 == s.data() + s.size() && std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e18)
    return static_cast<std::int64_t>(d);
  return std::nullopt;
}

std::string fileLabel(const std::string& path) { return std::filesystem::path(path).filename().string(); }

void Batch::clear() {
  file = 0;
  worker = 0;
  seq = 0;
  warnings.clear();
  newStrings.clear();
  newTracks.clear();
  newGroups.clear();
  steps.clear();
  events.clear();
  args.clear();
  counters.clear();
  flows.clear();
  memory.clear();
  memoryTracks.clear();
  fileOffset = 0;
  fileDone = false;
  header = FileHeader{};
  stats = ImportFileStats{};
  error = nullptr;
  last = false;
}

namespace {

bool isGpuCat(std::string_view cat) {
  return cat == "kernel" || cat == "Kernel" || cat == "gpu_memcpy" || cat == "Memcpy" || cat == "gpu_memset" || cat == "Memset" ||
         cat == "gpu_user_annotation" || cat == "cuda_sync" || cat == "mtia_ccp_events";
}

bool isKernelCat(std::string_view cat) { return cat == "kernel" || cat == "Kernel"; }

}  // namespace

// Parses segments of events (on one of several threads). Its string, track and process-group ids are
// local to it; the writer maps them to database ids.
class KinetoParser::Impl {
 public:
  Impl(const ImportOptions& opt, int worker, const std::vector<std::string>& files)
      : opt_(opt), worker_(worker), files_(files), reader_(opt), ev_(reader_.event()) {}

  std::unique_ptr<Batch> parseSegment(const Segment& seg) {
    beginBatch(seg.file, seg.seq, seg.baseTimeNs);
    const std::size_t n = seg.localStart.size();
    for (std::size_t k = 0; k < n; ++k) {
      // Event k is followed by the ',' (or the final ']') the splitter put after it.
      const std::size_t from = seg.localStart[k];
      const std::size_t to = (k + 1 < n ? seg.localStart[k + 1] : seg.text.size()) - 1;
      addEvent(std::string_view(seg.text.data() + from, to - from), seg.fileStart[k], seg.firstEvent + k);
    }
    return takeBatch(seg.fileOffset);
  }

  void setPool(BatchPool* pool) { recycled_ = pool; }

  void beginBatch(int file, std::uint64_t seq, std::optional<std::int64_t> baseTimeNs) {
    if (file != file_ || !started_) {
      // Track and group ids are per file; strings are shared by all files of the import.
      started_ = true;
      file_ = file;
      path_ = files_[static_cast<std::size_t>(file)];
      tracks_.clear();
      trackCount_ = 0;
      groups_.clear();
      groupCount_ = 0;
      lastTrack_ = 0;
      memTracksValid_ = false;
    }
    header_ = FileHeader{};
    header_.baseTimeNs = baseTimeNs;
    stats_ = ImportFileStats{};
    batch_ = recycled_ ? recycled_->take() : nullptr;
    if (!batch_) batch_ = std::make_unique<Batch>();
    batch_->file = file;
    batch_->worker = worker_;
    batch_->seq = seq;
    batch_->events.reserve(4096);  // a batch's usual size (the pipeline cuts at 4096 events)
    reader_.beginSegment(path_, batch_->args);
  }

  void addEvent(std::string_view text, std::uint64_t fileOffset, std::uint64_t index) {
    reader_.read(text, fileOffset, index);
    handleEvent();
  }

  std::size_t addEventPrefix(std::string_view text, std::uint64_t fileOffset, std::uint64_t index) {
    const std::size_t n = reader_.readPrefix(text, fileOffset, index);
    if (n) handleEvent();
    return n;
  }

  std::unique_ptr<Batch> takeBatch(std::uint64_t fileOffset) {
    batch_->fileOffset = fileOffset;
    batch_->header = std::move(header_);
    batch_->stats = std::move(stats_);
    batch_->warnings = std::move(warnings_);
    warnings_.clear();
    return std::move(batch_);
  }

  // Top-level keys of a file (everything but the events), shared with the splitter.
  static void parseDistributedInfo(const JsonValue& v, FileHeader& header, const std::string& path) {
    header.distributedInfoJson = v.dump();
    if (const auto* r = v.find("rank")) {
      auto i = r->asInt();
      if (!i || *i < 0 || *i > 1'000'000) throw Error(path + ": distributedInfo.rank is not a valid rank");
      header.rank = static_cast<int>(*i);
    }
    if (const auto* w = v.find("world_size")) {
      auto i = w->asInt();
      if (!i || *i < 1 || *i > 1'000'000) throw Error(path + ": distributedInfo.world_size is not a valid world size");
      header.worldSize = static_cast<int>(*i);
    }
    if (const auto* b = v.find("backend"); b && b->isString()) header.backend = b->asString();
    if (const auto* pgs = v.find("pg_config"); pgs && pgs->isArray()) {
      for (const auto& pg : pgs->items()) {
        if (!pg.isObject()) continue;
        PGroup g;
        if (const auto* n = pg.find("pg_name")) g.name = n->asString();
        if (const auto* d = pg.find("pg_desc")) g.description = d->asString();
        if (const auto* b = pg.find("backend_config")) g.backend = b->asString();
        if (const auto* sz = pg.find("pg_size")) g.size = static_cast<int>(sz->asInt().value_or(0));
        if (const auto* rk = pg.find("ranks")) g.ranksJson = normaliseRanks(*rk);
        if (!g.name.empty()) header.groups.push_back(std::move(g));
      }
    }
  }

 private:
  void warn(const std::string& w) { warnings_.push_back(fileLabel(path_) + ": " + w); }

  // The parser-local id of a string. Names repeat millions of times: a direct-mapped cache keyed by
  // a cheap fingerprint (the length and the first and last 8 bytes) answers most look-ups with one
  // comparison, before the hash map hashes the whole name.
  std::uint32_t str(std::string_view s) {
    std::uint64_t head = 0, tail = 0;
    if (s.size() >= 8) {
      std::memcpy(&head, s.data(), 8);
      std::memcpy(&tail, s.data() + s.size() - 8, 8);
    } else if (!s.empty()) {
      std::memcpy(&head, s.data(), s.size());
    }
    const std::uint64_t h = (head * 0x9E3779B97F4A7C15ULL) ^ (tail * 0xC2B2AE3D27D4EB4FULL) ^ (s.size() * 0x165667B19E3779F9ULL);
    CachedString& slot = strCache_[static_cast<std::size_t>(h >> (64 - kStrCacheBits))];
    if (slot.id && slot.text == s) return slot.id;
    std::uint32_t id;
    auto it = strings_.find(s);
    if (it != strings_.end()) {
      id = it->second;
      slot.text = it->first;
    } else {
      id = ++stringCount_;
      slot.text = strings_.emplace(std::string(s), id).first->first;  // map keys do not move
      batch_->newStrings.emplace_back(s);
    }
    slot.id = id;
    return id;
  }

  // HTA category of an event name, computed once per distinct name (the rules scan the name for
  // several substrings, and names repeat millions of times).
  Category nameCategory(std::uint32_t nameId, std::string_view name) {
    if (nameId >= nameCategory_.size()) nameCategory_.resize(nameId + 1024, -1);
    std::int8_t& c = nameCategory_[nameId];
    if (c < 0) c = static_cast<std::int8_t>(htaKernelCategory(name));
    return static_cast<Category>(c);
  }

  // "ranks" is an array in current traces and a string "[0, 1]" in on-demand ones.
  static std::string normaliseRanks(const JsonValue& v) {
    if (v.isArray()) return v.dump();
    if (v.isString()) {
      std::string out = "[";
      bool first = true;
      std::int64_t cur = 0;
      bool in = false;
      for (char c : v.asString() + ",") {
        if (std::isdigit(static_cast<unsigned char>(c))) {
          cur = cur * 10 + (c - '0');
          in = true;
        } else if (in) {
          if (!first) out += ",";
          out += std::to_string(cur);
          first = false;
          cur = 0;
          in = false;
        }
      }
      return out + "]";
    }
    return "[]";
  }

  std::int64_t toAbs(std::int64_t relNs) const {
    if (!header_.baseTimeNs) return relNs;
    return relNs + *header_.baseTimeNs;
  }

  std::uint32_t trackFor(TrackClass cls) {
    // Consecutive events are mostly on the same thread/stream: compare ids before building a key.
    if (lastTrack_ && cls == lastCls_ && ev_.pid.present && ev_.tid.present && ev_.pid.text == lastPid_ &&
        ev_.tid.text == lastTid_)
      return lastTrack_;
    trackKey_.clear();
    trackKey_.push_back(static_cast<char>(cls));
    trackKey_ += ev_.pid.present ? ev_.pid.text : std::string_view("?");
    trackKey_.push_back('\x1f');
    trackKey_ += ev_.tid.present ? ev_.tid.text : std::string_view("?");
    auto it = tracks_.find(trackKey_);
    std::uint32_t id;
    if (it != tracks_.end()) {
      id = it->second;
    } else {
      id = ++trackCount_;
      tracks_.emplace(trackKey_, id);
      PTrack t;
      t.cls = cls;
      t.pidText = ev_.pid.present ? ev_.pid.text : std::string_view();
      t.tidText = ev_.tid.present ? ev_.tid.text : std::string_view();
      if (ev_.pid.present && ev_.pid.isNum) t.pid = ev_.pid.num;
      if (ev_.tid.present && ev_.tid.isNum) t.tid = ev_.tid.num;
      switch (cls) {
        case TrackClass::Gpu: {
          t.kind = TrackKind::GpuStream;
          std::int64_t stream = ev_.stream;
          if (stream == kNone && ev_.tid.present) {
            if (ev_.tid.isNum) {
              stream = ev_.tid.num;
            } else {
              // "stream 7 " in 2022 traces
              std::string digits;
              for (char c : ev_.tid.text)
                if (std::isdigit(static_cast<unsigned char>(c))) digits.push_back(c);
              if (auto v = parseInt(digits)) stream = *v;
            }
          }
          if (stream != kNone) t.stream = stream;
          if (ev_.device != kNone)
            t.device = static_cast<int>(ev_.device);
          else if (ev_.pid.present && ev_.pid.isNum && ev_.pid.num >= 0 && ev_.pid.num < 1024)
            t.device = static_cast<int>(ev_.pid.num);
          // Kineto puts "Stream Sync" rows on tid = stream + 1,000,000 (with args.stream = stream).
          if (ev_.tid.present && ev_.tid.isNum && ev_.tid.num >= 1'000'000)
            t.name = "sync stream " + std::to_string(ev_.tid.num - 1'000'000);
          else
            t.name = stream != kNone ? "stream " + std::to_string(stream) : "gpu " + t.tidText;
          break;
        }
        case TrackClass::Python:
          t.kind = TrackKind::Python;
          t.name = "python " + t.tidText;
          break;
        case TrackClass::Counter:
          t.kind = TrackKind::Counter;
          break;
        case TrackClass::Cpu:
          t.kind = TrackKind::CpuThread;
          t.name = (ev_.tid.present && ev_.tid.isNum) ? "thread " + t.tidText : (t.tidText.empty() ? t.pidText : t.tidText);
          if (t.name.empty()) t.name = "thread";
          break;
      }
      t.key = trackKey_;
      batch_->newTracks.push_back(std::move(t));
    }
    lastTrack_ = id;
    lastCls_ = cls;
    if (ev_.pid.present && ev_.tid.present) {
      lastPid_ = ev_.pid.text;
      lastTid_ = ev_.tid.text;
    } else {
      lastTrack_ = 0;  // no fast path for events without ids
    }
    return id;
  }

  std::uint32_t counterTrack(const std::string& key, const std::string& name, std::optional<int> device,
                             const std::string& derivedFrom = {}) {
    auto it = tracks_.find(key);
    if (it != tracks_.end()) return it->second;
    const std::uint32_t id = ++trackCount_;
    tracks_.emplace(key, id);
    PTrack t;
    t.cls = TrackClass::Counter;
    t.kind = TrackKind::Counter;
    t.name = name;
    t.device = device;
    t.derivedFrom = derivedFrom;
    t.key = key;
    if (ev_.pid.present && ev_.pid.isNum && derivedFrom.empty()) t.pid = ev_.pid.num;
    batch_->newTracks.push_back(std::move(t));
    return id;
  }

  // The (allocated, reserved) counter tracks of a device's memory records. One in five events of a
  // training trace is a memory record: the last device's pair is kept, so the usual record builds
  // no key (the tracks themselves are made once per file by counterTrack).
  std::pair<std::uint32_t, std::uint32_t> memoryTracks(int deviceType, int deviceId) {
    if (memTracksValid_ && deviceType == memTrackType_ && deviceId == memTrackId_) return memTracks_;
    const std::string dev = (deviceType == 0 ? std::string("cpu") : "device " + std::to_string(deviceId));
    const std::string key = "mem:" + std::to_string(deviceType) + ":" + std::to_string(deviceId);
    std::optional<int> device;
    if (deviceType != 0) device = deviceId;
    // The two curves are read from memory_events (Total Allocated / Total Reserved): storing them
    // again as counter rows would double the rows of memory-heavy traces.
    const std::string suffix = std::to_string(deviceType) + ":" + std::to_string(deviceId);
    const auto a = counterTrack(key + ":a", "memory allocated (" + dev + ")", device, "memory_events:allocated:" + suffix);
    const auto rz = counterTrack(key + ":r", "memory reserved (" + dev + ")", device, "memory_events:reserved:" + suffix);
    memTracksValid_ = true;
    memTrackType_ = deviceType;
    memTrackId_ = deviceId;
    memTracks_ = {a, rz};
    return memTracks_;
  }

  std::uint32_t groupFor(const std::string& name) {
    if (name.empty()) return 0;
    auto it = groups_.find(name);
    if (it != groups_.end()) return it->second;
    const std::uint32_t id = ++groupCount_;
    groups_.emplace(name, id);
    PGroup g;
    g.name = name;
    g.description = std::string(ev_.pgDesc);
    g.ranksJson = ev_.pgRanks.empty() ? "[]" : normaliseRanks(JsonValue::string(std::string(ev_.pgRanks)));
    g.size = ev_.groupSize != kNone ? static_cast<int>(ev_.groupSize) : 0;
    batch_->newGroups.push_back(std::move(g));
    return id;
  }

  std::int64_t tsNs() {
    std::int64_t ns = 0;
    bool isFloat = false;
    if (!ev_.hasTs) {
      header_.tsFloat = true;  // pandas turns a missing ts into NaN: the column becomes float
      return 0;
    }
    if (!parseMicrosToNs(ev_.ts, ns, isFloat)) failEvent("timestamp '" + std::string(ev_.ts.substr(0, 32)) + "' is out of range");
    if (isFloat) header_.tsFloat = true;
    if (!seenTimes_ || ns < minRel_) minRel_ = ns;
    if (!seenTimes_ || ns > maxRel_) maxRel_ = ns;
    seenTimes_ = true;
    const std::int64_t abs = toAbs(ns);
    if (abs > kMaxAbsNs || abs < -kMaxAbsNs) failEvent("timestamp '" + std::string(ev_.ts.substr(0, 32)) + "' is out of range");
    return abs;
  }

  void handleEvent() {
    const std::string_view ph = ev_.ph;
    if (ph.empty()) {
      if (!ev_.hasName && !ev_.hasTs) failEvent("has no 'ph' field: not a trace event");
      failEvent("has no 'ph' field");
    }
    const char p = ph[0];
    if (p == 'M') {
      handleMetadata();
      return;
    }
    if (p == 'X') {
      handleComplete();
      return;
    }
    if (p == 'i' || p == 'I') {
      handleInstant();
      return;
    }
    if (p == 's' || p == 'f' || p == 't') {
      handleFlow(p);
      return;
    }
    if (p == 'C') {
      handleCounter();
      return;
    }
    if (ph.size() == 1 && std::string_view("BEbenNODPSTFpRcv").find(p) != std::string_view::npos) {
      ++stats_.skippedByReason["phase '" + std::string(ph) + "'"];
      if (stats_.skipped++ == 0) warn("skipping '" + std::string(ph) + "' events (only X, i, s/t/f, C and M are imported)");
      return;
    }
    failEvent("unknown phase 'ph': \"" + std::string(ph.substr(0, 16)) + "\"");
  }

  void handleMetadata() {
    if (!ev_.hasName) return;
    if (ev_.name == "thread_name") {
      const std::string tname = metaArg("name");
      if (!tname.empty())
        header_.threadNames.emplace_back(ev_.pid.present ? ev_.pid.text : std::string_view(),
                                         ev_.tid.present ? ev_.tid.text : std::string_view(), tname);
    } else if (ev_.name == "process_name" || ev_.name == "process_labels") {
      const std::string v = metaArg(ev_.name == "process_name" ? "name" : "labels");
      const std::string pid(ev_.pid.present ? ev_.pid.text : std::string_view());
      const JsonValue* existing = header_.processes.find(pid);
      JsonValue entry = existing ? *existing : JsonValue::object();
      entry.set(ev_.name == "process_name" ? "name" : "labels", JsonValue::string(v));
      header_.processes.set(pid, std::move(entry));
    }
  }

  std::string metaArg(const char* key) {
    // M events are rare: re-parse their small args JSON.
    if (ev_.argsJson.empty()) return {};
    try {
      JsonValue v = parseJson(ev_.argsJson, path_);
      if (const auto* x = v.find(key)) return x->isString() ? x->asString() : x->dump();
    } catch (const Error&) {
    }
    return {};
  }

  // Attributes of a `cat` value, computed once per distinct value.
  enum CatBits : std::uint8_t {
    kCatKnown = 1,
    kCatGpu = 2,
    kCatPython = 4,
    kCatLaunchFlow = 8,
    kCatKernel = 16,
    kCatUserAnnotation = 32,
    kCatGpuAnnotation = 64
  };
  std::uint8_t catBits() {
    if (!ev_.hasCat) return kCatKnown;
    // Few distinct categories, long runs of the same one: compare with the last before hashing.
    if (lastCatId_ && ev_.cat == lastCatText_) {
      currentCat_ = lastCatId_;
      return catBits_[lastCatId_];
    }
    const std::uint32_t id = str(ev_.cat);
    lastCatText_ = ev_.cat;
    lastCatId_ = id;
    currentCat_ = id;
    if (id >= catBits_.size()) catBits_.resize(id + 256, 0);
    std::uint8_t& b = catBits_[id];
    if (!b) {
      const std::string_view c = ev_.cat;
      b = kCatKnown;
      if (isGpuCat(c)) b |= kCatGpu;
      if (c == "python_function") b |= kCatPython;
      if (c == "ac2g" || c == "async_cpu_to_gpu") b |= kCatLaunchFlow;
      if (isKernelCat(c)) b |= kCatKernel;
      if (c == "user_annotation") b |= kCatUserAnnotation;
      if (c == "gpu_user_annotation") b |= kCatGpuAnnotation;
    }
    return b;
  }

  TrackClass classify() {
    const std::uint8_t b = catBits();
    if (b & kCatPython) return TrackClass::Python;
    if (b & kCatGpu) return TrackClass::Gpu;
    return TrackClass::Cpu;
  }

  void fillCollective(PEvent& e, bool gpu) {
    // The GPU twin of an annotation only brackets the kernels for viewers; the NCCL kernel inside
    // it is the collective (counting both would double every collective).
    if (catBits() & kCatGpuAnnotation) return;
    bool fromArgs = false;
    if (!ev_.collName.empty()) {
      e.op = collectiveOpFromString(ev_.collName);
      fromArgs = true;
    } else if (gpu && isNcclKernelName(ev_.name)) {
      e.op = collectiveFromKernelName(ev_.name);
    } else if (startsWith(ev_.name, "nccl:") || startsWith(ev_.name, "gloo:")) {
      e.op = collectiveOpFromString(std::string_view(ev_.name).substr(5));
    }
    if (e.op == CollectiveOp::None) return;
    if (fromArgs) e.flags |= EventFlags::CollectiveMeta;
    if (!ev_.dtype.empty()) e.dtype = str(ev_.dtype);
    if (ev_.groupSize != kNone && ev_.groupSize > 0 && ev_.groupSize < 10'000'000)
      e.groupSize = static_cast<std::int32_t>(ev_.groupSize);
    if (!ev_.pgName.empty()) e.pg = groupFor(std::string(ev_.pgName));
    const int sz = dtypeSize(ev_.dtype);
    if (sz > 0) {
      std::int64_t n = kNone;
      if (e.op == CollectiveOp::AllGather || e.op == CollectiveOp::Gather)
        n = ev_.outNelems != kNone ? ev_.outNelems : ev_.inNelems;
      else
        n = ev_.inNelems != kNone ? ev_.inNelems : ev_.outNelems;
      if (n != kNone && n >= 0 && n < (std::int64_t{1} << 50)) e.bytes = n * sz;
    }
    // A nccl:/gloo: annotation of an older trace: its record_shapes input. The message size S of
    // all-reduce, reduce-scatter, all-to-all, broadcast, reduce and point-to-point is that input
    // (nccl-tests' convention); an all-gather's S is the gathered output, which needs the group size.
    if (e.bytes == kNone && ev_.inputNumel != kNone && !ev_.inputType.empty()) {
      const int isz = dtypeSize(ev_.inputType);
      std::int64_t n = ev_.inputNumel;
      if (e.op == CollectiveOp::AllGather || e.op == CollectiveOp::Gather) n = e.groupSize > 0 ? n * e.groupSize : kNone;
      if (isz > 0 && n != kNone && n < (std::int64_t{1} << 50)) {
        e.bytes = n * isz;
        if (!e.dtype) e.dtype = str(ev_.inputType);
      }
    }
  }

  void appendArgs(PEvent& e) {
    if (ev_.rawArgsLen) {
      if (ev_.rawArgsLen > std::numeric_limits<std::uint32_t>::max()) failEvent("args too large");
      e.argsOff = static_cast<std::uint32_t>(ev_.rawArgsOff);
      e.argsLen = static_cast<std::uint32_t>(ev_.rawArgsLen);
      ev_.rawArgsLen = 0;  // taken
      return;
    }
    if (!opt_.keepArgs || ev_.argsJson.empty() || ev_.argsJson == "{}" || ev_.argsJson == "{ }") return;
    if (ev_.argsJson.size() > std::numeric_limits<std::uint32_t>::max()) failEvent("args too large");
    e.argsOff = static_cast<std::uint32_t>(batch_->args.size());
    appendCompactJson(batch_->args, ev_.argsJson);
    e.argsLen = static_cast<std::uint32_t>(batch_->args.size() - e.argsOff);
  }

  void handleComplete() {
    const std::uint8_t bits = catBits();
    if (bits & kCatLaunchFlow) return;
    const TrackClass cls = classify();
    PEvent e;
    e.track = trackFor(cls);
    e.start = tsNs();
    std::int64_t dur = 0;
    if (ev_.hasDur) {
      bool f = false;
      if (!parseMicrosToNs(ev_.dur, dur, f) || dur > kMaxDurNs)
        failEvent("duration '" + std::string(ev_.dur.substr(0, 32)) + "' µs is absurd");
      if (dur < 0) {
        ++stats_.negativeDurations;  // reported once per file by the writer
        dur = 0;
      }
    }
    e.end = e.start + dur;
    if (!header_.baseTimeNs && e.end > maxRel_) maxRel_ = e.end;
    e.name = str(ev_.name);
    e.cat = ev_.hasCat ? currentCat_ : 0;
    e.category = nameCategory(e.name, ev_.name);
    if (ev_.streamArg && ev_.stream != -1) e.flags |= EventFlags::HtaGpuRow;
    if (ev_.correlation != kNone) e.correlation = ev_.correlation;
    if (ev_.externalId != kNone) e.externalId = ev_.externalId;
    fillCollective(e, cls == TrackClass::Gpu);
    if (cls == TrackClass::Gpu && (bits & kCatKernel)) {
      ++stats_.kernels;
      if (isNcclKernelName(ev_.name)) ++stats_.ncclKernels;
    }
    if (cls == TrackClass::Cpu && (bits & kCatUserAnnotation) && startsWith(ev_.name, "ProfilerStep")) {
      if (auto n = profilerStepNumber(ev_.name)) {
        e.stepNum = *n;
        batch_->steps.push_back(PStep{*n, e.start, e.end});
        ++stats_.steps;
      }
    }
    appendArgs(e);
    batch_->events.push_back(e);
    ++stats_.events;
  }

  void handleInstant() {
    if (ev_.name == "[memory]" || ev_.name == "[OutOfMemory]") {
      MemoryEvent m;
      m.tsNs = tsNs();
      m.deviceType = ev_.devType != kNone ? static_cast<int>(ev_.devType) : 0;
      m.deviceId = ev_.devId != kNone ? static_cast<int>(ev_.devId) : -1;
      m.addr = ev_.addr != kNone ? ev_.addr : 0;
      m.bytes = ev_.bytes != kNone ? ev_.bytes : 0;
      m.totalAllocated = ev_.totalAllocated != kNone ? ev_.totalAllocated : 0;
      m.totalReserved = ev_.totalReserved != kNone ? ev_.totalReserved : 0;
      m.outOfMemory = ev_.name == "[OutOfMemory]";
      const auto [a, rz] = memoryTracks(m.deviceType, m.deviceId);
      batch_->memory.push_back(m);
      batch_->memoryTracks.push_back(a);
      batch_->memoryTracks.push_back(rz);
      ++stats_.memoryEvents;
      stats_.counters += 2;
      return;
    }
    const TrackClass cls = classify();
    PEvent e;
    e.track = trackFor(cls == TrackClass::Python ? TrackClass::Cpu : cls);
    e.start = e.end = tsNs();
    e.name = str(ev_.name);
    e.cat = ev_.hasCat ? str(ev_.cat) : 0;
    e.category = nameCategory(e.name, ev_.name);
    e.flags = EventFlags::Instant;
    appendArgs(e);
    batch_->events.push_back(e);
    ++stats_.events;
  }

  void handleFlow(char p) {
    if (catBits() & kCatLaunchFlow) {
      ++stats_.launchFlows;  // the launch link is the events' shared correlation id
      return;
    }
    PFlow f;
    // A flow end on a GPU stream belongs to that stream's track, not to a new CPU track.
    const bool onGpu = ev_.pid.present && ev_.tid.present &&
                       tracks_.count(std::string(1, static_cast<char>(TrackClass::Gpu)) + std::string(ev_.pid.text) + '\x1f' +
                                     std::string(ev_.tid.text));
    f.track = trackFor(onGpu ? TrackClass::Gpu : TrackClass::Cpu);
    f.ts = tsNs();
    f.id = ev_.flowId;
    f.cat = ev_.hasCat ? str(ev_.cat) : 0;
    f.name = ev_.hasName ? str(ev_.name) : 0;
    f.phase = p;
    f.bindEnclosing = ev_.bp == "e";
    batch_->flows.push_back(f);
    ++stats_.flows;
  }

  void handleCounter() {
    const std::int64_t ts = tsNs();
    if (!ev_.argsJson.empty()) {
      const JsonValue v = parseJson(ev_.argsJson, path_);
      for (const auto& [k, x] : v.members())
        if (x.isNumber()) ev_.counterValues.emplace_back(k, x.asDouble());
    }
    for (const auto& [k, v] : ev_.counterValues) {
      const std::string pid(ev_.pid.present ? ev_.pid.text : std::string_view());
      const std::string evName(ev_.name);
      const std::string key = "C:" + pid + ":" + evName + ":" + k;
      const std::string name = ev_.counterValues.size() == 1 && k == "value" ? evName : evName + " " + k;
      const auto track = counterTrack(key, name, std::nullopt);
      batch_->counters.push_back(PCounter{track, ts, v});
      ++stats_.counters;
    }
  }

  [[noreturn]] void failEvent(const std::string& msg) const { reader_.failEvent(msg); }

  const ImportOptions& opt_;
  int worker_;
  const std::vector<std::string>& files_;
  EventReader reader_;
  RawEvent& ev_;  // the event being parsed (reader_'s)
  bool started_ = false;
  std::vector<std::string> warnings_;
  std::uint32_t stringCount_ = 0;
  InternMap strings_;
  struct CachedString {
    std::string_view text;  // a key of strings_
    std::uint32_t id = 0;   // 0: empty slot
  };
  static constexpr int kStrCacheBits = 10;
  std::array<CachedString, std::size_t{1} << kStrCacheBits> strCache_{};
  std::vector<std::int8_t> nameCategory_;
  std::vector<std::uint8_t> catBits_;
  std::uint32_t currentCat_ = 0;
  std::uint32_t lastCatId_ = 0;
  std::string lastCatText_;
  bool seenTimes_ = false;
  std::int64_t minRel_ = 0, maxRel_ = 0;  // raw timestamps seen (ns), for a late baseTimeNanoseconds
  std::unordered_map<std::string, std::uint32_t> tracks_;
  std::uint32_t trackCount_ = 0;
  std::unordered_map<std::string, std::uint32_t> groups_;
  std::uint32_t groupCount_ = 0;
  std::string trackKey_, lastPid_, lastTid_;
  TrackClass lastCls_ = TrackClass::Cpu;
  std::uint32_t lastTrack_ = 0;
  bool memTracksValid_ = false;  // memTracks_ are the tracks of (memTrackType_, memTrackId_) in this file
  int memTrackType_ = 0, memTrackId_ = 0;
  std::pair<std::uint32_t, std::uint32_t> memTracks_;
  std::unique_ptr<Batch> batch_;
  BatchPool* recycled_ = nullptr;
  FileHeader header_;
  ImportFileStats stats_;
  int file_ = 0;
  std::string path_;
};

KinetoParser::KinetoParser(const ImportOptions& options, int worker, const std::vector<std::string>& files)
    : impl_(std::make_unique<Impl>(options, worker, files)) {}
KinetoParser::~KinetoParser() = default;

std::unique_ptr<Batch> KinetoParser::parseSegment(const Segment& seg) { return impl_->parseSegment(seg); }

void KinetoParser::beginBatch(int file, std::uint64_t seq, std::optional<std::int64_t> baseTimeNs) {
  impl_->beginBatch(file, seq, baseTimeNs);
}

void KinetoParser::addEvent(std::string_view text, std::uint64_t fileOffset, std::uint64_t index) {
  impl_->addEvent(text, fileOffset, index);
}

std::size_t KinetoParser::addEventPrefix(std::string_view text, std::uint64_t fileOffset, std::uint64_t index) {
  return impl_->addEventPrefix(text, fileOffset, index);
}

std::unique_ptr<Batch> KinetoParser::takeBatch(std::uint64_t fileOffset) { return impl_->takeBatch(fileOffset); }

void KinetoParser::setPool(BatchPool* pool) { impl_->setPool(pool); }

void KinetoParser::parseDistributedInfo(const JsonValue& v, FileHeader& header, const std::string& path) {
  Impl::parseDistributedInfo(v, header, path);
}

Segment makeSegment(const std::vector<std::string>& events, int file, std::optional<std::int64_t> baseTimeNs) {
  Segment seg;
  seg.file = file;
  seg.baseTimeNs = baseTimeNs;
  seg.text.push_back('[');
  std::uint64_t fileOffset = 1;
  for (const auto& e : events) {
    seg.localStart.push_back(seg.text.size());
    seg.fileStart.push_back(fileOffset);
    seg.text += e;
    seg.text.push_back(',');
    fileOffset += e.size() + 1;
  }
  if (events.empty())
    seg.text.push_back(']');
  else
    seg.text.back() = ']';
  return seg;
}

}  // namespace shardscope::core::kineto
