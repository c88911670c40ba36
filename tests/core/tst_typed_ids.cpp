// Typed ids (core/model/ids.h): a run, rank or track id converts to nothing implicitly, costs what an
// int64 costs, and survives a trip through the store.
#include <QTemporaryDir>
#include <QtTest>

#include <concepts>
#include <cstdint>
#include <set>
#include <type_traits>
#include <unordered_map>

#include "core/model/ids.h"
#include "core/storage/trace_store.h"
#include "tests/common/test_support.h"

using namespace shardscope::core;
using shardscope::test::pathIn;

// What the compiler refuses is the point of the type: an int64 where an id is expected, an id of one
// kind where another is expected, an id where an int64 is expected.
static_assert(!std::is_convertible_v<std::int64_t, RunId>);
static_assert(!std::is_convertible_v<int, TrackId>);
static_assert(!std::is_convertible_v<RunId, TrackId>);
static_assert(!std::is_convertible_v<RunId, RankId>);
static_assert(!std::is_convertible_v<RankId, TrackId>);
static_assert(!std::is_convertible_v<RunId, std::int64_t>);
static_assert(!std::is_convertible_v<TrackId, std::int64_t>);
static_assert(!std::is_constructible_v<RunId, TrackId>);
static_assert(!std::is_constructible_v<std::int64_t, RunId>);
static_assert(!std::is_convertible_v<RunId, bool>);  // explicit: `if (id)`, never `int n = id`
static_assert(std::is_constructible_v<bool, RunId>);
static_assert(!std::equality_comparable_with<RunId, TrackId>);
static_assert(!std::equality_comparable_with<RunId, std::int64_t>);
// As cheap as the int64 it wraps: the event decoders and the timeline copy them by the million.
static_assert(std::is_trivially_copyable_v<RunId> && std::is_trivially_copyable_v<RankId> &&
              std::is_trivially_copyable_v<TrackId>);
static_assert(sizeof(RunId) == 8 && sizeof(RankId) == 8 && sizeof(TrackId) == 8);
static_assert(RunId{}.value() == 0 && !RunId{} && static_cast<bool>(RunId{3}));
static_assert(RunId{2} < RunId{3} && RunId{3} == RunId{3} && RunId{3} != RunId{4});

class TestTypedIds : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void valueAndOrdering() {
    const TrackId a{7}, b{9};
    QCOMPARE(a.value(), std::int64_t(7));
    QVERIFY(a < b && b > a && a <= a && !(a == b));
    QVERIFY(!TrackId{});
    QVERIFY(TrackId{-1});  // non-zero is "some id", whatever its sign
    std::set<RunId> ordered{RunId{3}, RunId{1}, RunId{2}};
    QCOMPARE(ordered.begin()->value(), std::int64_t(1));
    QCOMPARE(ordered.rbegin()->value(), std::int64_t(3));
  }

  void hashKeysContainers() {
    QCOMPARE(std::hash<RankId>{}(RankId{42}), std::hash<std::int64_t>{}(42));
    std::unordered_map<TrackId, int> byTrack;
    for (int i = 1; i <= 100; ++i) byTrack[TrackId{i}] = i * 2;
    QCOMPARE(byTrack.size(), std::size_t(100));
    QCOMPARE(byTrack.at(TrackId{37}), 74);
    QVERIFY(byTrack.find(TrackId{101}) == byTrack.end());
  }

  void storeRoundTrip() {
    QTemporaryDir dir;
    TraceStore store(pathIn(dir, "ids.db"));
    Run run;
    run.name = "typed";
    const RunId first = store.createRun(run);
    const RunId second = store.createRun(run);
    QVERIFY(first && second && first != second);
    QCOMPARE(store.run(first)->id, first);
    QCOMPARE(store.latestRunId().value_or(RunId{}), second);

    Rank rank;
    rank.runId = second;
    rank.rank = 3;
    const RankId rankId = store.addRank(rank);
    QVERIFY(rankId);
    const auto ranks = store.ranks(second);
    QCOMPARE(ranks.size(), std::size_t(1));
    QCOMPARE(ranks[0].id, rankId);
    QCOMPARE(ranks[0].runId, second);
    QVERIFY(store.ranks(first).empty());

    Track track;
    track.rankId = rankId;
    track.kind = TrackKind::GpuStream;
    track.name = "stream 7";
    const TrackId trackId = store.addTrack(track);
    const auto [allocated, reserved] = store.addMemoryTracks(rankId, 1, 0);
    QVERIFY(trackId && allocated && reserved);
    QVERIFY(trackId != allocated && allocated != reserved);
    const auto tracks = store.tracks(second);
    QCOMPARE(tracks.size(), std::size_t(3));
    std::set<TrackId> seen;
    for (const auto& t : tracks) {
      QCOMPARE(t.rankId, rankId);
      seen.insert(t.id);
    }
    QCOMPARE(seen, (std::set<TrackId>{trackId, allocated, reserved}));

    store.setMetric(second, rankId, "m", 1.5);
    QCOMPARE(store.metric(second, rankId, "m").value_or(0), 1.5);
    QVERIFY(!store.metric(second, std::nullopt, "m"));
    QVERIFY(!store.metric(first, rankId, "m"));
  }
};

QTEST_GUILESS_MAIN(TestTypedIds)
#include "tst_typed_ids.moc"
