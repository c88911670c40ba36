#pragma once
// The timeline's colours (docs/TIMELINE.md): one colour per event category, communication split by
// collective operation (folded blocks take their dominant key's), and the few colours of the widget's
// chrome and of the summary tracks. A qualitative palette (Tableau 10) so neighbouring categories stay distinct; the
// same key always gets the same colour, whatever the zoom or the rank.
#include <QColor>
#include <QString>

#include <cstdint>
#include <vector>

namespace shardscope::ui {

// Colour of a draw-list key (core::timeline::makeKey: category + collective op, or kMixedKey).
QColor timelineColor(std::uint8_t key);
// What a key is, in words: "computation", "memory", "other", "communication" or the collective
// operation ("all_gather", ...).
QString timelineKeyLabel(std::uint8_t key);

// The legend of a run: one entry per colour its keys use (bit k of keyMask: makeKey value k;
// TimelineIndex::keyMask), categories first, then the collective operations; keys sharing a colour
// (send and recv) share an entry.
struct LegendEntry {
  QString label;
  QColor color;
};
std::vector<LegendEntry> timelineLegend(std::uint64_t keyMask);

namespace timeline_palette {
QColor background();        // empty time
QColor labelBackground();   // the lane labels' column
QColor headerBackground();  // rank header rows
QColor exposed();           // exposed communication (edge on the event, strip under the rank header)
QColor selection();         // outline of the selected event
QColor range();             // the selected range (translucent)
QColor grid();              // time ticks
QColor stepLine();          // step boundaries
// A collapsed rank's summary track.
QColor summaryCompute();
QColor summaryOther();
QColor summaryIdle();
}  // namespace timeline_palette

}  // namespace shardscope::ui
