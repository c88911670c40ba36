#!/usr/bin/env bash
# Checks the Debian package end to end (CI runs it after the tests; root, e.g. a fresh Debian 12):
# builds it from the existing build directory (${SHARDSCOPE_BUILD_DIR:-build}: nothing is rebuilt
# when it is up to date), fails on any lintian error, installs it with dpkg -i, runs the installed
# programs from /usr/bin (--version, and a tiny training run: tiny model, 2 ranks, 2 steps, CPU),
# validates the installed desktop entry and AppStream metainfo, and removes the package.
#   packaging/check-deb.sh
# Refuses to run when a shardscope package is already installed (it would remove it).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
  echo "check-deb: needs root (dpkg -i / dpkg -r)" >&2
  exit 1
fi
if dpkg-query -W -f='${Status}' shardscope 2>/dev/null | grep -q "install ok installed"; then
  echo "check-deb: a shardscope package is installed already; remove it first (dpkg -r shardscope)" >&2
  exit 1
fi
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.1f", b - a}'; }
WORK=$(mktemp -d)
installed=0
cleanup() {
  if [ "$installed" = 1 ]; then dpkg -r shardscope >/dev/null 2>&1 || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

t0=$(now)
packaging/build-deb.sh -o "$WORK"
t1=$(now)
DEB=$(ls "$WORK"/shardscope_*.deb)

# Lintian: no error (warnings are printed; packaging/build-deb.sh documents the ones it leaves).
if command -v lintian >/dev/null; then
  lint_rc=0
  lintian --fail-on error "$DEB" >"$WORK/lintian.log" 2>&1 || lint_rc=$?
  grep -v "running with root privileges" "$WORK/lintian.log" || true
  [ "$lint_rc" = 0 ] || { echo "check-deb: lintian reports errors" >&2; exit 1; }
else
  echo "check-deb: lintian not found (packaging/install-deps.sh installs it)" >&2
  exit 1
fi

t2=$(now)
dpkg -i "$DEB" >/dev/null
installed=1
t3=$(now)
VERSION=$(dpkg-query -W -f='${Version}' shardscope)
/usr/bin/shardscope-cli --version | grep -qx "shardscope-cli ${VERSION%-*}"
[ -x /usr/bin/shardscope ] && /usr/bin/shardscope --version | grep -q "${VERSION%-*}"
desktop-file-validate /usr/share/applications/org.shardscope.Shardscope.desktop
appstreamcli validate --no-net /usr/share/metainfo/org.shardscope.Shardscope.metainfo.xml >/dev/null
test -f /usr/share/icons/hicolor/256x256/apps/shardscope.png
test -f /usr/share/man/man1/shardscope-cli.1.gz
bash -c 'source /usr/share/bash-completion/completions/shardscope-cli && complete -p shardscope-cli' >/dev/null
run_s="-"
if [ -x /usr/bin/shardscope-worker ]; then
  /usr/bin/shardscope-worker --version | grep -q "shardscope-worker ${VERSION%-*}"
  t4=$(now)
  (cd "$WORK" && /usr/bin/shardscope-cli run --db tiny.db --model tiny --world-size 2 --steps 2 --device cpu >run.log 2>&1) ||
    { cat "$WORK/run.log" >&2; echo "check-deb: the tiny run from /usr/bin failed" >&2; exit 1; }
  t5=$(now)
  run_s=$(secs "$t4" "$t5")
  /usr/bin/shardscope-cli info --db "$WORK/tiny.db" --json | grep -q '"status": *"completed"' ||
    { /usr/bin/shardscope-cli info --db "$WORK/tiny.db" >&2; echo "check-deb: the tiny run is not completed" >&2; exit 1; }
else
  echo "check-deb: no shardscope-worker in the package (no LibTorch): the tiny run is skipped" >&2
fi
dpkg -r shardscope >/dev/null
installed=0
if [ -e /usr/bin/shardscope-cli ]; then
  echo "check-deb: /usr/bin/shardscope-cli is still there after dpkg -r" >&2
  exit 1
fi
printf 'check-deb: ok: package %s KiB built in %s s, installed in %s s, tiny run (2 ranks, 2 steps, CPU) %s s\n' \
  "$(($(stat -c %s "$DEB") / 1024))" "$(secs "$t0" "$t1")" "$(secs "$t2" "$t3")" "$run_s"
