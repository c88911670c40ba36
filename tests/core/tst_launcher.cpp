// The rank launcher: /bin/sh scripts stand in for shardscope-worker. Ranks that succeed, exit with
// an error, die by a signal, hang, ignore SIGTERM, are cancelled; the torchrun environment; line
// delivery (order, partial lines); and that no rank process or anything it started survives.
#include <QtTest>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include "core/launch/launcher.h"
#include "core/util/error.h"

using namespace shardscope::core;
using Clock = std::chrono::steady_clock;

namespace {

struct Captured {
  std::map<int, std::vector<std::string>> out;
  std::map<int, std::vector<std::string>> err;
};

LaunchSpec shSpec(const std::string& script, int world, Captured* cap) {
  LaunchSpec s;
  s.program = "/bin/sh";
  s.args = {"-c", script};
  s.worldSize = world;
  s.hangTimeoutS = 30;
  s.killGraceS = 2;
  if (cap) {
    s.onLine = [cap](int rank, const std::string& line) { cap->out[rank].push_back(line); };
    s.onErrLine = [cap](int rank, const std::string& line) { cap->err[rank].push_back(line); };
  }
  return s;
}

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// True when the process is gone, or a zombie that is not ours (its new parent reaps it).
bool processGone(pid_t pid) {
  if (::kill(pid, 0) != 0) return errno == ESRCH;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string all((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const auto close = all.rfind(')');
  return close != std::string::npos && close + 2 < all.size() && all[close + 2] == 'Z';
}

// Waits up to 2 s (a killed grandchild is reaped by init asynchronously).
bool eventuallyGone(pid_t pid) {
  for (int i = 0; i < 200; ++i) {
    if (processGone(pid)) return true;
    ::usleep(10000);
  }
  return false;
}

// Our own children must have been reaped: waitpid knows nothing about them any more.
bool reaped(pid_t pid) {
  int st = 0;
  return ::waitpid(pid, &st, WNOHANG) == -1 && errno == ECHILD;
}

// "pid <rank pid>" and "child <background sleep pid>" lines printed by the scripts below.
std::vector<pid_t> pidsFrom(const Captured& cap, const std::string& tag) {
  std::vector<pid_t> pids;
  for (const auto& [rank, lines] : cap.out)
    for (const auto& l : lines)
      if (l.rfind(tag + " ", 0) == 0) pids.push_back(static_cast<pid_t>(std::stol(l.substr(tag.size() + 1))));
  return pids;
}

}  // namespace

class TestLauncher : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void allRanksSucceed() {
    Captured cap;
    const auto r = launchRanks(shSpec("echo hello from $RANK; echo warn $RANK >&2; exit 0", 3, &cap));
    QVERIFY2(r.ok, r.reason.c_str());
    QVERIFY(!r.cancelled);
    QCOMPARE(r.failedRank, -1);
    QVERIFY(r.reason.empty());
    QCOMPARE(r.exitCodes, (std::vector<int>{0, 0, 0}));
    QVERIFY(r.masterPort > 0);
    for (int rank = 0; rank < 3; ++rank) {
      QCOMPARE(cap.out[rank], (std::vector<std::string>{"hello from " + std::to_string(rank)}));
      QCOMPARE(cap.err[rank], (std::vector<std::string>{"warn " + std::to_string(rank)}));
    }
  }

  void environmentPerRank() {
    Captured cap;
    LaunchSpec s = shSpec(
        "echo \"$RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $GROUP_RANK $GROUP_WORLD_SIZE $MASTER_ADDR "
        "$MASTER_PORT $FOO\"",
        4, &cap);
    s.nprocPerNode = 2;
    s.nodeRank = 1;
    s.masterAddr = "10.0.0.7";
    s.masterPort = 29533;
    s.env = {{"FOO", "bar"}, {"RANK", "99"}};  // the torchrun variables win over spec.env
    const auto r = launchRanks(s);
    QVERIFY2(r.ok, r.reason.c_str());
    QCOMPARE(r.exitCodes.size(), std::size_t(2));
    QCOMPARE(cap.out.size(), std::size_t(2));
    QCOMPARE(cap.out[2], (std::vector<std::string>{"2 4 0 2 1 2 10.0.0.7 29533 bar"}));
    QCOMPARE(cap.out[3], (std::vector<std::string>{"3 4 1 2 1 2 10.0.0.7 29533 bar"}));
  }

  void linesInOrderAndPartialLines() {
    Captured cap;
    const auto r =
        launchRanks(shSpec("i=0; while [ $i -lt 300 ]; do echo \"$RANK line $i\"; i=$((i+1)); done; "
                           "printf 'abc'; sleep 0.05; printf 'def\\r\\nlast-without-newline'",
                           2, &cap));
    QVERIFY2(r.ok, r.reason.c_str());
    for (int rank = 0; rank < 2; ++rank) {
      const auto& lines = cap.out[rank];
      QCOMPARE(lines.size(), std::size_t(302));
      for (int i = 0; i < 300; ++i) QCOMPARE(lines[i], std::to_string(rank) + " line " + std::to_string(i));
      QCOMPARE(lines[300], std::string("abcdef"));
      QCOMPARE(lines[301], std::string("last-without-newline"));
    }
  }

  void rankExitsWithError() {
    Captured cap;
    const auto t0 = Clock::now();
    const auto r = launchRanks(
        shSpec("echo pid $$; if [ \"$RANK\" = 1 ]; then sleep 0.2; echo starting >&2; echo 'boom: bad things' >&2; exit 3; fi; "
               "sleep 1000 & echo child $!; wait",
               3, &cap));
    QVERIFY(!r.ok);
    QCOMPARE(r.failedRank, 1);
    QCOMPARE(r.reason, std::string("rank 1 exited with code 3: boom: bad things"));
    QCOMPARE(r.exitCodes[1], 3);
    QCOMPARE(r.exitCodes[0], -SIGTERM);  // the others were stopped
    QCOMPARE(r.exitCodes[2], -SIGTERM);
    QVERIFY2(since(t0) < 2.0, std::to_string(since(t0)).c_str());
    const auto pids = pidsFrom(cap, "pid");
    const auto children = pidsFrom(cap, "child");
    QCOMPARE(pids.size(), std::size_t(3));
    QCOMPARE(children.size(), std::size_t(2));
    for (pid_t p : pids) QVERIFY(reaped(p) && processGone(p));
    for (pid_t p : children) QVERIFY2(eventuallyGone(p), std::to_string(p).c_str());
  }

  // A rank that fails because its peer went away is not the cause: the rank that crashed is named,
  // even when it exits a moment later (it was still cleaning up when its sockets closed).
  void peerConsequenceIsNotTheCause() {
    const auto r =
        launchRanks(shSpec("if [ \"$RANK\" = 0 ]; then echo '[gloo/transport/tcp/pair.cc:589] Read error: Connection reset by "
                           "peer' >&2; exit 1; fi; "
                           "sleep 0.4; echo 'injected fault at step 10' >&2; exit 1",
                           2, nullptr));
    QVERIFY(!r.ok);
    QCOMPARE(r.failedRank, 1);
    QCOMPARE(r.reason, std::string("rank 1 exited with code 1: injected fault at step 10"));
    // When nobody else fails, the consequence-looking failure is reported after all.
    const auto t0 = Clock::now();
    const auto alone =
        launchRanks(shSpec("if [ \"$RANK\" = 0 ]; then echo 'Connection reset by peer' >&2; exit 1; fi; sleep 1000", 2, nullptr));
    QVERIFY(!alone.ok);
    QCOMPARE(alone.failedRank, 0);
    QVERIFY(alone.reason.find("Connection reset by peer") != std::string::npos);
    QVERIFY2(since(t0) < 5.0, std::to_string(since(t0)).c_str());  // held 2 s, then the others stopped
  }

  void rankKilledBySignal() {
    Captured cap;
    const auto r = launchRanks(shSpec("if [ \"$RANK\" = 1 ]; then kill -9 $$; fi; sleep 1000", 2, &cap));
    QVERIFY(!r.ok);
    QCOMPARE(r.failedRank, 1);
    QCOMPARE(r.reason, std::string("rank 1 killed by signal 9 (SIGKILL)"));
    QCOMPARE(r.exitCodes[1], -9);
  }

  void hungRankIsStopped() {
    Captured cap;
    LaunchSpec s = shSpec(
        "echo pid $$; if [ \"$RANK\" = 1 ]; then sleep 1000 & echo child $!; wait; fi; "
        "while true; do echo tick; sleep 0.05; done",
        2, &cap);
    s.hangTimeoutS = 0.5;
    s.killGraceS = 0.5;
    const auto t0 = Clock::now();
    const auto r = launchRanks(s);
    const double took = since(t0);
    QVERIFY(!r.ok);
    QCOMPARE(r.failedRank, 1);
    QCOMPARE(r.reason, std::string("rank 1 hung: no output for 0.5 s"));
    QVERIFY2(took >= 0.5 && took < 0.5 + 0.5 + 0.5, std::to_string(took).c_str());
    for (pid_t p : pidsFrom(cap, "pid")) QVERIFY(reaped(p) && processGone(p));
    for (pid_t p : pidsFrom(cap, "child")) QVERIFY(eventuallyGone(p));
  }

  void sigtermIgnoredThenKilled() {
    // Both ranks ignore SIGTERM (and so does the sleep they start): only SIGKILL after the grace ends them.
    Captured cap;
    std::atomic<bool> cancel{false};
    LaunchSpec s = shSpec("trap '' TERM; echo pid $$; sleep 1000 & echo child $!; wait", 2, &cap);
    s.killGraceS = 0.3;
    s.cancel = &cancel;
    std::thread canceller([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      cancel = true;
    });
    const auto t0 = Clock::now();
    const auto r = launchRanks(s);
    const double took = since(t0);
    canceller.join();
    QVERIFY(!r.ok);
    QVERIFY(r.cancelled);
    QCOMPARE(r.failedRank, -1);
    QCOMPARE(r.reason, std::string("cancelled"));
    QCOMPARE(r.exitCodes, (std::vector<int>{-SIGKILL, -SIGKILL}));
    QVERIFY2(took >= 0.45 && took < 1.5, std::to_string(took).c_str());
    for (pid_t p : pidsFrom(cap, "pid")) QVERIFY(reaped(p) && processGone(p));
    const auto children = pidsFrom(cap, "child");
    QCOMPARE(children.size(), std::size_t(2));
    for (pid_t p : children) QVERIFY(eventuallyGone(p));
  }

  void cancelStopsQuickly() {
    std::atomic<bool> cancel{false};
    LaunchSpec s = shSpec("sleep 1000", 4, nullptr);
    s.cancel = &cancel;
    std::thread canceller([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      cancel = true;
    });
    const auto t0 = Clock::now();
    const auto r = launchRanks(s);
    canceller.join();
    QVERIFY(r.cancelled);
    QVERIFY(!r.ok);
    QCOMPARE(r.exitCodes, (std::vector<int>{-SIGTERM, -SIGTERM, -SIGTERM, -SIGTERM}));
    QVERIFY2(since(t0) < 1.0, std::to_string(since(t0)).c_str());
  }

  void programThatCannotStart() {
    LaunchSpec s;
    s.program = "/nonexistent/shardscope-worker";
    s.worldSize = 2;
    const auto r = launchRanks(s);
    QVERIFY(!r.ok);
    QCOMPARE(r.failedRank, 0);
    QVERIFY2(r.reason.find("rank 0 could not be started: /nonexistent/shardscope-worker: No such file") == 0, r.reason.c_str());
    QCOMPARE(r.exitCodes, (std::vector<int>{127, 127}));
  }

  void throwingCallbackLeavesNothing() {
    std::vector<pid_t> pids;
    LaunchSpec s = shSpec("echo pid $$; sleep 1000 & echo child $!; wait", 2, nullptr);
    s.onLine = [&](int, const std::string& line) {
      if (line.rfind("pid ", 0) == 0 || line.rfind("child ", 0) == 0)
        pids.push_back(static_cast<pid_t>(std::stol(line.substr(line.find(' ') + 1))));
      if (pids.size() == 4) throw std::runtime_error("consumer failed");
    };
    bool threw = false;
    try {
      launchRanks(s);
    } catch (const std::runtime_error& e) {
      threw = std::string(e.what()) == "consumer failed";
    }
    QVERIFY(threw);
    QCOMPARE(pids.size(), std::size_t(4));
    for (pid_t p : pids) QVERIFY2(eventuallyGone(p), std::to_string(p).c_str());
  }

  void badSpecs() {
    auto msg = [](LaunchSpec s) -> std::string {
      try {
        launchRanks(s);
      } catch (const Error& e) {
        return e.what();
      }
      return "<no error>";
    };
    LaunchSpec s = shSpec("true", 4, nullptr);
    s.program.clear();
    QVERIFY(msg(s).find("no program") != std::string::npos);
    s = shSpec("true", 4, nullptr);
    s.nprocPerNode = 3;
    QVERIFY(msg(s).find("must divide the world size") != std::string::npos);
    s = shSpec("true", 4, nullptr);
    s.nprocPerNode = 2;
    s.nodeRank = 2;
    QVERIFY(msg(s).find("node rank 2 is outside 0..1") != std::string::npos);
    s = shSpec("true", 4, nullptr);
    s.nprocPerNode = 2;
    QVERIFY(msg(s).find("needs an agreed master port") != std::string::npos);
  }

  void freePortAndSignalNames() {
    const int p = pickFreePort();
    QVERIFY(p > 0 && p < 65536);
    QCOMPARE(signalName(SIGKILL), std::string("SIGKILL"));
    QCOMPARE(signalName(SIGSEGV), std::string("SIGSEGV"));
    QCOMPARE(signalName(77), std::string("SIG77"));
  }
};

QTEST_APPLESS_MAIN(TestLauncher)
#include "tst_launcher.moc"
