#include "tests/tools/kineto_generator.h"

#include <zlib.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace shardscope::test {
namespace {

using i64 = std::int64_t;
using u64 = std::uint64_t;

// xoshiro256** seeded with splitmix64. std distributions differ between standard libraries, and a
// seed must give the same bytes with gcc and clang builds (the fuzz corpus and the benchmark rely on it).
class Rng {
 public:
  explicit Rng(u64 seed) {
    for (auto& w : s_) {
      seed += 0x9E3779B97F4A7C15ull;
      u64 z = seed;
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      w = z ^ (z >> 31);
    }
  }
  u64 next() {
    const u64 result = rotl(s_[1] * 5, 7) * 9;
    const u64 t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  u64 below(u64 n) { return n ? next() % n : 0; }
  i64 range(i64 lo, i64 hi) { return hi <= lo ? lo : lo + static_cast<i64>(below(static_cast<u64>(hi - lo) + 1)); }
  double unit() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }
  bool chance(double p) { return unit() < p; }

 private:
  static u64 rotl(u64 x, int k) { return (x << k) | (x >> (64 - k)); }
  u64 s_[4];
};

void appendInt(std::string& out, i64 v) {
  char b[24];
  const auto r = std::to_chars(b, b + sizeof b, v);
  out.append(b, r.ptr);
}

void appendDouble(std::string& out, double v) {
  char b[40];
  const auto r = std::to_chars(b, b + sizeof b, v, std::chars_format::general, 7);
  out.append(b, r.ptr);
}

void appendQuoted(std::string& out, std::string_view s) {
  out.push_back('"');
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
      out += b;
    } else {
      out.push_back(c);
    }
  }
  out.push_back('"');
}

// Re-lays compact JSON (", "/": " separators allowed) out like Python's json.dump(indent=4), starting
// at nesting level `depth`.
void appendPretty(std::string& out, std::string_view json, int depth) {
  bool inStr = false;
  bool esc = false;
  auto newline = [&](int d) {
    out.push_back('\n');
    out.append(static_cast<std::size_t>(d) * 4, ' ');
  };
  for (std::size_t i = 0; i < json.size(); ++i) {
    const char c = json[i];
    if (inStr) {
      out.push_back(c);
      if (esc)
        esc = false;
      else if (c == '\\')
        esc = true;
      else if (c == '"')
        inStr = false;
      continue;
    }
    switch (c) {
      case ' ':
      case '\n':
      case '\t':
      case '\r':
        break;
      case '"':
        inStr = true;
        out.push_back(c);
        break;
      case '{':
      case '[': {
        std::size_t j = i + 1;
        while (j < json.size() && json[j] == ' ') ++j;
        if (j < json.size() && (json[j] == '}' || json[j] == ']')) {
          out.push_back(c);
          out.push_back(json[j]);
          i = j;
          break;
        }
        out.push_back(c);
        newline(++depth);
        break;
      }
      case '}':
      case ']':
        newline(--depth);
        out.push_back(c);
        break;
      case ',':
        out.push_back(',');
        newline(depth);
        break;
      case ':':
        out += ": ";
        break;
      default:
        out.push_back(c);
    }
  }
}

// Buffered output to a plain or gzip file; counts the uncompressed bytes.
class Sink {
 public:
  Sink(const std::string& path, int gzipLevel) : path_(path) {
    const bool gz = path.size() >= 3 && path.compare(path.size() - 3, 3, ".gz") == 0;
    if (gz) {
      char mode[8];
      std::snprintf(mode, sizeof mode, "wb%d", std::clamp(gzipLevel, 0, 9));
      gz_ = gzopen(path.c_str(), mode);
      if (!gz_) throw std::runtime_error(path + ": cannot create file");
      gzbuffer(gz_, 1u << 20);
    } else {
      f_ = std::fopen(path.c_str(), "wb");
      if (!f_) throw std::runtime_error(path + ": cannot create file: " + std::strerror(errno));
    }
    buf_.reserve(kFlushAt + (1u << 16));
  }
  ~Sink() {
    if (f_) std::fclose(f_);
    if (gz_) gzclose(gz_);
  }
  Sink(const Sink&) = delete;
  Sink& operator=(const Sink&) = delete;

  std::string& buf() { return buf_; }
  void maybeFlush() {
    if (buf_.size() >= kFlushAt) flush();
  }
  void finish() {
    flush();
    if (f_) {
      const bool bad = std::fclose(f_) != 0;
      f_ = nullptr;
      if (bad) throw std::runtime_error(path_ + ": write error");
    }
    if (gz_) {
      const int rc = gzclose(gz_);
      gz_ = nullptr;
      if (rc != Z_OK) throw std::runtime_error(path_ + ": gzip write error");
    }
  }
  u64 bytes() const { return bytes_ + buf_.size(); }

 private:
  static constexpr std::size_t kFlushAt = 1u << 20;
  void flush() {
    if (buf_.empty()) return;
    if (f_) {
      if (std::fwrite(buf_.data(), 1, buf_.size(), f_) != buf_.size())
        throw std::runtime_error(path_ + ": write error: " + std::strerror(errno));
    } else if (gz_) {
      if (gzwrite(gz_, buf_.data(), static_cast<unsigned>(buf_.size())) != static_cast<int>(buf_.size()))
        throw std::runtime_error(path_ + ": gzip write error");
    }
    bytes_ += buf_.size();
    buf_.clear();
  }
  std::string path_;
  std::FILE* f_ = nullptr;
  gzFile gz_ = nullptr;
  std::string buf_;
  u64 bytes_ = 0;
};

// Appends `"key": value` pairs of an args object.
class Args {
 public:
  explicit Args(std::string& out) : out_(out) {}
  Args& i(std::string_view k, i64 v) {
    key(k);
    appendInt(out_, v);
    return *this;
  }
  Args& d(std::string_view k, double v) {
    key(k);
    appendDouble(out_, v);
    return *this;
  }
  Args& s(std::string_view k, std::string_view v) {
    key(k);
    appendQuoted(out_, v);
    return *this;
  }
  Args& raw(std::string_view k, std::string_view json) {
    key(k);
    out_ += json;
    return *this;
  }

 private:
  void key(std::string_view k) {
    if (!first_) out_ += ", ";
    first_ = false;
    appendQuoted(out_, k);
    out_ += ": ";
  }
  std::string& out_;
  bool first_ = true;
};

enum class Coll { AllGather, ReduceScatter, AllReduce };

struct KernelShape {
  i64 grid[3];
  int block[3];
  int regs;
  int smem;
};

// Kernel names as CUDA/cuBLAS/ATen print them (H100 for the current format, A100 for 2022).
constexpr std::string_view kGemmNew[3] = {
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas",
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_nn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_nt_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"};
constexpr std::string_view kGemmOld[3] = {"ampere_bf16_s16816gemm_bf16_256x128_ldg8_f2f_stages_64x3_tn",
                                          "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_nn",
                                          "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_nt"};
constexpr std::string_view kGelu =
    "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, "
    "at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(c10::BFloat16)#1}, "
    "std::array<char*, 2ul> >(int, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}"
    "::operator()() const::{lambda()#2}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul>)";
constexpr std::string_view kGeluBwd =
    "void at::native::vectorized_elementwise_kernel<4, at::native::GeluBackwardCUDAKernelImpl(at::TensorIteratorBase&, "
    "at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(c10::BFloat16, "
    "c10::BFloat16)#1}, std::array<char*, 3ul> >(int, at::native::GeluBackwardCUDAKernelImpl(at::TensorIteratorBase&, "
    "at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(c10::BFloat16, "
    "c10::BFloat16)#1}, std::array<char*, 3ul>)";
constexpr std::string_view kAdd =
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul> "
    ">(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)";
constexpr std::string_view kFill =
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >(int, "
    "at::native::FillFunctor<float>, std::array<char*, 1ul>)";
constexpr std::string_view kSum =
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<c10::BFloat16, at::native::func_wrapper_t<float, "
    "at::native::sum_functor<c10::BFloat16, float, c10::BFloat16>::operator()(at::TensorIterator&)::{lambda(float, "
    "float)#1}>, unsigned int, c10::BFloat16, 4> >(at::native::ReduceOp<c10::BFloat16, at::native::func_wrapper_t<float, "
    "at::native::sum_functor<c10::BFloat16, float, c10::BFloat16>::operator()(at::TensorIterator&)::{lambda(float, "
    "float)#1}>, unsigned int, c10::BFloat16, 4>)";
constexpr std::string_view kSoftmax =
    "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, at::native::(anonymous "
    "namespace)::LogSoftMaxForwardEpilogue>(float*, float const*, int)";
constexpr std::string_view kSoftmaxBwd =
    "void at::native::(anonymous namespace)::cunn_SoftMaxBackward<4, float, float, float, at::native::(anonymous "
    "namespace)::LogSoftMaxBackwardEpilogue>(float*, float const*, float const*, int)";
constexpr std::string_view kNll =
    "void at::native::(anonymous namespace)::nll_loss_forward_reduce_cuda_kernel_2d<float, float, long>(float*, float*, "
    "float const*, long const*, float const*, bool, long, long, long, long)";
constexpr std::string_view kNllBwd =
    "void at::native::(anonymous namespace)::nll_loss_backward_reduce_cuda_kernel_2d<float, long>(float*, float const*, "
    "long const*, float const*, float const*, bool, int, int, long, long)";
constexpr std::string_view kForeach[6] = {
    "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<1>, "
    "at::native::(anonymous namespace)::BinaryOpScalarFunctor<float, 1, 1, 0>, std::multiplies<float>, float>"
    "(at::native::(anonymous namespace)::TensorListMetadata<1>, at::native::(anonymous namespace)::BinaryOpScalarFunctor<float, "
    "1, 1, 0>, std::multiplies<float>, float)",
    "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<2>, "
    "at::native::(anonymous namespace)::BinaryOpListAlphaFunctor<float, 2, 2, 0>, std::plus<float>, float>"
    "(at::native::(anonymous namespace)::TensorListMetadata<2>, at::native::(anonymous "
    "namespace)::BinaryOpListAlphaFunctor<float, "
    "2, 2, 0>, std::plus<float>, float)",
    "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<3>, "
    "at::native::(anonymous namespace)::PointwiseOpScalarFunctor<float, 3, 3, 0>, std::multiplies<float>, float>"
    "(at::native::(anonymous namespace)::TensorListMetadata<3>, at::native::(anonymous "
    "namespace)::PointwiseOpScalarFunctor<float, "
    "3, 3, 0>, std::multiplies<float>, float)",
    "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<2>, "
    "at::native::(anonymous namespace)::UnaryOpFunctor<float, 2, 1, 1>, at::native::(anonymous namespace)::Sqrt<float> >"
    "(at::native::(anonymous namespace)::TensorListMetadata<2>, at::native::(anonymous namespace)::UnaryOpFunctor<float, 2, 1, "
    "1>, "
    "at::native::(anonymous namespace)::Sqrt<float>)",
    "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<1>, "
    "at::native::(anonymous namespace)::BinaryOpScalarFunctor<float, 1, 1, 0>, std::plus<float>, float>"
    "(at::native::(anonymous namespace)::TensorListMetadata<1>, at::native::(anonymous namespace)::BinaryOpScalarFunctor<float, "
    "1, 1, 0>, std::plus<float>, float)",
    "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<3>, "
    "at::native::(anonymous namespace)::PointwiseOpScalarFunctor<float, 3, 3, 0>, std::divides<float>, float>"
    "(at::native::(anonymous namespace)::TensorListMetadata<3>, at::native::(anonymous "
    "namespace)::PointwiseOpScalarFunctor<float, "
    "3, 3, 0>, std::divides<float>, float)"};
constexpr std::string_view kForeachOps[6] = {"aten::_foreach_mul_", "aten::_foreach_add_", "aten::_foreach_addcmul_",
                                             "aten::_foreach_sqrt", "aten::_foreach_add_", "aten::_foreach_addcdiv_"};

constexpr int kComputeStream = 7;
constexpr int kNcclStream = 21;
constexpr int kUnit = 4;  // layers per FSDP unit (one all-gather / reduce-scatter each)
constexpr i64 kHidden = 2048;
constexpr i64 kFfn = 8192;

class Generator {
 public:
  Generator(const KinetoGenOptions& o, Sink& sink, std::string path)
      : o_(o), sink_(sink), path_(std::move(path)), s_(o.seed * 0x2545F4914F6CDD1Dull + static_cast<u64>(o.rank) + 1) {
    nw_ = o.newFormat;
    world_ = std::max(1, o.worldSize);
    device_ = ((o.rank % 8) + 8) % 8;
    pid_ = 40000 + static_cast<i64>(Rng(o.seed).below(20000)) + o.rank * 131;
    mainTid_ = pid_;
    bwdTid_ = pid_ + 283;
    numSms_ = nw_ ? 132 : 108;
    // Kineto floors the epoch to a 7,889,238 s boundary for the base (traces.md §1.2).
    constexpr i64 kBaseStep = 7'889'238'000'000'000LL;
    const i64 epoch = nw_ ? 1'768'554'939'862'757'064LL : 1'661'203'462'584'767'000LL;
    base_ = nw_ ? epoch / kBaseStep * kBaseStep : 0;
    startNs_ = epoch + static_cast<i64>(Rng(o.seed + 7).below(3'600'000'000'000ull)) + o.rank * 37'000;
    if (!nw_) startNs_ -= startNs_ % 1000;
    ranksText_ = "[";
    for (int r = 0; r < world_; ++r) {
      if (r) ranksText_ += ", ";
      ranksText_ += std::to_string(r);
    }
    ranksText_ += "]";
  }

  KinetoGenStats run() {
    writeHeader();
    i64 t = startNs_ + q(250'000);
    traceStart_ = startNs_;

    // Calibrate the events a step produces as a + b·layers, and the fixed tail, with dry runs.
    const State saved = s_;
    dry_ = true;
    const double e4 = static_cast<double>(dryStepEvents(t, 4));
    const double e8 = static_cast<double>(dryStepEvents(t, 8));
    const u64 before = s_.st.traceEvents;
    writeTail(t);
    const u64 tail = s_.st.traceEvents - before;
    s_ = saved;
    dry_ = false;
    const double b = std::max(1.0, (e8 - e4) / 4.0);
    const double a = std::max(0.0, e4 - 4 * b);

    const double budget = std::max(0.0, static_cast<double>(o_.events) - static_cast<double>(tail));
    int steps = std::max(1, o_.steps);
    while (steps > 1 && budget / steps < a + b) --steps;
    const double layersPerStep = std::max(1.0, (budget / steps - a) / b);
    // Activation memory must fit an 80 GB GPU: more layers per step means fewer tokens per layer.
    tokens_ = 4096;
    while (tokens_ > 128 && 2.0 * layersPerStep * static_cast<double>(tokens_ * kFfn * 2) > 40.0 * (1ull << 30)) tokens_ /= 2;
    buildDims();

    for (int i = 0; i < steps; ++i) {
      const double target = budget * (i + 1) / steps;
      const double remaining = target - static_cast<double>(s_.st.traceEvents);
      const int layers = static_cast<int>(std::clamp(std::llround((remaining - a) / b), 1LL, 10'000'000LL));
      t = writeStep(o_.firstStep + i, layers, t);
      t += rr(40'000, 160'000);
    }
    writeTail(t);
    endDocument();
    sink_.finish();
    s_.st.bytes = sink_.bytes();
    return s_.st;
  }

 private:
  struct Free {
    i64 size;
    std::vector<i64> addrs;
  };
  // Everything a dry run may change: a dry run of a step (to learn its end before writing the
  // ProfilerStep that encloses it) restores this afterwards, so the real run repeats it exactly.
  struct State {
    explicit State(u64 seed) : rng(seed) {}
    Rng rng;
    i64 s7Free = 0, s21Free = 0, s7WaitUntil = 0;
    i64 agThis = 0, agNext = 0;  // end of the all-gather of the current / next FSDP unit
    i64 ext = 0, corr = 15, evIdx = 0, pyId = 1000, seq = 0;
    i64 allocated = 3ll << 30, reserved = 4ll << 30, nextAddr = 0;
    std::vector<Free> freeLists;
    std::vector<std::pair<i64, i64>> saved;  // activations kept for backward (addr, bytes)
    i64 stepFirst[2] = {0, 0}, stepLast[2] = {0, 0};
    KinetoGenStats st;
  };
  enum class Cat { CpuOp, Annotation, Python };
  struct Span {
    int slot = -1;
    i64 ext = 0;
    i64 pyId = 0;
  };
  struct Pending {
    std::string line;
    std::string name;
    std::string args;
    Cat cat = Cat::CpuOp;
    i64 tid = 0;
    i64 ts = 0;
    bool ready = false;
  };
  struct Layer {
    i64 in, out;
    bool gelu;
  };

  // ---- time ------------------------------------------------------------------------------
  // The 2022 format has integer µs: every time is kept on the µs grid there, so rounding can never
  // make children stick out of their parents or kernels overlap.
  i64 q(i64 ns) const {
    if (nw_) return std::max<i64>(ns, 1);
    return std::max<i64>(1000, (ns + 999) / 1000 * 1000);
  }
  i64 rr(i64 lo, i64 hi) { return q(s_.rng.range(lo, hi)); }
  // base ± pct, with an occasional slow outlier (page faults, clock boosts, contention).
  i64 jit(double ns, double pct) {
    double v = ns * (1.0 + pct * (2.0 * s_.rng.unit() - 1.0));
    if (s_.rng.chance(0.01)) v *= 2.0 + 4.0 * s_.rng.unit();
    return q(static_cast<i64>(v));
  }

  void appendTs(std::string& out, i64 absNs) const {
    if (!nw_) {
      appendInt(out, absNs / 1000);
      return;
    }
    const i64 rel = std::max<i64>(0, absNs - base_);
    appendInt(out, rel / 1000);
    out.push_back('.');
    const i64 frac = rel % 1000;
    out.push_back(static_cast<char>('0' + frac / 100));
    out.push_back(static_cast<char>('0' + frac / 10 % 10));
    out.push_back(static_cast<char>('0' + frac % 10));
  }
  void appendDur(std::string& out, i64 ns) const {
    if (!nw_) {
      appendInt(out, ns / 1000);
      return;
    }
    appendInt(out, ns / 1000);
    out.push_back('.');
    const i64 frac = ns % 1000;
    out.push_back(static_cast<char>('0' + frac / 100));
    out.push_back(static_cast<char>('0' + frac / 10 % 10));
    out.push_back(static_cast<char>('0' + frac % 10));
  }

  // ---- document ----------------------------------------------------------------------------
  void topMember(std::string_view key, std::string_view value) {
    std::string& b = sink_.buf();
    b += firstMember_ ? "\n" : ",\n";
    firstMember_ = false;
    b.append(o_.indent ? 4 : 2, ' ');
    appendQuoted(b, key);
    b += ": ";
    if (o_.indent)
      appendPretty(b, value, 1);
    else
      b += value;
  }
  void writeEventLine(std::string_view line) {
    std::string& b = sink_.buf();
    b += firstEvent_ ? "\n" : ",\n";
    firstEvent_ = false;
    if (o_.indent) {
      b.append(8, ' ');
      appendPretty(b, line, 2);
    } else {
      b.append(4, ' ');
      b += line;
    }
    sink_.maybeFlush();
  }

  void writeHeader() {
    sink_.buf() += "{";
    topMember("schemaVersion", "1");
    std::string v = "[";
    for (int d = 0; d < 8; ++d) {
      if (d) v += ", ";
      if (nw_)
        v += "{\"id\": " + std::to_string(d) +
             ", \"name\": \"NVIDIA H100 80GB HBM3\", \"totalGlobalMem\": 85029158912, \"computeMajor\": 9, "
             "\"computeMinor\": 0, \"maxThreadsPerBlock\": 1024, \"maxThreadsPerMultiprocessor\": 2048, "
             "\"regsPerBlock\": 65536, \"warpSize\": 32, \"sharedMemPerBlock\": 49152, \"numSms\": 132, "
             "\"regsPerMultiprocessor\": 65536, \"sharedMemPerBlockOptin\": 232448, \"sharedMemPerMultiprocessor\": 233472}";
      else
        v += "{\"id\": " + std::to_string(d) +
             ", \"name\": \"NVIDIA A100-SXM4-80GB\", \"totalGlobalMem\": 85198045184, \"computeMajor\": 8, "
             "\"computeMinor\": 0, \"maxThreadsPerBlock\": 1024, \"maxThreadsPerMultiprocessor\": 2048, "
             "\"regsPerBlock\": 65536, \"regsPerMultiprocessor\": 65536, \"warpSize\": 32, \"sharedMemPerBlock\": 49152, "
             "\"sharedMemPerMultiprocessor\": 167936, \"numSms\": 108, \"sharedMemPerBlockOptin\": 166912}";
    }
    v += "]";
    topMember("deviceProperties", v);
    if (nw_) {
      topMember("cupti_version", "24");
      topMember("cuda_runtime_version", "12040");
      topMember("cuda_driver_version", "12040");
      v = "{\"backend\": \"nccl\", \"rank\": " + std::to_string(o_.rank) + ", \"world_size\": " + std::to_string(world_) +
          ", \"pg_count\": 3, \"pg_config\": [";
      const char* groups[3][3] = {
          {"0", "default_pg", "cuda:nccl"}, {"1", "undefined", "cuda:nccl"}, {"2", "undefined", "cpu:gloo,cuda:gloo"}};
      for (int g = 0; g < 3; ++g) {
        if (g) v += ", ";
        v += std::string("{\"pg_name\": \"") + groups[g][0] + "\", \"pg_desc\": \"" + groups[g][1] +
             "\", \"backend_config\": \"" + groups[g][2] + "\", \"pg_size\": " + std::to_string(world_) +
             ", \"ranks\": " + ranksText_ + "}";
      }
      v += "], \"nccl_version\": \"2.21.5\"}";
      topMember("distributedInfo", v);
      topMember("record_shapes", "1");
      topMember("profile_memory", o_.withMemory ? "1" : "0");
      topMember("with_stack", o_.withPython ? "1" : "0");
      Rng idRng(o_.seed * 31 + static_cast<u64>(o_.rank));
      char id[40];
      std::snprintf(id, sizeof id, "\"%016llX%016llX\"", static_cast<unsigned long long>(idRng.next()),
                    static_cast<unsigned long long>(idRng.next()));
      topMember("trace_id", id);
      topMember("displayTimeUnit", "\"ms\"");
      topMember("baseTimeNanoseconds", std::to_string(base_));
    } else {
      topMember("distributedInfo", "{\"backend\": \"nccl\", \"rank\": " + std::to_string(o_.rank) +
                                       ", \"world_size\": " + std::to_string(world_) + "}");
    }
    std::string& b = sink_.buf();
    b += ",\n";
    b.append(o_.indent ? 4 : 2, ' ');
    b += "\"traceEvents\": [";
  }

  void endDocument() {
    std::string& b = sink_.buf();
    b += "\n";
    b.append(o_.indent ? 4 : 2, ' ');
    b += "]";
    if (nw_) {
      std::string name;
      appendQuoted(name, path_);
      topMember("traceName", name);
    }
    b += "\n}\n";
  }

  // ---- emitting events ------------------------------------------------------------------------
  std::string& lineStart(std::string_view ph, std::string_view cat, std::string_view name) {
    line_.clear();
    line_ += "{\"ph\": \"";
    line_ += ph;
    line_ += "\", \"cat\": ";
    appendQuoted(line_, cat);
    line_ += ", \"name\": ";
    appendQuoted(line_, name);
    return line_;
  }
  void pidTidCpu(std::string& l, i64 tid) const {
    l += ", \"pid\": ";
    appendInt(l, pid_);
    l += ", \"tid\": ";
    appendInt(l, tid);
  }
  void pidTidGpu(std::string& l, int stream) const {
    l += ", \"pid\": ";
    appendInt(l, device_);
    if (nw_) {
      l += ", \"tid\": ";
      appendInt(l, stream);
    } else {
      l += ", \"tid\": \"stream ";
      appendInt(l, stream);
      l += "\"";
    }
  }
  void tsDur(std::string& l, i64 ts, i64 dur) const {
    l += ", \"ts\": ";
    appendTs(l, ts);
    l += ", \"dur\": ";
    appendDur(l, dur);
  }

  // Activity (runtime/GPU/flow) lines wait until the enclosing CPU subtree has been written.
  std::string& activity() {
    if (actUsed_ == act_.size()) act_.emplace_back();
    std::string& s = act_[actUsed_++];
    s.clear();
    return s;
  }
  void flushIfIdle() {
    if (depth_ != 0 || dry_) return;
    for (std::size_t i = 0; i < pendUsed_; ++i) writeEventLine(pend_[i].line);
    pendUsed_ = 0;
    for (std::size_t i = 0; i < actUsed_; ++i) writeEventLine(act_[i]);
    actUsed_ = 0;
  }
  void countX() {
    ++s_.st.traceEvents;
    ++s_.st.completeEvents;
  }

  static std::string_view catName(Cat c) {
    switch (c) {
      case Cat::CpuOp:
        return "cpu_op";
      case Cat::Annotation:
        return "user_annotation";
      case Cat::Python:
        return "python_function";
    }
    return "cpu_op";
  }

  // Opens a CPU span on `tid` at ts; its line is completed by close() once its end is known. The
  // args callback runs only when the event is really written.
  template <class F>
  Span open(i64 tid, Cat cat, std::string_view name, i64 ts, F&& args) {
    Span sp;
    countX();
    if (cat == Cat::CpuOp) ++s_.st.cpuOps;
    const i64 evIdx = s_.evIdx++;
    if (cat == Cat::Python) {
      sp.pyId = ++s_.pyId;
    } else {
      sp.ext = ++s_.ext;
    }
    if (dry_) return sp;
    if (pendUsed_ == pend_.size()) pend_.emplace_back();
    sp.slot = static_cast<int>(pendUsed_++);
    Pending& p = pend_[static_cast<std::size_t>(sp.slot)];
    p.cat = cat;
    p.name.assign(name);
    p.tid = tid;
    p.ts = ts;
    p.ready = false;
    p.args.clear();
    Args a(p.args);
    args(a, sp, evIdx);
    ++depth_;
    return sp;
  }
  template <class F>
  Span op(i64 tid, std::string_view name, i64 ts, F&& extra) {
    return open(tid, Cat::CpuOp, name, ts, [&](Args& a, const Span& sp, i64 evIdx) { opArgs(a, sp, evIdx, extra); });
  }
  Span annotation(i64 tid, std::string_view name, i64 ts) {
    return open(tid, Cat::Annotation, name, ts, [&](Args& a, const Span& sp, i64 evIdx) {
      if (nw_) {
        a.i("External id", sp.ext).i("Record function id", 0).i("Ev Idx", evIdx);
      } else {
        a.s("Trace name", "PyTorch Profiler").i("Trace iteration", 0).i("External id", sp.ext);
        a.i("Profiler Event Index", evIdx).s("Module Hierarchy", "").s("Call stack", "");
      }
    });
  }
  Span python(i64 tid, std::string_view name, i64 ts, i64 parentPyId, i64 moduleId = -1) {
    return open(tid, Cat::Python, name, ts, [&](Args& a, const Span& sp, i64 evIdx) {
      a.i("Python parent id", parentPyId).i("Python id", sp.pyId);
      if (moduleId >= 0) a.i("Python module id", moduleId);
      if (nw_)
        a.i("Ev Idx", evIdx);
      else
        a.i("Python thread", 0);
    });
  }
  // Standard cpu_op args; `extra` adds the op's shapes (Input Dims, Input type, ...).
  template <class F>
  void opArgs(Args& a, const Span& sp, i64 evIdx, F& extra) {
    if (nw_) {
      a.i("External id", sp.ext).i("Record function id", 0);
      extra(a);
      a.i("Ev Idx", evIdx);
    } else {
      a.s("Trace name", "PyTorch Profiler").i("Trace iteration", 0).i("External id", sp.ext);
      a.i("Profiler Event Index", evIdx);
      extra(a);
      a.s("Module Hierarchy", "").s("Call stack", "");
    }
  }
  void close(const Span& sp, i64 end) {
    if (sp.slot < 0) return;
    Pending& p = pend_[static_cast<std::size_t>(sp.slot)];
    std::string& l = p.line;
    l.clear();
    l += "{\"ph\": \"X\", \"cat\": \"";
    l += catName(p.cat);
    l += "\", \"name\": ";
    appendQuoted(l, p.name);
    pidTidCpu(l, p.tid);
    tsDur(l, p.ts, end - p.ts);
    l += ", \"args\": {";
    l += p.args;
    l += "}}";
    p.ready = true;
    --depth_;
    flushIfIdle();
  }

  // A [memory] instant at ts on tid; bytes < 0 frees.
  void memoryEvent(i64 tid, i64 ts, i64 bytes, i64 addr) {
    if (!o_.withMemory) return;
    ++s_.st.traceEvents;
    ++s_.st.memoryEvents;
    const i64 evIdx = s_.evIdx++;
    if (dry_) return;
    if (pendUsed_ == pend_.size()) pend_.emplace_back();
    Pending& p = pend_[pendUsed_++];
    p.ready = true;
    std::string& l = p.line;
    l.clear();
    l += "{\"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"s\": \"t\", \"name\": \"[memory]\"";
    pidTidCpu(l, tid);
    l += ", \"ts\": ";
    appendTs(l, ts);
    l += ", \"args\": {";
    Args a(l);
    a.i("Total Reserved", s_.reserved).i("Total Allocated", s_.allocated).i("Bytes", bytes).i("Addr", addr);
    a.i("Device Id", device_).i("Device Type", 1);
    if (nw_) a.i("Ev Idx", evIdx);
    l += "}}";
    flushIfIdle();
  }
  // CUDA caching allocator: exact-size blocks are reused, so an address is never live twice.
  i64 alloc(i64 tid, i64 ts, i64 bytes) {
    bytes = (bytes + 511) / 512 * 512;
    i64 addr = -1;
    for (auto& f : s_.freeLists) {
      if (f.size == bytes && !f.addrs.empty()) {
        addr = f.addrs.back();
        f.addrs.pop_back();
        break;
      }
    }
    if (addr < 0) {
      addr = 0x7f2a00000000ll + s_.nextAddr;
      s_.nextAddr += bytes;
    }
    s_.allocated += bytes;
    if (s_.allocated > s_.reserved) s_.reserved = (s_.allocated + (20ll << 20)) / (2ll << 20) * (2ll << 20);
    memoryEvent(tid, ts, bytes, addr);
    return addr;
  }
  void release(i64 tid, i64 ts, i64 addr, i64 bytes) {
    bytes = (bytes + 511) / 512 * 512;
    s_.allocated -= bytes;
    auto it = std::find_if(s_.freeLists.begin(), s_.freeLists.end(), [&](const Free& f) { return f.size == bytes; });
    if (it == s_.freeLists.end()) {
      s_.freeLists.push_back(Free{bytes, {}});
      it = s_.freeLists.end() - 1;
    }
    it->addrs.push_back(addr);
    memoryEvent(tid, ts, -bytes, addr);
  }

  i64 nextCorr() {
    s_.corr += 1 + (s_.rng.chance(0.1) ? static_cast<i64>(s_.rng.below(3)) : 0);
    return s_.corr;
  }

  // A runtime call without GPU work (sync, event record/wait).
  i64 runtimeCall(i64 tid, i64 t, std::string_view name, int cbid, i64 opExt, i64 dur) {
    const i64 corr = nextCorr();
    countX();
    ++s_.st.runtimeEvents;
    if (!dry_) {
      std::string& l = activity();
      l += "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": ";
      appendQuoted(l, name);
      pidTidCpu(l, tid);
      tsDur(l, t, dur);
      l += ", \"args\": {";
      Args{l}.i("External id", nw_ ? opExt : corr).i("cbid", cbid).i("correlation", corr);
      l += "}}";
    }
    return t + dur;
  }

  void trackStepGpu(int stream, i64 start, i64 end) {
    const int k = stream == kComputeStream ? 0 : 1;
    if (s_.stepFirst[k] == 0 || start < s_.stepFirst[k]) s_.stepFirst[k] = start;
    s_.stepLast[k] = std::max(s_.stepLast[k], end);
  }

  // Places GPU work on a stream: after the launch, after the stream's previous work (with the small
  // gap real streams show) and after any dependency. Returns the start.
  i64 placeGpu(int stream, i64 launchTs, i64 dur, i64 dep) {
    i64& freeAt = stream == kComputeStream ? s_.s7Free : s_.s21Free;
    i64 start = launchTs + rr(2'500, 7'500);
    start = std::max(start, freeAt + rr(600, 2'400));
    if (stream == kComputeStream) start = std::max(start, s_.s7WaitUntil + rr(600, 2'400));
    if (dep) start = std::max(start, dep + rr(600, 2'400));
    freeAt = start + dur;
    trackStepGpu(stream, start, start + dur);
    return start;
  }

  void flowPair(i64 tid, i64 rtTs, int stream, i64 gpuTs, i64 corr) {
    s_.st.traceEvents += 2;
    s_.st.launchFlows += 2;
    if (dry_) return;
    const std::string_view cat = nw_ ? "ac2g" : "async_cpu_to_gpu";
    const std::string_view name = nw_ ? "ac2g" : "async_gpu";
    std::string& s = activity();
    s += "{\"ph\": \"s\", \"id\": ";
    appendInt(s, corr);
    pidTidCpu(s, tid);
    s += ", \"ts\": ";
    appendTs(s, rtTs);
    s += ", \"cat\": ";
    appendQuoted(s, cat);
    s += ", \"name\": ";
    appendQuoted(s, name);
    s += nw_ ? "}" : ", \"bp\": \"e\"}";
    std::string& f = activity();
    f += "{\"ph\": \"f\", \"id\": ";
    appendInt(f, corr);
    pidTidGpu(f, stream);
    f += ", \"ts\": ";
    appendTs(f, gpuTs);
    f += ", \"cat\": ";
    appendQuoted(f, cat);
    f += ", \"name\": ";
    appendQuoted(f, name);
    f += ", \"bp\": \"e\"}";
  }

  struct CollInfo {
    Coll kind;
    i64 inElems, outElems;
    std::string_view pgName;
  };

  // cudaLaunchKernel (or cuLaunchKernelEx for NCCL in the current format) at CPU time t from the op
  // `opExt`, its kernel and the flow pair. Returns the end of the CPU call; *kernelEnd gets the GPU end.
  i64 launch(i64 tid, i64 t, i64 opExt, std::string_view kernel, const KernelShape& ks, i64 durNs, int stream = kComputeStream,
             const CollInfo* coll = nullptr, i64 dep = 0, i64* kernelEnd = nullptr) {
    const i64 corr = nextCorr();
    const bool driver = coll && nw_;
    const i64 rtDur = jit(driver ? 9'000 : 5'200, 0.45);
    const i64 kDur = q(durNs);
    const i64 kStart = placeGpu(stream, t, kDur, dep);
    lastKernelStart_ = kStart;
    if (kernelEnd) *kernelEnd = kStart + kDur;
    countX();  // runtime
    ++s_.st.runtimeEvents;
    countX();  // kernel
    ++s_.st.kernels;
    if (coll) ++s_.st.ncclKernels;
    if (!dry_) {
      std::string& r = activity();
      r += driver ? "{\"ph\": \"X\", \"cat\": \"cuda_driver\", \"name\": \"cuLaunchKernelEx\""
                  : "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\"";
      pidTidCpu(r, tid);
      tsDur(r, t, rtDur);
      r += ", \"args\": {";
      if (driver)
        Args{r}.i("cbid", 652).i("correlation", corr);
      else
        Args{r}.i("External id", nw_ ? opExt : corr).i("cbid", 211).i("correlation", corr);
      r += "}}";
      std::string& k = activity();
      k += "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": ";
      appendQuoted(k, kernel);
      pidTidGpu(k, stream);
      tsDur(k, kStart, kDur);
      k += ", \"args\": {";
      Args a(k);
      const double blocks = static_cast<double>(ks.grid[0] * ks.grid[1] * ks.grid[2]) / numSms_;
      const double warps = blocks * ((ks.block[0] * ks.block[1] * ks.block[2] + 31) / 32);
      a.i("External id", nw_ ? opExt : corr).i("queued", 0).i("device", device_).i("context", 1).i("stream", stream);
      a.i("correlation", corr).i("registers per thread", ks.regs).i("shared memory", ks.smem);
      a.d("blocks per SM", blocks).d("warps per SM", warps);
      std::string dims = "[";
      appendInt(dims, ks.grid[0]);
      dims += ", ";
      appendInt(dims, ks.grid[1]);
      dims += ", ";
      appendInt(dims, ks.grid[2]);
      dims += "]";
      a.raw("grid", dims);
      dims = "[";
      appendInt(dims, ks.block[0]);
      dims += ", ";
      appendInt(dims, ks.block[1]);
      dims += ", ";
      appendInt(dims, ks.block[2]);
      dims += "]";
      a.raw("block", dims);
      a.i("est. achieved occupancy %", std::min<i64>(100, std::llround(std::min(warps, 64.0) / 64.0 * 100.0)));
      if (coll && nw_) collectiveArgs(a, *coll, false);
      k += "}}";
    }
    flowPair(tid, t, stream, kStart, corr);
    return t + rtDur;
  }

  // cudaMemcpyAsync / cudaMemsetAsync with its gpu_memcpy / gpu_memset on the compute stream.
  i64 copy(i64 tid, i64 t, i64 opExt, bool memset, std::string_view name, i64 bytes, double bytesPerNs) {
    const i64 corr = nextCorr();
    const i64 rtDur = jit(memset ? 4'000 : 7'500, 0.4);
    const i64 dur = q(static_cast<i64>(1'200 + static_cast<double>(bytes) / bytesPerNs));
    const i64 start = placeGpu(kComputeStream, t, dur, 0);
    countX();
    ++s_.st.runtimeEvents;
    countX();
    if (!dry_) {
      std::string& r = activity();
      r += "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": ";
      r += memset ? "\"cudaMemsetAsync\"" : "\"cudaMemcpyAsync\"";
      pidTidCpu(r, tid);
      tsDur(r, t, rtDur);
      r += ", \"args\": {";
      Args{r}.i("External id", nw_ ? opExt : corr).i("cbid", memset ? 51 : 41).i("correlation", corr);
      r += "}}";
      std::string& g = lineStart("X", memset ? "gpu_memset" : "gpu_memcpy", name);
      pidTidGpu(g, kComputeStream);
      tsDur(g, start, dur);
      g += ", \"args\": {";
      Args{g}
          .i("External id", nw_ ? opExt : corr)
          .i("device", device_)
          .i("context", 1)
          .i("stream", kComputeStream)
          .i("correlation", corr)
          .i("bytes", bytes)
          .d("memory bandwidth (GB/s)", static_cast<double>(bytes) / static_cast<double>(dur));
      g += "}}";
      activity() = g;
    }
    flowPair(tid, t, kComputeStream, start, corr);
    return t + rtDur;
  }

  void collectiveArgs(Args& a, const CollInfo& c, bool cpuSide) const {
    const std::string_view name = c.kind == Coll::AllGather       ? "_allgather_base"
                                  : c.kind == Coll::ReduceScatter ? "_reduce_scatter_base"
                                                                  : "allreduce";
    const std::string_view dtype = c.kind == Coll::AllReduce ? "Float" : "BFloat16";
    a.s("Collective name", name).i("In msg nelems", c.inElems).i("Out msg nelems", c.outElems).i("Group size", world_);
    a.s("dtype", dtype).s("In split size", "[]").s("Out split size", "[]").s("Process Group Name", c.pgName);
    a.s("Process Group Description", c.pgName == "0" ? "default_pg" : "undefined").s("Process Group Ranks", ranksText_);
    if (cpuSide) a.i("Rank", o_.rank).i("Global rank start", 0).i("Global rank stride", 1);
  }

  // record_param_comms → nccl:* annotation → event record / stream wait / NCCL launch; the NCCL kernel
  // runs on stream 21 after `dep` (the compute it needs). Returns the CPU end; *kernelEnd the GPU end.
  i64 collective(i64 tid, i64 t, const CollInfo& c, i64 dep, i64* kernelEnd) {
    const std::string_view ann = c.kind == Coll::AllGather       ? "nccl:_all_gather_base"
                                 : c.kind == Coll::ReduceScatter ? "nccl:_reduce_scatter_base"
                                                                 : "nccl:all_reduce";
    std::string_view kernel;
    if (nw_)
      kernel = c.kind == Coll::AllGather       ? "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
               : c.kind == Coll::ReduceScatter ? "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
                                               : "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)";
    else
      kernel = c.kind == Coll::AllGather       ? "ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclWorkElem)"
               : c.kind == Coll::ReduceScatter ? "ncclKernel_ReduceScatter_RING_LL_Sum_bf16(ncclWorkElem)"
                                               : "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)";
    const i64 elemBytes = c.kind == Coll::AllReduce ? 4 : 2;
    const i64 bytes = (c.kind == Coll::AllGather ? c.outElems : c.inElems) * elemBytes;
    double dur = 9'000;
    if (world_ > 1) {
      const double factor = (c.kind == Coll::AllReduce ? 2.0 : 1.0) * (world_ - 1) / world_;
      dur = 14'000 + static_cast<double>(bytes) * factor / (nw_ ? 240.0 : 140.0);
    }
    const std::string inDims = "[[" + std::to_string(c.inElems) + "]]";
    const Span rpc = op(tid, "record_param_comms", t, [&](Args& a) {
      if (!nw_) return;
      collectiveArgs(a, c, true);
      a.raw("Input Dims", inDims).raw("Input type", c.kind == Coll::AllReduce ? "[\"float\"]" : "[\"c10::BFloat16\"]");
    });
    t += rr(3'000, 9'000);
    const Span an = annotation(tid, ann, t);
    t += rr(1'500, 4'000);
    const i64 recDur = jit(2'500, 0.4);
    t = runtimeCall(tid, t, "cudaEventRecord", 135, rpc.ext, recDur);
    t += rr(500, 1'500);
    const i64 waitDur = jit(2'000, 0.4);
    t = runtimeCall(tid, t, "cudaStreamWaitEvent", 147, rpc.ext, waitDur);
    t += rr(500, 1'500);
    const int grid = world_ > 1 ? 16 : 1;
    const KernelShape ks{{grid, 1, 1}, {512, 1, 1}, 96, 103808};
    i64 kEnd = 0;
    t = launch(tid, t, rpc.ext, kernel, ks, jit(dur, 0.15), kNcclStream, &c, dep, &kEnd);
    if (kernelEnd) *kernelEnd = kEnd;
    if (nw_) {
      // The GPU twin of the annotation: 1 ns before and after its kernel (traces.md §1.6).
      countX();
      if (!dry_) {
        std::string& g = activity();
        g += "{\"ph\": \"X\", \"cat\": \"gpu_user_annotation\", \"name\": ";
        appendQuoted(g, ann);
        pidTidGpu(g, kNcclStream);
        tsDur(g, lastKernelStart_ - 1, kEnd - lastKernelStart_ + 2);
        g += ", \"args\": {";
        Args{g}.i("External id", an.ext);
        g += "}}";
      }
    }
    t += rr(2'000, 6'000);
    close(an, t);
    t += rr(2'000, 8'000);
    close(rpc, t);
    return t;
  }

  // ---- model ----------------------------------------------------------------------------------
  void buildDims() {
    for (int k = 0; k < 2; ++k) {
      const Layer L = layer(k);
      std::string& linear = dimsLinear_[k];
      linear = "[[" + std::to_string(tokens_) + ", " + std::to_string(L.in) + "], [" + std::to_string(L.out) + ", " +
               std::to_string(L.in) + "], [" + std::to_string(L.out) + "]]";
      dimsAddmm_[k] = "[[" + std::to_string(L.out) + "], [" + std::to_string(tokens_) + ", " + std::to_string(L.in) + "], [" +
                      std::to_string(L.in) + ", " + std::to_string(L.out) + "], [], []]";
      dimsT_[k] = "[[" + std::to_string(L.out) + ", " + std::to_string(L.in) + "]]";
      dimsAct_[k] = "[[" + std::to_string(tokens_) + ", " + std::to_string(L.out) + "]]";
    }
  }
  static Layer layer(int l) { return l % 2 == 0 ? Layer{kHidden, kFfn, true} : Layer{kFfn, kHidden, false}; }
  double gemmNs(const Layer& L) const {
    return 2.0 * static_cast<double>(tokens_) * static_cast<double>(L.in * L.out) / (nw_ ? 560'000.0 : 210'000.0) + 3'000;
  }
  double memNs(double bytes) const { return bytes / (nw_ ? 2'600.0 : 1'500.0) + 1'800; }
  KernelShape gemmShape(const Layer& L) const {
    return nw_ ? KernelShape{{(tokens_ + 127) / 128, (L.out + 255) / 256, 1}, {384, 1, 1}, 168, 213'504}
               : KernelShape{{(tokens_ + 255) / 256, (L.out + 127) / 128, 1}, {256, 1, 1}, 230, 73'728};
  }
  KernelShape eltShape(i64 elems) const {
    return KernelShape{{std::max<i64>(1, std::min<i64>(elems / 512, 65535)), 1, 1}, {128, 1, 1}, 24, 0};
  }

  // t, transpose, as_strided: the view ops under aten::linear and AddmmBackward0.
  i64 transposeOps(i64 tid, i64 t, int k) {
    const std::string& d = dimsT_[k];
    const Span st = op(tid, "aten::t", t, [&](Args& a) { shapes(a, d, "[\"c10::BFloat16\"]"); });
    t += rr(1'500, 4'000);
    const Span tr =
        op(tid, "aten::transpose", t, [&](Args& a) { shapes(a, "[[], [], []]", "[\"c10::BFloat16\", \"Scalar\", \"Scalar\"]"); });
    t += rr(1'000, 3'000);
    const Span as =
        op(tid, "aten::as_strided", t, [&](Args& a) { shapes(a, "[[], [], [], []]", "[\"c10::BFloat16\", \"\", \"\", \"\"]"); });
    t += rr(1'000, 3'000);
    close(as, t);
    t += rr(300, 1'200);
    close(tr, t);
    t += rr(300, 1'200);
    close(st, t);
    return t;
  }
  void shapes(Args& a, std::string_view dims, std::string_view types, i64 seq = -1, bool backward = false) {
    if (seq >= 0) {
      a.i("Sequence number", seq);
      if (backward || !nw_) a.i("Fwd thread id", backward ? 1 : 0);
    }
    a.raw("Input Dims", dims).raw("Input type", types);
  }

  i64 forwardLayer(int l, int layers, i64 t) {
    const int k = l % 2;
    const Layer L = layer(l);
    const i64 tid = mainTid_;
    const i64 seq = s_.seq + static_cast<i64>(l) * 4;
    if (l % kUnit == 0) {
      // FSDP: this unit's compute waits for its parameters; the next unit's all-gather is prefetched.
      s_.s7WaitUntil = std::max(s_.s7WaitUntil, s_.agThis);
      if (l + kUnit < layers) {
        const i64 unitElems = kUnit * (kHidden * kFfn) + 2 * (kHidden + kFfn);
        const CollInfo c{Coll::AllGather, unitElems / world_, unitElems / world_ * world_, "1"};
        i64 end = 0;
        t += rr(2'000, 6'000);
        t = collective(tid, t, c, 0, &end);
        t += rr(2'000, 5'000);
        s_.agNext = end;
      }
    }
    Span py[4];
    int nPy = 0;
    if (o_.withPython) {
      py[nPy] = python(tid, "nn.Module: Linear_" + std::to_string(l), t, stepPy_, l);
      t += rr(800, 2'000);
      ++nPy;
      py[nPy] = python(tid, "torch/nn/modules/module.py(1747): _call_impl", t, py[nPy - 1].pyId);
      t += rr(800, 2'000);
      ++nPy;
      py[nPy] = python(tid, "torch/nn/modules/linear.py(125): forward", t, py[nPy - 1].pyId);
      t += rr(800, 2'000);
      ++nPy;
      py[nPy] = python(tid, "<built-in function linear>", t, py[nPy - 1].pyId);
      t += rr(500, 1'500);
      ++nPy;
    }
    const Span lin = op(tid, "aten::linear", t,
                        [&](Args& a) { shapes(a, dimsLinear_[k], "[\"c10::BFloat16\", \"c10::BFloat16\", \"c10::BFloat16\"]"); });
    t += rr(2'000, 5'000);
    t = transposeOps(tid, t, k);
    t += rr(1'000, 3'000);
    const Span mm = op(tid, "aten::addmm", t, [&](Args& a) {
      shapes(a, dimsAddmm_[k], "[\"c10::BFloat16\", \"c10::BFloat16\", \"c10::BFloat16\", \"Scalar\", \"Scalar\"]", seq);
    });
    t += rr(3'000, 8'000);
    const i64 outBytes = tokens_ * L.out * 2;
    const i64 outAddr = alloc(tid, t, outBytes);
    s_.saved.emplace_back(outAddr, outBytes);
    t += rr(1'000, 3'000);
    t = launch(tid, t, mm.ext, nw_ ? kGemmNew[0] : kGemmOld[0], gemmShape(L), jit(gemmNs(L), 0.06));
    t += rr(2'000, 6'000);
    close(mm, t);
    t += rr(1'000, 3'000);
    close(lin, t);
    for (int i = nPy - 1; i >= 0; --i) {
      t += rr(500, 1'500);
      close(py[i], t);
    }
    t += rr(3'000, 9'000);
    if (L.gelu) {
      const Span g = op(tid, "aten::gelu", t, [&](Args& a) { shapes(a, dimsAct_[k], "[\"c10::BFloat16\", \"\"]", seq + 1); });
      t += rr(3'000, 7'000);
      const i64 addr = alloc(tid, t, outBytes);
      s_.saved.emplace_back(addr, outBytes);
      t += rr(1'000, 3'000);
      t = launch(tid, t, g.ext, kGelu, eltShape(tokens_ * L.out), jit(memNs(2.0 * static_cast<double>(outBytes)), 0.08));
      t += rr(1'500, 4'000);
      close(g, t);
    } else {
      const Span ad = op(tid, "aten::add_", t, [&](Args& a) {
        shapes(a,
               "[[" + std::to_string(tokens_) + ", " + std::to_string(L.out) + "], [" + std::to_string(tokens_) + ", " +
                   std::to_string(L.out) + "], []]",
               "[\"c10::BFloat16\", \"c10::BFloat16\", \"Scalar\"]", seq + 1);
      });
      t += rr(3'000, 7'000);
      t = launch(tid, t, ad.ext, kAdd, eltShape(tokens_ * L.out), jit(memNs(3.0 * static_cast<double>(outBytes)), 0.08));
      t += rr(1'500, 4'000);
      close(ad, t);
    }
    if (l % 8 == 5) {
      // FSDP flat-parameter padding: a small zero-filled buffer (a gpu_memset).
      t += rr(2'000, 5'000);
      const Span z =
          op(tid, "aten::zeros", t, [&](Args& a) { shapes(a, "[[], [], [], [], []]", "[\"\", \"Scalar\", \"\", \"\", \"\"]"); });
      t += rr(1'500, 3'000);
      const Span e = op(tid, "aten::empty", t,
                        [&](Args& a) { shapes(a, "[[], [], [], [], [], []]", "[\"\", \"Scalar\", \"\", \"\", \"\", \"\"]"); });
      t += rr(1'000, 3'000);
      close(e, t);
      t += rr(500, 1'500);
      const Span zr = op(tid, "aten::zero_", t, [&](Args& a) { shapes(a, "[[4096]]", "[\"c10::BFloat16\"]"); });
      t += rr(1'000, 3'000);
      t = copy(tid, t, zr.ext, true, "Memset (Device)", 8192, 400.0);
      t += rr(1'000, 2'500);
      close(zr, t);
      t += rr(500, 1'500);
      close(z, t);
    }
    if (l % kUnit == kUnit - 1 || l == layers - 1) s_.agThis = s_.agNext;
    return t + rr(2'000, 6'000);
  }

  template <class F>
  i64 evaluate(i64 tid, i64 t, std::string_view node, i64 seq, F&& body) {
    const std::string evalName = "autograd::engine::evaluate_function: " + std::string(node);
    const Span ev = op(tid, evalName, t, [&](Args& a) { shapes(a, "[]", "[]", seq, true); });
    t += rr(2'000, 5'000);
    const Span nd = op(tid, node, t, [&](Args& a) { shapes(a, "[]", "[]", seq, true); });
    t += rr(1'500, 4'000);
    t = body(t);
    t += rr(1'000, 3'000);
    close(nd, t);
    t += rr(1'000, 3'000);
    close(ev, t);
    return t;
  }

  i64 backwardLayer(int l, i64 t, i64& carry, i64& carryBytes) {
    const int k = l % 2;
    const Layer L = layer(l);
    const i64 tid = bwdTid_;
    const i64 seq = s_.seq + static_cast<i64>(l) * 4;
    const i64 outBytes = tokens_ * L.out * 2;
    i64 gradAct = -1;
    if (L.gelu) {
      t = evaluate(tid, t, "GeluBackward0", seq + 1, [&](i64 u) {
        const Span g = op(tid, "aten::gelu_backward", u, [&](Args& a) {
          shapes(a,
                 "[[" + std::to_string(tokens_) + ", " + std::to_string(L.out) + "], [" + std::to_string(tokens_) + ", " +
                     std::to_string(L.out) + "], []]",
                 "[\"c10::BFloat16\", \"c10::BFloat16\", \"\"]");
        });
        u += rr(2'000, 5'000);
        gradAct = alloc(tid, u, outBytes);
        u += rr(1'000, 3'000);
        u = launch(tid, u, g.ext, kGeluBwd, eltShape(tokens_ * L.out), jit(memNs(3.0 * static_cast<double>(outBytes)), 0.08));
        u += rr(1'500, 4'000);
        close(g, u);
        return u;
      });
      const auto act = s_.saved.back();
      s_.saved.pop_back();
      t += rr(500, 1'500);
      release(tid, t, act.first, act.second);
    } else {
      t = evaluate(tid, t, "AddBackward0", seq + 1, [&](i64 u) { return u + rr(1'000, 2'500); });
    }
    t += rr(2'000, 5'000);
    i64 wgrad = 0;
    const i64 wBytes = L.in * L.out * 2;
    t = evaluate(tid, t, "AddmmBackward0", seq, [&](i64 u) {
      u = transposeOps(tid, u, k);
      u += rr(1'000, 3'000);
      const Span m1 = op(tid, "aten::mm", u, [&](Args& a) {
        shapes(a,
               "[[" + std::to_string(tokens_) + ", " + std::to_string(L.out) + "], [" + std::to_string(L.out) + ", " +
                   std::to_string(L.in) + "]]",
               "[\"c10::BFloat16\", \"c10::BFloat16\"]");
      });
      u += rr(2'500, 6'000);
      const i64 dBytes = tokens_ * L.in * 2;
      const i64 dgrad = alloc(tid, u, dBytes);
      u += rr(1'000, 3'000);
      u = launch(tid, u, m1.ext, nw_ ? kGemmNew[1] : kGemmOld[1], gemmShape(Layer{L.out, L.in, false}), jit(gemmNs(L), 0.06));
      u += rr(1'500, 4'000);
      close(m1, u);
      u += rr(1'000, 3'000);
      u = transposeOps(tid, u, k);
      u += rr(1'000, 3'000);
      const Span m2 = op(tid, "aten::mm", u, [&](Args& a) {
        shapes(a,
               "[[" + std::to_string(L.out) + ", " + std::to_string(tokens_) + "], [" + std::to_string(tokens_) + ", " +
                   std::to_string(L.in) + "]]",
               "[\"c10::BFloat16\", \"c10::BFloat16\"]");
      });
      u += rr(2'500, 6'000);
      wgrad = alloc(tid, u, wBytes);
      u += rr(1'000, 3'000);
      u = launch(tid, u, m2.ext, nw_ ? kGemmNew[2] : kGemmOld[2], gemmShape(Layer{L.in, L.out, false}), jit(gemmNs(L), 0.06));
      u += rr(1'500, 4'000);
      close(m2, u);
      u += rr(1'000, 3'000);
      const Span sm = op(tid, "aten::sum", u, [&](Args& a) {
        shapes(a, "[[" + std::to_string(tokens_) + ", " + std::to_string(L.out) + "], [], [], []]",
               "[\"c10::BFloat16\", \"\", \"\", \"\"]");
      });
      u += rr(2'500, 6'000);
      u = launch(tid, u, sm.ext, kSum, KernelShape{{std::max<i64>(1, L.out / 32), 1, 1}, {32, 16, 1}, 32, 16},
                 jit(memNs(static_cast<double>(outBytes)), 0.1));
      u += rr(1'500, 4'000);
      close(sm, u);
      u += rr(500, 1'500);
      const auto act = s_.saved.back();
      s_.saved.pop_back();
      release(tid, u, act.first, act.second);
      if (gradAct >= 0) {
        u += rr(300, 900);
        release(tid, u, gradAct, outBytes);
      }
      if (carry >= 0) {
        u += rr(300, 900);
        release(tid, u, carry, carryBytes);
      }
      carry = dgrad;
      carryBytes = dBytes;
      return u;
    });
    t += rr(2'000, 5'000);
    t = evaluate(tid, t, "torch::autograd::AccumulateGrad", -1, [&](i64 u) {
      const Span ad = op(tid, "aten::add_", u, [&](Args& a) {
        shapes(a,
               "[[" + std::to_string(L.in) + ", " + std::to_string(L.out) + "], [" + std::to_string(L.in) + ", " +
                   std::to_string(L.out) + "], []]",
               "[\"c10::BFloat16\", \"c10::BFloat16\", \"Scalar\"]");
      });
      u += rr(2'500, 6'000);
      u = launch(tid, u, ad.ext, kAdd, eltShape(L.in * L.out), jit(memNs(3.0 * static_cast<double>(wBytes)), 0.08));
      u += rr(1'500, 4'000);
      close(ad, u);
      u += rr(500, 1'500);
      release(tid, u, wgrad, wBytes);
      return u;
    });
    if (l % kUnit == 0) {
      // The unit's gradients are complete: reduce-scatter them (after the compute that made them).
      const i64 unitElems = kUnit * (kHidden * kFfn) + 2 * (kHidden + kFfn);
      const CollInfo c{Coll::ReduceScatter, unitElems / world_ * world_, unitElems / world_, "1"};
      t += rr(3'000, 8'000);
      t = collective(tid, t, c, s_.s7Free, nullptr);
    }
    return t + rr(2'000, 5'000);
  }

  // A small op with one kernel: name → (optional child) → launch.
  i64 simpleKernelOp(i64 tid, i64 t, std::string_view name, std::string_view dims, std::string_view types,
                     std::string_view kernel, i64 elems, double ns) {
    const Span s = op(tid, name, t, [&](Args& a) { shapes(a, dims, types); });
    t += rr(2'500, 6'000);
    t = launch(tid, t, s.ext, kernel, eltShape(elems), jit(ns, 0.1));
    t += rr(1'500, 4'000);
    close(s, t);
    return t;
  }

  i64 stepBody(i64 t, int layers) {
    const i64 tid = mainTid_;
    s_.stepFirst[0] = s_.stepFirst[1] = 0;
    s_.stepLast[0] = s_.stepLast[1] = 0;
    stepPy_ = 1;
    if (nw_) {
      // CUPTI buffer handling shows up as overhead on pid -1.
      countX();
      const i64 ots = t + rr(5'000, 50'000);
      const i64 odur = rr(300'000, 1'800'000);
      if (!dry_) {
        std::string& l = lineStart("X", "overhead", "Activity Buffer Request");
        l += ", \"pid\": -1, \"tid\": 0";
        tsDur(l, ots, odur);
        l += "}";
        activity() = l;
      }
    }
    // Data loading and the host-to-device copy of the batch.
    t += rr(3'000, 10'000);
    const Span dl = annotation(tid, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", t);
    t += rr(40'000, 250'000);
    close(dl, t);
    t += rr(5'000, 15'000);
    {
      const std::string dims = "[[" + std::to_string(tokens_) + "], [], [], [], [], [], [], []]";
      const Span to = op(tid, "aten::to", t, [&](Args& a) {
        shapes(a, dims, "[\"long int\", \"\", \"\", \"\", \"\", \"Scalar\", \"Scalar\", \"\"]");
      });
      t += rr(2'000, 4'000);
      const Span tc = op(tid, "aten::_to_copy", t, [&](Args& a) {
        shapes(a, "[[" + std::to_string(tokens_) + "], [], [], [], [], [], []]",
               "[\"long int\", \"\", \"\", \"\", \"\", \"Scalar\", \"\"]");
      });
      t += rr(2'000, 4'000);
      const Span es = op(tid, "aten::empty_strided", t,
                         [&](Args& a) { shapes(a, "[[], [], [], [], [], []]", "[\"\", \"\", \"\", \"\", \"\", \"\"]"); });
      t += rr(1'500, 4'000);
      const i64 inAddr = alloc(tid, t, tokens_ * 8);
      t += rr(1'000, 2'000);
      close(es, t);
      t += rr(1'000, 3'000);
      const Span cp = op(tid, "aten::copy_", t, [&](Args& a) {
        shapes(a, "[[" + std::to_string(tokens_) + "], [" + std::to_string(tokens_) + "], []]",
               "[\"long int\", \"long int\", \"Scalar\"]");
      });
      t += rr(3'000, 6'000);
      t = copy(tid, t, cp.ext, false, "Memcpy HtoD (Pinned -> Device)", tokens_ * 8, 22.0);
      t += rr(2'000, 5'000);
      close(cp, t);
      t += rr(1'000, 2'000);
      close(tc, t);
      t += rr(1'000, 2'000);
      close(to, t);
      inputAddr_ = inAddr;
    }
    t += rr(5'000, 15'000);
    const Span zg = annotation(tid, "Optimizer.zero_grad#AdamW.zero_grad", t);
    t += rr(8'000, 30'000);
    close(zg, t);
    t += rr(10'000, 40'000);

    // Forward. Unit 0's parameters are gathered up front (nothing to overlap with yet).
    {
      const i64 unitElems = kUnit * (kHidden * kFfn) + 2 * (kHidden + kFfn);
      const CollInfo c{Coll::AllGather, unitElems / world_, unitElems / world_ * world_, "1"};
      t = collective(tid, t, c, 0, &s_.agThis);
      t += rr(3'000, 8'000);
      s_.agNext = s_.agThis;
    }
    for (int l = 0; l < layers; ++l) t = forwardLayer(l, layers, t);

    // Loss.
    const std::string logits = "[[" + std::to_string(tokens_) + ", 32000]";
    const i64 logitElems = tokens_ * 32000;
    {
      const Span ce = op(tid, "aten::cross_entropy_loss", t, [&](Args& a) {
        shapes(a, logits + ", [" + std::to_string(tokens_) + "], [], [], [], []]",
               "[\"float\", \"long int\", \"\", \"Scalar\", \"Scalar\", \"Scalar\"]");
      });
      t += rr(3'000, 6'000);
      const Span ls = op(tid, "aten::log_softmax", t, [&](Args& a) {
        shapes(a, logits + ", [], []]", "[\"float\", \"Scalar\", \"\"]", s_.seq + layers * 4 + 1);
      });
      t += rr(2'000, 4'000);
      t = simpleKernelOp(tid, t, "aten::_log_softmax", logits + ", [], []]", "[\"float\", \"Scalar\", \"Scalar\"]", kSoftmax,
                         logitElems, memNs(static_cast<double>(logitElems) * 8.0));
      t += rr(1'000, 2'000);
      close(ls, t);
      t += rr(2'000, 4'000);
      const Span nl = op(tid, "aten::nll_loss_nd", t, [&](Args& a) {
        shapes(a, logits + ", [" + std::to_string(tokens_) + "], [], [], []]",
               "[\"float\", \"long int\", \"\", \"Scalar\", \"Scalar\"]");
      });
      t += rr(2'000, 4'000);
      t = simpleKernelOp(tid, t, "aten::nll_loss_forward", logits + ", [" + std::to_string(tokens_) + "], [], [], []]",
                         "[\"float\", \"long int\", \"\", \"Scalar\", \"Scalar\"]", kNll, 1, 6'000);
      t += rr(1'000, 2'000);
      close(nl, t);
      t += rr(1'000, 3'000);
      close(ce, t);
    }
    // loss.backward(): the seed gradient on the main thread, the graph on the autograd thread.
    t += rr(10'000, 30'000);
    {
      const Span ol = op(tid, "aten::ones_like", t,
                         [&](Args& a) { shapes(a, "[[], [], [], [], [], []]", "[\"float\", \"\", \"\", \"\", \"\", \"\"]"); });
      t += rr(2'000, 4'000);
      t = simpleKernelOp(tid, t, "aten::fill_", "[[], []]", "[\"float\", \"Scalar\"]", kFill, 1, 2'000);
      t += rr(1'000, 2'000);
      close(ol, t);
    }
    i64 b = t + rr(15'000, 40'000);
    b = evaluate(bwdTid_, b, "NllLossBackward0", s_.seq + layers * 4 + 2, [&](i64 u) {
      return simpleKernelOp(bwdTid_, u, "aten::nll_loss_backward",
                            "[[], " + logits.substr(1) + ", [" + std::to_string(tokens_) + "], [], [], [], []]",
                            "[\"float\", \"float\", \"long int\", \"\", \"Scalar\", \"Scalar\", \"float\"]", kNllBwd, logitElems,
                            memNs(static_cast<double>(logitElems) * 4.0));
    });
    b += rr(2'000, 5'000);
    b = evaluate(bwdTid_, b, "LogSoftmaxBackward0", s_.seq + layers * 4 + 1, [&](i64 u) {
      return simpleKernelOp(bwdTid_, u, "aten::_log_softmax_backward_data", logits + ", " + logits.substr(1) + ", [], []]",
                            "[\"float\", \"float\", \"Scalar\", \"Scalar\"]", kSoftmaxBwd, logitElems,
                            memNs(static_cast<double>(logitElems) * 12.0));
    });
    b += rr(2'000, 5'000);
    i64 carry = -1, carryBytes = 0;
    for (int l = layers - 1; l >= 0; --l) b = backwardLayer(l, b, carry, carryBytes);
    if (carry >= 0) release(bwdTid_, b + rr(1'000, 2'000), carry, carryBytes);
    s_.seq += static_cast<i64>(layers) * 4 + 8;
    t = std::max(t, b) + rr(20'000, 60'000);

    // The loss is averaged over the data-parallel group for logging.
    t = collective(tid, t, CollInfo{Coll::AllReduce, 1, 1, "0"}, s_.s7Free, nullptr);
    t += rr(5'000, 20'000);

    // Optimizer: AdamW with foreach kernels, after every gradient has been reduced.
    s_.s7WaitUntil = std::max(s_.s7WaitUntil, s_.s21Free);
    Span pyw, pys;
    if (o_.withPython) {
      pyw = python(tid, "torch/optim/optimizer.py(487): wrapper", t, stepPy_);
      t += rr(2'000, 5'000);
      pys = python(tid, "torch/optim/adamw.py(209): step", t, pyw.pyId);
      t += rr(2'000, 5'000);
    }
    const Span os = annotation(tid, "Optimizer.step#AdamW.step", t);
    t += rr(10'000, 30'000);
    const i64 tensors = 2 * static_cast<i64>(layers);
    const std::string listDims = "[[" + std::to_string(tensors) + "]]";
    for (int f = 0; f < 6; ++f) {
      const Span fo = op(tid, kForeachOps[f], t, [&](Args& a) { shapes(a, listDims, "[\"TensorList\", \"Scalar\"]"); });
      t += rr(5'000, 15'000);
      for (i64 done = 0; done < tensors; done += 48) {
        const i64 n = std::min<i64>(48, tensors - done);
        const double bytes = static_cast<double>(n) * static_cast<double>(kHidden * kFfn) / world_ * 4.0 * (f % 3 + 2);
        t = launch(tid, t, fo.ext, kForeach[f], KernelShape{{std::max<i64>(1, n * 8), 1, 1}, {512, 1, 1}, 40, 0},
                   jit(memNs(bytes), 0.1));
        t += rr(1'500, 4'000);
      }
      t += rr(2'000, 6'000);
      close(fo, t);
      t += rr(2'000, 6'000);
    }
    t += rr(5'000, 15'000);
    close(os, t);
    if (o_.withPython) {
      t += rr(1'000, 3'000);
      close(pys, t);
      t += rr(1'000, 3'000);
      close(pyw, t);
    }
    release(tid, t + rr(1'000, 3'000), inputAddr_, tokens_ * 8);
    t += rr(20'000, 60'000);

    // loss.item(): a DtoH copy and a stream synchronisation that waits for the GPU to drain.
    {
      const Span it = op(tid, "aten::item", t, [&](Args& a) { shapes(a, "[[]]", "[\"float\"]"); });
      t += rr(2'000, 4'000);
      const Span ld = op(tid, "aten::_local_scalar_dense", t, [&](Args& a) { shapes(a, "[[]]", "[\"float\"]"); });
      t += rr(3'000, 6'000);
      t = copy(tid, t, ld.ext, false, "Memcpy DtoH (Device -> Pageable)", 4, 1.0);
      t += rr(1'000, 3'000);
      const i64 drain = std::max(s_.s7Free, s_.s21Free);
      const i64 minSync = rr(2'000, 5'000);
      const i64 slack = rr(3'000, 9'000);
      const i64 syncDur = std::max(minSync, drain - t + slack);
      t = runtimeCall(tid, t, "cudaStreamSynchronize", 131, ld.ext, q(syncDur));
      t += rr(2'000, 5'000);
      close(ld, t);
      t += rr(1'000, 3'000);
      close(it, t);
    }
    return t + rr(10'000, 40'000);
  }

  u64 dryStepEvents(i64 t, int layers) {
    const State saved = s_;
    const u64 before = s_.st.traceEvents;
    stepBody(t, layers);
    const u64 n = s_.st.traceEvents - before + 1 + (nw_ ? 2 : 0);  // + ProfilerStep (+ its GPU twins)
    s_ = saved;
    return n;
  }

  i64 writeStep(int number, int layers, i64 t) {
    const std::string name = "ProfilerStep#" + std::to_string(number);
    // The annotation is written before its contents, so its end comes from a dry run of the step.
    const State saved = s_;
    dry_ = true;
    const i64 end = stepBody(t, layers);
    s_ = saved;
    dry_ = false;
    ++s_.st.steps;
    const Span st = annotation(mainTid_, name, t);
    close(st, end);
    const i64 realEnd = stepBody(t, layers);
    if (realEnd != end) throw std::logic_error("kineto generator: dry run and real run of a step differ");
    flushIfIdle();
    if (nw_) {
      for (int k = 0; k < 2; ++k) {
        countX();
        if (s_.stepLast[k] == 0) {
          // No work on that stream: still counted by the calibration, so write a zero-length twin.
          s_.stepFirst[k] = s_.stepLast[k] = t + 1;
        }
        std::string& l = lineStart("X", "gpu_user_annotation", name);
        pidTidGpu(l, k == 0 ? kComputeStream : kNcclStream);
        tsDur(l, s_.stepFirst[k] - 1, s_.stepLast[k] - s_.stepFirst[k] + 2);
        l += ", \"args\": {\"External id\": ";
        appendInt(l, st.ext);
        l += "}}";
        writeEventLine(l);
      }
    }
    return end;
  }

  // Metadata, the profiler span and the global instants, as Kineto writes them last.
  void writeTail(i64 end) {
    auto meta = [&](std::string_view name, std::string_view pid, std::string_view tid, std::string_view args) {
      ++s_.st.traceEvents;
      if (dry_) return;
      line_.clear();
      line_ += "{\"name\": ";
      appendQuoted(line_, name);
      line_ += ", \"ph\": \"M\", \"ts\": ";
      appendTs(line_, traceStart_);
      line_ += ", \"pid\": ";
      line_ += pid;
      line_ += ", \"tid\": ";
      line_ += tid;
      line_ += ", \"args\": {";
      line_ += args;
      line_ += "}}";
      writeEventLine(line_);
    };
    const std::string pid = std::to_string(pid_);
    meta("process_name", pid, "0", "\"name\": \"python3\"");
    meta("process_labels", pid, "0", "\"labels\": \"CPU\"");
    meta("process_sort_index", pid, "0", "\"sort_index\": " + pid);
    for (int d = 0; d < 8; ++d) {
      const std::string dp = std::to_string(d);
      meta("process_name", dp, "0", "\"name\": \"python3\"");
      meta("process_labels", dp, "0", "\"labels\": \"GPU " + dp + "\"");
      meta("process_sort_index", dp, "0", "\"sort_index\": " + std::to_string(16777216 + d));
    }
    for (int stream : {kComputeStream, kNcclStream}) {
      const std::string sid = nw_ ? std::to_string(stream) : "\"stream " + std::to_string(stream) + "\"";
      meta("thread_name", std::to_string(device_), sid, "\"name\": \"stream " + std::to_string(stream) + " \"");
      meta("thread_sort_index", std::to_string(device_), sid, "\"sort_index\": " + std::to_string(stream));
    }
    for (i64 tid : {mainTid_, bwdTid_}) {
      const std::string ts = std::to_string(tid);
      meta("thread_name", pid, ts, "\"name\": \"thread " + ts + (tid == mainTid_ ? " (python3)\"" : " (pt_autograd_0)\""));
      meta("thread_sort_index", pid, ts, "\"sort_index\": " + ts);
    }
    meta("process_sort_index", "\"Spans\"", "0", "\"sort_index\": 536870912");
    countX();
    if (!dry_) {
      std::string& l = lineStart("X", "Trace", "PyTorch Profiler (0)");
      l += ", \"pid\": \"Spans\", \"tid\": \"PyTorch Profiler\"";
      tsDur(l, traceStart_, end - traceStart_);
      l += ", \"args\": {\"Op count\": 0}}";
      writeEventLine(l);
    }
    s_.st.traceEvents += 2;
    if (!dry_) {
      line_.clear();
      line_ +=
          "{\"name\": \"Iteration Start: PyTorch Profiler\", \"ph\": \"i\", \"s\": \"g\", \"pid\": \"Traces\", \"tid\": "
          "\"Trace PyTorch Profiler\", \"ts\": ";
      appendTs(line_, traceStart_);
      line_ += "}";
      writeEventLine(line_);
      line_.clear();
      line_ += "{\"name\": \"Record Window End\", \"ph\": \"i\", \"s\": \"g\", \"pid\": \"\", \"tid\": \"\", \"ts\": ";
      appendTs(line_, end);
      line_ += "}";
      writeEventLine(line_);
    }
  }

  const KinetoGenOptions& o_;
  Sink& sink_;
  std::string path_;
  State s_;
  bool nw_ = true;
  bool dry_ = false;
  int world_ = 1;
  int device_ = 0;
  i64 pid_ = 0, mainTid_ = 0, bwdTid_ = 0;
  int numSms_ = 132;
  i64 base_ = 0, startNs_ = 0, traceStart_ = 0;
  i64 tokens_ = 4096;
  i64 stepPy_ = 1;
  i64 inputAddr_ = 0;
  i64 lastKernelStart_ = 0;
  std::string ranksText_;
  std::string dimsLinear_[2], dimsAddmm_[2], dimsT_[2], dimsAct_[2];
  std::string line_;
  std::vector<Pending> pend_;
  std::size_t pendUsed_ = 0;
  std::vector<std::string> act_;
  std::size_t actUsed_ = 0;
  int depth_ = 0;
  bool firstMember_ = true;
  bool firstEvent_ = true;
};

}  // namespace

KinetoGenStats generateKinetoTrace(const std::string& path, const KinetoGenOptions& opt) {
  Sink sink(path, opt.gzipLevel);
  Generator g(opt, sink, path);
  return g.run();
}

}  // namespace shardscope::test
