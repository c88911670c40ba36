#pragma once
// The one palette of Shardscope: the app's charts, timeline and tables (ui/charts/chart_style wraps it
// as QColor) and the reports (SVG in HTML, the PDF painter) read their colours here, so a run, a rank
// or a step part has the same colour on every surface. Series colours follow the Okabe-Ito palette,
// readable in print and for the common colour-vision deficiencies; the yellow is darkened so that it
// shows on white.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/model/memory_category.h"

namespace shardscope::core::palette {

// 0xRRGGBB.
using Rgb = std::uint32_t;

// Colour of the i-th series (runs by their index in a comparison, ranks by their index), cycling.
Rgb series(std::size_t index);
std::size_t seriesCount();

// Bars of one figure per run (the app's bar charts, the report's throughput chart): an ordinary bar
// and the best run's bar; deltas in the good and the bad direction; secondary text.
inline constexpr Rgb kBar = 0x9fb4cc;
inline constexpr Rgb kBestBar = 0x2e7d32;
inline constexpr Rgb kBetter = 0x1a7f37;
inline constexpr Rgb kWorse = 0xc62828;
inline constexpr Rgb kMutedText = 0x6a737d;

// The four parts of a step (core::StepMeans, the step-time breakdown charts): compute, exposed
// communication, other device work, idle. They add up to the mean step.
enum class StepPart { Compute, ExposedCommunication, OtherDeviceWork, Idle };
Rgb stepPart(StepPart part);
// Their names as the app and the reports show them.
const char* stepPartName(StepPart part);

// The colour of a memory category (core/model/memory_category.h: the breakdown at a peak).
Rgb memoryCategory(MemoryCategory c);

// "#rrggbb" (lower case).
std::string hex(Rgb rgb);

}  // namespace shardscope::core::palette
