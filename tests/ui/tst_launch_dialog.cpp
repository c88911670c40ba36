// The launch dialog, offscreen: validation exactly as `shardscope-cli compare` does it, with the error
// at the field that causes it (red border and message, tab flagged) and Launch disabled until fixed;
// every run-config knob has an editor and survives the trip through the argument list; a DeepSpeed
// JSON fills the fields (its warnings shown) or is refused with its error.
#include <QCheckBox>
#include <QComboBox>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QSettings>
#include <QStandardPaths>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QtTest>

#include "core/config/run_config.h"
#include "tests/common/test_support.h"
#include "ui/launch/launch_dialog.h"

using namespace shardscope;

namespace {

// Reads a compare argument list back the way the CLI does (--flag value, --flag=value, bare booleans).
core::RunConfig parseArgs(const QStringList& args, QStringList* strategies) {
  core::RunConfig cfg;
  for (int i = 0; i < args.size(); ++i) {
    QString a = args[i];
    if (!a.startsWith("--")) throw std::runtime_error("stray argument " + a.toStdString());
    a = a.mid(2);
    QString value;
    bool inlineValue = false;
    if (const auto eq = a.indexOf('='); eq >= 0) {
      value = a.mid(eq + 1);
      a = a.left(eq);
      inlineValue = true;
    }
    if (a == "strategies") {
      *strategies = args.value(++i).split(',');
      continue;
    }
    if (!core::isRunConfigFlag(a.toStdString())) throw std::runtime_error("unknown flag " + a.toStdString());
    if (!inlineValue && !core::isRunConfigBoolFlag(a.toStdString())) value = args.value(++i);
    core::applyFlag(cfg, a.toStdString(), value.toStdString());
  }
  return cfg;
}

}  // namespace

class TestLaunchDialog : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void defaultsAreValid() {
    ui::LaunchDialog d;
    d.show();
    QVERIFY(QTest::qWaitForWindowExposed(&d));
    QVERIFY(d.isValid());
    QVERIFY(d.launchButton()->isEnabled());
    QCOMPARE(d.strategies(), QStringList({"ddp", "zero3", "fsdp"}));
    const QStringList args = d.arguments();
    QCOMPARE(args.mid(0, 2), QStringList({"--strategies", "ddp,zero3,fsdp"}));
    QVERIFY(args.contains("--model"));
    QCOMPARE(args.at(args.indexOf("--model") + 1), QString("small"));
    QVERIFY(args.contains("--world-size"));
    QVERIFY(!args.contains("--progress-json"));  // the controller adds it
    QVERIFY(!args.contains("--db"));
  }

  // Issue 46: a run name and repeats in the dialog, passed as compare's --name and --repeats; what
  // was launched last comes back the next time (QSettings), the fields, strategies, name and repeats.
  void nameRepeatsAndSettingsAreRemembered() {
    QStandardPaths::setTestModeEnabled(true);
    QSettings().remove("launch");
    {
      ui::LaunchDialog d;
      QVERIFY(!d.restoreSettings());  // nothing saved yet: the defaults stay
      QCOMPARE(d.repeats(), 1);
      QVERIFY(!d.arguments().contains("--repeats") && !d.arguments().contains("--name"));
      d.setRunName("bucket sweep");
      d.setRepeats(3);
      d.setValue("steps", "7");
      d.setStrategies({"ddp", "zero3"});
      const QStringList args = d.arguments();
      QCOMPARE(args.at(args.indexOf("--name") + 1), QString("bucket sweep"));
      QCOMPARE(args.at(args.indexOf("--repeats") + 1), QString("3"));
      QVERIFY(d.commandLine().contains("--name 'bucket sweep'"));
      d.saveSettings();
    }
    ui::LaunchDialog d;
    QCOMPARE(d.value("steps"), QString("20"));
    QVERIFY(d.restoreSettings());
    QCOMPARE(d.runName(), QString("bucket sweep"));
    QCOMPARE(d.repeats(), 3);
    QCOMPARE(d.value("steps"), QString("7"));
    QCOMPARE(d.strategies(), QStringList({"ddp", "zero3"}));
    QVERIFY(d.isValid());
    QSettings().remove("launch");
  }

  void hsdpShardGroupMustDivideWorldSize() {
    ui::LaunchDialog d;
    d.show();
    QVERIFY(QTest::qWaitForWindowExposed(&d));
    d.setStrategies({"ddp", "hsdp"});
    auto* world = qobject_cast<QSpinBox*>(d.editorFor("world_size"));
    auto* shard = qobject_cast<QSpinBox*>(d.editorFor("shard_group_size"));
    QVERIFY(world && shard);
    world->setValue(4);  // edits as a user would: validation follows every change
    shard->setValue(3);
    QVERIFY(!d.isValid());
    QVERIFY(!d.launchButton()->isEnabled());
    QCOMPARE(d.invalidKeys(), QStringList({"shard_group_size"}));  // only that field
    QVERIFY(d.errorFor("shard_group_size").contains("must divide world_size (3 does not divide 4)"));
    QVERIFY(d.errorFor("shard_group_size").startsWith("hsdp: "));  // ddp is not concerned
    QVERIFY(d.isMarked("shard_group_size"));
    QVERIFY(!d.isMarked("world_size"));
    QCOMPARE(shard->property("invalid").toBool(), true);
    auto* error = d.findChild<QLabel*>("shard_group_size_error");
    QVERIFY(error);
    QVERIFY(error->text().contains("3 does not divide 4"));
    // Its tab is flagged.
    QTabWidget* tabs = d.knobTabs();
    int fsdpTab = -1;
    for (int i = 0; i < tabs->count(); ++i)
      if (tabs->tabText(i) == "FSDP/HSDP") fsdpTab = i;
    QVERIFY(fsdpTab >= 0);
    QVERIFY(!tabs->tabIcon(fsdpTab).isNull());
    // Clicking Launch does not accept.
    QTest::mouseClick(d.launchButton(), Qt::LeftButton);
    QCOMPARE(d.result(), int(QDialog::Rejected));
    QVERIFY(d.isVisible());
    // Fixing it enables Launch and clears the marks.
    shard->setValue(2);
    QVERIFY(d.isValid());
    QVERIFY(d.launchButton()->isEnabled());
    QVERIFY(!d.isMarked("shard_group_size"));
    QVERIFY(error->text().isEmpty());
    QVERIFY(tabs->tabIcon(fsdpTab).isNull());
    const QStringList args = d.arguments();
    QCOMPARE(args.at(args.indexOf("--shard-group-size") + 1), QString("2"));
    QCOMPARE(args.at(args.indexOf("--world-size") + 1), QString("4"));
    // Launch now accepts.
    QTest::mouseClick(d.launchButton(), Qt::LeftButton);
    QCOMPARE(d.result(), int(QDialog::Accepted));
  }

  void errorsAtTheirFields() {
    ui::LaunchDialog d;
    // A value that does not parse.
    auto* bucket = qobject_cast<QLineEdit*>(d.editorFor("reduce_bucket_size"));
    QVERIFY(bucket);
    bucket->setText("lots");
    QVERIFY(!d.launchButton()->isEnabled());
    QVERIFY(d.errorFor("reduce_bucket_size").contains("expected an element count"));
    QVERIFY(d.isMarked("reduce_bucket_size"));
    bucket->setText("5e8");
    QVERIFY(d.isValid());
    // An option that only some strategies accept: named per strategy.
    d.setStrategies({"ddp", "zero3"});
    d.setValue("offload_optimizer", "cpu");
    QVERIFY(!d.isValid());
    QVERIFY(d.errorFor("offload_optimizer").startsWith("ddp: only with zero1, zero2 or zero3"));
    d.setStrategies({"zero3"});
    QVERIFY(d.isValid());
    const QStringList args = d.arguments();
    QCOMPARE(args.at(args.indexOf("--offload-optimizer") + 1), QString("cpu"));
    // A range rule: steps 0.
    d.setValue("steps", "0");
    QVERIFY(d.errorFor("steps").contains("must be at least 1"));
    QVERIFY(d.isMarked("steps"));
    d.setValue("steps", "5");
    // Cross-field: consolidate without save, save without a directory.
    d.setValue("consolidate_checkpoint", "true");
    QVERIFY(d.errorFor("consolidate_checkpoint").contains("needs save_checkpoint"));
    d.setValue("save_checkpoint", "true");
    QVERIFY(d.errorFor("checkpoint_dir").contains("must be set"));
    d.setValue("checkpoint_dir", "/tmp/ckpt");
    QVERIFY(d.isValid());
    // No strategy at all.
    d.setStrategies({});
    QVERIFY(!d.isValid());
    QVERIFY(d.isMarked("strategies"));
    QVERIFY(!d.launchButton()->isEnabled());
    // fsdp alone: the offload_optimizer message is the same for every selected strategy, so unprefixed.
    d.setStrategies({"fsdp"});
    QVERIFY(d.errorFor("offload_optimizer").startsWith("only with zero1, zero2 or zero3 (strategy is fsdp"));
    d.setStrategies({});
    auto* box = d.findChild<QCheckBox*>("strategy_zero2");
    QVERIFY(box);
    box->setChecked(true);
    QVERIFY(d.isValid());
    QCOMPARE(d.strategies(), QStringList({"zero2"}));
  }

  void everyKnobHasAnEditorAndRoundTrips() {
    ui::LaunchDialog d;
    QStringList expected;
    for (const auto& k : core::runConfigKeys())
      if (k.key != "strategy") expected << QString::fromStdString(k.key);
    QCOMPARE(d.keys(), expected);
    for (const QString& key : expected) QVERIFY2(d.editorFor(key), qPrintable(key));
    // A configuration with every knob away from its default goes through the fields and the argument
    // list unchanged.
    core::RunConfig c;
    c.strategy = core::Strategy::Hsdp;
    c.model = "odd";
    c.layers = 1;
    c.worldSize = 4;
    c.nnodes = 2;
    c.nodeRank = 1;
    c.nprocPerNode = 2;
    c.steps = 7;
    c.seed = 12345678901234ULL;
    c.microBatch = 3;
    c.seqLen = 33;
    c.gradAccum = 2;
    c.dataFile = "/data/corpus with space.txt";
    c.optimizer = core::OptimizerKind::Sgd;
    c.lr = 0.25;
    c.weightDecay = 0.01;
    c.beta1 = 0.8;
    c.beta2 = 0.9;
    c.eps = 1e-6;
    c.momentum = 0.5;
    c.gradClip = 1.5;
    c.precision = core::Precision::Bf16;
    c.reduceDtype = core::ReduceDtype::Fp32;
    c.attention = core::AttentionKernel::Eager;
    c.device = core::ComputeDevice::Cuda;
    c.backend = core::CommBackend::Nccl;
    c.bucketCapMb = 12.5;
    c.firstBucketMb = 0.5;
    c.gradientAsBucketView = true;
    c.reduceBucketSize = 123456;
    c.allgatherBucketSize = 654321;
    c.overlapComm = false;
    c.contiguousGradients = false;
    c.prefetchBucketSize = 1000;
    c.paramPersistenceThreshold = 0;
    c.maxLiveParameters = 5000;
    c.maxReuseDistance = 6000;
    c.offloadOptimizer = core::Offload::Cpu;
    c.offloadParam = core::Offload::Cpu;
    c.backwardPrefetch = core::BackwardPrefetch::Post;
    c.forwardPrefetch = true;
    c.limitAllGathers = false;
    c.shardGroupSize = 2;
    c.activationCheckpointing = true;
    c.saveCheckpoint = true;
    c.consolidateCheckpoint = true;
    c.checkpointDir = "/ckpt";
    c.capture = false;
    c.linkProbe = false;
    c.gpuTrace = core::GpuTrace::Full;
    c.hangTimeoutS = 42.5;
    c.flushIntervalS = 0.25;
    c.loraRank = 8;
    c.loraAlpha = 32;
    c.loraTargets = "q,v";
    c.lossScale = 128;
    c.initialScalePower = 12;
    c.lossScaleWindow = 500;
    c.hysteresis = 3;
    c.minLossScale = 2;
    // Every field differs from the defaults (so the round trip covers every flag).
    const core::JsonValue cj = core::toJson(c), dj = core::toJson(core::RunConfig{});
    for (const auto& [key, v] : cj.members()) QVERIFY2(dj.find(key)->dump() != v.dump(), key.c_str());
    d.setConfig(c);
    QCOMPARE(d.strategies(), QStringList({"hsdp"}));
    QVERIFY(d.config() == c);
    QStringList strategies;
    const core::RunConfig back = parseArgs(d.arguments(), &strategies);
    QCOMPARE(strategies, QStringList({"hsdp"}));
    core::RunConfig expectedBack = c;
    expectedBack.strategy = core::Strategy::Ddp;  // compare sets it per strategy
    QVERIFY(back == expectedBack);
    // The field editors show the values.
    QCOMPARE(d.value("backward_prefetch"), QString("post"));
    QCOMPARE(d.value("overlap_comm"), QString("false"));
    QCOMPARE(d.value("seed"), QString("12345678901234"));
    QCOMPARE(qobject_cast<QComboBox*>(d.editorFor("model"))->currentText(), QString("odd"));
    QCOMPARE(qobject_cast<QCheckBox*>(d.editorFor("activation_checkpointing"))->isChecked(), true);
    // Defaults produce a short command.
    ui::LaunchDialog fresh;
    QCOMPARE(fresh.arguments().size(), 8);  // --strategies S --model M --steps N --world-size W
  }

  void deepSpeedStage3FillsTheFields() {
    QTemporaryDir dir;
    const std::string path = test::writeFile(dir, "ds_zero3.json",
                                             "{\n"
                                             "  \"train_micro_batch_size_per_gpu\": 2,\n"
                                             "  \"gradient_accumulation_steps\": 3,\n"
                                             "  \"gradient_clipping\": 1.0,\n"
                                             "  \"steps_per_print\": 10,\n"
                                             "  \"scheduler\": {\"type\": \"WarmupLR\"},\n"
                                             "  \"zero_optimization\": {\n"
                                             "    \"stage\": 3,\n"
                                             "    \"overlap_comm\": true,\n"
                                             "    \"reduce_bucket_size\": 200000,\n"
                                             "    \"stage3_prefetch_bucket_size\": 1000000,\n"
                                             "    \"stage3_param_persistence_threshold\": 1000,\n"
                                             "    \"offload_optimizer\": {\"device\": \"cpu\"}\n"
                                             "  }\n"
                                             "}\n");
    ui::LaunchDialog d;
    d.show();
    QVERIFY(QTest::qWaitForWindowExposed(&d));
    d.setValue("model", "tiny");
    QVERIFY(d.loadDeepSpeedJson(QString::fromStdString(path)));
    QVERIFY(d.deepSpeedError().isEmpty());
    QCOMPARE(d.strategies(), QStringList({"zero3"}));
    QVERIFY(d.findChild<QCheckBox*>("strategy_zero3")->isChecked());
    QVERIFY(!d.findChild<QCheckBox*>("strategy_ddp")->isChecked());
    QCOMPARE(d.value("micro_batch"), QString("2"));
    QCOMPARE(d.value("grad_accum"), QString("3"));
    QCOMPARE(d.value("grad_clip"), QString("1"));
    QCOMPARE(d.value("reduce_bucket_size"), QString("200000"));
    QCOMPARE(d.value("prefetch_bucket_size"), QString("1000000"));
    QCOMPARE(d.value("param_persistence_threshold"), QString("1000"));
    QCOMPARE(d.value("offload_optimizer"), QString("cpu"));
    QCOMPARE(d.value("overlap_comm"), QString("true"));
    QCOMPARE(d.value("model"), QString("tiny"));  // not in the file: kept
    QCOMPARE(qobject_cast<QSpinBox*>(d.editorFor("micro_batch"))->value(), 2);
    // The scheduler is known but not implemented: a warning.
    QVERIFY(!d.deepSpeedWarnings().isEmpty());
    QVERIFY(d.deepSpeedWarnings().join("\n").contains("scheduler"));
    QVERIFY(d.isValid());
    const QStringList args = d.arguments();
    QCOMPARE(args.at(1), QString("zero3"));
    QCOMPARE(args.at(args.indexOf("--prefetch-bucket-size") + 1), QString("1000000"));
  }

  void refusedDeepSpeedLeavesTheFields() {
    QTemporaryDir dir;
    const std::string path =
        test::writeFile(dir, "amp.json", "{\"amp\": {\"enabled\": true}, \"zero_optimization\": {\"stage\": 2}}");
    ui::LaunchDialog d;
    const QStringList before = d.arguments();
    QVERIFY(!d.loadDeepSpeedJson(QString::fromStdString(path)));
    QVERIFY(d.deepSpeedError().contains("amp"));
    QCOMPARE(d.arguments(), before);
    QVERIFY(d.isValid());
    QVERIFY(!d.loadDeepSpeedJson(dir.filePath("missing.json")));
    QVERIFY(!d.deepSpeedError().isEmpty());
  }
};

QTEST_MAIN(TestLaunchDialog)
#include "tst_launch_dialog.moc"
