#pragma once
// The parser of the Kineto reader: a segment of events (raw JSON text cut by the pipeline) -> a
// Batch of typed records (events, counters, flows, memory records, steps, new tracks and groups)
// with ids local to the parser; the writer maps them to the store's ids. One parser per thread;
// each event's text is read by EventReader, then classified here (track, category, collective,
// step). Testable on a string: makeSegment(events) and parseSegment.
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/import/kineto_event_reader.h"
#include "core/import/kineto_records.h"
#include "core/import/trace_reader.h"
#include "core/util/json.h"

namespace shardscope::core::kineto {

class KinetoParser {
 public:
  // `files` are the import's files (Segment::file indexes them); worker names the id space.
  KinetoParser(const ImportOptions& options, int worker, const std::vector<std::string>& files);
  ~KinetoParser();
  KinetoParser(const KinetoParser&) = delete;
  KinetoParser& operator=(const KinetoParser&) = delete;

  // Parses every event of the segment; throws core::Error naming the file, event index and offset.
  std::unique_ptr<Batch> parseSegment(const Segment& seg);

  // The same one event at a time, on text that needs to live only during the call (the per-file
  // pipeline parses straight from its inflate buffer): beginBatch, addEvent..., takeBatch.
  void beginBatch(int file, std::uint64_t seq, std::optional<std::int64_t> baseTimeNs);
  void addEvent(std::string_view text, std::uint64_t fileOffset, std::uint64_t index);
  // The event at the start of `text` (more may follow), when the direct scanner reads it: its
  // length; 0 when it needs addEvent with its exact text (nothing of it was kept).
  std::size_t addEventPrefix(std::string_view text, std::uint64_t fileOffset, std::uint64_t index);
  std::unique_ptr<Batch> takeBatch(std::uint64_t fileOffset);
  // New batches are taken from `pool` (when it has one) instead of being allocated.
  void setPool(BatchPool* pool);

  // The top-level "distributedInfo" object (rank, world size, backend, process groups).
  static void parseDistributedInfo(const JsonValue& v, FileHeader& header, const std::string& path);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// A segment of the given events (each one JSON object's text), cut as the pipeline cuts a file.
Segment makeSegment(const std::vector<std::string>& events, int file = 0, std::optional<std::int64_t> baseTimeNs = {});

}  // namespace shardscope::core::kineto
