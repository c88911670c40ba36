#pragma once
// The timeline's colours (docs/TIMELINE.md): one colour per event category, communication split by
// collective operation, a neutral grey for folded blocks that mix keys, and the few colours of the
// widget's chrome. A qualitative palette (Tableau 10) so neighbouring categories stay distinct; the
// same key always gets the same colour, whatever the zoom or the rank.
#include <QColor>

#include <cstdint>

namespace shardscope::ui {

// Colour of a draw-list key (core::timeline::makeKey: category + collective op, or kMixedKey).
QColor timelineColor(std::uint8_t key);

namespace timeline_palette {
QColor background();        // empty time
QColor labelBackground();   // the lane labels' column
QColor headerBackground();  // rank header rows
QColor exposed();           // exposed communication (edge on the event, strip under the rank header)
QColor selection();         // outline of the selected event
QColor range();             // the selected range (translucent)
QColor grid();              // time ticks
QColor stepLine();          // step boundaries
}  // namespace timeline_palette

}  // namespace shardscope::ui
