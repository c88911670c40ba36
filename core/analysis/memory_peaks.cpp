#include "core/analysis/memory_peaks.h"

#include <algorithm>
#include <map>

namespace shardscope::core {

std::vector<CounterSample> downsampleMax(const std::vector<CounterSample>& samples, TimeNs t0, TimeNs t1, int buckets) {
  std::vector<CounterSample> out;
  if (buckets <= 0 || t1 <= t0) return out;
  const double width = static_cast<double>(t1 - t0) / buckets;
  int current = -1;
  for (const auto& s : samples) {
    if (s.tsNs < t0 || s.tsNs >= t1) continue;
    const int b = std::min(buckets - 1, static_cast<int>(static_cast<double>(s.tsNs - t0) / width));
    if (b != current) {
      out.push_back(s);
      current = b;
    } else if (s.value > out.back().value) {
      out.back() = s;
    }
  }
  return out;
}

std::vector<MemoryPeak> computeMemoryPeaks(TraceStore& store, Id runId) {
  std::vector<MemoryPeak> out;
  const RunSummary summary = store.summary(runId);
  const std::vector<Step> steps = store.steps(runId);
  for (const Rank& rank : summary.ranks) {
    std::map<std::pair<int, int>, MemoryPeak> peaks;
    // Let SQLite find the maxima: materialising every allocation record costs more than the analysis.
    {
      Statement devices(store.db(), "SELECT DISTINCT device_type, device_id FROM memory_events WHERE rank_id=?");
      devices.bind(1, rank.id);
      Statement top(store.db(),
                    "SELECT ts_ns, total_allocated, total_reserved FROM memory_events WHERE rank_id=?1 AND device_type=?2 "
                    "AND device_id=?3 ORDER BY total_allocated DESC, ts_ns, id LIMIT 1");
      Statement topReserved(store.db(),
                            "SELECT ts_ns, total_reserved FROM memory_events WHERE rank_id=?1 AND device_type=?2 AND "
                            "device_id=?3 ORDER BY total_reserved DESC, ts_ns, id LIMIT 1");
      while (devices.step()) {
        const int type = static_cast<int>(devices.int64(0)), dev = static_cast<int>(devices.int64(1));
        MemoryPeak& p = peaks[{type, dev}];
        p.rank = rank.rank;
        p.deviceType = type;
        p.deviceId = dev;
        top.bind(1, rank.id).bind(2, type).bind(3, dev);
        if (top.step()) {
          p.allocatedAtNs = top.int64(0);
          p.peakAllocatedBytes = top.int64(1);
        }
        top.reset();
        topReserved.bind(1, rank.id).bind(2, type).bind(3, dev);
        if (topReserved.step()) {
          p.reservedAtNs = topReserved.int64(0);
          p.peakReservedBytes = topReserved.int64(1);
        }
        topReserved.reset();
      }
    }
    for (auto& [key, p] : peaks) {
      for (const Step& s : steps)
        if (s.rankId == rank.id && p.allocatedAtNs >= s.startNs && p.allocatedAtNs < s.endNs) p.step = s.step;
      // What was running: the innermost CPU op and user annotation covering the moment.
      TimeNs opStart = INT64_MIN, annStart = INT64_MIN;
      for (const auto& t : summary.tracks) {
        if (t.track.rankId != rank.id || t.track.kind != TrackKind::CpuThread) continue;
        for (const Event& e : store.eventsInWindow(t.track.id, p.allocatedAtNs, p.allocatedAtNs + 1)) {
          if (e.startNs > p.allocatedAtNs || e.endNs < p.allocatedAtNs) continue;
          if (e.cat == "user_annotation") {
            if (e.startNs >= annStart && e.name.rfind("ProfilerStep", 0) != 0) {
              annStart = e.startNs;
              p.annotation = e.name;
            }
          } else if (e.cat == "cpu_op" || e.cat == "Operator") {
            if (e.startNs >= opStart) {
              opStart = e.startNs;
              p.operation = e.name;
            }
          }
        }
      }
      out.push_back(p);
    }
  }
  return out;
}

}  // namespace shardscope::core
