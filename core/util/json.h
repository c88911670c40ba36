#pragma once
// A small JSON document model for bounded inputs (distributedInfo, deviceProperties, run configs,
// DeepSpeed JSON) and a writer used by exporters and --json output. Trace event arrays are never
// loaded into it: they are streamed by JsonReader.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/util/json_reader.h"

namespace shardscope::core {

class JsonValue {
 public:
  enum class Type { Null, Bool, Number, String, Array, Object };

  JsonValue() = default;
  static JsonValue boolean(bool b);
  static JsonValue number(std::string raw);
  static JsonValue number(double v);
  static JsonValue number(std::int64_t v);
  static JsonValue string(std::string s);
  static JsonValue array();
  static JsonValue object();

  Type type() const { return type_; }
  bool isNull() const { return type_ == Type::Null; }
  bool isNumber() const { return type_ == Type::Number; }
  bool isString() const { return type_ == Type::String; }
  bool isArray() const { return type_ == Type::Array; }
  bool isObject() const { return type_ == Type::Object; }
  bool isBool() const { return type_ == Type::Bool; }

  bool asBool() const { return b_; }
  double asDouble() const;
  std::optional<std::int64_t> asInt() const;          // integral numbers only (or integral doubles)
  const std::string& asString() const { return s_; }  // string value, or raw number text
  const std::vector<JsonValue>& items() const { return items_; }
  const std::vector<std::pair<std::string, JsonValue>>& members() const { return members_; }
  const JsonValue* find(std::string_view key) const;
  JsonValue& push(JsonValue v);
  JsonValue& set(std::string key, JsonValue v);

  std::string dump() const;  // compact JSON
  void dumpTo(std::string& out) const;

 private:
  Type type_ = Type::Null;
  bool b_ = false;
  std::string s_;
  std::vector<JsonValue> items_;
  std::vector<std::pair<std::string, JsonValue>> members_;
};

// Builds a JsonValue from the value that starts with `first`; refuses more than maxNodes nodes.
JsonValue readJsonValue(JsonReader& r, JsonReader::Token first, std::size_t maxNodes = 1u << 20);
// Parses a whole document held in memory; `label` names it in errors.
JsonValue parseJson(std::string_view text, const std::string& label);
JsonValue parseJsonFile(const std::string& path, std::size_t maxBytes = 64u << 20);

// Formats a double the shortest way that round-trips (no locale), "null" for NaN/inf.
std::string formatDouble(double v);

}  // namespace shardscope::core
