#include "core/report/palette.h"

#include <array>
#include <cstdio>

namespace shardscope::core::palette {
namespace {

// Okabe & Ito (2008), "Color Universal Design": blue, orange, bluish green, reddish purple, sky blue,
// vermillion, yellow (darkened from #F0E442, which does not show on white), black; then grey.
constexpr std::array<Rgb, 9> kSeries = {0x0072B2, 0xE69F00, 0x009E73, 0xCC79A7, 0x56B4E9, 0xD55E00, 0x8C6D00, 0x000000, 0x7F7F7F};

}  // namespace

Rgb series(std::size_t index) { return kSeries[index % kSeries.size()]; }

std::size_t seriesCount() { return kSeries.size(); }

Rgb stepPart(StepPart part) {
  switch (part) {
    case StepPart::Compute:
      return 0x0072B2;  // Okabe-Ito blue
    case StepPart::ExposedCommunication:
      return 0xD55E00;  // Okabe-Ito vermillion: the part to look at
    case StepPart::OtherDeviceWork:
      return 0x999999;
    case StepPart::Idle:
      return 0xDDDDDD;
  }
  return 0x999999;
}

Rgb memoryCategory(MemoryCategory c) {
  // In the categories' order: parameters, gathered parameters, gradients, optimizer state,
  // activations, communication buffers, other.
  static constexpr Rgb kColors[kMemoryCategoryCount] = {0x4e79a7, 0x9c755f, 0xf28e2b, 0x59a14f, 0xe15759, 0x76b7b2, 0xbab0ac};
  return kColors[static_cast<std::size_t>(c)];
}

const char* stepPartName(StepPart part) {
  switch (part) {
    case StepPart::Compute:
      return "compute";
    case StepPart::ExposedCommunication:
      return "exposed communication";
    case StepPart::OtherDeviceWork:
      return "other device work";
    case StepPart::Idle:
      return "idle";
  }
  return "";
}

std::string hex(Rgb rgb) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "#%06x", static_cast<unsigned>(rgb & 0xFFFFFFu));
  return buf;
}

}  // namespace shardscope::core::palette
