#include "core/launch/launcher.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <algorithm>
#include <map>
#include <optional>

#include "core/util/error.h"
#include "core/util/json.h"

extern char** environ;

namespace shardscope::core {

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kMaxLine = 1u << 20;     // a "line" longer than this is delivered in pieces
constexpr std::size_t kReadChunk = 64u << 10;  // per read() call
constexpr int kReadsPerWake = 16;              // per fd and poll wake-up, so one chatty rank cannot starve the others
constexpr auto kPollSlice = std::chrono::milliseconds(20);            // exit/cancel/hang checks at least this often
constexpr auto kDrainAfterLastExit = std::chrono::milliseconds(500);  // for writers that escaped a rank's group
constexpr auto kConsequenceGrace = std::chrono::seconds(2);           // how long a "peer went away" exit waits for its cause

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

std::string errnoText(int err) { return std::strerror(err); }

struct Stream {
  int fd = -1;
  std::string buf;  // bytes after the last '\n'
};

struct Rank {
  int local = 0;
  int global = 0;
  pid_t pid = -1;
  bool running = false;  // spawned and not reaped
  Stream out;
  Stream err;
  Clock::time_point lastOutput;
  std::string lastErrLine;
  int exitCode = 127;  // 127 until it ran: "could not be started"
};

void closeFd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// Kills and reaps whatever is still running when launchRanks() leaves by an exception (a callback
// threw): the promise "no zombies, no orphans" holds on every path.
class Supervisor {
 public:
  explicit Supervisor(const LaunchSpec& spec) : spec_(spec) {}
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;
  ~Supervisor() {
    for (Rank& r : ranks_) {
      if (r.running) {
        ::kill(-r.pid, SIGKILL);
        int st = 0;
        while (::waitpid(r.pid, &st, 0) < 0 && errno == EINTR) {
        }
        r.running = false;
      }
      closeFd(r.out.fd);
      closeFd(r.err.fd);
    }
  }

  LaunchResult run();

 private:
  void spawnAll(int port);
  bool spawnOne(Rank& r, const std::vector<std::string>& envBase, int port);
  void readStream(Rank& r, Stream& s, bool isErr);
  void deliver(Rank& r, bool isErr, std::string line);
  void reapExited();
  void fail(int rank, std::string reason);
  // A rank that exited because a peer went away (connection reset, broken pipe) is a consequence:
  // its failure is held for kConsequenceGrace in case the rank that caused it fails too, and only
  // reported if none does.
  void failOrHold(int rank, std::string reason);
  struct Held {
    int rank = 0;
    std::string reason;
    std::chrono::steady_clock::time_point until;
  };
  std::optional<Held> held_;
  void startStop();
  void signalRunning(int sig);

  const LaunchSpec& spec_;
  std::vector<Rank> ranks_;
  LaunchResult result_;
  bool stopping_ = false;
  bool killed_ = false;
  Clock::time_point killAt_;
};

std::vector<std::string> inheritedEnvironment(const std::map<std::string, std::string>& overrides) {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string_view entry(*e);
    const auto eq = entry.find('=');
    const std::string name(entry.substr(0, eq));
    if (!overrides.count(name)) env.emplace_back(entry);
  }
  for (const auto& [k, v] : overrides) env.push_back(k + "=" + v);
  return env;
}

bool Supervisor::spawnOne(Rank& r, const std::vector<std::string>& envBase, int port) {
  const int nproc = static_cast<int>(ranks_.size());
  std::map<std::string, std::string> vars;
  for (const auto& [k, v] : spec_.env) vars[k] = v;
  // The variables torchrun sets for a worker (the ones a c10d env:// rendezvous reads).
  vars["MASTER_ADDR"] = spec_.masterAddr;
  vars["MASTER_PORT"] = std::to_string(port);
  vars["RANK"] = std::to_string(r.global);
  vars["WORLD_SIZE"] = std::to_string(spec_.worldSize);
  vars["LOCAL_RANK"] = std::to_string(r.local);
  vars["LOCAL_WORLD_SIZE"] = std::to_string(nproc);
  vars["GROUP_RANK"] = std::to_string(spec_.nodeRank);
  vars["GROUP_WORLD_SIZE"] = std::to_string(spec_.worldSize / nproc);
  vars["SHARDSCOPE_LAUNCHER"] = "shardscope-cli";
  std::vector<std::string> env = envBase;
  // envBase already lacks every name in spec_.env; drop the torchrun names too, then add ours.
  std::erase_if(env, [&](const std::string& e) { return vars.count(e.substr(0, e.find('='))) != 0; });
  for (const auto& [k, v] : vars) env.push_back(k + "=" + v);
  std::vector<char*> envp;
  envp.reserve(env.size() + 1);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);

  std::vector<std::string> argvStore;
  argvStore.push_back(spec_.program);
  for (const auto& a : spec_.args) argvStore.push_back(a);
  std::vector<char*> argv;
  argv.reserve(argvStore.size() + 1);
  for (auto& a : argvStore) argv.push_back(a.data());
  argv.push_back(nullptr);

  int outPipe[2] = {-1, -1};
  int errPipe[2] = {-1, -1};
  if (::pipe2(outPipe, O_CLOEXEC) != 0 || ::pipe2(errPipe, O_CLOEXEC) != 0) {
    const int e = errno;
    for (int fd : {outPipe[0], outPipe[1], errPipe[0], errPipe[1]})
      if (fd >= 0) ::close(fd);
    fail(r.global, "rank " + std::to_string(r.global) + " could not be started: pipe: " + errnoText(e));
    return false;
  }

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, outPipe[1], 1);  // dup2 clears O_CLOEXEC on 1 and 2
  posix_spawn_file_actions_adddup2(&fa, errPipe[1], 2);

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Own process group (pgid = pid): a signal to -pid reaches everything the rank starts. Signals
  // unblocked and the usual ones back to default, whatever the caller (a GUI, a CLI ignoring
  // SIGPIPE) has set.
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  sigset_t deflt;
  sigemptyset(&deflt);
  for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD, SIGUSR1, SIGUSR2, SIGALRM, SIGTSTP, SIGTTIN, SIGTTOU})
    sigaddset(&deflt, sig);
  posix_spawnattr_setsigdefault(&attr, &deflt);

  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, spec_.program.c_str(), &fa, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  ::close(outPipe[1]);
  ::close(errPipe[1]);
  if (rc != 0) {
    ::close(outPipe[0]);
    ::close(errPipe[0]);
    fail(r.global, "rank " + std::to_string(r.global) + " could not be started: " + spec_.program + ": " + errnoText(rc));
    return false;
  }
  for (int fd : {outPipe[0], errPipe[0]}) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  r.pid = pid;
  r.running = true;
  r.out.fd = outPipe[0];
  r.err.fd = errPipe[0];
  r.lastOutput = Clock::now();
  return true;
}

void Supervisor::spawnAll(int port) {
  const std::vector<std::string> envBase = [&] {
    std::map<std::string, std::string> names;
    for (const auto& [k, v] : spec_.env) names[k] = v;
    return inheritedEnvironment(names);
  }();
  for (Rank& r : ranks_)
    if (!spawnOne(r, envBase, port)) break;  // the ranks already started are stopped by the loop
}

void Supervisor::deliver(Rank& r, bool isErr, std::string line) {
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (isErr) {
    if (!line.empty()) r.lastErrLine = line;
    if (spec_.onErrLine) spec_.onErrLine(r.global, line);
  } else if (spec_.onLine) {
    spec_.onLine(r.global, line);
  }
}

// Reads what the pipe holds now (never blocks); complete lines go to the callbacks.
void Supervisor::readStream(Rank& r, Stream& s, bool isErr) {
  char chunk[kReadChunk];
  for (int i = 0; i < kReadsPerWake && s.fd >= 0; ++i) {
    const ssize_t n = ::read(s.fd, chunk, sizeof chunk);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      closeFd(s.fd);  // read error: treat as EOF
    } else if (n == 0) {
      closeFd(s.fd);
    } else {
      r.lastOutput = Clock::now();
      s.buf.append(chunk, static_cast<std::size_t>(n));
      std::size_t start = 0;
      for (std::size_t nl; (nl = s.buf.find('\n', start)) != std::string::npos; start = nl + 1)
        deliver(r, isErr, s.buf.substr(start, nl - start));
      s.buf.erase(0, start);
      if (s.buf.size() > kMaxLine) deliver(r, isErr, std::exchange(s.buf, std::string()));
      continue;
    }
    // EOF: the last line may lack its '\n'.
    if (!s.buf.empty()) deliver(r, isErr, std::exchange(s.buf, std::string()));
  }
}

void Supervisor::signalRunning(int sig) {
  for (Rank& r : ranks_)
    if (r.running) ::kill(-r.pid, sig);
}

void Supervisor::startStop() {
  if (stopping_) return;
  stopping_ = true;
  signalRunning(SIGTERM);
  killAt_ =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(std::max(0.0, spec_.killGraceS)));
}

void Supervisor::fail(int rank, std::string reason) {
  if (stopping_) return;  // only the first failure is reported; the rest are its consequences
  held_.reset();
  result_.failedRank = rank;
  result_.reason = std::move(reason);
  startStop();
}

namespace {
// Last words of a rank that failed because another one did first (Gloo/NCCL/TCPStore seeing the
// peer's sockets close).
bool looksLikeConsequence(const std::string& reason) {
  for (const char* p : {"Connection reset by peer", "Connection closed by peer", "Broken pipe", "Connection refused",
                        "ECONNRESET", "EPIPE", "remote process exited", "peer closed"})
    if (reason.find(p) != std::string::npos) return true;
  return false;
}
}  // namespace

void Supervisor::failOrHold(int rank, std::string reason) {
  if (stopping_) return;
  if (!looksLikeConsequence(reason)) {
    fail(rank, std::move(reason));
    return;
  }
  if (!held_) held_ = Held{rank, std::move(reason), Clock::now() + kConsequenceGrace};
}

// Reaps every rank that has exited. Its process group is killed first, while the zombie still holds
// the pid (so the group id cannot have been reused), which also ends anything it left behind.
void Supervisor::reapExited() {
  for (Rank& r : ranks_) {
    if (!r.running) continue;
    siginfo_t info;
    std::memset(&info, 0, sizeof info);
    if (::waitid(P_PID, static_cast<id_t>(r.pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
      if (errno == EINTR) continue;
      // ECHILD: someone else reaped it (SIGCHLD ignored, a waitpid(-1) elsewhere).
      r.running = false;
      r.exitCode = -1;
      ::kill(-r.pid, SIGKILL);
      fail(r.global, "rank " + std::to_string(r.global) + " vanished: its exit status was collected elsewhere");
      continue;
    }
    if (info.si_pid == 0) continue;  // still running
    ::kill(-r.pid, SIGKILL);
    int status = 0;
    while (::waitpid(r.pid, &status, 0) < 0 && errno == EINTR) {
    }
    r.running = false;
    // Whatever it wrote before exiting is in the pipes now: read it, so the reason quotes its last words.
    readStream(r, r.out, false);
    readStream(r, r.err, true);
    std::string lastWords = r.lastErrLine;
    if (!r.err.buf.empty()) lastWords = r.err.buf;  // a final line without '\n'
    const std::string tail = lastWords.empty() ? std::string() : ": " + lastWords;
    const std::string who = "rank " + std::to_string(r.global);
    if (WIFEXITED(status)) {
      r.exitCode = WEXITSTATUS(status);
      if (r.exitCode != 0) failOrHold(r.global, who + " exited with code " + std::to_string(r.exitCode) + tail);
    } else if (WIFSIGNALED(status)) {
      const int sig = WTERMSIG(status);
      r.exitCode = -sig;
      failOrHold(r.global, who + " killed by signal " + std::to_string(sig) + " (" + signalName(sig) + ")" + tail);
    } else {
      r.exitCode = -1;
      fail(r.global, who + " ended with wait status " + std::to_string(status));
    }
  }
}

LaunchResult Supervisor::run() {
  const int nproc = spec_.nprocPerNode > 0 ? spec_.nprocPerNode : spec_.worldSize;
  const int port = spec_.masterPort > 0 ? spec_.masterPort : pickFreePort();
  result_.masterPort = port;
  ranks_.resize(static_cast<std::size_t>(nproc));
  for (int i = 0; i < nproc; ++i) {
    ranks_[i].local = i;
    ranks_[i].global = spec_.nodeRank * nproc + i;
  }
  const auto t0 = Clock::now();
  spawnAll(port);

  const auto hang = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(spec_.hangTimeoutS));
  std::optional<Clock::time_point> drainUntil;
  std::vector<pollfd> fds;
  std::vector<std::pair<Rank*, bool>> owners;  // (rank, isErr) per pollfd
  for (;;) {
    reapExited();
    const auto now = Clock::now();
    if (held_ && (now >= held_->until || std::none_of(ranks_.begin(), ranks_.end(), [](const Rank& r) { return r.running; }))) {
      Held h = std::move(*held_);
      fail(h.rank, std::move(h.reason));  // nobody else failed meanwhile: it is the failure after all
    }
    bool anyRunning = false;
    bool anyOpen = false;
    for (const Rank& r : ranks_) {
      anyRunning |= r.running;
      anyOpen |= r.out.fd >= 0 || r.err.fd >= 0;
    }
    if (!anyRunning) {
      if (!drainUntil) drainUntil = now + kDrainAfterLastExit;
      if (!anyOpen || now >= *drainUntil) break;
    }
    if (!stopping_ && spec_.cancel && spec_.cancel->load()) {
      result_.cancelled = true;
      result_.reason = "cancelled";
      startStop();
    }
    if (!stopping_ && spec_.hangTimeoutS > 0) {
      for (const Rank& r : ranks_) {
        if (r.running && now - r.lastOutput > hang) {
          fail(r.global, "rank " + std::to_string(r.global) + " hung: no output for " + formatDouble(spec_.hangTimeoutS) + " s");
          break;
        }
      }
    }
    if (stopping_ && !killed_ && now >= killAt_) {
      signalRunning(SIGKILL);
      killed_ = true;
    }

    fds.clear();
    owners.clear();
    for (Rank& r : ranks_) {
      for (auto [s, isErr] : {std::pair{&r.out, false}, std::pair{&r.err, true}}) {
        if (s->fd < 0) continue;
        fds.push_back(pollfd{s->fd, POLLIN, 0});
        owners.emplace_back(&r, isErr);
      }
    }
    auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(kPollSlice);
    if (stopping_ && !killed_)
      wait = std::min(wait, std::chrono::ceil<std::chrono::milliseconds>(std::max(Clock::duration(0), killAt_ - now)));
    if (fds.empty()) {
      ::poll(nullptr, 0, static_cast<int>(wait.count()));
      continue;
    }
    const int n = ::poll(fds.data(), fds.size(), static_cast<int>(wait.count()));
    if (n <= 0) continue;  // timeout or EINTR
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      auto [r, isErr] = owners[i];
      readStream(*r, isErr ? r->err : r->out, isErr);
    }
  }
  for (Rank& r : ranks_) {
    closeFd(r.out.fd);  // held open by a process that left the rank's group: stop listening
    closeFd(r.err.fd);
    result_.exitCodes.push_back(r.exitCode);
  }
  result_.wallS = seconds(Clock::now() - t0);
  result_.ok = !stopping_ && result_.failedRank < 0 && !result_.cancelled;
  if (result_.ok)
    for (int c : result_.exitCodes) result_.ok &= c == 0;
  return result_;
}

}  // namespace

std::string signalName(int sig) {
  switch (sig) {
    case SIGHUP:
      return "SIGHUP";
    case SIGINT:
      return "SIGINT";
    case SIGQUIT:
      return "SIGQUIT";
    case SIGILL:
      return "SIGILL";
    case SIGTRAP:
      return "SIGTRAP";
    case SIGABRT:
      return "SIGABRT";
    case SIGBUS:
      return "SIGBUS";
    case SIGFPE:
      return "SIGFPE";
    case SIGKILL:
      return "SIGKILL";
    case SIGUSR1:
      return "SIGUSR1";
    case SIGSEGV:
      return "SIGSEGV";
    case SIGUSR2:
      return "SIGUSR2";
    case SIGPIPE:
      return "SIGPIPE";
    case SIGALRM:
      return "SIGALRM";
    case SIGTERM:
      return "SIGTERM";
    case SIGCHLD:
      return "SIGCHLD";
    case SIGCONT:
      return "SIGCONT";
    case SIGSTOP:
      return "SIGSTOP";
    case SIGTSTP:
      return "SIGTSTP";
    case SIGXCPU:
      return "SIGXCPU";
    case SIGXFSZ:
      return "SIGXFSZ";
    case SIGSYS:
      return "SIGSYS";
    default:
      return "SIG" + std::to_string(sig);
  }
}

int pickFreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw Error(std::string("cannot pick a free port: socket: ") + errnoText(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const int e = errno;
    ::close(fd);
    throw Error(std::string("cannot pick a free port on 127.0.0.1: ") + errnoText(e));
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

LaunchResult launchRanks(const LaunchSpec& spec) {
  if (spec.program.empty()) throw Error("launch: no program to run");
  if (spec.worldSize < 1) throw Error("launch: world size must be at least 1 (got " + std::to_string(spec.worldSize) + ")");
  const int nproc = spec.nprocPerNode > 0 ? spec.nprocPerNode : spec.worldSize;
  if (spec.nprocPerNode < 0 || spec.worldSize % nproc != 0)
    throw Error("launch: ranks per node (" + std::to_string(spec.nprocPerNode) + ") must divide the world size (" +
                std::to_string(spec.worldSize) + ")");
  const int nnodes = spec.worldSize / nproc;
  if (spec.nodeRank < 0 || spec.nodeRank >= nnodes)
    throw Error("launch: node rank " + std::to_string(spec.nodeRank) + " is outside 0.." + std::to_string(nnodes - 1));
  if (spec.masterPort < 0 || spec.masterPort > 65535)
    throw Error("launch: master port must be 0..65535 (got " + std::to_string(spec.masterPort) + ")");
  if (spec.masterPort == 0 && nnodes > 1)
    throw Error("launch: a job over " + std::to_string(nnodes) +
                " nodes needs an agreed master port (0 picks a local one, which the other nodes cannot know)");
  if (!(spec.killGraceS >= 0)) throw Error("launch: kill grace must be at least 0 s");
  Supervisor sup(spec);
  return sup.run();
}

bool isSecondaryFailure(std::string_view e) {
  for (const char* pat :
       {"Connection closed by peer", "Connection reset", "Broken pipe", "Timed out", "timed out", "Connection refused"})
    if (e.find(pat) != std::string_view::npos) return true;
  return false;
}

}  // namespace shardscope::core
