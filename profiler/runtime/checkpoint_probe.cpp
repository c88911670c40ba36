#include "profiler/runtime/checkpoint_probe.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

#include "profiler/runtime/model.h"

#ifdef SHARDSCOPE_WITH_CUDA
#include <torch/cuda.h>
#endif

namespace shardscope::runtime {
namespace {

using Body = std::function<torch::Tensor(torch::Tensor)>;

class ProbeHooks : public ForwardHooks {
 public:
  ProbeHooks(const ModelLayout& layout, torch::Device device, torch::ScalarType dtype, std::uint64_t seed,
             std::function<void()> sync)
      : sync_(std::move(sync)), dtype_(dtype) {
    const auto f32 = torch::TensorOptions().dtype(torch::kFloat32);
    for (std::size_t p = 0; p < layout.params.size(); ++p) {
      const auto& pi = layout.params[p];
      auto t = torch::empty({pi.numel}, f32);
      initParam(layout, static_cast<int>(p), seed, t);
      t = t.reshape(pi.shape).to(device);
      if (pi.trainable) {
        leaves_.push_back(t.requires_grad_(true));
      } else {
        leaves_.push_back(t.to(dtype));
      }
    }
  }
  bool checkpointing = false;
  double blockForwardS = 0;  // the layer's forward in the last iteration

  torch::Tensor param(int p) override {
    const auto& leaf = leaves_[static_cast<std::size_t>(p)];
    return leaf.scalar_type() == dtype_ ? leaf : leaf.to(dtype_);
  }
  void beginModule(int) override {}
  torch::Tensor endModule(int, torch::Tensor out) override { return out; }
  torch::Tensor runBlock(int block, torch::Tensor x, const Body& body) override {
    if (block != 1) return body(x);
    sync_();
    const auto t0 = std::chrono::steady_clock::now();
    torch::Tensor y;
    if (checkpointing) {
      body_ = body;
      y = checkpointedBlock(x, &body_);  // as the engines checkpoint a block
    } else {
      y = body(x);
    }
    sync_();
    blockForwardS = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return y;
  }
  void zeroGrad() {
    for (auto& l : leaves_)
      if (l.requires_grad() && l.grad().defined()) l.mutable_grad() = torch::Tensor();
  }

 private:
  std::function<void()> sync_;
  std::vector<torch::Tensor> leaves_;
  torch::ScalarType dtype_;
  Body body_;
};

}  // namespace

CheckpointProbe runCheckpointProbe(const ModelConfig& cfg, torch::Device device, torch::ScalarType dtype, bool sdpa,
                                   std::int64_t microBatch, std::int64_t seqLen, std::uint64_t seed) {
  const auto start = std::chrono::steady_clock::now();
  const auto since = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  };
  CheckpointProbe out;
  ModelConfig one = cfg;
  one.layers = 1;
  one.vocab = std::min<std::int64_t>(cfg.vocab, 512);
  const ModelLayout layout = buildLayout(one);
  // On a CPU a block of 64M parameters already takes seconds per round; a GPU takes an 8B model's
  // layer (218M) in milliseconds and has the memory for it (about 2 GB with its gradients).
  const std::int64_t limit = device.is_cuda() ? std::int64_t{256} << 20 : std::int64_t{64} << 20;
  if (layout.totalNumel > limit) return out;
  const auto sync = [device] {
#ifdef SHARDSCOPE_WITH_CUDA
    if (device.is_cuda()) torch::cuda::synchronize();
#else
    (void)device;
#endif
  };
  Transformer model(layout, device, dtype);
  if (sdpa) model.setSdpa(true);
  ProbeHooks hooks(layout, device, dtype, seed, sync);
  Batch batch;
  // Tokens spread over the vocabulary without drawing from the global generator (the run's own
  // random state is not touched).
  const auto ids = torch::arange(microBatch * seqLen, torch::TensorOptions().dtype(torch::kInt64));
  batch.tokens = (ids * 7919 % one.vocab).reshape({microBatch, seqLen}).to(device);
  batch.targets = ((ids * 7919 + 1) % one.vocab).reshape({microBatch, seqLen}).to(device);
  // In a run, the other layers' forward and backward come between a block's forward and its
  // backward and push its saved activations out of the caches; the recomputation brings them back
  // just before they are used. The probe writes a buffer larger than the caches in between (not
  // timed), so that its plain backward reads cold activations as a run's does.
  auto evict = torch::empty({std::int64_t{64} << 20 >> 2}, torch::TensorOptions().dtype(torch::kFloat32).device(device));
  // One iteration: the block's forward (timed inside runBlock) and the whole backward.
  const auto iteration = [&](bool ckpt, double& fwdS, double& bwdS) {
    hooks.checkpointing = ckpt;
    hooks.zeroGrad();
    auto loss = model.loss(batch, hooks);
    fwdS = hooks.blockForwardS;
    evict.fill_(static_cast<float>(ckpt));
    sync();
    const auto t0 = std::chrono::steady_clock::now();
    loss.backward();
    sync();
    bwdS = since(t0);
  };
  double f = 0, b = 0;
  iteration(false, f, b);  // first use of the kernels and the buffers (the checkpointed form's are the same)
  // Per round: the checkpointed forward over the plain one, and the backward's excess over the plain
  // forward; the median of the rounds (a rank descheduled for a time slice spoils one round, not the
  // figure).
  std::vector<double> fwdRatio, recomputeRatio;
  double plainF = 0;
  const auto timed = std::chrono::steady_clock::now();
  int rounds = 0;
  // Five rounds at least (their median is steady to about 0.03 on 2 ranks sharing 2 cores, three
  // were not), more until 0.5 s have passed (up to 50: a small block takes a millisecond, and its
  // timings scatter the more), and only two past 1.5 s (a large model).
  while ((rounds < 5 || (rounds < 50 && since(timed) < 0.5)) && (rounds < 2 || since(timed) < 1.5)) {
    double pf = 0, pb = 0, cf = 0, cb = 0;
    iteration(false, pf, pb);
    iteration(true, cf, cb);
    if (pf > 0) {
      fwdRatio.push_back(cf / pf);
      recomputeRatio.push_back((cb - pb) / pf);
    }
    plainF += pf;
    ++rounds;
  }
  out.rounds = rounds;
  out.seconds = since(start);
  if (fwdRatio.empty()) return out;
  const auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  };
  out.plainForwardS = plainF / rounds;
  out.forwardShare = median(fwdRatio);
  out.recomputeShare = median(recomputeRatio);
  // A share outside these bounds is a timing disturbed by something else (a descheduled rank),
  // not what checkpointing costs: left unmeasured, the simulator keeps its constants.
  out.measured = out.forwardShare > 0.3 && out.forwardShare < 1.5 && out.recomputeShare > 0.2 && out.recomputeShare < 2.0;
  return out;
}

}  // namespace shardscope::runtime
