#include "core/util/json.h"

#include <charconv>
#include <cmath>
#include <cstring>

#include "core/util/input_source.h"
#include "core/util/error.h"

namespace shardscope::core {

JsonValue JsonValue::boolean(bool b) {
  JsonValue v;
  v.type_ = Type::Bool;
  v.b_ = b;
  return v;
}
JsonValue JsonValue::number(std::string raw) {
  JsonValue v;
  v.type_ = Type::Number;
  v.s_ = std::move(raw);
  return v;
}
JsonValue JsonValue::number(double d) { return number(formatDouble(d)); }
JsonValue JsonValue::number(std::int64_t i) { return number(std::to_string(i)); }
JsonValue JsonValue::string(std::string s) {
  JsonValue v;
  v.type_ = Type::String;
  v.s_ = std::move(s);
  return v;
}
JsonValue JsonValue::array() {
  JsonValue v;
  v.type_ = Type::Array;
  return v;
}
JsonValue JsonValue::object() {
  JsonValue v;
  v.type_ = Type::Object;
  return v;
}

double JsonValue::asDouble() const {
  if (type_ == Type::Bool) return b_ ? 1 : 0;
  if (type_ != Type::Number && type_ != Type::String) return 0;
  double d = 0;
  const char* b = s_.data();
  auto [p, ec] = std::from_chars(b, b + s_.size(), d);
  if (ec != std::errc()) return std::nan("");
  return d;
}

std::optional<std::int64_t> JsonValue::asInt() const {
  if (type_ != Type::Number && type_ != Type::String) return std::nullopt;
  std::int64_t i = 0;
  const char* b = s_.data();
  auto [p, ec] = std::from_chars(b, b + s_.size(), i);
  if (ec == std::errc() && p == b + s_.size()) return i;
  const double d = asDouble();
  if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e18) return static_cast<std::int64_t>(d);
  return std::nullopt;
}

const JsonValue* JsonValue::find(std::string_view key) const {
  for (const auto& [k, v] : members_)
    if (k == key) return &v;
  return nullptr;
}

JsonValue& JsonValue::push(JsonValue v) {
  type_ = Type::Array;
  items_.push_back(std::move(v));
  return items_.back();
}

JsonValue& JsonValue::set(std::string key, JsonValue v) {
  type_ = Type::Object;
  for (auto& [k, old] : members_)
    if (k == key) {
      old = std::move(v);
      return old;
    }
  members_.emplace_back(std::move(key), std::move(v));
  return members_.back().second;
}

void JsonValue::dumpTo(std::string& out) const {
  switch (type_) {
    case Type::Null:
      out += "null";
      break;
    case Type::Bool:
      out += b_ ? "true" : "false";
      break;
    case Type::Number:
      out += s_;
      break;
    case Type::String:
      appendJsonString(out, s_);
      break;
    case Type::Array: {
      out.push_back('[');
      bool first = true;
      for (const auto& v : items_) {
        if (!first) out.push_back(',');
        first = false;
        v.dumpTo(out);
      }
      out.push_back(']');
      break;
    }
    case Type::Object: {
      out.push_back('{');
      bool first = true;
      for (const auto& [k, v] : members_) {
        if (!first) out.push_back(',');
        first = false;
        appendJsonString(out, k);
        out.push_back(':');
        v.dumpTo(out);
      }
      out.push_back('}');
      break;
    }
  }
}

std::string JsonValue::dump() const {
  std::string out;
  dumpTo(out);
  return out;
}

JsonValue readJsonValue(JsonReader& r, JsonReader::Token first, std::size_t maxNodes) {
  using T = JsonReader::Token;
  std::size_t nodes = 0;
  std::vector<JsonValue*> stack;
  std::vector<std::string> keys;
  JsonValue root;
  auto scalar = [&](T t) -> JsonValue {
    switch (t) {
      case T::String:
        return JsonValue::string(std::string(r.text()));
      case T::Number:
        return JsonValue::number(std::string(r.text()));
      case T::True:
        return JsonValue::boolean(true);
      case T::False:
        return JsonValue::boolean(false);
      default:
        return JsonValue();
    }
  };
  T t = first;
  std::string pendingKey;
  for (;;) {
    if (++nodes > maxNodes) r.fail("JSON value has more than " + std::to_string(maxNodes) + " nodes");
    if (t == T::Key) {
      pendingKey.assign(r.text());
      t = r.next();
      continue;
    }
    if (t == T::EndObject || t == T::EndArray) {
      stack.pop_back();
      if (stack.empty()) return root;
      t = r.next();
      continue;
    }
    JsonValue v = (t == T::BeginObject) ? JsonValue::object() : (t == T::BeginArray) ? JsonValue::array() : scalar(t);
    JsonValue* placed;
    if (stack.empty()) {
      root = std::move(v);
      placed = &root;
    } else if (stack.back()->isObject()) {
      placed = &stack.back()->set(pendingKey, std::move(v));
    } else {
      placed = &stack.back()->push(std::move(v));
    }
    if (t == T::BeginObject || t == T::BeginArray) {
      stack.push_back(placed);
    } else if (stack.empty()) {
      return root;
    }
    t = r.next();
  }
}

JsonValue parseJson(std::string_view text, const std::string& label) {
  JsonReader r(text, label);
  JsonValue v = readJsonValue(r, r.next());
  if (r.next() != JsonReader::Token::End) r.fail("unexpected data after the JSON document");
  return v;
}

JsonValue parseJsonFile(const std::string& path, std::size_t maxBytes) {
  auto in = openInput(path);
  const std::string text = readAll(*in, maxBytes);
  return parseJson(text, path);
}

std::string formatDouble(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);
  if (ec != std::errc()) return "0";
  return std::string(buf, p);
}

}  // namespace shardscope::core
