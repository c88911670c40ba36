// libFuzzer harness for the safe pickle reader and the memory-snapshot reader (core/util/pickle.h,
// core/import/memsnap_reader.h): every input is parsed as a pickle and, when it is one, read as a
// snapshot and analysed (timeline, figures) for each device. core::Error is the expected way to
// refuse an input; a crash, a sanitizer report, a hang or another exception type is a bug, and so is
// a broken invariant (abort() below): the allocations alive at the peak add up to the peak.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "core/analysis/memory_snapshot_analysis.h"
#include "core/import/memsnap_reader.h"
#include "core/util/error.h"

namespace {

using namespace shardscope::core;

[[noreturn]] void invariant(const char* what) {
  std::fprintf(stderr, "fuzz_memsnap: invariant broken: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  PickleLimits limits;
  limits.maxBytes = 64u << 20;  // a fuzz input never needs more; keeps the fuzzer's RSS small
  MemorySnapshot s;
  try {
    s = parseMemorySnapshot(bytes, "fuzz.pickle", limits);
  } catch (const Error&) {
    return 0;  // refused with a message: what a hostile file must get
  }
  for (int device : s.devices()) {
    const SnapshotTimeline t = buildSnapshotTimeline(s, device);
    const SnapshotFigures f = snapshotFigures(s, t, 1 << 20);
    // Sizes are the file's: with wrapping arithmetic the sum still equals the curve's level.
    std::uint64_t sum = 0;
    for (const auto& g : f.topAtPeak) sum += static_cast<std::uint64_t>(g.bytes);
    if (t.active.size() > 0 && sum != static_cast<std::uint64_t>(f.peakActiveBytes)) invariant("alive at the peak != the peak");
    (void)curveLevelOfDetail(t.active, t.active.front().tsNs, t.active.back().tsNs + 1, 64);
  }
  return 0;
}
