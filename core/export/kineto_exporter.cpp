#include "core/export/kineto_exporter.h"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <vector>

#include "core/export/trace_writer.h"
#include "core/util/json_reader.h"
#include "core/util/error.h"
#include "core/util/json.h"

namespace shardscope::core {
namespace {

namespace fs = std::filesystem;
using exporting::appendInt;

// Kineto floors the epoch to this period so relative µs stay exact in a double (traces.md §1.2).
constexpr TimeNs kBasePeriodNs = 7'889'238LL * 1'000'000'000LL;

TimeNs floorToPeriod(TimeNs ns) {
  TimeNs q = ns / kBasePeriodNs;
  if (ns % kBasePeriodNs != 0 && ns < 0) --q;
  return q * kBasePeriodNs;
}

JsonValue parseOrEmpty(const std::string& text) {
  try {
    JsonValue v = parseJson(text, "stored metadata");
    if (v.isObject()) return v;
  } catch (const Error&) {
  }
  return JsonValue::object();
}

// Python json.dumps spacing (", " and ": "), as torch.profiler writes it: HTA finds the rank with the
// regex "rank":\s+(\d+) and silently takes rank 0 when there is no space.
void appendPythonStyle(std::string& out, const JsonValue& v) {
  switch (v.type()) {
    case JsonValue::Type::Array: {
      out.push_back('[');
      bool first = true;
      for (const auto& x : v.items()) {
        if (!first) out += ", ";
        first = false;
        appendPythonStyle(out, x);
      }
      out.push_back(']');
      break;
    }
    case JsonValue::Type::Object: {
      out.push_back('{');
      bool first = true;
      for (const auto& [k, x] : v.members()) {
        if (!first) out += ", ";
        first = false;
        appendJsonString(out, k);
        out += ": ";
        appendPythonStyle(out, x);
      }
      out.push_back('}');
      break;
    }
    default:
      v.dumpTo(out);
      break;
  }
}

bool rankListContains(const JsonValue& ranks, int rank) {
  for (const auto& r : ranks.items())
    if (r.asInt() == rank) return true;
  return false;
}

// The current distributedInfo variant, from the run's process groups and what the source file had.
JsonValue distributedInfo(const exporting::RunContext& ctx, const Rank& rank, const JsonValue& meta) {
  const JsonValue* orig = meta.find("distributedInfo");
  if (orig && !orig->isObject()) orig = nullptr;
  std::string backend = "nccl";
  if (const JsonValue* b = orig ? orig->find("backend") : nullptr; b && b->isString() && !b->asString().empty())
    backend = b->asString();
  // By id: the order the importer met them, pg_config first.
  std::vector<const ProcessGroup*> pgs;
  for (const auto& [id, g] : ctx.groups) pgs.push_back(&g);
  std::sort(pgs.begin(), pgs.end(), [](const ProcessGroup* a, const ProcessGroup* b) { return a->id < b->id; });
  JsonValue groups = JsonValue::array();
  for (const ProcessGroup* pg : pgs) {
    JsonValue ranks = JsonValue::array();
    try {
      JsonValue parsed = parseJson(pg->ranksJson, "process group ranks");
      if (parsed.isArray()) ranks = std::move(parsed);
    } catch (const Error&) {
    }
    // torch lists only the groups this rank is a member of; an unknown membership is kept.
    if (!ranks.items().empty() && !rankListContains(ranks, rank.rank)) continue;
    JsonValue g = JsonValue::object();
    g.set("pg_name", JsonValue::string(pg->name));
    g.set("pg_desc", JsonValue::string(pg->description.empty() ? "undefined" : pg->description));
    g.set("backend_config", JsonValue::string(pg->backend));
    g.set("pg_size",
          JsonValue::number(static_cast<std::int64_t>(pg->size > 0 ? pg->size : static_cast<int>(ranks.items().size()))));
    g.set("ranks", std::move(ranks));
    groups.push(std::move(g));
  }
  std::int64_t pgCount = static_cast<std::int64_t>(groups.items().size());
  if (orig)
    if (const JsonValue* c = orig->find("pg_count"))
      if (auto n = c->asInt(); n && *n > pgCount) pgCount = *n;
  int world = ctx.summary.run.worldSize;
  if (world <= 0) world = static_cast<int>(ctx.summary.ranks.size());
  JsonValue d = JsonValue::object();
  d.set("backend", JsonValue::string(backend));
  d.set("rank", JsonValue::number(static_cast<std::int64_t>(rank.rank)));
  d.set("world_size", JsonValue::number(static_cast<std::int64_t>(world)));
  d.set("pg_count", JsonValue::number(pgCount));
  d.set("pg_config", std::move(groups));
  if (orig)
    if (const JsonValue* v = orig->find("nccl_version"); v && v->isString()) d.set("nccl_version", *v);
  return d;
}

void writeRank(exporting::RunContext& ctx, const Rank& rank, exporting::OutputFile& out, ExportResult& result) {
  const JsonValue meta = parseOrEmpty(rank.metadataJson);
  TimeNs base = rank.timeBaseNs;
  if (base == 0) {
    // Old files (absolute µs) have no base: derive one as Kineto does, never negative (our importer
    // and Kineto's readers reject that).
    const auto m = exporting::rankMinNs(ctx, rank, true);
    base = m && *m > 0 ? floorToPeriod(*m) : 0;
  }

  std::string& b = out.buffer();
  b += "{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": ";
  const JsonValue* dp = meta.find("deviceProperties");
  if (dp && dp->isArray())
    appendPythonStyle(b, *dp);
  else
    b += "[]";
  // Other top-level scalars the source had (cupti_version, record_shapes, trace_id...), in its order.
  static constexpr std::string_view kOwn[] = {
      "schemaVersion", "deviceProperties", "distributedInfo", "displayTimeUnit", "baseTimeNanoseconds",
      "traceEvents",   "traceName",        "json_bytes",      "processes",       "rank"};
  for (const auto& [k, v] : meta.members()) {
    if (v.isObject() || v.isArray() || v.isNull()) continue;
    if (std::find(std::begin(kOwn), std::end(kOwn), k) != std::end(kOwn)) continue;
    b += ",\n  ";
    appendJsonString(b, k);
    b += ": ";
    v.dumpTo(b);
  }
  b += ",\n  \"distributedInfo\": ";
  appendPythonStyle(b, distributedInfo(ctx, rank, meta));
  b += ",\n  \"displayTimeUnit\": \"ms\",\n  \"baseTimeNanoseconds\": ";
  appendInt(b, base);
  b += ",\n  \"traceEvents\": [\n";

  bool first = true;
  exporting::RankWriter w(ctx, rank, exporting::Layout::Kineto, base, out, first);
  w.write();
  result.events += w.eventsWritten();

  std::string& t = out.buffer();
  t += "\n  ],\n  \"traceName\": ";
  appendJsonString(t, out.path());
  t += "\n}\n";
}

}  // namespace

ExportResult exportKineto(TraceStore& store, RunId runId, const std::string& outDir, const ExportOptions& options) {
  exporting::RunContext ctx(store, runId, options);
  if (ctx.summary.ranks.empty()) throw Error(store.path() + ": run " + std::to_string(runId.value()) + " has no ranks to export");
  std::error_code ec;
  fs::create_directories(outDir, ec);
  if (ec || !fs::is_directory(outDir, ec))
    throw Error(outDir + ": cannot create the output directory" + (ec ? ": " + ec.message() : std::string()));

  ctx.checkpoint();
  ExportResult result;
  // Every rank goes to a temporary file first; they are renamed together at the end, so HTA never
  // sees a directory with some ranks missing or half written.
  std::vector<std::unique_ptr<exporting::OutputFile>> files;
  for (const Rank& rank : ctx.summary.ranks) {
    const std::string name = "rank" + std::to_string(rank.rank) + ".pt.trace.json" + (options.gzip ? ".gz" : "");
    const std::string path = (fs::path(outDir) / name).string();
    files.push_back(std::make_unique<exporting::OutputFile>(path, options.gzip, options.gzipLevel));
    ctx.stage = "export " + name;
    writeRank(ctx, rank, *files.back(), result);
    files.back()->close();
    result.bytes += files.back()->bytesOnDisk();
    ctx.checkpoint();
  }
  for (auto& f : files) {
    f->commit();
    result.files.push_back(f->path());
  }
  return result;
}

}  // namespace shardscope::core
