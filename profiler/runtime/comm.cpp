#include "profiler/runtime/comm.h"

#include <chrono>
#include <cstdlib>
#include <arpa/inet.h>
#include <netdb.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <optional>
#include <thread>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/version.h>
#ifdef SHARDSCOPE_WITH_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif
#ifdef SHARDSCOPE_WITH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include "core/launch/cluster_env.h"
#include "core/util/error.h"
#include "profiler/capture/recorder.h"

namespace shardscope::runtime {

// LibTorch 1.13 exposes the collectives on c10d::ProcessGroup; 2.x on c10d::Backend.
#if TORCH_VERSION_MAJOR >= 2
using PgBase = c10d::Backend;
#else
using PgBase = c10d::ProcessGroup;
#endif

using capture::nowNs;
using core::CollectiveOp;
using core::TimeNs;

struct CommHandle::State {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  bool reported = false;
  std::exception_ptr error;
  capture::SpanRecord span;  // filled by the communication thread
  TimeNs issueNs = 0;
  std::string emulation;
  capture::Recorder* recorder = nullptr;
  int computeLane = -1;
#ifdef SHARDSCOPE_WITH_CUDA
  // On a GPU the collective runs on its group's communication stream; the caller's stream waits for
  // this event (recorded on that stream after the collective) instead of the CPU.
  std::shared_ptr<at::cuda::CUDAEvent> doneEvent;
  c10::DeviceIndex device = -1;
#endif
  void report(TimeNs waitStart, TimeNs waitEnd) {
    if (reported || !recorder) return;
    reported = true;
    const TimeNs wait = waitEnd - waitStart;
    span.argsJson = "{\"issue_ns\":" + std::to_string(issueNs) + ",\"queue_ns\":" + std::to_string(span.startNs - issueNs) +
                    ",\"wait_ns\":" + std::to_string(wait) + (emulation.empty() ? "" : ",\"emulated_by\":\"" + emulation + "\"") +
                    "}";
    if (wait > 0 && computeLane >= 0) {
      capture::SpanRecord w;
      w.lane = computeLane;
      w.startNs = waitStart;
      w.endNs = waitEnd;
      w.name = "wait " + span.name;
      w.cat = "wait";
      w.category = core::Category::Other;
      w.step = span.step;
      recorder->span(std::move(w));
    }
    recorder->span(span);
  }
  ~State() {
    if (done && !reported) report(0, 0);
  }
};

void CommHandle::wait() {
  if (!state_) return;
  const TimeNs t0 = nowNs();
  std::unique_lock<std::mutex> l(state_->mu);
  state_->cv.wait(l, [&] { return state_->done; });
  const TimeNs t1 = nowNs();
  state_->report(t0, t1);
  if (state_->error) std::rethrow_exception(state_->error);
#ifdef SHARDSCOPE_WITH_CUDA
  if (state_->doneEvent) state_->doneEvent->block(c10::cuda::getCurrentCUDAStream(state_->device));
#endif
}

bool CommHandle::done() const {
  if (!state_) return true;
  std::lock_guard<std::mutex> l(state_->mu);
  return state_->done;
}

class GroupImpl final : public Group {
 public:
  GroupImpl(std::string name, int rank, std::vector<int> ranks, c10::intrusive_ptr<PgBase> pg, bool gloo, capture::Recorder* rec,
            int lane, int* computeLane, torch::Device device)
      : name_(std::move(name)),
        rank_(rank),
        ranks_(std::move(ranks)),
        pg_(std::move(pg)),
        gloo_(gloo),
        recorder_(rec),
        lane_(lane),
        computeLane_(computeLane),
        device_(device) {
    thread_ = std::thread([this] {
      // Named for top -H, perf sched and gdb: "ss-comm <group>" (15 characters at most).
      pthread_setname_np(pthread_self(), ("ss-comm " + name_).substr(0, 15).c_str());
      loop();
    });
  }
  ~GroupImpl() override {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  const std::string& name() const override { return name_; }
  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(ranks_.size()); }
  const std::vector<int>& globalRanks() const override { return ranks_; }
  Communicator::Volume volume() {
    std::lock_guard<std::mutex> l(mu_);
    return volume_;
  }

  CommHandle allReduce(torch::Tensor t, const CollectiveInfo& info) override {
    if (lowPrecision(t, info)) {
      const auto bytes = static_cast<std::int64_t>(t.numel() * 2);
      return enqueue(CollectiveOp::AllReduce, "all_reduce", bytes, bf16Sample(t), info, {}, [this, t]() mutable {
        torch::NoGradGuard ng;
        std::vector<at::Tensor> v{t.to(torch::kBFloat16)};
        c10d::AllreduceOptions o;
        o.reduceOp = c10d::ReduceOp::SUM;
        pg_->allreduce(v, o)->wait();
        t.copy_(v[0]);
      });
    }
    const auto bytes = static_cast<std::int64_t>(t.numel() * t.element_size());
    return enqueue(CollectiveOp::AllReduce, "all_reduce", bytes, t, info, {}, [this, t]() mutable {
      std::vector<at::Tensor> v{t};
      c10d::AllreduceOptions o;
      o.reduceOp = c10d::ReduceOp::SUM;
      pg_->allreduce(v, o)->wait();
    });
  }

  CommHandle allGather(torch::Tensor out, torch::Tensor in, const CollectiveInfo& info) override {
    TORCH_CHECK(out.numel() == in.numel() * size(), "all_gather: output must hold size() inputs");
#if TORCH_VERSION_MAJOR >= 2
    if (!gloo_) {
      // nccl-tests' S for an all-gather is the gathered array.
      const auto bytes = static_cast<std::int64_t>(out.numel() * out.element_size());
      return enqueue(CollectiveOp::AllGather, "all_gather", bytes, in, info, {},
                     [this, out, in]() mutable { pg_->_allgather_base(out, in)->wait(); });
    }
#endif
    // Gloo: the list form, into out's pieces.
    return allGatherInto(out.chunk(size()), in, info);
  }

  CommHandle allGatherInto(std::vector<torch::Tensor> outs, torch::Tensor in, const CollectiveInfo& info) override {
    TORCH_CHECK(static_cast<int>(outs.size()) == size(), "all_gather: one output per rank");
    for (const auto& o : outs) TORCH_CHECK(o.numel() == in.numel(), "all_gather: every output holds one input");
    const auto bytes = static_cast<std::int64_t>(in.numel() * in.element_size()) * size();
    return enqueue(CollectiveOp::AllGather, "all_gather", bytes, in, info, {}, [this, outs, in]() mutable {
      // Both backends gather through a flat buffer of their own and copy into the outputs after
      // every input has been read, so `in` aliasing outs[rank()] is safe.
      std::vector<std::vector<at::Tensor>> o(1, outs);
      std::vector<at::Tensor> ins{in};
      if (gloo_ && in.scalar_type() == torch::kBFloat16) {
        // Gloo in LibTorch 1.13 has no bf16 type; a gather only copies bits, so the same bytes go as
        // fp16 (LoRA's frozen bf16 base, gathered by ZeRO-3 and FSDP).
        ins[0] = in.view(torch::kHalf);
        for (auto& t : o[0]) t = t.view(torch::kHalf);
      }
      pg_->allgather(o, ins)->wait();
    });
  }

  CommHandle reduceScatter(torch::Tensor out, torch::Tensor in, const CollectiveInfo& info) override {
    TORCH_CHECK(in.numel() == out.numel() * size(), "reduce_scatter: input must hold size() outputs");
    if (lowPrecision(in, info) && out.scalar_type() == torch::kFloat32) {
      const auto bytes = static_cast<std::int64_t>(in.numel() * 2);
      return enqueue(CollectiveOp::ReduceScatter, "reduce_scatter", bytes, bf16Sample(in), info, gloo_ ? "all_reduce" : "",
                     [this, out, in]() mutable {
                       torch::NoGradGuard ng;
                       auto low = in.to(torch::kBFloat16);
                       if (gloo_) {
                         std::vector<at::Tensor> v{low};
                         pg_->allreduce(v)->wait();
                         out.copy_(low.narrow(0, static_cast<std::int64_t>(rank_) * out.numel(), out.numel()));
                         return;
                       }
                       auto lowOut = torch::empty_like(out, out.options().dtype(torch::kBFloat16));
                       std::vector<at::Tensor> outs{lowOut};
                       std::vector<std::vector<at::Tensor>> ins(1);
                       for (auto& c : low.chunk(size())) ins[0].push_back(c);
                       pg_->reduce_scatter(outs, ins)->wait();
                       out.copy_(lowOut);
                     });
    }
    const auto bytes = static_cast<std::int64_t>(in.numel() * in.element_size());
    return enqueue(CollectiveOp::ReduceScatter, "reduce_scatter", bytes, in, info, gloo_ ? "all_reduce" : "",
                   [this, out, in]() mutable {
                     if (gloo_) {
                       std::vector<at::Tensor> v{in};
                       pg_->allreduce(v)->wait();
                       torch::NoGradGuard ng;
                       out.copy_(in.narrow(0, static_cast<std::int64_t>(rank_) * out.numel(), out.numel()));
                       return;
                     }
                     std::vector<at::Tensor> outs{out};
                     std::vector<std::vector<at::Tensor>> ins(1);
                     for (auto& c : in.chunk(size())) ins[0].push_back(c);
                     pg_->reduce_scatter(outs, ins)->wait();
                   });
  }

  CommHandle broadcast(torch::Tensor t, int root, const CollectiveInfo& info) override {
    const auto bytes = static_cast<std::int64_t>(t.numel() * t.element_size());
    return enqueue(CollectiveOp::Broadcast, "broadcast", bytes, t, info, {}, [this, t, root]() mutable {
      std::vector<at::Tensor> v{t};
      c10d::BroadcastOptions o;
      o.rootRank = root;
      pg_->broadcast(v, o)->wait();
    });
  }

  void barrier() override {
    CollectiveInfo info;
    info.label = "barrier";
    auto h = enqueue(CollectiveOp::Barrier, "barrier", 0, torch::Tensor(), info, {}, [this] { pg_->barrier()->wait(); });
    h.wait();
  }

 private:
  struct Op {
    std::function<void()> run;
    std::shared_ptr<CommHandle::State> state;
#ifdef SHARDSCOPE_WITH_CUDA
    std::shared_ptr<at::cuda::CUDAEvent> ready;  // recorded on the caller's stream at issue
#endif
  };

  static bool lowPrecision(const torch::Tensor& t, const CollectiveInfo& info) {
    return info.bf16Reduce && t.scalar_type() == torch::kFloat32;
  }
  // What the span's dtype says: the tensor as sent.
  static torch::Tensor bf16Sample(const torch::Tensor& t) { return torch::empty({0}, t.options().dtype(torch::kBFloat16)); }

  CommHandle enqueue(CollectiveOp op, const std::string& opName, std::int64_t bytes, const torch::Tensor& sample,
                     const CollectiveInfo& info, std::string emulation, std::function<void()> run) {
    auto st = std::make_shared<CommHandle::State>();
    st->issueNs = nowNs();
    st->recorder = recorder_;
    st->computeLane = computeLane_ ? *computeLane_ : -1;
    st->emulation = std::move(emulation);
    auto& s = st->span;
    s.lane = lane_;
    s.name = info.label.empty() ? opName : opName + " " + info.label;
    s.cat = "collective";
    s.category = core::Category::Communication;
    if (info.step >= 0) s.step = info.step;
    s.op = op;
    s.group = name_;
    s.bytes = bytes;
    s.groupSize = size();
    if (sample.defined()) s.dtype = std::string(c10::toString(sample.scalar_type()));
    Op queued;
    queued.run = std::move(run);
    queued.state = st;
#ifdef SHARDSCOPE_WITH_CUDA
    if (device_.is_cuda()) {
      // The inputs are ready when what the caller's stream has queued so far has run.
      queued.ready = std::make_shared<at::cuda::CUDAEvent>();
      queued.ready->record(c10::cuda::getCurrentCUDAStream(device_.index()));
      st->device = device_.index();
    }
#endif
    {
      std::lock_guard<std::mutex> l(mu_);
      queue_.push_back(std::move(queued));
      const double n = size(), S = static_cast<double>(bytes);
      double wire = 0;
      switch (op) {
        case CollectiveOp::AllReduce:
          wire = 2 * (n - 1) / n * S;
          break;
        case CollectiveOp::ReduceScatter:
          wire = (st->emulation.empty() ? 1 : 2) * (n - 1) / n * S;
          break;
        case CollectiveOp::AllGather:
          wire = (n - 1) / n * S;
          break;
        case CollectiveOp::Broadcast:
          wire = S;
          break;
        default:
          break;
      }
      volume_.messageBytes[opName] += S;
      volume_.wireBytes[opName] += wire;
      ++volume_.count[opName];
    }
    cv_.notify_one();
    CommHandle h;
    h.state_ = st;
    return h;
  }

  void loop() {
#ifdef SHARDSCOPE_WITH_CUDA
    // This thread's current stream: a stream of its own, so collectives overlap the compute stream
    // (NCCL's work->wait() makes the *current* stream wait; on the default stream that would be the
    // compute stream).
    std::optional<c10::cuda::CUDAStream> stream;
    std::optional<c10::cuda::CUDAGuard> guard;
    if (device_.is_cuda()) {
      guard.emplace(device_.index());
      stream = c10::cuda::getStreamFromPool(/*isHighPriority=*/true, device_.index());
      c10::cuda::setCurrentCUDAStream(*stream);
    }
#endif
    for (;;) {
      Op op;
      {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        op = std::move(queue_.front());
        queue_.pop_front();
      }
      std::exception_ptr err;
      const TimeNs start = nowNs();
      try {
#ifdef SHARDSCOPE_WITH_CUDA
        if (stream && op.ready) op.ready->block(*stream);
#endif
        op.run();
#ifdef SHARDSCOPE_WITH_CUDA
        if (stream) {
          op.state->doneEvent = std::make_shared<at::cuda::CUDAEvent>();
          op.state->doneEvent->record(*stream);
        }
#endif
      } catch (...) {
        err = std::current_exception();
      }
      const TimeNs end = nowNs();
      // Drop the collective's tensors (captured by `run`) before the caller is woken: otherwise a
      // descheduled communication thread keeps them alive into whatever the caller does next (seen
      // as ZeRO-2's post-step all-gather buffers lingering into the next step's activation peak).
      op.run = nullptr;
#ifdef SHARDSCOPE_WITH_CUDA
      op.ready.reset();
#endif
      {
        std::lock_guard<std::mutex> l(op.state->mu);
        op.state->span.startNs = start;
        op.state->span.endNs = end;
        op.state->error = err;
        op.state->done = true;
      }
      op.state->cv.notify_all();
    }
  }

  std::string name_;
  int rank_;
  std::vector<int> ranks_;
  c10::intrusive_ptr<PgBase> pg_;
  bool gloo_;
  capture::Recorder* recorder_;
  int lane_;
  int* computeLane_;
  torch::Device device_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Op> queue_;
  Communicator::Volume volume_;
  bool stop_ = false;
  std::thread thread_;
};

namespace {
// Waits until the store's host accepts connections, polling every 10 ms: c10d's TCPStore client
// sleeps a whole second between attempts, which would show up as initialisation time.
void waitForServer(const std::string& host, int port, double timeoutS) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0 || !res) return;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeoutS);
  while (std::chrono::steady_clock::now() < deadline) {
    bool ok = false;
    for (addrinfo* a = res; a && !ok; a = a->ai_next) {
      const int fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
      if (fd < 0) continue;
      ok = ::connect(fd, a->ai_addr, a->ai_addrlen) == 0;
      ::close(fd);
    }
    if (ok) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  freeaddrinfo(res);
}
}  // namespace

struct Communicator::StoreHolder {
  c10::intrusive_ptr<c10d::Store> store;
};

bool Communicator::backendAvailable(const std::string& backend) {
  if (backend == "gloo") return true;
#ifdef SHARDSCOPE_WITH_NCCL
  if (backend == "nccl") return true;
#endif
  return false;
}

Communicator::Communicator(const DistEnv& env, const std::string& backend, torch::Device device, double timeoutS,
                           capture::Recorder* recorder)
    : env_(env), backend_(backend), device_(device), timeoutS_(timeoutS), recorder_(recorder) {
  if (!backendAvailable(backend))
    throw core::Error("backend '" + backend + "' is not available in this worker (built against LibTorch " +
                      std::string(TORCH_VERSION) + (backend == "nccl" ? " without NCCL)" : ")"));
  c10d::TCPStoreOptions opts;
  opts.port = static_cast<std::uint16_t>(env.masterPort);
  opts.isServer = env.rank == 0;
  opts.numWorkers = env.worldSize;
  opts.waitWorkers = true;
  opts.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(timeoutS * 1000));
  store_ = std::make_unique<StoreHolder>();
  if (env.rank != 0) waitForServer(env.masterAddr, env.masterPort, timeoutS);
  try {
    store_->store = c10::make_intrusive<c10d::TCPStore>(env.masterAddr, opts);
  } catch (const std::exception& e) {
    throw core::Error("rank " + std::to_string(env.rank) + ": rendezvous with " + env.masterAddr + ":" +
                      std::to_string(env.masterPort) + " failed: " + e.what());
  }
}

void Communicator::start(capture::Recorder* recorder) {
  if (world_) return;
  if (recorder) recorder_ = recorder;
  std::vector<int> all(static_cast<std::size_t>(env_.worldSize));
  for (int i = 0; i < env_.worldSize; ++i) all[static_cast<std::size_t>(i)] = i;
  world_ = makeGroup("world", all, env_.rank);
}

Communicator::~Communicator() {
  groups_.clear();
  world_.reset();
}

std::unique_ptr<GroupImpl> Communicator::makeGroup(const std::string& name, const std::vector<int>& ranks, int groupRank) {
  const auto timeout = std::chrono::milliseconds(static_cast<std::int64_t>(timeoutS_ * 1000));
  auto prefixed = c10::make_intrusive<c10d::PrefixStore>("pg/" + name, store_->store);
  c10::intrusive_ptr<PgBase> pg;
  const int size = static_cast<int>(ranks.size());
  if (backend_ == "gloo") {
    auto o = c10d::ProcessGroupGloo::Options::create(timeout);
    std::string host = env_.masterAddr;
    if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname)
      o->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
    else if (host == "127.0.0.1" || host == "localhost")
      o->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    else
      o->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
    o->threads = 1;
    pg = c10::make_intrusive<c10d::ProcessGroupGloo>(prefixed, groupRank, size, o);
  } else {
#ifdef SHARDSCOPE_WITH_NCCL
    auto o = c10d::ProcessGroupNCCL::Options::create();
    o->timeout = timeout;
    pg = c10::make_intrusive<c10d::ProcessGroupNCCL>(prefixed, groupRank, size, o);
#endif
  }
  int lane = -1;
  if (recorder_) {
    lane = recorder_->lane("comm " + name + " (" + backend_ + ")", core::TrackKind::Comm, 10 + laneCounter_++);
    recorder_->processGroup(name, backend_, size, ranks);
  }
  return std::make_unique<GroupImpl>(name, groupRank, ranks, pg, backend_ == "gloo", recorder_, lane, &computeLane, device_);
}

Communicator::Volume Communicator::volume() const {
  Volume v;
  auto add = [&](GroupImpl* g) {
    if (!g) return;
    const Volume x = g->volume();
    for (const auto& [k, b] : x.messageBytes) v.messageBytes[k] += b;
    for (const auto& [k, b] : x.wireBytes) v.wireBytes[k] += b;
    for (const auto& [k, c] : x.count) v.count[k] += c;
  };
  add(world_.get());
  for (const auto& g : groups_) add(g.get());
  return v;
}

Group& Communicator::world() {
  if (!world_) throw core::Error("communicator not started");
  return *world_;
}

Group* Communicator::newGroup(const std::string& name, const std::vector<int>& ranks) {
  int me = -1;
  for (std::size_t i = 0; i < ranks.size(); ++i)
    if (ranks[i] == env_.rank) me = static_cast<int>(i);
  if (me < 0) return nullptr;
  groups_.push_back(makeGroup(name, ranks, me));
  return groups_.back().get();
}

void Communicator::storeSet(const std::string& key, const std::string& value) {
  store_->store->set(key, std::vector<std::uint8_t>(value.begin(), value.end()));
}

std::string Communicator::storeGet(const std::string& key) {
  auto v = store_->store->get(key);
  return std::string(v.begin(), v.end());
}

}  // namespace shardscope::runtime
