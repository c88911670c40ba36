#include "core/import/kineto_event_reader.h"

#include <charconv>
#include <cstring>
#include <functional>
#include <optional>

#include "core/util/error.h"
#include "core/util/json.h"

namespace shardscope::core::kineto {

void EventReader::beginSegment(const std::string& path, std::string& args) {
  if (path_ != path) path_ = path;
  args_ = &args;
}

void EventReader::read(std::string_view text, std::uint64_t fileOffset, std::uint64_t index) {
  eventIndex_ = index;
  eventOffset_ = fileOffset;
  resetRaw();
  stableText_ = true;
  const bool fast = fastEvent(text, true) != 0;
  stableText_ = false;
  if (fast) return;
  resetRaw();
  JsonReader r(text, path_, opt_.limits);
  r.setOffsetMap([fileOffset](std::uint64_t local) { return fileOffset + local; });
  if (r.next() != Token::BeginObject) failEvent("is not a JSON object");
  parseEventFields(r);
  if (r.next() != Token::End) r.fail("unexpected data after an event");
}

std::size_t EventReader::readPrefix(std::string_view text, std::uint64_t fileOffset, std::uint64_t index) {
  eventIndex_ = index;
  eventOffset_ = fileOffset;
  resetRaw();
  stableText_ = true;
  const std::size_t n = fastEvent(text, false);
  stableText_ = false;
  if (!n) resetRaw();  // drops what the scanner kept of this event (its args) before it gave up
  return n;
}

void EventReader::failEvent(const std::string& msg) const {
  throw Error(path_ + ": event #" + std::to_string(eventIndex_) + " (byte offset " + std::to_string(eventOffset_) + "): " + msg);
}

void EventReader::resetRaw() {
  ev_.hasName = ev_.hasCat = ev_.hasTs = ev_.hasDur = ev_.hasId = false;
  ev_.name = ev_.cat = ev_.ph = ev_.bp = ev_.scope = ev_.ts = ev_.dur = {};
  ev_.pid.present = ev_.tid.present = false;
  ev_.externalId = ev_.correlation = ev_.stream = ev_.device = kNone;
  ev_.streamArg = false;
  ev_.collName = ev_.dtype = ev_.pgName = ev_.pgDesc = ev_.pgRanks = {};
  ev_.inNelems = ev_.outNelems = ev_.groupSize = kNone;
  ev_.inputNumel = kNone;
  ev_.inputType = {};
  ev_.totalAllocated = ev_.totalReserved = ev_.bytes = ev_.addr = ev_.devId = ev_.devType = kNone;
  ev_.counterValues.clear();
  ev_.argsJson = {};
  if (ev_.rawArgsLen) {
    // The previous event did not keep its args (e.g. an ac2g X event): drop them from the batch.
    if (ev_.rawArgsOff + ev_.rawArgsLen == (*args_).size()) (*args_).resize(ev_.rawArgsOff);
    ev_.rawArgsLen = 0;
  }
}

void EventReader::readId(Token t, std::string_view text, RawId& id, const char* field, const std::int64_t* known) {
  id.present = true;
  const Slot slot = &id == &ev_.pid ? kSlotPid : kSlotTid;
  if (t == Token::Number) {
    auto v = known ? std::optional<std::int64_t>(*known) : parseInt(text);
    if (!v) failEvent(std::string("field '") + field + "' is not an integer");
    id.isNum = true;
    id.num = *v;
    id.text = keep(slot, text);
  } else if (t == Token::String) {
    id.text = keep(slot, text);
    auto v = parseInt(id.text);
    id.isNum = false;
    id.num = v.value_or(0);
  } else {
    failEvent(std::string("field '") + field + "' must be a number or a string");
  }
}

std::int64_t EventReader::argInt(Token t, std::string_view text, const std::int64_t* known) {
  if (known) return *known;
  if (t == Token::Number || t == Token::String) {
    if (auto v = parseInt(text)) return *v;
  }
  return kNone;
}

EventReader::ArgKey EventReader::argKey(std::string_view k) {
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
void EventReader::parseArgs(JsonReader& r) {
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

bool EventReader::collectiveAnnotationName() const { return startsWith(ev_.name, "nccl:") || startsWith(ev_.name, "gloo:"); }

// "Input Dims": [[8, 1024, 8816], ...] -> the element count of the first input; "Input type":
// ["float", ...] -> its first entry. Consumes the array (its '[' was just read).
void EventReader::readInputArray(JsonReader& r, ArgKey key) {
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
      ev_.inputType = keep(kSlotInputType, r.text());
    }
  }
  if (key == kArgInputDims && any && ok) ev_.inputNumel = numel;
}

// The same from the text of a validated array (the fast path): "[[8, 1024, 8816], [2]]" or
// "[\"float\", \"int\"]".
void EventReader::inputFromText(std::string_view a, ArgKey key) {
  std::size_t i = 1;  // past '['
  auto ws = [&] {
    while (i < a.size() && (a[i] == ' ' || a[i] == '\t' || a[i] == '\n' || a[i] == '\r')) ++i;
  };
  ws();
  if (key == kArgInputType) {
    if (i >= a.size() || a[i] != '"' || !ev_.inputType.empty()) return;
    const std::size_t close = a.find('"', i + 1);
    if (close != std::string_view::npos) ev_.inputType = keep(kSlotInputType, a.substr(i + 1, close - i - 1));
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
void EventReader::onArg(ArgKey key, Token t, std::string_view text, const std::int64_t* known) {
  switch (key) {
    case kArgOther:
    case kArgInputDims:  // arrays (readInputArray); a scalar there means nothing
    case kArgInputType:
      break;
    case kArgExternalId:
      ev_.externalId = argInt(t, text, known);
      break;
    case kArgCorrelation:
      ev_.correlation = argInt(t, text, known);
      break;
    case kArgStream:
      ev_.stream = argInt(t, text, known);
      ev_.streamArg = ev_.stream != kNone;
      break;
    case kArgDevice:
      ev_.device = argInt(t, text, known);
      break;
    case kArgCollName:
      if (t == Token::String) ev_.collName = keep(kSlotCollName, text);
      break;
    case kArgInNelems:
      ev_.inNelems = argInt(t, text, known);
      break;
    case kArgOutNelems:
      ev_.outNelems = argInt(t, text, known);
      break;
    case kArgGroupSize:
      ev_.groupSize = argInt(t, text, known);
      break;
    case kArgDtype:
      if (t == Token::String) ev_.dtype = keep(kSlotDtype, text);
      break;
    case kArgPgName:
      if (t == Token::String || t == Token::Number) ev_.pgName = keep(kSlotPgName, text);
      break;
    case kArgPgDesc:
      if (t == Token::String) ev_.pgDesc = keep(kSlotPgDesc, text);
      break;
    case kArgPgRanks:
      if (t == Token::String) ev_.pgRanks = keep(kSlotPgRanks, text);
      break;
    case kArgTotalAllocated:
      ev_.totalAllocated = argInt(t, text, known);
      break;
    case kArgTotalReserved:
      ev_.totalReserved = argInt(t, text, known);
      break;
    case kArgBytes:
      ev_.bytes = argInt(t, text, known);
      break;
    case kArgAddr:
      ev_.addr = argInt(t, text, known);
      break;
    case kArgDeviceId:
      ev_.devId = argInt(t, text, known);
      break;
    case kArgDeviceType:
      ev_.devType = argInt(t, text, known);
      break;
  }
}

// Keeps the args object's text, whitespace removed here on the parser threads (the writer thread
// only copies it into its chunk's args block).
void EventReader::keepArgs(std::string_view raw, bool keep) {
  if (!keep) return;
  if (opt_.keepArgs && ev_.ph.size() == 1 && (ev_.ph[0] == 'X' || ev_.ph[0] == 'i' || ev_.ph[0] == 'I') && raw.size() > 2) {
    // The common case goes straight into the batch (one copy); appendArgs() keeps or drops it.
    ev_.rawArgsOff = (*args_).size();
    appendCompactJson((*args_), raw);
    ev_.rawArgsLen = (*args_).size() - ev_.rawArgsOff;
  } else {
    ev_.argsJson = raw;  // the event's text, or the in-place reader's: valid while it is handled
  }
}

// keepArgs for the direct scanner, which found the whitespace outside strings as it went: the
// common case copies the runs between those gaps instead of scanning the text again. `end` is the
// end of the text the args lie in (16-byte loads may read past the args, not past that).
void EventReader::keepScannedArgs(std::string_view raw, bool keep, const WsGaps& gaps, const char* end) {
  if (!keep) return;
  if (!(opt_.keepArgs && ev_.ph.size() == 1 && (ev_.ph[0] == 'X' || ev_.ph[0] == 'i' || ev_.ph[0] == 'I') && raw.size() > 2) ||
      gaps.overflow) {
    keepArgs(raw, keep);
    return;
  }
  std::string& out = *args_;
  const std::size_t base = out.size();
  std::size_t dropped = 0;
  for (int i = 0; i < gaps.n; ++i) dropped += static_cast<std::size_t>(gaps.to[i] - gaps.from[i]);
  const std::size_t length = raw.size() - dropped;
  out.resize(base + length + 16);  // room for the last 16-byte store
  char* dst = out.data() + base;
  const char* src = raw.data();
  const char* const rawEnd = raw.data() + raw.size();
  for (int i = 0; i <= gaps.n; ++i) {
    const char* const runEnd = i < gaps.n ? gaps.from[i] : rawEnd;
    const auto k = static_cast<std::size_t>(runEnd - src);
#if defined(__SSE2__)
    if (static_cast<std::size_t>(end - src) >= k + 16) {
      for (std::size_t c = 0; c < k; c += 16)
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + c), _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + c)));
    } else {
      std::memcpy(dst, src, k);
    }
#else
    std::memcpy(dst, src, k);
#endif
    dst += k;
    if (i < gaps.n) src = gaps.to[i];
  }
  out.resize(base + length);
  ev_.rawArgsOff = base;
  ev_.rawArgsLen = length;
}

// The full tokenizer's reading of one event (its '{' was just returned): every error is precise.
void EventReader::parseEventFields(JsonReader& r) {
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

namespace {

// The direct scanner's pieces. Each takes the position and returns the one after what it read, or
// nullptr when the text is not the common, well-formed case (the caller then gives up and the full
// tokenizer re-reads the event). The position lives in a register, not behind a lambda's capture.

inline bool isJsonWs(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

inline const char* skipWs(const char* p, const char* end) {
  while (p < end && static_cast<unsigned char>(*p) <= ' ' && isJsonWs(*p)) ++p;
  return p;
}

// The same, noting where whitespace was skipped (the args' compact copy leaves those bytes out).
inline const char* skipWs(const char* p, const char* end, EventReader::WsGaps& gaps) {
  if (p < end && static_cast<unsigned char>(*p) <= ' ' && isJsonWs(*p)) {
    const char* const from = p;
    do ++p;
    while (p < end && static_cast<unsigned char>(*p) <= ' ' && isJsonWs(*p));
    gaps.add(from, p);
  }
  return p;
}

// A string without escapes; p is at its opening quote.
inline const char* scanString(const char* p, const char* end, std::string_view& out) {
  const auto at = findQuoteOrBackslash(p, 1, static_cast<std::size_t>(end - p));
  const char* q = p + at;
  if (q >= end || *q == '\\') return nullptr;
  out = std::string_view(p + 1, static_cast<std::size_t>(q - p - 1));
  return q + 1;
}

inline bool isDigit(char c) { return static_cast<unsigned>(c - '0') <= 9; }

// A number the scanner read: its value when it is a plain integer of up to 18 digits (what parseInt
// would make of its text), else isInt is false.
struct ScannedNumber {
  bool isInt = false;
  std::int64_t value = 0;
  const std::int64_t* known() const { return isInt ? &value : nullptr; }
};

// A number in the JSON grammar without exponent: -?(0|[1-9][0-9]*)(.[0-9]+)?
inline const char* scanNumber(const char* p, const char* end, std::string_view& out, ScannedNumber& num) {
  const char* q = p;
  const bool neg = q < end && *q == '-';
  if (neg) ++q;
  if (q >= end || !isDigit(*q)) return nullptr;
  const char* const digits = q;
  std::uint64_t v = 0;  // wraps past 19 digits: only used up to 18
  if (*q == '0') {
    ++q;
  } else {
    while (q < end && isDigit(*q)) v = v * 10 + static_cast<unsigned>(*q++ - '0');
  }
  num.isInt = q - digits <= 18;
  if (q < end && *q == '.') {
    num.isInt = false;
    ++q;
    const char* d = q;
    while (q < end && isDigit(*q)) ++q;
    if (q == d) return nullptr;
  }
  if (q < end && (*q == 'e' || *q == 'E' || isDigit(*q))) return nullptr;
  // Valued only up to 18 digits (< 1e18 < 2^63): past that v has wrapped and its negation could
  // overflow (UBSan caught -2^63 on the fuzz corpus's huge numbers).
  if (num.isInt) num.value = neg ? -static_cast<std::int64_t>(v) : static_cast<std::int64_t>(v);
  out = std::string_view(p, static_cast<std::size_t>(q - p));
  return q;
}

// A scalar value (p < end): its token type and text.
inline const char* scanScalar(const char* p, const char* end, JsonReader::Token& t, std::string_view& text, ScannedNumber& num) {
  using Token = JsonReader::Token;
  const char c = *p;
  num.isInt = false;
  if (c == '"') {
    t = Token::String;
    return scanString(p, end, text);
  }
  if (c == '-' || isDigit(c)) {
    t = Token::Number;
    return scanNumber(p, end, text, num);
  }
  text = {};
  const auto rest = static_cast<std::size_t>(end - p);
  if (rest >= 4 && std::memcmp(p, "true", 4) == 0) {
    t = Token::True;
    return p + 4;
  }
  if (rest >= 5 && std::memcmp(p, "false", 5) == 0) {
    t = Token::False;
    return p + 5;
  }
  if (rest >= 4 && std::memcmp(p, "null", 4) == 0) {
    t = Token::Null;
    return p + 4;
  }
  return nullptr;
}

// An object member's key at p (its opening quote) and the colon after it: the position of its
// value (after whitespace), or nullptr. ws(p) skips whitespace.
template <typename SkipWs>
const char* scanMemberKey(const char* p, const char* end, std::string_view& key, const SkipWs& ws) {
  if (p >= end || *p != '"' || !(p = scanString(p, end, key))) return nullptr;
  p = ws(p);
  if (p >= end || *p != ':') return nullptr;
  return ws(p + 1);
}

// Validates and skips a nested array or object (args like "Input Dims": [[1, 2], [3]]) whose
// bracket is at p, `depth` being that container's nesting; more than 32 levels give up. Iterative:
// one loop over the members of every level, the closers on a small stack. ws(p) skips whitespace.
template <typename SkipWs>
const char* skipNested(const char* p, const char* end, int depth, const SkipWs& ws) {
  constexpr int kMaxDepth = 32;
  char closers[kMaxDepth + 2];
  int top = 0;
  for (;;) {
    // p is at the bracket of a container to open.
    if (depth + top > kMaxDepth) return nullptr;
    closers[top++] = *p == '{' ? '}' : ']';
    p = ws(p + 1);
    bool closed = p < end && *p == closers[top - 1];
    if (closed) ++p;
    for (;;) {
      if (closed) {
        // A container ended at p: the value after it in its parent, if any.
        if (--top == 0) return p;
        closed = false;
      } else {
        // p is at a member of the innermost container (after whitespace).
        if (closers[top - 1] == '}') {
          std::string_view key;
          if (!(p = scanMemberKey(p, end, key, ws))) return nullptr;
        }
        if (p >= end) return nullptr;
        if (*p == '{' || *p == '[') break;  // opens a level
        JsonReader::Token t;
        std::string_view v;
        ScannedNumber num;
        if (!(p = scanScalar(p, end, t, v, num))) return nullptr;
      }
      p = ws(p);
      if (p >= end) return nullptr;
      if (*p == ',') {
        p = ws(p + 1);
        continue;
      }
      if (*p != closers[top - 1]) return nullptr;
      ++p;
      closed = true;
    }
  }
}

// An event's key at p (its opening quote): EventReader::fieldId of it, read without a string scan
// for the usual keys.
inline const char* scanFieldKey(const char* p, const char* end, int& which) {
  if (end - p >= 6) {
    const char* k = p + 1;
    // Only letters match below, so no quote or backslash comes before the closing quote tested.
    which = 0;
    std::size_t len = 0;
    if (k[1] == '"') {
      len = 1;
      if (k[0] == 's') which = 11;
    } else if (k[2] == '"') {
      len = 2;
      if (k[0] == 'p' && k[1] == 'h') which = 1;
      if (k[0] == 't' && k[1] == 's') which = 4;
      if (k[0] == 'i' && k[1] == 'd') which = 9;
      if (k[0] == 'b' && k[1] == 'p') which = 10;
    } else if (k[3] == '"') {
      len = 3;
      if (k[0] == 'c' && k[1] == 'a' && k[2] == 't') which = 3;
      if (k[0] == 'd' && k[1] == 'u' && k[2] == 'r') which = 5;
      if (k[0] == 'p' && k[1] == 'i' && k[2] == 'd') which = 6;
      if (k[0] == 't' && k[1] == 'i' && k[2] == 'd') which = 7;
    } else if (k[4] == '"') {
      len = 4;
      if (std::memcmp(k, "name", 4) == 0) which = 2;
      if (std::memcmp(k, "args", 4) == 0) which = 8;
    }
    if (which) return k + len + 1;
  }
  std::string_view key;
  if (!(p = scanString(p, end, key))) return nullptr;
  which = EventReader::fieldId(key);
  return p;
}

}  // namespace

// The args object at p: promoted keys fill the event, the raw text is kept.
const char* EventReader::fastArgs(const char* p, const char* end) {
  const bool keep = opt_.keepArgs || ev_.ph.size() != 1 || ev_.ph[0] == 'M' || ev_.ph[0] == 'C';
  const char* const start = p;
  WsGaps gaps;
  const auto ws = [&gaps, end](const char* q) { return skipWs(q, end, gaps); };
  p = ws(p + 1);
  if (p < end && *p == '}') {
    ++p;
  } else {
    for (;;) {
      std::string_view key;
      if (!(p = scanMemberKey(p, end, key, ws))) return nullptr;
      if (p >= end) return nullptr;
      if (*p == '{' || *p == '[') {
        const char* const from = p;
        const ArgKey k = *p == '[' && collectiveAnnotationName() ? argKey(key) : kArgOther;
        if (!(p = skipNested(p, end, 1, ws))) return nullptr;
        if (k == kArgInputDims || k == kArgInputType)
          inputFromText(std::string_view(from, static_cast<std::size_t>(p - from)), k);
      } else {
        Token t;
        std::string_view v;
        ScannedNumber num;
        if (!(p = scanScalar(p, end, t, v, num))) return nullptr;
        onArg(argKey(key), t, v, num.known());
      }
      p = ws(p);
      if (p >= end) return nullptr;
      if (*p == ',') {
        p = ws(p + 1);
        continue;
      }
      if (*p != '}') return nullptr;
      ++p;
      break;
    }
  }
  keepScannedArgs(std::string_view(start, static_cast<std::size_t>(p - start)), keep, gaps, end);
  return p;
}

// Reads one event straight from its text for the common, well-formed case: no escapes, plain
// numbers, nesting only inside args. Returns 0 as soon as anything else shows up; the caller then
// re-reads the event with the full tokenizer, which also produces the precise error.
std::size_t EventReader::fastEvent(std::string_view ev, bool whole) {
  const char* p = ev.data();
  const char* const end = p + ev.size();
  p = skipWs(p, end);
  if (p >= end || *p != '{') return 0;
  p = skipWs(p + 1, end);
  if (p < end && *p == '}') {
    ++p;
  } else {
    for (;;) {
      int which = 0;
      if (p >= end || *p != '"' || !(p = scanFieldKey(p, end, which))) return 0;
      p = skipWs(p, end);
      if (p >= end || *p != ':') return 0;
      p = skipWs(p + 1, end);
      if (p >= end) return 0;
      if (*p == '{' || *p == '[') {
        if (which == 8 && *p == '{') {
          p = fastArgs(p, end);
        } else {
          if (which >= 1 && which <= 7) return 0;  // let the tokenizer report the type error
          p = skipNested(p, end, 0, [end](const char* q) { return skipWs(q, end); });
        }
        if (!p) return 0;
      } else {
        Token t;
        std::string_view v;
        ScannedNumber num;
        if (!(p = scanScalar(p, end, t, v, num))) return 0;
        // Type errors are reported by the full reader (same message either way).
        if ((which == 1 || which == 3) && t != Token::String) return 0;
        if (which == 2 && t != Token::String && t != Token::Number) return 0;
        if ((which == 4 || which == 5) && t != Token::Number) return 0;
        if ((which == 6 || which == 7) && t != Token::Number && t != Token::String) return 0;
        onField(which, t, v, num.known());
      }
      p = skipWs(p, end);
      if (p >= end) return 0;
      if (*p == ',') {
        p = skipWs(p + 1, end);
        continue;
      }
      if (*p != '}') return 0;
      ++p;
      break;
    }
  }
  const auto length = static_cast<std::size_t>(p - ev.data());
  if (!whole) return length;
  return skipWs(p, end) == end ? length : 0;
}

int EventReader::fieldId(std::string_view k) {
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
void EventReader::onFieldType(int which) {
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
void EventReader::onField(int which, Token t, std::string_view text, const std::int64_t* known) {
  switch (which) {
    case 1:
      if (t != Token::String) failEvent("field 'ph' must be a string");
      ev_.ph = keep(kSlotPh, text);
      break;
    case 2:
      if (t != Token::String && t != Token::Number) failEvent("field 'name' must be a string");
      ev_.name = keep(kSlotName, text);
      ev_.hasName = true;
      break;
    case 3:
      if (t != Token::String) failEvent("field 'cat' must be a string");
      ev_.cat = keep(kSlotCat, text);
      ev_.hasCat = true;
      break;
    case 4:
      if (t != Token::Number) failEvent("field 'ts' must be a number");
      ev_.ts = keep(kSlotTs, text);
      ev_.hasTs = true;
      break;
    case 5:
      if (t != Token::Number) failEvent("field 'dur' must be a number");
      ev_.dur = keep(kSlotDur, text);
      ev_.hasDur = true;
      break;
    case 6:
      readId(t, text, ev_.pid, "pid", known);
      break;
    case 7:
      readId(t, text, ev_.tid, "tid", known);
      break;
    case 9:
      if (t == Token::Number || t == Token::String) {
        auto v = known ? std::optional<std::int64_t>(*known) : parseInt(text);
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
      if (t == Token::String) ev_.bp = keep(kSlotBp, text);
      break;
    case 11:
      if (t == Token::String) ev_.scope = keep(kSlotScope, text);
      break;
    default:
      break;  // unknown keys, and "args" that is not an object
  }
}

}  // namespace shardscope::core::kineto
