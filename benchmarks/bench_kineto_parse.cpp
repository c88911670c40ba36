// bench_kineto_parse: the CPU cost per event of the Kineto parser alone (EventReader's scanner and
// KinetoParser's classification, no inflate, no writer), on one thread, over uncompressed traces.
//
//   bench_kineto_parse [--repeat N] A.json [B.json ...]
//
// Each file is read into memory; its traceEvents are handed to KinetoParser::addEventPrefix one by
// one, in batches of 4096 as the per-file pipeline does (batches recycled, not written). Prints the
// fastest of N passes (default 5) in ns per event and MB/s of JSON: the figure to compare when the
// tokenizer changes (end-to-end CPU time of an import moves by less than its noise on a busy machine).
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "core/import/kineto_parser.h"
#include "core/import/kineto_records.h"
#include "core/import/trace_reader.h"

namespace {

namespace kineto = shardscope::core::kineto;

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "bench_kineto_parse: cannot read %s\n", path.c_str());
    std::exit(2);
  }
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The offset of the first event of the file's traceEvents array.
std::size_t firstEvent(const std::string& text, const std::string& path) {
  const std::size_t key = text.find("\"traceEvents\"");
  const std::size_t open = key == std::string::npos ? key : text.find('[', key);
  if (open == std::string::npos) {
    std::fprintf(stderr, "bench_kineto_parse: %s has no traceEvents array\n", path.c_str());
    std::exit(2);
  }
  return open + 1;
}

// CPU time of this thread: other processes on a busy machine barely move it, unlike wall time.
double threadSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

bool isWs(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// One pass over a file's events; the number of events.
std::uint64_t parseAll(kineto::KinetoParser& parser, kineto::BatchPool& pool, const std::string& text, std::size_t at,
                       const std::string& path) {
  std::uint64_t events = 0;
  std::size_t inBatch = 0;
  for (;;) {
    while (at < text.size() && (isWs(text[at]) || text[at] == ',')) ++at;
    if (at >= text.size() || text[at] == ']') break;
    if (inBatch == 0) parser.beginBatch(0, events, std::nullopt);
    const std::size_t n = parser.addEventPrefix(std::string_view(text).substr(at), at, events);
    if (n == 0) {
      std::fprintf(stderr, "bench_kineto_parse: %s: event #%llu (byte offset %zu) is not read by the direct scanner\n",
                   path.c_str(), static_cast<unsigned long long>(events), at);
      std::exit(1);
    }
    at += n;
    ++events;
    if (++inBatch == 4096) {
      pool.give(parser.takeBatch(at));
      inBatch = 0;
    }
  }
  if (inBatch) pool.give(parser.takeBatch(at));
  return events;
}

}  // namespace

int main(int argc, char** argv) {
  int repeat = 5;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--repeat" && i + 1 < argc) {
      repeat = std::max(1, std::atoi(argv[++i]));
    } else if (a == "-h" || a == "--help") {
      std::printf("usage: bench_kineto_parse [--repeat N] A.json [B.json ...]\n");
      return 0;
    } else {
      files.push_back(a);
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "usage: bench_kineto_parse [--repeat N] A.json [B.json ...]\n");
    return 2;
  }
  std::vector<std::string> texts;
  std::vector<std::size_t> starts;
  std::uint64_t bytes = 0;
  for (const auto& f : files) {
    texts.push_back(readFile(f));
    starts.push_back(firstEvent(texts.back(), f));
    bytes += texts.back().size();
  }
  shardscope::core::ImportOptions options;
  kineto::BatchPool pool(4);
  double best = std::numeric_limits<double>::max();
  std::uint64_t events = 0;
  for (int r = 0; r < repeat; ++r) {
    kineto::KinetoParser parser(options, 0, files);
    parser.setPool(&pool);
    events = 0;
    const double t0 = threadSeconds();
    for (std::size_t i = 0; i < texts.size(); ++i) events += parseAll(parser, pool, texts[i], starts[i], files[i]);
    const double s = threadSeconds() - t0;
    best = std::min(best, s);
    std::printf("pass %d: %.3f s of CPU\n", r + 1, s);
  }
  std::printf("%llu events, %.1f MB of JSON: best %.3f s = %.1f ns/event, %.0f MB/s\n", static_cast<unsigned long long>(events),
              static_cast<double>(bytes) / 1e6, best, best * 1e9 / static_cast<double>(events),
              static_cast<double>(bytes) / 1e6 / best);
  return 0;
}
