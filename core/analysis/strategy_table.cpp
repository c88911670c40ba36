#include "core/analysis/strategy_table.h"

#include <map>
#include <utility>

#include "core/util/units.h"

namespace shardscope::core {

const std::vector<StrategyColumnInfo>& strategyColumns() {
  using C = StrategyColumn;
  static const std::vector<StrategyColumnInfo> cols = {
      {C::Strategy, "strategy", "strategy", "strategy", true, false},
      {C::Precision, "precision", "precision", "precision (compute dtype)", true, false},
      {C::Tuning, "tuning", "tuning", "what trains: full fine-tuning or LoRA adapters of rank r", true, false},
      {C::Ranks, "ranks", "ranks", "ranks (one GPU or process each)", false, false},
      {C::PeakMemoryGib, "peak_memory_gib", "peak GiB/GPU",
       "peak memory per GPU (GiB allocated, max over ranks; host memory for runs without GPU memory)", false, false},
      {C::PeakMemoryOf, "peak_memory_of", "memory", "which memory the peak is: GPU or host", true, false},
      {C::InitSeconds, "init_time_s", "init s", "initialisation time (s)", false, false},
      {C::TokensPerSecond, "tokens_per_s", "tokens/s", "throughput, all ranks (tokens/s)", false, false},
      {C::TokensPerSecondPerGpu, "tokens_per_s_per_gpu", "tokens/s/GPU", "throughput per GPU (tokens/s over ranks)", false,
       false},
      {C::CommPct, "comm_pct", "comm %", "communication share (% of step time)", false, false},
      {C::ExposedCommPct, "exposed_comm_pct", "exposed %", "exposed communication share (% of step time)", false, false},
      {C::CheckpointSaveSeconds, "checkpoint_save_s", "ckpt save s", "checkpoint save time (s)", false, false},
      {C::TrainableParams, "trainable_params", "trainable", "trainable parameters (elements)", false, true},
      {C::FrozenParams, "frozen_params", "frozen", "frozen parameters (elements)", false, true},
      {C::SkippedSteps, "skipped_steps", "skipped", "steps skipped on fp16 overflow", false, true},
  };
  return cols;
}

const StrategyColumnInfo& strategyColumn(StrategyColumn c) { return strategyColumns()[static_cast<std::size_t>(c)]; }

namespace {

StrategyCell number(std::optional<double> v, std::string whyNot, std::string how = {}) {
  StrategyCell c;
  c.value = v;
  c.why = v ? std::move(how) : std::move(whyNot);
  return c;
}

StrategyCell textCell(std::string text, std::string whyNot) {
  StrategyCell c;
  c.text = std::move(text);
  if (c.text.empty()) c.why = std::move(whyNot);
  return c;
}

StrategyCell known(const KnownFigure& k) { return number(k.value, k.why, k.why); }

}  // namespace

StrategyRow strategyRow(const std::string& name, const RunFigures& f) {
  const bool imported = f.source == RunSource::Kineto;
  const bool simulated = f.source == RunSource::Simulated;
  StrategyRow r;
  r.run = f.runId;
  r.name = name;
  r.cells.resize(strategyColumns().size());
  auto set = [&](StrategyColumn c, StrategyCell cell) { r.cells[static_cast<std::size_t>(c)] = std::move(cell); };
  using C = StrategyColumn;

  set(C::Strategy, textCell(f.strategy, "not recorded in the trace"));
  set(C::Precision, textCell(f.precision, imported ? "not recorded in the trace" : "not in the run's configuration"));
  std::string tuning;
  if (f.loraRank) tuning = *f.loraRank > 0 ? "LoRA r=" + std::to_string(*f.loraRank) : "full";
  set(C::Tuning, textCell(tuning, imported ? "an imported trace does not say what trains" : "no readable configuration"));
  set(C::Ranks, number(f.worldSize > 0 ? std::optional<double>(f.worldSize) : std::nullopt, "world size unknown"));

  const std::string noMemory = imported ? "the trace has no memory records (profile_memory was off)"
                                        : "the run stored no memory records or allocator counters";
  std::optional<double> gib;
  if (f.peakAllocatedBytes) gib = static_cast<double>(*f.peakAllocatedBytes) / (1024.0 * 1024.0 * 1024.0);
  set(C::PeakMemoryGib,
      number(gib, noMemory, f.peakDevice == "host" ? "host memory: the run has no GPU memory records" : "GPU memory"));
  set(C::PeakMemoryOf, textCell(f.peakAllocatedBytes ? f.peakDevice : std::string(), noMemory));

  set(C::InitSeconds,
      number(f.initSeconds, imported    ? "an imported trace does not record initialisation"
                            : simulated ? "a simulation does not model initialisation"
                                        : "the run stored no init_time_s (it failed before training or predates it)"));

  std::string noSteps;
  if (f.stepTimeFromTimer)
    noSteps = "capture was off: the runtime's step timer only, no communication spans";
  else
    noSteps = imported ? "the trace has no steps (no ProfilerStep annotations)" : "the run has no counted steps";
  std::string noTokens;
  if (!f.stepTimeMs)
    noTokens = noSteps;
  else
    noTokens = imported ? "the trace does not say how many tokens a step trains" : "tokens per step unknown";
  set(C::TokensPerSecond, number(f.tokensPerSecond, noTokens, f.tokensHow));
  set(C::TokensPerSecondPerGpu,
      number(f.tokensPerSecondPerGpu, f.tokensPerSecond ? "world size unknown" : noTokens, "tokens/s over the run's ranks"));
  const std::string noShares = f.stepTimeMs && !f.stepTimeFromTimer ? "the steps have no device work to take shares of" : noSteps;
  set(C::CommPct, number(f.commPct, noShares, describeStepTime(f)));
  set(C::ExposedCommPct, number(f.exposedCommPct, noShares, describeStepTime(f)));

  std::string noSave;
  if (imported)
    noSave = "an imported trace does not record checkpoint saves";
  else if (simulated)
    noSave = "a simulation does not model checkpoint saves";
  else if (f.savesCheckpoint == false)
    noSave = "the run saved no checkpoint (save_checkpoint off)";
  else
    noSave = "the run stored no checkpoint_save_s";
  set(C::CheckpointSaveSeconds, number(f.checkpointSaveSeconds, noSave));

  set(C::TrainableParams, known(f.trainableParams));
  set(C::FrozenParams, known(f.frozenParams));
  set(C::SkippedSteps, known(f.skippedSteps));
  return r;
}

StrategyTable strategyTable(const std::vector<std::string>& names, const std::vector<RunFigures>& figures) {
  StrategyTable t;
  for (std::size_t i = 0; i < figures.size(); ++i) t.rows.push_back(strategyRow(i < names.size() ? names[i] : "", figures[i]));
  for (const auto& c : strategyColumns()) {
    bool any = !c.optional;
    for (const auto& r : t.rows) any = any || r.at(c.column).known();
    if (any) t.columns.push_back(c.column);
  }
  return t;
}

std::string strategyColumnHeader(const StrategyTable& t, StrategyColumn c) {
  std::string header(strategyColumn(c).header);
  if (c != StrategyColumn::PeakMemoryGib && c != StrategyColumn::TokensPerSecondPerGpu) return header;
  for (const auto& r : t.rows)
    if (r.at(StrategyColumn::PeakMemoryOf).text == "GPU") return header;
  const std::size_t at = header.rfind("GPU");
  return at == std::string::npos ? header : header.replace(at, 3, "rank");
}

std::string strategyCellText(StrategyColumn c, const StrategyCell& cell) {
  if (!cell.known()) return "n/a";
  if (strategyColumn(c).text) return cell.text;
  const double v = *cell.value;
  switch (c) {
    case StrategyColumn::PeakMemoryGib:
    case StrategyColumn::InitSeconds:
    case StrategyColumn::CheckpointSaveSeconds:
      return formatFixed(v, 2);
    case StrategyColumn::CommPct:
    case StrategyColumn::ExposedCommPct:
      return formatFixed(v, 1);
    case StrategyColumn::TokensPerSecond:
    case StrategyColumn::TokensPerSecondPerGpu:
      return formatGrouped(v, v < 100 ? 1 : 0);
    default:
      return formatGrouped(v, 0);
  }
}

std::vector<std::string> strategyTableNotes(const StrategyTable& t) {
  std::vector<std::string> out;
  for (const auto& r : t.rows) {
    std::vector<std::pair<std::string, std::string>> byWhy;  // reason -> columns, in column order
    for (StrategyColumn c : t.columns) {
      const StrategyCell& cell = r.at(c);
      if (cell.known()) continue;
      auto it = byWhy.begin();
      while (it != byWhy.end() && it->first != cell.why) ++it;
      const std::string header = strategyColumnHeader(t, c);
      if (it == byWhy.end())
        byWhy.emplace_back(cell.why, header);
      else
        it->second += ", " + header;
    }
    for (const auto& [why, cols] : byWhy) out.push_back(runLabel(r.name, r.run) + ": " + cols + ": " + why);
  }
  return out;
}

JsonValue toJson(const StrategyTable& t) {
  JsonValue out = JsonValue::array();
  for (const auto& r : t.rows) {
    JsonValue o = JsonValue::object();
    o.set("run_id", JsonValue::number(static_cast<std::int64_t>(r.run.value())));
    o.set("name", JsonValue::string(r.name));
    JsonValue na = JsonValue::object();
    for (const auto& c : strategyColumns()) {
      const StrategyCell& cell = r.at(c.column);
      const std::string key(c.key);
      if (!cell.known()) {
        o.set(key, JsonValue());
        na.set(key, JsonValue::string(cell.why));
      } else {
        o.set(key, c.text ? JsonValue::string(cell.text) : JsonValue::number(*cell.value));
      }
    }
    o.set("not_known", std::move(na));
    out.push(std::move(o));
  }
  return out;
}

}  // namespace shardscope::core
