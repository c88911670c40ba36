// `estimate` and `simulate` with LoRA / QLoRA end to end: --scenario sets what it says and flags
// override it, --scenario list, an unknown scenario exits 2 with the list, the JSON carries the
// fine-tuning and the frozen-base category, and `simulate --config` carries lora_* from a run config.
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

#include "tests/app/cli_runner.h"

namespace {

using Result = shardscope::test::CliResult;
using shardscope::test::runCli;

QJsonObject json(const Result& r) {
  QJsonParseError e{};
  const auto doc = QJsonDocument::fromJson(r.out.toUtf8(), &e);
  if (e.error != QJsonParseError::NoError) qWarning("not JSON: %s", qPrintable(r.out.left(400)));
  return doc.object();
}

QJsonObject strategy(const QJsonObject& o, const QString& name) {
  for (const auto& v : o["strategies"].toArray())
    if (v.toObject()["strategy"].toString() == name) return v.toObject();
  return {};
}

// Qwen3-8B by hand: Ψ and Σ over 36 layers and the seven projections of r·(in + out) at r = 8.
constexpr qint64 kQwenP = 8190735360LL;
constexpr qint64 kQwenT8 = 36LL * 8 * ((4096 + 4096) + (4096 + 1024) * 2 + (4096 + 4096) + (4096 + 12288) * 3);
constexpr qint64 kGiB = 1024LL * 1024 * 1024;

}  // namespace

class TestCliEstimatorLora : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void qwenScenario() {
    const Result r = runCli({"estimate", "--scenario", "qwen3-lora-4xa10", "--json"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    const QJsonObject o = json(r);
    QCOMPARE(o["scenario"].toString(), QString("qwen3-lora-4xa10"));
    QCOMPARE(o["model"].toObject()["name"].toString(), QString("qwen3-8b"));
    QCOMPARE(o["gpus"].toInteger(), 4);
    QCOMPARE(o["device_bytes"].toInteger(), 24 * kGiB);
    QCOMPARE(o["link"].toObject()["name"].toString(), QString("pcie4"));
    QCOMPARE(o["micro_batch"].toInteger(), 1);
    QCOMPARE(o["seq_len"].toInteger(), 2048);
    QVERIFY(o["activation_checkpointing"].toBool());
    const QJsonObject ft = o["fine_tuning"].toObject();
    QCOMPARE(ft["mode"].toString(), QString("lora"));
    QCOMPARE(ft["lora_rank"].toInteger(), 8);
    QCOMPARE(ft["lora_alpha"].toDouble(), 16.0);
    QCOMPARE(ft["lora_targets"].toArray().size(), 7);
    QCOMPARE(ft["trainable_params"].toInteger(), kQwenT8);
    QCOMPARE(ft["frozen_params"].toInteger(), kQwenP);
    QCOMPARE(ft["frozen_base_bytes"].toInteger(), 2 * kQwenP);
    // Per strategy: the frozen base whole under DDP, a quarter under FSDP; gradients of the
    // adapters only on the wire.
    const QJsonObject ddp = strategy(o, "ddp"), fsdp = strategy(o, "fsdp");
    QCOMPARE(ddp["model_state"].toObject()["frozen_base"].toInteger(), 2 * kQwenP);
    QCOMPARE(fsdp["model_state"].toObject()["frozen_base"].toInteger(), 2 * kQwenP / 4);
    QCOMPARE(ddp["comm"].toObject()["message_bytes"].toInteger(), 2 * kQwenT8);
    QVERIFY(ddp["reasons"].toArray().first().toString().contains("replicated on every GPU"));
    QVERIFY(fsdp["reasons"].toArray().first().toString().contains("is sharded"));
    // A10: 125 TFLOPS dense bf16.
    const Result t = runCli({"estimate", "--scenario", "qwen3-lora-4xa10"});
    QVERIFY2(t.code == 0, qPrintable(t.err));
    QVERIFY(t.out.contains("21,823,488 trainable parameters"));
    QVERIFY(t.out.contains("frozen"));
    QVERIFY(t.out.contains("compute from 125 TFLOPS"));
  }

  void flagsOverrideTheScenario() {
    const Result r = runCli(
        {"estimate", "--scenario", "qwen3-lora-4xa10", "--gpus", "8", "--lora-rank", "16", "--gpu-memory", "48GiB", "--json"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    const QJsonObject o = json(r);
    QCOMPARE(o["gpus"].toInteger(), 8);
    QCOMPARE(o["device_bytes"].toInteger(), 48 * kGiB);
    QCOMPARE(o["fine_tuning"].toObject()["trainable_params"].toInteger(), 2 * kQwenT8);
    QCOMPARE(o["link"].toObject()["name"].toString(), QString("pcie4"));  // still the scenario's
    // QLoRA: NF4 projections, 16-bit embeddings, norms and head.
    const Result q = runCli({"estimate", "--scenario", "qwen3-qlora-4xa10", "--json"});
    QVERIFY2(q.code == 0, qPrintable(q.err));
    const QJsonObject qo = json(q)["fine_tuning"].toObject();
    QCOMPARE(qo["mode"].toString(), QString("qlora"));
    QCOMPARE(qo["nf4_bytes_per_param"].toDouble(), 0.515869140625);
    const qint64 proj = 36LL * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 12288);
    QCOMPARE(qo["frozen_base_bytes"].toInteger(), proj / 2 + proj / 64 + 4 * (proj / 16384) + 2 * (kQwenP - proj));
  }

  void fullFineTuningScenario() {
    const Result r = runCli({"estimate", "--scenario", "llama-7b-full-8xa100", "--json"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    const QJsonObject o = json(r);
    QCOMPARE(o["model"].toObject()["name"].toString(), QString("llama2-7b"));
    QCOMPARE(o["model"].toObject()["parameters"].toInteger(), 6738415616LL);
    QCOMPARE(o["gpus"].toInteger(), 8);
    QCOMPARE(o["device_bytes"].toInteger(), 80 * kGiB);
    QCOMPARE(o["link"].toObject()["name"].toString(), QString("nvlink-a100"));
    QCOMPARE(o["fine_tuning"].toObject()["mode"].toString(), QString("full"));
    QCOMPARE(o["fine_tuning"].toObject()["trainable_params"].toInteger(), 6738415616LL);
    QCOMPARE(strategy(o, "ddp")["model_state"].toObject()["frozen_base"].toInteger(), 0);
    // DDP's 16Ψ + 2Ψ of param.grad copies do not fit 80 GB; FSDP's 16Ψ/8 does.
    QVERIFY(!strategy(o, "ddp")["fits"].toBool());
    QVERIFY(strategy(o, "fsdp")["fits"].toBool());
  }

  void listAndUnknown() {
    const Result l = runCli({"estimate", "--scenario", "list"});
    QCOMPARE(l.code, 0);
    for (const char* n : {"qwen3-lora-4xa10", "qwen3-qlora-4xa10", "llama-7b-full-8xa100"}) QVERIFY2(l.out.contains(n), n);
    const Result u = runCli({"estimate", "--scenario", "qwen-on-a-toaster"});
    QCOMPARE(u.code, 2);
    QVERIFY2(u.err.contains("unknown scenario 'qwen-on-a-toaster'") && u.err.contains("qwen3-lora-4xa10") &&
                 u.err.contains("llama-7b-full-8xa100"),
             qPrintable(u.err));
    QVERIFY(u.out.isEmpty());
    const struct {
      QStringList args;
      QString message;
    } cases[] = {
        {{"estimate", "--model", "tiny", "--gpus", "2", "--lora-rank", "4", "--lora-targets", "q,attn"},
         "unknown projection attn"},
        {{"estimate", "--model", "tiny", "--gpus", "2", "--qlora"}, "--qlora go with --lora-rank"},
        {{"estimate", "--model", "tiny", "--gpus", "2", "--lora-rank", "4", "--qlora", "--precision", "fp32"}, "bf16"},
        {{"estimate", "--model", "tiny", "--gpus", "2", "--gpu", "v100"}, "unknown --gpu 'v100'"},
    };
    for (const auto& c : cases) {
      const Result r = runCli(c.args);
      QVERIFY2(r.code == 2, qPrintable(c.args.join(' ') + " -> " + QString::number(r.code) + ": " + r.err));
      QVERIFY2(r.err.contains(c.message), qPrintable(c.args.join(' ') + " -> " + r.err));
    }
  }

  void simulateCarriesLoraFromTheRunConfig() {
    // tiny, 2 ranks, fp32 on CPU, LoRA r = 4: FSDP gathers base + adapters, reduce-scatters adapters.
    QTemporaryDir dir;
    const QString cfg = dir.filePath("run.json");
    QFile f(cfg);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(R"({"model": "tiny", "strategy": "fsdp", "world_size": 2, "precision": "fp32", "lora_rank": 4,
               "lora_alpha": 8, "lora_targets": "q,k,v,o,gate,up,down"})");
    f.close();
    const Result r = runCli({"simulate", "--config", cfg, "--dry-run", "--json"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    const QJsonObject sim = json(r)["simulations"].toArray().first().toObject();
    // By hand: Ψ = 125,248; adapters 2 layers x 4·(128 + 96 + 96 + 128 + 240·3) = 9,344; fp32 (4 B).
    const qint64 P = 125248, T = 9344, head = 4 * (64 + 256 * 64);
    QCOMPARE(sim["message_bytes_per_step"].toInteger(), (4 * T + 4 * P) + (4 * T + 4 * P - head) + 4 * T);
    // The same flags on the command line give the same traffic.
    const Result c = runCli({"simulate", "--model", "tiny", "--gpus", "2", "--strategy", "fsdp", "--precision", "fp32",
                             "--lora-rank", "4", "--link", "gloo-cpu-local", "--dry-run", "--json"});
    QVERIFY2(c.code == 0, qPrintable(c.err));
    QCOMPARE(json(c)["simulations"].toArray().first().toObject()["message_bytes_per_step"].toInteger(),
             sim["message_bytes_per_step"].toInteger());
  }
};

QTEST_GUILESS_MAIN(TestCliEstimatorLora)
#include "tst_cli_estimator_lora.moc"
