// libFuzzer harness for the Kineto importer and its JSON reader.
//
// Every input is (1) parsed by JsonReader twice, from a source that hands out 1-3 bytes per read (so
// token and buffer boundaries fall everywhere) and in one read, which must agree, and round-tripped
// through copyValue; and (2) imported with importKineto into an in-memory SQLite store, from an
// in-memory file (memfd) so the fuzzer does no disk I/O, and read back. core::Error is the expected
// way to refuse an input; a crash, a sanitizer report, a hang, another exception type or a broken
// invariant (checked below, abort() on failure) is a bug. $SHARDSCOPE_FUZZ_IGNORE=chunking skips the
// read-size invariant (to fuzz past a known bug).
#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "core/util/input_source.h"
#include "core/util/json_reader.h"
#include "core/import/kineto_importer.h"
#include "core/storage/trace_store.h"
#include "core/util/error.h"

namespace {

using shardscope::core::Error;
using shardscope::core::JsonReader;

[[noreturn]] void invariant(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz_kineto_import: invariant broken: %s: %s\n", what, detail.substr(0, 400).c_str());
  std::abort();
}

class MemorySource final : public shardscope::core::InputSource {
 public:
  MemorySource(std::string_view data, std::size_t chunk) : data_(data), chunk_(std::max<std::size_t>(1, chunk)) {
    path_ = "<memory>";
  }
  std::size_t read(char* buf, std::size_t n) override {
    const std::size_t k = std::min({n, chunk_, data_.size() - pos_});
    std::memcpy(buf, data_.data() + pos_, k);
    pos_ += k;
    return k;
  }
  std::uint64_t fileOffset() const override { return pos_; }
  std::uint64_t fileSize() const override { return data_.size(); }

 private:
  std::string_view data_;
  std::size_t chunk_;
  std::size_t pos_ = 0;
};

// The compact copy of the whole document; throws Error when it is not JSON.
std::string copyDocument(std::string_view text, std::size_t chunk) {
  MemorySource src(text, chunk);
  JsonReader r(src);
  std::string out;
  r.copyValue(r.next(), out);
  if (r.next() != JsonReader::Token::End) r.fail("data after the document");
  return out;
}

// Invariants named in $SHARDSCOPE_FUZZ_IGNORE (comma-separated) are not checked, so a fuzzing
// session can get past a known, reported bug and look for others.
bool ignored(const char* name) {
  static const std::string list = [] {
    const char* v = std::getenv("SHARDSCOPE_FUZZ_IGNORE");
    return v ? "," + std::string(v) + "," : std::string();
  }();
  return list.find("," + std::string(name) + ",") != std::string::npos;
}

void checkReader(std::string_view text) {
  // The result must not depend on how the input is split into reads.
  const std::size_t chunk = 1 + text.size() % 3;
  std::string first, whole;
  bool firstOk = true, wholeOk = true;
  std::string firstErr, wholeErr;
  try {
    first = copyDocument(text, chunk);
  } catch (const Error& e) {
    firstOk = false;
    firstErr = e.what();
  }
  try {
    whole = copyDocument(text, text.size() + 1);
  } catch (const Error& e) {
    wholeOk = false;
    wholeErr = e.what();
  }
  if (!ignored("chunking")) {
    if (firstOk != wholeOk) invariant("accepting the input depends on the read size", firstOk ? wholeErr : firstErr);
    if (firstOk && first != whole) invariant("the value depends on the read size", first + " vs " + whole);
  }
  if (!firstOk) return;
  // copyValue must emit valid JSON, and after one pass (which normalises escapes and replaces
  // invalid UTF-8) copying must be the identity.
  std::string second, third;
  try {
    second = copyDocument(first, 4096);
    third = copyDocument(second, 3);
  } catch (const Error& e) {
    invariant("copyValue output does not parse", std::string(e.what()) + " in " + first);
  }
  if (second != third) invariant("copyValue is not idempotent", second + " vs " + third);
}

void checkStore(shardscope::core::TraceStore& store, const shardscope::core::KinetoImportResult& res) {
  for (const auto runId : res.runIds) {
    const auto summary = store.summary(runId);
    for (const auto& rank : summary.ranks) {
      store.flows(rank.id);
      store.memoryEvents(rank.id);
    }
    store.steps(runId);
    for (const auto& ts : summary.tracks) {
      if (ts.eventCount == 0 || !ts.minStartNs || !ts.maxEndNs) continue;
      const auto events = store.eventsInWindow(ts.track.id, *ts.minStartNs, *ts.maxEndNs + 1, true);
      if (ts.track.kind != shardscope::core::TrackKind::Counter && static_cast<std::int64_t>(events.size()) != ts.eventCount)
        invariant("a track's event count differs from its events",
                  std::to_string(events.size()) + " vs " + std::to_string(ts.eventCount) + " on " + ts.track.name);
      for (std::size_t i = 0; i < events.size(); ++i) {
        if (events[i].endNs < events[i].startNs)
          invariant("event ends before it starts", std::string(events[i].name) + " " + std::to_string(events[i].startNs));
        if (i > 0 && events[i].startNs < events[i - 1].startNs)
          invariant("eventsInWindow is not ordered", std::string(events[i].name));
      }
      store.counterSamples(ts.track.id);
    }
  }
}

// The input as a file the importer can open: an anonymous in-memory file on Linux (no disk I/O per
// run), a temporary file elsewhere.
class InputFile {
 public:
  InputFile(const std::uint8_t* data, std::size_t size) {
#if defined(__linux__)
    fd_ = memfd_create("fuzz_trace.json", MFD_CLOEXEC);
    if (fd_ < 0) {
      std::perror("memfd_create");
      std::abort();
    }
    for (std::size_t done = 0; done < size;) {
      const ssize_t n = write(fd_, data + done, size - done);
      if (n <= 0) {
        std::perror("write");
        std::abort();
      }
      done += static_cast<std::size_t>(n);
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
#else
    path_ = (std::filesystem::temp_directory_path() / "shardscope_fuzz_input.json").string();
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
#endif
  }
  ~InputFile() {
#if defined(__linux__)
    close(fd_);
#else
    std::error_code ec;
    std::filesystem::remove(path_, ec);
#endif
  }
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  [[maybe_unused]] int fd_ = -1;
  std::string path_;
};

void checkImport(const std::uint8_t* data, std::size_t size) {
  const InputFile file(data, size);
  shardscope::core::TraceStore store(":memory:");
  try {
    const auto res = shardscope::core::importKineto(store, {file.path()});
    checkStore(store, res);
  } catch (const Error&) {
    // Refused with a message: expected for most inputs. The store must still be usable.
    if (!store.runs().empty()) invariant("a failed import left a run behind", file.path());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  checkReader(std::string_view(reinterpret_cast<const char*>(data), size));
  checkImport(data, size);
  return 0;
}
