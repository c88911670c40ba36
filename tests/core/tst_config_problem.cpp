// core/config/config_problem: the key and file a refused run configuration names, read from the
// errors of run_config.h — what the CLI's error event carries and the launch dialog marks.
#include <QtTest>

#include "core/config/config_problem.h"
#include "core/util/error.h"
#include "core/util/json.h"

using namespace shardscope::core;

namespace {

std::string thrown(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return {};
}

}  // namespace

class TestConfigProblem : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void validateNamesTheKey() {
    RunConfig c;
    QVERIFY(!checkRunConfig(c).has_value());
    c.worldSize = 3;
    c.nnodes = 2;
    auto p = checkRunConfig(c);
    QVERIFY(p.has_value());
    QCOMPARE(QString::fromStdString(p->key), QString("nnodes"));
    QVERIFY(p->file.empty());
    QVERIFY(!p->message.empty() && p->message.find("run config") == std::string::npos);
    QVERIFY(p->text.rfind("run config: nnodes (--nnodes): ", 0) == 0);
    c = RunConfig{};
    c.strategy = Strategy::Ddp;
    c.offloadParam = Offload::Cpu;
    p = checkRunConfig(c);
    QVERIFY(p.has_value());
    QCOMPARE(QString::fromStdString(p->key), QString("offload_param"));
    // Every key the table has comes back as itself when validate() names it.
    for (const auto& k : runConfigKeys()) {
      const auto d = describeConfigError("run config: " + k.key + " (" + k.flag + "): is wrong");
      QCOMPARE(QString::fromStdString(d.key), QString::fromStdString(k.key));
      QCOMPARE(QString::fromStdString(d.message), QString("is wrong"));
    }
  }

  void flagErrorsNameTheKey() {
    RunConfig c;
    const auto d = describeConfigError(thrown([&] { applyFlag(c, "world-size", "many"); }));
    QCOMPARE(QString::fromStdString(d.key), QString("world_size"));
    QVERIFY(d.file.empty());
  }

  void jsonErrorsNameFileAndKey() {
    const std::string text =
        thrown([] { parseRunConfigJson(parseJson(R"({"steps":"many"})", "cfg.json"), "/tmp/x/cfg.json", nullptr); });
    auto d = describeConfigError(text, {"/tmp/x/cfg.json"});
    QCOMPARE(QString::fromStdString(d.file), QString("/tmp/x/cfg.json"));
    QCOMPARE(QString::fromStdString(d.key), QString("steps"));
    d = describeConfigError(text);  // the file unknown: no key guessed
    QVERIFY(d.key.empty() && d.file.empty());
    QCOMPARE(QString::fromStdString(d.message), QString::fromStdString(text));
    // A DeepSpeed key path comes back as the path.
    const std::string ds = thrown(
        [] { fromDeepSpeedJson(parseJson(R"({"zero_optimization":{"stage":7}})", "ds.json"), "ds.json", RunConfig{}, nullptr); });
    d = describeConfigError(ds, {"ds.json"});
    QCOMPARE(QString::fromStdString(d.file), QString("ds.json"));
    QCOMPARE(QString::fromStdString(d.key), QString("zero_optimization.stage"));
  }

  void otherMessagesAreKeptWhole() {
    const auto d = describeConfigError("rank 1 exited with code 1: boom", {"a.json"});
    QVERIFY(d.key.empty() && d.file.empty());
    QCOMPARE(QString::fromStdString(d.message), QString("rank 1 exited with code 1: boom"));
  }
};

QTEST_MAIN(TestConfigProblem)
#include "tst_config_problem.moc"
