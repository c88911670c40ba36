#pragma once
// The writer of the Kineto reader, on the importing thread: takes the parsers' batches in file
// order, maps their local ids to the store's (strings, tracks, process groups), keeps the per-rank
// bookkeeping that needs the whole file (step windows, launch correlations, the CPU collective that
// names a kernel, late fix-ups of written chunks, a late time base), writes through BulkWriter and
// ImportWriter, and ends each file with its rank row and its import_log row.
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/import/kineto_records.h"
#include "core/import/trace_reader.h"
#include "core/storage/import_writer.h"
#include "core/storage/trace_store.h"
#include "core/util/json.h"

namespace shardscope::core::kineto {

struct RankState;  // one file's bookkeeping (kineto_writer.cpp)

class KinetoWriter {
 public:
  // `workers` is the number of parser id spaces; results (run ids, per-file stats, warnings) go to `result`.
  KinetoWriter(TraceStore& store, ImportWriter& out, const ImportOptions& options, const std::vector<std::string>& files,
               int workers, std::uint64_t totalBytes, ImportResult& result);
  ~KinetoWriter();
  KinetoWriter(const KinetoWriter&) = delete;
  KinetoWriter& operator=(const KinetoWriter&) = delete;

  // One batch, in file order (KinetoPipeline::next). A file's last batch ends the file.
  void write(Batch& batch);
  // After the last batch: the runs' world size, devices and imported files.
  void finish();

 private:
  RunId ensureRun(int file);
  void mapIds(RankState& rs, const Batch& batch);
  void writeEvents(RankState& rs, const Batch& batch);
  void endFile(RankState& rs, Batch& batch);
  void warnFile(RankState& rs, const std::string& warning);

  TraceStore& store_;
  ImportWriter& out_;
  BulkWriter bulk_;
  const ImportOptions& opt_;
  const std::vector<std::string>& files_;
  std::uint64_t totalBytes_ = 0;
  ImportResult& result_;
  std::vector<std::vector<Id>> strIds_;  // per parser: local string id -> database id
  std::vector<RankState> ranks_;         // per file
  const RankState* current_ = nullptr;   // the rank whose batches are being written
  std::set<int> usedRanks_;
  std::map<int, std::string> rankFiles_;
  RunId sharedRun_;
  std::optional<int> sharedWorld_;
  std::string sharedWorldFile_;
  std::uint64_t bytesDoneBefore_ = 0;
  JsonValue devicesAll_ = JsonValue::array();
  std::set<std::string> warningsSeen_;
  std::chrono::steady_clock::time_point fileStart_;
};

}  // namespace shardscope::core::kineto
