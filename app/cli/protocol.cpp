#include "app/cli/protocol.h"

#include <algorithm>
#include <chrono>
#include <iostream>

#include "core/config/config_problem.h"

namespace shardscope::cli {

using core::JsonValue;

EventStream& EventStream::instance() {
  static EventStream s;
  return s;
}

void EventStream::enable() {
  std::lock_guard lock(mutex_);
  if (out_) return;
  out_ = std::make_unique<std::ostream>(std::cout.rdbuf());  // the real stdout
  std::cout.rdbuf(std::cerr.rdbuf());
}

void EventStream::emit(const JsonValue& event) {
  // Callers hold mutex_.
  if (!out_) return;
  *out_ << event.dump() << '\n';
  out_->flush();  // a line is read as soon as it is written
}

void EventStream::progress(const core::Progress& p) {
  std::lock_guard lock(mutex_);
  if (!out_) return;
  const long long now =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
  const bool last = p.total > 0 && p.done >= p.total;
  if (p.stage == lastStage_ && !last && now - lastMs_ < 100) return;
  lastStage_ = p.stage;
  lastMs_ = now;
  JsonValue e = JsonValue::object();
  e.set("event", JsonValue::string("progress"));
  e.set("done", JsonValue::number(static_cast<std::int64_t>(p.done)));
  e.set("total", JsonValue::number(static_cast<std::int64_t>(p.total)));
  e.set("label", JsonValue::string(p.stage));
  if (!p.unit.empty()) e.set("unit", JsonValue::string(p.unit));
  emit(e);
}

void EventStream::step(core::RunId runId, std::string_view strategy, int step, int steps, const JsonValue* loss,
                       const JsonValue* stepMs) {
  std::lock_guard lock(mutex_);
  if (!out_) return;
  JsonValue e = JsonValue::object();
  e.set("event", JsonValue::string("progress"));
  e.set("done", JsonValue::number(static_cast<std::int64_t>(step)));
  e.set("total", JsonValue::number(static_cast<std::int64_t>(steps)));
  e.set("label", JsonValue::string(std::string(strategy) + " steps"));
  e.set("unit", JsonValue::string("steps"));
  e.set("run_id", JsonValue::number(static_cast<std::int64_t>(runId.value())));
  e.set("strategy", JsonValue::string(std::string(strategy)));
  if (loss && loss->isNumber()) e.set("loss", *loss);
  if (stepMs && stepMs->isNumber()) e.set("step_ms", *stepMs);
  emit(e);
}

void EventStream::run(core::RunId runId, std::string_view strategy, std::string_view status) {
  std::lock_guard lock(mutex_);
  if (!out_) return;
  if (std::find(runIds_.begin(), runIds_.end(), runId) == runIds_.end()) runIds_.push_back(runId);
  JsonValue e = JsonValue::object();
  e.set("event", JsonValue::string("run"));
  e.set("run_id", JsonValue::number(static_cast<std::int64_t>(runId.value())));
  e.set("strategy", JsonValue::string(std::string(strategy)));
  e.set("status", JsonValue::string(std::string(status)));
  emit(e);
}

void EventStream::warning(const std::string& message) {
  std::lock_guard lock(mutex_);
  JsonValue e = JsonValue::object();
  e.set("event", JsonValue::string("warning"));
  e.set("message", JsonValue::string(message));
  emit(e);
}

void EventStream::error(const std::string& message, const std::vector<std::string>& files) {
  std::lock_guard lock(mutex_);
  if (!out_) return;
  const core::ConfigProblem p = core::describeConfigError(message, files);
  JsonValue e = JsonValue::object();
  e.set("event", JsonValue::string("error"));
  e.set("message", JsonValue::string(message));
  if (!p.file.empty()) e.set("file", JsonValue::string(p.file));
  if (!p.key.empty()) e.set("key", JsonValue::string(p.key));
  emit(e);
}

void EventStream::done(int exitCode) {
  std::lock_guard lock(mutex_);
  if (!out_) return;
  JsonValue ids = JsonValue::array();
  for (auto id : runIds_) ids.push(JsonValue::number(static_cast<std::int64_t>(id.value())));
  JsonValue e = JsonValue::object();
  e.set("event", JsonValue::string("done"));
  e.set("run_ids", std::move(ids));
  e.set("exit", JsonValue::number(static_cast<std::int64_t>(exitCode)));
  emit(e);
}

core::ProgressFn EventStream::wrap(core::ProgressFn inner) {
  if (!enabled()) return inner;
  return [this, inner = std::move(inner)](const core::Progress& p) {
    if (inner) inner(p);
    progress(p);
  };
}

}  // namespace shardscope::cli
