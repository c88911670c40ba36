// The Kineto pipeline's two modes (kineto_pipeline.h): "split" (one reader cuts the files into
// segments for the parser threads) and "per file" (each worker thread reads and parses whole files,
// the writer drains them in file order). Whatever the mode and the number of threads, the database
// must be the same, byte for byte; a bad file, a cancel, a bad event late in a file behave alike.
#include <QTemporaryDir>
#include <QtTest>

#include <sqlite3.h>

#include <cstdlib>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "core/import/kineto_importer.h"
#include "core/storage/store_access.h"
#include "core/storage/trace_store.h"
#include "core/util/error.h"
#include "tests/common/test_support.h"
#include "tests/tools/kineto_generator.h"

using namespace shardscope::core;
using shardscope::test::pathIn;
using shardscope::test::writeFile;

namespace {

// Sets the pipeline's environment for one scope.
class PipelineEnv {
 public:
  PipelineEnv(const char* mode, int threads) {
    qputenv("SHARDSCOPE_IMPORT_PIPELINE", mode);
    qputenv("SHARDSCOPE_IMPORT_THREADS", QByteArray::number(threads));
  }
  ~PipelineEnv() {
    qunsetenv("SHARDSCOPE_IMPORT_PIPELINE");
    qunsetenv("SHARDSCOPE_IMPORT_THREADS");
  }
  PipelineEnv(const PipelineEnv&) = delete;
  PipelineEnv& operator=(const PipelineEnv&) = delete;
};

// Every table but import_log (its seconds differ), every row in rowid order, every column with its
// type; creation timestamps blanked.
std::string dumpStore(TraceStore& store) {
  Database& db = storeDb(store);
  std::vector<std::pair<std::string, bool>> tables;  // (name, has a rowid)
  {
    Statement st(db, "SELECT name, sql FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' ORDER BY name");
    while (st.step()) tables.emplace_back(st.text(0), st.text(1).find("WITHOUT ROWID") == std::string::npos);
  }
  static const std::regex timestamp(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)");
  std::string out;
  for (const auto& [t, rowid] : tables) {
    if (t == "import_log") continue;
    out += "== " + t + "\n";
    // Tables without a rowid are scanned in their primary key's order.
    Statement st(db, "SELECT * FROM \"" + t + "\"" + (rowid ? " ORDER BY rowid" : ""));
    while (st.step()) {
      for (int c = 0; c < st.columnCount(); ++c) {
        sqlite3_stmt* h = st.handle();
        switch (sqlite3_column_type(h, c)) {
          case SQLITE_NULL:
            out += "null";
            break;
          case SQLITE_INTEGER:
            out += "i" + std::to_string(st.int64(c));
            break;
          case SQLITE_FLOAT: {
            char buf[40];
            std::snprintf(buf, sizeof buf, "f%.17g", st.real(c));
            out += buf;
            break;
          }
          case SQLITE_TEXT:
            out += "t" + std::regex_replace(st.text(c), timestamp, "<time>");
            break;
          default: {
            const auto* p = static_cast<const char*>(sqlite3_column_blob(h, c));
            const int n = sqlite3_column_bytes(h, c);
            out += "b" + std::to_string(n) + ":" + std::string(p ? p : "", static_cast<std::size_t>(n));
          }
        }
        out += '|';
      }
      out += '\n';
    }
  }
  return out;
}

std::vector<std::string> job(const QTemporaryDir& dir, int ranks, std::uint64_t events) {
  std::vector<std::string> files;
  for (int r = 0; r < ranks; ++r) {
    shardscope::test::KinetoGenOptions g;
    g.events = events;
    g.steps = 4;
    g.rank = r;
    g.worldSize = ranks;
    g.seed = 7 + static_cast<std::uint64_t>(r);
    g.withPython = r == 1;
    // One gzip member per file, except a plain file: both sources go through the pipeline.
    const std::string name = "rank" + std::to_string(r) + (r == 2 ? ".json" : ".json.gz");
    files.push_back(pathIn(dir, name));
    shardscope::test::generateKinetoTrace(files.back(), g);
  }
  return files;
}

std::string importAndDump(const QTemporaryDir& dir, const std::string& name, const std::vector<std::string>& files,
                          const char* mode, int threads) {
  PipelineEnv env(mode, threads);
  TraceStore store(pathIn(dir, name));
  importKineto(store, files);
  return dumpStore(store);
}

}  // namespace

class TestImportPipeline : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void modesAndThreadCountsStoreTheSameDatabase() {
    QTemporaryDir dir;
    // Large enough for several batches per file (4096 events each).
    const auto files = job(dir, 4, 30000);
    const std::string reference = importAndDump(dir, "split2.db", files, "split", 2);
    QVERIFY(reference.size() > 100000);
    QVERIFY(reference.find("== event_chunks") != std::string::npos);
    struct Case {
      const char* mode;
      int threads;
    };
    for (const Case c : {Case{"split", 1}, Case{"split", 3}, Case{"files", 1}, Case{"files", 2}, Case{"files", 4}}) {
      const std::string name = std::string(c.mode) + std::to_string(c.threads) + ".db";
      const std::string got = importAndDump(dir, name, files, c.mode, c.threads);
      if (got != reference) QFAIL(qPrintable(QString("%1 with %2 threads stores another database").arg(c.mode).arg(c.threads)));
    }
  }

  void perFileErrorsAndCancelLeaveNothing() {
    QTemporaryDir dir;
    const auto files = job(dir, 3, 12000);
    // A bad event at the very end of the last file: found by its worker while the writer is still
    // writing earlier files; the whole import rolls back.
    std::string bad = R"({"traceEvents": [)";
    for (int i = 0; i < 5000; ++i)
      bad += R"({"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, "ts": )" + std::to_string(i) + R"(, "dur": 1},)";
    bad += R"({"ph": "X", "ts": "late"}]})";
    const std::string badFile = writeFile(dir, "rank9.json", bad);
    PipelineEnv env("files", 2);
    TraceStore store(pathIn(dir, "store.db"));
    std::vector<std::string> withBad = files;
    withBad.push_back(badFile);
    try {
      importKineto(store, withBad);
      QFAIL("the bad file was imported");
    } catch (const Error& e) {
      const std::string msg = e.what();
      QVERIFY2(msg.find("rank9.json") != std::string::npos && msg.find("event #5000") != std::string::npos, e.what());
    }
    QVERIFY(store.runs().empty());
    // Cancelled after the first progress report (the first batch written): nothing is kept, and
    // the progress reported until then only grew, within the total.
    CancelToken cancel;
    ImportOptions opt;
    opt.cancel = &cancel;
    std::uint64_t last = 0, total = 0;
    bool monotonic = true;
    opt.progress = [&](const Progress& p) {
      monotonic = monotonic && p.done >= last && p.done <= p.total;
      last = p.done;
      total = p.total;
      cancel.cancel();
    };
    QVERIFY_THROWS_EXCEPTION(Cancelled, importKineto(store, files, opt));
    QVERIFY(monotonic);
    QVERIFY(total > 0);
    QVERIFY(store.runs().empty());
    // The store is usable afterwards, and a full import reports progress up to the total.
    ImportOptions full;
    full.progress = [&](const Progress& p) {
      monotonic = monotonic && p.done >= last && p.done <= p.total;
      last = p.done;
      total = p.total;
    };
    last = 0;
    const auto res = importKineto(store, files, full);
    QVERIFY(monotonic);
    QCOMPARE(last, total);
    QCOMPARE(res.files.size(), files.size());
    QCOMPARE(store.runs().size(), std::size_t(1));
  }
};

QTEST_GUILESS_MAIN(TestImportPipeline)
#include "tst_import_pipeline.moc"
