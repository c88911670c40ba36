#pragma once
// A safe reader of Python pickles (protocols 2-5), for data files such as PyTorch's memory snapshots
// (torch.cuda.memory._dump_snapshot). It understands the opcodes that build plain data: dicts,
// lists, tuples, sets (read as lists), str, bytes, int, float, bool, None and the memo. Nothing is
// ever executed: GLOBAL, STACK_GLOBAL, REDUCE, BUILD, NEWOBJ and every other opcode that names or
// calls Python code are refused with core::Error naming the file, the opcode and its byte offset.
// Depth, stack, memo and memory are bounded (PickleLimits); a hostile file fails cleanly.
//
// Values live in an arena owned by the PickleDocument and refer to each other by pointer, so a memo
// entry used twice is one shared node and a cyclic file (a list appended to itself) is no leak.
// Consumers walk the tree along the schema they expect and never recurse without a bound.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace shardscope::core {

struct PickleLimits {
  std::size_t maxDepth = 64;                   // nesting of containers and open MARKs
  std::size_t maxStack = 1u << 20;             // values on the stack at once
  std::size_t maxMemo = 1u << 24;              // memo entries
  std::uint64_t maxBytes = 4ull << 30;         // input plus the values built (approximate)
  std::size_t maxContainerItems = 1ull << 28;  // items of one list, dict or tuple
};

class PickleValue {
 public:
  enum class Kind { None, Bool, Int, Float, String, Bytes, List, Tuple, Dict };

  Kind kind() const { return kind_; }
  bool isNone() const { return kind_ == Kind::None; }
  bool isInt() const { return kind_ == Kind::Int || kind_ == Kind::Bool; }
  bool isString() const { return kind_ == Kind::String; }
  bool isList() const { return kind_ == Kind::List || kind_ == Kind::Tuple; }
  bool isDict() const { return kind_ == Kind::Dict; }
  std::int64_t asInt() const { return int_; }
  double asFloat() const { return kind_ == Kind::Float ? float_ : static_cast<double>(int_); }
  bool asBool() const { return int_ != 0; }
  const std::string& asString() const { return text_; }  // str (UTF-8) or bytes
  const std::vector<const PickleValue*>& items() const { return items_; }
  const std::vector<std::pair<const PickleValue*, const PickleValue*>>& entries() const { return entries_; }
  // The value of a str key of a dict (the last one when repeated); nullptr when absent or not a dict.
  const PickleValue* get(std::string_view key) const;
  // "int", "str", "list", ...: for messages.
  static const char* kindName(Kind k);

 private:
  friend class PickleParser;
  Kind kind_ = Kind::None;
  std::int64_t int_ = 0;
  double float_ = 0;
  std::string text_;
  std::size_t depth_ = 1;  // 1 + the deepest item when items were added
  std::vector<const PickleValue*> items_;
  std::vector<std::pair<const PickleValue*, const PickleValue*>> entries_;
};

class PickleDocument {
 public:
  const PickleValue& root() const { return *root_; }
  std::size_t valueCount() const { return arena_.size(); }

 private:
  friend class PickleParser;
  std::deque<PickleValue> arena_;
  const PickleValue* root_ = nullptr;
};

// Parses a whole pickle held in memory. `name` (the file) starts every error message.
PickleDocument parsePickle(std::string_view data, const std::string& name, const PickleLimits& limits = {});

// True when `head` starts like a pickle of protocol 2-5 (PROTO n, then FRAME or an opcode).
bool looksLikePickle(std::string_view head);

}  // namespace shardscope::core
