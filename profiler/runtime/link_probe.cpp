#include "profiler/runtime/link_probe.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>

#include "core/model/types.h"
#include "profiler/runtime/comm.h"

namespace shardscope::runtime {

LinkProbePlan planLinkProbe(std::int64_t maxBytes, int groupSize, int points, int repeats, std::int64_t budgetBytes) {
  LinkProbePlan plan;
  const std::int64_t quantum = 4 * static_cast<std::int64_t>(std::max(1, groupSize));
  const std::int64_t lo = 4096;
  const std::int64_t hi = std::max(lo, maxBytes);
  points = std::max(2, points);
  for (int i = 0; i < points; ++i) {
    const double f = static_cast<double>(i) / (points - 1);
    const double b =
        std::exp(std::log(static_cast<double>(lo)) + f * (std::log(static_cast<double>(hi)) - std::log(static_cast<double>(lo))));
    std::int64_t s = std::max(quantum, static_cast<std::int64_t>(std::llround(b / static_cast<double>(quantum))) * quantum);
    if (!plan.bytes.empty() && s <= plan.bytes.back()) continue;
    plan.bytes.push_back(s);
    plan.repeats.push_back(static_cast<int>(std::clamp<std::int64_t>(budgetBytes / s, 1, std::max(1, repeats))));
  }
  return plan;
}

double runLinkProbe(Group& g, const LinkProbePlan& plan, torch::Device device, bool bf16Reduce) {
  torch::NoGradGuard ng;
  const auto t0 = std::chrono::steady_clock::now();
  const int n = g.size();
  for (std::size_t index = 0; index < plan.bytes.size(); ++index) {
    const std::int64_t bytes = plan.bytes[index];
    // Warm-ups set up connections and touch buffers: needed at the first sizes, not past 1 MiB.
    const int warm = bytes <= (std::int64_t{1} << 20) ? plan.warmups : 0;
    const int reps = warm + plan.repeats[index];
    for (int r = 0; r < reps; ++r) {
      CollectiveInfo info;
      info.label = std::string(core::kLinkProbeLabel) + (r < warm ? " warmup" : "");
      // All-gather: S is the gathered array, each rank contributes S/n bytes.
      {
        const std::int64_t per = std::max<std::int64_t>(1, bytes / 4 / n);
        auto in = torch::ones({per}, torch::TensorOptions().dtype(torch::kFloat32).device(device));
        auto out = torch::empty({per * n}, in.options());
        g.allGather(out, in, info).wait();
      }
      // Reduce-scatter and all-reduce of S bytes of fp32 gradients (sent in bf16 with bf16Reduce,
      // as the run sends them: the recorded S is then half).
      CollectiveInfo red = info;
      red.bf16Reduce = bf16Reduce;
      {
        const std::int64_t per = std::max<std::int64_t>(1, bytes / 4 / n);
        auto in = torch::ones({per * n}, torch::TensorOptions().dtype(torch::kFloat32).device(device));
        auto out = torch::empty({per}, in.options());
        g.reduceScatter(out, in, red).wait();
      }
      {
        auto t =
            torch::ones({std::max<std::int64_t>(1, bytes / 4)}, torch::TensorOptions().dtype(torch::kFloat32).device(device));
        g.allReduce(t, red).wait();
      }
    }
  }
#ifdef SHARDSCOPE_WITH_CUDA
  if (device.is_cuda()) torch::cuda::synchronize();
#endif
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int loadedProbeRounds(double flops) {
  constexpr double kFlopsPerSize = 4.5e9;
  if (!(flops > 0)) return 24;
  return static_cast<int>(std::clamp<double>(std::floor(kFlopsPerSize / flops), 8, 24));
}

double runLoadedGatherProbe(Group& g, const std::vector<LoadedProbeSize>& sizes, torch::Device device, torch::Dtype dtype,
                            std::int64_t tokens, int warmups, double leadS) {
  torch::NoGradGuard ng;
  const auto t0 = std::chrono::steady_clock::now();
  const int n = g.size();
  const auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(device);
  const auto sync = [&] {
#ifdef SHARDSCOPE_WITH_CUDA
    if (device.is_cuda()) torch::cuda::synchronize();
#endif
  };
  for (const auto& size : sizes) {
    // The module's product: drawn in fp32 and cast (LibTorch 1.13 has no CPU randn for bf16).
    const auto x = torch::randn({std::max<std::int64_t>(1, tokens), std::max<std::int64_t>(1, size.in)}, f32).to(dtype);
    const auto w = torch::randn({std::max<std::int64_t>(1, size.in), std::max<std::int64_t>(1, size.out)}, f32).to(dtype);
    const auto lead = [&] {
      const auto c0 = std::chrono::steady_clock::now();
      do {
        auto y = torch::matmul(x, w);
        sync();
      } while (std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count() < leadS);
    };
    const std::int64_t per = std::max<std::int64_t>(1, size.gatheredBytes / 4 / n);
    g.barrier();
    for (int r = 0; r < warmups + size.rounds; ++r) {
      // A chain, as a forward without prefetch: gather, the module's product, gather; the late
      // rank computes a little more first.
      if (r % n == g.rank()) lead();
      CollectiveInfo info;
      info.label = std::string(core::kLoadedProbeLabel) + (r < warmups ? " warmup" : "");
      auto in = torch::ones({per}, f32);
      auto out = torch::empty({per * n}, f32);
      g.allGather(out, in, info).wait();
      auto y = torch::matmul(x, w);
      sync();
    }
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

ComputeProbe runComputeProbe(torch::Device device, torch::Dtype dtype, std::int64_t tokens, std::int64_t maxDim) {
  torch::NoGradGuard ng;
  ComputeProbe out;
  const auto sync = [&] {
#ifdef SHARDSCOPE_WITH_CUDA
    if (device.is_cuda()) torch::cuda::synchronize();
#endif
  };
  // GFLOP/s of f(): one warm-up (first use of the kernel and the buffers), then repeated until
  // ~20 ms have passed (twice at least, once where one product takes longer, at most 8 times). The
  // fastest repetition counts: a disturbance (another process, a rank descheduled for a time slice)
  // only ever slows one down, and on a shared machine the mean carried it into the rate (a point 22 %
  // below its neighbours on val25; the reader interpolates such dips too: smoothGemmDips).
  const auto rate = [&](double flopsPerCall, const std::function<torch::Tensor()>& f) {
    const auto w0 = std::chrono::steady_clock::now();
    auto c = f();
    sync();
    const double warm = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
    const int minReps = warm > 0.02 ? 1 : 2;
    int reps = 0;
    double s = 0, best = 0;
    const auto t0 = std::chrono::steady_clock::now();
    do {
      const auto c0 = std::chrono::steady_clock::now();
      c = f();
      sync();
      const auto c1 = std::chrono::steady_clock::now();
      const double one = std::chrono::duration<double>(c1 - c0).count();
      if (reps == 0 || one < best) best = one;
      ++reps;
      s = std::chrono::duration<double>(c1 - t0).count();
    } while (reps < 8 && (reps < minReps || s < 0.02));
    return best > 0 ? flopsPerCall / best / 1e9 : 0.0;
  };
  for (std::int64_t d = 64; d <= maxDim; d *= 2) {
    // Drawn in fp32 and cast: LibTorch 1.13 has no CPU randn for bf16.
    const auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(device);
    auto a = torch::randn({tokens, d}, f32).to(dtype);
    auto b = torch::randn({d, d}, f32).to(dtype);
    auto g = torch::randn({tokens, d}, f32).to(dtype);
    const double flops = 2.0 * static_cast<double>(tokens) * static_cast<double>(d) * static_cast<double>(d);
    out.forward.push_back({d, rate(flops, [&] { return torch::matmul(a, b); })});
    out.weight.push_back({d, rate(flops, [&] { return torch::matmul(a.t(), g); })});
  }
  return out;
}

}  // namespace shardscope::runtime
