#include "ui/timeline/timeline_palette.h"

#include "core/timeline/draw_list.h"

namespace shardscope::ui {

namespace tl = core::timeline;
using core::Category;
using core::CollectiveOp;

QColor timelineColor(std::uint8_t key) {
  if (key == tl::kMixedKey) return QColor(0x9d, 0x9d, 0x9d);
  switch (tl::keyCategory(key)) {
    case Category::Computation: return QColor(0x4e, 0x79, 0xa7);
    case Category::Memory: return QColor(0x8c, 0xa2, 0x52);
    case Category::Other: return QColor(0xba, 0xb0, 0xac);
    case Category::Communication:
      switch (tl::keyOp(key)) {
        case CollectiveOp::AllReduce: return QColor(0xf2, 0x8e, 0x2b);
        case CollectiveOp::AllGather: return QColor(0x59, 0xa1, 0x4f);
        case CollectiveOp::ReduceScatter: return QColor(0xb0, 0x7a, 0xa1);
        case CollectiveOp::Broadcast: return QColor(0x76, 0xb7, 0xb2);
        case CollectiveOp::AllToAll: return QColor(0x9c, 0x75, 0x5f);
        case CollectiveOp::Send:
        case CollectiveOp::Recv:
        case CollectiveOp::SendRecv: return QColor(0xff, 0x9d, 0xa7);
        case CollectiveOp::Barrier: return QColor(0x79, 0x70, 0x6e);
        default: return QColor(0xed, 0xc9, 0x48);
      }
  }
  return QColor(0xba, 0xb0, 0xac);
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
}  // namespace timeline_palette

}  // namespace shardscope::ui
