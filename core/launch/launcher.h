#pragma once
// Starts and supervises the rank processes of one run on this machine, the way torchrun does for
// one node: each local rank is `program args...` with the torchrun environment (MASTER_ADDR,
// MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, GROUP_WORLD_SIZE), so the
// worker reads only its environment. POSIX only (posix_spawn, pipes, poll).
//
// Each rank runs in its own process group, so stopping a rank reaches the processes it started.
// The first rank that fails (non-zero exit, killed by a signal, silent for hangTimeoutS) or a set
// cancel flag stops every other rank: SIGTERM to its group, SIGKILL after killGraceS. launchRanks()
// returns only when every rank has been reaped and its group killed: no zombies, no orphans left
// in a rank's process group.
//
// Output is read line by line from every rank's stdout and stderr without blocking (poll on all
// pipes; partial lines are buffered until their newline or EOF). A pipe makes the child's stdio
// fully buffered: the worker should flush after each line (setvbuf(stdout, nullptr, _IOLBF, 0)),
// or the hang detector sees silence while output sits in its buffer.
#include <atomic>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace shardscope::core {

struct LaunchSpec {
  std::string program;            // executable; searched in PATH when it has no '/'
  std::vector<std::string> args;  // argv[1..]; the launcher adds nothing to argv
  int worldSize = 2;
  int nprocPerNode = 0;  // ranks on this node; 0 = worldSize (single node)
  int nodeRank = 0;      // RANK = nodeRank * nprocPerNode + local rank
  std::string masterAddr = "127.0.0.1";
  int masterPort = 0;                                    // 0 = pickFreePort() (single node only)
  std::vector<std::pair<std::string, std::string>> env;  // extra variables for every rank (the torchrun ones win)
  double hangTimeoutS = 300;  // a rank with no output (stdout or stderr) for this long is hung; <= 0: never
  double killGraceS = 3;      // SIGTERM, then SIGKILL after this many seconds
  // Every complete stdout / stderr line of a rank (global rank), without its '\n' (and '\r'), in
  // order per rank and stream; called on the thread that called launchRanks().
  std::function<void(int rank, const std::string& line)> onLine;
  std::function<void(int rank, const std::string& line)> onErrLine;
  const std::atomic<bool>* cancel = nullptr;  // set: stop all ranks; the result says cancelled
};

struct LaunchResult {
  bool ok = false;         // every rank exited with code 0
  bool cancelled = false;  // stopped because *cancel was set
  int failedRank = -1;     // global rank of the first failure, -1 if none (or cancelled)
  // Why the run stopped, one line: "rank 1 killed by signal 9 (SIGKILL)", "rank 0 exited with code 3:
  // <its last stderr line>", "rank 1 hung: no output for 30 s", "rank 2 could not be started: ...",
  // "cancelled". Empty when ok.
  std::string reason;
  std::vector<int> exitCodes;  // per local rank: exit code, or -signal when killed by a signal
  int masterPort = 0;          // the port the ranks were given
  double wallS = 0;            // from the first spawn to the last reap
};

// Runs the ranks of this node to completion (or failure/cancel) and reports. Throws Error only for
// an unusable spec (program empty, sizes inconsistent, port 0 with several nodes); problems of the
// ranks themselves, including a program that cannot be executed, are in the result. If a callback
// throws, every rank is killed and reaped before the exception propagates.
LaunchResult launchRanks(const LaunchSpec& spec);

// Binds 127.0.0.1:0, reads the port the kernel chose and closes the socket. Throws Error on failure.
int pickFreePort();

// "SIGKILL" for 9, "SIG<n>" for a number it does not know.
std::string signalName(int sig);

// Whether a rank's error is what its peers' failure does to it (a connection closed or reset, a
// timed-out collective) rather than a failure of its own: the launcher's and the merge's root-cause
// rules skip these when another rank has its own.
bool isSecondaryFailure(std::string_view reason);

}  // namespace shardscope::core
