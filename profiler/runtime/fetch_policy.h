#pragma once
// How a sharded engine (ZeRO-3, FSDP, HSDP) fetches its parameters: which fetch units exist, when
// each is gathered, prefetched and released, and how its gradients go to the reduce-scatters. The
// engine (ShardedEngine, engine.cpp) owns the units and issues the collectives through FetchUnits;
// a ParamFetchPolicy, chosen once when the engine is built, decides. Two flavours (engine.cpp's
// hooks call them the same way, docs/RUNTIME.md says what each sends):
//  - ZeRO-3 (DeepSpeed stage 3): a unit per module, parameters below the persistence threshold kept
//    whole; from the second step the trace of the first drives prefetch (prefetch bucket, max live
//    parameters) and which modules stay gathered (max reuse distance); gradient chunks go to the
//    per-rank sections of an IPG bucket, one reduce-scatter per bucket.
//  - FSDP (FULL_SHARD, SHARD_GRAD_OP, HSDP): a flat unit per block (embedding, each transformer
//    block, head), backward prefetch pre/post/none, forward prefetch, limit_all_gathers, shard groups
//    of G ranks (HSDP), a reduce-scatter per unit as its gradient is ready.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "core/config/run_config.h"
#include "profiler/runtime/model.h"

namespace shardscope::runtime {

// What a policy drives: the sharded engine's fetch units (flat parameter groups, gathered from their
// shards) and its gradient reductions. Implemented by the engine.
class FetchUnits {
 public:
  enum class State { Released, InFlight, Available };
  // A unit of the given parameters; persistent units are gathered once and never released.
  virtual int addUnit(const std::string& name, const std::vector<int>& params, bool persistent) = 0;
  virtual int unitCount() const = 0;
  virtual const std::string& unitName(int unit) const = 0;
  virtual State state(int unit) const = 0;
  virtual std::int64_t numel(int unit) const = 0;
  virtual std::int64_t padded(int unit) const = 0;  // numel rounded up to a multiple of the shard group
  // The part of padded() that has gradients (all of it but LoRA's frozen base; 0 for a unit of
  // frozen parameters only, which never reaches reduceGradient).
  virtual std::int64_t gradPadded(int unit) const = 0;
  virtual bool persistent(int unit) const = 0;
  virtual std::int64_t gatheredElements() const = 0;  // of the units gathered or in flight
  virtual int shardGroupSize() const = 0;
  virtual void gather(int unit) = 0;   // launches its all-gather (nothing unless released)
  virtual void ensure(int unit) = 0;   // gathered on return (the wait is outside compute)
  virtual void release(int unit) = 0;  // frees the full parameters (not a persistent unit's)
  virtual void untap(int unit) = 0;    // the next use enters autograd afresh
  // Reduce-scatters `in` (shardGroupSize() · outNumel elements) into a new buffer of outNumel; when
  // done, that buffer is added to the gradient shard of `unit` (unit >= 0), or each (unit, offset)
  // piece of it to that unit's shard. Label as in the spans ("grad layers.0", "grad bucket 3").
  virtual void reduceScatterGradient(const torch::Tensor& in, std::int64_t outNumel, int unit,
                                     std::vector<std::pair<int, std::int64_t>> pieces, const std::string& label) = 0;
  // Completes finished reductions; with `block`, waits for all of them but the last `keep`.
  virtual void completeReductions(bool block, std::size_t keep = 0) = 0;
  virtual bool inBackward() const = 0;
  virtual bool recomputing() const = 0;  // a checkpointed block's forward runs again in backward

 protected:
  virtual ~FetchUnits() = default;
};

// The ids the forward and backward hooks pass to a policy: modules (ZeRO-3) or blocks (FSDP).
enum class FetchPoint { Module, Block };

class ParamFetchPolicy {
 public:
  // The flavour for cfg.strategy (zero3, fsdp, fsdp_grad_op, hsdp), its knobs read once here.
  static std::unique_ptr<ParamFetchPolicy> create(const core::RunConfig& cfg, const ModelLayout& layout, FetchUnits& units,
                                                  torch::Device device);
  virtual ~ParamFetchPolicy() = default;

  // Ranks per shard group (the world but for HSDP).
  virtual int shardGroupSize(int worldSize) const = 0;
  // Adds the fetch units (FetchUnits::addUnit) and the policy's own buffers; after the shard groups.
  virtual void defineUnits() = 0;
  virtual FetchPoint fetchPoint() const = 0;
  // The unit fetched at a point, or -1 (a ZeRO-3 module whose parameters are all persistent).
  virtual int unitAt(int point) const = 0;

  // Forward: the point's parameters are gathered on return (and the next ones prefetched); after
  // the point's compute, what it no longer needs is released.
  virtual void beforeForward(int point) = 0;
  virtual void afterForward(int point) = 0;
  // A checkpointed block runs its forward again inside backward.
  virtual void beforeRecompute(int block) = 0;
  // Backward: before the point's backward (unitAt(point) >= 0), gathered again, next prefetched.
  virtual void beforeBackward(int point) = 0;
  // A unit's flat gradient is ready: reduce it (and release the unit where the flavour says so).
  virtual void reduceGradient(int unit, const torch::Tensor& flat) = 0;
  // A unit without gradients (frozen parameters only) has finished its backward: released where
  // the flavour releases a unit after reduceGradient.
  virtual void backwardDone(int unit) = 0;
  // Every launch of an all-gather asks first (FSDP's rate limiter).
  virtual void beforeGather() = 0;

  virtual void beginMicroBatch() = 0;
  virtual void flushGradients() = 0;             // end of backward, before the reductions are completed
  virtual void endBackward() = 0;                // end of backward, after every unit is released
  virtual std::int64_t bufferBytes() const = 0;  // communication buffers kept between steps
};

}  // namespace shardscope::runtime
