// libFuzzer harness for the event-chunk decoder (core/storage/event_chunk.h): the BLOBs of the
// event_chunks table, read from any database a user opens (a damaged or hostile file must not crash
// the app or the CLI).
//
// core::Error is the expected way to refuse a blob. A crash, a sanitizer report, a hang, another
// exception type, or a broken invariant is a bug (abort() below): a decoded chunk has columns of one
// length, at most kMaxEvents events, and re-encodes to a blob that decodes to the same columns.
//
// Seeds (chunk_corpus/): real encodings and damaged copies, written by make_chunk_corpus.cpp.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/storage/event_chunk.h"
#include "core/util/error.h"

namespace {

using shardscope::core::EventChunk;

[[noreturn]] void invariant(const char* what) {
  std::fprintf(stderr, "fuzz_event_chunk: invariant broken: %s\n", what);
  std::abort();
}

bool sameColumns(const EventChunk& a, const EventChunk& b) {
  return a.start == b.start && a.end == b.end && a.name == b.name && a.cat == b.cat && a.dtype == b.dtype && a.pg == b.pg &&
         a.category == b.category && a.flags == b.flags && a.collOp == b.collOp && a.step == b.step &&
         a.correlation == b.correlation && a.externalId == b.externalId && a.bytes == b.bytes && a.groupSize == b.groupSize;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view blob(reinterpret_cast<const char*>(data), size);
  EventChunk c;
  try {
    c = EventChunk::decode(blob);
  } catch (const shardscope::core::Error&) {
    return 0;  // refused with a message: what a damaged blob must get
  }
  const std::size_t n = c.size();
  if (n > static_cast<std::size_t>(EventChunk::kMaxEvents)) invariant("more than kMaxEvents events");
  for (std::size_t len :
       {c.end.size(), c.name.size(), c.cat.size(), c.dtype.size(), c.pg.size(), c.category.size(), c.flags.size(),
        c.collOp.size(), c.step.size(), c.correlation.size(), c.externalId.size(), c.bytes.size(), c.groupSize.size()})
    if (len != n) invariant("columns of different lengths");
  for (std::size_t i = 0; i < n; ++i) (void)c.record(i, shardscope::core::TrackId{1});
  EventChunk back;
  try {
    back = EventChunk::decode(c.encode());
  } catch (const shardscope::core::Error&) {
    invariant("a decoded chunk re-encodes to a blob that does not decode");
  }
  if (!sameColumns(c, back)) invariant("decode(encode(decode(blob))) != decode(blob)");
  return 0;
}
