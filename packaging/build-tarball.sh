#!/usr/bin/env bash
# Writes a relocatable tree of the command-line tools for cluster nodes, where a user has no root:
# DIR/shardscope-VERSION-linux-ARCH.tar.xz (default DIR: dist/). Unpack it anywhere and run
# bin/shardscope-cli; nothing is installed and nothing outside the tree is written.
#   packaging/build-tarball.sh [-o DIR]
# Builds into ${SHARDSCOPE_BUILD_DIR:-build} first, as packaging/build-deb.sh (an up-to-date build
# directory is reused: nothing is rebuilt). SHARDSCOPE_XZ_LEVEL: xz's preset (default 6).
#
# The tree:
#   bin/shardscope-cli, bin/shardscope-worker   RPATH $ORIGIN/../lib (DT_RPATH: it also serves the
#                                               libraries they load), bin/qt.conf (Qt finds lib/qt6)
#   lib/         the shared libraries they need that a cluster node may lack: SQLite, LZ4, ISA-L,
#                zlib, CUPTI (with a CUDA build), Qt Core/Gui and what they load (the CLI writes PDF
#                reports with Qt Gui), and lib/qt6/plugins/platforms/libqoffscreen.so
#   share/       man pages, bash completion, the licences, README.cluster
# Not in it, so the node must provide them: glibc and the GCC 12 C++ runtime (libstdc++, libgcc_s,
# libgomp; the tree says which glibc it needs in share/doc/shardscope/README.cluster) and LibTorch
# with its own libraries (the worker's libtorch*.so and libc10.so as at build time: the same LibTorch,
# e.g. Debian's libtorch1.13, or build the tree on the cluster against its own LibTorch).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=dist
usage() { echo "usage: packaging/build-tarball.sh [-o DIR]" >&2; }
while getopts "o:h" opt; do
  case $opt in
    o) OUT=$OPTARG ;;
    h) usage; exit 0 ;;
    *) usage; exit 2 ;;
  esac
done
command -v patchelf >/dev/null || { echo "build-tarball: patchelf not found (packaging/install-deps.sh installs it)" >&2; exit 1; }
umask 022
start=$(date +%s.%N)

# shellcheck source=packaging/build-programs.sh
source packaging/build-programs.sh  # the working directory is the source tree (cd above)
build_programs shardscope-worker
BINS=("$BUILD_DIR/app/shardscope-cli")
if [ -x "$BUILD_DIR/profiler/shardscope-worker" ]; then
  BINS+=("$BUILD_DIR/profiler/shardscope-worker")
else
  echo "build-tarball: warning: no shardscope-worker (LibTorch not found): the tree cannot run training" >&2
fi

VERSION=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$BUILD_DIR/CMakeCache.txt")
NAME=shardscope-$VERSION-linux-$(uname -m)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
T=$WORK/$NAME
mkdir -p "$T/bin" "$T/lib" "$T/share/doc/shardscope" "$T/share/man/man1" "$T/share/bash-completion/completions"
for b in "${BINS[@]}"; do
  install -m 755 "$b" "$T/bin/"
  strip --remove-section=.comment --remove-section=.note --strip-unneeded "$T/bin/$(basename "$b")"
done

# Qt's offscreen platform plugin: the CLI renders PDF reports with it (no display).
PLUGIN=""
if patchelf --print-needed "$T/bin/shardscope-cli" | grep -q '^libQt6Gui'; then
  QT_PLUGINS=$(qtpaths6 --query QT_INSTALL_PLUGINS 2>/dev/null || echo "/usr/lib/$(gcc -print-multiarch)/qt6/plugins")
  PLUGIN=$QT_PLUGINS/platforms/libqoffscreen.so
  install -D -m 644 "$PLUGIN" "$T/lib/qt6/plugins/platforms/libqoffscreen.so"
  printf '[Paths]\nPrefix = ..\nPlugins = lib/qt6/plugins\n' >"$T/bin/qt.conf"
fi

# The libraries: everything the executables (and the plugin) load, but glibc, the GCC runtime and
# LibTorch with what only LibTorch loads (the node provides those).
is_system() {
  case $1 in
    ld-linux*.so* | libc.so* | libm.so* | libdl.so* | libpthread.so* | librt.so* | libresolv.so* | libutil.so* | \
      libanl.so* | libnsl.so* | libstdc++.so* | libgcc_s.so* | libgomp.so* | linux-vdso.so*) return 0 ;;
  esac
  return 1
}
is_torch() { case $1 in libtorch*.so* | libc10*.so* | libshm.so*) return 0 ;; esac; return 1; }
# Roots: the CLI's and the plugin's closures, and the worker's direct libraries that are not LibTorch.
roots=()
for b in "${BINS[@]}"; do
  for n in $(patchelf --print-needed "$b"); do is_torch "$n" || roots+=("$n"); done
done
declare -A WANT=()
resolve() { ldd "$1" | awk -v n="$2" '$1 == n && $3 ~ /^\// {print $3}'; }
for b in "${BINS[@]}" ${PLUGIN:+"$PLUGIN"}; do
  while read -r soname path; do
    [ -n "$path" ] || continue
    is_system "$soname" && continue
    is_torch "$soname" && continue
    WANT[$soname]=$path
  done < <(ldd "$b" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}')
done
# What the worker reaches only through LibTorch is the node's (its LibTorch brings it).
if [ "${#BINS[@]}" -gt 1 ]; then
  declare -A KEEP=()
  for b in "$BUILD_DIR/app/shardscope-cli" ${PLUGIN:+"$PLUGIN"}; do
    while read -r soname; do KEEP[$soname]=1; done < <(ldd "$b" | awk '$2 == "=>" {print $1}')
  done
  for n in "${roots[@]}"; do
    KEEP[$n]=1
    p=$(resolve "${BINS[1]}" "$n")
    [ -n "$p" ] && while read -r soname; do KEEP[$soname]=1; done < <(ldd "$p" | awk '$2 == "=>" {print $1}')
  done
  for soname in "${!WANT[@]}"; do [ -n "${KEEP[$soname]:-}" ] || unset "WANT[$soname]"; done
fi
for soname in "${!WANT[@]}"; do install -m 644 "$(readlink -f "${WANT[$soname]}")" "$T/lib/$soname"; done
# shellcheck disable=SC2016 # $ORIGIN is for the dynamic loader
for b in "$T"/bin/shardscope-*; do patchelf --force-rpath --set-rpath '$ORIGIN/../lib' "$b"; done
# shellcheck disable=SC2016
[ -n "$PLUGIN" ] && patchelf --force-rpath --set-rpath '$ORIGIN/../../..' "$T/lib/qt6/plugins/platforms/libqoffscreen.so"

# Documentation: man pages (as the .deb's, from --help), completion, licences, what the node needs.
for b in "${BINS[@]}"; do
  n=$(basename "$b")
  help2man -N --version-string="$VERSION" -n "Shardscope $n" -o "$T/share/man/man1/$n.1" "$b" 2>/dev/null || true
done
install -m 644 resources/shardscope-cli.bash-completion "$T/share/bash-completion/completions/shardscope-cli"
install -m 644 LICENSE "$T/share/doc/shardscope/LICENSE"
cp -r packaging/licenses "$T/share/doc/shardscope/licenses"
GLIBC=$(objdump -T "$T"/bin/shardscope-* "$T"/lib/*.so* 2>/dev/null | grep -o 'GLIBC_[0-9][0-9.]*' | sort -uV | tail -n 1)
TORCH_LIBS=$(if [ "${#BINS[@]}" -gt 1 ]; then patchelf --print-needed "${BINS[1]}" | grep -E '^lib(torch|c10)' | tr '\n' ' '; fi)
cat >"$T/share/doc/shardscope/README.cluster" <<EOF
Shardscope $VERSION: the command-line tools, relocatable (unpack anywhere, no root).

  bin/shardscope-cli --version
  bin/shardscope-cli run --db runs.db --model tiny --world-size 2 --steps 2 --device cpu
  source share/bash-completion/completions/shardscope-cli   # completion (bash)
  man share/man/man1/shardscope-cli.1

The node must provide: glibc >= ${GLIBC#GLIBC_}, the GCC 12 C++ runtime (libstdc++.so.6, libgcc_s.so.1,
libgomp.so.1)${TORCH_LIBS:+, and for shardscope-worker the LibTorch it was built with: ${TORCH_LIBS% }}
(on the library path: the system's, or LD_LIBRARY_PATH). Everything else is in lib/.
EOF

mkdir -p "$OUT"
TARBALL=$(cd "$OUT" && pwd)/$NAME.tar.xz
tar -C "$WORK" --owner=0 --group=0 --numeric-owner --sort=name -cf - "$NAME" | xz "-${SHARDSCOPE_XZ_LEVEL:-6}" -T"${SHARDSCOPE_JOBS:-0}" >"$TARBALL"
end=$(date +%s.%N)
printf 'build-tarball: %s (%s KiB, %s files, unpacked %s KiB; needs glibc >= %s) in %s s\n' "$TARBALL" \
  "$(($(stat -c %s "$TARBALL") / 1024))" "$(find "$T" -type f | wc -l)" "$(du -sk "$T" | cut -f1)" "${GLIBC#GLIBC_}" \
  "$(awk -v a="$start" -v b="$end" 'BEGIN {printf "%.1f", b - a}')"
