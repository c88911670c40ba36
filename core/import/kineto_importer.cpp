#include "core/import/kineto_importer.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cmath>
#include <filesystem>

#include "core/import/kineto_pipeline.h"
#include "core/import/kineto_records.h"
#include "core/import/kineto_writer.h"
#include "core/storage/import_writer.h"
#include "core/util/error.h"

namespace shardscope::core {
namespace fs = std::filesystem;
using kineto::kMaxAbsNs;

bool parseMicrosToNs(std::string_view raw, std::int64_t& ns, bool& isFloat) {
  // One pass of exact decimal arithmetic: integer µs and up to 3 fractional digits are integer ns
  // (the 4th digit rounds half away from zero). Exponents fall back to a correctly rounded double.
  std::size_t i = 0;
  const std::size_t n = raw.size();
  bool neg = false;
  if (i < n && raw[i] == '-') {
    neg = true;
    ++i;
  }
  std::int64_t intPart = 0;
  std::size_t digits = 0;
  for (; i < n && raw[i] >= '0' && raw[i] <= '9'; ++i, ++digits) {
    if (digits >= 16) return false;  // > 1e16 µs is beyond any clock we accept
    intPart = intPart * 10 + (raw[i] - '0');
  }
  if (intPart > kMaxAbsNs / 1000) return false;  // checked before the multiplication can overflow
  std::int64_t frac = 0;
  int fracDigits = 0;
  bool roundUp = false;
  isFloat = false;
  if (i < n && raw[i] == '.') {
    isFloat = true;
    for (++i; i < n && raw[i] >= '0' && raw[i] <= '9'; ++i) {
      if (fracDigits < 3) {
        frac = frac * 10 + (raw[i] - '0');
        ++fracDigits;
      } else if (fracDigits == 3) {
        roundUp = raw[i] >= '5';
        ++fracDigits;
      }
    }
  }
  if (i < n) {
    // An exponent (or anything else the JSON grammar let through).
    isFloat = true;
    double d = 0;
    auto [p, ec] = std::from_chars(raw.data(), raw.data() + n, d);
    if (ec != std::errc() || p != raw.data() + n || !std::isfinite(d)) return false;
    const double scaled = d * 1000.0;
    if (!(std::fabs(scaled) <= static_cast<double>(kMaxAbsNs))) return false;
    ns = std::llround(scaled);
    return true;
  }
  for (; fracDigits < 3; ++fracDigits) frac *= 10;
  const std::int64_t v = intPart * 1000 + frac + (roundUp ? 1 : 0);
  if (v > kMaxAbsNs) return false;
  ns = neg ? -v : v;
  return true;
}

std::vector<std::string> collectTraceFiles(const std::vector<std::string>& inputs) {
  std::vector<std::string> out;
  for (const auto& in : inputs) {
    std::error_code ec;
    if (!fs::exists(in, ec)) throw Error(in + ": no such file or directory");
    if (fs::is_directory(in, ec)) {
      std::vector<std::string> found;
      for (const auto& entry : fs::directory_iterator(in, ec)) {
        if (!entry.is_regular_file()) continue;
        const std::string name = entry.path().filename().string();
        auto endsWith = [&](std::string_view suf) {
          return name.size() >= suf.size() && name.compare(name.size() - suf.size(), suf.size(), suf) == 0;
        };
        if (endsWith(".json") || endsWith(".json.gz") || endsWith(".pickle") || endsWith(".pickle.gz"))
          found.push_back(entry.path().string());
      }
      if (ec) throw Error(in + ": cannot list directory: " + ec.message());
      if (found.empty()) throw Error(in + ": directory contains no *.json, *.json.gz, *.pickle or *.pickle.gz trace files");
      std::sort(found.begin(), found.end());
      out.insert(out.end(), found.begin(), found.end());
    } else {
      out.push_back(in);
    }
  }
  return out;
}

KinetoImportResult importKineto(TraceStore& store, const std::vector<std::string>& files, const KinetoImportOptions& opt) {
  if (files.empty()) throw Error("import: no trace files given");
  const auto t0 = std::chrono::steady_clock::now();
  KinetoImportResult result;
  std::uint64_t totalBytes = 0;
  for (const auto& f : files) {
    std::error_code ec;
    const auto s = fs::file_size(f, ec);
    if (ec) throw Error(f + ": cannot read: " + ec.message());
    // Reading the database as a trace would open and close a descriptor of it: that drops every
    // POSIX lock this process holds on the file (SQLite's own included).
    if (fs::equivalent(f, store.path(), ec)) throw Error(f + ": is the database being imported into, not a trace file");
    totalBytes += s;
  }

  // One transaction for the whole import; the pipeline reads and parses on its threads while this
  // thread writes batch after batch in file order.
  ImportWriter out(store);
  kineto::KinetoPipeline pipeline(opt, files);
  kineto::KinetoWriter writer(store, out, opt, files, pipeline.workers(), totalBytes, result);
  while (auto batch = pipeline.next()) {
    writer.write(*batch);
    pipeline.recycle(std::move(batch));
  }
  writer.finish();
  out.commit();
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

namespace {

// torch.profiler / Kineto Chrome-trace JSON, and any Chrome trace (a bare array of events too).
class KinetoReader final : public TraceReader {
 public:
  std::string_view name() const override { return "kineto"; }
  std::string_view description() const override { return "torch.profiler / Kineto Chrome-trace JSON (.json, .json.gz)"; }
  int sniff(std::string_view head) const override {
    std::size_t i = head.substr(0, 3) == "\xEF\xBB\xBF" ? 3 : 0;  // a UTF-8 byte order mark
    while (i < head.size() && std::isspace(static_cast<unsigned char>(head[i]))) ++i;
    if (i >= head.size() || (head[i] != '{' && head[i] != '[')) return 0;
    if (head.find("\"traceEvents\"") != std::string_view::npos) return 100;
    for (const char* key : {"\"schemaVersion\"", "\"deviceProperties\"", "\"distributedInfo\"", "\"ph\""})
      if (head.find(key) != std::string_view::npos) return 80;
    // Some other JSON: the only JSON reader takes it and says precisely why it is not a trace.
    return 10;
  }
  ImportResult import(TraceStore& store, const std::vector<std::string>& files, const ImportOptions& options) const override {
    return importKineto(store, files, options);
  }
};

}  // namespace

std::unique_ptr<TraceReader> makeKinetoReader() { return std::make_unique<KinetoReader>(); }

}  // namespace shardscope::core
