// The SQLite trace store: schema versioning and migrations, WAL/foreign keys, bulk writes, window
// queries for the timeline, cascading deletes.
#include <QTemporaryDir>
#include <QtTest>

#include <sqlite3.h>

#include "core/storage/store_access.h"
#include "core/storage/schema.h"
#include "core/storage/trace_store.h"
#include "core/util/error.h"
#include "tests/common/test_support.h"

using namespace shardscope::core;
using shardscope::test::pathIn;
using shardscope::test::writeFile;

class TestTraceStore : public QObject {
  Q_OBJECT

 private:
  struct Fixture {
    RunId run;
    RankId rank;
    TrackId track;
  };
  static Fixture makeRun(TraceStore& store, const std::string& name) {
    Fixture f;
    Run r;
    r.name = name;
    r.source = RunSource::Runtime;
    r.strategy = "fsdp";
    r.status = RunStatus::Completed;
    r.worldSize = 2;
    f.run = store.createRun(r);
    Rank rk;
    rk.runId = f.run;
    rk.rank = 0;
    f.rank = store.addRank(rk);
    Track t;
    t.rankId = f.rank;
    t.kind = TrackKind::CpuThread;
    t.name = "main";
    f.track = store.addTrack(t);
    return f;
  }

 private Q_SLOTS:
  void createsCurrentSchemaWithWalAndForeignKeys() {
    QTemporaryDir dir;
    TraceStore store(pathIn(dir, "a.db"));
    QCOMPARE(schema::version(shardscope::core::storeDb(store)), schema::kCurrentVersion);
    QCOMPARE(shardscope::core::storeDb(store).pragmaInt("foreign_keys"), 1);
    Statement st(shardscope::core::storeDb(store), "PRAGMA journal_mode");
    QVERIFY(st.step());
    QCOMPARE(QString::fromStdString(st.text(0)), QString("wal"));
  }

  void runsRoundTrip() {
    QTemporaryDir dir;
    TraceStore store(pathIn(dir, "a.db"));
    Run r;
    r.name = "zero3 vs fsdp";
    r.source = RunSource::Simulated;
    r.strategy = "zero3";
    r.configJson = R"({"stage":3})";
    r.worldSize = 8;
    r.status = RunStatus::Failed;
    r.failureReason = "rank 3 killed by signal 9";
    const RunId id = store.createRun(r);
    auto back = store.run(id);
    QVERIFY(back.has_value());
    QCOMPARE(QString::fromStdString(std::string(back->name)), QString("zero3 vs fsdp"));
    QVERIFY(back->source == RunSource::Simulated);
    QCOMPARE(back->worldSize, 8);
    QVERIFY(back->status == RunStatus::Failed);
    QCOMPARE(QString::fromStdString(back->failureReason), QString("rank 3 killed by signal 9"));
    QCOMPARE(QString::fromStdString(back->configJson), QString(R"({"stage":3})"));
    QVERIFY(!back->createdAt.empty());
    QCOMPARE(*store.latestRunId(), id);
    store.setRunStatus(id, RunStatus::Completed);
    QVERIFY(store.run(id)->status == RunStatus::Completed);
  }

  // The same writes with chunks encoded on the encoding thread and without: the same rows, in the
  // same order (chunks of several tracks, out-of-order times that move args, LZ4-sized args, chunks
  // marked for a rewrite, memory records not a multiple of the insert group, a finish() between
  // ranks whose tracks then reuse the buffers, and an old track written again after it).
  void encodingThreadWritesTheSameRows() {
    QTemporaryDir dir;
    auto write = [&](const std::string& name, bool onThread) {
      auto store = std::make_unique<TraceStore>(pathIn(dir, name));
      const auto f = makeRun(*store, "enc");
      Transaction tx(shardscope::core::storeDb(*store));
      BulkWriter w(*store);
      if (onThread) w.encodeOnThread();
      std::vector<TrackId> tracks{f.track};
      for (int k = 0; k < 2; ++k) {
        Track t;
        t.rankId = f.rank;
        t.kind = TrackKind::GpuStream;
        t.name = "stream " + std::to_string(k);
        tracks.push_back(store->addTrack(t));
      }
      int flushed = 0;
      w.setBeforeFlush([&](TrackId, EventChunk& c) {
        c.flags[0] |= 0x40;  // a change made just before the chunk is written
        return ++flushed % 3 == 0;
      });
      EventRecord e;
      e.nameId = store->intern("op");
      auto events = [&](const std::vector<TrackId>& on, int n, std::int64_t seed) {
        for (int i = 0; i < n; ++i) {
          e.trackId = on[static_cast<std::size_t>(i * 7 + i / 5) % on.size()];
          const std::int64_t t = (i * 7919 + seed) % 5003;  // out of order within a chunk
          e.startNs = t * 100;
          e.endNs = t * 100 + (i % 11) * 7;
          e.correlation = i % 4 ? std::optional<std::int64_t>(i) : std::nullopt;
          if (i % 3 == 0)
            w.addEvent(e);
          else
            w.addEvent(e, R"({"i":)" + std::to_string(i) + R"(,"shape":[[1024,1024],[1024]],"name":"aten::mm"})");
        }
      };
      events(tracks, 5000, 1);
      for (int i = 0; i < 1000; ++i) {
        MemoryEvent m;
        m.rankId = f.rank;
        m.tsNs = i * 10;
        m.addr = 4096 + i;
        m.bytes = i % 2 ? -512 : 512;
        m.totalAllocated = i;
        w.addMemoryEvent(m);
      }
      w.rewriteMarked([](EventChunk& c) {
        for (auto& s : c.step) s = 7;
        return true;
      });
      w.finish();
      Rank rk;
      rk.runId = f.run;
      rk.rank = 1;
      Track t;
      t.rankId = store->addRank(rk);
      t.kind = TrackKind::CpuThread;
      t.name = "second";
      const TrackId second = store->addTrack(t);
      events({second, f.track}, 3000, 5);
      w.finish();
      tx.commit();
      return store;
    };
    auto a = write("sync.db", false);
    auto b = write("thread.db", true);
    for (const char* sql : {"SELECT id, track_id, count, start_ns, end_ns, data FROM event_chunks ORDER BY id",
                            "SELECT chunk_id, offsets, data, IFNULL(raw_size, -1) FROM event_args ORDER BY chunk_id",
                            "SELECT id, rank_id, ts_ns, addr, bytes, total_allocated FROM memory_events ORDER BY id",
                            "SELECT id, event_count, min_start_ns, max_end_ns, max_dur_ns FROM tracks ORDER BY id"}) {
      Statement sa(shardscope::core::storeDb(*a), sql), sb(shardscope::core::storeDb(*b), sql);
      int rows = 0;
      for (;;) {
        const bool ra = sa.step(), rb = sb.step();
        QCOMPARE(ra, rb);
        if (!ra) break;
        ++rows;
        for (int c = 0; c < sa.columnCount(); ++c) {
          const auto* pa = static_cast<const char*>(sqlite3_column_blob(sa.handle(), c));
          const auto* pb = static_cast<const char*>(sqlite3_column_blob(sb.handle(), c));
          const std::string va(pa ? pa : "", static_cast<std::size_t>(sqlite3_column_bytes(sa.handle(), c)));
          const std::string vb(pb ? pb : "", static_cast<std::size_t>(sqlite3_column_bytes(sb.handle(), c)));
          QVERIFY2(va == vb, (std::string(sql) + ", row " + std::to_string(rows) + ", column " + std::to_string(c)).c_str());
        }
      }
      QVERIFY2(rows > 0, sql);
    }
    // The args of the out-of-order chunks were compressed and reordered with their events.
    Statement z(shardscope::core::storeDb(*b), "SELECT COUNT(*) FROM event_args WHERE raw_size IS NOT NULL");
    QVERIFY(z.step());
    QVERIFY(z.int64(0) > 0);
    QCOMPARE(b->memoryEvents(RankId(1)).size(), std::size_t(1000));
  }

  void windowQueryReturnsOverlappingEventsInOrder() {
    QTemporaryDir dir;
    TraceStore store(pathIn(dir, "a.db"));
    const auto f = makeRun(store, "w");
    {
      Transaction tx(shardscope::core::storeDb(store));
      BulkWriter w(store);
      EventRecord e;
      e.trackId = f.track;
      e.nameId = store.intern("parent");
      // A long parent [0, 1000), children, and later events inserted out of order.
      e.startNs = 500;
      e.endNs = 600;
      w.addEvent(e);
      e.startNs = 0;
      e.endNs = 1000;
      w.addEvent(e);
      e.startNs = 100;
      e.endNs = 200;
      w.addEvent(e);
      e.startNs = 2000;
      e.endNs = 2000;
      e.flags = EventFlags::Instant;
      w.addEvent(e);
      e.startNs = 3000;
      e.endNs = 3500;
      e.flags = 0;
      w.addEvent(e);
      w.finish();
      tx.commit();
    }
    // Window [550, 2500): the parent (starts long before), [500,600) and the instant at 2000.
    auto ev = store.eventsInWindow(f.track, 550, 2500);
    QCOMPARE(ev.size(), std::size_t(3));
    QCOMPARE(ev[0].startNs, TimeNs(0));
    QCOMPARE(ev[1].startNs, TimeNs(500));
    QCOMPARE(ev[2].startNs, TimeNs(2000));
    // Window ending exactly where an event starts excludes it; one starting at an event's end too.
    QCOMPARE(store.eventsInWindow(f.track, 1000, 2000).size(), std::size_t(0));
    QCOMPARE(store.eventsInWindow(f.track, 3499, 3500).size(), std::size_t(1));
    auto sum = store.summary(f.run);
    QCOMPARE(sum.eventCount, std::int64_t(5));
    QCOMPARE(*sum.startNs, TimeNs(0));
    QCOMPARE(*sum.endNs, TimeNs(3500));
    QCOMPARE(sum.tracks.at(0).maxDurNs, TimeNs(1000));
  }

  void deleteRunCascadesAndKeepsOthers() {
    QTemporaryDir dir;
    TraceStore store(pathIn(dir, "a.db"));
    const auto a = makeRun(store, "a");
    const auto b = makeRun(store, "b");
    Track counterTrack;
    counterTrack.rankId = a.rank;
    counterTrack.kind = TrackKind::Counter;
    counterTrack.name = "memory allocated";
    const TrackId aCounter = store.addTrack(counterTrack);
    counterTrack.rankId = b.rank;
    const TrackId bCounter = store.addTrack(counterTrack);
    {
      Transaction tx(shardscope::core::storeDb(store));
      BulkWriter w(store);
      EventRecord e;
      e.nameId = store.intern("op");
      for (int i = 0; i < 100; ++i) {
        e.trackId = i % 2 ? a.track : b.track;
        e.startNs = i;
        e.endNs = i + 1;
        w.addEvent(e, R"({"k":1})");
        w.addCounter(i % 2 ? aCounter : bCounter, i, i * 2.0);
      }
      w.finish();
      tx.commit();
    }
    store.addStep(Step{a.rank, 1, 0, 10});
    store.setMetric(a.run, std::nullopt, "tokens_per_s", 123.5);
    store.deleteRun(a.run);
    QVERIFY(!store.run(a.run));
    Statement c(shardscope::core::storeDb(store),
                "SELECT (SELECT SUM(count) FROM event_chunks), (SELECT COUNT(*) FROM event_args), "
                "(SELECT COUNT(*) FROM counters), (SELECT COUNT(*) FROM steps), (SELECT COUNT(*) FROM metrics)");
    QVERIFY(c.step());
    QCOMPARE(c.int64(0), std::int64_t(50));
    QCOMPARE(c.int64(1), std::int64_t(1));  // one args block for b's single chunk
    QCOMPARE(c.int64(2), std::int64_t(50));
    QCOMPARE(c.int64(3), std::int64_t(0));
    QCOMPARE(c.int64(4), std::int64_t(0));
    QCOMPARE(store.summary(b.run).eventCount, std::int64_t(50));
  }

  void chunksSplitSortAndMergeInOrder() {
    // More events than one chunk holds, written out of order: forEachEvent must merge chunks whose
    // time ranges interleave and return every event once, ordered, with its own args.
    QTemporaryDir dir;
    TraceStore store(pathIn(dir, "a.db"));
    const auto f = makeRun(store, "chunks");
    const int n = EventChunk::kMaxEvents * 3 + 17;
    {
      Transaction tx(shardscope::core::storeDb(store));
      BulkWriter w(store);
      EventRecord e;
      e.trackId = f.track;
      e.nameId = store.intern("k");
      for (int i = 0; i < n; ++i) {
        // A permutation of 0..n-1 spread over the chunks.
        const std::int64_t t = (static_cast<std::int64_t>(i) * 7919) % n;
        e.startNs = t * 10;
        e.endNs = t * 10 + 5;
        e.step = t % 3 ? std::optional<std::int64_t>(t) : std::nullopt;
        w.addEvent(e, "{\"t\":" + std::to_string(t) + "}");
      }
      w.finish();
      tx.commit();
    }
    std::int64_t expect = 0;
    store.forEachEvent(f.track, [&](const Event& ev) {
      QCOMPARE(ev.startNs, expect * 10);
      QCOMPARE(QString::fromStdString(ev.argsJson), QString("{\"t\":%1}").arg(expect));
      QCOMPARE(ev.step.has_value(), expect % 3 != 0);
      ++expect;
    });
    QCOMPARE(expect, std::int64_t(n));
    QCOMPARE(store.summary(f.run).eventCount, std::int64_t(n));
    const auto win = store.eventsInWindow(f.track, 1000, 1020, true);
    QCOMPARE(win.size(), std::size_t(2));  // [1000,1005) and [1010,1015)
    QCOMPARE(QString::fromStdString(win[1].argsJson), QString("{\"t\":101}"));
  }

  void argsBlocksAreCompressedAndOlderRawBlocksStillRead() {
    QTemporaryDir dir;
    TraceStore store(pathIn(dir, "a.db"));
    const auto f = makeRun(store, "args");
    auto argsOf = [](int i) {
      return "{\"External id\":" + std::to_string(i) +
             ",\"Input Dims\":[[512],[],[]],\"Input type\":[\"long int\",\"\",\"Scalar\"]}";
    };
    {
      Transaction tx(shardscope::core::storeDb(store));
      BulkWriter w(store);
      EventRecord e;
      e.trackId = f.track;
      e.nameId = store.intern("aten::add");
      for (int i = 0; i < 500; ++i) {
        e.startNs = i * 10;
        e.endNs = i * 10 + 5;
        w.addEvent(e, argsOf(i));
      }
      w.finish();
      tx.commit();
    }
    // Stored as LZ4 well under the JSON's size, read back exactly.
    Statement st(shardscope::core::storeDb(store), "SELECT chunk_id, length(data), raw_size FROM event_args");
    QVERIFY(st.step());
    const Id chunk = st.int64(0);
    QVERIFY(!st.isNull(2));
    std::int64_t raw = 0;
    for (int i = 0; i < 500; ++i) raw += static_cast<std::int64_t>(argsOf(i).size());
    QCOMPARE(st.int64(2), raw);
    QVERIFY2(st.int64(1) * 4 < raw, qPrintable(QString("%1 of %2 bytes").arg(st.int64(1)).arg(raw)));
    QVERIFY(!st.step());
    st.reset();
    auto check = [&](TraceStore& s) {
      int i = 0;
      s.forEachEvent(f.track, [&](const Event& ev) { QCOMPARE(ev.argsJson, argsOf(i++)); });
      QCOMPARE(i, 500);
    };
    check(store);
    // A block as schema 2 wrote it (the JSON itself, raw_size NULL) reads the same.
    std::string json;
    for (int i = 0; i < 500; ++i) json += argsOf(i);
    {
      Statement up(shardscope::core::storeDb(store), "UPDATE event_args SET data = ?, raw_size = NULL WHERE chunk_id = ?");
      sqlite3_bind_blob(up.handle(), 1, json.data(), static_cast<int>(json.size()), SQLITE_TRANSIENT);
      up.bind(2, chunk);
      up.exec();
    }
    TraceStore fresh(pathIn(dir, "a.db"));
    check(fresh);
    // A damaged block is an error naming the chunk, not a crash or garbage.
    shardscope::core::storeDb(store).exec("UPDATE event_args SET data = x'00ff00ff00ff', raw_size = 4000");
    TraceStore damaged(pathIn(dir, "a.db"));
    try {
      damaged.forEachEvent(f.track, [](const Event&) {});
      QFAIL("a damaged args block was read");
    } catch (const DatabaseError& e) {
      QVERIFY2(QString(e.what()).contains("damaged") && QString(e.what()).contains("chunk " + QString::number(chunk)), e.what());
    }
  }

  void damagedChunkIsAnErrorNotACrash() {
    QTemporaryDir dir;
    TraceStore store(pathIn(dir, "a.db"));
    const auto f = makeRun(store, "bad");
    shardscope::core::storeDb(store).exec("INSERT INTO event_chunks(track_id, count, start_ns, end_ns, data) VALUES(" +
                                          std::to_string(f.track.value()) + ", 5, 0, 10, x'0100000005000000')");
    QVERIFY_THROWS_EXCEPTION(Error, store.eventsInWindow(f.track, 0, 100));
  }

  void processGroupsMergeInsteadOfErasing() {
    QTemporaryDir dir;
    TraceStore store(pathIn(dir, "a.db"));
    const auto f = makeRun(store, "pg");
    ProcessGroup full;
    full.runId = f.run;
    full.name = "3";
    full.description = "default_pg";
    full.backend = "cuda:nccl";
    full.size = 8;
    full.ranksJson = "[0,1,2,3,4,5,6,7]";
    const Id id = store.addProcessGroup(full);
    ProcessGroup partial;  // what a collective's args alone say about the group
    partial.runId = f.run;
    partial.name = "3";
    partial.size = 8;
    QCOMPARE(store.addProcessGroup(partial), id);
    const auto pgs = store.processGroups(f.run);
    QCOMPARE(pgs.size(), std::size_t(1));
    QCOMPARE(QString::fromStdString(pgs[0].backend), QString("cuda:nccl"));
    QCOMPARE(QString::fromStdString(pgs[0].description), QString("default_pg"));
    QCOMPARE(QString::fromStdString(pgs[0].ranksJson), QString("[0,1,2,3,4,5,6,7]"));
  }

  void metricsUpsert() {
    QTemporaryDir dir;
    TraceStore store(pathIn(dir, "a.db"));
    const auto f = makeRun(store, "m");
    store.setMetric(f.run, std::nullopt, "step_time_ms", 10);
    store.setMetric(f.run, std::nullopt, "step_time_ms", 12);
    store.setMetric(f.run, f.rank, "step_time_ms", 7);
    QCOMPARE(*store.metric(f.run, std::nullopt, "step_time_ms"), 12.0);
    QCOMPARE(*store.metric(f.run, f.rank, "step_time_ms"), 7.0);
    QVERIFY(!store.metric(f.run, std::nullopt, "absent"));
  }

  void internIsStableAndRollbackSafe() {
    QTemporaryDir dir;
    TraceStore store(pathIn(dir, "a.db"));
    const Id a = store.intern("aten::mm");
    QCOMPARE(store.intern("aten::mm"), a);
    QCOMPARE(QString::fromStdString(store.string(a)), QString("aten::mm"));
    {
      Transaction tx(shardscope::core::storeDb(store));
      store.intern("only-in-rolled-back-tx");
    }  // rolled back
    store.invalidateCaches();
    const Id again = store.intern("only-in-rolled-back-tx");
    QCOMPARE(QString::fromStdString(store.string(again)), QString("only-in-rolled-back-tx"));
  }

  void olderSchemaIsMigratedKeepingData() {
    QTemporaryDir dir;
    const std::string path = pathIn(dir, "old.db");
    {
      Database db(path, Database::Mode::ReadWrite);
      schema::migrate(db, 1);
      QCOMPARE(schema::version(db), 1);
      db.exec(
          "INSERT INTO runs(name, source, created_at, status) VALUES('v1 run', 'kineto', '2025-01-01T00:00:00Z', 'completed')");
    }
    TraceStore store(path);
    QCOMPARE(schema::version(shardscope::core::storeDb(store)), schema::kCurrentVersion);
    auto runs = store.runs();
    QCOMPARE(runs.size(), std::size_t(1));
    QCOMPARE(QString::fromStdString(std::string(runs[0].name)), QString("v1 run"));
    QCOMPARE(QString::fromStdString(runs[0].metadataJson), QString("{}"));  // column added by v2
  }

  void readOnlyReadsVersion2AsItIs() {
    // A file of the previous schema on a read-only mount (a shared fixture, a colleague's database):
    // readable without an upgrade; a version-1 file is not (it needs a migration first).
    QTemporaryDir dir;
    const std::string v2 = pathIn(dir, "v2.db"), v1 = pathIn(dir, "v1.db");
    for (const auto& [path, version] : {std::pair{v2, 2}, std::pair{v1, 1}}) {
      Database db(path, Database::Mode::ReadWrite);
      schema::migrate(db, version);
      db.exec(
          "INSERT INTO runs(name, source, created_at, status) VALUES('old run', 'kineto', '2025-01-01T00:00:00Z', 'completed')");
    }
    {
      TraceStore store(v2, Database::Mode::ReadOnly);
      QCOMPARE(schema::version(shardscope::core::storeDb(store)), 2);  // untouched
      QCOMPARE(store.runs().size(), std::size_t(1));
    }
    try {
      TraceStore store(v1, Database::Mode::ReadOnly);
      QFAIL("a version-1 file cannot be read without a migration");
    } catch (const DatabaseError& e) {
      QVERIFY2(QString(e.what()).contains("read-only") && QString(e.what()).contains("v1.db"), e.what());
    }
  }

  void newerSchemaIsRefusedUntouched() {
    QTemporaryDir dir;
    const std::string path = pathIn(dir, "new.db");
    {
      TraceStore store(path);
      shardscope::core::storeDb(store).exec("PRAGMA user_version = 99");
    }
    try {
      TraceStore store(path);
      QFAIL("a newer schema must be refused");
    } catch (const DatabaseError& e) {
      const QString msg = e.what();
      QVERIFY2(msg.contains("newer") && msg.contains("99") && msg.contains("new.db"), e.what());
    }
    Database db(path, Database::Mode::ReadOnly);
    QCOMPARE(schema::version(db), 99);
  }

  void notSqliteIsRefused() {
    QTemporaryDir dir;
    const std::string path = writeFile(dir, "trace.db", "{\"traceEvents\": []} this is not a database at all........");
    try {
      TraceStore store(path);
      QFAIL("must throw");
    } catch (const DatabaseError& e) {
      QVERIFY2(QString(e.what()).contains("not a SQLite database"), e.what());
      QVERIFY(QString(e.what()).contains("trace.db"));
    }
  }

  void readOnlyOpenOfMissingFileFails() {
    QTemporaryDir dir;
    QVERIFY_THROWS_EXCEPTION(DatabaseError, TraceStore(pathIn(dir, "missing.db"), Database::Mode::ReadOnly));
  }
};

QTEST_GUILESS_MAIN(TestTraceStore)
#include "tst_trace_store.moc"
