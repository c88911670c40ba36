// Where a rank stands, from the variables torchrun, srun and our launcher set
// (core/launch/cluster_env.h), and the database each node writes.
#include <QtTest>

#include <map>
#include <string>

#include "core/launch/cluster_env.h"
#include "core/util/error.h"

using namespace shardscope::core;

namespace {

ClusterEnv from(const std::map<std::string, std::string>& vars) {
  return clusterEnvFrom([&](const char* k) -> const char* {
    auto it = vars.find(k);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

QString errorOf(const std::map<std::string, std::string>& vars) {
  try {
    from(vars);
  } catch (const Error& e) {
    return e.what();
  }
  return {};
}

}  // namespace

class TestClusterEnv : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void nothingSetIsOneRank() {
    const ClusterEnv e = from({});
    QCOMPARE(e.rank, 0);
    QCOMPARE(e.worldSize, 1);
    QCOMPARE(e.nnodes, 1);
    QCOMPARE(e.localWorldSize, 1);
    QCOMPARE(e.launcher, std::string("env"));
    QCOMPARE(schedulerPartOfJobId(e.schedulerId, e.masterAddr, e.masterPort), std::string("rdzv:127.0.0.1:29500"));
  }

  void torchrun() {
    const ClusterEnv e = from({{"RANK", "5"},
                               {"WORLD_SIZE", "8"},
                               {"LOCAL_RANK", "1"},
                               {"LOCAL_WORLD_SIZE", "4"},
                               {"GROUP_RANK", "1"},
                               {"GROUP_WORLD_SIZE", "2"},
                               {"MASTER_ADDR", "n0"},
                               {"MASTER_PORT", "29400"},
                               {"TORCHELASTIC_RUN_ID", "job7"}});
    QCOMPARE(e.rank, 5);
    QCOMPARE(e.localRank, 1);
    QCOMPARE(e.nodeRank, 1);
    QCOMPARE(e.nnodes, 2);
    QCOMPARE(e.firstRankOfNode(), 4);
    QCOMPARE(e.masterAddr, std::string("n0"));
    QCOMPARE(e.masterPort, 29400);
    QCOMPARE(e.launcher, std::string("torchrun"));
    QCOMPARE(e.schedulerId, std::string("torchrun:job7"));
    // torchrun's default rendezvous id names nothing: the endpoint does.
    const ClusterEnv d = from({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"TORCHELASTIC_RUN_ID", "none"}, {"MASTER_PORT", "1234"}});
    QCOMPARE(d.schedulerId, std::string());
    QCOMPARE(schedulerPartOfJobId(d.schedulerId, d.masterAddr, d.masterPort), std::string("rdzv:127.0.0.1:1234"));
    // Without GROUP_WORLD_SIZE, nodes = world / local world.
    QCOMPARE(
        from({{"RANK", "3"}, {"WORLD_SIZE", "6"}, {"LOCAL_RANK", "0"}, {"LOCAL_WORLD_SIZE", "3"}, {"GROUP_RANK", "1"}}).nnodes,
        2);
    QCOMPARE(from({{"RANK", "0"}, {"SHARDSCOPE_LAUNCHER", "shardscope-cli"}}).launcher, std::string("shardscope-cli"));
  }

  // As srun sets them: no RANK, no MASTER_ADDR, no MASTER_PORT.
  void slurm() {
    const ClusterEnv e = from({{"SLURM_JOB_ID", "123456"},
                               {"SLURM_STEP_ID", "2"},
                               {"SLURM_PROCID", "5"},
                               {"SLURM_NTASKS", "7"},
                               {"SLURM_LOCALID", "1"},
                               {"SLURM_NODEID", "2"},
                               {"SLURM_STEP_NUM_NODES", "3"},
                               {"SLURM_NNODES", "4"},  // the allocation's; the step's wins
                               {"SLURM_STEP_TASKS_PER_NODE", "2(x2),3"},
                               {"SLURM_STEP_NODELIST", "gpu[007-009],cpu1"}});
    QCOMPARE(e.launcher, std::string("slurm"));
    QCOMPARE(e.rank, 5);
    QCOMPARE(e.worldSize, 7);
    QCOMPARE(e.nodeRank, 2);
    QCOMPARE(e.nnodes, 3);
    QCOMPARE(e.localWorldSize, 3);  // node 2 has 3 tasks
    QCOMPARE(e.firstRankOfNode(), 4);
    QCOMPARE(e.masterAddr, std::string("gpu007"));
    QCOMPARE(e.masterPort, 20000 + 123456 % 20000);
    QCOMPARE(e.schedulerId, std::string("slurm:123456.2"));
    // torchrun inside an allocation: torchrun's names win, the Slurm job still names the job.
    const ClusterEnv t = from({{"SLURM_JOB_ID", "9"},
                               {"SLURM_PROCID", "0"},
                               {"RANK", "3"},
                               {"WORLD_SIZE", "4"},
                               {"TORCHELASTIC_RUN_ID", "x"},
                               {"MASTER_ADDR", "h"},
                               {"MASTER_PORT", "5"}});
    QCOMPARE(t.rank, 3);
    QCOMPARE(t.launcher, std::string("torchrun"));
    QCOMPARE(t.schedulerId, std::string("slurm:9"));
    QCOMPARE(t.masterPort, 5);
  }

  void slurmLists() {
    QCOMPARE(firstSlurmHost("gpu[01-04,07],cpu3"), std::string("gpu01"));
    QCOMPARE(firstSlurmHost("a,b"), std::string("a"));
    QCOMPARE(firstSlurmHost("n7"), std::string("n7"));
    QCOMPARE(firstSlurmHost("n[3,5]-ib"), std::string("n3-ib"));
    QCOMPARE(slurmTasksOnNode("2(x3),1", 0), 2);
    QCOMPARE(slurmTasksOnNode("2(x3),1", 2), 2);
    QCOMPARE(slurmTasksOnNode("2(x3),1", 3), 1);
    QCOMPARE(slurmTasksOnNode("2(x3),1", 4), 0);
    QCOMPARE(slurmTasksOnNode("4", 0), 4);
    QCOMPARE(slurmTasksOnNode("4,2", 1), 2);
    QCOMPARE(slurmTasksOnNode("x", 0), 0);
    QCOMPARE(slurmTasksOnNode("2(3)", 0), 0);
  }

  void badValuesNameTheVariable() {
    QVERIFY(errorOf({{"RANK", "two"}}).contains("RANK='two' is not an integer"));
    QVERIFY(errorOf({{"RANK", "4"}, {"WORLD_SIZE", "4"}}).contains("RANK 4 is outside 0..3"));
    QVERIFY(errorOf({{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"GROUP_RANK", "2"}, {"GROUP_WORLD_SIZE", "2"}}).contains("node rank"));
    QVERIFY(errorOf({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_TASKS_PER_NODE", "two"}})
                .contains("SLURM_STEP_TASKS_PER_NODE='two' is not a Slurm tasks-per-node list"));
    QVERIFY(errorOf({{"MASTER_PORT", "70000"}}).contains("MASTER_PORT 70000 is not a TCP port"));
    QVERIFY(
        errorOf({{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "2"}}).contains("LOCAL_RANK 2"));
  }

  void nodeDatabases() {
    QCOMPARE(nodeDatabasePath("runs.db", 0, 1), std::string("runs.db"));
    QCOMPARE(nodeDatabasePath("runs.db", 1, 2), std::string("runs.db.node1"));
    QCOMPARE(nodeDatabasePath("/scratch/run-{node}.db", 3, 4), std::string("/scratch/run-3.db"));
    QCOMPARE(nodeDatabasePath("/scratch/run-{node}.db", 0, 1), std::string("/scratch/run-0.db"));
    const std::string t1 = newJobToken(), t2 = newJobToken();
    QCOMPARE(t1.size(), std::size_t{16});
    QVERIFY(t1 != t2);
  }
};

QTEST_APPLESS_MAIN(TestClusterEnv)
#include "tst_cluster_env.moc"
