// bench_timeline: the timeline's core work on big runs. For each size it writes a synthetic run of
// 16 ranks straight into a store (BulkWriter: an FSDP-style loop per rank, nested CPU ops, compute and
// NCCL kernels, a memory counter), builds the timeline index (core/timeline) from the store, and times
// a full zoom-out draw list at 1920 px, every lane of every rank visible (median of --frames frames).
//
//   bench_timeline [--sizes 1M,10M] [--ranks 16] [--width 1920] [--frames 20] [--threads 1] [--dir DIR] [--keep]
//   bench_timeline --db FILE [--run ID] [--width 1920] [--frames 20] [--threads 1]
//
// Output: one line per size `1M events: 0.4 ms/frame` (the figure the issue tracks), then indented
// details: generation, index build time, resident bytes per event (the index's own accounting, and
// the growth of the process's RSS across the build with the store closed), the draw list (and its
// parts: event lanes, counter lanes, every rank's summary track), and frames at closer zoom levels. Each size runs in a fork()ed
// child so its memory figures are its own.
#include <malloc.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/util/args.h"
#include "core/storage/store_transaction.h"
#include "core/storage/trace_store.h"
#include "core/timeline/draw_list.h"
#include "core/timeline/range_stats.h"
#include "core/timeline/timeline_index.h"

namespace {

namespace fs = std::filesystem;
using namespace shardscope;
using core::Category;
using core::CollectiveOp;
using core::Id;
using core::RankId;
using core::RunId;
using core::TimeNs;
using core::TrackId;

struct Options {
  std::vector<std::uint64_t> sizes{1'000'000, 10'000'000};
  int ranks = 16;
  int width = 1920;
  int frames = 20;
  unsigned threads = 1;
  std::string dir;
  bool keep = false;
  std::string db;
  RunId run;
};

[[noreturn]] void usage(int code) {
  std::fputs(
      "usage: bench_timeline [--sizes 1M,10M] [--ranks 16] [--width 1920] [--frames 20] [--threads 1] [--dir DIR] [--keep]\n"
      "       bench_timeline --db FILE [--run ID] [--width 1920] [--frames 20] [--threads 1]\n"
      "Writes a synthetic run of RANKS ranks per size (events in total, k/M suffixes) into a store, builds the\n"
      "timeline index and times the full zoom-out draw list at WIDTH px (median of FRAMES frames); prints\n"
      "`<size> events: <ms> ms/frame` per size, then details (index build, bytes/event, closer zoom levels).\n"
      "--threads  threads building one draw list (0: one per hardware thread)\n"
      "--db       measure a run of an existing database instead (default run: the latest)\n",
      code == 0 ? stdout : stderr);
  std::exit(code);
}

Options parseArgs(int argc, char** argv) {
  static const std::vector<core::ArgSpec> specs = {
      {"sizes", true, ""}, {"ranks", true, ""}, {"width", true, ""}, {"frames", true, ""}, {"threads", true, ""},
      {"dir", true, ""},   {"keep", false, ""}, {"db", true, ""},    {"run", true, ""},    {"help", false, ""},
  };
  Options o;
  try {
    const core::ParsedArgs a = core::parseArgs(argc, argv, specs, core::ArgParseOptions::optionsOnly());
    if (a.has("help")) usage(0);
    o.sizes = a.getCounts("sizes", o.sizes, 1);
    o.ranks = static_cast<int>(a.getCount("ranks", static_cast<std::uint64_t>(o.ranks), 1, 1024));
    o.width = static_cast<int>(a.getCount("width", static_cast<std::uint64_t>(o.width), 1, 100000));
    o.frames = static_cast<int>(a.getCount("frames", static_cast<std::uint64_t>(o.frames), 1, 10000));
    o.threads = static_cast<unsigned>(a.getCount("threads", o.threads, 0, 256));
    o.dir = a.get("dir");
    o.keep = a.has("keep");
    o.db = a.get("db");
    o.run = RunId{static_cast<Id>(a.getCount("run", static_cast<std::uint64_t>(o.run.value()), a.has("run") ? 1 : 0))};
  } catch (const core::ArgError& e) {
    std::fprintf(stderr, "bench_timeline: %s\n", e.what());
    usage(2);
  }
  return o;
}

std::uint64_t statusKb(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const std::size_t n = std::char_traits<char>::length(key);
  while (std::getline(in, line))
    if (line.compare(0, n, key) == 0) return std::strtoull(line.c_str() + n, nullptr, 10);
  return 0;
}

double msSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string sizeLabel(std::uint64_t n) {
  if (n % 1'000'000 == 0) return std::to_string(n / 1'000'000) + "M";
  if (n % 1000 == 0) return std::to_string(n / 1000) + "k";
  return std::to_string(n);
}

// Runs fn in a fork()ed child (its own heap and RSS); false when it failed.
bool inChild(const std::function<void()>& fn) {
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid < 0) {
    std::perror("fork");
    return false;
  }
  if (pid == 0) {
    int code = 0;
    try {
      fn();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bench_timeline: %s\n", e.what());
      code = 1;
    }
    std::fflush(stdout);
    _exit(code);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// ---------------------------------------------------------------------------------------------
// Synthetic run, written straight into the store.

struct Rng {
  std::uint64_t s;
  std::uint64_t next() {  // splitmix64
    std::uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  TimeNs between(TimeNs lo, TimeNs hi) { return lo + static_cast<TimeNs>(next() % static_cast<std::uint64_t>(hi - lo + 1)); }
};

struct Names {
  Id step, layerFwd, layerBwd, linear, addmm, launch, gemm, gelu, geluKernel, recordComms, ncclAg, ncclRs, agKernel, rsKernel,
      evalFn, mm, mmKernel, optimizer, adamKernel, memcpy, memcpyKernel, sync;
  Id catAnnotation, catCpuOp, catRuntime, catKernel, catMemcpy, catGpuAnnotation;
  std::vector<Id> stepNames;
};

// One rank: `events` events over `steps` steps of an FSDP-style loop.
std::uint64_t writeRank(core::TraceStore& store, core::BulkWriter& w, RankId rankId, int rank, Id pg, const Names& nm,
                        std::uint64_t events, int steps, std::uint64_t seed) {
  auto addTrack = [&](core::TrackKind kind, const std::string& name, int sort) {
    core::Track t;
    t.rankId = rankId;
    t.kind = kind;
    t.name = name;
    t.sortIndex = sort;
    if (kind == core::TrackKind::GpuStream) t.device = rank % 8;
    return store.addTrack(t);
  };
  const TrackId mainT = addTrack(core::TrackKind::CpuThread, "thread 1 (python)", 0);
  const TrackId bwdT = addTrack(core::TrackKind::CpuThread, "thread 2 (autograd)", 1);
  const TrackId gpuT = addTrack(core::TrackKind::GpuStream, "stream 7", 2);
  const TrackId ncclT = addTrack(core::TrackKind::GpuStream, "stream 21", 3);
  const TrackId memT = addTrack(core::TrackKind::Counter, "memory allocated (device " + std::to_string(rank % 8) + ")", 4);

  Rng rng{seed * 1000003u + static_cast<std::uint64_t>(rank)};
  std::vector<core::EventRecord> buf[4];  // main, bwd, gpu, nccl: one step at a time, sorted before writing
  std::uint64_t written = 0;
  TimeNs cpu = 1'700'000'000'000'000'000 + rng.between(0, 200'000);
  TimeNs gpuFree = cpu, ncclFree = cpu;
  double mem = 2e9;
  std::int64_t corr = 0;
  const std::uint64_t perStep = events / static_cast<std::uint64_t>(steps);

  auto ev = [&](int lane, TrackId track, TimeNs s, TimeNs e, Id name, Id cat, Category c) -> core::EventRecord& {
    core::EventRecord r;
    r.trackId = track;
    r.startNs = s;
    r.endNs = e;
    r.nameId = name;
    r.catId = cat;
    r.category = c;
    buf[lane].push_back(r);
    return buf[lane].back();
  };
  // A kernel launched at [ls, le) from a CPU lane: launch event + kernel on the stream.
  auto launch = [&](int lane, TrackId track, TimeNs ls, Id kernel, TimeNs dur, bool comm, CollectiveOp op, std::int64_t bytes) {
    const TimeNs le = ls + rng.between(3'000, 7'000);
    auto& l = ev(lane, track, ls, le, nm.launch, nm.catRuntime, Category::Other);
    l.correlation = ++corr;
    TimeNs& free = comm ? ncclFree : gpuFree;
    const TimeNs ks = std::max(free, le + rng.between(2'000, 6'000));
    auto& k = ev(comm ? 3 : 2, comm ? ncclT : gpuT, ks, ks + dur, kernel, nm.catKernel,
                 comm ? Category::Communication : Category::Computation);
    k.correlation = corr;
    if (comm) {
      k.collOp = op;
      k.bytes = bytes;
      k.processGroupId = pg;
      k.groupSize = 16;
    }
    free = ks + dur;
    mem += comm ? static_cast<double>(bytes) : static_cast<double>(rng.between(-4'000'000, 4'200'000));
    w.addCounter(memT, ks, mem);
    return le;
  };

  for (int s = 0; s < steps; ++s) {
    const TimeNs stepStart = cpu;
    std::uint64_t budget = perStep;
    // Data loading: a host-to-device copy.
    {
      const TimeNs ms = cpu + rng.between(10'000, 30'000);
      ev(0, mainT, cpu, ms + 10'000, nm.memcpy, nm.catRuntime, Category::Other);
      const TimeNs ks = std::max(gpuFree, ms);
      ev(2, gpuT, ks, ks + rng.between(50'000, 150'000), nm.memcpyKernel, nm.catMemcpy, Category::Memory);
      gpuFree = buf[2].back().endNs;
      cpu = ms + 12'000;
      budget -= std::min<std::uint64_t>(budget, 2);
    }
    // Forward: layers of (annotation, all-gather, a few ops) until half the step budget is spent.
    const std::uint64_t fwdBudget = budget / 2;
    std::uint64_t used = 0;
    int layer = 0;
    while (used + 16 <= fwdBudget) {
      const TimeNs ls = cpu;
      cpu += rng.between(2'000, 5'000);
      // All-gather of the next unit's parameters (prefetch).
      {
        const std::int64_t bytes = 8'000'000 + static_cast<std::int64_t>(rng.next() % 24'000'000);
        const TimeNs rs = cpu;
        const TimeNs ns = rs + rng.between(3'000, 6'000);
        const TimeNs le = launch(0, mainT, ns + 2'000, nm.agKernel, 100'000 + bytes / 200, true, CollectiveOp::AllGather, bytes);
        auto& n = ev(0, mainT, ns, le + 2'000, nm.ncclAg, nm.catCpuOp, Category::Communication);
        n.collOp = CollectiveOp::AllGather;
        n.bytes = bytes;
        auto& r = ev(0, mainT, rs, le + 5'000, nm.recordComms, nm.catCpuOp, Category::Communication);
        r.collOp = CollectiveOp::AllGather;
        r.bytes = bytes;
        cpu = le + 6'000;
        used += 4;
      }
      const int ops = 3;
      for (int o = 0; o < ops; ++o) {
        const bool lin = o != 1;
        const TimeNs os = cpu;
        const TimeNs is = os + rng.between(4'000, 10'000);
        const TimeNs le = launch(0, mainT, is + rng.between(2'000, 5'000), lin ? nm.gemm : nm.geluKernel,
                                 lin ? rng.between(40'000, 400'000) : rng.between(10'000, 60'000), false, CollectiveOp::None, 0);
        ev(0, mainT, is, le + 1'500, lin ? nm.addmm : nm.gelu, nm.catCpuOp, Category::Other);
        ev(0, mainT, os, le + 3'000, lin ? nm.linear : nm.gelu, nm.catCpuOp, Category::Other);
        cpu = le + rng.between(3'000, 8'000);
        used += 4;
      }
      ev(0, mainT, ls, cpu, nm.layerFwd, nm.catAnnotation, Category::Other);
      ++used;
      cpu += rng.between(1'000, 3'000);
      ++layer;
    }
    // Backward on the autograd thread, reduce-scatter per layer.
    TimeNs bcpu = cpu + rng.between(10'000, 30'000);
    while (used + 12 <= budget) {
      for (int o = 0; o < 2; ++o) {
        const TimeNs os = bcpu;
        const TimeNs ms = os + rng.between(3'000, 8'000);
        const TimeNs le = launch(1, bwdT, ms + rng.between(1'000, 4'000), nm.mmKernel, rng.between(60'000, 600'000), false,
                                 CollectiveOp::None, 0);
        ev(1, bwdT, ms, le + 1'000, nm.mm, nm.catCpuOp, Category::Other);
        ev(1, bwdT, os, le + 2'500, nm.evalFn, nm.catCpuOp, Category::Other);
        bcpu = le + rng.between(2'000, 6'000);
        used += 4;
      }
      const std::int64_t bytes = 8'000'000 + static_cast<std::int64_t>(rng.next() % 24'000'000);
      const TimeNs rs = bcpu;
      const TimeNs le = launch(1, bwdT, rs + 4'000, nm.rsKernel, 120'000 + bytes / 150, true, CollectiveOp::ReduceScatter, bytes);
      auto& r = ev(1, bwdT, rs, le + 3'000, nm.recordComms, nm.catCpuOp, Category::Communication);
      r.collOp = CollectiveOp::ReduceScatter;
      r.bytes = bytes;
      bcpu = le + 5'000;
      used += 3;
    }
    // Optimizer, then the step ends when the GPU does (loss.item() synchronises).
    cpu = std::max(cpu, bcpu);
    const TimeNs os = cpu;
    const TimeNs le = launch(0, mainT, os + 5'000, nm.adamKernel, rng.between(200'000, 800'000), false, CollectiveOp::None, 0);
    ev(0, mainT, os, le + 2'000, nm.optimizer, nm.catCpuOp, Category::Other);
    cpu = std::max({le + 5'000, gpuFree, ncclFree});
    ev(0, mainT, le + 3'000, cpu, nm.sync, nm.catRuntime, Category::Other);
    cpu += 1'000;
    const Id stepName = nm.stepNames[static_cast<std::size_t>(s) % nm.stepNames.size()];
    ev(0, mainT, stepStart, cpu, stepName, nm.catAnnotation, Category::Other);
    store.addStep(core::Step{rankId, s + 1, stepStart, cpu});
    cpu += rng.between(500'000, 3'000'000);  // the data loader between steps
    for (auto& b : buf) {
      std::sort(b.begin(), b.end(), [](const core::EventRecord& a, const core::EventRecord& c) {
        return a.startNs != c.startNs ? a.startNs < c.startNs : a.endNs > c.endNs;
      });
      for (auto& e : b) {
        e.step = s + 1;
        w.addEvent(e);
      }
      written += b.size();
      b.clear();
    }
  }
  return written;
}

struct Generated {
  RunId run;
  std::uint64_t events = 0;
};

Generated generate(const std::string& db, std::uint64_t events, int ranks) {
  core::TraceStore store(db);
  core::Run run;
  run.name = "bench_timeline " + sizeLabel(events);
  run.source = core::RunSource::Simulated;
  run.status = core::RunStatus::Completed;
  run.worldSize = ranks;
  Generated g;
  g.run = store.createRun(run);
  core::ProcessGroup pg;
  pg.runId = g.run;
  pg.name = "0";
  pg.description = "default_pg";
  pg.backend = "cuda:nccl";
  pg.size = ranks;
  const Id pgId = store.addProcessGroup(pg);
  Names nm;
  nm.layerFwd = store.intern("FullyShardedDataParallel.forward");
  nm.layerBwd = store.intern("FullyShardedDataParallel.backward");
  nm.linear = store.intern("aten::linear");
  nm.addmm = store.intern("aten::addmm");
  nm.launch = store.intern("cudaLaunchKernel");
  nm.gemm = store.intern(
      "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas");
  nm.gelu = store.intern("aten::gelu");
  nm.geluKernel = store.intern("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>");
  nm.recordComms = store.intern("record_param_comms");
  nm.ncclAg = store.intern("nccl:_all_gather_base");
  nm.ncclRs = store.intern("nccl:_reduce_scatter_base");
  nm.agKernel = store.intern("ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)");
  nm.rsKernel = store.intern("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)");
  nm.evalFn = store.intern("autograd::engine::evaluate_function: AddmmBackward0");
  nm.mm = store.intern("aten::mm");
  nm.mmKernel = store.intern("sm90_xmma_gemm_bf16bf16_bf16f32_f32_nt_n_tilesize128x128x64_cublas");
  nm.optimizer = store.intern("Optimizer.step#AdamW.step");
  nm.adamKernel = store.intern("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<FusedAdamMathFunctor>");
  nm.memcpy = store.intern("cudaMemcpyAsync");
  nm.memcpyKernel = store.intern("Memcpy HtoD (Pinned -> Device)");
  nm.sync = store.intern("cudaStreamSynchronize");
  nm.catAnnotation = store.intern("user_annotation");
  nm.catCpuOp = store.intern("cpu_op");
  nm.catRuntime = store.intern("cuda_runtime");
  nm.catKernel = store.intern("kernel");
  nm.catMemcpy = store.intern("gpu_memcpy");
  nm.catGpuAnnotation = store.intern("gpu_user_annotation");
  for (int s = 1; s <= 100; ++s) nm.stepNames.push_back(store.intern("ProfilerStep#" + std::to_string(s)));
  const std::uint64_t perRank = events / static_cast<std::uint64_t>(ranks);
  core::writeInTransaction(store, [&] {
    core::BulkWriter w(store);
    for (int r = 0; r < ranks; ++r) {
      core::Rank rk;
      rk.runId = g.run;
      rk.rank = r;
      rk.host = "node" + std::to_string(r / 8);
      rk.device = "cuda:" + std::to_string(r % 8);
      const RankId rankId = store.addRank(rk);
      g.events += writeRank(store, w, rankId, r, pgId, nm, perRank, 20, 7);
    }
    w.finish();
  });
  return g;
}

// ---------------------------------------------------------------------------------------------

core::timeline::Viewport viewAll(const core::timeline::TimelineIndex& idx, TimeNs t0, TimeNs t1, int width, unsigned threads) {
  core::timeline::Viewport v;
  v.t0 = t0;
  v.t1 = t1;
  v.widthPx = width;
  v.threads = threads;
  float y = 0;
  for (const auto& rank : idx.ranks()) {
    for (std::uint32_t li : rank.lanes) {
      const auto& l = idx.lane(li);
      if (!l.loaded) continue;
      v.lanes.push_back(core::timeline::ViewLane{li, y, 12});
      y += l.isCounter() ? 40.0f : 12.0f * static_cast<float>(std::max<std::uint32_t>(1, l.depthCount()));
    }
  }
  return v;
}

struct FrameFigures {
  double medianMs = 0, minMs = 0, maxMs = 0;
  std::size_t rects = 0, folded = 0, rows = 0, counterPoints = 0, exposed = 0;
  std::uint64_t eventsInView = 0;
};

FrameFigures timeFrames(const core::timeline::TimelineIndex& idx, const core::timeline::Viewport& v, int frames) {
  FrameFigures f;
  std::vector<double> ms;
  for (int i = 0; i < frames + 2; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const core::timeline::DrawList dl = core::timeline::buildDrawList(idx, v);
    const double t = msSince(t0);
    if (i >= 2) ms.push_back(t);  // two warm-up frames
    if (i == 0) {
      f.rects = dl.rects.size();
      for (const auto& r : dl.rects) f.folded += (r.flags & core::timeline::DrawFlags::Folded) ? 1 : 0;
      f.rows = dl.rows.size();
      for (const auto& c : dl.counters) f.counterPoints += c.points.size();
      f.exposed = dl.exposed.size();
      f.eventsInView = dl.eventsInView;
    }
  }
  f.medianMs = median(ms);
  f.minMs = *std::min_element(ms.begin(), ms.end());
  f.maxMs = *std::max_element(ms.begin(), ms.end());
  return f;
}

void measure(const std::string& db, RunId runId, const std::string& label, const Options& o) {
  malloc_trim(0);
  const std::uint64_t rss0 = statusKb("VmRSS:");
  std::shared_ptr<const core::timeline::TimelineIndex> idx;
  double buildMs = 0;
  {
    core::TraceStore store(db, core::Database::Mode::ReadOnly);
    if (!runId) runId = store.latestRunId().value_or(core::RunId{});
    const auto t0 = std::chrono::steady_clock::now();
    idx = core::timeline::TimelineIndex::build(store, runId);
    buildMs = msSince(t0);
  }
  malloc_trim(0);
  const std::uint64_t rss1 = statusKb("VmRSS:");
  const std::uint64_t hwm = statusKb("VmHWM:");
  const double events = static_cast<double>(idx->eventCount());
  const double accounted = static_cast<double>(idx->memoryBytes());
  const double rssDelta = static_cast<double>(rss1 > rss0 ? rss1 - rss0 : 0) * 1024.0;

  const auto full = viewAll(*idx, idx->minStart(), idx->maxEnd(), o.width, o.threads);
  const FrameFigures ff = timeFrames(*idx, full, o.frames);
  std::printf("%s events: %.2f ms/frame\n", label.c_str(), ff.medianMs);
  std::printf("  %s: %.0f events (%zu ranks, %zu lanes), %.0f counter samples, span %.3f s\n", label.c_str(), events,
              idx->ranks().size(), idx->lanes().size(), static_cast<double>(idx->sampleCount()),
              static_cast<double>(idx->maxEnd() - idx->minStart()) / 1e9);
  std::printf(
      "  %s index: build %.0f ms (%.2f M events/s); %.1f bytes/event accounted (%.1f MB, counters included), "
      "%.1f bytes/event RSS growth (%.1f MB), peak RSS %.0f MB\n",
      label.c_str(), buildMs, events / buildMs / 1e3, accounted / events, accounted / 1e6, rssDelta / events, rssDelta / 1e6,
      static_cast<double>(hwm) / 1024.0);
  std::printf(
      "  %s full zoom-out at %d px: median %.3f ms, min %.3f, max %.3f over %d frames (threads %u); %zu rects "
      "(%zu folded blocks) in %zu rows, %zu counter points, %zu exposed spans, %llu events in view\n",
      label.c_str(), o.width, ff.medianMs, ff.minMs, ff.maxMs, o.frames, o.threads, ff.rects, ff.folded, ff.rows,
      ff.counterPoints, ff.exposed, static_cast<unsigned long long>(ff.eventsInView));
  // The same frame split: event lanes only, counter lanes only.
  for (int counters = 0; counters < 2; ++counters) {
    auto part = full;
    part.lanes.clear();
    for (const auto& vl : full.lanes)
      if (idx->lane(vl.lane).isCounter() == (counters == 1)) part.lanes.push_back(vl);
    const FrameFigures p = timeFrames(*idx, part, o.frames);
    std::printf("  %s full zoom-out, %s lanes only: median %.3f ms, min %.3f\n", label.c_str(), counters ? "counter" : "event",
                p.medianMs, p.minMs);
  }
  // Every rank as a summary track (collapsed ranks), no lanes: what a 64-rank run opens on.
  {
    auto sv = full;
    sv.lanes.clear();
    for (int r = 0; r < static_cast<int>(idx->ranks().size()); ++r) sv.summaryRanks.push_back(r);
    const FrameFigures p = timeFrames(*idx, sv, o.frames);
    std::size_t spans = 0;
    for (const auto& rk : idx->ranks()) spans += rk.computeCover.size() + rk.workCover.size() + rk.exposedCover.size();
    std::printf("  %s full zoom-out, summary tracks of all %zu ranks: median %.3f ms, min %.3f (%zu coverage spans)\n",
                label.c_str(), idx->ranks().size(), p.medianMs, p.minMs, spans);
  }
  // Closer zoom levels, centred on the middle of the run.
  const TimeNs span = idx->maxEnd() - idx->minStart();
  const TimeNs mid = idx->minStart() + span / 2;
  for (TimeNs div : {TimeNs(20), TimeNs(1000), TimeNs(100000)}) {
    const TimeNs w = std::max<TimeNs>(1, span / div);
    const FrameFigures z = timeFrames(*idx, viewAll(*idx, mid - w / 2, mid + w / 2, o.width, o.threads), o.frames);
    std::printf("  %s zoom 1/%lld (%.3f ms window): median %.3f ms, %zu rects (%zu folded)\n", label.c_str(),
                static_cast<long long>(div), static_cast<double>(w) / 1e6, z.medianMs, z.rects, z.folded);
  }
  // Range statistics of the whole run on rank 0 (the selection a user drags over everything).
  const auto t0 = std::chrono::steady_clock::now();
  const auto rs = core::timeline::rangeStatistics(*idx, 0, idx->minStart(), idx->maxEnd());
  std::printf("  %s range statistics, rank 0, whole run: %.2f ms (%lld collectives)\n", label.c_str(), msSince(t0),
              static_cast<long long>(rs.collectives));
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parseArgs(argc, argv);
  if (!o.db.empty()) {
    return inChild([&] { measure(o.db, o.run, "run", o); }) ? 0 : 1;
  }
  fs::path dir = o.dir.empty() ? fs::temp_directory_path() / ("bench_timeline_" + std::to_string(getpid())) : fs::path(o.dir);
  fs::create_directories(dir);
  int rc = 0;
  for (std::uint64_t n : o.sizes) {
    const std::string label = sizeLabel(n);
    const std::string db = (dir / ("timeline_" + label + ".db")).string();
    fs::remove(db);
    fs::remove(db + "-wal");
    fs::remove(db + "-shm");
    RunId run;
    const auto t0 = std::chrono::steady_clock::now();
    // Generated in a child so that the measuring child starts from a small heap.
    const bool ok = inChild([&] {
      const Generated g = generate(db, n, o.ranks);
      std::printf("  %s: generated %llu events over %d ranks in %.1f s (%.0f MB database)\n", label.c_str(),
                  static_cast<unsigned long long>(g.events), o.ranks, msSince(t0) / 1000.0,
                  static_cast<double>(fs::file_size(db)) / 1e6);
    });
    if (!ok) {
      rc = 1;
      continue;
    }
    {
      core::TraceStore store(db, core::Database::Mode::ReadOnly);
      run = store.latestRunId().value_or(core::RunId{});
    }
    if (!inChild([&] { measure(db, run, label, o); })) rc = 1;
    if (!o.keep) {
      fs::remove(db);
      fs::remove(db + "-wal");
      fs::remove(db + "-shm");
    }
  }
  if (!o.keep && o.dir.empty()) fs::remove_all(dir);
  return rc;
}
