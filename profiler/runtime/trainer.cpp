#include "profiler/runtime/trainer.h"

#include <numeric>
#include <unistd.h>

#include <csignal>
#include <thread>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <map>
#include <sstream>

#include <torch/torch.h>
#include <torch/version.h>

#include "core/analysis/step_breakdown.h"
#include "core/launch/cluster_env.h"
#include "core/storage/run_writer.h"
#include "core/storage/trace_store.h"
#include "core/util/error.h"
#include "core/util/json.h"
#include "profiler/capture/memory_tracker.h"
#include "profiler/capture/recorder.h"
#ifdef SHARDSCOPE_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif
#ifdef SHARDSCOPE_WITH_CUPTI
#include "profiler/cupti/cupti_tracer.h"
#include "profiler/gpu/gpu_capture.h"
#endif
#include "profiler/runtime/comm.h"
#include "profiler/runtime/checkpoint_probe.h"
#include "profiler/runtime/link_probe.h"
#include "profiler/runtime/engine.h"
#include "profiler/runtime/model.h"

namespace shardscope::runtime {

namespace {
#ifdef SHARDSCOPE_WITH_CUDA
// The CUDA caching allocator's figures for a device (StatType 0 = AGGREGATE): what PyTorch's
// torch.cuda.memory_allocated / memory_reserved / max_memory_* report.
struct CudaMemory {
  std::int64_t allocated = 0, reserved = 0, peakAllocated = 0, peakReserved = 0;
};
CudaMemory cudaMemory(int device) {
  const auto s = c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(device));
  return {s.allocated_bytes[0].current, s.reserved_bytes[0].current, s.allocated_bytes[0].peak, s.reserved_bytes[0].peak};
}
#endif
}  // namespace

using capture::nowNs;

namespace {

std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::string hostName() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

}  // namespace

void TokenSource::fill(std::int64_t step, std::int64_t firstRow, std::int64_t rows, std::vector<std::int64_t>& tokens,
                       std::vector<std::int64_t>& targets) const {
  tokens.resize(static_cast<std::size_t>(rows * seq));
  targets.resize(static_cast<std::size_t>(rows * seq));
  for (std::int64_t r = 0; r < rows; ++r) {
    std::uint64_t h = mix(seed ^ mix(static_cast<std::uint64_t>(step) * 1000003ULL + static_cast<std::uint64_t>(firstRow + r)));
    auto next = [&h] { return h = mix(h); };
    std::int64_t* tok = tokens.data() + r * seq;
    std::int64_t* tgt = targets.data() + r * seq;
    if (!text.empty()) {
      const auto span = static_cast<std::uint64_t>(text.size() - static_cast<std::size_t>(seq) - 1);
      const std::size_t off = static_cast<std::size_t>(next() % (span + 1));
      for (std::int64_t i = 0; i < seq; ++i) {
        tok[i] = static_cast<unsigned char>(text[off + static_cast<std::size_t>(i)]);
        tgt[i] = static_cast<unsigned char>(text[off + static_cast<std::size_t>(i) + 1]);
      }
      continue;
    }
    // A learnable sequence: mostly an affine recurrence, with 10% random tokens.
    std::int64_t t = static_cast<std::int64_t>(next() % static_cast<std::uint64_t>(vocab));
    for (std::int64_t i = 0; i <= seq; ++i) {
      if (i < seq) tok[i] = t;
      if (i > 0) tgt[i - 1] = t;
      t = (next() % 10 == 0) ? static_cast<std::int64_t>(next() % static_cast<std::uint64_t>(vocab)) : (t * 5 + 3) % vocab;
    }
  }
}

namespace {

// One rank's life in phases; runRank() calls them in order. What a phase makes, the later ones use.
// Members are declared so that they are destroyed as the single function's locals were: the GPU
// capture, the engine, the model, then the communicator (its threads stop), the recorder last.
class RankLife {
 public:
  RankLife(const core::RunConfig& cfg, const WorkerOptions& opts) : cfg_(cfg), opts_(opts), runId_(opts.runId) {}

  int rank() const { return rank_; }

  // Setup: the environment (torchrun/srun decide the world), the device, the backend, the
  // process group (rendezvous), the counting allocator.
  void setUp() {
    env_ = core::clusterEnvFromProcess();
    rank_ = env_.rank;
    if (env_.worldSize != cfg_.worldSize) cfg_.worldSize = env_.worldSize;
    core::validate(cfg_);
    torch::manual_seed(static_cast<std::uint64_t>(cfg_.seed));
    cuda_ = cfg_.device == core::ComputeDevice::Cuda || (cfg_.device == core::ComputeDevice::Auto && torch::cuda::is_available());
    if (cuda_ && !torch::cuda::is_available()) throw core::Error("--device cuda: no CUDA device is visible to this worker");
    device_ = cuda_
                  ? torch::Device(torch::kCUDA, env_.localRank % std::max<int>(1, static_cast<int>(torch::cuda::device_count())))
                  : torch::Device(torch::kCPU);
    // One GPU, several ranks: NCCL refuses two ranks on one device, so "auto" falls back to Gloo over
    // CUDA tensors (every strategy still runs and is captured; the run's metadata says so).
    const int visibleGpus = cuda_ ? static_cast<int>(torch::cuda::device_count()) : 0;
    sharedDevice_ = cuda_ && env_.localWorldSize > visibleGpus;
    backend_ = cfg_.backend == core::CommBackend::Auto ? (cuda_ && !sharedDevice_ ? "nccl" : "gloo")
                                                       : std::string(core::toString(cfg_.backend));
    if (backend_ == "nccl" && sharedDevice_)
      throw core::Error("--backend nccl: " + std::to_string(env_.localWorldSize) + " ranks on this node share " +
                        std::to_string(visibleGpus) +
                        " GPU(s), and NCCL refuses two ranks on one device; use --backend gloo "
                        "(or auto) or one rank per GPU");
    if (!cuda_) {
      // Ranks share the machine's cores: OMP_NUM_THREADS (set by our launcher and by torchrun) says
      // how many threads this rank's intra-op work may use.
      const char* omp = std::getenv("OMP_NUM_THREADS");
      torch::set_num_threads(omp && std::atoi(omp) > 0 ? std::atoi(omp) : 1);
    }
    if (!cuda_ && (cfg_.offloadOptimizer != core::Offload::None || cfg_.offloadParam != core::Offload::None) && env_.rank == 0)
      std::fprintf(stderr,
                   "shardscope-worker: warning: offload_optimizer/offload_param move state to host memory; "
                   "on a CPU run everything already lives there, so they change nothing\n");
    tracker_ = &capture::MemoryTracker::install();
    tracker_->setGranularity(16 * 1024);
    comm_ = std::make_unique<Communicator>(env_, backend_, device_, cfg_.hangTimeoutS, nullptr);
  }

  // Record: the job (its id from rank 0's token, shared through the rendezvous store), the run row
  // (each node's local rank 0 creates its node's run in its node's database unless the launcher did,
  // and shares its id through the store), this rank's recorder with its compute lane, the
  // communicator's lanes, the allocator's records.
  void startRecording() {
    job_.launcher = env_.launcher;
    job_.schedulerId = core::schedulerPartOfJobId(env_.schedulerId, env_.masterAddr, env_.masterPort);
    job_.nnodes = env_.nnodes;
    job_.nodeRank = env_.nodeRank;
    job_.firstRank = env_.rank - env_.localRank;
    job_.ranksOnNode = env_.localWorldSize;
    job_.host = hostName();
    job_.master = env_.masterAddr + ":" + std::to_string(env_.masterPort);
    std::string token;
    if (env_.rank == 0) {
      token = core::newJobToken();
      comm_->storeSet("shardscope/job_token", token);
    } else {
      token = comm_->storeGet("shardscope/job_token");
    }
    job_.id = job_.schedulerId + "/" + token;
    dbPath_ = opts_.runId || opts_.sameDatabase ? opts_.dbPath : core::nodeDatabasePath(opts_.dbPath, env_.nodeRank, env_.nnodes);
    const std::string runKey = "shardscope/run_id/node" + std::to_string(env_.nodeRank);
    if (!runId_) {
      if (env_.localRank == 0) {
        core::TraceStore store(dbPath_);
        core::Run run;
        run.name = opts_.runName.empty() ? std::string(core::toString(cfg_.strategy)) + " " + cfg_.model : opts_.runName;
        run.source = core::RunSource::Runtime;
        run.strategy = std::string(core::toString(cfg_.strategy));
        run.configJson = core::toJson(cfg_).dump();
        run.worldSize = cfg_.worldSize;
        run.status = core::RunStatus::Running;
        core::JsonValue meta = core::JsonValue::object();
        meta.set("launcher", core::JsonValue::string(env_.launcher));
        meta.set("nnodes", core::JsonValue::number(static_cast<std::int64_t>(env_.nnodes)));
        meta.set("job", job_.toJson());
        run.metadataJson = meta.dump();
        runId_ = core::createRunRow(store, run);
        comm_->storeSet(runKey, std::to_string(runId_.value()));
      } else {
        runId_ = core::RunId{std::stoll(comm_->storeGet(runKey))};
      }
    } else if (env_.localRank == 0) {
      core::TraceStore store(dbPath_);
      core::setRunJob(store, runId_, job_);
    }
    capture::Recorder::Options ro;
    ro.dbPath = dbPath_;
    ro.runId = runId_;
    ro.rank = env_.rank;
    ro.host = hostName();
    ro.device = deviceName();
    ro.flushIntervalS = cfg_.flushIntervalS;
    ro.enabled = cfg_.capture;
    rec_ = std::make_unique<capture::Recorder>(ro);
    computeLane_ = rec_->lane("compute (main thread)", core::TrackKind::CpuThread, 0);
    comm_->setComputeLane(computeLane_);
    comm_->start(rec_.get());
    if (cfg_.capture) tracker_->setRecorder(rec_.get(), 0, 0);
  }

  // Build: the model, the strategy engine (parameters, gradients, optimizer state), the gradient
  // reduction dtype; every rank ready (barrier) ends the initialisation time.
  void build() {
    modelConfig_ = modelPreset(cfg_.model, cfg_.layers);
    if (cfg_.loraRank > 0) {
      modelConfig_.loraRank = cfg_.loraRank;
      modelConfig_.loraAlpha = cfg_.loraAlpha;
      modelConfig_.loraTargets = core::loraTargetList(cfg_.loraTargets);
    }
    if (cfg_.precision == core::Precision::Fp16) requireFp16Kernels();
    model_ = std::make_unique<Transformer>(buildLayout(modelConfig_), device_, computeDtype());
    try {
      model_->setSdpa(cfg_.attention == core::AttentionKernel::Sdpa ||
                      (cfg_.attention == core::AttentionKernel::Auto && haveSdpa()));
    } catch (const std::invalid_argument& e) {
      throw core::Error(e.what());
    }
    EngineContext ectx;
    ectx.cfg = &cfg_;
    ectx.model = model_.get();
    ectx.comm = comm_.get();
    ectx.recorder = cfg_.capture ? rec_.get() : nullptr;
    ectx.computeLane = computeLane_;
    ectx.device = device_;
    ectx.seed = cfg_.seed;
    bf16Reduce_ = decideBf16Reduce();
    ectx.bf16Reduce = bf16Reduce_;
    engine_ = Engine::create(ectx);
    comm_->world().barrier();
    initS_ = static_cast<double>(nowNs() - opts_.processStartNs) / 1e9;
    rec_->rankMetadata(rankMetadata());
  }

  // Probe: the link timed at the sizes this run can send (link_probe.h), after the initialisation
  // time is taken and before the first step, so neither includes it.
  // The probes' buffers are not the run's: while they run the allocator records nothing, and
  // afterwards the peaks are what they were before (host tracker; on a GPU the caching allocator's
  // peak statistics, and its cache is emptied so the reserved memory is the run's own).
  void probe() {
    if (!cfg_.linkProbe) return;
    const capture::MemSnapshot before = tracker_->peak();
    if (cfg_.capture) tracker_->setRecorder(nullptr);
    probeLink();
    probeCompute();
    probeCheckpointing();
    tracker_->restorePeak(before);
    if (cfg_.capture) tracker_->setRecorder(rec_.get(), 0, 0);
#ifdef SHARDSCOPE_WITH_CUDA
    if (cuda_) {
      c10::cuda::CUDACachingAllocator::emptyCache();
      c10::cuda::CUDACachingAllocator::resetPeakStats(device_.index());
    }
#endif
  }

  void probeLink() {
    if (cfg_.worldSize < 2) return;
    // The largest message a strategy of this model can send: the whole fp32 gradient (ZeRO-2 with
    // a bucket larger than the model reduces it in one go; every other message is smaller).
    const std::int64_t maxBytes = std::clamp<std::int64_t>(model_->layout().totalNumel * 4, 64 * 1024, std::int64_t{1} << 30);
    const LinkProbePlan plan = planLinkProbe(maxBytes, comm_->world().size());
    const double s = runLinkProbe(comm_->world(), plan, device_, bf16Reduce_);
    rec_->metric("link_probe_s", s);
    probeLoadedGathers();
  }

  // The loaded probe (link_probe.h): the all-gathers a ZeRO-3 rank waits on at once, one per
  // module of a layer (its trainable fp32 parameters, padded to the world size: the unit
  // fetch_policy.cpp gathers, persistence threshold 0), each with the module's product right
  // after, so that a prediction turning prefetch off knows what such a gather costs here whatever
  // strategy this run uses. On CPU ranks only: the tail it measures is the cores' (a rank's compute
  // holding the core its peer's communication thread needs); GPU ranks compute on the device.
  void probeLoadedGathers() {
    if (cuda_) return;
    const auto& layout = model_->layout();
    const auto w = static_cast<std::int64_t>(comm_->world().size());
    std::map<std::int64_t, LoadedProbeSize> sizes;  // by gathered bytes: one per size
    for (const auto& m : layout.modules) {
      if (m.block != 1) continue;
      std::int64_t numel = 0;
      for (int p : m.params)
        if (layout.params[static_cast<std::size_t>(p)].trainable) numel += layout.params[static_cast<std::size_t>(p)].numel;
      if (numel <= 0) continue;
      LoadedProbeSize s;
      s.gatheredBytes = (numel + w - 1) / w * w * 4;
      // The module's product: a projection's weight is [out, in]; a norm's [h] scales its input.
      const auto& shape = layout.params[static_cast<std::size_t>(m.weight >= 0 ? m.weight : m.params.front())].shape;
      s.in = shape.size() == 2 ? shape[1] : shape.empty() ? 1 : shape[0];
      s.out = shape.size() == 2 ? shape[0] : 1;
      s.rounds = loadedProbeRounds(2.0 * static_cast<double>(cfg_.microBatch) * static_cast<double>(cfg_.seqLen) *
                                   static_cast<double>(s.in) * static_cast<double>(s.out));
      sizes.emplace(s.gatheredBytes, s);
    }
    if (sizes.empty()) return;
    std::vector<LoadedProbeSize> plan;
    for (const auto& [bytes, s] : sizes) plan.push_back(s);
    const double s = runLoadedGatherProbe(comm_->world(), plan, device_, computeDtype(),
                                          static_cast<std::int64_t>(cfg_.microBatch) * cfg_.seqLen);
    rec_->metric("loaded_probe_s", s);
  }

  // The compute probe (link_probe.h): GEMM rates up to twice the model's widest product (at least
  // 1024, at most 4096), so that a prediction for a larger model knows how much faster its products run.
  void probeCompute() {
    const std::int64_t widest = std::max(modelConfig_.hidden, modelConfig_.ffn);
    const std::int64_t maxDim = std::clamp<std::int64_t>(2 * widest, 1024, 4096);
    const torch::Dtype dtype = computeDtype();
    const auto t0 = std::chrono::steady_clock::now();
    const ComputeProbe p = runComputeProbe(device_, dtype, static_cast<std::int64_t>(cfg_.microBatch) * cfg_.seqLen, maxDim);
    for (const auto& [d, gflops] : p.forward) rec_->metric("gemm_probe_gflops/" + std::to_string(d), gflops);
    for (const auto& [d, gflops] : p.weight) rec_->metric("gemm_probe_weight_gflops/" + std::to_string(d), gflops);
    rec_->metric("compute_probe_s", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }

  // The checkpointing probe (checkpoint_probe.h): what activation checkpointing costs a block of
  // this model here, measured whether this run checkpoints or not, so that a prediction turning it
  // on or off does not take another machine's shares.
  // A probe that fails costs the run nothing but the measurement: predictions then use the constants.
  void probeCheckpointing() {
    CheckpointProbe p;
    try {
      p = runCheckpointProbe(modelConfig_, device_, computeDtype(), model_->sdpa(), static_cast<std::int64_t>(cfg_.microBatch),
                             cfg_.seqLen, cfg_.seed);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "shardscope-worker: rank %d: checkpointing probe failed (%s); predictions use the constants\n",
                   env_.rank, e.what());
      return;
    }
    rec_->metric("ckpt_probe_s", p.seconds);
    if (!p.measured) return;
    rec_->metric("ckpt_probe_forward_share", p.forwardShare);
    rec_->metric("ckpt_probe_recompute_share", p.recomputeShare);
    rec_->metric("ckpt_probe_plain_forward_s", p.plainForwardS);
  }

  // Train: the steps, each recorded (step window, loss, progress line), with the GPU timeline
  // captured around them where there is one.
  void train() {
    const TokenSource data = tokenSource();
    std::ofstream lossOut;
    if (!opts_.dumpLossesPath.empty())
      lossOut.open(cfg_.worldSize > 1 ? opts_.dumpLossesPath + ".rank" + std::to_string(env_.rank) : opts_.dumpLossesPath);
    volBefore_ = comm_->volume();
    const Fault fault = injectedFault();
    startGpuCapture();
    std::vector<std::int64_t> tok, tgt;
    for (int s = 1; s <= cfg_.steps; ++s) {
      if (s == fault.step) fault.strike(s);
      const std::vector<Batch> micro = microBatches(data, s, tok, tgt);
      const std::int64_t t0 = nowNs();
#ifdef SHARDSCOPE_WITH_CUPTI
      if (gpuCapture_) gpuCapture_->beginStep(s, t0);
#endif
      const StepStats st = engine_->trainStep(s, micro);
#ifdef SHARDSCOPE_WITH_CUDA
      // A step on a GPU ends when the device has finished it, not when the host has queued its last
      // kernel (the optimizer's): synchronise at the step boundary, as a synchronised PyTorch timing
      // loop does. The cost: the host cannot queue the next step while the device drains this one
      // (one launch latency per step); the run summary, the metrics and the step windows all agree.
      if (cuda_) torch::cuda::synchronize();
#endif
      const std::int64_t t1 = nowNs();
      rec_->step(s, t0, t1);
#ifdef SHARDSCOPE_WITH_CUDA
      if (cuda_) {  // the device's memory as the caching allocator sees it, once per step
        const CudaMemory m = cudaMemory(device_.index());
        rec_->memory(t1, 0, m.allocated, m.reserved, /*deviceType=*/1, device_.index());
      }
#endif
      const double ms = static_cast<double>(t1 - t0) / 1e6;
      stepMs_.push_back(ms);
      rec_->metric("loss/step/" + std::to_string(s), st.loss);
      if (cfg_.precision == core::Precision::Fp16) {
        rec_->metric("loss_scale/step/" + std::to_string(s), st.lossScale);
        rec_->metric("skipped/step/" + std::to_string(s), st.skipped ? 1.0 : 0.0);
        skippedSteps_ += st.skipped ? 1 : 0;
      }
      if (lossOut) lossOut << core::formatDouble(st.loss) << "\n";
      if (opts_.progressLines) {
        std::printf("@ss {\"rank\":%d,\"event\":\"step\",\"step\":%d,\"steps\":%d,\"loss\":%s,\"step_ms\":%.3f}\n", env_.rank, s,
                    cfg_.steps, core::formatDouble(st.loss).c_str(), ms);
        std::fflush(stdout);
      }
      // Under fp16 an overflowing step may have an infinite loss: it is skipped, and the scale drops.
      if (!std::isfinite(st.loss) && !st.skipped) throw core::Error("loss is not finite at step " + std::to_string(s));
    }
    stopGpuCapture();
  }

  // The rank's figures: communication volume per step, steady-state step time, peaks, model state.
  void recordFigures() {
    const Communicator::Volume vol = comm_->volume();
    double wire = 0;
    for (const auto& [op, b] : vol.messageBytes) {
      if (op == "barrier") continue;
      const double before = volBefore_.messageBytes.count(op) ? volBefore_.messageBytes.at(op) : 0.0;
      const double wb = vol.wireBytes.at(op) - (volBefore_.wireBytes.count(op) ? volBefore_.wireBytes.at(op) : 0.0);
      const auto cnt = vol.count.at(op) - (volBefore_.count.count(op) ? volBefore_.count.at(op) : 0);
      rec_->metric("comm.bytes_per_step." + op, (b - before) / cfg_.steps);
      rec_->metric("comm.count_per_step." + op, static_cast<double>(cnt) / cfg_.steps);
      wire += wb;
    }
    rec_->metric("comm.wire_bytes_per_step", wire / cfg_.steps);
    // Steady-state step time: the steps core's rule counts (core/analysis/step_breakdown.h: the
    // first step, with its lazy optimizer state and ZeRO-3 trace, is left out when later ones exist).
    std::vector<std::int64_t> stepNumbers(stepMs_.size());
    std::iota(stepNumbers.begin(), stepNumbers.end(), std::int64_t{0});
    const core::CountedSteps counted = core::countedStepNumbers(stepNumbers, core::RunSource::Runtime);
    double sum = 0;
    for (std::int64_t i = counted.first; i <= counted.last; ++i) sum += stepMs_[static_cast<std::size_t>(i)];
    meanMs_ = sum / static_cast<double>(counted.count);
    rec_->metric("step_time_ms", meanMs_);
    rec_->metric("init_time_s", initS_);
    const auto peak = tracker_->peak();
    rec_->metric("peak_allocated_bytes", static_cast<double>(peak.total));
#ifdef SHARDSCOPE_WITH_CUDA
    if (cuda_) {  // on a GPU the peak that matters is the device's (the tracker counts host memory)
      const CudaMemory m = cudaMemory(device_.index());
      rec_->metric("peak_allocated_bytes", static_cast<double>(m.peakAllocated));
      rec_->metric("peak_reserved_bytes", static_cast<double>(m.peakReserved));
      rec_->metric("peak_host_allocated_bytes", static_cast<double>(peak.total));
    }
#endif
    for (const core::MemoryCategory c : core::memoryCategories())
      rec_->metric(std::string("peak_breakdown.") + std::string(core::memoryCategoryKey(c)),
                   static_cast<double>(peak.byCategory[static_cast<std::size_t>(c)]));
    rec_->metric("compute.param_dtype_bytes", static_cast<double>(engine_->observedParamBytes()));
    rec_->metric("compute.activation_dtype_bytes", static_cast<double>(engine_->observedActivationBytes()));
    const ModelStateBytes msb = engine_->modelStateBytes();
    rec_->metric("model_state.parameters_bytes", static_cast<double>(msb.parameters));
    rec_->metric("model_state.gradients_bytes", static_cast<double>(msb.gradients));
    rec_->metric("model_state.optimizer_bytes", static_cast<double>(msb.optimizer));
    rec_->metric("model_state.buffers_bytes", static_cast<double>(msb.buffers));
  }

  // Checkpoint: each rank's shard (timed between barriers), the consolidated parameters when
  // asked, and the full parameters for --dump-params (the parity tests).
  void checkpoint() {
    if (cfg_.saveCheckpoint) {
      comm_->world().barrier();
      const std::int64_t c0 = nowNs();
      const std::int64_t bytes = engine_->saveShard(cfg_.checkpointDir);
      comm_->world().barrier();
      saveS_ = static_cast<double>(nowNs() - c0) / 1e9;
      rec_->metric("checkpoint_bytes", static_cast<double>(bytes));
      if (cfg_.consolidateCheckpoint) {
        const std::int64_t k0 = nowNs();
        const std::string path = cfg_.checkpointDir + "/consolidated.bin";
        if (!writeFullParameters(path)) throw core::Error("cannot write " + path + " (disk full?)");
        comm_->world().barrier();
        rec_->metric("checkpoint_consolidate_s", static_cast<double>(nowNs() - k0) / 1e9, env_.rank == 0);
      }
    }
    if (!opts_.dumpParamsPath.empty()) writeFullParameters(opts_.dumpParamsPath);
  }

  // Finish: the run's figures (rank 0), every rank's data committed, the run completed (when no
  // launcher does it), the "done" line.
  void finish() {
    if (env_.rank == 0) {
      const double tokensPerStep = static_cast<double>(cfg_.microBatch) * cfg_.seqLen * cfg_.gradAccum * cfg_.worldSize;
      rec_->metric("tokens_per_s", tokensPerStep / (meanMs_ / 1000.0), false);
      rec_->metric("step_time_ms", meanMs_, false);
      rec_->metric("init_time_s", initS_, false);
      if (saveS_ >= 0) rec_->metric("checkpoint_save_s", saveS_, false);
      rec_->metric("params", static_cast<double>(model_->layout().totalNumel), false);
      rec_->metric("trainable_params", static_cast<double>(model_->layout().trainableNumel), false);
      rec_->metric("frozen_params", static_cast<double>(model_->layout().totalNumel - model_->layout().trainableNumel), false);
      rec_->metric("skipped_steps", static_cast<double>(skippedSteps_), false);
    }
    tracker_->setRecorder(nullptr);
    rec_->close();
    comm_->world().barrier();                   // every rank's data is committed
    if (env_.localRank == 0 && !opts_.runId) {  // each node's leader completes its node's run
      core::TraceStore store(dbPath_);
      core::setRunOutcome(store, runId_, core::RunStatus::Completed);
    }
    if (opts_.progressLines) {
      std::printf("@ss {\"rank\":%d,\"event\":\"done\",\"run_id\":%lld,\"step_ms\":%.3f}\n", rank_,
                  static_cast<long long>(runId_.value()), meanMs_);
      std::fflush(stdout);
    }
  }

  // Failure (an exception from any phase): the reason on stderr, every event captured so far kept,
  // and, outside our launcher (nobody else records it), the run marked failed by the failing rank.
  void fail(const std::exception& e) {
    // Torn down first, as the stack unwound them before: the communicator's threads stop
    // recording before the recorder's last flush.
#ifdef SHARDSCOPE_WITH_CUPTI
    gpuCapture_.reset();
#endif
    engine_.reset();
    model_.reset();
    comm_.reset();
    std::string msg = e.what();
    if (auto nl = msg.find('\n'); nl != std::string::npos) msg = msg.substr(0, nl);
    std::fprintf(stderr, "shardscope-worker: rank %d: %s\n", rank_, msg.c_str());
    if (auto* t = capture::MemoryTracker::instance()) t->setRecorder(nullptr);
    if (rec_) {
      try {
        rec_->close();  // keep every event captured so far
      } catch (...) {
      }
    }
    if (!opts_.runId && runId_) {
      try {
        core::TraceStore store(dbPath_);
        core::setRunOutcome(store, runId_, core::RunStatus::Failed, "rank " + std::to_string(rank_) + ": " + msg);
      } catch (...) {
      }
    }
  }

 private:
  // Fault injection for the failure tests: SHARDSCOPE_FAULT="<rank>:<step>:crash|kill|hang".
  struct Fault {
    int step = -1;
    std::string kind;
    void strike(int s) const {
      if (kind == "crash") throw core::Error("injected fault (SHARDSCOPE_FAULT) at step " + std::to_string(s));
      if (kind == "kill") std::raise(SIGKILL);
      if (kind == "hang")
        for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    }
  };

  Fault injectedFault() const {
    Fault f;
    if (const char* v = std::getenv("SHARDSCOPE_FAULT"); v && *v) {
      int fr = -1, fs = -1;
      char kind[16] = {0};
      if (std::sscanf(v, "%d:%d:%15s", &fr, &fs, kind) == 3 && fr == env_.rank) {
        f.step = fs;
        f.kind = kind;
      }
    }
    return f;
  }

  std::string deviceName() const { return cuda_ ? "cuda:" + std::to_string(device_.index()) : "cpu"; }

  torch::Dtype computeDtype() const {
    return cfg_.precision == core::Precision::Bf16   ? torch::kBFloat16
           : cfg_.precision == core::Precision::Fp16 ? torch::kHalf
                                                     : torch::kFloat32;
  }

  // fp16 needs half-precision kernels on the device: a small forward and backward of what the model
  // runs (matrix product, softmax, the norm's reduction, embedding) tells. LibTorch 1.13 has none on
  // the CPU ("addmm_impl_cpu_" not implemented for 'Half'): refused there with the reason.
  void requireFp16Kernels() const {
    try {
      auto opts = torch::TensorOptions().dtype(torch::kHalf).device(device_);
      auto w = torch::ones({8, 8}, opts).requires_grad_(true);
      auto x = torch::embedding(torch::ones({4, 8}, opts),
                                torch::zeros({2}, torch::TensorOptions().dtype(torch::kLong).device(device_)));
      auto y = torch::softmax(torch::nn::functional::linear(x, w), -1);
      auto n = y * torch::rsqrt(y.pow(2).mean({-1}, true, torch::kFloat32) + 1e-5).to(torch::kHalf);
      n.to(torch::kFloat32).sum().backward();
    } catch (const std::exception& e) {
      std::string why = e.what();
      if (const auto nl = why.find('\n'); nl != std::string::npos) why.resize(nl);
      throw core::Error("--precision fp16: this LibTorch (" TORCH_VERSION ") has no fp16 kernels on " + deviceName() + " (" +
                        why + "); use --precision bf16 or fp32" + (cuda_ ? "" : ", or a CUDA device"));
    }
  }

  // Gradient reduction dtype: --reduce-dtype, or unset = the parameters' dtype (FSDP's
  // MixedPrecision rule). Gloo in older LibTorch cannot sum bf16 ("Invalid scalar type"): asked
  // once, with a one-element all-reduce every rank makes; an explicit bf16 is then refused, an
  // unset one falls back to fp32, and the rank metadata says which was used.
  bool decideBf16Reduce() {
    const bool wanted = cfg_.reduceDtype == core::ReduceDtype::Bf16 ||
                        (cfg_.reduceDtype == core::ReduceDtype::SameAsParams && cfg_.precision == core::Precision::Bf16);
    if (!wanted) return false;
    bool canSumBf16 = true;
    try {
      auto probe = torch::ones({1}, torch::TensorOptions().dtype(torch::kBFloat16).device(device_));
      CollectiveInfo pi;
      pi.label = "bf16 reduce probe";
      comm_->world().allReduce(probe, pi).wait();
    } catch (const std::exception&) {
      canSumBf16 = false;
    }
    if (!canSumBf16 && cfg_.reduceDtype == core::ReduceDtype::Bf16)
      throw core::Error("--reduce-dtype bf16: the " + backend_ +
                        " backend of this LibTorch (" TORCH_VERSION ") cannot sum bf16 tensors; use --reduce-dtype fp32");
    return canSumBf16;
  }

  std::string rankMetadata() const {
    std::ostringstream meta;
    meta << "{\"backend\":\"" << backend_ << "\",\"device\":\"" << deviceName() << "\",\"torch\":\"" << TORCH_VERSION
         << "\",\"engine\":\"" << engine_->describe() << "\",\"params\":" << model_->layout().totalNumel << ",\"attention\":\""
         << (model_->sdpa() ? "sdpa" : "eager") << "\",\"precision\":\"" << core::toString(cfg_.precision) << "\""
         << ",\"reduce_dtype\":\"" << (bf16Reduce_ ? "bf16" : "fp32") << "\""
         << ",\"step_timing\":\"" << (cuda_ ? "device-synchronised at the step boundary" : "host clock (CPU)") << "\""
         << ",\"local_rank\":" << env_.localRank << ",\"node_rank\":" << env_.nodeRank
         << ",\"ranks_on_host\":" << env_.localWorldSize << ",\"host_cpus\":" << std::thread::hardware_concurrency()
         << ",\"intra_op_threads\":" << torch::get_num_threads()
         << ",\"host_gpus\":" << (cuda_ ? static_cast<int>(torch::cuda::device_count()) : 0)
         << ",\"shared_device\":" << (sharedDevice_ ? "true" : "false") << ",\"gpu_trace\":\""
         << core::toString(cuda_ && cfg_.capture ? cfg_.gpuTrace : core::GpuTrace::Off) << "\""
         << ",\"collectives_on\":\"" << (cuda_ ? (backend_ == "gloo" ? "gloo over CUDA tensors" : "nccl") : "gloo (cpu)")
         << "\"}";
    return meta.str();
  }

  TokenSource tokenSource() const {
    TokenSource data;
    data.seed = cfg_.seed;
    data.vocab = modelConfig_.vocab;
    data.seq = cfg_.seqLen;
    if (!cfg_.dataFile.empty()) {
      std::ifstream in(cfg_.dataFile, std::ios::binary);
      if (!in) throw core::Error("--data-file " + cfg_.dataFile + ": cannot open");
      data.text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      if (data.text.size() < static_cast<std::size_t>(cfg_.seqLen) + 2)
        throw core::Error("--data-file " + cfg_.dataFile + ": shorter than one sequence (" + std::to_string(cfg_.seqLen + 1) +
                          " bytes)");
      if (modelConfig_.vocab < 256) throw core::Error("--data-file needs a model vocabulary of at least 256 (bytes)");
    }
    return data;
  }

  // This rank's micro-batches of step s: rank r holds rows [r·mb, (r+1)·mb) of micro-batch a.
  std::vector<Batch> microBatches(const TokenSource& data, int s, std::vector<std::int64_t>& tok,
                                  std::vector<std::int64_t>& tgt) const {
    const std::int64_t rowsPerRank = cfg_.microBatch;
    std::vector<Batch> micro;
    for (int a = 0; a < cfg_.gradAccum; ++a) {
      const std::int64_t first = (static_cast<std::int64_t>(a) * cfg_.worldSize + env_.rank) * rowsPerRank;
      data.fill(s, first, rowsPerRank, tok, tgt);
      Batch b;
      auto o = torch::TensorOptions().dtype(torch::kInt64);
      b.tokens = torch::from_blob(tok.data(), {rowsPerRank, cfg_.seqLen}, o).clone().to(device_);
      b.targets = torch::from_blob(tgt.data(), {rowsPerRank, cfg_.seqLen}, o).clone().to(device_);
      micro.push_back(std::move(b));
    }
    return micro;
  }

  // Every full parameter (float32, model order) into `path` on rank 0 (collective: every rank
  // gathers). Returns false when rank 0 could not write it.
  bool writeFullParameters(const std::string& path) {
    auto full = engine_->fullParameters();
    if (env_.rank != 0) return true;
    std::ofstream out(path, std::ios::binary);
    for (auto& t : full) {
      auto c = t.to(torch::kCPU).to(torch::kFloat32).contiguous();
      out.write(static_cast<const char*>(c.data_ptr()), static_cast<std::streamsize>(c.numel() * 4));
    }
    // Beside it, what the floats are: each parameter's name, element count and whether it trained.
    core::JsonValue params = core::JsonValue::array();
    for (const auto& info : model_->layout().params) {
      core::JsonValue o = core::JsonValue::object();
      o.set("name", core::JsonValue::string(info.name));
      o.set("numel", core::JsonValue::number(info.numel));
      o.set("trainable", core::JsonValue::boolean(info.trainable));
      params.push(std::move(o));
    }
    core::JsonValue manifest = core::JsonValue::object();
    manifest.set("params", std::move(params));
    std::ofstream json(path + ".json");
    json << manifest.dump() << "\n";
    return static_cast<bool>(out) && static_cast<bool>(json);
  }

  // The GPU timeline (kernels, memcpys, NCCL kernels, allocator segments) through CUPTI, into this
  // rank's lanes. CUPTI allows one activity subscriber per process: if another one (a Kineto
  // profiler, an NVTX injection) holds it, the run goes on without the GPU lanes.
  void startGpuCapture() {
#ifdef SHARDSCOPE_WITH_CUPTI
    if (cuda_ && cfg_.capture && cfg_.gpuTrace != core::GpuTrace::Off) {
      try {
        cupti::TracerOptions topts;
        topts.api = cfg_.gpuTrace == core::GpuTrace::Full      ? cupti::TracerOptions::ApiRecords::All
                    : cfg_.gpuTrace == core::GpuTrace::Kernels ? cupti::TracerOptions::ApiRecords::None
                                                               : cupti::TracerOptions::ApiRecords::Launches;
        cupti::CuptiTracer::instance().initialize(topts);
        gpuCapture_ = std::make_unique<gpu::GpuCapture>(*rec_);
        torch::cuda::synchronize();
        cupti::CuptiTracer::instance().start([g = gpuCapture_.get()](cupti::GpuActivity&& a) { g->onActivity(std::move(a)); });
      } catch (const std::exception& e) {
        gpuCapture_.reset();
        std::fprintf(stderr, "shardscope-worker: rank %d: warning: no GPU timeline: %s\n", env_.rank, e.what());
        rec_->metric("cupti.unavailable", 1);
      }
    }
#endif
  }

  void stopGpuCapture() {
#ifdef SHARDSCOPE_WITH_CUPTI
    if (gpuCapture_) {
      torch::cuda::synchronize();
      auto& tracer = cupti::CuptiTracer::instance();
      const cupti::CaptureStats cs = tracer.stop();
      gpuCapture_->finish(cs, tracer.clockUncertainty(), tracer.clockDrift());
      if (cs.lost() > 0)
        std::fprintf(stderr, "shardscope-worker: rank %d: warning: CUPTI lost %llu GPU records (buffers full)\n", env_.rank,
                     static_cast<unsigned long long>(cs.lost()));
    }
#endif
  }

  core::RunConfig cfg_;  // the engine keeps a reference: declared before it
  const WorkerOptions& opts_;
  int rank_ = -1;
  core::RunId runId_;
  std::string dbPath_;  // this node's database (WorkerOptions::sameDatabase)
  core::JobPart job_;
  DistEnv env_;
  bool cuda_ = false;
  bool sharedDevice_ = false;
  torch::Device device_ = torch::kCPU;
  std::string backend_;
  capture::MemoryTracker* tracker_ = nullptr;
  ModelConfig modelConfig_;
  bool bf16Reduce_ = false;
  int computeLane_ = -1;
  double initS_ = 0;
  Communicator::Volume volBefore_;
  std::vector<double> stepMs_;
  double meanMs_ = 0;
  std::int64_t skippedSteps_ = 0;  // fp16 steps skipped on overflow
  double saveS_ = -1;
  // Destroyed in reverse: GPU capture, engine, model, communicator, recorder.
  std::unique_ptr<capture::Recorder> rec_;
  std::unique_ptr<Communicator> comm_;
  std::unique_ptr<Transformer> model_;
  std::unique_ptr<Engine> engine_;
#ifdef SHARDSCOPE_WITH_CUPTI
  std::unique_ptr<gpu::GpuCapture> gpuCapture_;
#endif
};

}  // namespace

int runRank(const core::RunConfig& cfg, const WorkerOptions& opts) {
  RankLife life(cfg, opts);
  try {
    life.setUp();
    life.startRecording();
    life.build();
    life.probe();
    life.train();
    life.recordFigures();
    life.checkpoint();
    life.finish();
    return 0;
  } catch (const std::exception& e) {
    life.fail(e);
    return 1;
  }
}

}  // namespace shardscope::runtime
