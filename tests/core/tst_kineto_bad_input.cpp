// Bad input for the Kineto importer: every refused input must raise core::Error (no other exception
// type, no crash, no hang) with a one-line message naming the file and, where it applies, the byte
// offset or event index; and a failed import must leave the database exactly as it was (runs imported
// before it untouched, no partial run). Also the inputs that look odd but are fine: negative
// durations (clamped with a warning) and events out of time order.
#include <sys/stat.h>
#include <unistd.h>

#include <QElapsedTimer>
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "core/storage/store_access.h"
#include "core/import/kineto_importer.h"
#include "core/storage/trace_store.h"
#include "core/util/error.h"
#include "tests/common/test_support.h"
#include "tests/tools/kineto_generator.h"

using namespace shardscope::core;
using shardscope::test::pathIn;
using shardscope::test::writeFile;
using shardscope::test::writeGzip;

// Declared first: moc mis-lexes some raw string literals, so the class comes before the helpers.
class TestKinetoBadInput : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void rejected_data();
  void rejected();
  void truncatedGzip();
  void corruptGzip();
  void hugeString_data();
  void hugeString();
  void negativeDurationIsClamped();
  void outOfOrderEvents();
  void duplicateRanks();
  void rankInFileNameOutOfRange();
  void notSqliteDatabase();
  void readOnlyDatabase();
  void largeWorldImports();
  void generatedTracesImportCleanly_data();
  void generatedTracesImportCleanly();
};

namespace {

std::string str(const QByteArray& b) { return std::string(b.constData(), static_cast<std::size_t>(b.size())); }

std::int64_t scalar(TraceStore& s, const std::string& sql) {
  Statement st(shardscope::core::storeDb(s), sql);
  return st.step() ? st.int64(0) : -1;
}

// Row counts of every table: a failed import must not change any of them.
std::map<std::string, std::int64_t> tableCounts(TraceStore& s) {
  std::vector<std::string> tables;
  {
    Statement st(shardscope::core::storeDb(s),
                 "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' ORDER BY name");
    while (st.step()) tables.push_back(st.text(0));
  }
  std::map<std::string, std::int64_t> out;
  for (const auto& t : tables) out[t] = scalar(s, "SELECT COUNT(*) FROM \"" + t + "\"");
  return out;
}

std::string goodTrace(const QTemporaryDir& dir, const std::string& name, int rank = 0, int world = 1, bool newFormat = true) {
  shardscope::test::KinetoGenOptions g;
  g.events = 2000;
  g.steps = 3;
  g.rank = rank;
  g.worldSize = world;
  g.newFormat = newFormat;
  const std::string path = pathIn(dir, name);
  shardscope::test::generateKinetoTrace(path, g);
  return path;
}

// A store at dir/store.db holding one good run; remembers what it looked like.
struct Fixture {
  explicit Fixture(const QTemporaryDir& dir) : path(pathIn(dir, "store.db")), store(path) {
    const auto res = importKineto(store, {goodTrace(dir, "good_rank0.json")});
    firstRun = res.runIds.at(0);
    firstRunEvents = store.summary(firstRun).eventCount;
    counts = tableCounts(store);
  }
  std::string path;
  TraceStore store;
  RunId firstRun;
  std::int64_t firstRunEvents = 0;
  std::map<std::string, std::int64_t> counts;
};

// Imports `files` expecting core::Error; returns its message ("" after a QFAIL).
std::string expectError(TraceStore& store, const std::vector<std::string>& files, KinetoImportOptions opt = {}) {
  try {
    importKineto(store, files, opt);
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    QTest::qFail((std::string("wrong exception type (not core::Error): ") + e.what()).c_str(), __FILE__, __LINE__);
    return "";
  }
  QTest::qFail("the import succeeded", __FILE__, __LINE__);
  return "";
}

// The database is as it was before the failed import, and still usable.
bool unchanged(Fixture& f, const QTemporaryDir& dir) {
  const auto runs = f.store.runs();
  if (runs.size() != 1 || runs[0].id != f.firstRun) {
    QTest::qFail(("runs after the failed import: " + std::to_string(runs.size())).c_str(), __FILE__, __LINE__);
    return false;
  }
  if (f.store.summary(f.firstRun).eventCount != f.firstRunEvents) {
    QTest::qFail("the first run's events changed", __FILE__, __LINE__);
    return false;
  }
  const auto now = tableCounts(f.store);
  for (const auto& [table, n] : f.counts) {
    if (now.at(table) != n) {
      QTest::qFail(("table " + table + " has " + std::to_string(now.at(table)) + " rows instead of " + std::to_string(n)).c_str(),
                   __FILE__, __LINE__);
      return false;
    }
  }
  // No transaction left open, caches consistent: another import works and interns its strings.
  try {
    const auto res = importKineto(f.store, {goodTrace(dir, "after_rank0.json")});
    if (f.store.runs().size() != 2 || f.store.summary(res.runIds.at(0)).eventCount != f.firstRunEvents) {
      QTest::qFail("the import after the failed one is not complete", __FILE__, __LINE__);
      return false;
    }
  } catch (const std::exception& e) {
    QTest::qFail((std::string("the store is unusable after the failed import: ") + e.what()).c_str(), __FILE__, __LINE__);
    return false;
  }
  return true;
}

bool oneLine(const std::string& msg) { return msg.find('\n') == std::string::npos; }

std::uint64_t vmHwmBytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  return 0;
}

struct KinetoGenStatsHolder {
  shardscope::test::KinetoGenStats st;
};

const char* kEvent = R"({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 100, "dur": 5})";

}  // namespace

void TestKinetoBadInput::rejected_data() {
  QTest::addColumn<QByteArray>("content");
  QTest::addColumn<bool>("gzip");
  QTest::addColumn<QString>("message");   // a part of the message
  QTest::addColumn<QString>("location");  // "byte offset", "event #" or "" (the path is always required)
  const QByteArray ev(kEvent);
  auto trace = [](const QByteArray& events) { return QByteArray("{\"traceEvents\": [") + events + "]}"; };

  QTest::newRow("empty file") << QByteArray() << false << "empty"
                              << "";
  QTest::newRow("empty gzip member") << QByteArray() << true << ""
                                     << "";
  QTest::newRow("whitespace only") << QByteArray(" \n ") << false << ""
                                   << "byte offset";
  QTest::newRow("binary (PNG header)") << QByteArray("\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16) << false << "0x89"
                                       << "byte offset";
  QTest::newRow("invalid JSON") << QByteArray(R"({"traceEvents": [{"ph": "X",]})") << false << "expected an object key"
                                << "byte offset";
  QTest::newRow("invalid JSON, gzip") << QByteArray(R"({"traceEvents": [{"ph": "X",]})") << true << "expected an object key"
                                      << "byte offset";
  QTest::newRow("text") << QByteArray("hello") << false << "unexpected character"
                        << "byte offset";
  QTest::newRow("not a trace: object") << QByteArray(R"({"foo": 1})") << false << "not a Chrome/Kineto trace"
                                       << "byte offset";
  QTest::newRow("not a trace: array") << QByteArray("[1, 2, 3]") << false << "is not a JSON object"
                                      << "event #0";
  QTest::newRow("not a trace: string") << QByteArray(R"("str")") << false << "not a trace"
                                       << "byte offset";
  QTest::newRow("not a trace: number") << QByteArray("42") << false << "not a trace"
                                       << "byte offset";
  QTest::newRow("trailing data") << trace(ev) + " x" << false << "unexpected data after"
                                 << "byte offset";
  QTest::newRow("second document") << trace(ev) + trace(ev) << false << "unexpected data after"
                                   << "byte offset";
  QTest::newRow("truncated") << trace(ev + "," + ev).left(60) << false << "end of input"
                             << "byte offset";
  // Truncated right after a number (BUG: "malformed number '12{"traceEvents...'" with stale buffer bytes).
  QTest::newRow("truncated after a number") << QByteArray(R"({"traceEvents": [{"ph": "X", "ts": 12)") << false
                                            << "unexpected end of input"
                                            << "byte offset";
  QTest::newRow("bad escape") << trace(R"({"ph": "X", "name": "a\qb", "ts": 1, "dur": 1, "pid": 1, "tid": 1})") << false
                              << "invalid escape"
                              << "byte offset";
  QTest::newRow("traceEvents is an object") << QByteArray(R"({"traceEvents": {"ph": "X"}})") << false
                                            << "'traceEvents' must be an array"
                                            << "byte offset";
  QTest::newRow("traceEvents is a string") << QByteArray(R"({"traceEvents": "[]"})") << false << "must be an array"
                                           << "byte offset";
  QTest::newRow("event is a number") << trace(ev + ", 7") << false << "is not a JSON object"
                                     << "event #1";
  QTest::newRow("ts as string") << trace(R"({"ph": "X", "name": "a", "ts": "100", "dur": 1, "pid": 1, "tid": 1})") << false
                                << "'ts' must be a number"
                                << "event #0";
  QTest::newRow("dur as array") << trace(ev + R"(, {"ph": "X", "name": "a", "ts": 1, "dur": [1], "pid": 1, "tid": 1})") << false
                                << "'dur' must be a number"
                                << "event #1";
  QTest::newRow("pid as object") << trace(R"({"ph": "X", "name": "a", "ts": 1, "dur": 1, "pid": {"a": 1}, "tid": 1})") << false
                                 << "'pid' must be a number or a string"
                                 << "event #0";
  QTest::newRow("tid as bool") << trace(R"({"ph": "X", "name": "a", "ts": 1, "dur": 1, "pid": 1, "tid": true})") << false
                               << "'tid'"
                               << "event #0";
  QTest::newRow("ph as number") << trace(R"({"ph": 88, "name": "a", "ts": 1})") << false << "'ph' must be a string"
                                << "event #0";
  QTest::newRow("name as object") << trace(R"({"ph": "X", "name": {}, "ts": 1})") << false << "'name' must be a string"
                                  << "event #0";
  QTest::newRow("no ph") << trace(R"({"name": "a", "ts": 1})") << false << "no 'ph'"
                         << "event #0";
  QTest::newRow("unknown phase") << trace(R"({"ph": "Q", "name": "a", "ts": 1})") << false << "unknown phase"
                                 << "event #0";
  QTest::newRow("ts 1e300") << trace(R"({"ph": "X", "name": "a", "ts": 1e300, "dur": 1, "pid": 1, "tid": 1})") << false
                            << "out of range"
                            << "event #0";
  QTest::newRow("ts -1e300") << trace(R"({"ph": "i", "name": "a", "ts": -1e300, "pid": 1, "tid": 1})") << false << "out of range"
                             << "event #0";
  QTest::newRow("ts 30 digits")
      << trace(R"({"ph": "X", "name": "a", "ts": 123456789012345678901234567890, "dur": 1, "pid": 1, "tid": 1})") << false
      << "out of range"
      << "event #0";
  QTest::newRow("dur 1e20") << trace(R"({"ph": "X", "name": "a", "ts": 1, "dur": 1e20, "pid": 1, "tid": 1})") << false << "absurd"
                            << "event #0";
  QTest::newRow("dur 1e20 integer")
      << trace(R"({"ph": "X", "name": "a", "ts": 1, "dur": 100000000000000000000, "pid": 1, "tid": 1})") << false << "absurd"
      << "event #0";
  // 16 integer digits: 9.3e15 µs is 9.3e18 ns, past INT64_MAX (BUG: parseMicrosToNs overflows a signed
  // int64, the duration wraps negative and is clamped to 0 with a warning instead of being refused).
  QTest::newRow("dur 9.3e15 us (16 digits)")
      << trace(R"({"ph": "X", "name": "a", "ts": 1, "dur": 9300000000000000, "pid": 1, "tid": 1})") << false << "absurd"
      << "event #0";
  QTest::newRow("dur 2e15 us (> 11 days)")
      << trace(R"({"ph": "X", "name": "a", "ts": 1, "dur": 2000000000000000, "pid": 1, "tid": 1})") << false << "absurd"
      << "event #0";
  QTest::newRow("baseTimeNanoseconds 1e300")
      << QByteArray(R"({"baseTimeNanoseconds": 1e300, "traceEvents": []})") << false << "baseTimeNanoseconds"
      << "byte offset";
  QTest::newRow("baseTimeNanoseconds string")
      << QByteArray(R"({"baseTimeNanoseconds": "1", "traceEvents": []})") << false << "baseTimeNanoseconds"
      << "byte offset";
  QTest::newRow("ts + base out of range")
      << QByteArray(
             R"({"baseTimeNanoseconds": 4000000000000000000, "traceEvents": [{"ph": "X", "name": "a", "ts": 1000000000000000, "dur": 1, "pid": 1, "tid": 1}]})")
      << false << "out of range"
      << "event #0";
  // The same with baseTimeNanoseconds after traceEvents (BUG: the shift applied at the end of the file
  // skips the range check, so the event lands at 9.1e18 ns instead of being refused).
  QTest::newRow("ts + base out of range, base last")
      << QByteArray(
             R"({"traceEvents": [{"ph": "X", "name": "a", "ts": 4500000000000000, "dur": 1, "pid": 1, "tid": 1}], "baseTimeNanoseconds": 4600000000000000000})")
      << false << "out of range"
      << "";
  QTest::newRow("rank -1") << QByteArray(R"({"distributedInfo": {"rank": -1, "world_size": 2}, "traceEvents": []})") << false
                           << "distributedInfo.rank"
                           << "";
  QTest::newRow("world_size 0") << QByteArray(R"({"distributedInfo": {"rank": 0, "world_size": 0}, "traceEvents": []})") << false
                                << "world size"
                                << "";
  // Nothing to analyse is not a run (issue 46): refused, nothing stored.
  QTest::newRow("empty traceEvents") << QByteArray(R"({"traceEvents": []})") << false << "holds no events"
                                     << "";
  QTest::newRow("metadata only")
      << QByteArray(R"({"traceEvents": [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "x"}}]})") << false
      << "holds no events"
      << "";
  {
    QByteArray deep = "{\"traceEvents\": [{\"ph\": \"X\", \"name\": \"a\", \"ts\": 1, \"args\": {\"x\": ";
    deep += QByteArray(100000, '[');
    QTest::newRow("100000 nested arrays in args") << deep << false << "nested deeper than"
                                                  << "byte offset";
    QTest::newRow("100000 nested arrays in args, gzip") << deep << true << "nested deeper than"
                                                        << "byte offset";
  }
  {
    QByteArray deep = "{\"traceEvents\": [], \"metadata\": ";
    deep += QByteArray(100000, '{').replace("{", "{\"a\":");
    QTest::newRow("100000 nested objects at top level") << deep << false << "nested deeper than"
                                                        << "byte offset";
  }
}

void TestKinetoBadInput::rejected() {
  QFETCH(QByteArray, content);
  QFETCH(bool, gzip);
  QFETCH(QString, message);
  QFETCH(QString, location);
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  Fixture f(dir);
  const std::string path = gzip ? writeGzip(dir, "bad.json.gz", str(content)) : writeFile(dir, "bad.json", str(content));
  QElapsedTimer timer;
  timer.start();
  const std::string msg = expectError(f.store, {path});
  if (QTest::currentTestFailed()) return;
  QVERIFY2(timer.elapsed() < 20000, "refusing the input took more than 20 s");
  QVERIFY2(msg.find(path) != std::string::npos, ("the message does not name the file: " + msg).c_str());
  QVERIFY2(msg.find(message.toStdString()) != std::string::npos, msg.c_str());
  QVERIFY2(location.isEmpty() || msg.find(location.toStdString()) != std::string::npos, msg.c_str());
  QVERIFY2(oneLine(msg), msg.c_str());
  QVERIFY(unchanged(f, dir));
}

void TestKinetoBadInput::truncatedGzip() {
  QTemporaryDir dir;
  Fixture f(dir);
  shardscope::test::KinetoGenOptions g;
  g.events = 20000;
  const std::string whole = pathIn(dir, "whole.json.gz");
  shardscope::test::generateKinetoTrace(whole, g);
  std::string bytes;
  {
    std::ifstream in(whole, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  QVERIFY(bytes.size() > 10000);
  const std::string half = writeFile(dir, "half.json.gz", bytes.substr(0, bytes.size() / 2));
  const std::string msg = expectError(f.store, {half});
  if (QTest::currentTestFailed()) return;
  QVERIFY2(msg.find(half) != std::string::npos, msg.c_str());
  QVERIFY2(msg.find("truncated") != std::string::npos, msg.c_str());
  QVERIFY2(oneLine(msg), msg.c_str());
  QVERIFY(unchanged(f, dir));

  // Cut inside the gzip header and inside the trailer (CRC/size) too.
  for (std::size_t cut : {std::size_t{5}, bytes.size() - 4}) {
    const std::string p = writeFile(dir, "cut" + std::to_string(cut) + ".json.gz", bytes.substr(0, cut));
    const std::string m = expectError(f.store, {p});
    QVERIFY2(m.find(p) != std::string::npos, m.c_str());
  }
}

void TestKinetoBadInput::corruptGzip() {
  QTemporaryDir dir;
  Fixture f(dir);
  shardscope::test::KinetoGenOptions g;
  g.events = 5000;
  const std::string whole = pathIn(dir, "whole.json.gz");
  shardscope::test::generateKinetoTrace(whole, g);
  std::string bytes;
  {
    std::ifstream in(whole, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  for (std::size_t i = bytes.size() / 3; i < bytes.size() / 3 + 64; ++i) bytes[i] = static_cast<char>(bytes[i] ^ 0x5a);
  const std::string bad = writeFile(dir, "corrupt.json.gz", bytes);
  const std::string msg = expectError(f.store, {bad});
  if (QTest::currentTestFailed()) return;
  QVERIFY2(msg.find(bad) != std::string::npos, msg.c_str());
  QVERIFY2(oneLine(msg), msg.c_str());
  QVERIFY(unchanged(f, dir));
}

void TestKinetoBadInput::hugeString_data() {
  QTest::addColumn<QByteArray>("prefix");
  QTest::newRow("plain") << QByteArray(R"({"traceEvents": [{"ph": "X", "ts": 1, "dur": 1, "pid": 1, "tid": 1, "name": ")");
  QTest::newRow("after an escape") << QByteArray(
      R"({"traceEvents": [{"ph": "X", "ts": 1, "dur": 1, "pid": 1, "tid": 1, "name": "\n)");
  QTest::newRow("in args") << QByteArray(
      R"({"traceEvents": [{"ph": "X", "ts": 1, "dur": 1, "pid": 1, "tid": 1, "name": "a", "args": {"Call stack": ")");
}

void TestKinetoBadInput::hugeString() {
  QFETCH(QByteArray, prefix);
  QTemporaryDir dir;
  Fixture f(dir);
  // 100 MB in one string, written in chunks (the test itself stays small).
  const std::string path = pathIn(dir, "huge_string.json");
  {
    std::ofstream out(path, std::ios::binary);
    out << str(prefix);
    const std::string chunk(1u << 20, 'a');
    for (int i = 0; i < 100; ++i) out.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    out << R"("}]})";
    QVERIFY(out.good());
  }
  const std::uint64_t hwmBefore = vmHwmBytes();
  QElapsedTimer timer;
  timer.start();
  const std::string msg = expectError(f.store, {path});
  if (QTest::currentTestFailed()) return;
  QVERIFY2(timer.elapsed() < 20000, "refusing a 100 MB string took more than 20 s");
  QVERIFY2(msg.find(path) != std::string::npos, msg.c_str());
  QVERIFY2(msg.find("MiB") != std::string::npos, msg.c_str());
  QVERIFY2(msg.find("byte offset") != std::string::npos, msg.c_str());
  // VmHWM only grows, so this bounds the import's own peak when it exceeds the earlier high-water mark.
  const std::uint64_t hwmAfter = vmHwmBytes();
  QVERIFY2(hwmAfter < hwmBefore + (200u << 20),
           ("peak RSS grew by " + std::to_string((hwmAfter - hwmBefore) >> 20) + " MiB").c_str());
  QVERIFY(unchanged(f, dir));
}

void TestKinetoBadInput::negativeDurationIsClamped() {
  QTemporaryDir dir;
  Fixture f(dir);
  const std::string path = writeFile(dir, "negative_rank1.json", R"({"traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "neg", "pid": 1, "tid": 1, "ts": 100, "dur": -5},
    {"ph": "X", "cat": "cpu_op", "name": "pos", "pid": 1, "tid": 1, "ts": 200, "dur": 5}]})");
  KinetoImportResult res;
  try {
    res = importKineto(f.store, {path});
  } catch (const std::exception& e) {
    QFAIL(e.what());
  }
  QCOMPARE(res.files.at(0).negativeDurations, std::uint64_t{1});
  QCOMPARE(res.files.at(0).events, std::uint64_t{2});
  const bool warned = std::any_of(res.warnings.begin(), res.warnings.end(),
                                  [](const std::string& w) { return w.find("negative durations clamped") != std::string::npos; });
  QVERIFY(warned);
  const auto tracks = f.store.summary(res.runIds.at(0)).tracks;
  QCOMPARE(tracks.size(), std::size_t{1});
  const auto events = f.store.eventsInWindow(tracks[0].track.id, 0, 1'000'000);
  QCOMPARE(events.size(), std::size_t{2});
  QCOMPARE(events[0].name, std::string("neg"));
  QCOMPARE(events[0].startNs, TimeNs{100'000});
  QCOMPARE(events[0].endNs, TimeNs{100'000});
  QCOMPARE(events[1].endNs - events[1].startNs, TimeNs{5'000});
}

void TestKinetoBadInput::outOfOrderEvents() {
  QTemporaryDir dir;
  Fixture f(dir);
  // 300 ops and 60 launches with their kernels on one thread / one stream, written in a scrambled
  // order, and the ProfilerStep that contains them written last.
  constexpr int kOps = 300;
  constexpr int kLaunches = 60;
  std::vector<std::string> events;
  for (int i = 0; i < kOps; ++i)
    events.push_back(R"({"ph": "X", "cat": "cpu_op", "name": "op)" + std::to_string(i) + R"(", "pid": 1, "tid": 1, "ts": )" +
                     std::to_string(1000 + i * 20) + R"(, "dur": 8})");
  for (int i = 0; i < kLaunches; ++i) {
    const std::string corr = std::to_string(100 + i);
    events.push_back(R"({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": )" +
                     std::to_string(1000 + i * 100 + 10) + R"(, "dur": 4, "args": {"correlation": )" + corr + "}}");
    events.push_back(R"({"ph": "X", "cat": "kernel", "name": "k)" + std::to_string(i) + R"(", "pid": 0, "tid": 7, "ts": )" +
                     std::to_string(1000 + i * 100 + 20) + R"(, "dur": 50, "args": {"stream": 7, "correlation": )" + corr + "}}");
  }
  std::vector<std::string> scrambled(events.size());
  for (std::size_t i = 0; i < events.size(); ++i) scrambled[(i * 7919) % events.size()] = events[i];
  QVERIFY(std::none_of(scrambled.begin(), scrambled.end(), [](const std::string& s) { return s.empty(); }));
  std::string doc = "{\"traceEvents\": [";
  for (const auto& e : scrambled) doc += e + ",\n";
  doc += R"({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#7", "pid": 1, "tid": 1, "ts": 990, "dur": 7000}]})";
  const std::string path = writeFile(dir, "scrambled_rank2.json", doc);

  KinetoImportResult res;
  try {
    res = importKineto(f.store, {path});
  } catch (const std::exception& e) {
    QFAIL(e.what());
  }
  QCOMPARE(res.files.at(0).events, std::uint64_t{kOps + 2 * kLaunches + 1});
  QCOMPARE(res.files.at(0).kernels, std::uint64_t{kLaunches});
  QCOMPARE(res.files.at(0).steps, std::uint64_t{1});
  const RunId run = res.runIds.at(0);
  const auto summary = f.store.summary(run);
  QCOMPARE(summary.eventCount, std::int64_t{kOps + 2 * kLaunches + 1});
  QCOMPARE(f.store.steps(run).size(), std::size_t{1});
  std::size_t seen = 0;
  for (const auto& t : summary.tracks) {
    const auto evs = f.store.eventsInWindow(t.track.id, 0, 100'000'000);
    seen += evs.size();
    for (std::size_t i = 1; i < evs.size(); ++i) {
      QVERIFY2(evs[i - 1].startNs <= evs[i].startNs, "eventsInWindow is not in start order");
      if (evs[i - 1].startNs == evs[i].startNs) QVERIFY(evs[i - 1].endNs >= evs[i].endNs);
    }
    // Everything lies in ProfilerStep#7, which arrived after all of it: CPU events by time,
    // kernels through their launch's correlation.
    for (const auto& e : evs) QVERIFY2(e.step && *e.step == 7, (std::string(e.name) + " has no step 7").c_str());
    if (t.track.kind == TrackKind::CpuThread) {
      QCOMPARE(evs.size(), std::size_t{kOps + kLaunches + 1});
      QCOMPARE(evs.front().name, std::string("ProfilerStep#7"));
      QCOMPARE(evs[1].name, std::string("op0"));
    }
  }
  QCOMPARE(seen, std::size_t{kOps + 2 * kLaunches + 1});
}

void TestKinetoBadInput::duplicateRanks() {
  QTemporaryDir dir;
  Fixture f(dir);
  const std::string a = goodTrace(dir, "job_a.json", 0, 2);
  const std::string b = goodTrace(dir, "job_b.json", 0, 2, false);
  const std::string msg = expectError(f.store, {a, b});
  if (QTest::currentTestFailed()) return;
  QVERIFY2(msg.find(a) != std::string::npos && msg.find(b) != std::string::npos,
           ("the message must name both files: " + msg).c_str());
  QVERIFY2(msg.find("rank 0") != std::string::npos, msg.c_str());
  QVERIFY2(oneLine(msg), msg.c_str());
  QVERIFY(unchanged(f, dir));
}

void TestKinetoBadInput::rankInFileNameOutOfRange() {
  // Without distributedInfo the rank comes from the file name; a digit run that does not fit an int
  // must not escape as std::out_of_range (BUG: rankFromFileName calls std::stoi unguarded). Taking
  // no rank from such a name, or refusing the file with core::Error, are both fine.
  QTemporaryDir dir;
  Fixture f(dir);
  const std::string path = writeFile(dir, "trace_rank99999999999.json", std::string("{\"traceEvents\": [") + kEvent + "]}");
  try {
    importKineto(f.store, {path});
    QCOMPARE(f.store.runs().size(), std::size_t{2});
  } catch (const Error& e) {
    QVERIFY2(std::string(e.what()).find(path) != std::string::npos, e.what());
    QVERIFY(unchanged(f, dir));
  } catch (const std::exception& e) {
    QFAIL((std::string("wrong exception type (not core::Error): ") + e.what()).c_str());
  }
}

void TestKinetoBadInput::notSqliteDatabase() {
  QTemporaryDir dir;
  const std::string text = "this is a text file, not a database; it must stay untouched\n";
  const std::string path = writeFile(dir, "notes.db", text);
  try {
    TraceStore store(path);
    QFAIL("a text file was opened as a database");
  } catch (const Error& e) {
    const std::string msg = e.what();
    QVERIFY2(msg.find("not a SQLite database") != std::string::npos, msg.c_str());
    QVERIFY2(msg.find(path) != std::string::npos, msg.c_str());
  } catch (const std::exception& e) {
    QFAIL((std::string("wrong exception type: ") + e.what()).c_str());
  }
  std::ifstream in(path, std::ios::binary);
  const std::string after((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  QCOMPARE(after, text);
  // A short file (less than a SQLite header) is no database either.
  const std::string tiny = writeFile(dir, "tiny.db", "SQLite");
  QVERIFY_THROWS_EXCEPTION(Error, TraceStore{tiny});
}

void TestKinetoBadInput::readOnlyDatabase() {
  QTemporaryDir dir;
  std::string path;
  std::int64_t events = 0;
  {
    Fixture f(dir);
    path = f.path;
    events = f.firstRunEvents;
  }
  QCOMPARE(::chmod(path.c_str(), 0444), 0);
  if (::geteuid() == 0)
    QSKIP("running as root: file permissions are not enforced, so a read-only database file cannot be simulated");
  try {
    TraceStore store(path);
    // Opening may succeed on some SQLite builds; writing must not.
    const std::string good = goodTrace(dir, "late_rank0.json");
    const std::string msg = expectError(store, {good});
    QVERIFY2(msg.find(path) != std::string::npos, msg.c_str());
  } catch (const Error& e) {
    const std::string msg = e.what();
    QVERIFY2(msg.find("read-only") != std::string::npos, msg.c_str());
    QVERIFY2(msg.find(path) != std::string::npos, msg.c_str());
  } catch (const std::exception& e) {
    QFAIL((std::string("wrong exception type: ") + e.what()).c_str());
  }
  TraceStore ro(path, Database::Mode::ReadOnly);
  const auto runs = ro.runs();
  QCOMPARE(runs.size(), std::size_t{1});
  QCOMPARE(ro.summary(runs[0].id).eventCount, events);
}

void TestKinetoBadInput::largeWorldImports() {
  // A rank of a 32768-GPU job: distributedInfo.pg_config lists every rank of each group (98k numbers
  // here). Large, but a real trace, not bad input (BUG: refused with "JSON value has more than 65536
  // nodes" because distributedInfo is read with a 1<<16 node limit).
  QTemporaryDir dir;
  shardscope::test::KinetoGenOptions g;
  g.events = 1500;
  g.steps = 1;
  g.rank = 12345;
  g.worldSize = 32768;
  const std::string path = pathIn(dir, "big_job.json");
  const auto st = shardscope::test::generateKinetoTrace(path, g);
  TraceStore store(pathIn(dir, "store.db"));
  KinetoImportResult res;
  try {
    res = importKineto(store, {path});
  } catch (const std::exception& e) {
    QFAIL(e.what());
  }
  QCOMPARE(res.files.at(0).rank, 12345);
  QCOMPARE(res.files.at(0).worldSize, 32768);
  QCOMPARE(res.files.at(0).traceEvents, st.traceEvents);
  const auto groups = store.processGroups(res.runIds.at(0));
  QVERIFY(!groups.empty());
  for (const auto& pg : groups) QCOMPARE(pg.size, 32768);
}

void TestKinetoBadInput::generatedTracesImportCleanly_data() {
  QTest::addColumn<bool>("newFormat");
  QTest::addColumn<bool>("python");
  QTest::addColumn<bool>("indent");
  QTest::addColumn<QString>("name");
  QTest::newRow("current format") << true << false << false << "gen_rank3.json";
  QTest::newRow("current format, gzip") << true << false << false << "gen_rank3.json.gz";
  QTest::newRow("2022 format") << false << false << false << "gen_rank3.json";
  QTest::newRow("python, indented") << true << true << true << "gen_rank3.json";
}

// The fixtures above rely on the generator's traces being good: they import without warnings about
// their content, and the importer counts what the generator says it wrote.
void TestKinetoBadInput::generatedTracesImportCleanly() {
  QFETCH(bool, newFormat);
  QFETCH(bool, python);
  QFETCH(bool, indent);
  QFETCH(QString, name);
  QTemporaryDir dir;
  shardscope::test::KinetoGenOptions g;
  g.events = 6000;
  g.steps = 4;
  g.rank = 3;
  g.worldSize = 8;
  g.newFormat = newFormat;
  g.withPython = python;
  g.indent = indent;
  // Generated twice under the same relative name (traceName holds the path as given) in two
  // directories: the bytes must be identical for a seed.
  QTemporaryDir dir2;
  const QString cwd = QDir::currentPath();
  KinetoGenStatsHolder first, second;
  QVERIFY(QDir::setCurrent(dir.path()));
  first.st = shardscope::test::generateKinetoTrace(name.toStdString(), g);
  QVERIFY(QDir::setCurrent(dir2.path()));
  second.st = shardscope::test::generateKinetoTrace(name.toStdString(), g);
  QVERIFY(QDir::setCurrent(cwd));
  const auto& st = first.st;
  const std::string path = pathIn(dir, name.toStdString());
  QVERIFY(st.traceEvents > 5000 && st.traceEvents < 7000);
  QCOMPARE(second.st.traceEvents, st.traceEvents);
  {
    std::ifstream a(path, std::ios::binary), b(pathIn(dir2, name.toStdString()), std::ios::binary);
    const std::string x((std::istreambuf_iterator<char>(a)), std::istreambuf_iterator<char>());
    const std::string y((std::istreambuf_iterator<char>(b)), std::istreambuf_iterator<char>());
    QVERIFY(!x.empty());
    QVERIFY(x == y);
  }
  TraceStore store(pathIn(dir, "gen.db"));
  KinetoImportResult res;
  try {
    res = importKineto(store, {path});
  } catch (const std::exception& e) {
    QFAIL(e.what());
  }
  const auto& fs = res.files.at(0);
  QCOMPARE(fs.traceEvents, st.traceEvents);
  QCOMPARE(fs.kernels, st.kernels);
  QCOMPARE(fs.ncclKernels, st.ncclKernels);
  QCOMPARE(fs.steps, st.steps);
  QCOMPARE(fs.memoryEvents, st.memoryEvents);
  QCOMPARE(fs.launchFlows, st.launchFlows);
  QCOMPARE(fs.negativeDurations, std::uint64_t{0});
  QCOMPARE(fs.rank, 3);
  QVERIFY(fs.rankFromFile);
  QCOMPARE(fs.worldSize, 8);
  QCOMPARE(fs.jsonBytes, st.bytes);
  QCOMPARE(static_cast<std::int64_t>(store.steps(res.runIds.at(0)).size()), static_cast<std::int64_t>(st.steps));
}

QTEST_GUILESS_MAIN(TestKinetoBadInput)
#include "tst_kineto_bad_input.moc"
