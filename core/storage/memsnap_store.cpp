#include "core/storage/memsnap_store.h"

#include <bit>
#include <charconv>

#include "core/storage/store_access.h"
#include "core/util/error.h"

namespace shardscope::core {
namespace {

// Addresses are unsigned 64-bit; SQLite keeps signed 64-bit: stored bit for bit.
std::int64_t toDb(std::uint64_t a) { return std::bit_cast<std::int64_t>(a); }
std::uint64_t fromDb(std::int64_t a) { return std::bit_cast<std::uint64_t>(a); }

bool hasTable(Database& db, const char* name) {
  Statement st(db, "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?");
  st.bind(1, name);
  return st.step();
}

std::string joinFrames(const std::vector<std::int32_t>& frames) {
  std::string s;
  for (std::size_t i = 0; i < frames.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(frames[i]);
  }
  return s;
}

std::vector<std::int32_t> splitFrames(std::string_view s) {
  std::vector<std::int32_t> out;
  while (!s.empty()) {
    std::int32_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc()) break;
    out.push_back(v);
    s.remove_prefix(static_cast<std::size_t>(p - s.data()));
    if (!s.empty() && s.front() == ',') s.remove_prefix(1);
  }
  return out;
}

}  // namespace

void writeMemorySnapshot(TraceStore& store, RankId rankId, const MemorySnapshot& s, const std::string& sourceFile,
                         const CancelToken* cancel) {
  Database& db = storeDb(store);
  {
    Statement q(db, "SELECT 1 FROM memsnaps WHERE rank_id=?");
    q.bind(1, rankId.value());
    if (q.step()) throw Error(sourceFile + ": this rank already has a memory snapshot; import it into another rank or run");
  }
  Statement ins(db, "INSERT INTO memsnaps(rank_id, source_file, allocator_settings_json) VALUES(?,?,?)");
  ins.bind(1, rankId.value()).bind(2, sourceFile).bind(3, s.allocatorSettingsJson);
  ins.exec();
  const std::int64_t sid = db.lastInsertRowId();
  auto poll = [&](std::size_t i) {
    if (cancel && (i & 0xfff) == 0) cancel->throwIfCancelled();
  };

  Statement fr(db, "INSERT INTO memsnap_frames(snapshot_id, idx, name_id, file_id, line) VALUES(?,?,?,?,?)");
  for (std::size_t i = 0; i < s.frames.size(); ++i) {
    poll(i);
    const MemFrame& f = s.frames[i];
    fr.bind(1, sid)
        .bind(2, static_cast<std::int64_t>(i))
        .bind(3, store.intern(f.name))
        .bind(4, store.intern(f.file))
        .bind(5, f.line);
    fr.exec();
  }
  Statement st(db, "INSERT INTO memsnap_stacks(snapshot_id, idx, frames) VALUES(?,?,?)");
  for (std::size_t i = 0; i < s.stacks.size(); ++i) {
    poll(i);
    st.bind(1, sid).bind(2, static_cast<std::int64_t>(i)).bind(3, joinFrames(s.stacks[i]));
    st.exec();
  }
  Statement ev(db,
               "INSERT INTO memsnap_events(snapshot_id, device, seq, ts_ns, action, addr, size, stream, stack) "
               "VALUES(?,?,?,?,?,?,?,?,?)");
  for (std::size_t i = 0; i < s.events.size(); ++i) {
    poll(i);
    const MemTraceEvent& e = s.events[i];
    ev.bind(1, sid).bind(2, e.device).bind(3, e.seq).bind(4, e.tsNs).bind(5, static_cast<int>(e.action)).bind(6, toDb(e.addr));
    ev.bind(7, e.size).bind(8, e.stream).bind(9, e.stack);
    ev.exec();
  }
  Statement sg(db,
               "INSERT INTO memsnap_segments(snapshot_id, idx, device, address, total_size, allocated_size, active_size, "
               "requested_size, stream, segment_type, expandable, stack) VALUES(?,?,?,?,?,?,?,?,?,?,?,?)");
  for (std::size_t i = 0; i < s.segments.size(); ++i) {
    const MemSegment& g = s.segments[i];
    sg.bind(1, sid).bind(2, static_cast<std::int64_t>(i)).bind(3, g.device).bind(4, toDb(g.address)).bind(5, g.totalSize);
    sg.bind(6, g.allocatedSize).bind(7, g.activeSize).bind(8, g.requestedSize).bind(9, g.stream).bind(10, g.segmentType);
    sg.bind(11, g.expandable ? 1 : 0).bind(12, g.stack);
    sg.exec();
  }
  Statement bl(db,
               "INSERT INTO memsnap_blocks(snapshot_id, idx, segment, address, size, requested_size, state, stack) "
               "VALUES(?,?,?,?,?,?,?,?)");
  for (std::size_t i = 0; i < s.blocks.size(); ++i) {
    poll(i);
    const MemBlock& b = s.blocks[i];
    bl.bind(1, sid).bind(2, static_cast<std::int64_t>(i)).bind(3, b.segment).bind(4, toDb(b.address)).bind(5, b.size);
    bl.bind(6, b.requestedSize).bind(7, b.state).bind(8, b.stack);
    bl.exec();
  }
  Statement an(db, "INSERT INTO memsnap_annotations(snapshot_id, idx, device, ts_ns, start, name) VALUES(?,?,?,?,?,?)");
  for (std::size_t i = 0; i < s.annotations.size(); ++i) {
    const MemAnnotation& a = s.annotations[i];
    an.bind(1, sid)
        .bind(2, static_cast<std::int64_t>(i))
        .bind(3, a.device)
        .bind(4, a.tsNs)
        .bind(5, a.start ? 1 : 0)
        .bind(6, a.name);
    an.exec();
  }
  Statement pr(db, "INSERT INTO memsnap_prior(snapshot_id, idx, device, addr, size, stack, from_free) VALUES(?,?,?,?,?,?,?)");
  for (std::size_t i = 0; i < s.prior.size(); ++i) {
    const MemPriorBlock& p = s.prior[i];
    pr.bind(1, sid)
        .bind(2, static_cast<std::int64_t>(i))
        .bind(3, p.device)
        .bind(4, toDb(p.addr))
        .bind(5, p.size)
        .bind(6, p.stack);
    pr.bind(7, p.fromFree ? 1 : 0);
    pr.exec();
  }
  if (cancel) cancel->throwIfCancelled();
}

std::optional<MemorySnapshot> loadMemorySnapshot(TraceStore& store, RankId rankId) {
  Database& db = storeDb(store);
  if (!hasTable(db, "memsnaps")) return std::nullopt;
  std::int64_t sid = 0;
  MemorySnapshot s;
  {
    Statement q(db, "SELECT id, allocator_settings_json FROM memsnaps WHERE rank_id=?");
    q.bind(1, rankId.value());
    if (!q.step()) return std::nullopt;
    sid = q.int64(0);
    s.allocatorSettingsJson = q.text(1);
  }
  {
    Statement q(db, "SELECT name_id, file_id, line FROM memsnap_frames WHERE snapshot_id=? ORDER BY idx");
    q.bind(1, sid);
    while (q.step())
      s.frames.push_back(
          {std::string(store.stringView(q.int64(0))), std::string(store.stringView(q.int64(1))), static_cast<int>(q.int64(2))});
  }
  {
    Statement q(db, "SELECT frames FROM memsnap_stacks WHERE snapshot_id=? ORDER BY idx");
    q.bind(1, sid);
    while (q.step()) s.stacks.push_back(splitFrames(q.textView(0)));
  }
  {
    Statement q(db,
                "SELECT device, seq, ts_ns, action, addr, size, stream, stack FROM memsnap_events WHERE snapshot_id=? "
                "ORDER BY device, seq");
    q.bind(1, sid);
    while (q.step())
      s.events.push_back({static_cast<int>(q.int64(0)), q.int64(1), q.int64(2), static_cast<MemAction>(q.int64(3)),
                          fromDb(q.int64(4)), q.int64(5), q.int64(6), static_cast<StackId>(q.int64(7))});
  }
  {
    Statement q(db,
                "SELECT device, address, total_size, allocated_size, active_size, requested_size, stream, segment_type, "
                "expandable, stack FROM memsnap_segments WHERE snapshot_id=? ORDER BY idx");
    q.bind(1, sid);
    while (q.step())
      s.segments.push_back({static_cast<int>(q.int64(0)), fromDb(q.int64(1)), q.int64(2), q.int64(3), q.int64(4), q.int64(5),
                            q.int64(6), q.text(7), q.int64(8) != 0, static_cast<StackId>(q.int64(9))});
  }
  {
    Statement q(
        db, "SELECT segment, address, size, requested_size, state, stack FROM memsnap_blocks WHERE snapshot_id=? ORDER BY idx");
    q.bind(1, sid);
    while (q.step())
      s.blocks.push_back({static_cast<std::int32_t>(q.int64(0)), fromDb(q.int64(1)), q.int64(2), q.int64(3), q.text(4),
                          static_cast<StackId>(q.int64(5))});
  }
  {
    Statement q(db, "SELECT device, ts_ns, start, name FROM memsnap_annotations WHERE snapshot_id=? ORDER BY idx");
    q.bind(1, sid);
    while (q.step()) s.annotations.push_back({static_cast<int>(q.int64(0)), q.int64(1), q.int64(2) != 0, q.text(3)});
  }
  {
    Statement q(db, "SELECT device, addr, size, stack, from_free FROM memsnap_prior WHERE snapshot_id=? ORDER BY idx");
    q.bind(1, sid);
    while (q.step())
      s.prior.push_back(
          {static_cast<int>(q.int64(0)), fromDb(q.int64(1)), q.int64(2), static_cast<StackId>(q.int64(3)), q.int64(4) != 0});
  }
  return s;
}

std::vector<Rank> memorySnapshotRanks(TraceStore& store, RunId runId) {
  std::vector<Rank> out;
  Database& db = storeDb(store);
  if (!hasTable(db, "memsnaps")) return out;
  std::vector<std::int64_t> rankIds;
  {
    Statement q(db, "SELECT m.rank_id FROM memsnaps m JOIN ranks r ON r.id = m.rank_id WHERE r.run_id=? ORDER BY r.rank");
    q.bind(1, runId.value());
    while (q.step()) rankIds.push_back(q.int64(0));
  }
  for (const Rank& r : store.ranks(runId))
    for (std::int64_t id : rankIds)
      if (r.id.value() == id) out.push_back(r);
  return out;
}

}  // namespace shardscope::core
