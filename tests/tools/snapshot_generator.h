#pragma once
// Generates a core::MemorySnapshot directly (no pickle) shaped like a training job's: blocks alive
// before recording (parameters, some freed in the trace without their alloc), then steps of a forward
// (activations kept for backward, short-lived temporaries), a backward that frees the activations
// mostly in reverse (some out of order), gradients and optimizer state. Deterministic for a seed. For
// the band layout's tests (tests/core/tst_snapshot_bands) and its benchmark (bench_snapshot_bands).
#include <cstdint>
#include <random>
#include <vector>

#include "core/model/memory_snapshot.h"

namespace shardscope::test {

inline core::MemorySnapshot generatedMemorySnapshot(std::int64_t events, std::uint64_t seed = 7) {
  core::MemorySnapshot s;
  s.frames = {{"forward", "/home/me/model.py", 42},
              {"backward", "/venv/lib/python3.12/site-packages/torch/autograd/__init__.py", 200},
              {"AccumulateGrad", "??", 0},
              {"step", "/venv/lib/python3.12/site-packages/torch/optim/adamw.py", 100},
              {"reset_parameters", "/venv/lib/python3.12/site-packages/torch/nn/modules/linear.py", 110}};
  s.stacks = {{0}, {1, 0}, {2}, {3}, {4}};  // activations, backward temp, gradients, optimizer, parameters
  std::mt19937_64 rng(seed);
  const auto pick = [&](std::int64_t lo, std::int64_t hi) {
    return lo + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(hi - lo + 1));
  };
  std::uint64_t nextAddr = 0x7f0000000000;
  const auto newAddr = [&](std::int64_t size) {
    const std::uint64_t a = nextAddr;
    nextAddr += static_cast<std::uint64_t>(size + 511) / 512 * 512;
    return a;
  };
  std::int64_t seq = 0;
  core::TimeNs ts = 1'700'000'000'000'000'000;
  const auto push = [&](core::MemAction action, std::uint64_t addr, std::int64_t size, core::StackId stack) {
    s.events.push_back({0, seq++, ts, action, addr, size, 0, stack});
    ts += pick(200, 5000);
  };
  // Parameters alive before recording (in the segments at the dump, never in the trace).
  for (int i = 0; i < 40; ++i) s.prior.push_back({0, newAddr(1 << 22), pick(1 << 20, 8 << 20), 4, false});
  // Blocks allocated before recording and freed in it (their free has no alloc before it).
  std::vector<std::pair<std::uint64_t, std::int64_t>> priorFreed;
  for (int i = 0; i < 20; ++i) priorFreed.emplace_back(newAddr(1 << 20), pick(4096, 1 << 20));
  struct Live {
    std::uint64_t addr;
    std::int64_t size;
    core::StackId stack;
  };
  const auto alloc = [&](std::int64_t size, core::StackId stack) {
    const Live l{newAddr(size), size, stack};
    push(core::MemAction::Alloc, l.addr, l.size, l.stack);
    return l;
  };
  const auto release = [&](const Live& l) {
    push(core::MemAction::FreeRequested, l.addr, l.size, l.stack);
    push(core::MemAction::FreeCompleted, l.addr, l.size, l.stack);
  };
  std::vector<Live> grads, optim;
  while (static_cast<std::int64_t>(s.events.size()) < events) {
    if (!priorFreed.empty()) {
      release({priorFreed.back().first, priorFreed.back().second, -1});
      priorFreed.pop_back();
    }
    std::vector<Live> saved;
    for (int layer = 0; layer < 200 && static_cast<std::int64_t>(s.events.size()) < events; ++layer) {
      saved.push_back(alloc(pick(1 << 16, 32 << 20), 0));
      for (int k = 0; k < 4; ++k) release(alloc(pick(512, 1 << 16), 0));  // temporaries
      if (pick(0, 9) == 0) saved.push_back(alloc(pick(512, 8192), 0));    // small saved tensors
    }
    while (!saved.empty() && static_cast<std::int64_t>(s.events.size()) < events) {
      // Mostly in reverse; one in eight frees an older activation first.
      std::size_t i = saved.size() - 1;
      if (saved.size() > 4 && pick(0, 7) == 0) i = static_cast<std::size_t>(pick(0, static_cast<std::int64_t>(saved.size()) - 2));
      const Live tmp = alloc(pick(512, 1 << 20), 1);
      release(saved[i]);
      saved.erase(saved.begin() + static_cast<std::ptrdiff_t>(i));
      release(tmp);
      if (grads.size() < 64 && pick(0, 3) == 0) grads.push_back(alloc(pick(1 << 18, 4 << 20), 2));
    }
    for (const Live& g : grads) optim.push_back(alloc(g.size * 2, 3));
    while (optim.size() > 64) {
      release(optim.front());
      optim.erase(optim.begin());
    }
    for (const Live& g : grads) release(g);
    grads.clear();
  }
  return s;
}

}  // namespace shardscope::test
