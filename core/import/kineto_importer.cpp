#include "core/import/kineto_importer.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <map>
#include <deque>
#include <exception>
#include <filesystem>
#include <limits>
#include <mutex>
#include <optional>
#include <regex>
#include <set>
#include <thread>

#include <pthread.h>
#include <unordered_map>

#include "core/model/kernel_classify.h"
#include "core/util/input_source.h"
#include "core/util/error.h"
#include "core/util/json.h"

namespace shardscope::core {
namespace {

namespace fs = std::filesystem;
using Token = JsonReader::Token;

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
  KinetoFileStats stats;
  std::exception_ptr error;
  bool last = false;
};

// A bounded queue between threads. stop() wakes everybody (cancellation, errors); close() lets the
// consumers drain what is left and then see the end.
template <typename T>
class BoundedQueue {
 public:
  explicit BoundedQueue(std::size_t cap) : cap_(cap) {}
  bool push(std::unique_ptr<T> b) {
    std::unique_lock lk(m_);
    notFull_.wait(lk, [&] { return q_.size() < cap_ || stop_; });
    if (stop_) return false;
    q_.push_back(std::move(b));
    notEmpty_.notify_one();
    return true;
  }
  // nullptr when stopped, or closed and empty.
  std::unique_ptr<T> pop() {
    std::unique_lock lk(m_);
    notEmpty_.wait(lk, [&] { return !q_.empty() || stop_ || closed_; });
    if (stop_ || q_.empty()) return nullptr;
    auto b = std::move(q_.front());
    q_.pop_front();
    notFull_.notify_one();
    return b;
  }
  void stop() {
    std::lock_guard lk(m_);
    stop_ = true;
    notFull_.notify_all();
    notEmpty_.notify_all();
  }
  void close() {
    std::lock_guard lk(m_);
    closed_ = true;
    notEmpty_.notify_all();
  }
  bool stopped() {
    std::lock_guard lk(m_);
    return stop_;
  }

 private:
  std::size_t cap_;
  std::mutex m_;
  std::condition_variable notFull_, notEmpty_;
  std::deque<std::unique_ptr<T>> q_;
  bool stop_ = false;
  bool closed_ = false;
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

using BatchQueue = BoundedQueue<Batch>;
using SegmentQueue = BoundedQueue<Segment>;

bool startsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// Heterogeneous lookup: find a string_view in the intern table without building a std::string.
struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
using InternMap = std::unordered_map<std::string, std::uint32_t, StringHash, std::equal_to<>>;

bool isGpuCat(std::string_view cat) {
  return cat == "kernel" || cat == "Kernel" || cat == "gpu_memcpy" || cat == "Memcpy" || cat == "gpu_memset" || cat == "Memset" ||
         cat == "gpu_user_annotation" || cat == "cuda_sync" || cat == "mtia_ccp_events";
}

bool isKernelCat(std::string_view cat) { return cat == "kernel" || cat == "Kernel"; }

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

std::string fileLabel(const std::string& path) { return fs::path(path).filename().string(); }

}  // namespace

bool parseMicrosToNs(std::string_view raw, std::int64_t& ns, bool& isFloat) {
  // One pass of exact decimal arithmetic: integer µs and up to 3 fractional digits are integer ns
  // (the 4th digit rounds half away from zero). Exponents fall back to a correctly rounded double.
  std::size_t i = 0;
  const std::size_t n = raw.size();
  bool neg = false;
  if (i < n && raw[i] == '-') {
    neg = true;
    ++i;
  }
  std::int64_t intPart = 0;
  std::size_t digits = 0;
  for (; i < n && raw[i] >= '0' && raw[i] <= '9'; ++i, ++digits) {
    if (digits >= 16) return false;  // > 1e16 µs is beyond any clock we accept
    intPart = intPart * 10 + (raw[i] - '0');
  }
  if (intPart > kMaxAbsNs / 1000) return false;  // checked before the multiplication can overflow
  std::int64_t frac = 0;
  int fracDigits = 0;
  bool roundUp = false;
  isFloat = false;
  if (i < n && raw[i] == '.') {
    isFloat = true;
    for (++i; i < n && raw[i] >= '0' && raw[i] <= '9'; ++i) {
      if (fracDigits < 3) {
        frac = frac * 10 + (raw[i] - '0');
        ++fracDigits;
      } else if (fracDigits == 3) {
        roundUp = raw[i] >= '5';
        ++fracDigits;
      }
    }
  }
  if (i < n) {
    // An exponent (or anything else the JSON grammar let through).
    isFloat = true;
    double d = 0;
    auto [p, ec] = std::from_chars(raw.data(), raw.data() + n, d);
    if (ec != std::errc() || p != raw.data() + n || !std::isfinite(d)) return false;
    const double scaled = d * 1000.0;
    if (!(std::fabs(scaled) <= static_cast<double>(kMaxAbsNs))) return false;
    ns = std::llround(scaled);
    return true;
  }
  for (; fracDigits < 3; ++fracDigits) frac *= 10;
  const std::int64_t v = intPart * 1000 + frac + (roundUp ? 1 : 0);
  if (v > kMaxAbsNs) return false;
  ns = neg ? -v : v;
  return true;
}

// ------------------------------------------------------------------------------------------
// Parsing side (runs on its own thread).

// Parses segments of events (on one of several threads). Its string, track and process-group ids are
// local to it; the writer maps them to database ids.
class KinetoParser {
 public:
  KinetoParser(const KinetoImportOptions& opt, int worker, const std::vector<std::string>& files)
      : opt_(opt), worker_(worker), files_(files) {}

  std::unique_ptr<Batch> parseSegment(const Segment& seg) {
    if (seg.file != file_ || !started_) {
      // Track and group ids are per file; strings are shared by all files of the import.
      started_ = true;
      file_ = seg.file;
      path_ = files_[static_cast<std::size_t>(seg.file)];
      tracks_.clear();
      trackCount_ = 0;
      groups_.clear();
      groupCount_ = 0;
      lastTrack_ = 0;
    }
    header_ = FileHeader{};
    header_.baseTimeNs = seg.baseTimeNs;
    stats_ = KinetoFileStats{};
    batch_ = std::make_unique<Batch>();
    batch_->file = seg.file;
    batch_->worker = worker_;
    batch_->seq = seg.seq;
    batch_->fileOffset = seg.fileOffset;
    segment_ = &seg;
    eventIndex_ = seg.firstEvent;
    const std::size_t n = seg.localStart.size();
    for (std::size_t k = 0; k < n; ++k) {
      // Event k is followed by the ',' (or the final ']') the splitter put after it.
      const std::size_t from = seg.localStart[k];
      const std::size_t to = (k + 1 < n ? seg.localStart[k + 1] : seg.text.size()) - 1;
      const std::string_view text(seg.text.data() + from, to - from);
      eventOffset_ = seg.fileStart[k];
      resetRaw();
      if (!fastEvent(text)) {
        resetRaw();
        JsonReader r(text, path_, opt_.limits);
        const std::uint64_t base = seg.fileStart[k];
        r.setOffsetMap([base](std::uint64_t local) { return base + local; });
        if (r.next() != Token::BeginObject) failEvent("is not a JSON object");
        parseEventFields(r);
        if (r.next() != Token::End) r.fail("unexpected data after an event");
      }
      handleEvent();
      ++eventIndex_;
    }
    batch_->header = std::move(header_);
    batch_->stats = stats_;
    batch_->warnings = std::move(warnings_);
    warnings_.clear();
    segment_ = nullptr;
    return std::move(batch_);
  }

  static std::uint64_t mapOffset(const Segment& seg, std::uint64_t local) {
    auto it = std::upper_bound(seg.localStart.begin(), seg.localStart.end(), local);
    if (it == seg.localStart.begin()) return seg.fileStart.empty() ? local : seg.fileStart.front();
    const std::size_t k = static_cast<std::size_t>(it - seg.localStart.begin()) - 1;
    return seg.fileStart[k] + (local - seg.localStart[k]);
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

  std::uint32_t str(std::string_view s) {
    auto it = strings_.find(s);
    if (it != strings_.end()) return it->second;
    const std::uint32_t id = ++stringCount_;
    strings_.emplace(std::string(s), id);
    batch_->newStrings.emplace_back(s);
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

  [[noreturn]] void failEvent(const std::string& msg) const {
    throw Error(path_ + ": event #" + std::to_string(eventIndex_) + " (byte offset " + std::to_string(eventOffset_) +
                "): " + msg);
  }

  // Per-event scratch, reused to avoid allocations.
  struct Id2 {
    bool isNum = false;
    bool present = false;
    std::int64_t num = 0;
    std::string text;
  };
  struct Raw {
    std::string name, cat, ph, bp, scope;
    bool hasName = false, hasCat = false, hasTs = false, hasDur = false, hasId = false;
    Id2 pid, tid;
    std::string ts, dur;
    std::int64_t flowId = 0;
    // args
    std::int64_t externalId = kNone, correlation = kNone, stream = kNone, device = kNone;
    bool streamArg = false;
    std::string collName, dtype, pgName, pgDesc, pgRanks;
    std::int64_t inNelems = kNone, outNelems = kNone, groupSize = kNone;
    std::int64_t inputNumel = kNone;  // "Input Dims" of a nccl:/gloo: annotation: elements of its first input
    std::string inputType;            // ... and "Input type"'s first entry
    std::int64_t totalAllocated = kNone, totalReserved = kNone, bytes = kNone, addr = kNone, devId = kNone, devType = kNone;
    std::vector<std::pair<std::string, double>> counterValues;
    std::string argsJson;
    std::size_t rawArgsOff = 0, rawArgsLen = 0;  // args already appended to the batch
  } ev_;

  void resetRaw() {
    ev_.hasName = ev_.hasCat = ev_.hasTs = ev_.hasDur = ev_.hasId = false;
    ev_.name.clear();
    ev_.cat.clear();
    ev_.ph.clear();
    ev_.bp.clear();
    ev_.scope.clear();
    ev_.pid.present = ev_.tid.present = false;
    ev_.externalId = ev_.correlation = ev_.stream = ev_.device = kNone;
    ev_.streamArg = false;
    ev_.collName.clear();
    ev_.dtype.clear();
    ev_.pgName.clear();
    ev_.pgDesc.clear();
    ev_.pgRanks.clear();
    ev_.inNelems = ev_.outNelems = ev_.groupSize = kNone;
    ev_.inputNumel = kNone;
    ev_.inputType.clear();
    ev_.totalAllocated = ev_.totalReserved = ev_.bytes = ev_.addr = ev_.devId = ev_.devType = kNone;
    ev_.counterValues.clear();
    ev_.argsJson.clear();
    if (ev_.rawArgsLen) {
      // The previous event did not keep its args (e.g. an ac2g X event): drop them from the batch.
      if (ev_.rawArgsOff + ev_.rawArgsLen == batch_->args.size()) batch_->args.resize(ev_.rawArgsOff);
      ev_.rawArgsLen = 0;
    }
  }

  void readId(Token t, std::string_view text, Id2& id, const char* field) {
    id.present = true;
    if (t == Token::Number) {
      auto v = parseInt(text);
      if (!v) failEvent(std::string("field '") + field + "' is not an integer");
      id.isNum = true;
      id.num = *v;
      id.text.assign(text);
    } else if (t == Token::String) {
      id.text.assign(text);
      auto v = parseInt(id.text);
      id.isNum = false;
      id.num = v.value_or(0);
    } else {
      failEvent(std::string("field '") + field + "' must be a number or a string");
    }
  }

  static std::int64_t argInt(Token t, std::string_view text) {
    if (t == Token::Number || t == Token::String) {
      if (auto v = parseInt(text)) return *v;
    }
    return kNone;
  }

  enum ArgKey : std::uint8_t {
    kArgOther,
    kArgExternalId,
    kArgCorrelation,
    kArgStream,
    kArgDevice,
    kArgCollName,
    kArgInNelems,
    kArgOutNelems,
    kArgGroupSize,
    kArgDtype,
    kArgPgName,
    kArgPgDesc,
    kArgPgRanks,
    kArgTotalAllocated,
    kArgTotalReserved,
    kArgBytes,
    kArgAddr,
    kArgDeviceId,
    kArgDeviceType,
    kArgInputDims,
    kArgInputType
  };

  static ArgKey argKey(std::string_view k) {
    // Most args are not promoted: a length switch and a first-character test reject them cheaply.
    const char* c = k.data();
    auto is = [&](const char* lit, std::size_t n) { return std::memcmp(c, lit, n) == 0; };
    switch (k.size()) {
      case 4:
        return c[0] == 'A' && is("Addr", 4) ? kArgAddr : kArgOther;
      case 5:
        return c[0] == 'd' && is("dtype", 5) ? kArgDtype : c[0] == 'B' && is("Bytes", 5) ? kArgBytes : kArgOther;
      case 6:
        return c[0] == 's' && is("stream", 6) ? kArgStream : c[0] == 'd' && is("device", 6) ? kArgDevice : kArgOther;
      case 9:
        return c[0] == 'D' && is("Device Id", 9) ? kArgDeviceId : kArgOther;
      case 10:
        if (c[0] == 'G' && is("Group size", 10)) return kArgGroupSize;
        if (c[0] == 'I' && is("Input Dims", 10)) return kArgInputDims;
        if (c[0] == 'I' && is("Input type", 10)) return kArgInputType;
        return kArgOther;
      case 11:
        if (c[0] == 'E' && is("External id", 11)) return kArgExternalId;
        if (c[0] == 'c' && is("correlation", 11)) return kArgCorrelation;
        if (c[0] == 'D' && is("Device Type", 11)) return kArgDeviceType;
        return kArgOther;
      case 13:
        return c[0] == 'I' && is("In msg nelems", 13) ? kArgInNelems : kArgOther;
      case 14:
        if (c[0] == 'O' && is("Out msg nelems", 14)) return kArgOutNelems;
        if (c[0] == 'T' && is("Total Reserved", 14)) return kArgTotalReserved;
        return kArgOther;
      case 15:
        if (c[0] == 'C' && is("Collective name", 15)) return kArgCollName;
        if (c[0] == 'T' && is("Total Allocated", 15)) return kArgTotalAllocated;
        return kArgOther;
      case 18:
        return c[0] == 'P' && is("Process Group Name", 18) ? kArgPgName : kArgOther;
      case 19:
        return c[0] == 'P' && is("Process Group Ranks", 19) ? kArgPgRanks : kArgOther;
      case 25:
        return c[0] == 'P' && is("Process Group Description", 25) ? kArgPgDesc : kArgOther;
      default:
        return kArgOther;
    }
  }

  // Reads the args object (its '{' was just returned) picking the promoted fields, and keeps the
  // object's raw text (whitespace removed) rather than re-serialising it token by token.
  void parseArgs(JsonReader& r) {
    // Counter (C) and metadata (M) events need their args later; 'ph' usually comes first.
    const bool keep = opt_.keepArgs || ev_.ph.size() != 1 || ev_.ph[0] == 'M' || ev_.ph[0] == 'C';
    r.beginCapture();
    for (;;) {
      Token t = r.next();
      if (t == Token::EndObject) break;
      const ArgKey key = argKey(r.text());
      t = r.next();
      if (t == Token::BeginArray && (key == kArgInputDims || key == kArgInputType) && collectiveAnnotationName()) {
        readInputArray(r, key);  // the size of a 2022-era nccl:all_to_all (no "In msg nelems")
        continue;
      }
      if (t == Token::BeginObject || t == Token::BeginArray) {
        r.skipValue(t);
        continue;
      }
      onArg(key, t, r.text());
    }
    keepArgs(r.endCapture(), keep);
  }

  bool collectiveAnnotationName() const { return startsWith(ev_.name, "nccl:") || startsWith(ev_.name, "gloo:"); }

  // "Input Dims": [[8, 1024, 8816], ...] -> the element count of the first input; "Input type":
  // ["float", ...] -> its first entry. Consumes the array (its '[' was just read).
  void readInputArray(JsonReader& r, ArgKey key) {
    int depth = 1;
    bool inFirst = false, firstDone = false, any = false, ok = true;
    std::int64_t numel = 1;
    for (;;) {
      const Token t = r.next();
      if (t == Token::End) return;  // the reader reports the truncated input
      if (t == Token::BeginObject) {
        r.skipValue(t);
        continue;
      }
      if (t == Token::BeginArray) {
        if (++depth == 2 && !firstDone) inFirst = true;
        continue;
      }
      if (t == Token::EndArray) {
        if (depth == 2 && inFirst) inFirst = false, firstDone = true;
        if (--depth == 0) break;
        continue;
      }
      if (key == kArgInputDims && inFirst && t == Token::Number) {
        const auto v = parseInt(r.text());
        if (v && *v >= 0 && (*v == 0 || numel <= (std::int64_t{1} << 50) / std::max<std::int64_t>(1, *v))) {
          numel *= *v;
          any = true;
        } else {
          ok = false;
        }
      } else if (key == kArgInputType && depth == 1 && t == Token::String && ev_.inputType.empty()) {
        ev_.inputType.assign(r.text());
      }
    }
    if (key == kArgInputDims && any && ok) ev_.inputNumel = numel;
  }

  // The same from the text of a validated array (the fast path): "[[8, 1024, 8816], [2]]" or
  // "[\"float\", \"int\"]".
  void inputFromText(std::string_view a, ArgKey key) {
    std::size_t i = 1;  // past '['
    auto ws = [&] {
      while (i < a.size() && (a[i] == ' ' || a[i] == '\t' || a[i] == '\n' || a[i] == '\r')) ++i;
    };
    ws();
    if (key == kArgInputType) {
      if (i >= a.size() || a[i] != '"' || !ev_.inputType.empty()) return;
      const std::size_t close = a.find('"', i + 1);
      if (close != std::string_view::npos) ev_.inputType.assign(a.substr(i + 1, close - i - 1));
      return;
    }
    if (i >= a.size() || a[i] != '[') return;
    ++i;
    std::int64_t numel = 1;
    bool any = false;
    for (;;) {
      ws();
      if (i < a.size() && a[i] == ']') break;
      std::size_t j = i;
      while (j < a.size() && a[j] >= '0' && a[j] <= '9') ++j;
      const auto v = j > i ? parseInt(a.substr(i, j - i)) : std::nullopt;
      if (!v || (*v > 0 && numel > (std::int64_t{1} << 50) / *v)) return;  // not a size we can use
      numel *= *v;
      any = true;
      i = j;
      ws();
      if (i < a.size() && a[i] == ',') {
        ++i;
        continue;
      }
      if (i < a.size() && a[i] == ']') break;
      return;
    }
    if (any) ev_.inputNumel = numel;
  }

  // A scalar arg value; promoted keys fill the event's columns.
  void onArg(ArgKey key, Token t, std::string_view text) {
    switch (key) {
      case kArgOther:
        break;
      case kArgExternalId:
        ev_.externalId = argInt(t, text);
        break;
      case kArgCorrelation:
        ev_.correlation = argInt(t, text);
        break;
      case kArgStream:
        ev_.stream = argInt(t, text);
        ev_.streamArg = ev_.stream != kNone;
        break;
      case kArgDevice:
        ev_.device = argInt(t, text);
        break;
      case kArgCollName:
        if (t == Token::String) ev_.collName.assign(text);
        break;
      case kArgInNelems:
        ev_.inNelems = argInt(t, text);
        break;
      case kArgOutNelems:
        ev_.outNelems = argInt(t, text);
        break;
      case kArgGroupSize:
        ev_.groupSize = argInt(t, text);
        break;
      case kArgDtype:
        if (t == Token::String) ev_.dtype.assign(text);
        break;
      case kArgPgName:
        if (t == Token::String || t == Token::Number) ev_.pgName.assign(text);
        break;
      case kArgPgDesc:
        if (t == Token::String) ev_.pgDesc.assign(text);
        break;
      case kArgPgRanks:
        if (t == Token::String) ev_.pgRanks.assign(text);
        break;
      case kArgTotalAllocated:
        ev_.totalAllocated = argInt(t, text);
        break;
      case kArgTotalReserved:
        ev_.totalReserved = argInt(t, text);
        break;
      case kArgBytes:
        ev_.bytes = argInt(t, text);
        break;
      case kArgAddr:
        ev_.addr = argInt(t, text);
        break;
      case kArgDeviceId:
        ev_.devId = argInt(t, text);
        break;
      case kArgDeviceType:
        ev_.devType = argInt(t, text);
        break;
    }
  }

  // Keeps the args object's text, whitespace removed here on the parser threads (the writer thread
  // only copies it into its chunk's args block).
  void keepArgs(std::string_view raw, bool keep) {
    if (!keep) return;
    if (opt_.keepArgs && ev_.ph.size() == 1 && (ev_.ph[0] == 'X' || ev_.ph[0] == 'i' || ev_.ph[0] == 'I') && raw.size() > 2) {
      // The common case goes straight into the batch (one copy); appendArgs() keeps or drops it.
      ev_.rawArgsOff = batch_->args.size();
      appendCompactJson(batch_->args, raw);
      ev_.rawArgsLen = batch_->args.size() - ev_.rawArgsOff;
    } else {
      ev_.argsJson.assign(raw);
    }
  }

  // The full tokenizer's reading of one event (its '{' was just returned): every error is precise.
  void parseEventFields(JsonReader& r) {
    for (;;) {
      Token t = r.next();
      if (t == Token::EndObject) break;
      // Dispatch on the key before reading the value (the view dies at next()).
      const int which = fieldId(r.text());
      t = r.next();
      if (which == 8 && t == Token::BeginObject) {
        parseArgs(r);
      } else if (t == Token::BeginObject || t == Token::BeginArray) {
        if (which >= 1 && which <= 7) onFieldType(which);  // a container where a scalar belongs
        r.skipValue(t);
      } else {
        onField(which, t, r.text());
      }
    }
  }

  // Reads one event straight from its text for the common, well-formed case: no escapes, plain
  // numbers, nesting only inside args. Returns false as soon as anything else shows up; the caller
  // then re-reads the event with the full tokenizer, which also produces the precise error.
  bool fastEvent(std::string_view ev) {
    const char* p = ev.data();
    const char* const end = p + ev.size();
    auto ws = [&]() {
      while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) ++p;
    };
    // A string without escapes; p is at its opening quote.
    auto str = [&](std::string_view& out) -> bool {
      const auto at = findQuoteOrBackslash(p, 1, static_cast<std::size_t>(end - p));
      const char* q = p + at;
      if (q >= end || *q == '\\') return false;
      out = std::string_view(p + 1, static_cast<std::size_t>(q - p - 1));
      p = q + 1;
      return true;
    };
    // A number in the JSON grammar without exponent: -?(0|[1-9][0-9]*)(.[0-9]+)?
    auto num = [&](std::string_view& out) -> bool {
      const char* q = p;
      if (q < end && *q == '-') ++q;
      if (q >= end || *q < '0' || *q > '9') return false;
      if (*q == '0') {
        ++q;
      } else {
        while (q < end && *q >= '0' && *q <= '9') ++q;
      }
      if (q < end && *q == '.') {
        ++q;
        const char* d = q;
        while (q < end && *q >= '0' && *q <= '9') ++q;
        if (q == d) return false;
      }
      if (q < end && (*q == 'e' || *q == 'E' || (*q >= '0' && *q <= '9'))) return false;
      out = std::string_view(p, static_cast<std::size_t>(q - p));
      p = q;
      return true;
    };
    auto literal = [&](Token& t) -> bool {
      const auto rest = static_cast<std::size_t>(end - p);
      if (rest >= 4 && std::memcmp(p, "true", 4) == 0) {
        t = Token::True;
        p += 4;
        return true;
      }
      if (rest >= 5 && std::memcmp(p, "false", 5) == 0) {
        t = Token::False;
        p += 5;
        return true;
      }
      if (rest >= 4 && std::memcmp(p, "null", 4) == 0) {
        t = Token::Null;
        p += 4;
        return true;
      }
      return false;
    };
    // A scalar value: its token type and text.
    auto scalar = [&](Token& t, std::string_view& text) -> bool {
      if (p >= end) return false;
      if (*p == '"') {
        t = Token::String;
        return str(text);
      }
      if (*p == '-' || (*p >= '0' && *p <= '9')) {
        t = Token::Number;
        return num(text);
      }
      text = {};
      return literal(t);
    };
    // Validates and skips a nested array/object (args like "Input Dims": [[1, 2], [3]]).
    std::function<bool(int)> nested = [&](int depth) -> bool {
      if (depth > 32) return false;
      const char close = *p == '{' ? '}' : ']';
      const bool object = close == '}';
      ++p;
      ws();
      if (p < end && *p == close) {
        ++p;
        return true;
      }
      for (;;) {
        ws();
        if (object) {
          std::string_view k;
          if (p >= end || *p != '"' || !str(k)) return false;
          ws();
          if (p >= end || *p != ':') return false;
          ++p;
          ws();
        }
        if (p >= end) return false;
        if (*p == '{' || *p == '[') {
          if (!nested(depth + 1)) return false;
        } else {
          Token t;
          std::string_view v;
          if (!scalar(t, v)) return false;
        }
        ws();
        if (p >= end) return false;
        if (*p == ',') {
          ++p;
          continue;
        }
        if (*p == close) {
          ++p;
          return true;
        }
        return false;
      }
    };

    // Walks the members of an object whose '{' is at p; fn(key) reads the value at p.
    auto members = [&](auto&& fn) -> bool {
      ++p;
      ws();
      if (p < end && *p == '}') {
        ++p;
        return true;
      }
      for (;;) {
        ws();
        std::string_view key;
        if (p >= end || *p != '"' || !str(key)) return false;
        ws();
        if (p >= end || *p != ':') return false;
        ++p;
        ws();
        if (p >= end || !fn(key)) return false;
        ws();
        if (p >= end) return false;
        if (*p == ',') {
          ++p;
          continue;
        }
        if (*p == '}') {
          ++p;
          return true;
        }
        return false;
      }
    };
    // The args object: promoted keys fill the event, the raw text is kept.
    auto args = [&]() -> bool {
      const bool keep = opt_.keepArgs || ev_.ph.size() != 1 || ev_.ph[0] == 'M' || ev_.ph[0] == 'C';
      const char* start = p;
      const bool ok = members([&](std::string_view key) {
        if (*p == '[' && collectiveAnnotationName()) {
          const ArgKey k = argKey(key);
          if (k == kArgInputDims || k == kArgInputType) {
            const char* from = p;
            if (!nested(1)) return false;
            inputFromText(std::string_view(from, static_cast<std::size_t>(p - from)), k);
            return true;
          }
        }
        if (*p == '{' || *p == '[') return nested(1);
        Token t;
        std::string_view v;
        if (!scalar(t, v)) return false;
        onArg(argKey(key), t, v);
        return true;
      });
      if (ok) keepArgs(std::string_view(start, static_cast<std::size_t>(p - start)), keep);
      return ok;
    };

    ws();
    if (p >= end || *p != '{') return false;
    const bool ok = members([&](std::string_view key) {
      const int which = fieldId(key);
      if (which == 8 && *p == '{') return args();
      if (*p == '{' || *p == '[') {
        if (which >= 1 && which <= 7) return false;  // let the tokenizer report the type error
        return nested(0);
      }
      Token t;
      std::string_view v;
      if (!scalar(t, v)) return false;
      // Type errors are reported by the full reader (same message either way).
      if ((which == 1 || which == 3) && t != Token::String) return false;
      if (which == 2 && t != Token::String && t != Token::Number) return false;
      if ((which == 4 || which == 5) && t != Token::Number) return false;
      if ((which == 6 || which == 7) && t != Token::Number && t != Token::String) return false;
      onField(which, t, v);
      return true;
    });
    if (!ok) return false;
    ws();
    return p == end;
  }

  static int fieldId(std::string_view k) {
    // Called for every key of every event: compare characters, not strings.
    const char* c = k.data();
    switch (k.size()) {
      case 1:
        return c[0] == 's' ? 11 : 0;
      case 2:
        if (c[0] == 'p' && c[1] == 'h') return 1;
        if (c[0] == 't' && c[1] == 's') return 4;
        if (c[0] == 'i' && c[1] == 'd') return 9;
        if (c[0] == 'b' && c[1] == 'p') return 10;
        return 0;
      case 3:
        if (c[0] == 'c' && c[1] == 'a' && c[2] == 't') return 3;
        if (c[0] == 'd' && c[1] == 'u' && c[2] == 'r') return 5;
        if (c[1] == 'i' && c[2] == 'd') return c[0] == 'p' ? 6 : c[0] == 't' ? 7 : 0;
        return 0;
      case 4:
        if (std::memcmp(c, "name", 4) == 0) return 2;
        if (std::memcmp(c, "args", 4) == 0) return 8;
        return 0;
      default:
        return 0;
    }
  }

  // The error for a container (object/array) where a field needs a scalar.
  [[noreturn]] void onFieldType(int which) {
    switch (which) {
      case 1:
        failEvent("field 'ph' must be a string");
      case 2:
        failEvent("field 'name' must be a string");
      case 3:
        failEvent("field 'cat' must be a string");
      case 4:
        failEvent("field 'ts' must be a number");
      case 5:
        failEvent("field 'dur' must be a number");
      case 6:
        failEvent("field 'pid' must be a number or a string");
      case 7:
        failEvent("field 'tid' must be a number or a string");
      default:
        failEvent("unexpected value");
    }
  }

  // A scalar event field (which = fieldId(key)).
  void onField(int which, Token t, std::string_view text) {
    switch (which) {
      case 1:
        if (t != Token::String) failEvent("field 'ph' must be a string");
        ev_.ph.assign(text);
        break;
      case 2:
        if (t != Token::String && t != Token::Number) failEvent("field 'name' must be a string");
        ev_.name.assign(text);
        ev_.hasName = true;
        break;
      case 3:
        if (t != Token::String) failEvent("field 'cat' must be a string");
        ev_.cat.assign(text);
        ev_.hasCat = true;
        break;
      case 4:
        if (t != Token::Number) failEvent("field 'ts' must be a number");
        ev_.ts.assign(text);
        ev_.hasTs = true;
        break;
      case 5:
        if (t != Token::Number) failEvent("field 'dur' must be a number");
        ev_.dur.assign(text);
        ev_.hasDur = true;
        break;
      case 6:
        readId(t, text, ev_.pid, "pid");
        break;
      case 7:
        readId(t, text, ev_.tid, "tid");
        break;
      case 9:
        if (t == Token::Number || t == Token::String) {
          auto v = parseInt(text);
          if (!v && t == Token::String) {
            // Hex ids ("0x1f") are common in Chrome traces.
            std::int64_t h = 0;
            if (startsWith(text, "0x"))
              std::from_chars(text.data() + 2, text.data() + text.size(), h, 16);
            else
              h = static_cast<std::int64_t>(std::hash<std::string_view>{}(text) >> 1);
            v = h;
          }
          ev_.flowId = v.value_or(0);
          ev_.hasId = true;
        }
        break;
      case 10:
        if (t == Token::String) ev_.bp.assign(text);
        break;
      case 11:
        if (t == Token::String) ev_.scope.assign(text);
        break;
      default:
        break;  // unknown keys, and "args" that is not an object
    }
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
    trackKey_ += ev_.pid.present ? ev_.pid.text : std::string("?");
    trackKey_.push_back('\x1f');
    trackKey_ += ev_.tid.present ? ev_.tid.text : std::string("?");
    auto it = tracks_.find(trackKey_);
    std::uint32_t id;
    if (it != tracks_.end()) {
      id = it->second;
    } else {
      id = ++trackCount_;
      tracks_.emplace(trackKey_, id);
      PTrack t;
      t.cls = cls;
      t.pidText = ev_.pid.present ? ev_.pid.text : "";
      t.tidText = ev_.tid.present ? ev_.tid.text : "";
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

  std::uint32_t groupFor(const std::string& name) {
    if (name.empty()) return 0;
    auto it = groups_.find(name);
    if (it != groups_.end()) return it->second;
    const std::uint32_t id = ++groupCount_;
    groups_.emplace(name, id);
    PGroup g;
    g.name = name;
    g.description = ev_.pgDesc;
    g.ranksJson = ev_.pgRanks.empty() ? "[]" : normaliseRanks(JsonValue::string(ev_.pgRanks));
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
    if (!parseMicrosToNs(ev_.ts, ns, isFloat)) failEvent("timestamp '" + ev_.ts.substr(0, 32) + "' is out of range");
    if (isFloat) header_.tsFloat = true;
    if (!seenTimes_ || ns < minRel_) minRel_ = ns;
    if (!seenTimes_ || ns > maxRel_) maxRel_ = ns;
    seenTimes_ = true;
    const std::int64_t abs = toAbs(ns);
    if (abs > kMaxAbsNs || abs < -kMaxAbsNs) failEvent("timestamp '" + ev_.ts.substr(0, 32) + "' is out of range");
    return abs;
  }

  void handleEvent() {
    const std::string& ph = ev_.ph;
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
      if (stats_.skipped++ == 0) warn("skipping '" + ph + "' events (only X, i, s/t/f, C and M are imported)");
      return;
    }
    failEvent("unknown phase 'ph': \"" + ph.substr(0, 16) + "\"");
  }

  void handleMetadata() {
    if (!ev_.hasName) return;
    if (ev_.name == "thread_name") {
      const std::string tname = metaArg("name");
      if (!tname.empty())
        header_.threadNames.emplace_back(ev_.pid.present ? ev_.pid.text : "", ev_.tid.present ? ev_.tid.text : "", tname);
    } else if (ev_.name == "process_name" || ev_.name == "process_labels") {
      const std::string v = metaArg(ev_.name == "process_name" ? "name" : "labels");
      const std::string pid = ev_.pid.present ? ev_.pid.text : "";
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
    if (!ev_.pgName.empty()) e.pg = groupFor(ev_.pgName);
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
        failEvent("duration '" + ev_.dur.substr(0, 32) + "' µs is absurd");
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
      const std::string dev = (m.deviceType == 0 ? std::string("cpu") : "device " + std::to_string(m.deviceId));
      const std::string key = "mem:" + std::to_string(m.deviceType) + ":" + std::to_string(m.deviceId);
      std::optional<int> device;
      if (m.deviceType != 0) device = m.deviceId;
      // The two curves are read from memory_events (Total Allocated / Total Reserved): storing them
      // again as counter rows would double the rows of memory-heavy traces.
      const std::string suffix = std::to_string(m.deviceType) + ":" + std::to_string(m.deviceId);
      const auto a = counterTrack(key + ":a", "memory allocated (" + dev + ")", device, "memory_events:allocated:" + suffix);
      const auto rz = counterTrack(key + ":r", "memory reserved (" + dev + ")", device, "memory_events:reserved:" + suffix);
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
                       tracks_.count(std::string(1, static_cast<char>(TrackClass::Gpu)) + ev_.pid.text + '\x1f' + ev_.tid.text);
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
      const std::string pid = ev_.pid.present ? ev_.pid.text : "";
      const std::string key = "C:" + pid + ":" + ev_.name + ":" + k;
      const std::string name = ev_.counterValues.size() == 1 && k == "value" ? ev_.name : ev_.name + " " + k;
      const auto track = counterTrack(key, name, std::nullopt);
      batch_->counters.push_back(PCounter{track, ts, v});
      ++stats_.counters;
    }
  }

  const KinetoImportOptions& opt_;
  int worker_;
  const std::vector<std::string>& files_;
  bool started_ = false;
  const Segment* segment_ = nullptr;
  std::vector<std::string> warnings_;
  std::uint32_t stringCount_ = 0;
  InternMap strings_;
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
  std::string key_, trackKey_, lastPid_, lastTid_;
  TrackClass lastCls_ = TrackClass::Cpu;
  std::uint32_t lastTrack_ = 0;
  std::unique_ptr<Batch> batch_;
  FileHeader header_;
  KinetoFileStats stats_;
  int file_ = 0;
  std::string path_;
  std::uint64_t eventIndex_ = 0;
  std::uint64_t eventOffset_ = 0;
};

// Reads one file on the producer thread: the top-level keys itself, the events only as raw text cut
// into segments (skipContainerFast: no tokens), which the parser threads parse.
class FileSplitter {
 public:
  FileSplitter(const KinetoImportOptions& opt, SegmentQueue& work, BatchQueue& out, std::uint64_t& seq)
      : opt_(opt), work_(work), out_(out), seq_(seq) {}

  void splitFile(int fileIndex, const std::string& path) {
    file_ = fileIndex;
    path_ = path;
    header_ = FileHeader{};
    stats_ = KinetoFileStats{};
    stats_.path = path;
    events_ = 0;
    auto in = prefetch(openInput(path));
    stats_.bytes = in->fileSize();
    in_ = in.get();
    JsonReader r(*in, opt_.limits);
    Token t = r.next();
    if (t == Token::BeginArray) {
      // The Chrome trace format also allows a bare array of events.
      splitEvents(r);
    } else if (t == Token::BeginObject) {
      bool sawEvents = false;
      for (;;) {
        t = r.next();
        if (t == Token::EndObject) break;
        const std::string key(r.text());
        t = r.next();
        if (key == "traceEvents") {
          if (t != Token::BeginArray) r.fail("'traceEvents' must be an array");
          sawEvents = true;
          splitEvents(r);
        } else if (key == "baseTimeNanoseconds") {
          if (t != Token::Number) r.fail("'baseTimeNanoseconds' must be a number");
          auto v = parseInt(r.text());
          if (!v || *v < 0 || *v > kMaxAbsNs) r.fail("'baseTimeNanoseconds' is out of range");
          header_.baseTimeNs = *v;
          if (sawEvents) header_.baseAfterEvents = true;
        } else if (key == "distributedInfo") {
          if (t != Token::BeginObject) {
            r.skipValue(t);
            warnings_.push_back(fileLabel(path_) + ": 'distributedInfo' is not an object; ignored");
            continue;
          }
          // pg_config lists every rank of every group: a 100k-GPU job is millions of nodes.
          KinetoParser::parseDistributedInfo(readJsonValue(r, t, 1u << 22), header_, path_);
        } else if (key == "deviceProperties") {
          JsonValue v = readJsonValue(r, t, 1u << 16);
          header_.devicePropertiesJson = v.dump();
        } else if (t == Token::String || t == Token::Number || t == Token::True || t == Token::False) {
          JsonValue v = readJsonValue(r, t);
          header_.metadata.set(key, std::move(v));
        } else {
          r.skipValue(t);
        }
      }
      if (r.next() != Token::End) r.fail("unexpected data after the JSON document");
      if (!sawEvents) r.fail("no 'traceEvents' array: this JSON is not a Chrome/Kineto trace");
    } else {
      r.fail("expected a JSON object with 'traceEvents' (or an array of events); this is not a trace");
    }
    stats_.jsonBytes = r.tokenOffset();
    stats_.traceEvents = events_;
    auto done = std::make_unique<Batch>();
    done->file = file_;
    done->seq = seq_++;
    done->fileDone = true;
    done->fileOffset = in_->fileOffset();
    done->header = std::move(header_);
    done->stats = stats_;
    done->warnings = std::move(warnings_);
    warnings_.clear();
    if (!out_.push(std::move(done))) throw Cancelled();
    in_ = nullptr;
  }

 private:
  static constexpr std::size_t kSegmentEvents = 4096;
  static constexpr std::size_t kSegmentBytes = 2u << 20;

  void splitEvents(JsonReader& r) {
    startSegment();
    for (;;) {
      const Token t = r.next();
      if (t == Token::EndArray) break;
      if (t != Token::BeginObject)
        throw Error(path_ + ": event #" + std::to_string(events_) + " (byte offset " + std::to_string(r.tokenOffset()) +
                    "): is not a JSON object");
      const std::uint64_t at = r.tokenOffset();
      r.beginCapture();
      r.skipContainerFast();
      const std::string_view raw = r.endCapture();
      seg_->localStart.push_back(seg_->text.size());
      seg_->fileStart.push_back(at);
      seg_->text.append(raw);
      seg_->text.push_back(',');
      ++events_;
      if (seg_->localStart.size() >= kSegmentEvents || seg_->text.size() >= kSegmentBytes) {
        dispatch();
        startSegment();
      }
    }
    if (!seg_->localStart.empty()) dispatch();
    seg_.reset();
  }

  void startSegment() {
    seg_ = std::make_unique<Segment>();
    seg_->file = file_;
    seg_->firstEvent = events_;
    seg_->baseTimeNs = header_.baseTimeNs;
    seg_->text.reserve(kSegmentBytes + 65536);
    seg_->text.push_back('[');
  }

  void dispatch() {
    seg_->text.back() = ']';  // the trailing ',' closes the array
    seg_->seq = seq_++;
    seg_->fileOffset = in_->fileOffset();
    if (opt_.cancel && opt_.cancel->isCancelled()) throw Cancelled();
    if (!work_.push(std::move(seg_))) throw Cancelled();
  }

  const KinetoImportOptions& opt_;
  SegmentQueue& work_;
  BatchQueue& out_;
  std::uint64_t& seq_;
  int file_ = 0;
  std::string path_;
  FileHeader header_;
  KinetoFileStats stats_;
  std::vector<std::string> warnings_;
  std::uint64_t events_ = 0;
  std::unique_ptr<Segment> seg_;
  InputSource* in_ = nullptr;
};

// ------------------------------------------------------------------------------------------
// Writing side (the calling thread): owns the transaction and all database ids.

namespace {

struct RankState {
  Id runId = 0;
  Id rankId = 0;
  // Per parser thread: local track/group id - 1 -> db id (and whether the track is CPU-side).
  std::vector<std::vector<Id>> trackIds;
  std::vector<std::vector<char>> trackIsCpu;
  std::vector<std::vector<Id>> groupIds;
  std::unordered_map<std::string, std::pair<Id, bool>> trackByKey;  // key -> (db id, CPU-side)
  std::vector<Id> allTracks, cpuTracks;
  KinetoFileStats stats;  // summed over the file's batches
  FileHeader partial;     // tsFloat, thread and process names from the parser threads
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
  std::unordered_map<Id, CpuTrackCollectives> cpuCollectives;
  Id lastCollTrack = 0;
  CpuTrackCollectives* lastColl = nullptr;  // cpuCollectives[lastCollTrack] (node-stable)
  CpuTrackCollectives& collectivesOf(Id track) {
    if (!lastColl || lastCollTrack != track) {
      lastColl = &cpuCollectives[track];
      lastCollTrack = track;
    }
    return *lastColl;
  }
  bool unresolvedCollective = false;      // a collective kernel's launch was not matched yet
  std::unordered_map<Id, bool> gpuTrack;  // db track id -> is a GPU track
  // "pid\x1ftid" (source text) -> (db track id, is python), for thread names from M events.
  std::unordered_multimap<std::string, std::pair<Id, bool>> tracksByIds;
  bool unresolvedGpu = false;
  bool cpuEventsSeen = false;
  std::int64_t cpuMin = 0, cpuMax = 0;
  std::vector<PStep> lateSteps;  // step windows that arrived after CPU events they may contain
};

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

ProcessGroup toProcessGroup(Id runId, const PGroup& g) {
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
    const auto parent = p.parent_path().filename().string();
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

}  // namespace

std::vector<std::string> collectTraceFiles(const std::vector<std::string>& inputs) {
  std::vector<std::string> out;
  for (const auto& in : inputs) {
    std::error_code ec;
    if (!fs::exists(in, ec)) throw Error(in + ": no such file or directory");
    if (fs::is_directory(in, ec)) {
      std::vector<std::string> found;
      for (const auto& entry : fs::directory_iterator(in, ec)) {
        if (!entry.is_regular_file()) continue;
        const std::string name = entry.path().filename().string();
        auto endsWith = [&](std::string_view suf) {
          return name.size() >= suf.size() && name.compare(name.size() - suf.size(), suf.size(), suf) == 0;
        };
        if (endsWith(".json") || endsWith(".json.gz")) found.push_back(entry.path().string());
      }
      if (ec) throw Error(in + ": cannot list directory: " + ec.message());
      if (found.empty()) throw Error(in + ": directory contains no *.json or *.json.gz trace files");
      std::sort(found.begin(), found.end());
      out.insert(out.end(), found.begin(), found.end());
    } else {
      out.push_back(in);
    }
  }
  return out;
}

KinetoImportResult importKineto(TraceStore& store, const std::vector<std::string>& files, const KinetoImportOptions& opt) {
  if (files.empty()) throw Error("import: no trace files given");
  const auto t0 = std::chrono::steady_clock::now();
  KinetoImportResult result;
  std::uint64_t totalBytes = 0;
  for (const auto& f : files) {
    std::error_code ec;
    const auto s = fs::file_size(f, ec);
    if (ec) throw Error(f + ": cannot read: " + ec.message());
    // Reading the database as a trace would open and close a descriptor of it: that drops every
    // POSIX lock this process holds on the file (SQLite's own included).
    if (fs::equivalent(f, store.path(), ec)) throw Error(f + ": is the database being imported into, not a trace file");
    totalBytes += s;
  }

  Database& db = store.db();
  // Integrity is by construction here (every id comes from this transaction), and per-row foreign
  // key lookups cost a third of the insert time. The pragma is a no-op inside a transaction, so it
  // is switched around it; tests run PRAGMA foreign_key_check after imports.
  db.exec("PRAGMA foreign_keys = OFF");
  struct FkRestore {
    Database& db;
    ~FkRestore() {
      try {
        db.exec("PRAGMA foreign_keys = ON");
      } catch (...) {
      }
    }
  } fkRestore{db};
  // A small page cache for the import: what does not fit is written to the WAL as the import goes,
  // while the parsers work, instead of all at the commit (and 50 MB less memory). Measured with
  // bench_import: 16 MiB is as fast as 64 MiB or faster; 1 GiB is 30 % slower (everything at the end).
  const std::int64_t cacheBefore = db.pragmaInt("cache_size");
  db.exec("PRAGMA cache_size = -16384");
  struct CacheRestore {
    Database& db;
    std::int64_t size;
    ~CacheRestore() {
      try {
        db.exec("PRAGMA cache_size = " + std::to_string(size));
      } catch (...) {
      }
    }
  } cacheRestore{db, cacheBefore};
  Transaction tx(db);
  try {
    BulkWriter writer(store);
    // One thread reads and cuts the files into segments, `workers` threads parse segments, this
    // thread writes. Batches carry a sequence number and are written in file order.
    int workers = std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, 4);
    if (const char* env = std::getenv("SHARDSCOPE_IMPORT_THREADS")) workers = std::clamp(std::atoi(env), 1, 16);
    SegmentQueue work(static_cast<std::size_t>(2 * workers));
    BatchQueue queue(static_cast<std::size_t>(2 * workers + 2));
    std::uint64_t seqCounter = 0;
    std::vector<std::unique_ptr<KinetoParser>> parsers;
    for (int w = 0; w < workers; ++w) parsers.push_back(std::make_unique<KinetoParser>(opt, w, files));

    std::thread producer([&] {
      pthread_setname_np(pthread_self(), "ss-read");  // visible in perf/top
      FileSplitter splitter(opt, work, queue, seqCounter);
      int i = 0;
      try {
        for (; i < static_cast<int>(files.size()); ++i) splitter.splitFile(i, files[static_cast<std::size_t>(i)]);
        auto end = std::make_unique<Batch>();
        end->last = true;
        end->seq = seqCounter++;
        work.close();
        queue.push(std::move(end));
      } catch (...) {
        auto err = std::make_unique<Batch>();
        err->file = i;
        err->error = std::current_exception();
        err->seq = seqCounter++;
        work.close();
        queue.push(std::move(err));
      }
    });
    std::vector<std::thread> parserThreads;
    for (int w = 0; w < workers; ++w) {
      parserThreads.emplace_back([&, w] {
        pthread_setname_np(pthread_self(), "ss-parse");
        for (;;) {
          auto seg = work.pop();
          if (!seg) return;
          std::unique_ptr<Batch> b;
          try {
            b = parsers[static_cast<std::size_t>(w)]->parseSegment(*seg);
          } catch (...) {
            b = std::make_unique<Batch>();
            b->file = seg->file;
            b->seq = seg->seq;
            b->error = std::current_exception();
          }
          if (!queue.push(std::move(b))) return;
        }
      });
    }
    struct Joiner {
      std::thread& producer;
      std::vector<std::thread>& parsers;
      SegmentQueue& work;
      BatchQueue& out;
      ~Joiner() {
        work.stop();
        out.stop();
        if (producer.joinable()) producer.join();
        for (auto& t : parsers)
          if (t.joinable()) t.join();
      }
    } joiner{producer, parserThreads, work, queue};

    std::vector<std::vector<Id>> strIds(static_cast<std::size_t>(workers), std::vector<Id>(1, 0));
    std::vector<RankState> ranks(files.size());
    for (auto& r : ranks) {
      r.trackIds.resize(static_cast<std::size_t>(workers));
      r.trackIsCpu.resize(static_cast<std::size_t>(workers));
      r.groupIds.resize(static_cast<std::size_t>(workers));
    }
    const RankState* current = nullptr;  // the rank whose batches are being written
    writer.setBeforeFlush([&](Id trackId, EventChunk& c) {
      if (!current || !(current->unresolvedGpu || current->unresolvedCollective) || !current->gpuTrack.count(trackId))
        return false;
      fillFromLaunch(*current, c);
      return hasUnresolvedGpu(*current, c);  // rewritten at the end of the file, when every launch is known
    });
    std::set<int> usedRanks;
    std::map<int, std::string> rankFiles;
    Id sharedRun = 0;
    std::optional<int> sharedWorld;
    std::string sharedWorldFile;
    std::uint64_t bytesDoneBefore = 0;
    JsonValue devicesAll = JsonValue::array();
    std::set<std::string> warningsSeen;

    auto ensureRun = [&](int file) -> Id {
      if (!opt.separateRuns && sharedRun) return sharedRun;
      Run run;
      run.name = opt.runName.empty()
                     ? defaultRunName(opt.separateRuns ? std::vector<std::string>{files[static_cast<std::size_t>(file)]} : files)
                     : (opt.separateRuns && files.size() > 1 ? opt.runName + " #" + std::to_string(file + 1) : opt.runName);
      run.source = RunSource::Kineto;
      run.status = RunStatus::Completed;
      const Id id = store.createRun(run);
      result.runIds.push_back(id);
      if (!opt.separateRuns) sharedRun = id;
      return id;
    };
    auto noteTime = [](RankState& rs, std::int64_t t) {
      if (!rs.anyTime || t < rs.minTime) rs.minTime = t;
      if (!rs.anyTime || t > rs.maxTime) rs.maxTime = t;
      rs.anyTime = true;
    };

    std::map<std::uint64_t, std::unique_ptr<Batch>> pending;
    std::uint64_t nextSeq = 0;
    for (;;) {
      std::unique_ptr<Batch> b;
      if (auto it = pending.find(nextSeq); it != pending.end()) {
        b = std::move(it->second);
        pending.erase(it);
      } else {
        b = queue.pop();
        if (!b) throw Cancelled();
        if (b->error) std::rethrow_exception(b->error);  // the first error wins, whatever its order
        if (b->seq != nextSeq) {
          pending.emplace(b->seq, std::move(b));
          continue;
        }
      }
      ++nextSeq;
      if (b->last) break;
      if (opt.cancel && opt.cancel->isCancelled()) throw Cancelled();
      RankState& rs = ranks[static_cast<std::size_t>(b->file)];
      current = &rs;
      const std::string& path = files[static_cast<std::size_t>(b->file)];
      const auto w = static_cast<std::size_t>(b->worker);
      if (!rs.rankId) {
        rs.runId = ensureRun(b->file);
        Rank r;
        r.runId = rs.runId;
        r.rank = -1 - b->file;  // provisional until distributedInfo has been read
        r.sourceFile = path;
        rs.rankId = store.addRank(r);
      }
      for (auto& wmsg : b->warnings)
        if (warningsSeen.insert(wmsg).second) result.warnings.push_back(wmsg);
      for (auto& str : b->newStrings) strIds[w].push_back(store.intern(str));
      for (auto& g : b->newGroups) rs.groupIds[w].push_back(store.addProcessGroup(toProcessGroup(rs.runId, g)));
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
        const Id id = store.addTrack(tr);
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
      const std::vector<Id>& wTracks = rs.trackIds[w];
      const std::vector<char>& wCpu = rs.trackIsCpu[w];
      const std::vector<Id>& wGroups = rs.groupIds[w];
      const std::vector<Id>& wStr = strIds[w];
      for (const auto& st : b->steps) {
        if (rs.cpuEventsSeen && st.end > rs.cpuMin && st.start <= rs.cpuMax) rs.lateSteps.push_back(st);
        rs.steps.insert(std::upper_bound(rs.steps.begin(), rs.steps.end(), st,
                                         [](const PStep& a, const PStep& c) { return a.start < c.start; }),
                        st);
        store.addStep(Step{rs.rankId, st.step, st.start, st.end});
      }
      if (!b->fileDone) {
        // Partial results of a parser thread for this file.
        KinetoFileStats& fs = rs.stats;
        fs.events += b->stats.events;
        fs.counters += b->stats.counters;
        fs.flows += b->stats.flows;
        fs.launchFlows += b->stats.launchFlows;
        fs.memoryEvents += b->stats.memoryEvents;
        fs.steps += b->stats.steps;
        fs.kernels += b->stats.kernels;
        fs.ncclKernels += b->stats.ncclKernels;
        fs.skipped += b->stats.skipped;
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
            const RankState::CpuCollective cc{e.start,      e.end, rec.collOp, rec.bytes, rec.dtypeId, rec.processGroupId,
                                              rec.groupSize};
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
          writer.addEvent(rec, raw);  // compacted by the parser
        } else {
          writer.addEvent(rec);
        }
      }
      for (std::size_t i = 0; i < b->memory.size(); ++i) {
        MemoryEvent m = b->memory[i];
        m.rankId = rs.rankId;
        writer.addMemoryEvent(m);
        writer.noteSample(wTracks[b->memoryTracks[2 * i] - 1], m.tsNs);
        writer.noteSample(wTracks[b->memoryTracks[2 * i + 1] - 1], m.tsNs);
        noteTime(rs, m.tsNs);
      }
      for (const auto& c : b->counters) {
        writer.addCounter(wTracks[c.track - 1], c.ts, c.value);
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
        writer.addFlow(fl);
      }

      if (opt.progress) {
        Progress p;
        p.stage = "import " + fileLabel(path);
        p.done = bytesDoneBefore + b->fileOffset;
        p.total = totalBytes;
        p.unit = "bytes";
        opt.progress(p);
      }

      if (!b->fileDone) continue;

      // ---- end of one file: resolve its rank, late steps, deferred GPU steps, time base ----
      FileHeader& h = b->header;
      KinetoFileStats st = rs.stats;
      st.path = b->stats.path;
      st.bytes = b->stats.bytes;
      st.jsonBytes = b->stats.jsonBytes;
      st.traceEvents = b->stats.traceEvents;
      h.tsFloat = rs.partial.tsFloat;
      h.threadNames = std::move(rs.partial.threadNames);
      h.processes = std::move(rs.partial.processes);
      if (st.negativeDurations)
        result.warnings.push_back(fileLabel(path) + ": " + std::to_string(st.negativeDurations) +
                                  " negative durations clamped to 0");
      if (h.baseAfterEvents && h.baseTimeNs && rs.anyTime &&
          (rs.maxTime > kMaxAbsNs - *h.baseTimeNs || rs.minTime < -kMaxAbsNs - *h.baseTimeNs))
        throw Error(path + ": 'baseTimeNanoseconds' (after the events) puts event timestamps out of range");
      bytesDoneBefore += st.bytes;
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
        result.warnings.push_back(fileLabel(path) + ": no distributedInfo; rank " + std::to_string(r.rank) +
                                  " taken from the file name");
      } else {
        int guess = 0;
        while (usedRanks.count(guess)) ++guess;
        r.rank = guess;
        result.warnings.push_back(fileLabel(path) + ": no distributedInfo; assigned rank " + std::to_string(guess));
      }
      if (usedRanks.count(r.rank) && !opt.separateRuns)
        throw Error(path + ": rank " + std::to_string(r.rank) + " is also the rank of " + rankFiles[r.rank] +
                    "; one import must not contain the same rank twice");
      usedRanks.insert(r.rank);
      rankFiles[r.rank] = path;
      st.rank = r.rank;
      st.worldSize = h.worldSize.value_or(0);
      if (!opt.separateRuns && h.worldSize) {
        if (sharedWorld && *sharedWorld != *h.worldSize)
          throw Error(path + ": world size " + std::to_string(*h.worldSize) + " differs from " + std::to_string(*sharedWorld) +
                      " in " + sharedWorldFile +
                      ": these are not ranks of one job (import them separately, or use --separate-runs)");
        sharedWorld = h.worldSize;
        sharedWorldFile = path;
      }
      {
        JsonValue meta = std::move(h.metadata);
        if (!h.distributedInfoJson.empty()) meta.set("distributedInfo", parseJson(h.distributedInfoJson, path));
        if (!h.devicePropertiesJson.empty()) {
          JsonValue dp = parseJson(h.devicePropertiesJson, path);
          meta.set("deviceProperties", dp);
          if (devicesAll.items().empty()) devicesAll = dp;
        }
        meta.set("json_bytes", JsonValue::number(static_cast<std::int64_t>(st.jsonBytes)));
        r.metadataJson = meta.dump();
      }
      if (!h.processes.members().empty()) {
        JsonValue meta = parseJson(r.metadataJson, path);
        meta.set("processes", std::move(h.processes));
        r.metadataJson = meta.dump();
      }
      store.updateRank(r);
      {
        // The device a rank used is its GPU tracks' device (deviceProperties lists every visible GPU).
        Statement dev(db,
                      "UPDATE ranks SET device = COALESCE((SELECT 'cuda:' || MIN(device) FROM tracks WHERE "
                      "rank_id=?1 AND kind='gpu_stream' AND device IS NOT NULL), 'cpu') WHERE id=?1");
        dev.bind(1, rs.rankId);
        dev.exec();
      }
      for (const auto& g : h.groups) store.addProcessGroup(toProcessGroup(rs.runId, g));
      // Thread names from M events, matched on the source's pid/tid text (string tids such as
      // "stream 7 " included).
      if (!h.threadNames.empty()) {
        Statement upd(db, "UPDATE tracks SET name=? WHERE id=?");
        for (const auto& [pid, tid, name] : h.threadNames) {
          std::string n = name;
          while (!n.empty() && n.back() == ' ') n.pop_back();
          auto range = rs.tracksByIds.equal_range(pid + '\x1f' + tid);
          for (auto it = range.first; it != range.second; ++it) {
            // A python track keeps a marker so it stays distinguishable from its thread.
            upd.bind(1, it->second.second ? n + " (python)" : n).bind(2, it->second.first);
            upd.exec();
          }
        }
      }
      // Everything of this file is written before the fix-ups below rewrite chunks.
      writer.flush();
      const std::vector<Id>& cpuTracks = rs.cpuTracks;
      const std::vector<Id>& allTracks = rs.allTracks;
      std::vector<Id> gpuTracks;
      for (Id t : rs.allTracks)
        if (rs.gpuTrack.count(t)) gpuTracks.push_back(t);
      // Step windows that arrived after CPU events inside them.
      for (const auto& s : rs.lateSteps) {
        for (Id t : cpuTracks) {
          writer.rewriteChunks(t, s.start, s.end, [&](EventChunk& c) {
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
        for (Id t : gpuTracks) {
          writer.rewriteChunks(t, std::numeric_limits<TimeNs>::min(), std::numeric_limits<TimeNs>::max(),
                               [&](EventChunk& c) { return fillFromLaunch(rs, c); });
        }
      }
      // Chunks written while some of their launches were still unknown.
      writer.rewriteMarked([&](EventChunk& c) { return fillFromLaunch(rs, c); });
      if (h.baseAfterEvents && h.baseTimeNs && *h.baseTimeNs != 0) {
        // baseTimeNanoseconds came after traceEvents: shift what was written with base 0.
        const TimeNs base = *h.baseTimeNs;
        writer.shiftTracks(allTracks, base);
        const std::string shift = std::to_string(base);
        const std::string rid = std::to_string(rs.rankId);
        db.exec("UPDATE flows SET ts_ns=ts_ns+" + shift + " WHERE rank_id=" + rid);
        db.exec("UPDATE memory_events SET ts_ns=ts_ns+" + shift + " WHERE rank_id=" + rid);
        db.exec("UPDATE steps SET start_ns=start_ns+" + shift + ", end_ns=end_ns+" + shift + " WHERE rank_id=" + rid);
      }
      writer.finish();
      // Free per-rank memory early; the state is not needed after its file.
      rs.corrStep = {};
      rs.gpuTrack = {};
      rs.tracksByIds = {};
      result.events += st.events;
      result.bytes += st.bytes;
      result.jsonBytes += st.jsonBytes;
      result.files.push_back(std::move(st));
    }

    // Run-level attributes.
    for (Id runId : result.runIds) {
      auto run = store.run(runId);
      if (!run) continue;
      int world = 0;
      std::string backend;
      for (std::size_t i = 0; i < result.files.size(); ++i) {
        if (ranks[i].runId != runId) continue;
        world = std::max(world, result.files[i].worldSize);
      }
      if (world == 0) {
        for (std::size_t i = 0; i < result.files.size(); ++i)
          if (ranks[i].runId == runId) ++world;
      }
      run->worldSize = world;
      run->devicesJson = devicesAll.isArray() ? devicesAll.dump() : "[]";
      JsonValue meta = JsonValue::object();
      JsonValue filesJson = JsonValue::array();
      for (std::size_t i = 0; i < result.files.size(); ++i)
        if (ranks[i].runId == runId) filesJson.push(JsonValue::string(result.files[i].path));
      meta.set("imported_files", std::move(filesJson));
      meta.set("importer", JsonValue::string("kineto_json"));
      run->metadataJson = meta.dump();
      store.updateRun(*run);
    }
    tx.commit();
  } catch (...) {
    store.invalidateCaches();
    throw;
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

}  // namespace shardscope::core
