#include <csignal>

#include "app/cli/commands.h"

namespace {
shardscope::core::CancelToken* g_cancel = nullptr;
extern "C" void onSignal(int) {
  if (g_cancel) g_cancel->cancel();
}
}  // namespace

int main(int argc, char** argv) {
  shardscope::core::CancelToken cancel;
  g_cancel = &cancel;
  // Ctrl-C cancels the running operation cleanly (its transaction rolls back) instead of killing it.
  std::signal(SIGINT, onSignal);
  std::signal(SIGTERM, onSignal);
  return shardscope::cli::runCli(argc, argv, cancel);
}
