#!/usr/bin/env bash
# Compiles (syntax and types, no code generation) the CUDA and NCCL branches of the runtime —
# profiler/runtime/{comm,trainer,engine}.cpp with SHARDSCOPE_WITH_CUDA and SHARDSCOPE_WITH_NCCL — on a
# machine without a CUDA LibTorch: against this machine's LibTorch headers (Debian's 1.13 ships
# c10/cuda and ProcessGroupNCCL.hpp) and the CUDA toolkit's headers. Catches API mistakes in code
# that only a GPU build would otherwise compile. Exit 77 (skipped) when the headers are not there.
#   packaging/check-cuda-paths.sh BUILD_DIR     (a Ninja build dir where shardscope-worker is configured)
set -euo pipefail
build=${1:?usage: check-cuda-paths.sh BUILD_DIR}
[ -f "$build/build.ninja" ] || { echo "check-cuda-paths: $build is not a Ninja build: skipped"; exit 77; }
cmd_of() { ninja -C "$build" -t commands shardscope-worker | grep "runtime/$1.cpp" | head -1; }
[ -n "$(cmd_of comm)" ] || { echo "check-cuda-paths: shardscope-worker is not configured in $build (no LibTorch): skipped"; exit 77; }
inc=$( { echo "$(cmd_of comm)" | grep -o -- '-isystem [^ ]*' | awk '{print $2}'; echo /usr/include; echo /usr/local/include; } |
      while read -r d; do if [ -f "$d/c10/cuda/CUDAStream.h" ]; then echo "$d"; fi; done | head -1)
[ -n "$inc" ] || { echo "check-cuda-paths: LibTorch's c10/cuda headers are not installed: skipped"; exit 77; }
cuda_inc=""
for d in /usr/local/cuda/include /usr/include; do [ -f "$d/cuda_runtime_api.h" ] && { cuda_inc=$d; break; }; done
[ -n "$cuda_inc" ] || { echo "check-cuda-paths: CUDA toolkit headers not found: skipped"; exit 77; }
stub=$(mktemp -d)
trap 'rm -rf "$stub"' EXIT
# A CPU LibTorch install lacks this generated header; it only defines how c10_cuda was built.
if [ ! -f "$inc/c10/cuda/impl/cuda_cmake_macros.h" ]; then
  mkdir -p "$stub/c10/cuda/impl"
  printf '#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n' > "$stub/c10/cuda/impl/cuda_cmake_macros.h"
fi
status=0
for f in comm trainer engine; do
  cmd=$(cmd_of "$f" | sed -e 's|^[^ ]*ccache ||' -e 's| -o [^ ]*| |' -e 's| -c | -fsyntax-only |' \
        -e 's| -include [^ ]*cmake_pch.hxx||g' -e 's| -Winvalid-pch||' -e 's| -MD -MT [^ ]* -MF [^ ]*||')
  if (cd "$build" && eval "$cmd -I$stub -isystem $cuda_inc -DSHARDSCOPE_WITH_CUDA=1 -DSHARDSCOPE_WITH_NCCL=1 -DUSE_C10D_NCCL=1 -Werror"); then
    echo "check-cuda-paths: profiler/runtime/$f.cpp: ok"
  else
    echo "check-cuda-paths: profiler/runtime/$f.cpp: FAILED" >&2
    status=1
  fi
done
exit $status
