#!/usr/bin/env bash
# Checks the relocatable tarball as a cluster user would use it (CI runs it after the tests, as root):
# builds it from the existing build directory (nothing is rebuilt when it is up to date), unpacks it
# as an unprivileged user (a temporary account, removed afterwards) in that user's home directory,
# and runs from there: --version of the CLI and the worker, a tiny training run (tiny model, 2 ranks,
# 2 steps, CPU), a PDF report (Qt from the tree's lib/), and --version again after moving the tree.
#   packaging/check-tarball.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
  echo "check-tarball: needs root (it creates a temporary unprivileged user)" >&2
  exit 1
fi
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.1f", b - a}'; }
USER_NAME=sstarcheck$$
WORK=$(mktemp -d)
created=0
cleanup() {
  if [ "$created" = 1 ]; then userdel -r "$USER_NAME" >/dev/null 2>&1 || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

t0=$(now)
SHARDSCOPE_XZ_LEVEL=${SHARDSCOPE_XZ_LEVEL:-1} packaging/build-tarball.sh -o "$WORK"  # a check: compress fast
t1=$(now)
TARBALL=$(ls "$WORK"/shardscope-*.tar.xz)
chmod 755 "$WORK"
chmod 644 "$TARBALL"
useradd --create-home --shell /bin/bash "$USER_NAME"
created=1
HOME_DIR=$(getent passwd "$USER_NAME" | cut -d: -f6)
# As the user, in a clean environment (no LD_LIBRARY_PATH, no build tree on PATH).
as_user() { runuser -u "$USER_NAME" -- env -i HOME="$HOME_DIR" PATH=/usr/bin:/bin LANG=C.UTF-8 bash -euo pipefail -c "$1"; }
as_user "cd ~ && tar -xJf '$TARBALL'"
TREE=$(basename "$TARBALL" .tar.xz)
as_user "cd ~ && test ! -w /usr/bin && $TREE/bin/shardscope-cli --version"
if [ -x "$HOME_DIR/$TREE/bin/shardscope-worker" ]; then
  as_user "cd ~ && $TREE/bin/shardscope-worker --version >/dev/null"
  t2=$(now)
  as_user "cd ~ && $TREE/bin/shardscope-cli run --db tiny.db --model tiny --world-size 2 --steps 2 --device cpu >run.log 2>&1" ||
    { cat "$HOME_DIR/run.log" >&2; echo "check-tarball: the tiny run failed" >&2; exit 1; }
  t3=$(now)
  run_s=$(secs "$t2" "$t3")
  as_user "cd ~ && $TREE/bin/shardscope-cli info --db tiny.db --json | grep -q '\"status\": *\"completed\"'"
  if grep -q "^libQt6Gui" <(ls "$HOME_DIR/$TREE/lib"); then
    as_user "cd ~ && $TREE/bin/shardscope-cli report --db tiny.db --format pdf -o tiny.pdf >/dev/null 2>&1 && head -c 5 tiny.pdf | grep -q '%PDF-'" ||
      { echo "check-tarball: the PDF report from the tree failed" >&2; exit 1; }
  fi
else
  run_s="-"
  echo "check-tarball: no shardscope-worker in the tree (no LibTorch): the tiny run is skipped" >&2
fi
# Relocatable: the tree works after it is moved.
as_user "cd ~ && mv $TREE moved && moved/bin/shardscope-cli --version >/dev/null"
printf 'check-tarball: ok: tarball %s KiB built in %s s; as user %s from ~: --version, tiny run (2 ranks, 2 steps, CPU) %s s\n' \
  "$(($(stat -c %s "$TARBALL") / 1024))" "$(secs "$t0" "$t1")" "$USER_NAME" "$run_s"
