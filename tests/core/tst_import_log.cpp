// The reader interface and what an import records: the registry picks a reader by content (whatever
// the file's name), refuses unknown files naming them; import_log holds one row per file with its
// counts, skip reasons and warnings, in the import's transaction (a cancelled import leaves none);
// the Kineto parser reads events from a string.
#include <QTemporaryDir>
#include <QtTest>

#include <filesystem>

#include <string>
#include <vector>

#include "core/storage/store_access.h"
#include "core/import/kineto_importer.h"
#include "core/import/kineto_parser.h"
#include "core/import/trace_reader.h"
#include "core/storage/import_log.h"
#include "core/storage/trace_store.h"
#include "core/util/error.h"
#include "tests/common/test_support.h"

using namespace shardscope::core;
using shardscope::test::pathIn;
using shardscope::test::writeFile;
using shardscope::test::writeGzip;

namespace {

std::string rankTrace(int rank, const std::string& extraEvents) {
  return R"({"distributedInfo": {"rank": )" + std::to_string(rank) +
         R"(, "world_size": 2}, "traceEvents": [
  {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10, "dur": 5},
  {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 12, "dur": 3, "args": {"stream": 7, "correlation": 1}})" +
         extraEvents + "]}";
}

std::string errorOf(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return {};
}

}  // namespace

class TestImportLog : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void registryPicksKinetoByContent() {
    QTemporaryDir dir;
    const std::string json = rankTrace(0, "");
    const std::string odd = writeFile(dir, "trace.data", json);  // no .json in the name
    const std::string gz = writeGzip(dir, "trace.bin", json);    // gzip, by its magic bytes
    const std::string bare = writeFile(dir, "events.txt", R"([{"ph": "X", "name": "a", "ts": 1, "dur": 1}])");
    QVERIFY(traceReader("kineto") != nullptr);
    QCOMPARE(traceReaders().front()->name(), std::string_view("kineto"));
    QCOMPARE(chooseReader({odd}).name(), std::string_view("kineto"));
    QCOMPARE(chooseReader({gz}).name(), std::string_view("kineto"));
    QCOMPARE(chooseReader({bare}).name(), std::string_view("kineto"));
    QCOMPARE(traceReader("kineto")->sniff(json), 100);
    QCOMPARE(traceReader("kineto")->sniff("SQLite format 3"), 0);
    // The chosen reader imports it, whatever the name.
    TraceStore store(pathIn(dir, "r.db"));
    const auto res = chooseReader({odd, gz}).import(store, {odd}, {});
    QCOMPARE(res.events, std::uint64_t(2));
  }

  void unknownFileIsNamed() {
    QTemporaryDir dir;
    const std::string text = writeFile(dir, "notes.json", "these are not events\n");
    const std::string empty = writeFile(dir, "empty.json", "");
    const std::string good = writeFile(dir, "good.json", rankTrace(0, ""));
    const std::string e1 = errorOf([&] { chooseReader({good, text}); });
    QVERIFY2(e1.find(text) != std::string::npos && e1.find("not a trace format") != std::string::npos, e1.c_str());
    QVERIFY2(e1.find("kineto") != std::string::npos, e1.c_str());  // names the formats it knows
    const std::string e2 = errorOf([&] { chooseReader({empty}); });
    QVERIFY2(e2.find(empty) != std::string::npos && e2.find("empty") != std::string::npos, e2.c_str());
    const std::string db = pathIn(dir, "self.db");
    { TraceStore store(db); }
    const std::string e3 = errorOf([&] { chooseReader({db}, db); });
    QVERIFY2(e3.find("is the database being imported into") != std::string::npos, e3.c_str());
    // Its WAL index too: closing a descriptor of the -shm file would drop SQLite's WAL locks.
    TraceStore open(db);
    const std::string shm = db + "-shm";
    QVERIFY2(std::filesystem::exists(shm), "an open WAL database has its -shm file");
    const std::string e4 = errorOf([&] { chooseReader({shm}, db); });
    QVERIFY2(e4.find(shm) != std::string::npos && e4.find("is the database being imported into") != std::string::npos,
             e4.c_str());
  }

  void importLogCountsSkipsAndWarnings() {
    QTemporaryDir dir;
    // Rank 1's file has records the importer skips (B/E pairs) and a negative duration (clamped).
    const std::string r0 = writeFile(dir, "rank0.json", rankTrace(0, ""));
    const std::string r1 = writeFile(dir, "rank1.json", rankTrace(1, R"(,
  {"ph": "B", "name": "open", "pid": 1, "tid": 1, "ts": 20},
  {"ph": "E", "name": "open", "pid": 1, "tid": 1, "ts": 21},
  {"ph": "B", "name": "again", "pid": 1, "tid": 1, "ts": 22},
  {"ph": "X", "cat": "cpu_op", "name": "neg", "pid": 1, "tid": 1, "ts": 30, "dur": -2})"));
    const std::string db = pathIn(dir, "log.db");
    RunId run;
    {
      TraceStore store(db);
      const auto res = importKineto(store, {r0, r1});
      QCOMPARE(res.runIds.size(), std::size_t(1));
      run = res.runIds.front();
      QCOMPARE(res.files.size(), std::size_t(2));
      QCOMPARE(res.files[1].skipped, std::uint64_t(3));
      QCOMPARE(res.files[1].skippedByReason.at("phase 'B'"), std::uint64_t(2));
      QCOMPARE(res.files[1].warnings.size(), std::size_t(2));
    }
    TraceStore store(db, Database::Mode::ReadOnly);
    const auto log = importLog(store, run);
    QCOMPARE(log.size(), std::size_t(2));
    QCOMPARE(log[0].path, r0);
    QCOMPARE(log[0].format, std::string("kineto"));
    QCOMPARE(log[0].rank, std::optional<int>(0));
    QCOMPARE(log[0].events, std::int64_t(2));
    QCOMPARE(log[0].skipped, std::int64_t(0));
    QVERIFY(log[0].warnings.empty());
    QCOMPARE(log[0].bytes, static_cast<std::int64_t>(rankTrace(0, "").size()));
    QCOMPARE(log[1].path, r1);
    QCOMPARE(log[1].rank, std::optional<int>(1));
    QCOMPARE(log[1].events, std::int64_t(3));
    QCOMPARE(log[1].skipped, std::int64_t(3));
    QCOMPARE(log[1].skippedByReason.size(), std::size_t(2));
    QCOMPARE(log[1].skippedByReason.at("phase 'B'"), std::int64_t(2));
    QCOMPARE(log[1].skippedByReason.at("phase 'E'"), std::int64_t(1));
    QCOMPARE(log[1].warnings.size(), std::size_t(2));
    QCOMPARE(log[1].warnings[0], std::string("rank1.json: skipping 'B' events (only X, i, s/t/f, C and M are imported)"));
    QCOMPARE(log[1].warnings[1], std::string("rank1.json: 1 negative durations clamped to 0"));
    QVERIFY(log[0].seconds >= 0 && log[1].seconds >= 0);
    QVERIFY(log[0].id < log[1].id);
    QVERIFY(importLog(store, RunId{run.value() + 1}).empty());
  }

  void separateRunsGetTheirOwnRows() {
    QTemporaryDir dir;
    const std::string r0 = writeFile(dir, "rank0.json", rankTrace(0, ""));
    const std::string r1 = writeFile(dir, "rank1.json", rankTrace(1, ""));
    TraceStore store(pathIn(dir, "sep.db"));
    ImportOptions opt;
    opt.separateRuns = true;
    const auto res = importKineto(store, {r0, r1}, opt);
    QCOMPARE(res.runIds.size(), std::size_t(2));
    for (std::size_t i = 0; i < 2; ++i) {
      const auto log = importLog(store, res.runIds[i]);
      QCOMPARE(log.size(), std::size_t(1));
      QCOMPARE(log[0].path, i == 0 ? r0 : r1);
    }
  }

  void cancelledOrFailedImportLeavesNoRow() {
    QTemporaryDir dir;
    const std::string r0 = writeFile(dir, "rank0.json", rankTrace(0, ""));
    const std::string r1 = writeFile(dir, "rank1.json", rankTrace(1, ""));
    const std::string bad = writeFile(dir, "bad.json", rankTrace(2, R"(, {"ph": "X", "ts": "late"})"));
    const std::string db = pathIn(dir, "cancel.db");
    TraceStore store(db);
    CancelToken cancel;
    ImportOptions opt;
    opt.cancel = &cancel;
    opt.progress = [&](const Progress&) { cancel.cancel(); };  // after the first batch is written
    QVERIFY_THROWS_EXCEPTION(Cancelled, importKineto(store, {r0, r1}, opt));
    QVERIFY_THROWS_EXCEPTION(Error, importKineto(store, {r0, bad}));
    QVERIFY(store.runs().empty());
    Statement st(shardscope::core::storeDb(store), "SELECT COUNT(*) FROM import_log");
    QVERIFY(st.step());
    QCOMPARE(st.int64(0), std::int64_t(0));
    // The connection is itself again: the next import works and is logged.
    const auto res = importKineto(store, {r0, r1});
    QCOMPARE(importLog(store, res.runIds.front()).size(), std::size_t(2));
  }

  void parserReadsEventsFromAString() {
    ImportOptions opt;
    const std::vector<std::string> files = {"inline.json"};
    kineto::KinetoParser parser(opt, 0, files);
    const auto seg = kineto::makeSegment({
        R"({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#4", "pid": 1, "tid": 2, "ts": 100, "dur": 50})",
        R"({"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "pid": 0, "tid": 7, "ts": 110.5, "dur": 10, "args": {"stream": 7, "correlation": 9}})",
        R"({"ph": "C", "name": "util", "pid": 1, "ts": 120, "args": {"value": 3}})",
        R"({"ph": "E", "name": "x", "pid": 1, "tid": 2, "ts": 130})",
    });
    const auto b = parser.parseSegment(seg);
    QCOMPARE(b->events.size(), std::size_t(2));
    QCOMPARE(b->steps.size(), std::size_t(1));
    QCOMPARE(b->steps[0].step, std::int64_t(4));
    QCOMPARE(b->steps[0].start, std::int64_t(100'000));
    QCOMPARE(b->steps[0].end, std::int64_t(150'000));
    const auto& k = b->events[1];
    QCOMPARE(k.start, std::int64_t(110'500));
    QCOMPARE(k.end, std::int64_t(120'500));
    QVERIFY(k.op == CollectiveOp::AllReduce);
    QCOMPARE(k.correlation, std::int64_t(9));
    QCOMPARE(b->newTracks.size(), std::size_t(3));  // CPU thread, GPU stream, the counter
    QVERIFY(b->newTracks[1].kind == TrackKind::GpuStream);
    QCOMPARE(b->newTracks[1].stream, std::optional<std::int64_t>(7));
    QCOMPARE(b->counters.size(), std::size_t(1));
    QCOMPARE(b->counters[0].value, 3.0);
    QCOMPARE(b->stats.skipped, std::uint64_t(1));
    QCOMPARE(b->stats.kernels, std::uint64_t(1));
    QCOMPARE(b->stats.ncclKernels, std::uint64_t(1));
    // Errors name the file, the event's index and its byte offset.
    const auto bad = kineto::makeSegment({R"({"ph": "X", "ts": 1})", R"({"ph": "Q", "ts": 2})"});
    const std::string e = errorOf([&] { parser.parseSegment(bad); });
    QVERIFY2(e.find("inline.json: event #1 (byte offset 22): unknown phase") != std::string::npos, e.c_str());
  }
};

QTEST_GUILESS_MAIN(TestImportLog)
#include "tst_import_log.moc"
