#include "core/timeline/timeline_index.h"

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <tuple>
#include <unordered_map>

#include "core/analysis/lanes.h"
#include "core/analysis/rank_scan.h"

namespace shardscope::core::timeline {

using intervals::Span;

namespace {

template <class T>
std::size_t capacityBytes(const std::vector<T>& v) {
  return v.capacity() * sizeof(T);
}

LaneKind laneKindOf(TrackKind k) {
  switch (k) {
    case TrackKind::GpuStream:
      return LaneKind::GpuStream;
    case TrackKind::CpuThread:
      return LaneKind::CpuThread;
    case TrackKind::Comm:
      return LaneKind::Comm;
    case TrackKind::Counter:
      return LaneKind::Counter;
    case TrackKind::Python:
      return LaneKind::Python;
  }
  return LaneKind::CpuThread;
}

// A lane's events as they arrive, before they are grouped by depth.
struct Staging {
  std::vector<TimeNs> start, end;
  std::vector<Id> id;
  std::vector<std::uint32_t> name;
  std::vector<std::uint8_t> key, bits;
  std::vector<std::int64_t> bytes;  // EventChunk::kNull when unknown
  std::size_t size() const { return start.size(); }
  void clear() {
    start.clear();
    end.clear();
    id.clear();
    name.clear();
    key.clear();
    bits.clear();
    bytes.clear();
  }
  void push(TimeNs s, TimeNs e, Id eventId, std::uint32_t n, std::uint8_t k, std::uint8_t b, std::int64_t by) {
    start.push_back(s);
    end.push_back(e);
    id.push_back(eventId);
    name.push_back(n);
    key.push_back(k);
    bits.push_back(b);
    bytes.push_back(by);
  }
};

// Groups the staged events by depth into the lane's arrays (sizes exact: the index stays compact).
void finishLane(Lane& lane, Staging& st) {
  const std::size_t n = st.size();
  // The store yields (start, end desc) order; anything else (a damaged chunk) is sorted here first.
  std::vector<std::uint32_t> order;
  bool sorted = true;
  for (std::size_t i = 1; i < n && sorted; ++i)
    sorted = st.start[i - 1] < st.start[i] || (st.start[i - 1] == st.start[i] && st.end[i - 1] >= st.end[i]);
  if (!sorted) {
    order.resize(n);
    std::iota(order.begin(), order.end(), 0u);
    std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
      return st.start[a] != st.start[b] ? st.start[a] < st.start[b] : st.end[a] > st.end[b];
    });
  }
  auto at = [&](std::size_t k) -> std::size_t { return sorted ? k : order[k]; };

  // Depth: one below the innermost open event that has not ended by this start. Every event of a
  // depth starts at or after the end of the previous one of that depth (it was popped first).
  std::vector<std::uint32_t> depth(n);
  std::vector<TimeNs> open;
  std::vector<std::uint32_t> perDepth;
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t i = at(k);
    const TimeNs s = st.start[i];
    // A negative span (a damaged record) is treated as zero-length.
    const TimeNs e = std::max(st.end[i], s);
    st.end[i] = e;
    while (!open.empty() && open.back() <= s) open.pop_back();
    const auto d = static_cast<std::uint32_t>(open.size());
    open.push_back(e);
    depth[k] = d;
    if (d >= perDepth.size()) perDepth.resize(d + 1, 0);
    ++perDepth[d];
  }

  lane.depthBegin.assign(perDepth.size() + 1, 0);
  for (std::size_t d = 0; d < perDepth.size(); ++d) lane.depthBegin[d + 1] = lane.depthBegin[d] + perDepth[d];
  lane.start.resize(n);
  lane.end.resize(n);
  lane.eventId.resize(n);
  lane.nameIdx.resize(n);
  lane.key.resize(n);
  lane.bits.resize(n);
  std::vector<std::uint32_t> next(lane.depthBegin.begin(), lane.depthBegin.end() - 1);
  std::size_t withBytes = 0;
  for (std::size_t k = 0; k < n; ++k)
    if (st.bytes[at(k)] != EventChunk::kNull) ++withBytes;
  lane.bytes.reserve(withBytes);
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t i = at(k);
    const std::uint32_t j = next[depth[k]]++;
    lane.start[j] = st.start[i];
    lane.end[j] = st.end[i];
    lane.eventId[j] = st.id[i];
    lane.nameIdx[j] = st.name[i];
    lane.key[j] = st.key[i];
    lane.bits[j] = st.bits[i];
    if (st.bytes[i] != EventChunk::kNull) {
      lane.bits[j] |= EventBits::HasBytes;
      lane.bytes.emplace_back(j, st.bytes[i]);
    }
  }
  std::sort(lane.bytes.begin(), lane.bytes.end());
  if (n) {
    lane.minStart = lane.start[lane.depthBegin[0]];  // depth 0 holds the earliest start
    lane.maxEnd = *std::max_element(lane.end.begin(), lane.end.end());
  }
  st.clear();
}

void finishSummaries(Lane& lane) {
  const std::size_t n = lane.start.size();
  const std::size_t blocks = (n + (std::size_t{1} << Lane::kBlockShift) - 1) >> Lane::kBlockShift;
  lane.blockKeyOr.assign(blocks, 0);
  lane.blockKeyAnd.assign(blocks, 0xFF);
  lane.blockBitsOr.assign(blocks, 0);
  lane.reach1.assign(blocks, 0);
  lane.blockDur.assign(blocks, 0);
  lane.blockTopKey.assign(blocks, 0);
  lane.blockTopDur.assign(blocks, 0);
  lane.computeNs = lane.commNs = 0;
  lane.keyMask = 0;
  TimeNs perKey[kKeyCount] = {};
  std::uint64_t touched = 0;  // keys with time in the current block
  auto closeBlock = [&](std::size_t b) {
    TimeNs best = -1;
    std::uint8_t top = 0;
    for (std::uint64_t m = touched; m; m &= m - 1) {
      const auto k = static_cast<std::uint8_t>(__builtin_ctzll(m));
      if (perKey[k] > best) {  // ties: the smaller key, so the choice never depends on the order
        best = perKey[k];
        top = k;
      }
      perKey[k] = 0;
    }
    lane.blockTopKey[b] = touched ? top : lane.blockKeyOr[b];
    lane.blockTopDur[b] = std::max<TimeNs>(0, best);
    touched = 0;
  };
  std::size_t d = 0;  // depth of i
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t b = i >> Lane::kBlockShift;
    if (i && (i & ((std::size_t{1} << Lane::kBlockShift) - 1)) == 0) closeBlock(b - 1);
    const std::uint8_t key = lane.key[i];
    lane.blockKeyOr[b] |= key;
    lane.blockKeyAnd[b] &= key;
    lane.blockBitsOr[b] |= lane.bits[i];
    while (lane.depthBegin[d + 1] <= i) ++d;
    const TimeNs dur = lane.end[i] - lane.start[i];
    const TimeNs gap = i == lane.depthBegin[d] ? Lane::kNoPrevious : lane.start[i] - lane.end[i - 1];
    lane.reach1[b] = std::max({lane.reach1[b], dur, gap});
    lane.blockDur[b] += dur;
    const std::uint8_t k = key & (kKeyCount - 1);
    perKey[k] += dur;
    touched |= std::uint64_t{1} << k;
    lane.keyMask |= std::uint64_t{1} << k;
    if (lane.bits[i] & EventBits::Compute) lane.computeNs += dur;
    if (lane.bits[i] & EventBits::Comm) lane.commNs += dur;
  }
  if (n) closeBlock(blocks - 1);
  const std::size_t blocks2 = (blocks + (std::size_t{1} << Lane::kBlockShift) - 1) >> Lane::kBlockShift;
  lane.reach2.assign(blocks2, 0);
  for (std::size_t b = 0; b < blocks; ++b) {
    TimeNs& r = lane.reach2[b >> Lane::kBlockShift];
    r = std::max(r, lane.reach1[b]);
  }
}

// Display order within a rank: by kind (CPU threads, GPU streams, the derived communication lanes,
// communication threads, python, counters), then GPU streams by (device, stream id); the rest keep
// the store's order (stable sort).
int kindOrder(LaneKind k) {
  switch (k) {
    case LaneKind::CpuThread:
      return 0;
    case LaneKind::GpuStream:
      return 1;
    case LaneKind::CommGroup:
      return 2;
    case LaneKind::Comm:
      return 3;
    case LaneKind::Python:
      return 4;
    case LaneKind::Counter:
      return 5;
  }
  return 6;
}

}  // namespace

std::vector<Span> subtract(const std::vector<Span>& spans, const std::vector<Span>& cover) {
  std::vector<Span> out;
  std::size_t j = 0;
  for (const Span& x : spans) {
    TimeNs s = x.s;
    while (j < cover.size() && cover[j].e <= s) ++j;
    std::size_t k = j;
    while (s < x.e) {
      if (k >= cover.size() || cover[k].s >= x.e) {
        out.push_back({s, x.e});
        break;
      }
      if (cover[k].s > s) out.push_back({s, cover[k].s});
      s = std::max(s, cover[k].e);
      ++k;
    }
  }
  return out;
}

Coverage Coverage::of(const std::vector<Span>& u) {
  Coverage c;
  c.start.reserve(u.size());
  c.cumEnd.reserve(u.size());
  TimeNs acc = 0;
  for (const Span& x : u) {
    if (x.e <= x.s) continue;
    acc += x.e - x.s;
    c.start.push_back(x.s);
    c.cumEnd.push_back(acc);
  }
  return c;
}

TimeNs Coverage::coveredBefore(TimeNs t, std::size_t& hint) const {
  const std::size_t n = start.size();
  if (n == 0 || t <= start[0]) {
    hint = 0;
    return 0;
  }
  // k: the number of spans starting before t (>= 1), found by galloping from the hint.
  std::size_t lo = std::min(hint, n - 1), hi;
  if (start[lo] >= t) lo = 0;
  std::size_t step = 1;
  for (hi = lo + 1; hi < n && start[hi] < t; step *= 2) {
    lo = hi;
    hi = lo + step;
  }
  hi = std::min(hi, n);
  const std::size_t k = static_cast<std::size_t>(
      std::lower_bound(start.begin() + static_cast<std::ptrdiff_t>(lo), start.begin() + static_cast<std::ptrdiff_t>(hi), t) -
      start.begin());
  hint = k - 1;
  const std::size_t i = k - 1;  // the last span starting before t
  const TimeNs before = i ? cumEnd[i - 1] : 0;
  return before + std::min(t - start[i], length(i));
}

std::uint32_t Lane::depthOf(std::uint32_t index) const {
  const auto it = std::upper_bound(depthBegin.begin(), depthBegin.end(), index);
  return static_cast<std::uint32_t>(it - depthBegin.begin()) - 1;
}

std::size_t Lane::memoryBytes() const {
  std::size_t levels = 0;
  for (const auto& v : sampleLevels) levels += capacityBytes(v);
  return sizeof(Lane) + name.capacity() + capacityBytes(start) + capacityBytes(end) + capacityBytes(eventId) +
         capacityBytes(nameIdx) + capacityBytes(key) + capacityBytes(bits) + capacityBytes(depthBegin) +
         capacityBytes(blockKeyOr) + capacityBytes(blockKeyAnd) + capacityBytes(blockBitsOr) + capacityBytes(reach1) +
         capacityBytes(reach2) + capacityBytes(blockDur) + capacityBytes(blockTopKey) + capacityBytes(blockTopDur) +
         capacityBytes(bytes) + capacityBytes(sampleTs) + capacityBytes(sampleValue) + capacityBytes(sampleLevels) + levels;
}

std::size_t TimelineIndex::memoryBytes() const {
  std::size_t b = sizeof(TimelineIndex) + capacityBytes(lanes_) - lanes_.size() * sizeof(Lane);
  for (const auto& l : lanes_) b += l.memoryBytes();
  b += capacityBytes(ranks_);
  for (const auto& r : ranks_)
    b += r.host.capacity() + r.device.capacity() + capacityBytes(r.lanes) + capacityBytes(r.steps) + capacityBytes(r.exposed) +
         capacityBytes(r.exposedGap1) + capacityBytes(r.exposedGap2) + r.computeCover.memoryBytes() + r.workCover.memoryBytes() +
         r.exposedCover.memoryBytes();
  b += capacityBytes(groups_);
  for (const auto& g : groups_) b += g.name.capacity() + g.description.capacity() + g.backend.capacity() + g.ranksJson.capacity();
  b += capacityBytes(names_);
  for (const auto& n : names_) b += n.capacity();
  return b;
}

IndexRange TimelineIndex::window(std::uint32_t laneIndex, std::uint32_t depth, TimeNs t0, TimeNs t1) const {
  const Lane& l = lanes_[laneIndex];
  if (depth >= l.depthCount()) return {};
  const std::uint32_t lo = l.depthBegin[depth], hi = l.depthBegin[depth + 1];
  // Ends are sorted within a depth: the first event ending after t0 is the first that can overlap.
  auto b = static_cast<std::uint32_t>(std::lower_bound(l.end.begin() + lo, l.end.begin() + hi, t0) - l.end.begin());
  while (b < hi && l.end[b] == t0 && l.start[b] < t0) ++b;  // ends exactly at t0: outside
  const auto e = static_cast<std::uint32_t>(std::lower_bound(l.start.begin() + b, l.start.begin() + hi, t1) - l.start.begin());
  return {b, std::max(b, e)};
}

std::uint32_t TimelineIndex::eventAt(std::uint32_t laneIndex, std::uint32_t depth, TimeNs t) const {
  const IndexRange r = window(laneIndex, depth, t, t + 1);
  if (r.empty()) return kNoEvent;
  const Lane& l = lanes_[laneIndex];
  // Prefer an event with a duration over a zero-length one at the same time.
  for (std::uint32_t i = r.begin; i < r.end; ++i)
    if (l.start[i] <= t && l.end[i] > t) return i;
  return r.begin;
}

std::uint32_t TimelineIndex::innermostAt(std::uint32_t laneIndex, TimeNs t) const {
  const Lane& l = lanes_[laneIndex];
  for (std::uint32_t d = l.depthCount(); d-- > 0;) {
    const std::uint32_t i = eventAt(laneIndex, d, t);
    if (i != kNoEvent) return i;
  }
  return kNoEvent;
}

std::optional<std::int64_t> TimelineIndex::bytes(std::uint32_t laneIndex, std::uint32_t index) const {
  const Lane& l = lanes_[laneIndex];
  const auto it = std::lower_bound(l.bytes.begin(), l.bytes.end(), std::pair<std::uint32_t, std::int64_t>(index, INT64_MIN));
  if (it == l.bytes.end() || it->first != index) return std::nullopt;
  return it->second;
}

IndexRange TimelineIndex::sampleWindow(std::uint32_t laneIndex, TimeNs t0, TimeNs t1) const {
  const Lane& l = lanes_[laneIndex];
  const auto b = static_cast<std::uint32_t>(std::lower_bound(l.sampleTs.begin(), l.sampleTs.end(), t0) - l.sampleTs.begin());
  const auto e = static_cast<std::uint32_t>(std::lower_bound(l.sampleTs.begin() + b, l.sampleTs.end(), t1) - l.sampleTs.begin());
  return {b, e};
}

double TimelineIndex::sampleMax(std::uint32_t laneIndex, std::uint32_t begin, std::uint32_t end) const {
  const Lane& l = lanes_[laneIndex];
  constexpr std::uint32_t F = Lane::kSampleFanout;
  double m = -std::numeric_limits<double>::infinity();
  const std::vector<double>* v = &l.sampleValue;
  std::size_t b = begin, e = std::min<std::size_t>(end, l.sampleValue.size());
  for (std::size_t level = 0;; ++level) {
    // Few left, or no coarser level: the values themselves.
    if (e - b <= 2 * F || level >= l.sampleLevels.size()) {
      for (std::size_t i = b; i < e; ++i) m = std::max(m, (*v)[i]);
      return m;
    }
    for (; b % F; ++b) m = std::max(m, (*v)[b]);
    for (; e % F; --e) m = std::max(m, (*v)[e - 1]);
    b /= F;
    e /= F;
    v = &l.sampleLevels[level];
  }
}

// ---------------------------------------------------------------------------------------------

class TimelineBuilder {
 public:
  TimelineBuilder(TraceStore& store, RunId runId, const BuildOptions& options, const CancelToken* cancel,
                  const ProgressFn& progress)
      : store_(store), runId_(runId), options_(options), cancel_(cancel), progress_(progress), classes_(store) {}

  std::shared_ptr<const TimelineIndex> run() {
    auto index = std::make_shared<TimelineIndex>();
    out_ = index.get();
    out_->runId_ = runId_;
    const RunSummary summary = store_.summary(runId_);
    out_->groups_ = store_.processGroups(runId_);
    for (const auto& t : summary.tracks) {
      if (t.track.kind == TrackKind::Python && !options_.withPython) continue;
      if (t.track.kind == TrackKind::Counter && !options_.withCounters) continue;
      total_ += static_cast<std::uint64_t>(std::max<std::int64_t>(0, t.eventCount));
    }
    std::map<RankId, std::vector<Step>> steps;
    for (const Step& s : store_.steps(runId_)) steps[s.rankId].push_back(s);
    report();

    bool any = false;
    for (const Rank& rank : summary.ranks) {
      RankInfo info;
      info.rankId = rank.id;
      info.rank = rank.rank;
      info.host = rank.host;
      info.device = rank.device;
      info.hasGpu = rankHasGpuWork(summary, rank.id);
      if (auto it = steps.find(rank.id); it != steps.end()) info.steps = std::move(it->second);
      const int rankIndex = static_cast<int>(out_->ranks_.size());
      buildRank(summary, info, rankIndex);
      bool has = false;
      auto extend = [&](TimeNs s, TimeNs e) {
        info.minStart = has ? std::min(info.minStart, s) : s;
        info.maxEnd = has ? std::max(info.maxEnd, e) : e;
        has = true;
      };
      for (std::uint32_t li : info.lanes) {
        const Lane& l = out_->lanes_[li];
        if (l.isCounter() ? !l.sampleTs.empty() : !l.start.empty()) extend(l.minStart, l.maxEnd);
      }
      for (const Step& s : info.steps) extend(s.startNs, s.endNs);
      if (has) {
        out_->minStart_ = any ? std::min(out_->minStart_, info.minStart) : info.minStart;
        out_->maxEnd_ = any ? std::max(out_->maxEnd_, info.maxEnd) : info.maxEnd;
        any = true;
      }
      out_->ranks_.push_back(std::move(info));
    }
    out_->names_.shrink_to_fit();
    out_->lanes_.shrink_to_fit();
    done_ = total_;
    report(true);
    return index;
  }

 private:
  std::uint32_t nameIndex(std::uint32_t id) {
    if (id < kDenseNames) {
      if (id >= dense_.size()) dense_.resize(std::max<std::size_t>(id + 1, dense_.size() * 2), 0);
      std::uint32_t& slot = dense_[id];
      if (!slot) {
        out_->names_.emplace_back(store_.stringView(id));
        slot = static_cast<std::uint32_t>(out_->names_.size());
      }
      return slot - 1;
    }
    auto [it, inserted] = sparse_.try_emplace(id, 0);
    if (inserted) {
      out_->names_.emplace_back(store_.stringView(id));
      it->second = static_cast<std::uint32_t>(out_->names_.size() - 1);
    }
    return it->second;
  }

  void report(bool force = false) {
    if (!progress_) return;
    if (!force && done_ - reported_ < (1u << 16)) return;
    reported_ = done_;
    progress_(Progress{"timeline index", done_, total_, "events"});
  }

  struct CommCopy {
    TimeNs s, e;
    Id id;
    std::uint32_t name;
    std::uint8_t key, bits;
    std::int64_t bytes;
    Id pg;
    std::uint32_t lane;  // the stream it was copied from
  };

  void buildRank(const RunSummary& summary, RankInfo& info, int rankIndex) {
    std::vector<Span> compute, comm, hostComm, unusedCompute;
    std::vector<std::uint32_t> hostCommLanes;  // a GPU rank's host communication lanes
    std::vector<CommCopy> copies;
    worldOfOne_ = runOfOneRank(summary.run);
    std::size_t lastGpuPos = 0;  // position in info.lanes after the last GPU stream
    bool sawGpu = false;
    for (const TrackSummary& t : summary.tracks) {
      if (t.track.rankId != info.rankId) continue;
      Lane lane;
      lane.trackId = t.track.id;
      lane.kind = laneKindOf(t.track.kind);
      lane.rankIndex = rankIndex;
      lane.name = t.track.name;
      lane.sortIndex = t.track.sortIndex;
      lane.device = t.track.device;
      lane.stream = t.track.stream;
      lane.deviceLane = isDeviceLane(t.track.kind, info.hasGpu);
      if (t.track.kind == TrackKind::Counter) {
        if (!options_.withCounters) continue;
        loadCounter(lane);
      } else if (t.track.kind == TrackKind::Python && !options_.withPython) {
        lane.loaded = false;
      } else if (info.hasGpu && t.track.kind == TrackKind::Comm) {
        // Collectives on host threads (Gloo, also over CUDA tensors): communication of the rank when
        // its GPU runs none of its own (decided once the rank's lanes are read), as in step_breakdown.
        lane.deviceLane = true;
        loadEvents(t.track.kind, lane, info.hasGpu, unusedCompute, hostComm, copies);
        hostCommLanes.push_back(static_cast<std::uint32_t>(out_->lanes_.size()));
      } else {
        loadEvents(t.track.kind, lane, info.hasGpu, compute, comm, copies);
      }
      info.lanes.push_back(static_cast<std::uint32_t>(out_->lanes_.size()));
      if (t.track.kind == TrackKind::GpuStream) {
        sawGpu = true;
        lastGpuPos = info.lanes.size();
      }
      out_->lanes_.push_back(std::move(lane));
      if (cancel_) cancel_->throwIfCancelled();
    }

    if (!comm.empty()) {
      for (std::uint32_t li : hostCommLanes) {  // the GPU's own collectives are the communication
        Lane& l = out_->lanes_[li];
        l.deviceLane = false;
        for (auto& b : l.bits) b &= static_cast<std::uint8_t>(~(EventBits::Work | EventBits::Comm | EventBits::Compute));
      }
    } else {
      comm.insert(comm.end(), hostComm.begin(), hostComm.end());
      for (std::uint32_t li : hostCommLanes)  // only their collectives are the rank's work
        for (auto& b : out_->lanes_[li].bits)
          if (!(b & EventBits::Comm)) b &= static_cast<std::uint8_t>(~(EventBits::Work | EventBits::Compute));
    }
    // Exposed communication of the rank: its communication union minus its computation union.
    const auto P = intervals::unite(std::move(compute));
    const auto C = intervals::unite(std::move(comm));
    info.exposed = subtract(C, P);
    info.exposed.shrink_to_fit();
    {
      const std::size_t n = info.exposed.size();
      info.exposedGap1.assign((n + (std::size_t{1} << Lane::kBlockShift) - 1) >> Lane::kBlockShift, 0);
      for (std::size_t i = 0; i < n; ++i) {
        const TimeNs gap = i == 0 ? Lane::kNoPrevious : info.exposed[i].s - info.exposed[i - 1].e;
        TimeNs& g = info.exposedGap1[i >> Lane::kBlockShift];
        g = std::max(g, gap);
      }
      info.exposedGap2.assign((info.exposedGap1.size() + (std::size_t{1} << Lane::kBlockShift) - 1) >> Lane::kBlockShift, 0);
      for (std::size_t b = 0; b < info.exposedGap1.size(); ++b) {
        TimeNs& g = info.exposedGap2[b >> Lane::kBlockShift];
        g = std::max(g, info.exposedGap1[b]);
      }
    }
    auto exposedBit = [&](TimeNs s, TimeNs e, std::uint8_t bits) -> std::uint8_t {
      if ((bits & EventBits::Comm) && e > s && intervals::coveredBy(P, s, e) < e - s) return EventBits::Exposed;
      return 0;
    };
    std::vector<Span> work;
    for (std::uint32_t li : info.lanes) {
      Lane& l = out_->lanes_[li];
      if (l.deviceLane)
        for (std::size_t i = 0; i < l.start.size(); ++i) {
          l.bits[i] |= exposedBit(l.start[i], l.end[i], l.bits[i]);
          if ((l.bits[i] & EventBits::Work) && l.end[i] > l.start[i]) work.push_back({l.start[i], l.end[i]});
        }
      if (!l.isCounter()) finishSummaries(l);
    }
    info.computeCover = Coverage::of(P);
    info.workCover = Coverage::of(intervals::unite(std::move(work)));
    info.exposedCover = Coverage::of(info.exposed);

    // A communication lane per process group, from the collectives on the GPU streams.
    if (!copies.empty()) {
      std::map<Id, std::vector<CommCopy>> byGroup;
      for (auto& c : copies) byGroup[c.pg].push_back(c);
      copies.clear();
      copies.shrink_to_fit();
      std::vector<std::uint32_t> derived;
      for (auto& [pg, list] : byGroup) {
        // Collectives without a process group that are all of one stream's events, and only them: the
        // lane would repeat that stream event for event. (The lambda captures a plain variable: C++20
        // lets a lambda name a structured binding, clang 14 does not.)
        const std::uint32_t firstLane = list.front().lane;
        if (pg == 0 && std::all_of(list.begin(), list.end(), [firstLane](const CommCopy& c) { return c.lane == firstLane; }) &&
            out_->lanes_[list.front().lane].eventCount() == list.size())
          continue;
        std::sort(list.begin(), list.end(),
                  [](const CommCopy& a, const CommCopy& b) { return a.s != b.s ? a.s < b.s : a.e > b.e; });
        Lane lane;
        lane.kind = LaneKind::CommGroup;
        lane.rankIndex = rankIndex;
        lane.processGroupId = pg;
        lane.name = "comm " + groupLabel(pg);
        lane.sortIndex = -1;
        for (const auto& c : list)
          staging_.push(c.s, c.e, c.id, c.name, c.key, static_cast<std::uint8_t>(c.bits | exposedBit(c.s, c.e, c.bits)), c.bytes);
        finishLane(lane, staging_);
        finishSummaries(lane);
        derived.push_back(static_cast<std::uint32_t>(out_->lanes_.size()));
        out_->lanes_.push_back(std::move(lane));
      }
      const std::size_t pos = sawGpu ? lastGpuPos : info.lanes.size();
      info.lanes.insert(info.lanes.begin() + static_cast<std::ptrdiff_t>(pos), derived.begin(), derived.end());
    }
    // The same order on every rank (the store's is the order tracks first appeared in each file).
    std::stable_sort(info.lanes.begin(), info.lanes.end(), [&](std::uint32_t a, std::uint32_t b) {
      const Lane& x = out_->lanes_[a];
      const Lane& y = out_->lanes_[b];
      if (kindOrder(x.kind) != kindOrder(y.kind)) return kindOrder(x.kind) < kindOrder(y.kind);
      if (x.kind != LaneKind::GpuStream) return false;
      const auto kx = std::make_tuple(x.device.value_or(-1), x.stream.value_or(INT64_MAX));
      const auto ky = std::make_tuple(y.device.value_or(-1), y.stream.value_or(INT64_MAX));
      return kx < ky;  // streams without an id keep the store's order
    });
  }

  std::string groupLabel(Id pg) const {
    if (pg == 0) return "(no process group)";
    for (const auto& g : out_->groups_)
      if (g.id == pg) return "pg " + g.name + (g.description.empty() ? std::string() : " (" + g.description + ")");
    return "pg #" + std::to_string(pg);
  }

  void loadEvents(TrackKind kind, Lane& lane, bool hasGpu, std::vector<Span>& compute, std::vector<Span>& comm,
                  std::vector<CommCopy>& copies) {
    const bool device = lane.deviceLane;
    const bool copyCollectives = options_.commGroupLanes && hasGpu && kind == TrackKind::GpuStream;
    const auto laneIndex = static_cast<std::uint32_t>(out_->lanes_.size());  // where the lane will be pushed
    staging_.clear();
    store_.forEachEventRef(lane.trackId, [&](const EventChunk& c, std::size_t begin, std::size_t end, Id chunkId) {
      for (std::size_t i = begin; i < end; ++i) {
        const auto category = static_cast<Category>(c.category[i]);
        const auto op = static_cast<CollectiveOp>(c.collOp[i]);
        std::uint8_t bits = 0;
        if (c.flags[i] & EventFlags::Instant) bits |= EventBits::Instant;
        if (classes_.bits(c.cat[i]) & (StringClasses::kUserAnnotation | StringClasses::kGpuUserAnnotation))
          bits |= EventBits::Annotation;
        const TimeNs s = c.start[i], e = c.end[i];
        // The same rules as step_breakdown (work, compute, comm) and collectives (instances).
        if (device && !(bits & (EventBits::Instant | EventBits::Annotation))) {
          bits |= EventBits::Work;
          // A collective among one rank is local work, not communication (step_breakdown's rule).
          const bool isComm =
              (category == Category::Communication || (op != CollectiveOp::None && kind != TrackKind::CpuThread)) &&
              !isLocalCollective(worldOfOne_, c.groupSize[i]);
          if (isComm) {
            bits |= EventBits::Comm;
            comm.push_back({s, e});
          } else if (category == Category::Computation) {
            bits |= EventBits::Compute;
            compute.push_back({s, e});
          }
          if (op != CollectiveOp::None && (category == Category::Communication || kind == TrackKind::Comm))
            bits |= EventBits::Collective;
        }
        const std::uint32_t n = nameIndex(c.name[i]);
        const std::uint8_t key = makeKey(category, op);
        const Id id = EventChunk::eventId(chunkId, i);
        staging_.push(s, e, id, n, key, bits, c.bytes[i]);
        if (copyCollectives && (bits & EventBits::Collective))
          copies.push_back(CommCopy{s, e, id, n, key, bits, c.bytes[i], static_cast<Id>(c.pg[i]), laneIndex});
      }
      done_ += end - begin;
      if (cancel_ && cancel_->isCancelled()) throw Cancelled();
      report();
    });
    out_->eventCount_ += staging_.size();
    finishLane(lane, staging_);
  }

  void loadCounter(Lane& lane) {
    const auto samples = store_.counterSamples(lane.trackId);
    lane.sampleTs.resize(samples.size());
    lane.sampleValue.resize(samples.size());
    for (std::size_t i = 0; i < samples.size(); ++i) {
      lane.sampleTs[i] = samples[i].tsNs;
      lane.sampleValue[i] = samples[i].value;
    }
    // counterSamples() orders by time; keep that guarantee even for a damaged table.
    if (!std::is_sorted(lane.sampleTs.begin(), lane.sampleTs.end())) {
      std::vector<std::uint32_t> order(samples.size());
      std::iota(order.begin(), order.end(), 0u);
      std::stable_sort(order.begin(), order.end(),
                       [&](std::uint32_t a, std::uint32_t b) { return samples[a].tsNs < samples[b].tsNs; });
      for (std::size_t i = 0; i < order.size(); ++i) {
        lane.sampleTs[i] = samples[order[i]].tsNs;
        lane.sampleValue[i] = samples[order[i]].value;
      }
    }
    const std::size_t n = lane.sampleTs.size();
    constexpr std::size_t F = Lane::kSampleFanout;
    for (const std::vector<double>* below = &lane.sampleValue; below->size() > 2 * F;) {
      std::vector<double> up((below->size() + F - 1) / F, -std::numeric_limits<double>::infinity());
      for (std::size_t i = 0; i < below->size(); ++i) up[i / F] = std::max(up[i / F], (*below)[i]);
      lane.sampleLevels.push_back(std::move(up));
      below = &lane.sampleLevels.back();
    }
    if (n) {
      lane.minStart = lane.sampleTs.front();
      lane.maxEnd = lane.sampleTs.back();
      const auto [mn, mx] = std::minmax_element(lane.sampleValue.begin(), lane.sampleValue.end());
      lane.minValue = *mn;
      lane.maxValue = *mx;
    }
    out_->sampleCount_ += n;
    done_ += n;
    report();
  }

  static constexpr std::uint32_t kDenseNames = 1u << 24;

  TraceStore& store_;
  bool worldOfOne_ = false;  // a run we trained or simulated on one rank: its collectives are local
  RunId runId_;
  BuildOptions options_;
  const CancelToken* cancel_;
  const ProgressFn& progress_;
  StringClasses classes_;
  TimelineIndex* out_ = nullptr;
  Staging staging_;
  std::vector<std::uint32_t> dense_;  // string id -> name index + 1
  std::unordered_map<std::uint32_t, std::uint32_t> sparse_;
  std::uint64_t total_ = 0, done_ = 0, reported_ = 0;
};

std::shared_ptr<const TimelineIndex> TimelineIndex::build(TraceStore& store, RunId runId, const BuildOptions& options,
                                                          const CancelToken* cancel, const ProgressFn& progress) {
  TimelineBuilder b(store, runId, options, cancel, progress);
  return b.run();
}

}  // namespace shardscope::core::timeline
