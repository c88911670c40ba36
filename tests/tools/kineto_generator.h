#pragma once
// Synthetic torch.profiler / Kineto traces of a data-parallel (FSDP-style) training loop, for tests,
// the import benchmark and the fuzz seed corpus. Nothing large is committed: traces of any size are
// generated on demand, streamed to disk with constant memory.
//
// What a trace contains (traces.md §1): per step a ProfilerStep#N annotation on the main thread; the
// data-loader copy (cudaMemcpyAsync + gpu_memcpy); forward layers (aten::linear → aten::t/addmm,
// aten::gelu / aten::add_) with FSDP all-gathers (record_param_comms → nccl:_all_gather_base → NCCL
// kernel on stream 21, prefetched one unit ahead); the loss; the backward pass on the autograd thread
// (autograd::engine::evaluate_function: ...) with reduce-scatters per unit; an all-reduce of the loss;
// AdamW foreach kernels; loss.item() with a DtoH copy and cudaStreamSynchronize. Every launch is a
// cuda_runtime (or, for NCCL in the current format, cuda_driver) event with an ac2g s/f flow pair and
// a kernel on stream 7 (compute) or 21 (NCCL). Optional [memory] instants and python_function frames;
// M metadata, the "PyTorch Profiler (0)" span and the global instants at the end.
//
// Guarantees the tests rely on: kernels (and memcpy/memset) start after their launch's start and never
// overlap on one stream (gpu_user_annotation spans enclose them, as in real traces); CPU events on one
// thread nest properly and are written parents first; the counts returned are those of the file; all
// numbers are exact for a seed (own PRNG, no std distributions), so the same options give
// byte-identical files.
#include <cstdint>
#include <string>

namespace shardscope::test {

struct KinetoGenOptions {
  std::uint64_t events = 100000;  // approximate number of traceEvents entries
  int rank = 0;
  int worldSize = 1;
  // true: current format (float µs with 3 decimals relative to baseTimeNanoseconds, distributedInfo with
  // pg_config, collective args on record_param_comms and NCCL kernels, ac2g flows, gpu_user_annotation
  // twins). false: the 2022 format (integer absolute epoch µs, GPU tids as strings "stream 7",
  // async_cpu_to_gpu flows, External id == correlation on launches, no collective args).
  bool newFormat = true;
  int steps = 10;  // fewer when `events` is too small for that many steps
  std::uint64_t seed = 1;
  bool withMemory = true;   // [memory] instant events
  bool withPython = false;  // python_function frames around modules and the optimizer
  bool indent = false;      // json.dump(indent=4) layout instead of one event per line
  int firstStep = 1;        // number of the first ProfilerStep#N
  int gzipLevel = 6;        // for *.gz output
};

struct KinetoGenStats {
  std::uint64_t traceEvents = 0;     // entries of the traceEvents array
  std::uint64_t completeEvents = 0;  // ph "X" (including the Trace span and gpu_user_annotation)
  std::uint64_t kernels = 0;         // cat "kernel", NCCL included
  std::uint64_t ncclKernels = 0;
  std::uint64_t steps = 0;          // ProfilerStep#N annotations
  std::uint64_t memoryEvents = 0;   // "[memory]" instants
  std::uint64_t launchFlows = 0;    // ac2g / async_cpu_to_gpu flow events, s and f counted separately
  std::uint64_t cpuOps = 0;         // cat "cpu_op"
  std::uint64_t runtimeEvents = 0;  // cat "cuda_runtime" and "cuda_driver"
  std::uint64_t bytes = 0;          // uncompressed JSON bytes written
};

// Writes the trace to `path`, gzip-compressed when the path ends with ".gz". Throws
// std::runtime_error if the file cannot be written.
KinetoGenStats generateKinetoTrace(const std::string& path, const KinetoGenOptions& opt);

}  // namespace shardscope::test
