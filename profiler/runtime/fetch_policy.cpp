#include "profiler/runtime/fetch_policy.h"

#include <algorithm>

#include "core/util/error.h"
#include "profiler/capture/memory_tracker.h"

namespace shardscope::runtime {

using capture::MemCategory;
using capture::MemScope;
using core::Strategy;
using State = FetchUnits::State;

namespace {

std::int64_t roundUp(std::int64_t n, std::int64_t m) { return (n + m - 1) / m * m; }

// ---------------------------------------------------------------------------------------------
// ZeRO-3: a fetch unit per module.

class Zero3FetchPolicy final : public ParamFetchPolicy {
 public:
  Zero3FetchPolicy(const core::RunConfig& cfg, const ModelLayout& layout, FetchUnits& units, torch::Device device)
      : layout_(layout),
        units_(units),
        device_(device),
        prefetchBucketSize_(cfg.prefetchBucketSize),
        persistenceThreshold_(cfg.paramPersistenceThreshold),
        maxLiveParameters_(cfg.maxLiveParameters),
        maxReuseDistance_(cfg.maxReuseDistance),
        reduceBucketSize_(cfg.reduceBucketSize),
        overlapComm_(core::effectiveOverlapComm(cfg)) {}

  int shardGroupSize(int worldSize) const override { return worldSize; }

  // A unit per module; parameters below the persistence threshold are never partitioned away (a
  // persistent unit of their own, kept whole on every rank).
  void defineUnits() override {
    moduleUnit_.assign(layout_.modules.size(), -1);
    persistentUnit_.assign(layout_.modules.size(), -1);
    for (std::size_t m = 0; m < layout_.modules.size(); ++m) {
      std::vector<int> big, small;
      for (int p : layout_.modules[m].params)
        (layout_.params[static_cast<std::size_t>(p)].numel < persistenceThreshold_ ? small : big).push_back(p);
      if (!big.empty()) moduleUnit_[m] = units_.addUnit(layout_.modules[m].name, big, false);
      if (!small.empty()) persistentUnit_[m] = units_.addUnit(layout_.modules[m].name + " (persistent)", small, true);
    }
    std::int64_t cap = 0;
    for (int u = 0; u < units_.unitCount(); ++u) cap += units_.gradPadded(u);
    ipgCap_ = std::max<std::int64_t>(1, std::min(reduceBucketSize_, cap));
    ipgCap_ = roundUp(ipgCap_, units_.shardGroupSize());
    MemScope ms(MemCategory::CommBuffers);
    for (int b = 0; b < (overlapComm_ ? 2 : 1); ++b)
      ipg_.push_back(torch::zeros({ipgCap_}, torch::TensorOptions().dtype(torch::kFloat32).device(device_)));
  }

  FetchPoint fetchPoint() const override { return FetchPoint::Module; }
  int unitAt(int m) const override { return moduleUnit_[static_cast<std::size_t>(m)]; }

  void beforeForward(int m) override {
    const int u = unitAt(m);
    for (int x : {u, persistentUnit_[static_cast<std::size_t>(m)]})
      if (x >= 0) units_.untap(x);
    if (u < 0) return;
    if (!units_.recomputing() && !units_.inBackward()) traceFetch(m);
    units_.ensure(u);
  }

  void afterForward(int m) override {
    const int u = unitAt(m);
    if (u >= 0 && !units_.inBackward() && shouldReleaseAfterForward(m)) units_.release(u);
  }

  void beforeRecompute(int) override {}  // beforeForward untaps each module's unit

  void beforeBackward(int m) override {
    if (!units_.recomputing()) traceFetch(m);
    units_.ensure(unitAt(m));
  }

  void reduceGradient(int u, const torch::Tensor& flat) override {
    ipgAdd(u, flat);
    if (!units_.persistent(u)) units_.release(u);
  }

  void backwardDone(int u) override {
    if (!units_.persistent(u)) units_.release(u);
  }

  void beforeGather() override {}

  void beginMicroBatch() override {
    tracePos_ = 0;
    bucketSeq_ = 0;  // bucket k is the same bucket in every step (analyses group by the name)
  }

  void flushGradients() override { flushIpg(); }

  void endBackward() override {
    if (!traceComplete_) {
      traceComplete_ = true;
      traceValid_ = true;
    }
  }

  std::int64_t bufferBytes() const override {
    std::int64_t b = 0;
    for (const auto& t : ipg_) b += static_cast<std::int64_t>(t.storage().nbytes());
    return b;
  }

 private:
  // The module fetch order of the first step, used from the second step on to prefetch up to
  // stage3_prefetch_bucket_size elements ahead (and at most two fetches in flight), within
  // stage3_max_live_parameters.
  void traceFetch(int m) {
    if (!traceComplete_) {
      trace_.push_back(m);
      return;
    }
    if (tracePos_ >= trace_.size() || trace_[tracePos_] != m) {
      traceValid_ = false;  // the order changed: no prefetch until a new trace is recorded
      return;
    }
    const std::size_t here = tracePos_++;
    if (!traceValid_) return;
    const std::int64_t budget = std::min(maxLiveParameters_ - units_.gatheredElements(), prefetchBucketSize_);
    std::int64_t ahead = 0;
    int launched = 0;
    for (std::size_t j = here + 1; j < trace_.size() && ahead < budget && launched < 2; ++j) {
      const int u = unitAt(trace_[j]);
      if (u < 0) continue;
      const State s = units_.state(u);
      if (s == State::InFlight) ahead += units_.padded(u);
      if (s != State::Released) continue;
      units_.gather(u);
      ahead += units_.padded(u);
      ++launched;
    }
  }

  // Released after its forward unless the trace says it is used again within
  // stage3_max_reuse_distance elements (or too much is gathered already).
  bool shouldReleaseAfterForward(int m) const {
    if (unitAt(m) < 0) return false;
    if (units_.gatheredElements() > maxLiveParameters_) return true;
    if (!traceComplete_ || !traceValid_ || tracePos_ == 0) return true;
    std::int64_t dist = 0;
    for (std::size_t j = tracePos_; j < trace_.size(); ++j) {
      if (trace_[j] == m) return dist > maxReuseDistance_;
      const int u2 = unitAt(trace_[j]);
      if (u2 >= 0) dist += units_.numel(u2);
    }
    return true;
  }

  // The IPG bucket: each rank's chunk of every gradient goes to that rank's section, so one
  // reduce-scatter of the bucket hands every rank its own chunks.
  void ipgAdd(int u, const torch::Tensor& flat) {
    const auto S = static_cast<std::int64_t>(units_.shardGroupSize());
    const std::int64_t chunk = units_.gradPadded(u) / S, section = ipgCap_ / S;
    torch::NoGradGuard ng;
    if (chunk > section) {  // larger than a section: reduced on its own
      flushIpg();
      units_.reduceScatterGradient(flat, chunk, -1, {{u, 0}}, "grad bucket " + std::to_string(bucketSeq_++));
      if (!overlapComm_) units_.completeReductions(true);
      return;
    }
    if (ipgFill_ + chunk > section) flushIpg();
    auto& buf = ipg_[static_cast<std::size_t>(ipgCur_)];
    for (std::int64_t q = 0; q < S; ++q) buf.narrow(0, q * section + ipgFill_, chunk).copy_(flat.narrow(0, q * chunk, chunk));
    ipgPieces_.push_back({u, ipgFill_});
    ipgFill_ += chunk;
  }

  void flushIpg() {
    if (ipgFill_ == 0) return;
    const auto S = static_cast<std::int64_t>(units_.shardGroupSize());
    const std::int64_t section = ipgCap_ / S;
    auto& buf = ipg_[static_cast<std::size_t>(ipgCur_)];
    torch::Tensor in;
    {
      MemScope ms(MemCategory::CommBuffers);
      in = ipgFill_ == section ? buf : buf.view({S, section}).narrow(1, 0, ipgFill_).contiguous().view({S * ipgFill_});
    }
    units_.reduceScatterGradient(in, ipgFill_, -1, std::move(ipgPieces_), "grad bucket " + std::to_string(bucketSeq_++));
    ipgPieces_.clear();
    ipgFill_ = 0;
    if (!overlapComm_ || in.data_ptr() != buf.data_ptr()) {
      if (!overlapComm_) units_.completeReductions(true);
      return;
    }
    ipgCur_ = (ipgCur_ + 1) % static_cast<int>(ipg_.size());
    // The other buffer may still be reduced from: finish that first.
    units_.completeReductions(true, 1);
  }

  const ModelLayout& layout_;
  FetchUnits& units_;
  torch::Device device_;
  // Knobs (stage3_prefetch_bucket_size, stage3_param_persistence_threshold,
  // stage3_max_live_parameters, stage3_max_reuse_distance, reduce_bucket_size, overlap_comm).
  std::int64_t prefetchBucketSize_, persistenceThreshold_, maxLiveParameters_, maxReuseDistance_, reduceBucketSize_;
  bool overlapComm_;
  std::vector<int> moduleUnit_, persistentUnit_;  // per module: its unit, its persistent unit (or -1)
  // The trace
  std::vector<int> trace_;
  std::size_t tracePos_ = 0;
  bool traceComplete_ = false, traceValid_ = false;
  // The IPG bucket(s): two alternating with overlap_comm
  std::vector<torch::Tensor> ipg_;
  std::int64_t ipgCap_ = 0;
  int ipgCur_ = 0;
  std::int64_t ipgFill_ = 0;
  std::vector<std::pair<int, std::int64_t>> ipgPieces_;
  int bucketSeq_ = 0;
};

// ---------------------------------------------------------------------------------------------
// FSDP (FULL_SHARD, SHARD_GRAD_OP) and HSDP: a flat unit per block; unit index = block index.

class FsdpFetchPolicy final : public ParamFetchPolicy {
 public:
  using BackwardPrefetch = core::BackwardPrefetch;

  FsdpFetchPolicy(const core::RunConfig& cfg, const ModelLayout& layout, FetchUnits& units)
      : layout_(layout),
        units_(units),
        reshardAfterForward_(cfg.strategy != Strategy::FsdpGradOp),
        backwardPrefetch_(cfg.backwardPrefetch),
        forwardPrefetch_(cfg.forwardPrefetch),
        limitAllGathers_(cfg.limitAllGathers),
        shardGroupSize_(cfg.strategy == Strategy::Hsdp ? core::effectiveShardGroupSize(cfg) : 0) {}

  int shardGroupSize(int worldSize) const override { return shardGroupSize_ > 0 ? shardGroupSize_ : worldSize; }

  // Auto-wrap at the transformer block; the embedding and the head are units of their own.
  void defineUnits() override {
    std::vector<std::vector<int>> blocks(static_cast<std::size_t>(layout_.blocks));
    for (const auto& mod : layout_.modules)
      for (int p : mod.params) blocks[static_cast<std::size_t>(mod.block)].push_back(p);
    for (int b = 0; b < layout_.blocks; ++b) units_.addUnit(blockName(layout_, b), blocks[static_cast<std::size_t>(b)], false);
  }

  FetchPoint fetchPoint() const override { return FetchPoint::Block; }
  int unitAt(int block) const override { return block; }

  void beforeForward(int block) override {
    units_.ensure(block);
    if (forwardPrefetch_ && block + 1 < units_.unitCount()) units_.gather(block + 1);
    units_.untap(block);
  }

  // FULL_SHARD frees after forward (the last unit's backward comes next: kept, as FSDP keeps the
  // root); SHARD_GRAD_OP keeps everything until the end of backward.
  void afterForward(int block) override {
    if (reshardAfterForward_ && block != units_.unitCount() - 1) units_.release(block);
  }

  void beforeRecompute(int block) override { units_.untap(block); }

  void beforeBackward(int block) override {
    units_.ensure(block);
    if (backwardPrefetch_ == BackwardPrefetch::Pre && block > 0 && hasBackward(block - 1)) units_.gather(block - 1);
  }

  void reduceGradient(int u, const torch::Tensor& flat) override {
    if (backwardPrefetch_ == BackwardPrefetch::Post && u > 0 && hasBackward(u - 1)) units_.gather(u - 1);
    units_.reduceScatterGradient(flat, units_.gradPadded(u) / units_.shardGroupSize(), u, {}, "grad " + units_.unitName(u));
    if (reshardAfterForward_) units_.release(u);
    units_.completeReductions(false);
  }

  void backwardDone(int u) override {
    if (backwardPrefetch_ == BackwardPrefetch::Post && u > 0 && hasBackward(u - 1)) units_.gather(u - 1);
    if (reshardAfterForward_) units_.release(u);
  }

  // limit_all_gathers: at most two units' all-gathers in flight; block the CPU otherwise.
  void beforeGather() override {
    if (!limitAllGathers_) return;
    for (int k = 0; k < units_.unitCount() && inFlightCount() >= 2; ++k)
      if (units_.state(k) == State::InFlight) units_.ensure(k);
  }

  void beginMicroBatch() override {}
  void flushGradients() override {}
  void endBackward() override {}
  std::int64_t bufferBytes() const override { return 0; }

 private:
  // Whether a block runs a backward: all but a frozen embedding (LoRA), whose output needs no
  // gradient (prefetching it for backward would gather it for nothing).
  bool hasBackward(int block) const { return block > 0 || units_.gradPadded(block) > 0; }

  int inFlightCount() const {
    int n = 0;
    for (int k = 0; k < units_.unitCount(); ++k) n += units_.state(k) == State::InFlight;
    return n;
  }

  const ModelLayout& layout_;
  FetchUnits& units_;
  bool reshardAfterForward_;  // FULL_SHARD (and HSDP); SHARD_GRAD_OP keeps units to the end of backward
  BackwardPrefetch backwardPrefetch_;
  bool forwardPrefetch_;
  bool limitAllGathers_;
  int shardGroupSize_;  // HSDP's G; 0: the world
};

}  // namespace

std::unique_ptr<ParamFetchPolicy> ParamFetchPolicy::create(const core::RunConfig& cfg, const ModelLayout& layout,
                                                           FetchUnits& units, torch::Device device) {
  switch (cfg.strategy) {
    case Strategy::Zero3:
      return std::make_unique<Zero3FetchPolicy>(cfg, layout, units, device);
    case Strategy::FsdpFull:
    case Strategy::FsdpGradOp:
    case Strategy::Hsdp:
      return std::make_unique<FsdpFetchPolicy>(cfg, layout, units);
    case Strategy::Ddp:
    case Strategy::Zero1:
    case Strategy::Zero2:
    case Strategy::ZeroPPHpz:  // estimator and simulator only: RunConfig refuses it
      break;
  }
  throw core::Error(std::string("no parameter fetch policy for ") + std::string(core::toString(cfg.strategy)));
}

}  // namespace shardscope::runtime
