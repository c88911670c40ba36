#include "core/report/snapshot_report.h"

namespace shardscope::core {
namespace {

ReportCell textCell(std::string t) { return ReportCell{std::move(t), ReportCell::Style::Text, false, {}, 0}; }
ReportCell numCell(std::string t) { return ReportCell{std::move(t), ReportCell::Style::Number, false, {}, 0}; }
ReportCell codeCell(std::string t) { return ReportCell{std::move(t), ReportCell::Style::Code, false, {}, 0}; }
std::string bytes(std::int64_t b) { return reportBytes(static_cast<double>(b)); }

}  // namespace

bool reportHasMemorySnapshots(const Report& report) {
  for (const auto& r : report.runs)
    if (!r.analysis.memorySnapshots.empty()) return true;
  return false;
}

ReportTable memorySnapshotTable(const ReportRun& run) {
  ReportTable t;
  t.header = {"rank",
              "device",
              "events",
              "peak active",
              "peak reserved",
              "reserved at the peak",
              "fragmentation at the peak",
              "before recording",
              "by category at the peak"};
  t.emptyText = "No memory snapshot.";
  for (const auto& f : run.analysis.memorySnapshots) {
    std::string cats;
    for (const auto& [c, b] : f.categories) cats += (cats.empty() ? "" : ", ") + c + " " + bytes(b);
    t.rows.push_back({numCell(std::to_string(f.rank)), textCell("cuda:" + std::to_string(f.device)),
                      numCell(std::to_string(f.events)), numCell(bytes(f.peakActiveBytes)), numCell(bytes(f.peakReservedBytes)),
                      numCell(bytes(f.reservedAtPeakBytes)), numCell(bytes(f.fragmentationBytes)),
                      numCell(bytes(f.priorActiveBytes)), textCell(cats)});
  }
  return t;
}

ReportTable memorySnapshotTopTable(const ReportRun& run) {
  ReportTable t;
  t.caption = "Allocations alive at the peak, grouped by stack (largest first)";
  t.header = {"rank", "device", "bytes", "count", "category", "owner (first user frame)", "allocated by"};
  t.emptyText = "No memory snapshot.";
  t.detailColumns = 2;
  for (const auto& f : run.analysis.memorySnapshots)
    for (const auto& g : f.topAtPeak)
      t.rows.push_back({numCell(std::to_string(f.rank)), textCell("cuda:" + std::to_string(f.device)), numCell(bytes(g.bytes)),
                        numCell(std::to_string(g.count)), textCell(g.category), codeCell(g.owner), codeCell(g.site)});
  return t;
}

}  // namespace shardscope::core
