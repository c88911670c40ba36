#include "profiler/runtime/trainer.h"

#include <unistd.h>

#include <csignal>
#include <thread>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include <torch/torch.h>
#include <torch/version.h>

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

int runRank(const core::RunConfig& cfgIn, const WorkerOptions& opts) {
  int rank = -1;
  core::Id runId = opts.runId;
  std::unique_ptr<capture::Recorder> rec;
  try {
    core::RunConfig cfg = cfgIn;
    const DistEnv env = DistEnv::fromEnvironment();
    rank = env.rank;
    if (env.worldSize != cfg.worldSize) cfg.worldSize = env.worldSize;  // torchrun/srun decide
    core::validate(cfg);
    torch::manual_seed(static_cast<std::uint64_t>(cfg.seed));
    const bool cuda = cfg.device == "cuda" || (cfg.device == "auto" && torch::cuda::is_available());
    if (cuda && !torch::cuda::is_available()) throw core::Error("--device cuda: no CUDA device is visible to this worker");
    const torch::Device device =
        cuda ? torch::Device(torch::kCUDA, env.localRank % std::max<int>(1, static_cast<int>(torch::cuda::device_count())))
             : torch::Device(torch::kCPU);
    // One GPU, several ranks: NCCL refuses two ranks on one device, so "auto" falls back to Gloo over
    // CUDA tensors (every strategy still runs and is captured; the run's metadata says so).
    const int visibleGpus = cuda ? static_cast<int>(torch::cuda::device_count()) : 0;
    const bool sharedDevice = cuda && env.localWorldSize > visibleGpus;
    std::string backend = cfg.backend == "auto" ? (cuda && !sharedDevice ? "nccl" : "gloo") : cfg.backend;
    if (backend == "nccl" && sharedDevice)
      throw core::Error("--backend nccl: " + std::to_string(env.localWorldSize) + " ranks on this node share " +
                        std::to_string(visibleGpus) +
                        " GPU(s), and NCCL refuses two ranks on one device; use --backend gloo "
                        "(or auto) or one rank per GPU");
    // Mixed precision: parameters and activations in bf16 in the compute graph, fp32 master weights,
    // gradients and optimizer state (Engine::compute); gradients reduced in --reduce-dtype
    // (Engine::gradInfo).
    if (!cuda) {
      // Ranks share the machine's cores: OMP_NUM_THREADS (set by our launcher and by torchrun) says
      // how many threads this rank's intra-op work may use.
      const char* omp = std::getenv("OMP_NUM_THREADS");
      torch::set_num_threads(omp && std::atoi(omp) > 0 ? std::atoi(omp) : 1);
    }
    if (!cuda && (cfg.offloadOptimizer != "none" || cfg.offloadParam != "none") && env.rank == 0)
      std::fprintf(stderr,
                   "shardscope-worker: warning: offload_optimizer/offload_param move state to host memory; "
                   "on a CPU run everything already lives there, so they change nothing\n");
    auto& tracker = capture::MemoryTracker::install();
    tracker.setGranularity(16 * 1024);

    Communicator comm(env, backend, device, cfg.hangTimeoutS, nullptr);
    if (runId == 0) {
      if (env.rank == 0) {
        core::TraceStore store(opts.dbPath);
        core::Run run;
        run.name = opts.runName.empty() ? std::string(core::toString(cfg.strategy)) + " " + cfg.model : opts.runName;
        run.source = core::RunSource::Runtime;
        run.strategy = std::string(core::toString(cfg.strategy));
        run.configJson = core::toJson(cfg).dump();
        run.worldSize = cfg.worldSize;
        run.status = core::RunStatus::Running;
        core::Transaction tx(store.db());
        runId = store.createRun(run);
        tx.commit();
        comm.storeSet("shardscope/run_id", std::to_string(runId));
      } else {
        runId = std::stoll(comm.storeGet("shardscope/run_id"));
      }
    }
    capture::Recorder::Options ro;
    ro.dbPath = opts.dbPath;
    ro.runId = runId;
    ro.rank = env.rank;
    ro.host = hostName();
    ro.device = cuda ? "cuda:" + std::to_string(device.index()) : "cpu";
    ro.flushIntervalS = cfg.flushIntervalS;
    ro.enabled = cfg.capture;
    rec = std::make_unique<capture::Recorder>(ro);
    const int computeLane = rec->lane("compute (main thread)", core::TrackKind::CpuThread, 0);
    comm.setComputeLane(computeLane);
    comm.start(rec.get());
    if (cfg.capture) tracker.setRecorder(rec.get(), 0, 0);

    const ModelConfig mc = modelPreset(cfg.model, cfg.layers);
    Transformer model(buildLayout(mc), device, cfg.precision == "bf16" ? torch::kBFloat16 : torch::kFloat32);
    try {
      model.setSdpa(cfg.attention == "sdpa" || (cfg.attention == "auto" && haveSdpa()));
    } catch (const std::invalid_argument& e) {
      throw core::Error(e.what());
    }
    EngineContext ectx;
    ectx.cfg = &cfg;
    ectx.model = &model;
    ectx.comm = &comm;
    ectx.recorder = cfg.capture ? rec.get() : nullptr;
    ectx.computeLane = computeLane;
    ectx.device = device;
    ectx.seed = cfg.seed;
    // Gradient reduction dtype: --reduce-dtype, or unset = the parameters' dtype (FSDP's
    // MixedPrecision rule). Gloo in older LibTorch cannot sum bf16 ("Invalid scalar type"): asked
    // once, with a one-element all-reduce every rank makes; an explicit bf16 is then refused, an
    // unset one falls back to fp32, and the rank metadata says which was used.
    bool bf16Reduce = cfg.reduceDtype == "bf16" || (cfg.reduceDtype.empty() && cfg.precision == "bf16");
    if (bf16Reduce) {
      bool canSumBf16 = true;
      try {
        auto probe = torch::ones({1}, torch::TensorOptions().dtype(torch::kBFloat16).device(device));
        CollectiveInfo pi;
        pi.label = "bf16 reduce probe";
        comm.world().allReduce(probe, pi).wait();
      } catch (const std::exception&) {
        canSumBf16 = false;
      }
      if (!canSumBf16 && cfg.reduceDtype == "bf16")
        throw core::Error("--reduce-dtype bf16: the " + backend +
                          " backend of this LibTorch (" TORCH_VERSION ") cannot sum bf16 tensors; use --reduce-dtype fp32");
      bf16Reduce = canSumBf16;
    }
    ectx.bf16Reduce = bf16Reduce;
    auto engine = Engine::create(ectx);
    comm.world().barrier();
    const double initS = static_cast<double>(nowNs() - opts.processStartNs) / 1e9;

    {
      std::ostringstream meta;
      meta << "{\"backend\":\"" << backend << "\",\"device\":\"" << ro.device << "\",\"torch\":\"" << TORCH_VERSION
           << "\",\"engine\":\"" << engine->describe() << "\",\"params\":" << model.layout().totalNumel << ",\"attention\":\""
           << (model.sdpa() ? "sdpa" : "eager") << "\",\"precision\":\"" << cfg.precision << "\""
           << ",\"reduce_dtype\":\"" << (bf16Reduce ? "bf16" : "fp32") << "\""
           << ",\"step_timing\":\"" << (cuda ? "device-synchronised at the step boundary" : "host clock (CPU)") << "\""
           << ",\"local_rank\":" << env.localRank << ",\"node_rank\":" << env.nodeRank
           << ",\"shared_device\":" << (sharedDevice ? "true" : "false") << ",\"gpu_trace\":\""
           << (cuda && cfg.capture ? cfg.gpuTrace : std::string("off")) << "\""
           << ",\"collectives_on\":\"" << (cuda ? (backend == "gloo" ? "gloo over CUDA tensors" : "nccl") : "gloo (cpu)")
           << "\"}";
      rec->rankMetadata(meta.str());
    }

    TokenSource data;
    data.seed = cfg.seed;
    data.vocab = mc.vocab;
    data.seq = cfg.seqLen;
    if (!cfg.dataFile.empty()) {
      std::ifstream in(cfg.dataFile, std::ios::binary);
      if (!in) throw core::Error("--data-file " + cfg.dataFile + ": cannot open");
      data.text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      if (data.text.size() < static_cast<std::size_t>(cfg.seqLen) + 2)
        throw core::Error("--data-file " + cfg.dataFile + ": shorter than one sequence (" + std::to_string(cfg.seqLen + 1) +
                          " bytes)");
      if (mc.vocab < 256) throw core::Error("--data-file needs a model vocabulary of at least 256 (bytes)");
    }

    std::ofstream lossOut;
    if (!opts.dumpLossesPath.empty())
      lossOut.open(cfg.worldSize > 1 ? opts.dumpLossesPath + ".rank" + std::to_string(env.rank) : opts.dumpLossesPath);
    std::vector<double> stepMs;
    const Communicator::Volume volBefore = comm.volume();
    const std::int64_t rowsPerRank = cfg.microBatch;
    std::vector<std::int64_t> tok, tgt;
    // Fault injection for the failure tests: SHARDSCOPE_FAULT="<rank>:<step>:crash|kill|hang".
    int faultStep = -1;
    std::string faultKind;
    if (const char* f = std::getenv("SHARDSCOPE_FAULT"); f && *f) {
      int fr = -1, fs = -1;
      char kind[16] = {0};
      if (std::sscanf(f, "%d:%d:%15s", &fr, &fs, kind) == 3 && fr == env.rank) {
        faultStep = fs;
        faultKind = kind;
      }
    }
#ifdef SHARDSCOPE_WITH_CUPTI
    // The GPU timeline (kernels, memcpys, NCCL kernels, allocator segments) through CUPTI, into
    // this rank's lanes. CUPTI allows one activity subscriber per process: if another one (a
    // Kineto profiler, an NVTX injection) holds it, the run goes on without the GPU lanes.
    std::unique_ptr<gpu::GpuCapture> gpuCapture;
    if (cuda && cfg.capture && cfg.gpuTrace != "off") {
      try {
        cupti::TracerOptions topts;
        topts.api = cfg.gpuTrace == "full"      ? cupti::TracerOptions::ApiRecords::All
                    : cfg.gpuTrace == "kernels" ? cupti::TracerOptions::ApiRecords::None
                                                : cupti::TracerOptions::ApiRecords::Launches;
        cupti::CuptiTracer::instance().initialize(topts);
        gpuCapture = std::make_unique<gpu::GpuCapture>(*rec);
        torch::cuda::synchronize();
        cupti::CuptiTracer::instance().start([g = gpuCapture.get()](cupti::GpuActivity&& a) { g->onActivity(std::move(a)); });
      } catch (const std::exception& e) {
        gpuCapture.reset();
        std::fprintf(stderr, "shardscope-worker: rank %d: warning: no GPU timeline: %s\n", env.rank, e.what());
        rec->metric("cupti.unavailable", 1);
      }
    }
#endif
    for (int s = 1; s <= cfg.steps; ++s) {
      if (s == faultStep) {
        if (faultKind == "crash") throw core::Error("injected fault (SHARDSCOPE_FAULT) at step " + std::to_string(s));
        if (faultKind == "kill") std::raise(SIGKILL);
        if (faultKind == "hang")
          for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
      }
      std::vector<Batch> micro;
      for (int a = 0; a < cfg.gradAccum; ++a) {
        // Global rows of this micro-batch: rank r holds rows [r·mb, (r+1)·mb) of micro-batch a.
        const std::int64_t first = (static_cast<std::int64_t>(a) * cfg.worldSize + env.rank) * rowsPerRank;
        data.fill(s, first, rowsPerRank, tok, tgt);
        Batch b;
        auto o = torch::TensorOptions().dtype(torch::kInt64);
        b.tokens = torch::from_blob(tok.data(), {rowsPerRank, cfg.seqLen}, o).clone().to(device);
        b.targets = torch::from_blob(tgt.data(), {rowsPerRank, cfg.seqLen}, o).clone().to(device);
        micro.push_back(std::move(b));
      }
      const std::int64_t t0 = nowNs();
#ifdef SHARDSCOPE_WITH_CUPTI
      if (gpuCapture) gpuCapture->beginStep(s, t0);
#endif
      const StepStats st = engine->trainStep(s, micro);
#ifdef SHARDSCOPE_WITH_CUDA
      // A step on a GPU ends when the device has finished it, not when the host has queued its last
      // kernel (the optimizer's): synchronise at the step boundary, as a synchronised PyTorch timing
      // loop does. The cost: the host cannot queue the next step while the device drains this one
      // (one launch latency per step); the run summary, the metrics and the step windows all agree.
      if (cuda) torch::cuda::synchronize();
#endif
      const std::int64_t t1 = nowNs();
      rec->step(s, t0, t1);
#ifdef SHARDSCOPE_WITH_CUDA
      if (cuda) {  // the device's memory as the caching allocator sees it, once per step
        const CudaMemory m = cudaMemory(device.index());
        rec->memory(t1, 0, m.allocated, m.reserved, /*deviceType=*/1, device.index());
      }
#endif
      const double ms = static_cast<double>(t1 - t0) / 1e6;
      stepMs.push_back(ms);
      rec->metric("loss/step/" + std::to_string(s), st.loss);
      if (lossOut) lossOut << core::formatDouble(st.loss) << "\n";
      if (opts.progressLines) {
        std::printf("@ss {\"rank\":%d,\"event\":\"step\",\"step\":%d,\"steps\":%d,\"loss\":%s,\"step_ms\":%.3f}\n", env.rank, s,
                    cfg.steps, core::formatDouble(st.loss).c_str(), ms);
        std::fflush(stdout);
      }
      if (!std::isfinite(st.loss)) throw core::Error("loss is not finite at step " + std::to_string(s));
    }

#ifdef SHARDSCOPE_WITH_CUPTI
    if (gpuCapture) {
      torch::cuda::synchronize();
      auto& tracer = cupti::CuptiTracer::instance();
      const cupti::CaptureStats cs = tracer.stop();
      gpuCapture->finish(cs, tracer.clockUncertainty(), tracer.clockDrift());
      if (cs.lost() > 0)
        std::fprintf(stderr, "shardscope-worker: rank %d: warning: CUPTI lost %llu GPU records (buffers full)\n", env.rank,
                     static_cast<unsigned long long>(cs.lost()));
    }
#endif
    {
      const Communicator::Volume vol = comm.volume();
      double wire = 0;
      for (const auto& [op, b] : vol.messageBytes) {
        if (op == "barrier") continue;
        const double before = volBefore.messageBytes.count(op) ? volBefore.messageBytes.at(op) : 0.0;
        const double wb = vol.wireBytes.at(op) - (volBefore.wireBytes.count(op) ? volBefore.wireBytes.at(op) : 0.0);
        const auto cnt = vol.count.at(op) - (volBefore.count.count(op) ? volBefore.count.at(op) : 0);
        rec->metric("comm.bytes_per_step." + op, (b - before) / cfg.steps);
        rec->metric("comm.count_per_step." + op, static_cast<double>(cnt) / cfg.steps);
        wire += wb;
      }
      rec->metric("comm.wire_bytes_per_step", wire / cfg.steps);
    }
    // Metrics: steady-state step time excludes the first step (lazy optimizer state, ZeRO-3 trace).
    const std::size_t skip = stepMs.size() > 1 ? 1 : 0;
    double sum = 0;
    for (std::size_t i = skip; i < stepMs.size(); ++i) sum += stepMs[i];
    const double meanMs = sum / static_cast<double>(stepMs.size() - skip);
    const double tokensPerStep = static_cast<double>(cfg.microBatch) * cfg.seqLen * cfg.gradAccum * cfg.worldSize;
    rec->metric("step_time_ms", meanMs);
    rec->metric("init_time_s", initS);
    const auto peak = tracker.peak();
    rec->metric("peak_allocated_bytes", static_cast<double>(peak.total));
#ifdef SHARDSCOPE_WITH_CUDA
    if (cuda) {  // on a GPU the peak that matters is the device's (the tracker counts host memory)
      const CudaMemory m = cudaMemory(device.index());
      rec->metric("peak_allocated_bytes", static_cast<double>(m.peakAllocated));
      rec->metric("peak_reserved_bytes", static_cast<double>(m.peakReserved));
      rec->metric("peak_host_allocated_bytes", static_cast<double>(peak.total));
    }
#endif
    for (int c = 0; c < static_cast<int>(capture::MemCategory::Count); ++c)
      rec->metric(std::string("peak_breakdown.") + capture::toString(static_cast<capture::MemCategory>(c)),
                  static_cast<double>(peak.byCategory[static_cast<std::size_t>(c)]));
    rec->metric("compute.param_dtype_bytes", static_cast<double>(engine->observedParamBytes()));
    rec->metric("compute.activation_dtype_bytes", static_cast<double>(engine->observedActivationBytes()));
    const ModelStateBytes msb = engine->modelStateBytes();
    rec->metric("model_state.parameters_bytes", static_cast<double>(msb.parameters));
    rec->metric("model_state.gradients_bytes", static_cast<double>(msb.gradients));
    rec->metric("model_state.optimizer_bytes", static_cast<double>(msb.optimizer));
    rec->metric("model_state.buffers_bytes", static_cast<double>(msb.buffers));

    double saveS = -1;
    if (cfg.saveCheckpoint) {
      comm.world().barrier();
      const std::int64_t c0 = nowNs();
      const std::int64_t bytes = engine->saveShard(cfg.checkpointDir);
      comm.world().barrier();
      saveS = static_cast<double>(nowNs() - c0) / 1e9;
      rec->metric("checkpoint_bytes", static_cast<double>(bytes));
      if (cfg.consolidateCheckpoint) {
        const std::int64_t k0 = nowNs();
        auto full = engine->fullParameters();
        if (env.rank == 0) {
          std::ofstream out(cfg.checkpointDir + "/consolidated.bin", std::ios::binary);
          for (auto& t : full) {
            auto c = t.to(torch::kCPU).to(torch::kFloat32).contiguous();
            out.write(static_cast<const char*>(c.data_ptr()), static_cast<std::streamsize>(c.numel() * 4));
          }
          if (!out) throw core::Error("cannot write " + cfg.checkpointDir + "/consolidated.bin (disk full?)");
        }
        comm.world().barrier();
        rec->metric("checkpoint_consolidate_s", static_cast<double>(nowNs() - k0) / 1e9, env.rank == 0);
      }
    }
    if (!opts.dumpParamsPath.empty()) {
      auto full = engine->fullParameters();
      if (env.rank == 0) {
        std::ofstream out(opts.dumpParamsPath, std::ios::binary);
        for (auto& t : full) {
          auto c = t.to(torch::kCPU).to(torch::kFloat32).contiguous();
          out.write(static_cast<const char*>(c.data_ptr()), static_cast<std::streamsize>(c.numel() * 4));
        }
      }
    }
    if (env.rank == 0) {
      rec->metric("tokens_per_s", tokensPerStep / (meanMs / 1000.0), false);
      rec->metric("step_time_ms", meanMs, false);
      rec->metric("init_time_s", initS, false);
      if (saveS >= 0) rec->metric("checkpoint_save_s", saveS, false);
      rec->metric("params", static_cast<double>(model.layout().totalNumel), false);
    }
    tracker.setRecorder(nullptr);
    rec->close();
    comm.world().barrier();  // every rank's data is committed
    if (env.rank == 0 && opts.runId == 0) {
      core::TraceStore store(opts.dbPath);
      core::Transaction tx(store.db());
      store.setRunStatus(runId, core::RunStatus::Completed);
      tx.commit();
    }
    if (opts.progressLines) {
      std::printf("@ss {\"rank\":%d,\"event\":\"done\",\"run_id\":%lld,\"step_ms\":%.3f}\n", rank, static_cast<long long>(runId),
                  meanMs);
      std::fflush(stdout);
    }
    return 0;
  } catch (const std::exception& e) {
    std::string msg = e.what();
    if (auto nl = msg.find('\n'); nl != std::string::npos) msg = msg.substr(0, nl);
    std::fprintf(stderr, "shardscope-worker: rank %d: %s\n", rank, msg.c_str());
    if (auto* t = capture::MemoryTracker::instance()) t->setRecorder(nullptr);
    if (rec) {
      try {
        rec->close();  // keep every event captured so far
      } catch (...) {
      }
    }
    // Outside our launcher nobody else records the failure: the failing rank does.
    if (opts.runId == 0 && runId != 0) {
      try {
        core::TraceStore store(opts.dbPath);
        core::Transaction tx(store.db());
        store.setRunStatus(runId, core::RunStatus::Failed, "rank " + std::to_string(rank) + ": " + msg);
        tx.commit();
      } catch (...) {
      }
    }
    return 1;
  }
}

}  // namespace shardscope::runtime
