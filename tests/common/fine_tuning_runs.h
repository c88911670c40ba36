#pragma once
// Three runs for the strategy table's tests (core, CLI, Compare page, reports): two runtime-like runs
// whose metrics are written by hand with the runtime's keys and one imported-like run with none.
//  - "fsdp lora": fsdp, fp16, LoRA r=8, no checkpoint saved; trainable_params 1234567, frozen_params
//    7654321, skipped_steps 3; host peak 97 MiB (rank 1), init 0.5 s, 3 ms of communication a step.
//  - "zero3 full": zero3, bf16, full fine-tuning of the tiny preset (125,248 parameters), no parameter
//    metrics; host peak 201 MiB, init 2.5 s, 4 ms of communication a step, checkpoint_save_s 1.25.
//  - "imported": a Kineto-sourced run with steps and communication only (no memory, no metrics).
// Both runtime-like runs train micro_batch 4 × seq_len 128 × world_size 2 = 1024 tokens per 10 ms step.
#include <string>

#include "core/config/run_config.h"
#include "core/storage/trace_store.h"
#include "tests/ui/ui_fixture.h"

namespace shardscope::test {

struct FineTuningRuns {
  core::RunId lora, full, imported;
};

// The run-config JSON a run of ours stores (every key of core/config's table).
inline std::string fineTuningConfig(core::Strategy s, core::Precision p, int loraRank, bool saveCheckpoint) {
  core::RunConfig c;
  c.strategy = s;
  c.model = "tiny";
  c.worldSize = 2;
  c.microBatch = 4;
  c.seqLen = 128;
  c.gradAccum = 1;
  c.precision = p;
  c.loraRank = loraRank;
  c.saveCheckpoint = saveCheckpoint;
  if (saveCheckpoint) c.checkpointDir = "/tmp/ckpt";
  return core::toJson(c).dump();
}

inline FineTuningRuns writeFineTuningRuns(core::TraceStore& store) {
  using namespace core;
  FineTuningRuns out;
  RunSpec a;
  a.name = "fsdp lora";
  a.strategy = "fsdp";
  a.configJson = fineTuningConfig(Strategy::FsdpFull, Precision::Fp16, 8, false);
  out.lora = writeRun(store, a);
  store.setMetric(out.lora, std::nullopt, "trainable_params", 1234567);
  store.setMetric(out.lora, std::nullopt, "frozen_params", 7654321);
  store.setMetric(out.lora, std::nullopt, "skipped_steps", 3);

  RunSpec b;
  b.name = "zero3 full";
  b.strategy = "zero3";
  b.peakBytes = 200ll << 20;
  b.initS = 2.5;
  b.commNs = 4'000'000;
  b.configJson = fineTuningConfig(Strategy::Zero3, Precision::Bf16, 0, true);
  out.full = writeRun(store, b);
  store.setMetric(out.full, std::nullopt, "checkpoint_save_s", 1.25);

  RunSpec c;
  c.name = "imported";
  c.strategy = "";
  c.source = RunSource::Kineto;
  c.memorySamples = 0;
  c.runMetrics = false;
  c.breakdown = false;
  out.imported = writeRun(store, c);
  return out;
}

}  // namespace shardscope::test
