#pragma once
// Collectives matched across ranks: arrival skew, the last-arriving rank and the wait it caused the
// others; the rank that keeps everybody waiting is the straggler. Clocks are aligned on the ends of
// matched collectives first (they end together on every rank), so per-node clock offsets do not
// masquerade as lateness.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/storage/trace_store.h"
#include "core/util/progress.h"

namespace shardscope::core {

struct RankArrival {
  int rank = 0;
  TimeNs clockOffsetNs = 0;    // subtracted from this rank's times (median end difference vs the reference rank)
  std::int64_t instances = 0;  // matched collectives this rank took part in
  std::int64_t lastCount = 0;  // how often it arrived last
  TimeNs lateNs = 0;           // Σ (its arrival − the earliest arrival)
  TimeNs causedWaitNs = 0;     // Σ over collectives it arrived last at: Σ others' (its arrival − their arrival)
};

// The collectives of one (process group, operation) matched across ranks: their arrival skew and
// who arrived last how often.
struct ArrivalGroup {
  std::string processGroup;  // "" when the trace names none
  CollectiveOp op = CollectiveOp::None;
  std::int64_t matched = 0;              // instances matched across at least two ranks
  int ranks = 0;                         // ranks taking part
  TimeNs meanSkewNs = 0, maxSkewNs = 0;  // last arrival - first, clocks aligned
  TimeNs waitNs = 0;                     // Σ over instances Σ over ranks (last arrival - its arrival)
  int mostOftenLast = -1;                // the rank arriving last most often (its rank number), -1 when none
  std::int64_t mostOftenLastCount = 0;
};

// When a rank is named the straggler (docs/METRICS.md, "Stragglers"): it arrived last at k of the m
// matched collectives it took part in, and all of
//   * k/m >= kStragglerMinShareOverChance x 1/n (n ranks: 1/n is what chance gives),
//   * k is significant: P(X >= k) < kStragglerMaxPValue for X ~ Binomial(m, 1/n),
//   * the waiting it caused is at least kStragglerMinShareOfWait of all the waiting in the run.
// A 2-rank run whose rank 0 is last at 428 of 815 collectives (52.5 %) names nobody.
constexpr double kStragglerMinShareOverChance = 1.5;
constexpr double kStragglerMaxPValue = 1e-3;
constexpr double kStragglerMinShareOfWait = 0.5;

struct StragglerReport {
  std::int64_t matched = 0;  // collective instances matched across at least two ranks
  std::vector<RankArrival> ranks;
  std::vector<ArrivalGroup> groups;  // per (process group, operation), most waiting first
  std::optional<int> straggler;      // named only when the evidence says so (rule above)
  std::optional<int> mostWaitedFor;  // the rank that caused the most waiting, whatever the evidence
  double stragglerPValue = 1.0;      // of mostWaitedFor's last count (1 when undefined)
  std::string evidence;              // one sentence: why mostWaitedFor is, or is not, named
  TimeNs maxSkewNs = 0;              // largest arrival spread of one collective
  TimeNs totalWaitNs = 0;            // Σ of every rank's waiting for the last arrival
};

// P(X >= k) for X ~ Binomial(m, p): the chance of arriving last at least k times by luck.
double binomialUpperTail(std::int64_t k, std::int64_t m, double p);

// Instances are matched per (process group, operation) by their order on each rank.
StragglerReport detectStragglers(TraceStore& store, RunId runId, const CancelToken* cancel = nullptr);

// One collective instance seen from one rank, with the arrivals of its matched peers (clock-aligned).
struct InstanceArrival {
  std::size_t matchIndex = 0;     // k: the k-th instance of its (group, operation) on every rank
  int peers = 0;                  // ranks that took part (>= 2)
  TimeNs arrivalNs = 0;           // this rank's kernel start, on the reference rank's clock
  TimeNs firstArrivalNs = 0;      // earliest arrival among the peers
  TimeNs lastArrivalNs = 0;       // latest arrival among the peers
  int lastRank = 0;               // the rank that arrived last (its rank number)
  std::size_t lastRankIndex = 0;  // ... and its index in the run's rank list
};

struct ScanContext;

// The same computation fed by scanRank (rank_scan.h). It keeps each rank's collective times (not its
// other events), so after finish() single instances can be looked up (bottleneck rule "rank skew").
class StragglerAccumulator {
 public:
  explicit StragglerAccumulator(ScanContext& ctx);
  ~StragglerAccumulator();
  void beginRank(const Rank& rank);
  bool beginTrack(const TrackSummary& t);
  void onEvents(const EventChunk& c, std::size_t begin, std::size_t end, Id chunkId);
  void onEvent(const EventChunk& c, std::size_t i, Id chunkId);
  void endRank(const Rank&) {}
  StragglerReport finish();

  // The instance of (group, op) on the rank with index rankIndex that ran [startNs, endNs): its
  // match across ranks; nullopt when it was not matched (or finish() has not run).
  std::optional<InstanceArrival> arrival(std::size_t rankIndex, Id processGroupId, CollectiveOp op, TimeNs startNs,
                                         TimeNs endNs) const;
  // The clock offset removed from a rank's times (after finish()).
  TimeNs clockOffset(std::size_t rankIndex) const;
  // What finish() returned (nullptr before): the bottlenecks word their late-rank advice by it, so
  // the two never contradict each other.
  const StragglerReport* report() const { return finished_ ? &report_ : nullptr; }

  struct Inst {
    TimeNs s, e;
  };

 private:
  StragglerReport judge();
  ScanContext& ctx_;
  std::map<Id, std::string> pgNames_;
  // (group name, op) -> rank index -> instances in time order
  std::map<std::pair<std::string, int>, std::vector<std::vector<Inst>>> byKey_;
  std::size_t rankIndex_ = 0;
  bool hasGpu_ = false;
  TrackKind kind_ = TrackKind::CpuThread;
  bool finished_ = false;
  std::vector<TimeNs> offsets_;
  StragglerReport report_;
};

}  // namespace shardscope::core
