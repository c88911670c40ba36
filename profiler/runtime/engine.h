#pragma once
// Strategy engines: DDP, ZeRO-1/2/3, FSDP (full shard, shard-grad-op) and HSDP over the functional
// Transformer (model.h). Each engine owns this rank's parameters, gradients and optimizer state as
// the strategy prescribes, runs forward/backward through ForwardHooks (gathering, prefetching and
// releasing parameters, taking gradients as autograd produces them and launching their reduction
// asynchronously) and the optimizer step. docs/RUNTIME.md describes what each one sends.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "core/config/run_config.h"
#include "profiler/runtime/comm.h"
#include "profiler/runtime/loss_scaler.h"
#include "profiler/runtime/model.h"

namespace shardscope::capture {
class Recorder;
}

namespace shardscope::runtime {

struct EngineContext {
  const core::RunConfig* cfg = nullptr;
  Transformer* model = nullptr;
  Communicator* comm = nullptr;
  capture::Recorder* recorder = nullptr;  // may be null (capture off)
  int computeLane = -1;
  torch::Device device = torch::kCPU;
  std::uint64_t seed = 0;
  // Gradients are sent in bf16 (--reduce-dtype bf16, or unset under --precision bf16 where the
  // backend can sum bf16; the trainer decides, see trainer.cpp).
  bool bf16Reduce = false;
};

// Bytes this rank holds for the model state, by kind (exact: summed over the tensors it owns).
struct ModelStateBytes {
  std::int64_t parameters = 0;  // persistent parameters (replicas, shards, persistent full copies)
  std::int64_t gradients = 0;   // persistent gradient storage (full, bucket copies, partitions)
  std::int64_t optimizer = 0;   // optimizer state (master copies, moments)
  std::int64_t buffers = 0;     // communication buffers kept between steps (IPG buckets, ...)
};

struct StepStats {
  double loss = 0;  // this rank's mean loss over its micro-batches
  double gradNorm = 0;
  // fp16: the loss scale the step's backward used, and whether the step was skipped (its gradients
  // overflowed on some rank: no parameter changed). 0 / false without loss scaling.
  double lossScale = 0;
  bool skipped = false;
};

class Engine : public ForwardHooks {
 public:
  static std::unique_ptr<Engine> create(const EngineContext& ctx);
  ~Engine() override;

  // One optimizer step over the micro-batches (gradient accumulation = micro.size()).
  StepStats trainStep(std::int64_t step, const std::vector<Batch>& micro);
  // Every parameter's full value (on every rank; collective: all ranks must call).
  std::vector<torch::Tensor> fullParameters();
  ModelStateBytes modelStateBytes() const;
  // Writes this rank's shard of the state (parameters, optimizer state) to dir/rank<R>.pt-like raw
  // files; returns bytes written.
  std::int64_t saveShard(const std::string& dir);
  const std::string& describe() const { return description_; }
  // Bytes per element of what the compute graph got, as observed in the last forward: the
  // parameters (2 under --precision bf16, 4 in fp32) and the first transformer block's output.
  std::int64_t observedParamBytes() const { return observedParamBytes_; }
  std::int64_t observedActivationBytes() const { return observedActivationBytes_; }

  // Called by the autograd functions (public for them; not part of the engine's API).
  virtual void onGrad(int id, const torch::Tensor& grad) = 0;
  virtual void onPreBackward(int id) = 0;
  void noteBackward(const std::string& label);

 protected:
  explicit Engine(const EngineContext& ctx);
  // Strategy hooks around the generic step.
  virtual void beginStep(std::int64_t step, int micro, int microCount) = 0;
  virtual void finishBackward(int micro, int microCount) = 0;
  virtual double optimizerStep(std::int64_t step) = 0;  // returns the gradient norm
  virtual void fillFullParameters(std::vector<torch::Tensor>& out) = 0;
  virtual ModelStateBytes stateBytes() const = 0;
  virtual std::vector<std::pair<std::string, torch::Tensor>> shardTensors() = 0;

  // Capture helpers.
  void computeSpan(const std::string& name, std::int64_t startNs, std::int64_t endNs, const char* cat = "cpu_op");
  void annotation(const std::string& name, std::int64_t startNs, std::int64_t endNs);
  CollectiveInfo info(const std::string& label) const;
  // The same for a gradient reduction: sent in bf16 when --reduce-dtype (or the precision) says so.
  CollectiveInfo gradInfo(const std::string& label) const;
  void closeBackwardSegment();
  // A checkpointed block's recomputation inside its backward, recorded as its own span
  // ("recompute <block>"), then "backward <block>" for the rest: the simulator then takes the
  // recomputation's cost from the run's steps rather than from the checkpointing probe. Outside
  // the backward (the block's first, checkpointed forward) it just runs `body`.
  torch::Tensor recomputeSpan(int block, const std::function<torch::Tensor(torch::Tensor)>& body, const torch::Tensor& in,
                              const std::function<void()>& before = {});
  // Waits for a collective with the open compute segment closed around the wait, so the wait is
  // not counted as compute (the post-step all-gathers, the gradient-norm all-reduce).
  void waitOutsideCompute(CommHandle h);
  // fp16 loss scaling, at the start of an optimizer step with the gradients reduced: `grads` are this
  // rank's (the ones its optimizer will read). With dynamic scaling every rank reports whether any
  // is inf/NaN (one all-reduce on `group`, which must span every rank holding gradients) and the
  // scaler decides; returns false when the step is skipped (nothing may change), else divides the
  // gradients by the scale and returns true. Without loss scaling: true, nothing done.
  bool unscaleGradients(const std::vector<torch::Tensor>& grads, Group& group);

  // AdamW / SGD over flat fp32 tensors; state created lazily (first step) in OptimizerState memory.
  struct FlatOptState {
    torch::Tensor m, v;
    std::int64_t t = 0;
    torch::Tensor steps;  // the step count on the device, for the fused CUDA AdamW
  };
  void applyOptimizer(torch::Tensor param, const torch::Tensor& grad, FlatOptState& st, double clipCoef);
  static std::int64_t bytesOf(const torch::Tensor& t);
  // A parameter as the compute graph sees it: cast to the compute dtype (bf16 under --precision
  // bf16; autograd casts its gradient back to the fp32 master's dtype), else the tensor itself.
  // The copy counts as parameters in the memory breakdown (it is one, in another dtype), not as
  // activations, though autograd keeps it until the backward of its module.
  torch::Tensor compute(torch::Tensor t);
  // The block's name in spans: "embed_tokens", "layers.N", "lm_head".
  std::string blockName(int block) const;

  EngineContext ctx_;
  const core::RunConfig& cfg_;
  torch::ScalarType computeDtype_ = torch::kFloat32;
  std::int64_t observedParamBytes_ = 0;
  std::int64_t observedActivationBytes_ = 0;
  bool fusedAdamRefused_ = false;       // the fused CUDA AdamW failed once: element-wise from then on
  std::unique_ptr<LossScaler> scaler_;  // fp16 only
  bool stepSkipped_ = false;
  const ModelLayout& layout_;
  Group& world_;
  std::string description_;
  std::int64_t step_ = 0;
  bool inBackward_ = false;
  bool recomputing_ = false;
  std::int64_t segStart_ = 0;
  std::string segLabel_;
  std::int64_t moduleStart_ = 0;
};

}  // namespace shardscope::runtime
