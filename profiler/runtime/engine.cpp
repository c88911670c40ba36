#include "profiler/runtime/engine.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>

#include <torch/csrc/autograd/autograd.h>

#include "core/util/error.h"
#include "profiler/capture/memory_tracker.h"
#include "profiler/capture/recorder.h"
#include "profiler/runtime/fetch_policy.h"

namespace shardscope::runtime {

using capture::MemCategory;
using capture::MemScope;
using capture::nowNs;
using core::Strategy;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

namespace {

Engine* enginePtr(AutogradContext* ctx) { return reinterpret_cast<Engine*>(ctx->saved_data["e"].toInt()); }

// Identity whose backward hands the gradient of a parameter (group) to the engine and lets nothing
// accumulate on the leaf: the engine owns gradient storage.
struct GradTap : public torch::autograd::Function<GradTap> {
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, std::int64_t engine, std::int64_t id) {
    ctx->saved_data["e"] = engine;
    ctx->saved_data["id"] = id;
    return x.view_as(x);
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    enginePtr(ctx)->onGrad(static_cast<int>(ctx->saved_data["id"].toInt()), g[0]);
    return {torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

// Identity on a module's output whose backward runs before that module's backward: where
// parameters are gathered again for backward and the next ones prefetched.
struct PreBackward : public torch::autograd::Function<PreBackward> {
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor y, std::int64_t engine, std::int64_t id) {
    ctx->saved_data["e"] = engine;
    ctx->saved_data["id"] = id;
    return y.view_as(y);
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    enginePtr(ctx)->onPreBackward(static_cast<int>(ctx->saved_data["id"].toInt()));
    return {g[0], torch::Tensor(), torch::Tensor()};
  }
};

using BlockBody = std::function<torch::Tensor(torch::Tensor)>;

std::int64_t roundUp(std::int64_t n, std::int64_t m) { return (n + m - 1) / m * m; }

torch::ScalarType computeDtypeOf(core::Precision p) {
  switch (p) {
    case core::Precision::Bf16:
      return torch::kBFloat16;
    case core::Precision::Fp16:
      return torch::kHalf;
    case core::Precision::Fp32:
      break;
  }
  return torch::kFloat32;
}

void freeStorage(const torch::Tensor& t) {
  auto* s = t.storage().unsafeGetStorageImpl();
  s->set_data_ptr_noswap(at::DataPtr(nullptr, s->device()));
  s->set_nbytes(0);
}

// Moves buf's memory into t's storage: t's views (saved by autograd) see the gathered values and
// no version counter changes (what FSDP does with its flat parameter's storage).
void adoptStorage(const torch::Tensor& t, const torch::Tensor& buf) {
  auto* dst = t.storage().unsafeGetStorageImpl();
  auto* src = buf.storage().unsafeGetStorageImpl();
  const auto nbytes = src->nbytes();
  dst->set_data_ptr_noswap(src->set_data_ptr(at::DataPtr(nullptr, src->device())));
  dst->set_nbytes(nbytes);
  src->set_nbytes(0);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Engine (common)

Engine::Engine(const EngineContext& ctx)
    : ctx_(ctx),
      cfg_(*ctx.cfg),
      computeDtype_(computeDtypeOf(ctx.cfg->precision)),
      layout_(ctx.model->layout()),
      world_(ctx.comm->world()) {
  if (cfg_.precision == core::Precision::Fp16)
    scaler_ = std::make_unique<LossScaler>(cfg_.lossScale, cfg_.initialScalePower, cfg_.lossScaleWindow, cfg_.hysteresis,
                                           cfg_.minLossScale);
}

bool Engine::unscaleGradients(const std::vector<torch::Tensor>& grads, Group& group) {
  if (!scaler_) return true;
  torch::NoGradGuard ng;
  const double scale = scaler_->scale();
  if (scaler_->dynamic()) {
    // Whether this rank's gradients hold an inf or NaN, summed over the ranks: every rank decides
    // alike. Tested on each gradient's fp32 sum (an inf or NaN anywhere makes it non-finite, as
    // DeepSpeed's CheckOverflow does): one reduction pass, no temporaries of the gradients' size
    // (isfinite() on a 1.5B-element fp32 gradient built ~10 GiB of them on an H100).
    std::vector<torch::Tensor> sums;
    for (const auto& g : grads)
      if (g.defined() && g.numel() > 0) sums.push_back(g.sum(torch::kFloat32).reshape({1}));
    torch::Tensor bad = sums.empty() ? torch::zeros({1}, torch::TensorOptions().dtype(torch::kFloat32).device(ctx_.device))
                                     : torch::cat(sums).isfinite().logical_not().sum().to(torch::kFloat32).reshape({1});
    waitOutsideCompute(group.allReduce(bad, info("overflow check")));
    const bool overflow = bad.item<double>() > 0;
    stepSkipped_ = scaler_->update(overflow);
    if (stepSkipped_) return false;
  }
  for (const auto& g : grads)
    if (g.defined() && g.numel() > 0) g.mul_(1.0 / scale);
  return true;
}

Engine::~Engine() = default;

torch::Tensor Engine::compute(torch::Tensor t) {
  observedParamBytes_ = static_cast<std::int64_t>(c10::elementSize(computeDtype_));
  if (t.scalar_type() == computeDtype_) return t;
  MemScope ms(MemCategory::Parameters);
  return t.to(computeDtype_);
}

std::string Engine::blockName(int block) const { return runtime::blockName(layout_, block); }

std::int64_t Engine::bytesOf(const torch::Tensor& t) {
  if (!t.defined()) return 0;
  return static_cast<std::int64_t>(t.storage().nbytes());
}

CollectiveInfo Engine::info(const std::string& label) const {
  CollectiveInfo i;
  i.label = label;
  i.step = step_;
  return i;
}

CollectiveInfo Engine::gradInfo(const std::string& label) const {
  CollectiveInfo i = info(label);
  i.bf16Reduce = ctx_.bf16Reduce;
  return i;
}

void Engine::computeSpan(const std::string& name, std::int64_t startNs, std::int64_t endNs, const char* cat) {
  if (!ctx_.recorder || endNs <= startNs) return;
  capture::SpanRecord s;
  s.lane = ctx_.computeLane;
  s.startNs = startNs;
  s.endNs = endNs;
  s.name = name;
  s.cat = cat;
  s.category = core::Category::Computation;
  s.step = step_;
  ctx_.recorder->span(std::move(s));
}

void Engine::annotation(const std::string& name, std::int64_t startNs, std::int64_t endNs) {
  if (!ctx_.recorder) return;
  capture::SpanRecord s;
  s.lane = ctx_.computeLane;
  s.startNs = startNs;
  s.endNs = endNs;
  s.name = name;
  s.cat = "user_annotation";
  s.category = core::Category::Other;
  s.step = step_;
  ctx_.recorder->span(std::move(s));
}

void Engine::waitOutsideCompute(CommHandle h) {
  const std::string label = segLabel_;
  closeBackwardSegment();
  h.wait();
  if (!label.empty()) noteBackward(label);
}

void Engine::closeBackwardSegment() {
  if (segLabel_.empty()) return;
  computeSpan(segLabel_, segStart_, nowNs());
  segLabel_.clear();
}

torch::Tensor Engine::recomputeSpan(int block, const std::function<torch::Tensor(torch::Tensor)>& body, const torch::Tensor& in,
                                    const std::function<void()>& before) {
  if (!inBackward_) return body(in);
  noteBackward("recompute " + blockName(block));
  if (before) before();
  torch::Tensor out = body(in);
  // The block's own backward follows (ZeRO-3's module hooks relabel it per module as they fire).
  noteBackward("backward " + blockName(block));
  return out;
}

void Engine::noteBackward(const std::string& label) {
  closeBackwardSegment();
  segLabel_ = label;
  segStart_ = nowNs();
}

void Engine::applyOptimizer(torch::Tensor param, const torch::Tensor& grad, FlatOptState& st, double clipCoef) {
  torch::NoGradGuard ng;
  torch::Tensor g = clipCoef < 1.0 ? grad * clipCoef : grad;
  ++st.t;
  if (cfg_.optimizer == core::OptimizerKind::Sgd) {
    if (cfg_.weightDecay != 0) g = g + param * cfg_.weightDecay;
    if (cfg_.momentum != 0) {
      if (!st.m.defined()) {
        MemScope ms(MemCategory::OptimizerState);
        st.m = g.clone();
      } else {
        st.m.mul_(cfg_.momentum).add_(g);
      }
      param.add_(st.m, -cfg_.lr);
    } else {
      param.add_(g, -cfg_.lr);
    }
    return;
  }
  if (!st.m.defined()) {
    MemScope ms(MemCategory::OptimizerState);
    st.m = torch::zeros_like(param);
    st.v = torch::zeros_like(param);
  }
#if TORCH_VERSION_MAJOR >= 2
  // On CUDA, LibTorch 2.x's fused AdamW (what torch.optim.AdamW(fused=True) and DeepSpeed's
  // FusedAdam run): one kernel reads and writes each array once. The element-wise form below is
  // seven passes with two temporaries: ~30 ms of a ~70 ms bf16 DDP step on Llama-3-8B cut to 2
  // layers on an H200. Same update rule (decoupled weight decay, bias correction, eps outside the
  // square root); if the kernel is refused (an old architecture), the element-wise form runs.
  if (param.is_cuda() && !fusedAdamRefused_) {
    try {
      if (!st.steps.defined()) st.steps = torch::zeros({}, param.options().dtype(torch::kFloat32));
      st.steps.add_(1);
      const torch::Tensor gf = g.scalar_type() == param.scalar_type() ? g : g.to(param.scalar_type());
      at::_fused_adamw_({param}, {gf}, {st.m}, {st.v}, {}, {st.steps}, cfg_.lr, cfg_.beta1, cfg_.beta2, cfg_.weightDecay,
                        cfg_.eps, /*amsgrad=*/false, /*maximize=*/false);
      return;
    } catch (const c10::Error& e) {
      fusedAdamRefused_ = true;
      std::fprintf(stderr, "shardscope-worker: fused AdamW refused (%s); element-wise AdamW instead\n",
                   e.what_without_backtrace());
    }
  }
#endif
  const double bc1 = 1.0 - std::pow(cfg_.beta1, static_cast<double>(st.t));
  const double bc2 = 1.0 - std::pow(cfg_.beta2, static_cast<double>(st.t));
  auto update = [&](torch::Tensor p, const torch::Tensor& gr, torch::Tensor m, torch::Tensor v) {
    m.mul_(cfg_.beta1).add_(gr, 1.0 - cfg_.beta1);
    v.mul_(cfg_.beta2).addcmul_(gr, gr, 1.0 - cfg_.beta2);
    if (cfg_.weightDecay != 0) p.mul_(1.0 - cfg_.lr * cfg_.weightDecay);
    auto denom = (v.sqrt() / std::sqrt(bc2)).add_(cfg_.eps);
    p.addcdiv_(m, denom, -cfg_.lr / bc1);
  };
  // Slice by slice (element-wise ops: the same result bit for bit). Over a whole flat parameter set
  // the two temporaries (sqrt(v) and its quotient, tens of MiB) went back to the OS at every free
  // (glibc trims the heap) and were page-faulted in again on the next step (~30 MiB per rank and
  // step for `small`), and each of the passes streamed every array from memory; 1 MiB slices keep
  // the temporaries in malloc's heap and the arrays in cache (AdamW on 4M elements, one thread:
  // ~35 ms -> ~10 ms). Not on GPUs: the caching allocator has no such cost, and slices would
  // multiply the kernel launches.
  constexpr std::int64_t kSlice = 1 << 18;
  const std::int64_t n = param.numel();
  if (n <= kSlice || !param.device().is_cpu() || !param.is_contiguous() || !g.is_contiguous() || !st.m.is_contiguous() ||
      !st.v.is_contiguous() || g.numel() != n || st.m.numel() != n || st.v.numel() != n) {
    update(param, g, st.m, st.v);
    return;
  }
  auto pf = param.view({-1}), gf = g.reshape({-1}), mf = st.m.view({-1}), vf = st.v.view({-1});
  for (std::int64_t lo = 0; lo < n; lo += kSlice) {
    const std::int64_t len = std::min(kSlice, n - lo);
    update(pf.narrow(0, lo, len), gf.narrow(0, lo, len), mf.narrow(0, lo, len), vf.narrow(0, lo, len));
  }
}

StepStats Engine::trainStep(std::int64_t step, const std::vector<Batch>& micro) {
  step_ = step;
  StepStats out;
  const int n = static_cast<int>(micro.size());
  double lossSum = 0;
  const std::int64_t stepStart = nowNs();
  for (int i = 0; i < n; ++i) {
    beginStep(step, i, n);
    inBackward_ = false;
    const std::int64_t f0 = nowNs();
    torch::Tensor loss;
    {
      MemScope ms(MemCategory::Activations);
      loss = ctx_.model->loss(micro[static_cast<std::size_t>(i)], *this);
    }
    closeBackwardSegment();
    const std::int64_t f1 = nowNs();
    annotation("forward", f0, f1);
    inBackward_ = true;
    noteBackward("backward " + layout_.modules.back().name);
    {
      MemScope ms(MemCategory::Activations);
      if (scaler_)
        (loss * (scaler_->scale() / static_cast<double>(n))).backward();
      else
        (loss / static_cast<double>(n)).backward();
    }
    closeBackwardSegment();
    finishBackward(i, n);
    closeBackwardSegment();
    inBackward_ = false;
    annotation("backward", f1, nowNs());
    lossSum += loss.item<double>();
  }
  const std::int64_t o0 = nowNs();
  noteBackward("optimizer step");
  if (scaler_) out.lossScale = scaler_->scale();  // the scale this step's backward used
  stepSkipped_ = false;
  out.gradNorm = optimizerStep(step);
  out.skipped = stepSkipped_;
  closeBackwardSegment();
  annotation("optimizer", o0, nowNs());
  annotation("ProfilerStep#" + std::to_string(step), stepStart, nowNs());
  out.loss = lossSum / n;
  return out;
}

std::vector<torch::Tensor> Engine::fullParameters() {
  std::vector<torch::Tensor> out(layout_.params.size());
  fillFullParameters(out);
  return out;
}

ModelStateBytes Engine::modelStateBytes() const { return stateBytes(); }

std::int64_t Engine::saveShard(const std::string& dir) {
  std::filesystem::create_directories(dir);
  std::int64_t total = 0;
  const std::string base = dir + "/rank" + std::to_string(ctx_.comm->env().rank);
  std::ofstream manifest(base + ".json");
  manifest << "{\"rank\":" << ctx_.comm->env().rank << ",\"strategy\":\"" << core::toString(cfg_.strategy) << "\",\"tensors\":[";
  bool first = true;
  std::ofstream data(base + ".bin", std::ios::binary);
  for (auto& [name, t] : shardTensors()) {
    auto c = t.detach().to(torch::kCPU).contiguous();
    const auto nbytes = static_cast<std::streamsize>(c.numel() * c.element_size());
    data.write(static_cast<const char*>(c.data_ptr()), nbytes);
    manifest << (first ? "" : ",") << "{\"name\":\"" << name << "\",\"offset\":" << total << ",\"numel\":" << c.numel()
             << ",\"dtype\":\"" << c10::toString(c.scalar_type()) << "\"}";
    first = false;
    total += nbytes;
  }
  manifest << "]}\n";
  data.flush();
  if (!data || !manifest) throw core::Error("cannot write checkpoint shard " + base + ".bin (disk full?)");
  return total;
}

// ---------------------------------------------------------------------------------------------
// DDP, ZeRO-1, ZeRO-2: every rank keeps the full parameters.

class ReplicatedEngine final : public Engine {
 public:
  explicit ReplicatedEngine(const EngineContext& ctx) : Engine(ctx) {
    const auto N = static_cast<std::int64_t>(world_.size());
    stage_ = cfg_.strategy == Strategy::Ddp ? 0 : cfg_.strategy == Strategy::Zero1 ? 1 : 2;
    // The trainable parameters are one flat fp32 tensor (what buckets, partitions and the optimizer
    // see); frozen ones (LoRA's base) another, in the compute dtype, outside all of that.
    const std::int64_t P = layout_.trainableNumel;
    padded_ = roundUp(P, N);
    part_ = padded_ / N;
    auto opts = torch::TensorOptions().dtype(torch::kFloat32).device(ctx.device);
    {
      MemScope ms(MemCategory::Parameters);
      flatParams_ = torch::zeros({padded_}, opts);
      if (layout_.totalNumel > P) frozenParams_ = torch::empty({layout_.totalNumel - P}, opts.dtype(computeDtype_));
    }
    std::int64_t off = 0, frozenOff = 0;
    for (std::size_t p = 0; p < layout_.params.size(); ++p) {
      const auto& info = layout_.params[p];
      if (!info.trainable) {
        offsets_.push_back(frozenOff);
        auto view = frozenParams_.narrow(0, frozenOff, info.numel);
        initParam(layout_, static_cast<int>(p), ctx.seed, view);
        leaves_.push_back(view.view(info.shape));
        frozenOff += info.numel;
        continue;
      }
      offsets_.push_back(off);
      auto view = flatParams_.narrow(0, off, info.numel);
      initParam(layout_, static_cast<int>(p), ctx.seed, view);
      leaves_.push_back(view.view(info.shape).detach().requires_grad_(true));
      off += info.numel;
    }
    {
      MemScope ms(MemCategory::Gradients);
      if (stage_ <= 1) flatGrad_ = torch::zeros({padded_}, opts);
      if (stage_ == 2) gradPart_ = torch::zeros({part_}, opts);
    }
    if (stage_ == 0) buildBuckets();
    if (stage_ == 2) {
      const std::int64_t cap = std::max<std::int64_t>(1, std::min(cfg_.reduceBucketSize, padded_));
      MemScope ms(MemCategory::CommBuffers);
      for (int b = 0; b < (core::effectiveOverlapComm(cfg_) ? 2 : 1); ++b) ipg_.push_back(torch::zeros({cap}, opts));
    }
    description_ = std::string(core::toString(cfg_.strategy)) + ": " + std::to_string(layout_.params.size()) + " parameters, " +
                   (stage_ == 0 ? std::to_string(buckets_.size()) + " gradient buckets"
                                : "partition of " + std::to_string(part_) + " elements per rank");
  }

  torch::Tensor param(int p) override {
    auto& leaf = leaves_[static_cast<std::size_t>(p)];
    if (!torch::GradMode::is_enabled() || !layout_.params[static_cast<std::size_t>(p)].trainable) return compute(leaf.detach());
    return compute(GradTap::apply(leaf, reinterpret_cast<std::int64_t>(static_cast<Engine*>(this)), p));
  }
  void beginModule(int) override {}
  torch::Tensor endModule(int, torch::Tensor out) override { return out; }
  torch::Tensor runBlock(int block, torch::Tensor x, const std::function<torch::Tensor(torch::Tensor)>& body) override {
    const std::string label = blockName(block);
    noteBackward("forward " + label);
    torch::Tensor y;
    if (cfg_.activationCheckpointing && block >= 1 && block <= layout_.config.layers && torch::GradMode::is_enabled()) {
      bodies_[block] = [this, body, block](torch::Tensor in) { return recomputeSpan(block, body, in); };
      y = checkpointedBlock(x, &bodies_[block]);
    } else {
      y = body(x);
    }
    if (block == 1) observedActivationBytes_ = y.element_size();
    closeBackwardSegment();
    if (torch::GradMode::is_enabled())
      y = PreBackward::apply(y, reinterpret_cast<std::int64_t>(static_cast<Engine*>(this)), block);
    return y;
  }

  void onPreBackward(int block) override { noteBackward("backward " + blockName(block)); }

  void onGrad(int p, const torch::Tensor& grad) override {
    const auto& pi = layout_.params[static_cast<std::size_t>(p)];
    const std::int64_t off = offsets_[static_cast<std::size_t>(p)];
    auto g = grad.reshape({pi.numel});
    torch::NoGradGuard ng;
    if (stage_ <= 1) {
      auto dst = flatGrad_.narrow(0, off, pi.numel);
      if (micro_ == 0)
        dst.copy_(g);
      else
        dst.add_(g);
      if (stage_ == 0 && lastMicro_) {
        // DDP keeps param.grad and the bucket as two copies unless gradient_as_bucket_view.
        if (!cfg_.gradientAsBucketView) keptGrads_.push_back(grad);
        const int b = bucketOf_[static_cast<std::size_t>(p)];
        if (--pending_[static_cast<std::size_t>(b)] == 0) launchBucket(b);
      }
      return;
    }
    // ZeRO-2: into the IPG bucket; reduced when full.
    auto& buf = ipg_[static_cast<std::size_t>(ipgCur_)];
    if (ipgFill_ + pi.numel > buf.numel()) flushIpg();
    if (pi.numel > buf.numel()) {
      // A parameter larger than the bucket is reduced on its own.
      MemScope ms(MemCategory::CommBuffers);
      auto big = g.clone();
      IpgFlight f;
      f.buffer = big;
      f.pieces.push_back({off, 0, pi.numel});
      f.h = world_.allReduce(big, gradInfo("grad bucket (" + pi.name + ")"));
      flights_.push_back(std::move(f));
      if (!core::effectiveOverlapComm(cfg_)) drainFlights(0);
      return;
    }
    auto& b2 = ipg_[static_cast<std::size_t>(ipgCur_)];
    b2.narrow(0, ipgFill_, pi.numel).copy_(g);
    ipgPieces_.push_back({off, ipgFill_, pi.numel});
    ipgFill_ += pi.numel;
  }

 private:
  struct Piece {
    std::int64_t flatOffset, bufOffset, numel;
  };
  struct IpgFlight {
    CommHandle h;
    torch::Tensor buffer;
    std::vector<Piece> pieces;
    int ipgIndex = -1;
  };

  void buildBuckets() {
    // Reverse parameter order (a proxy for the order gradients become ready); the first bucket is
    // small so the first gradients are not stuck behind a big one (DDP's first_bucket_bytes).
    bucketOf_.assign(layout_.params.size(), -1);
    std::int64_t cap = static_cast<std::int64_t>(cfg_.firstBucketMb * 1024 * 1024) / 4;
    std::int64_t fill = 0;
    int b = 0;
    std::vector<std::pair<std::int64_t, std::int64_t>> ranges;  // [lo, hi) in flat elements
    for (int p = static_cast<int>(layout_.params.size()) - 1; p >= 0; --p) {
      if (!layout_.params[static_cast<std::size_t>(p)].trainable) continue;  // no gradient
      const auto n = layout_.params[static_cast<std::size_t>(p)].numel;
      const auto off = offsets_[static_cast<std::size_t>(p)];
      if (fill > 0 && fill + n > cap) {
        ++b;
        fill = 0;
        cap = static_cast<std::int64_t>(cfg_.bucketCapMb * 1024 * 1024) / 4;
      }
      if (static_cast<int>(ranges.size()) <= b) ranges.push_back({off, off + n});
      ranges[static_cast<std::size_t>(b)].first = off;
      bucketOf_[static_cast<std::size_t>(p)] = b;
      fill += n;
    }
    buckets_ = ranges;
    count_.assign(buckets_.size(), 0);
    for (int bo : bucketOf_)
      if (bo >= 0) ++count_[static_cast<std::size_t>(bo)];
  }

  void launchBucket(int b) {
    const auto [lo, hi] = buckets_[static_cast<std::size_t>(b)];
    bucketHandles_.push_back(world_.allReduce(flatGrad_.narrow(0, lo, hi - lo), gradInfo("grad bucket " + std::to_string(b))));
  }

  void flushIpg() {
    if (ipgFill_ == 0) return;
    IpgFlight f;
    f.buffer = ipg_[static_cast<std::size_t>(ipgCur_)].narrow(0, 0, ipgFill_);
    f.pieces = std::move(ipgPieces_);
    f.ipgIndex = ipgCur_;
    f.h = world_.allReduce(f.buffer, gradInfo("grad bucket " + std::to_string(bucketSeq_++)));
    flights_.push_back(std::move(f));
    ipgPieces_.clear();
    ipgFill_ = 0;
    if (!core::effectiveOverlapComm(cfg_)) {
      drainFlights(0);
    } else {
      ipgCur_ = (ipgCur_ + 1) % static_cast<int>(ipg_.size());
      // The next buffer may still be in flight: wait for it before reuse.
      for (auto& fl : flights_)
        if (fl.ipgIndex == ipgCur_) {
          drainFlights(0);
          break;
        }
    }
  }

  // Completes in-flight reductions (all but `keep` of them), keeping this rank's partition.
  void drainFlights(std::size_t keep) {
    const std::int64_t lo = static_cast<std::int64_t>(world_.rank()) * part_, hi = lo + part_;
    while (flights_.size() > keep) {
      auto f = std::move(flights_.front());
      flights_.pop_front();
      const std::string label = segLabel_;
      closeBackwardSegment();
      f.h.wait();
      if (!label.empty()) noteBackward(label);
      torch::NoGradGuard ng;
      for (const auto& pc : f.pieces) {
        const std::int64_t a = std::max(lo, pc.flatOffset), b = std::min(hi, pc.flatOffset + pc.numel);
        if (a >= b) continue;
        gradPart_.narrow(0, a - lo, b - a).add_(f.buffer.narrow(0, pc.bufOffset + (a - pc.flatOffset), b - a));
      }
    }
  }

  void beginStep(std::int64_t, int micro, int microCount) override {
    micro_ = micro;
    lastMicro_ = micro == microCount - 1;
    bucketSeq_ = 0;  // bucket k is the same bucket in every step (analyses group by the name)
    if (micro == 0) {
      keptGrads_.clear();
      if (stage_ == 2) gradPart_.zero_();
    }
    if (stage_ == 0) pending_ = count_;
  }

  void finishBackward(int, int) override {
    const double N = world_.size();
    torch::NoGradGuard ng;
    if (stage_ == 0) {
      if (!lastMicro_) return;
      for (auto& h : bucketHandles_) {
        closeBackwardSegment();
        h.wait();
      }
      bucketHandles_.clear();
      flatGrad_.div_(N);
      return;
    }
    if (stage_ == 2) {
      flushIpg();
      closeBackwardSegment();
      drainFlights(0);
      return;
    }
    // ZeRO-1: gradients are reduced once, after the last micro-batch, bucket by bucket (DeepSpeed
    // all-reduces each bucket and keeps its own partition: use_multi_rank_bucket_allreduce).
    if (!lastMicro_) return;
    const std::int64_t chunk = std::max<std::int64_t>(1, std::min(cfg_.reduceBucketSize, padded_));
    std::vector<CommHandle> hs;
    for (std::int64_t lo = 0, k = 0; lo < padded_; lo += chunk, ++k)
      hs.push_back(
          world_.allReduce(flatGrad_.narrow(0, lo, std::min(chunk, padded_ - lo)), gradInfo("grad bucket " + std::to_string(k))));
    for (auto& h : hs) h.wait();
    flatGrad_.div_(N);
  }

  double optimizerStep(std::int64_t) override {
    torch::NoGradGuard ng;
    const auto r = static_cast<std::int64_t>(world_.rank());
    const double N = world_.size();
    if (!unscaleGradients({stage_ == 2 ? gradPart_ : stage_ == 1 ? flatGrad_.narrow(0, r * part_, part_) : flatGrad_}, world_))
      return 0;  // fp16 overflow: every rank skips the step (parameters unchanged, no all-gather)
    if (stage_ == 0) {
      const double norm = flatGrad_.norm().item<double>();
      const double coef = cfg_.gradClip > 0 && norm > cfg_.gradClip ? cfg_.gradClip / (norm + 1e-6) : 1.0;
      applyOptimizer(flatParams_, flatGrad_, opt_, coef);
      return norm;
    }
    torch::Tensor g = stage_ == 1 ? flatGrad_.narrow(0, r * part_, part_) : gradPart_;
    if (stage_ == 2) g.div_(N);
    double norm = 0;
    double coef = 1.0;
    if (cfg_.gradClip > 0) {
      auto sq = g.pow(2).sum().reshape({1}).to(torch::kFloat64).to(flatParams_.dtype());
      waitOutsideCompute(world_.allReduce(sq, info("grad norm")));
      norm = std::sqrt(sq.item<double>());
      if (norm > cfg_.gradClip) coef = cfg_.gradClip / (norm + 1e-6);
    }
    applyOptimizer(flatParams_.narrow(0, r * part_, part_), g, opt_, coef);
    // All-gather the updated partitions in allgather_bucket_size pieces, straight into the flat
    // parameters as DeepSpeed does (each rank's piece is a view; the own piece is the input). No
    // buffer of ours: temporaries here were still referenced by Gloo's worker thread after the
    // wait returned, and freed late, inside the next step's forward.
    const std::int64_t chunk = std::max<std::int64_t>(1, std::min(cfg_.allgatherBucketSize, part_));
    for (std::int64_t c0 = 0, k = 0; c0 < part_; c0 += chunk, ++k) {
      const std::int64_t len = std::min(chunk, part_ - c0);
      std::vector<torch::Tensor> outs;
      for (std::int64_t q = 0; q < world_.size(); ++q) outs.push_back(flatParams_.narrow(0, q * part_ + c0, len));
      waitOutsideCompute(
          world_.allGatherInto(outs, outs[static_cast<std::size_t>(r)], info("param gather " + std::to_string(k))));
    }
    return norm;
  }

  void fillFullParameters(std::vector<torch::Tensor>& out) override {
    for (std::size_t p = 0; p < leaves_.size(); ++p) out[p] = leaves_[p].detach().clone();
  }

  ModelStateBytes stateBytes() const override {
    ModelStateBytes b;
    b.parameters = bytesOf(flatParams_) + bytesOf(frozenParams_);
    b.gradients = bytesOf(flatGrad_) + bytesOf(gradPart_);
    if (stage_ == 0 && !cfg_.gradientAsBucketView) b.gradients += layout_.trainableNumel * 4;  // param.grad copies
    b.optimizer = bytesOf(opt_.m) + bytesOf(opt_.v);
    for (const auto& t : ipg_) b.buffers += bytesOf(t);
    return b;
  }

  std::vector<std::pair<std::string, torch::Tensor>> shardTensors() override {
    const auto r = static_cast<std::int64_t>(world_.rank());
    std::vector<std::pair<std::string, torch::Tensor>> out;
    if (r == 0 && frozenParams_.defined()) out.push_back({"frozen_params", frozenParams_});  // replicated: rank 0 saves
    if (stage_ == 0) {
      if (r == 0) out.push_back({"params", flatParams_});
      if (r == 0 && opt_.m.defined()) out.push_back({"exp_avg", opt_.m});
      if (r == 0 && opt_.v.defined()) out.push_back({"exp_avg_sq", opt_.v});
      return out;
    }
    out.push_back({"params", flatParams_.narrow(0, r * part_, part_)});
    if (opt_.m.defined()) out.push_back({"exp_avg", opt_.m});
    if (opt_.v.defined()) out.push_back({"exp_avg_sq", opt_.v});
    return out;
  }

  int stage_ = 0;
  std::int64_t padded_ = 0, part_ = 0;
  torch::Tensor flatParams_, flatGrad_, gradPart_;
  torch::Tensor frozenParams_;  // LoRA's base weights, in the compute dtype (undefined without LoRA)
  std::vector<std::int64_t> offsets_;
  std::vector<torch::Tensor> leaves_;
  std::map<int, BlockBody> bodies_;
  FlatOptState opt_;
  int micro_ = 0;
  bool lastMicro_ = true;
  // DDP
  std::vector<std::pair<std::int64_t, std::int64_t>> buckets_;
  std::vector<int> bucketOf_, count_, pending_;
  std::vector<CommHandle> bucketHandles_;
  std::vector<torch::Tensor> keptGrads_;
  // ZeRO-2
  std::vector<torch::Tensor> ipg_;
  int ipgCur_ = 0;
  std::int64_t ipgFill_ = 0;
  std::vector<Piece> ipgPieces_;
  std::deque<IpgFlight> flights_;
  int bucketSeq_ = 0;
};

// ---------------------------------------------------------------------------------------------
// ZeRO-3, FSDP (full shard, shard-grad-op), HSDP: parameters live as shards and are gathered per
// fetch unit when needed. The units and their collectives are here; which units exist and when
// each is gathered, prefetched and released is the ParamFetchPolicy's (fetch_policy.h), chosen
// once at construction: the hooks below are one path for every flavour.

class ShardedEngine final : public Engine, private FetchUnits {
 public:
  explicit ShardedEngine(const EngineContext& ctx) : Engine(ctx) {
    policy_ = ParamFetchPolicy::create(cfg_, layout_, *this, ctx.device);
    const int W = world_.size();
    const int G = policy_->shardGroupSize(W);
    if (G != W) {
      // HSDP: shard groups of G consecutive ranks; replica groups of the ranks at the same position.
      for (int k = 0; k < W / G; ++k) {
        std::vector<int> rs;
        for (int i = 0; i < G; ++i) rs.push_back(k * G + i);
        if (auto* g = ctx.comm->newGroup("shard" + std::to_string(k), rs)) shard_ = g;
      }
      for (int i = 0; i < G; ++i) {
        std::vector<int> rs;
        for (int k = 0; k < W / G; ++k) rs.push_back(k * G + i);
        if (auto* g = ctx.comm->newGroup("replica" + std::to_string(i), rs)) replica_ = g;
      }
    } else {
      shard_ = &world_;
    }
    unitOf_.assign(layout_.params.size(), -1);
    offsetIn_.assign(layout_.params.size(), 0);
    indexIn_.assign(layout_.params.size(), 0);
    policy_->defineUnits();
    description_ = std::string(core::toString(cfg_.strategy)) + ": " + std::to_string(units_.size()) +
                   " fetch units, shard group of " + std::to_string(shard_->size()) +
                   (replica_ ? ", " + std::to_string(replica_->size()) + " replicas" : "");
  }

  torch::Tensor param(int p) override {
    const int u = unitOf_[static_cast<std::size_t>(p)];
    auto& unit = units_[static_cast<std::size_t>(u)];
    ensure(u);
    const auto& info = layout_.params[static_cast<std::size_t>(p)];
    // The unit's gradient tap is made before its first parameter is used, frozen ones included:
    // autograd runs later-created nodes first, so every backward that reads the unit's frozen
    // weights (the input gradient of a frozen projection) runs before the tap's, whose gradient
    // may release the unit.
    if (!unit.tapped.defined() && unit.padded > 0) {
      unit.tapped = torch::GradMode::is_enabled()
                        ? GradTap::apply(unit.full, reinterpret_cast<std::int64_t>(static_cast<Engine*>(this)), u)
                        : unit.full.detach();
    }
    if (!info.trainable) {
      // The unit's frozen part: no autograd entry point, the same one split.
      if (unit.fviews.empty()) {
        std::vector<std::int64_t> sizes;
        sizes.reserve(unit.frozen.size() + 1);
        for (int q : unit.frozen) sizes.push_back(layout_.params[static_cast<std::size_t>(q)].numel);
        if (unit.fpadded > unit.fnumel) sizes.push_back(unit.fpadded - unit.fnumel);
        unit.fviews = unit.ffull.split_with_sizes(sizes);
      }
      return compute(unit.fviews[static_cast<std::size_t>(indexIn_[static_cast<std::size_t>(p)])].view(info.shape));
    }
    // All of the unit's parameters are cut from the flat tensor by one split: its backward writes the
    // flat gradient once (one concatenation). A narrow per parameter made autograd build a zero-filled
    // flat-sized gradient per parameter and add them up: on an H100-class GPU, FSDP on Llama-3-8B cut
    // to 2 layers spent ~23 ms of a ~97 ms bf16 step filling and adding those.
    if (unit.views.empty()) {
      std::vector<std::int64_t> sizes;
      sizes.reserve(unit.params.size() + 1);
      for (int q : unit.params) sizes.push_back(layout_.params[static_cast<std::size_t>(q)].numel);
      if (unit.padded > unit.numel) sizes.push_back(unit.padded - unit.numel);
      unit.views = unit.tapped.split_with_sizes(sizes);
    }
    return compute(unit.views[static_cast<std::size_t>(indexIn_[static_cast<std::size_t>(p)])].view(info.shape));
  }

  // Forward and backward hooks: the policy fetches at its points (modules or blocks); a point with a
  // unit gets a PreBackward tap on its output, where backward fetches again.
  void beginModule(int m) override {
    if (policy_->fetchPoint() == FetchPoint::Module) policy_->beforeForward(m);
  }

  torch::Tensor endModule(int m, torch::Tensor out) override {
    return policy_->fetchPoint() == FetchPoint::Module ? afterPoint(m, std::move(out)) : out;
  }

  torch::Tensor runBlock(int block, torch::Tensor x, const std::function<torch::Tensor(torch::Tensor)>& body) override {
    const bool blockPoint = policy_->fetchPoint() == FetchPoint::Block;
    const std::string label = "forward " + blockName(block);
    if (blockPoint) {
      noteBackward(label);
      closeBackwardSegment();
      policy_->beforeForward(block);
    }
    noteBackward(label);
    torch::Tensor y;
    if (cfg_.activationCheckpointing && block >= 1 && block <= layout_.config.layers && torch::GradMode::is_enabled()) {
      bodies_[block] = [this, body, block](torch::Tensor in) {
        auto r = recomputeSpan(block, body, in, [this, block] {
          recompute_ = true;
          policy_->beforeRecompute(block);
        });
        recompute_ = false;
        return r;
      };
      y = checkpointedBlock(x, &bodies_[block]);
    } else {
      y = body(x);
    }
    if (block == 1) observedActivationBytes_ = y.element_size();
    closeBackwardSegment();
    return blockPoint ? afterPoint(block, std::move(y)) : y;
  }

  void onPreBackward(int point) override {
    const std::string label =
        "backward " +
        (policy_->fetchPoint() == FetchPoint::Block ? blockName(point) : layout_.modules[static_cast<std::size_t>(point)].name);
    noteBackward(label);
    const int unit = policy_->unitAt(point);
    // A unit without gradients (LoRA's frozen embedding, head, projections) gets no reduction to
    // release it after its backward: that backward is over when the next point's begins (autograd
    // runs the later-created nodes first, so no node of it is still pending).
    if (frozenInBackward_ >= 0 && frozenInBackward_ != unit) {
      closeBackwardSegment();
      policy_->backwardDone(frozenInBackward_);
      noteBackward(label);
      frozenInBackward_ = -1;
    }
    if (unit < 0) return;
    closeBackwardSegment();
    policy_->beforeBackward(point);
    noteBackward(label);
    if (units_[static_cast<std::size_t>(unit)].padded == 0) frozenInBackward_ = unit;
  }

  void onGrad(int u, const torch::Tensor& grad) override {
    const std::string label = segLabel_;
    closeBackwardSegment();
    policy_->reduceGradient(u, grad.reshape({units_[static_cast<std::size_t>(u)].padded}));
    noteBackward(label);
  }

 private:
  struct Unit {
    std::string name;
    std::vector<int> params;  // the trainable ones: full, shard, gradients and optimizer below
    std::int64_t numel = 0, padded = 0;
    bool persistent = false;
    // LoRA's frozen base in this unit: sharded and gathered like the rest, in the compute dtype,
    // with no gradient and no optimizer state (empty without LoRA).
    std::vector<int> frozen;
    std::int64_t fnumel = 0, fpadded = 0;
    torch::Tensor ffull, fshard, fagBuf;
    CommHandle fag;
    std::vector<torch::Tensor> fviews;
    torch::Tensor full;   // leaf [padded]; storage present only while gathered
    torch::Tensor shard;  // this rank's [padded / S] (the optimizer's parameter)
    torch::Tensor gradShard;
    FlatOptState opt;
    State state = State::Released;
    CommHandle ag;
    torch::Tensor agBuf;
    torch::Tensor tapped;
    std::vector<torch::Tensor> views;  // the parameters, cut from `tapped` by one split
    bool gradFresh = false;            // gradShard holds nothing of this step yet
  };
  struct Flight {
    int unit = -1;
    torch::Tensor out;
    CommHandle h;
    bool replicaStage = false;
    std::vector<std::pair<int, std::int64_t>> pieces;  // a bucket: (unit, offset in out)
  };

  // After a fetch point's forward: the policy releases; a PreBackward tap where backward fetches.
  torch::Tensor afterPoint(int point, torch::Tensor out) {
    policy_->afterForward(point);
    if (torch::GradMode::is_enabled() && policy_->unitAt(point) >= 0)
      out = PreBackward::apply(out, reinterpret_cast<std::int64_t>(static_cast<Engine*>(this)), point);
    return out;
  }

  // FetchUnits: what the policy drives.
  int addUnit(const std::string& name, const std::vector<int>& params, bool persistent) override {
    const auto S = static_cast<std::int64_t>(shard_->size());
    const auto r = static_cast<std::int64_t>(shard_->rank());
    Unit u;
    u.name = name;
    u.persistent = persistent;
    const int ui = static_cast<int>(units_.size());
    for (const int p : params) {
      const bool trainable = layout_.params[static_cast<std::size_t>(p)].trainable;
      auto& list = trainable ? u.params : u.frozen;
      std::int64_t& n = trainable ? u.numel : u.fnumel;
      unitOf_[static_cast<std::size_t>(p)] = ui;
      indexIn_[static_cast<std::size_t>(p)] = static_cast<int>(list.size());
      offsetIn_[static_cast<std::size_t>(p)] = n;
      list.push_back(p);
      n += layout_.params[static_cast<std::size_t>(p)].numel;
    }
    u.padded = u.numel > 0 ? roundUp(u.numel, S) : 0;
    u.fpadded = u.fnumel > 0 ? roundUp(u.fnumel, S) : 0;
    auto opts = torch::TensorOptions().dtype(torch::kFloat32).device(ctx_.device);
    if (u.fpadded > 0) {
      torch::Tensor ffull;
      {
        MemScope ms(MemCategory::Other);  // initialisation scratch
        ffull = torch::zeros({u.fpadded}, opts.dtype(computeDtype_));
        for (int p : u.frozen)
          initParam(layout_, p, ctx_.seed,
                    ffull.narrow(0, offsetIn_[static_cast<std::size_t>(p)], layout_.params[static_cast<std::size_t>(p)].numel));
      }
      MemScope ms(MemCategory::Parameters);
      if (persistent) {
        // Kept whole and never updated: the shard is a view of it (no second copy).
        u.ffull = ffull.clone();
        u.fshard = u.ffull.narrow(0, r * (u.fpadded / S), u.fpadded / S);
      } else {
        u.fshard = ffull.narrow(0, r * (u.fpadded / S), u.fpadded / S).clone();
        u.ffull = torch::empty({u.fpadded}, ffull.options());
        freeStorage(u.ffull);
      }
    }
    torch::Tensor full;
    {
      MemScope ms(MemCategory::Other);  // initialisation scratch
      full = torch::zeros({u.padded}, opts);
      for (int p : u.params)
        initParam(layout_, p, ctx_.seed,
                  full.narrow(0, offsetIn_[static_cast<std::size_t>(p)], layout_.params[static_cast<std::size_t>(p)].numel));
    }
    {
      MemScope ms(MemCategory::Parameters);
      u.shard = full.narrow(0, r * (u.padded / S), u.padded / S).clone();
      if (persistent) {
        u.full = full.clone().requires_grad_(true);
        u.state = State::Available;
      } else {
        u.full = torch::empty({u.padded}, opts).requires_grad_(true);
        freeStorage(u.full);
      }
    }
    {
      MemScope ms(MemCategory::Gradients);
      u.gradShard = torch::zeros({u.padded / S}, opts);
    }
    units_.push_back(std::move(u));
    return ui;
  }

  int unitCount() const override { return static_cast<int>(units_.size()); }
  const std::string& unitName(int u) const override { return units_[static_cast<std::size_t>(u)].name; }
  State state(int u) const override { return units_[static_cast<std::size_t>(u)].state; }
  std::int64_t numel(int u) const override {
    return units_[static_cast<std::size_t>(u)].numel + units_[static_cast<std::size_t>(u)].fnumel;
  }
  std::int64_t padded(int u) const override {
    return units_[static_cast<std::size_t>(u)].padded + units_[static_cast<std::size_t>(u)].fpadded;
  }
  std::int64_t gradPadded(int u) const override { return units_[static_cast<std::size_t>(u)].padded; }
  bool persistent(int u) const override { return units_[static_cast<std::size_t>(u)].persistent; }
  std::int64_t gatheredElements() const override { return availableElems_; }
  int shardGroupSize() const override { return shard_->size(); }
  bool inBackward() const override { return inBackward_; }
  bool recomputing() const override { return recompute_; }

  void gather(int ui) override {
    auto& u = units_[static_cast<std::size_t>(ui)];
    if (u.state != State::Released) return;
    policy_->beforeGather();
    {
      MemScope ms(MemCategory::GatheredParameters);
      if (u.padded > 0) u.agBuf = torch::empty({u.padded}, u.shard.options());
      if (u.fpadded > 0) u.fagBuf = torch::empty({u.fpadded}, u.fshard.options());
    }
    if (u.fpadded > 0) u.fag = shard_->allGather(u.fagBuf, u.fshard, info("param " + u.name + " (frozen)"));
    if (u.padded > 0) u.ag = shard_->allGather(u.agBuf, u.shard, info("param " + u.name));
    u.state = State::InFlight;
    availableElems_ += u.padded + u.fpadded;
  }

  void ensure(int ui) override {
    auto& u = units_[static_cast<std::size_t>(ui)];
    if (u.state == State::Available) return;
    if (u.state == State::Released) gather(ui);
    const std::string label = segLabel_;
    closeBackwardSegment();
    if (u.fpadded > 0) u.fag.wait();
    if (u.padded > 0) u.ag.wait();
    if (!label.empty()) noteBackward(label);
    if (u.padded > 0) adoptStorage(u.full, u.agBuf);
    if (u.fpadded > 0) adoptStorage(u.ffull, u.fagBuf);
    u.agBuf = torch::Tensor();
    u.fagBuf = torch::Tensor();
    u.ag = CommHandle();
    u.fag = CommHandle();
    u.state = State::Available;
  }

  void release(int ui) override {
    auto& u = units_[static_cast<std::size_t>(ui)];
    if (u.persistent || u.state == State::Released) return;
    if (u.state == State::InFlight) ensure(ui);
    untap(ui);
    if (u.padded > 0) freeStorage(u.full);
    if (u.fpadded > 0) freeStorage(u.ffull);
    u.state = State::Released;
    availableElems_ -= u.padded + u.fpadded;
  }

  // Forgets the unit's autograd entry point (the next use taps the flat tensor afresh).
  void untap(int ui) override {
    auto& u = units_[static_cast<std::size_t>(ui)];
    u.tapped = torch::Tensor();
    u.views.clear();
    u.fviews.clear();
  }

  void reduceScatterGradient(const torch::Tensor& in, std::int64_t outNumel, int unit,
                             std::vector<std::pair<int, std::int64_t>> pieces, const std::string& label) override {
    Flight f;
    {
      MemScope ms(MemCategory::CommBuffers);
      f.out = torch::empty({outNumel}, in.options());
    }
    f.unit = unit;
    f.pieces = std::move(pieces);
    f.h = shard_->reduceScatter(f.out, in.contiguous(), gradInfo(label));
    flights_.push_back(std::move(f));
  }

  // Completes finished reductions (all of them but `keep` when `block`), accumulating into the
  // gradient shards; HSDP then all-reduces each shard across the replicas.
  void completeReductions(bool block, std::size_t keep = 0) override {
    torch::NoGradGuard ng;
    while (!flights_.empty()) {
      if (!block && !flights_.front().h.done()) return;
      if (block && flights_.size() <= keep) return;
      Flight f = std::move(flights_.front());
      flights_.pop_front();
      f.h.wait();
      if (replica_ && !f.replicaStage) {
        f.replicaStage = true;
        f.h = replica_->allReduce(f.out, gradInfo("grad replicas " + (f.unit >= 0 ? units_[static_cast<std::size_t>(f.unit)].name
                                                                                  : std::string("bucket"))));
        flights_.push_front(std::move(f));
        if (!block) return;
        continue;
      }
      if (f.pieces.empty()) {
        accumulate(units_[static_cast<std::size_t>(f.unit)], f.out);
      } else {
        for (const auto& [ui, off] : f.pieces) {
          auto& u = units_[static_cast<std::size_t>(ui)];
          accumulate(u, f.out.narrow(0, off, u.gradShard.numel()));
        }
      }
    }
  }

  // The first reduced gradient of a step is copied into the shard, later ones (gradient
  // accumulation, a unit reduced in pieces) are added: no zero-fill and add pass per step.
  static void accumulate(Unit& u, const torch::Tensor& part) {
    if (u.gradFresh) {
      u.gradShard.copy_(part);
      u.gradFresh = false;
    } else {
      u.gradShard.add_(part);
    }
  }

  void beginStep(std::int64_t, int micro, int) override {
    if (micro == 0)
      for (auto& u : units_) u.gradFresh = true;
    policy_->beginMicroBatch();
  }

  void finishBackward(int, int) override {
    frozenInBackward_ = -1;  // everything is released below
    policy_->flushGradients();
    completeReductions(true);
    for (auto& u : units_)  // a unit that received no gradient in this micro-batch
      if (u.gradFresh) {
        u.gradShard.zero_();
        u.gradFresh = false;
      }
    // Whatever is still gathered is released at the end of the pass (SHARD_GRAD_OP kept it all).
    for (int k = 0; k < unitCount(); ++k) release(k);
    policy_->endBackward();
  }

  double optimizerStep(std::int64_t) override {
    torch::NoGradGuard ng;
    const double W = world_.size();
    double norm = 0, coef = 1.0;
    {
      std::vector<torch::Tensor> grads;
      for (auto& u : units_)
        if (u.padded > 0) grads.push_back(u.gradShard);
      // The overflow flag over the world: HSDP's replicas hold the same shards, the flag is the same.
      if (!unscaleGradients(grads, world_)) return 0;  // fp16 overflow: every rank skips the step
    }
    for (auto& u : units_)
      if (u.padded > 0) u.gradShard.div_(W);
    if (cfg_.gradClip > 0) {
      auto sq = torch::zeros({1}, torch::TensorOptions().dtype(torch::kFloat32).device(ctx_.device));
      for (auto& u : units_)
        if (u.padded > 0) sq += u.gradShard.pow(2).sum();
      waitOutsideCompute(shard_->allReduce(sq, info("grad norm")));
      norm = std::sqrt(sq.item<double>());
      if (norm > cfg_.gradClip) coef = cfg_.gradClip / (norm + 1e-6);
    }
    for (auto& u : units_)
      if (u.padded > 0) applyOptimizer(u.shard, u.gradShard, u.opt, coef);
    // Persistent parameters are whole on every rank: gather their updated shards (a frozen part
    // never changes).
    for (auto& u : units_) {
      if (!u.persistent || u.padded == 0) continue;
      torch::Tensor out;
      {
        MemScope ms(MemCategory::CommBuffers);
        out = torch::empty({u.padded}, u.shard.options());
      }
      waitOutsideCompute(shard_->allGather(out, u.shard, info("param " + u.name)));
      u.full.detach().copy_(out);
    }
    return norm;
  }

  void fillFullParameters(std::vector<torch::Tensor>& out) override {
    torch::NoGradGuard ng;
    for (const auto& u : units_) {
      for (const bool frozen : {false, true}) {
        const std::int64_t padded = frozen ? u.fpadded : u.padded;
        if (padded == 0) continue;
        const torch::Tensor& shard = frozen ? u.fshard : u.shard;
        auto full = torch::empty({padded}, shard.options());
        shard_->allGather(full, shard, info("consolidate " + u.name + (frozen ? " (frozen)" : ""))).wait();
        for (int p : frozen ? u.frozen : u.params) {
          const auto& info = layout_.params[static_cast<std::size_t>(p)];
          out[static_cast<std::size_t>(p)] =
              full.narrow(0, offsetIn_[static_cast<std::size_t>(p)], info.numel).view(info.shape).clone();
        }
      }
    }
  }

  ModelStateBytes stateBytes() const override {
    ModelStateBytes b;
    for (const auto& u : units_) {
      b.parameters += bytesOf(u.shard) + (u.persistent ? bytesOf(u.full) : 0);
      b.parameters += u.persistent ? bytesOf(u.ffull) : bytesOf(u.fshard);  // a persistent shard is a view of ffull
      b.gradients += bytesOf(u.gradShard);
      b.optimizer += bytesOf(u.opt.m) + bytesOf(u.opt.v);
    }
    b.buffers += policy_->bufferBytes();
    return b;
  }

  std::vector<std::pair<std::string, torch::Tensor>> shardTensors() override {
    std::vector<std::pair<std::string, torch::Tensor>> out;
    if (replica_ && replica_->rank() != 0) return out;  // one replica saves
    for (const auto& u : units_) {
      if (u.fpadded > 0) out.push_back({u.name + ".frozen", u.fshard});
      if (u.padded == 0) continue;
      out.push_back({u.name + ".param", u.shard});
      if (u.opt.m.defined()) out.push_back({u.name + ".exp_avg", u.opt.m});
      if (u.opt.v.defined()) out.push_back({u.name + ".exp_avg_sq", u.opt.v});
    }
    return out;
  }

  std::unique_ptr<ParamFetchPolicy> policy_;
  runtime::Group* shard_ = nullptr;
  runtime::Group* replica_ = nullptr;
  std::vector<Unit> units_;
  std::vector<int> unitOf_;             // a parameter's unit
  std::vector<std::int64_t> offsetIn_;  // its offset in the unit's flat tensor
  std::vector<int> indexIn_;            // its position in the unit's split
  std::map<int, BlockBody> bodies_;
  std::deque<Flight> flights_;
  std::int64_t availableElems_ = 0;
  bool recompute_ = false;
  int frozenInBackward_ = -1;  // a unit without gradients whose backward is running
};

std::unique_ptr<Engine> Engine::create(const EngineContext& ctx) {
  switch (ctx.cfg->strategy) {
    case Strategy::Ddp:
    case Strategy::Zero1:
    case Strategy::Zero2:
      return std::make_unique<ReplicatedEngine>(ctx);
    case Strategy::Zero3:
    case Strategy::FsdpFull:
    case Strategy::FsdpGradOp:
    case Strategy::Hsdp:
      return std::make_unique<ShardedEngine>(ctx);
    case Strategy::ZeroPPHpz:
      break;  // estimator and simulator only: RunConfig refuses it
  }
  throw core::Error("unknown strategy");
}

}  // namespace shardscope::runtime
