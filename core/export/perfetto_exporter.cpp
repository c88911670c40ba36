#include "core/export/perfetto_exporter.h"

#include <algorithm>
#include <filesystem>
#include <optional>

#include "core/export/trace_writer.h"
#include "core/util/json_reader.h"
#include "core/util/error.h"

namespace shardscope::core {

ExportResult exportPerfetto(TraceStore& store, RunId runId, const std::string& outPath, const ExportOptions& options) {
  exporting::RunContext ctx(store, runId, options);
  const bool gzip = outPath.size() > 3 && outPath.compare(outPath.size() - 3, 3, ".gz") == 0;

  // One clock for all ranks: the stored ns are already absolute (the importer added each file's
  // baseTimeNanoseconds), so only the global minimum is subtracted. [memory] records are not
  // written here (their totals are the memory counter tracks), so they do not move the origin.
  std::optional<TimeNs> origin;
  for (const Rank& r : ctx.summary.ranks)
    if (auto m = exporting::rankMinNs(ctx, r, false)) origin = origin ? std::min(*origin, *m) : *m;
  const TimeNs zero = origin.value_or(0);

  ctx.checkpoint();
  exporting::OutputFile out(outPath, gzip, options.gzipLevel);
  std::string& b = out.buffer();
  b += R"({"displayTimeUnit":"ms","metadata":{"producer":"shardscope )" SHARDSCOPE_VERSION R"(","run":)";
  appendJsonString(b, ctx.summary.run.name);
  b += R"(,"run_id":)";
  exporting::appendInt(b, runId.value());
  b += R"(,"ranks":[)";
  for (std::size_t i = 0; i < ctx.summary.ranks.size(); ++i) {
    if (i) b.push_back(',');
    exporting::appendInt(b, ctx.summary.ranks[i].rank);
  }
  b += R"(],"time_origin_ns":)";
  exporting::appendInt(b, zero);
  b += R"(,"clock":"each rank's recorded epoch time minus time_origin_ns; no skew correction")";
  b += R"(,"pids":"host of rank r = r*100, GPU d of rank r = r*100+1+d; )"
       R"(slices that partially overlap their thread's slices are on threads named '... (overlap k)'"},)";
  b += "\n\"traceEvents\":[\n";

  ExportResult result;
  bool first = true;
  for (const Rank& rank : ctx.summary.ranks) {
    ctx.stage = "export perfetto rank " + std::to_string(rank.rank);
    exporting::RankWriter w(ctx, rank, exporting::Layout::Perfetto, zero, out, first);
    w.write();
    result.events += w.eventsWritten();
    ctx.checkpoint();
  }
  out.buffer() += "\n]}\n";
  out.close();
  out.commit();
  result.bytes = out.bytesOnDisk();
  result.files.push_back(outPath);
  return result;
}

}  // namespace shardscope::core
