#!/usr/bin/env bash
# Renders the committed PNG icons from their SVG sources in resources/icons (rsvg-convert, Debian:
# librsvg2-bin). Run it after changing an SVG and commit the PNGs: the build does not need librsvg.
#   hicolor/NxN/apps/shardscope.png   the application icon (shardscope.svg), the hicolor sizes
#   actions/NAME.png, NAME-32.png     page and toolbar icons, 16 and 32 px (adwaita/*-symbolic.svg:
#                                     GNOME Adwaita, LGPL-3, packaging/licenses/Adwaita-icons.md)
set -euo pipefail
cd "$(dirname "$0")/../resources/icons"
command -v rsvg-convert >/dev/null || { echo "render-icons: rsvg-convert not found (apt install librsvg2-bin)" >&2; exit 1; }
for s in 16 22 24 32 48 64 128 256; do
  mkdir -p "hicolor/${s}x${s}/apps"
  rsvg-convert -w "$s" -h "$s" shardscope.svg -o "hicolor/${s}x${s}/apps/shardscope.png"
done
mkdir -p actions
for f in adwaita/*-symbolic.svg; do
  n=$(basename "$f" -symbolic.svg)
  rsvg-convert -w 16 -h 16 "$f" -o "actions/$n.png"
  rsvg-convert -w 32 -h 32 "$f" -o "actions/$n-32.png"
done
echo "render-icons: $(find hicolor actions -name '*.png' | wc -l) PNGs in resources/icons"
