#include "ui/timeline/timeline_palette.h"

#include "core/timeline/draw_list.h"

#include <algorithm>

namespace shardscope::ui {

namespace tl = core::timeline;
using core::Category;
using core::CollectiveOp;

QColor timelineColor(std::uint8_t key) {
  if (key == tl::kMixedKey) return QColor(0x9d, 0x9d, 0x9d);
  switch (tl::keyCategory(key)) {
    case Category::Computation:
      return QColor(0x4e, 0x79, 0xa7);
    case Category::Memory:
      return QColor(0x8c, 0xa2, 0x52);
    case Category::Other:
      return QColor(0xba, 0xb0, 0xac);
    case Category::Communication:
      switch (tl::keyOp(key)) {
        case CollectiveOp::AllReduce:
          return QColor(0xf2, 0x8e, 0x2b);
        case CollectiveOp::AllGather:
          return QColor(0x59, 0xa1, 0x4f);
        case CollectiveOp::ReduceScatter:
          return QColor(0xb0, 0x7a, 0xa1);
        case CollectiveOp::Broadcast:
          return QColor(0x76, 0xb7, 0xb2);
        case CollectiveOp::AllToAll:
          return QColor(0x9c, 0x75, 0x5f);
        case CollectiveOp::Send:
        case CollectiveOp::Recv:
        case CollectiveOp::SendRecv:
          return QColor(0xff, 0x9d, 0xa7);
        case CollectiveOp::Barrier:
          return QColor(0x79, 0x70, 0x6e);
        default:
          return QColor(0xed, 0xc9, 0x48);
      }
  }
  return QColor(0xba, 0xb0, 0xac);
}

QString timelineKeyLabel(std::uint8_t key) {
  if (key == tl::kMixedKey) return QStringLiteral("mixed");
  switch (tl::keyCategory(key)) {
    case Category::Computation:
      return QStringLiteral("computation");
    case Category::Memory:
      return QStringLiteral("memory");
    case Category::Other:
      return QStringLiteral("other");
    case Category::Communication: {
      const CollectiveOp op = tl::keyOp(key);
      if (op == CollectiveOp::None) return QStringLiteral("communication");
      if (op == CollectiveOp::Send || op == CollectiveOp::Recv || op == CollectiveOp::SendRecv)
        return QStringLiteral("send/recv");
      return QString::fromUtf8(core::toString(op).data(), static_cast<qsizetype>(core::toString(op).size()));
    }
  }
  return QStringLiteral("other");
}

std::vector<LegendEntry> timelineLegend(std::uint64_t keyMask) {
  std::vector<std::uint8_t> keys;
  for (std::uint32_t k = 0; k < tl::kKeyCount; ++k)
    if (keyMask & (std::uint64_t{1} << k)) keys.push_back(static_cast<std::uint8_t>(k));
  // Categories in a fixed order (computation, communication, memory, other), then the operation.
  auto rank = [](std::uint8_t k) {
    switch (tl::keyCategory(k)) {
      case Category::Computation:
        return 0;
      case Category::Communication:
        return 1;
      case Category::Memory:
        return 2;
      case Category::Other:
        return 3;
    }
    return 4;
  };
  std::stable_sort(keys.begin(), keys.end(), [&](std::uint8_t a, std::uint8_t b) {
    return rank(a) != rank(b) ? rank(a) < rank(b) : tl::keyOp(a) < tl::keyOp(b);
  });
  std::vector<LegendEntry> out;
  for (std::uint8_t k : keys) {
    const QColor c = timelineColor(k);
    if (std::any_of(out.begin(), out.end(), [&](const LegendEntry& e) { return e.color == c; })) continue;
    out.push_back({timelineKeyLabel(k), c});
  }
  return out;
}

namespace timeline_palette {
QColor background() { return QColor(0xff, 0xff, 0xff); }
QColor labelBackground() { return QColor(0xf4, 0xf4, 0xf4); }
QColor headerBackground() { return QColor(0xe4, 0xe8, 0xee); }
QColor exposed() { return QColor(0xd6, 0x27, 0x28); }
QColor selection() { return QColor(0x1f, 0x1f, 0x1f); }
QColor range() { return QColor(0x4e, 0x79, 0xa7, 40); }
QColor grid() { return QColor(0xe8, 0xe8, 0xe8); }
QColor stepLine() { return QColor(0xc8, 0xc8, 0xd8); }
QColor summaryCompute() { return timelineColor(tl::makeKey(Category::Computation, CollectiveOp::None)); }
QColor summaryOther() { return QColor(0xa0, 0xa0, 0xa0); }
QColor summaryIdle() { return QColor(0xf3, 0xf5, 0xf8); }
}  // namespace timeline_palette

}  // namespace shardscope::ui
