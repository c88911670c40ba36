#pragma once
// The protocol between the app and the CLI it starts (docs/ARCHITECTURE.md "The app and its child
// processes"): with `--progress json`, `run`, `compare` and `import` write one JSON object per line on
// stdout and nothing else there (their human output moves to stderr):
//   {"event":"progress","done":3,"total":20,"label":"ddp steps",...}
//   {"event":"run","run_id":7,"strategy":"ddp","status":"running"|"completed"|"failed"|"cancelled"}
//   {"event":"warning","message":"..."}
//   {"event":"error","message":"...","file":"...","key":"..."}       (file, key: when named)
//   {"event":"done","run_ids":[7,8],"exit":0}                          (always the last line)
#include <iosfwd>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/model/types.h"
#include "core/util/json.h"
#include "core/util/progress.h"

namespace shardscope::cli {

class EventStream {
 public:
  // The process' one stream (off until enable()).
  static EventStream& instance();

  // Events go to `out` from now on; std::cout is pointed at std::cerr so that what the commands
  // print for people cannot mix with the events.
  void enable();
  bool enabled() const { return out_ != nullptr; }

  // Throttled to ~10 events/s unless the stage changes or it is the last (done == total).
  void progress(const core::Progress& p);
  // One step of a run (never throttled): rank 0's progress line with its loss and step time.
  void step(core::RunId runId, std::string_view strategy, int step, int steps, const core::JsonValue* loss,
            const core::JsonValue* stepMs);
  void run(core::RunId runId, std::string_view strategy, std::string_view status);
  void warning(const std::string& message);
  // `files`: the inputs the command read (the error names one of them when it starts with it).
  void error(const std::string& message, const std::vector<std::string>& files);
  void done(int exitCode);

  // A progress callback that draws `inner` (the terminal bar) and sends progress events.
  core::ProgressFn wrap(core::ProgressFn inner);

 private:
  void emit(const core::JsonValue& event);

  std::unique_ptr<std::ostream> out_;
  std::mutex mutex_;
  std::vector<core::RunId> runIds_;
  std::string lastStage_;
  long long lastMs_ = -1000000;
};

}  // namespace shardscope::cli
