#pragma once
// The tokenizer of the Kineto reader: one trace event's JSON text -> its fields (RawEvent). The
// common, well-formed event is read by a direct scanner (no tokens, no copies but the kept args);
// anything unusual (escapes, exponents, type errors, bad syntax) is re-read by the full JsonReader,
// which also words every error with the file, the event's index and its byte offset.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/import/kineto_records.h"
#include "core/import/trace_reader.h"
#include "core/util/json_reader.h"

namespace shardscope::core::kineto {

// One event's fields, reused from event to event (no allocation once warm). Numbers stay text where
// the parser decides their meaning (ts, dur); promoted args are decoded.
// Per-event scratch, reused to avoid allocations.
struct RawId {
  bool isNum = false;
  bool present = false;
  std::int64_t num = 0;
  std::string text;
};
struct RawEvent {
  std::string name, cat, ph, bp, scope;
  bool hasName = false, hasCat = false, hasTs = false, hasDur = false, hasId = false;
  RawId pid, tid;
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
};

class EventReader {
 public:
  explicit EventReader(const ImportOptions& options) : opt_(options) {}

  // Events that follow come from `path`; args kept raw go to the end of `args` (the batch's block),
  // their place in RawEvent::rawArgsOff/Len.
  void beginSegment(const std::string& path, std::string& args);
  // Reads one event (a JSON object's text) at `fileOffset`, the `index`th of traceEvents.
  void read(std::string_view text, std::uint64_t fileOffset, std::uint64_t index);
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
  void readId(Token t, std::string_view text, RawId& id, const char* field);
  static std::int64_t argInt(Token t, std::string_view text);
  static ArgKey argKey(std::string_view k);
  static int fieldId(std::string_view k);
  void parseArgs(JsonReader& r);
  bool collectiveAnnotationName() const;
  void readInputArray(JsonReader& r, ArgKey key);
  void inputFromText(std::string_view a, ArgKey key);
  void onArg(ArgKey key, Token t, std::string_view text);
  void keepArgs(std::string_view raw, bool keep);
  void parseEventFields(JsonReader& r);
  bool fastEvent(std::string_view ev);
  [[noreturn]] void onFieldType(int which);
  void onField(int which, Token t, std::string_view text);

  const ImportOptions& opt_;
  RawEvent ev_;
  std::string path_;
  std::string* args_ = nullptr;
  std::uint64_t eventIndex_ = 0;
  std::uint64_t eventOffset_ = 0;
};

}  // namespace shardscope::core::kineto
