#pragma once
// The tokenizer of the Kineto reader: one trace event's JSON text -> its fields (RawEvent). The
// common, well-formed event is read by a direct scanner (no tokens, no copies but the kept args);
// anything unusual (escapes, exponents, type errors, bad syntax) is re-read by the full JsonReader,
// which also words every error with the file, the event's index and its byte offset.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/import/kineto_records.h"
#include "core/import/trace_reader.h"
#include "core/util/json_reader.h"

namespace shardscope::core::kineto {

// One event's fields, reused from event to event. Numbers stay text where the parser decides their
// meaning (ts, dur); promoted args are decoded. The texts are views, valid while the event is
// handled: into the event's own text (the fast path: no copy), or into the reader's per-field
// storage (an event the full tokenizer reads: escapes are undone there).
struct RawId {
  bool isNum = false;
  bool present = false;
  std::int64_t num = 0;
  std::string_view text;
};
struct RawEvent {
  std::string_view name, cat, ph, bp, scope;
  bool hasName = false, hasCat = false, hasTs = false, hasDur = false, hasId = false;
  RawId pid, tid;
  std::string_view ts, dur;
  std::int64_t flowId = 0;
  // args
  std::int64_t externalId = kNone, correlation = kNone, stream = kNone, device = kNone;
  bool streamArg = false;
  std::string_view collName, dtype, pgName, pgDesc, pgRanks;
  std::int64_t inNelems = kNone, outNelems = kNone, groupSize = kNone;
  std::int64_t inputNumel = kNone;  // "Input Dims" of a nccl:/gloo: annotation: elements of its first input
  std::string_view inputType;       // ... and "Input type"'s first entry
  std::int64_t totalAllocated = kNone, totalReserved = kNone, bytes = kNone, addr = kNone, devId = kNone, devType = kNone;
  std::vector<std::pair<std::string, double>> counterValues;
  std::string_view argsJson;
  std::size_t rawArgsOff = 0, rawArgsLen = 0;  // args already appended to the batch
};

class EventReader {
 public:
  explicit EventReader(const ImportOptions& options) : opt_(options) {}
  // Where the direct scanner skipped whitespace in an args object: [from[i], to[i]) (at most kMax
  // gaps; more set overflow, and the args are compacted by a scan of their text instead).
  struct WsGaps {
    static constexpr int kMax = 96;
    std::array<const char*, kMax> from;  // not zeroed: only [0, n) is read
    std::array<const char*, kMax> to;
    int n = 0;
    bool overflow = false;
    void add(const char* a, const char* b) {
      if (n == kMax) {
        overflow = true;
        return;
      }
      from[n] = a;
      to[n] = b;
      ++n;
    }
  };
  // The field a key of an event names: 1 ph, 2 name, 3 cat, 4 ts, 5 dur, 6 pid, 7 tid, 8 args, 9 id,
  // 10 bp, 11 s; 0 any other.
  static int fieldId(std::string_view k);

  // Events that follow come from `path`; args kept raw go to the end of `args` (the batch's block),
  // their place in RawEvent::rawArgsOff/Len.
  void beginSegment(const std::string& path, std::string& args);
  // Reads one event (a JSON object's text) at `fileOffset`, the `index`th of traceEvents.
  void read(std::string_view text, std::uint64_t fileOffset, std::uint64_t index);
  // The same for the event at the start of `text` (more may follow), by the direct scanner only:
  // the event's length when it read it, 0 when the event needs read() (anything unusual, or the
  // event goes on past the end of `text`). Skips the splitter's separate bracket scan.
  std::size_t readPrefix(std::string_view text, std::uint64_t fileOffset, std::uint64_t index);
  RawEvent& event() { return ev_; }
  // The error for the event being read: "<path>: event #N (byte offset B): msg".
  [[noreturn]] void failEvent(const std::string& msg) const;

 private:
  using Token = JsonReader::Token;
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

  void resetRaw();
  // `known`, when given, is the value of a Number token the direct scanner already read as a plain
  // integer (so its text need not be parsed again).
  void readId(Token t, std::string_view text, RawId& id, const char* field, const std::int64_t* known = nullptr);
  static std::int64_t argInt(Token t, std::string_view text, const std::int64_t* known);
  static ArgKey argKey(std::string_view k);
  void parseArgs(JsonReader& r);
  bool collectiveAnnotationName() const;
  void readInputArray(JsonReader& r, ArgKey key);
  void inputFromText(std::string_view a, ArgKey key);
  void onArg(ArgKey key, Token t, std::string_view text, const std::int64_t* known = nullptr);
  void keepArgs(std::string_view raw, bool keep);
  void keepScannedArgs(std::string_view raw, bool keep, const WsGaps& gaps, const char* end);
  void parseEventFields(JsonReader& r);
  // Reads the event at the start of ev; its length, or 0 (see readPrefix). Whole: nothing but
  // whitespace may follow it.
  std::size_t fastEvent(std::string_view ev, bool whole);
  // The direct scanner's args object at p (its '{'): the position after it, nullptr to give up.
  const char* fastArgs(const char* p, const char* end);
  [[noreturn]] void onFieldType(int which);
  void onField(int which, Token t, std::string_view text, const std::int64_t* known = nullptr);
  // Where a field's text lives: the event text itself on the fast path, else slot `slot`'s copy.
  enum Slot : std::uint8_t {
    kSlotName,
    kSlotCat,
    kSlotPh,
    kSlotBp,
    kSlotScope,
    kSlotTs,
    kSlotDur,
    kSlotPid,
    kSlotTid,
    kSlotCollName,
    kSlotDtype,
    kSlotPgName,
    kSlotPgDesc,
    kSlotPgRanks,
    kSlotInputType,
    kSlots
  };
  std::string_view keep(Slot slot, std::string_view text) {
    if (stableText_) return text;
    return owned_[slot].assign(text);
  }

  const ImportOptions& opt_;
  RawEvent ev_;
  bool stableText_ = false;  // the views handed to onField/onArg outlive the event's handling
  std::array<std::string, kSlots> owned_;
  std::string path_;
  std::string* args_ = nullptr;
  std::uint64_t eventIndex_ = 0;
  std::uint64_t eventOffset_ = 0;
};

}  // namespace shardscope::core::kineto
