#pragma once
// Typed ids for the rows that cross every layer: runs, ranks and tracks. They were bare int64s, so a
// run id passed where a track id was expected compiled and read the wrong rows. A TypedId is the same
// eight bytes (trivially copyable, no indirection, as cheap as the int64 on the hot paths), but it
// converts to nothing and from nothing implicitly: the integer is reached with `.value()` only where
// it leaves the program's types — SQL binds and reads in core/storage, JSON and text output, QVariant
// and signals — so each such place is visible, and ids of two kinds never compare.
#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <type_traits>

namespace shardscope::core {

template <class Tag>
class TypedId {
 public:
  constexpr TypedId() = default;
  constexpr explicit TypedId(std::int64_t v) : value_(v) {}

  constexpr std::int64_t value() const { return value_; }
  // 0 is "none": SQLite's rowids start at 1.
  constexpr explicit operator bool() const { return value_ != 0; }

  friend constexpr bool operator==(const TypedId&, const TypedId&) = default;
  friend constexpr auto operator<=>(const TypedId&, const TypedId&) = default;

 private:
  std::int64_t value_ = 0;
};

struct RunIdTag;
struct RankIdTag;
struct TrackIdTag;

using RunId = TypedId<RunIdTag>;
using RankId = TypedId<RankIdTag>;
using TrackId = TypedId<TrackIdTag>;

static_assert(std::is_trivially_copyable_v<RunId> && sizeof(RunId) == sizeof(std::int64_t));

}  // namespace shardscope::core

template <class Tag>
struct std::hash<shardscope::core::TypedId<Tag>> {
  std::size_t operator()(shardscope::core::TypedId<Tag> id) const noexcept { return std::hash<std::int64_t>{}(id.value()); }
};
