#pragma once
// Events are stored in chunks: up to kMaxEvents events of one track, sorted by (start, end desc),
// encoded column by column in one BLOB. One SQLite row per chunk instead of one per event is what
// makes import run at memory speed (a row insert costs ~1.4 µs on a CI core; a chunk costs ~0.1 µs
// per event), and the timeline decodes a window of chunks without a per-row query.
// Layout (little-endian) is documented in docs/SCHEMA.md.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/model/types.h"

namespace shardscope::core {

struct EventChunk {
  static constexpr std::uint32_t kFormat = 1;
  static constexpr int kMaxEvents = 1024;
  static constexpr int kIdShift = 16;  // event id = chunk id << 16 | index in chunk

  // Columns (size() == count). Optional columns use sentinels: kNull for integers, 0 for string ids.
  static constexpr std::int64_t kNull = INT64_MIN;
  std::vector<std::int64_t> start, end;
  std::vector<std::uint32_t> name, cat, dtype, pg;
  std::vector<std::uint8_t> category, flags, collOp;
  std::vector<std::int64_t> step, correlation, externalId, bytes;
  std::vector<std::int32_t> groupSize;  // 0 = none

  std::size_t size() const { return start.size(); }
  void clear();
  void reserve(std::size_t n);
  void push(const EventRecord& e);
  EventRecord record(std::size_t i, TrackId trackId) const;
  // Sorts by (start, end desc) and returns the permutation applied (old index of each new slot).
  std::vector<std::uint32_t> sortByTime();

  std::string encode() const;
  void encodeInto(std::string& out) const;  // the same into `out` (replaced; its capacity is reused)
  // Throws core::Error on a malformed blob (a damaged database must not crash us).
  static EventChunk decode(std::string_view blob);

  static Id eventId(Id chunkId, std::size_t index) { return (chunkId << kIdShift) | static_cast<Id>(index); }
  static Id chunkOf(Id eventId) { return eventId >> kIdShift; }
  static std::size_t indexOf(Id eventId) { return static_cast<std::size_t>(eventId & ((Id{1} << kIdShift) - 1)); }
};

}  // namespace shardscope::core
