#!/usr/bin/env bash
# Compiles (syntax and types, no code generation) every source of the profiler layer and the worker
# against LibTorch 2.x headers — the torch wheel's, what GPU users build with — with the CUDA, NCCL
# and CUPTI paths switched on, on a machine that has only Debian's LibTorch 1.13. Catches LibTorch
# 2.x API breaks (an Allocator signature, a c10d type) before a GPU user meets them.
#   packaging/check-libtorch2.sh BUILD_DIR [HEADERS_TARBALL]
# BUILD_DIR is a Ninja build where shardscope-worker is configured; the tarball defaults to
# $SHARDSCOPE_LIBTORCH2_HEADERS or ../shared/third_party/libtorch-2.11.0-cu130-headers.tar.xz (its
# include/ and share/cmake/ folders; see that folder's README). Exit 77 (skipped) when the tarball,
# the worker target or the CUDA headers are missing; 1 when a source does not compile.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:?usage: check-libtorch2.sh BUILD_DIR [HEADERS_TARBALL]}
tarball=${2:-${SHARDSCOPE_LIBTORCH2_HEADERS:-$here/../shared/third_party/libtorch-2.11.0-cu130-headers.tar.xz}}
skip() { echo "check-libtorch2: $*: skipped"; exit 77; }
[ -f "$tarball" ] || skip "no LibTorch 2.x headers at $tarball (set SHARDSCOPE_LIBTORCH2_HEADERS)"
[ -f "$build/build.ninja" ] || skip "$build is not a Ninja build"
build=$(cd "$build" && pwd)
cuda_inc=""
for d in /usr/local/cuda/include /usr/include; do [ -f "$d/cuda_runtime_api.h" ] && { cuda_inc=$d; break; }; done
[ -n "$cuda_inc" ] || skip "CUDA toolkit headers not found"
[ -f "$cuda_inc/cupti.h" ] || skip "CUPTI headers not found in $cuda_inc"

# The headers, unpacked once per build directory (and again when the tarball changes).
dest="$build/libtorch2-headers"
stamp="$dest/.from"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$(stat -c '%n %s %Y' "$tarball")" ]; then
  rm -rf "$dest" && mkdir -p "$dest"
  tar -xJf "$tarball" -C "$dest"
  stat -c '%n %s %Y' "$tarball" > "$stamp"
fi
lt="$dest/include"
[ -f "$lt/torch/csrc/api/include/torch/version.h" ] || { echo "check-libtorch2: $tarball has no include/torch: not a LibTorch header tree" >&2; exit 1; }
version=$(sed -n 's/^#define TORCH_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\).*/\2/p' "$lt/torch/headeronly/version.h" "$lt/torch/csrc/api/include/torch/version.h" 2>/dev/null | head -3 | paste -sd.)

# Every profiler/ source and the worker's main, with the flags this build gives them, minus this
# machine's LibTorch and the precompiled header, plus the 2.x tree and the GPU switches.
cmds=$(ninja -C "$build" -t commands shardscope-worker | grep -E -- ' -c [^ ]*/(profiler/(runtime|capture|gpu)/[a-z_]+|app/worker/main)\.cpp' || true)
[ -n "$cmds" ] || skip "shardscope-worker is not configured in $build (no LibTorch)"
defs="-DUSE_DISTRIBUTED -DUSE_C10D_GLOO -DUSE_C10D_NCCL=1 -DSHARDSCOPE_WITH_CUDA=1 -DSHARDSCOPE_WITH_NCCL=1 -DSHARDSCOPE_WITH_CUPTI=1"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
i=0
while IFS= read -r cmd; do
  src=$(echo "$cmd" | grep -o -- ' -c [^ ]*' | awk '{print $2}')
  cmd=$(echo "$cmd" | sed -e 's|^[^ ]*ccache ||' -e 's| -o [^ ]*| |' -e 's| -c | -fsyntax-only |' \
        -e 's| -include [^ ]*cmake_pch[^ ]*||g' -e 's| -Winvalid-pch||' -e 's| -MD -MT [^ ]* -MF [^ ]*||' \
        -e 's| -isystem [^ ]*torch[^ ]*||g' -e 's| -I[^ ]*torch[^ ]*||g')
  printf '%s\n' "cd '$build' && $cmd -isystem '$lt' -isystem '$lt/torch/csrc/api/include' -isystem '$cuda_inc' $defs -Wno-error" > "$work/$i.sh"
  echo "${src#"$here"/}" > "$work/$i.name"
  i=$((i + 1))
done <<< "$cmds"

echo "check-libtorch2: $i sources against LibTorch $version headers ($tarball), CUDA/NCCL/CUPTI on"
jobs=$(nproc 2>/dev/null || echo 2)
ls "$work"/*.sh | xargs -P "$jobs" -I{} sh -c 'n=$(cat "${1%.sh}.name"); if sh "$1" > "${1%.sh}.log" 2>&1; then echo "check-libtorch2: $n: ok"; else echo "check-libtorch2: $n: FAILED"; touch "${1%.sh}.failed"; fi' _ {}
status=0
for f in "$work"/*.failed; do
  [ -e "$f" ] || continue
  status=1
  echo "---- $(cat "${f%.failed}.name")" >&2
  grep -E 'error|note: +candidate' "${f%.failed}.log" | head -30 >&2
done
exit $status
