#include "core/util/pickle.h"

#include <algorithm>
#include <bit>
#include <cstdio>

#include "core/util/error.h"

namespace shardscope::core {

const PickleValue* PickleValue::get(std::string_view key) const {
  if (kind_ != Kind::Dict) return nullptr;
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it)
    if (it->first->kind_ == Kind::String && it->first->text_ == key) return it->second;
  return nullptr;
}

const char* PickleValue::kindName(Kind k) {
  switch (k) {
    case Kind::None:
      return "None";
    case Kind::Bool:
      return "bool";
    case Kind::Int:
      return "int";
    case Kind::Float:
      return "float";
    case Kind::String:
      return "str";
    case Kind::Bytes:
      return "bytes";
    case Kind::List:
      return "list";
    case Kind::Tuple:
      return "tuple";
    case Kind::Dict:
      return "dict";
  }
  return "?";
}

bool looksLikePickle(std::string_view head) {
  if (head.size() < 3 || static_cast<unsigned char>(head[0]) != 0x80) return false;
  const auto proto = static_cast<unsigned char>(head[1]);
  if (proto < 2 || proto > 5) return false;
  // The pickler starts with FRAME (protocol 4+) or a container / value opcode.
  const auto next = static_cast<unsigned char>(head[2]);
  return next == 0x95 || next == '}' || next == ']' || next == '(' || next == ')' || next == 0x8c || next == 'X' || next == 'N';
}

class PickleParser {
 public:
  PickleParser(std::string_view data, const std::string& name, const PickleLimits& limits)
      : data_(data), name_(name), limits_(limits), bytes_(data.size()) {}

  PickleDocument run() {
    if (bytes_ > limits_.maxBytes) fail(0, "the file is larger than the reader's memory bound");
    while (true) {
      if (pos_ >= data_.size()) fail(pos_, "the pickle ends before its STOP opcode (truncated file?)");
      const std::size_t at = pos_;
      const auto op = static_cast<unsigned char>(data_[pos_++]);
      if (op == '.') {  // STOP
        if (stack_.size() != 1 || !marks_.empty())
          fail(at, "STOP with " + std::to_string(stack_.size()) + " values on the stack");
        doc_.root_ = stack_.back();
        return std::move(doc_);
      }
      step(op, at);
    }
  }

 private:
  [[noreturn]] void fail(std::size_t at, const std::string& what) const {
    throw Error(name_ + ": byte " + std::to_string(at) + ": " + what);
  }

  std::string_view take(std::size_t n, std::size_t at) {
    if (n > data_.size() - pos_) fail(at, "a length of " + std::to_string(n) + " bytes runs past the end of the file");
    const std::string_view s = data_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  std::uint64_t readLe(std::size_t n, std::size_t at) {
    const std::string_view s = take(n, at);
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < n; ++i) v |= static_cast<std::uint64_t>(static_cast<unsigned char>(s[i])) << (8 * i);
    return v;
  }

  void account(std::uint64_t n, std::size_t at) {
    bytes_ += n;
    if (bytes_ > limits_.maxBytes)
      fail(at, "the pickle needs more memory than the reader's bound (" + std::to_string(limits_.maxBytes) + " bytes)");
  }

  PickleValue* make(PickleValue::Kind kind, std::size_t at) {
    account(sizeof(PickleValue), at);
    PickleValue& v = doc_.arena_.emplace_back();
    v.kind_ = kind;
    return &v;
  }

  void push(PickleValue* v, std::size_t at) {
    if (stack_.size() >= limits_.maxStack) fail(at, "more than " + std::to_string(limits_.maxStack) + " values on the stack");
    account(sizeof(void*), at);
    stack_.push_back(v);
  }
  PickleValue* pop(std::size_t at, const char* opname) {
    const std::size_t floor = marks_.empty() ? 0 : marks_.back();
    if (stack_.size() <= floor) fail(at, std::string(opname) + " on an empty stack");
    PickleValue* v = stack_.back();
    stack_.pop_back();
    return v;
  }
  PickleValue* top(std::size_t at, const char* opname) {
    const std::size_t floor = marks_.empty() ? 0 : marks_.back();
    if (stack_.size() <= floor) fail(at, std::string(opname) + " on an empty stack");
    return stack_.back();
  }
  // The values above the last MARK, which is removed.
  std::vector<PickleValue*> popMark(std::size_t at, const char* opname) {
    if (marks_.empty()) fail(at, std::string(opname) + " without a MARK");
    const std::size_t m = marks_.back();
    marks_.pop_back();
    std::vector<PickleValue*> items(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    stack_.resize(m);
    return items;
  }

  void addItem(PickleValue* container, PickleValue* item, std::size_t at) {
    if (container->items_.size() >= limits_.maxContainerItems) fail(at, "a container with too many items");
    account(sizeof(void*), at);
    container->items_.push_back(item);
    deepen(container, item, at);
  }
  void addEntry(PickleValue* dict, PickleValue* key, PickleValue* value, std::size_t at) {
    if (dict->entries_.size() >= limits_.maxContainerItems) fail(at, "a dict with too many items");
    account(2 * sizeof(void*), at);
    dict->entries_.emplace_back(key, value);
    deepen(dict, key, at);
    deepen(dict, value, at);
  }
  void deepen(PickleValue* container, const PickleValue* item, std::size_t at) {
    container->depth_ = std::max(container->depth_, item->depth_ + 1);
    if (container->depth_ > limits_.maxDepth) fail(at, "values nested deeper than " + std::to_string(limits_.maxDepth));
  }

  PickleValue* container(PickleValue::Kind kind, const std::vector<PickleValue*>& items, std::size_t at) {
    PickleValue* c = make(kind, at);
    c->items_.reserve(items.size());
    for (PickleValue* i : items) addItem(c, i, at);
    return c;
  }

  void memoPut(std::uint64_t index, PickleValue* v, std::size_t at) {
    if (index >= limits_.maxMemo) fail(at, "memo index " + std::to_string(index) + " beyond the reader's bound");
    if (index >= memo_.size()) {
      account((index + 1 - memo_.size()) * sizeof(void*), at);
      memo_.resize(index + 1, nullptr);
    }
    if (!memo_[index]) ++memoCount_;
    memo_[index] = v;
  }
  PickleValue* memoGet(std::uint64_t index, std::size_t at) {
    if (index >= memo_.size() || !memo_[index]) fail(at, "memo index " + std::to_string(index) + " was never stored");
    return memo_[index];
  }

  PickleValue* text(PickleValue::Kind kind, std::uint64_t n, std::size_t at) {
    if (n > data_.size() - pos_) fail(at, "a length of " + std::to_string(n) + " bytes runs past the end of the file");
    PickleValue* v = make(kind, at);
    account(n, at);
    v->text_ = std::string(take(static_cast<std::size_t>(n), at));
    return v;
  }

  PickleValue* integer(std::int64_t i, std::size_t at) {
    PickleValue* v = make(PickleValue::Kind::Int, at);
    v->int_ = i;
    return v;
  }

  // LONG1/LONG4: little-endian two's complement of n bytes; Shardscope keeps 64 bits.
  PickleValue* longInt(std::uint64_t n, std::size_t at) {
    if (n > 8) fail(at, "an integer of " + std::to_string(n) + " bytes does not fit 64 bits");
    const std::string_view s = take(static_cast<std::size_t>(n), at);
    std::uint64_t u = 0;
    for (std::size_t i = 0; i < n; ++i) u |= static_cast<std::uint64_t>(static_cast<unsigned char>(s[i])) << (8 * i);
    if (n > 0 && n < 8 && (static_cast<unsigned char>(s[n - 1]) & 0x80)) u |= ~std::uint64_t{0} << (8 * n);  // sign-extend
    return integer(static_cast<std::int64_t>(u), at);
  }

  [[noreturn]] void refuse(unsigned char op, std::size_t at) {
    const char* name = nullptr;
    switch (op) {
      case 'c': {
        // GLOBAL "module\nname\n": say what it wanted, never import it.
        const std::size_t e1 = data_.find('\n', pos_);
        const std::size_t e2 = e1 == std::string_view::npos ? e1 : data_.find('\n', e1 + 1);
        std::string what;
        if (e2 != std::string_view::npos && e2 - pos_ < 200)
          what = " '" + std::string(data_.substr(pos_, e1 - pos_)) + "." + std::string(data_.substr(e1 + 1, e2 - e1 - 1)) + "'";
        fail(at, "opcode GLOBAL" + what + " refused: this reader builds plain data and executes nothing");
      }
      case 0x93: {
        std::string what;
        if (stack_.size() >= 2 && stack_[stack_.size() - 2]->isString() && stack_.back()->isString())
          what = " '" + stack_[stack_.size() - 2]->text_.substr(0, 100) + "." + stack_.back()->text_.substr(0, 100) + "'";
        fail(at, "opcode STACK_GLOBAL" + what + " refused: this reader builds plain data and executes nothing");
      }
      case 'R':
        name = "REDUCE";
        break;
      case 'b':
        name = "BUILD";
        break;
      case 'i':
        name = "INST";
        break;
      case 'o':
        name = "OBJ";
        break;
      case 0x81:
        name = "NEWOBJ";
        break;
      case 0x92:
        name = "NEWOBJ_EX";
        break;
      case 0x82:
      case 0x83:
      case 0x84:
        name = "EXT";
        break;
      case 'P':
        name = "PERSID";
        break;
      case 'Q':
        name = "BINPERSID";
        break;
      case 0x97:
        name = "NEXT_BUFFER";
        break;
      case 0x98:
        name = "READONLY_BUFFER";
        break;
      case 'I':
      case 'L':
      case 'F':
      case 'S':
      case 'V':
      case 'g':
      case 'p':
        fail(at,
             "text opcode '" + std::string(1, static_cast<char>(op)) + "' of pickle protocol 0/1; only protocols 2-5 are read");
      default:
        break;
    }
    if (name) fail(at, std::string("opcode ") + name + " refused: this reader builds plain data and executes nothing");
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02x", op);
    fail(at, std::string("unknown pickle opcode ") + hex);
  }

  void step(unsigned char op, std::size_t at) {
    using K = PickleValue::Kind;
    switch (op) {
      case 0x80: {  // PROTO
        const auto p = static_cast<unsigned char>(take(1, at)[0]);
        if (p < 2 || p > 5) fail(at, "pickle protocol " + std::to_string(p) + " (only 2-5 are read)");
        return;
      }
      case 0x95:
        take(8, at);
        return;  // FRAME: a hint for buffered readers; the data is all here
      case '(':
        if (marks_.size() >= limits_.maxDepth) fail(at, "MARKs nested deeper than " + std::to_string(limits_.maxDepth));
        marks_.push_back(stack_.size());
        return;
      case '0':
        pop(at, "POP");
        return;
      case '1':
        popMark(at, "POP_MARK");
        return;
      case '2':
        push(top(at, "DUP"), at);
        return;
      case 'N':
        push(make(K::None, at), at);
        return;
      case 0x88:
      case 0x89: {
        PickleValue* v = make(K::Bool, at);
        v->int_ = op == 0x88 ? 1 : 0;
        push(v, at);
        return;
      }
      case 'J':
        push(integer(static_cast<std::int32_t>(static_cast<std::uint32_t>(readLe(4, at))), at), at);
        return;
      case 'K':
        push(integer(static_cast<std::int64_t>(readLe(1, at)), at), at);
        return;
      case 'M':
        push(integer(static_cast<std::int64_t>(readLe(2, at)), at), at);
        return;
      case 0x8a:
        push(longInt(readLe(1, at), at), at);
        return;
      case 0x8b:
        push(longInt(readLe(4, at), at), at);
        return;
      case 'G': {
        const std::string_view s = take(8, at);
        std::uint64_t u = 0;
        for (int i = 0; i < 8; ++i) u = (u << 8) | static_cast<unsigned char>(s[static_cast<std::size_t>(i)]);
        PickleValue* v = make(K::Float, at);
        v->float_ = std::bit_cast<double>(u);
        push(v, at);
        return;
      }
      case 0x8c:
      case 'U':
        push(text(op == 0x8c ? K::String : K::Bytes, readLe(1, at), at), at);
        return;
      case 'X':
      case 'T':
        push(text(op == 'X' ? K::String : K::Bytes, readLe(4, at), at), at);
        return;
      case 0x8d:
        push(text(K::String, readLe(8, at), at), at);
        return;
      case 'C':
        push(text(K::Bytes, readLe(1, at), at), at);
        return;
      case 'B':
        push(text(K::Bytes, readLe(4, at), at), at);
        return;
      case 0x8e:
      case 0x96:
        push(text(K::Bytes, readLe(8, at), at), at);
        return;
      case '}':
        push(make(K::Dict, at), at);
        return;
      case ']':
      case 0x8f:
        push(make(K::List, at), at);
        return;  // EMPTY_SET: a set reads as a list
      case ')':
        push(make(K::Tuple, at), at);
        return;
      case 't':
        push(container(K::Tuple, popMark(at, "TUPLE"), at), at);
        return;
      case 0x85:
      case 0x86:
      case 0x87: {
        const std::size_t n = op - 0x84u;
        std::vector<PickleValue*> items(n);
        for (std::size_t i = n; i-- > 0;) items[i] = pop(at, "TUPLEn");
        push(container(K::Tuple, items, at), at);
        return;
      }
      case 'l':
      case 0x91:
        push(container(K::List, popMark(at, "LIST"), at), at);
        return;  // FROZENSET too
      case 'd': {
        auto items = popMark(at, "DICT");
        if (items.size() % 2) fail(at, "DICT with an odd number of items");
        PickleValue* d = make(K::Dict, at);
        for (std::size_t i = 0; i < items.size(); i += 2) addEntry(d, items[i], items[i + 1], at);
        push(d, at);
        return;
      }
      case 'a': {
        PickleValue* item = pop(at, "APPEND");
        PickleValue* list = top(at, "APPEND");
        if (list->kind_ != K::List) fail(at, std::string("APPEND to a ") + PickleValue::kindName(list->kind_));
        addItem(list, item, at);
        return;
      }
      case 'e':
      case 0x90: {
        auto items = popMark(at, "APPENDS");
        PickleValue* list = top(at, "APPENDS");
        if (list->kind_ != K::List) fail(at, std::string("APPENDS to a ") + PickleValue::kindName(list->kind_));
        for (PickleValue* i : items) addItem(list, i, at);
        return;
      }
      case 's': {
        PickleValue* value = pop(at, "SETITEM");
        PickleValue* key = pop(at, "SETITEM");
        PickleValue* dict = top(at, "SETITEM");
        if (dict->kind_ != K::Dict) fail(at, std::string("SETITEM on a ") + PickleValue::kindName(dict->kind_));
        addEntry(dict, key, value, at);
        return;
      }
      case 'u': {
        auto items = popMark(at, "SETITEMS");
        PickleValue* dict = top(at, "SETITEMS");
        if (dict->kind_ != K::Dict) fail(at, std::string("SETITEMS on a ") + PickleValue::kindName(dict->kind_));
        if (items.size() % 2) fail(at, "SETITEMS with an odd number of items");
        for (std::size_t i = 0; i < items.size(); i += 2) addEntry(dict, items[i], items[i + 1], at);
        return;
      }
      case 0x94:
        memoPut(memoCount_, top(at, "MEMOIZE"), at);
        return;
      case 'q':
        memoPut(readLe(1, at), top(at, "BINPUT"), at);
        return;
      case 'r':
        memoPut(readLe(4, at), top(at, "LONG_BINPUT"), at);
        return;
      case 'h':
        push(memoGet(readLe(1, at), at), at);
        return;
      case 'j':
        push(memoGet(readLe(4, at), at), at);
        return;
      default:
        refuse(op, at);
    }
  }

  std::string_view data_;
  const std::string& name_;
  PickleLimits limits_;
  std::uint64_t bytes_ = 0;
  std::size_t pos_ = 0;
  std::vector<PickleValue*> stack_;
  std::vector<std::size_t> marks_;
  std::vector<PickleValue*> memo_;
  std::uint64_t memoCount_ = 0;  // distinct entries: MEMOIZE stores at len(memo), as Python does
  PickleDocument doc_;
};

PickleDocument parsePickle(std::string_view data, const std::string& name, const PickleLimits& limits) {
  return PickleParser(data, name, limits).run();
}

}  // namespace shardscope::core
