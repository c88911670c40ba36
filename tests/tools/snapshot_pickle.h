#pragma once
// Writes small PyTorch memory snapshots as pickles (protocol 4, frames memoised the way Python's
// pickler does), so the tests and the benchmark have snapshots of their own without ../shared.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace shardscope::test {

struct GenFrame {
  std::string name;
  std::string file;
  int line = 0;
};
struct GenEvent {
  std::string action;  // alloc, free_requested, free_completed, segment_alloc, ...
  std::uint64_t addr = 0;
  std::int64_t size = 0;
  std::int64_t timeUs = 0;
  int stack = -1;  // index into GenSnapshot::stacks, -1: no frames
};
struct GenBlock {
  std::int64_t size = 0;
  std::int64_t requested = 0;
  std::string state;  // active_allocated, inactive, active_pending_free
  int stack = -1;
};
struct GenSegment {
  int device = 0;
  std::uint64_t address = 0;
  std::int64_t totalSize = 0;
  std::vector<GenBlock> blocks;  // tile the segment in order
};
struct GenSnapshot {
  std::vector<std::vector<GenFrame>> stacks;
  std::vector<GenSegment> segments;
  std::vector<std::vector<GenEvent>> traces;                      // one per device
  std::vector<std::pair<std::string, std::int64_t>> annotations;  // ("START name" / "END name", time_us)
};

class PickleOut {
 public:
  std::string bytes = std::string("\x80\x04", 2);
  void op(char c) { bytes += c; }
  void u8(unsigned v) { bytes += static_cast<char>(v & 0xff); }
  void le(std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) u8(static_cast<unsigned>(v >> (8 * i)));
  }
  void str(const std::string& s) {
    if (s.size() < 256) {
      u8(0x8c);
      u8(static_cast<unsigned>(s.size()));
    } else {
      op('X');
      le(s.size(), 4);
    }
    bytes += s;
  }
  void integer(std::int64_t v) {
    if (v >= 0 && v < 256) {
      op('K');
      u8(static_cast<unsigned>(v));
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
      op('J');
      le(static_cast<std::uint32_t>(static_cast<std::int32_t>(v)), 4);
    } else {
      u8(0x8a);
      u8(8);
      le(static_cast<std::uint64_t>(v), 8);
    }
  }
  void boolean(bool b) { u8(b ? 0x88 : 0x89); }
  void memoize() {
    u8(0x94);
    ++memo;
  }
  void get(std::uint32_t index) {
    op('j');
    le(index, 4);
  }
  void key(const std::string& k) { str(k); }
  std::uint32_t memo = 0;
};

inline void writeFrames(PickleOut& p, const GenSnapshot& s, int stack,
                        std::map<std::pair<int, std::size_t>, std::uint32_t>& memo) {
  p.op(']');
  if (stack < 0) return;
  p.op('(');
  const auto& frames = s.stacks[static_cast<std::size_t>(stack)];
  for (std::size_t i = 0; i < frames.size(); ++i) {
    auto it = memo.find({stack, i});
    if (it != memo.end()) {
      p.get(it->second);
      continue;
    }
    p.op('}');
    memo[{stack, i}] = p.memo;
    p.memoize();
    p.op('(');
    p.key("name"), p.str(frames[i].name);
    p.key("filename"), p.str(frames[i].file);
    p.key("line"), p.integer(frames[i].line);
    p.op('u');
  }
  p.op('e');
}

inline std::string snapshotPickle(const GenSnapshot& s) {
  PickleOut p;
  std::map<std::pair<int, std::size_t>, std::uint32_t> memo;
  p.op('}');
  p.op('(');
  p.key("segments");
  p.op(']');
  p.op('(');
  for (const auto& g : s.segments) {
    p.op('}');
    p.op('(');
    p.key("device"), p.integer(g.device);
    p.key("address"), p.integer(static_cast<std::int64_t>(g.address));
    p.key("total_size"), p.integer(g.totalSize);
    p.key("stream"), p.integer(0);
    p.key("segment_type"), p.str("large");
    p.key("is_expandable"), p.boolean(false);
    p.key("blocks");
    p.op(']');
    p.op('(');
    std::uint64_t addr = g.address;
    for (const auto& b : g.blocks) {
      p.op('}');
      p.op('(');
      p.key("address"), p.integer(static_cast<std::int64_t>(addr));
      p.key("size"), p.integer(b.size);
      p.key("requested_size"), p.integer(b.requested);
      p.key("state"), p.str(b.state);
      p.key("frames");
      writeFrames(p, s, b.stack, memo);
      p.op('u');
      addr += static_cast<std::uint64_t>(b.size);
    }
    p.op('e');
    p.op('u');
  }
  p.op('e');
  p.key("device_traces");
  p.op(']');
  p.op('(');
  for (const auto& trace : s.traces) {
    p.op(']');
    p.op('(');
    for (const auto& e : trace) {
      p.op('}');
      p.op('(');
      p.key("action"), p.str(e.action);
      p.key("addr"), p.integer(static_cast<std::int64_t>(e.addr));
      p.key("size"), p.integer(e.size);
      p.key("stream"), p.integer(0);
      p.key("time_us"), p.integer(e.timeUs);
      p.key("frames");
      writeFrames(p, s, e.stack, memo);
      p.op('u');
    }
    p.op('e');
  }
  p.op('e');
  p.key("external_annotations");
  p.op(']');
  p.op('(');
  for (const auto& [text, us] : s.annotations) {
    const bool start = text.rfind("START ", 0) == 0;
    p.op('}');
    p.op('(');
    p.key("stage"), p.str(start ? "START" : "END");
    p.key("name"), p.str(text.substr(start ? 6 : 4));
    p.key("device"), p.integer(0);
    p.key("time_us"), p.integer(us);
    p.op('u');
  }
  p.op('e');
  p.op('u');
  p.op('.');
  return p.bytes;
}

}  // namespace shardscope::test
