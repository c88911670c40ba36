# shellcheck shell=bash
# Sourced by build-deb.sh and build-tarball.sh: the programs both package, built the same way.
#
# build_programs [shardscope] [shardscope-worker]: configures $SHARDSCOPE_BUILD_DIR (default build)
# when it has no CMake cache yet (RelWithDebInfo, no tests, no benchmarks), then builds shardscope-cli
# and each named program the build tree has a target for (shardscope needs Qt, shardscope-worker
# LibTorch). Sets BUILD_DIR to the build tree's absolute path.
build_programs() {
  BUILD_DIR=${SHARDSCOPE_BUILD_DIR:-build}
  if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
    local gen=()
    command -v ninja >/dev/null && gen=(-G Ninja)
    cmake -S . -B "$BUILD_DIR" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSHARDSCOPE_BUILD_TESTS=OFF \
      -DSHARDSCOPE_BUILD_BENCHMARKS=OFF
  fi
  BUILD_DIR=$(cd "$BUILD_DIR" && pwd)
  local targets=(--target shardscope-cli) t dir
  for t in "$@"; do
    case $t in
      shardscope) dir=app ;;
      shardscope-worker) dir=profiler ;;
      *) echo "build_programs: unknown program $t" >&2; return 2 ;;
    esac
    [ -d "$BUILD_DIR/$dir/CMakeFiles/$t.dir" ] && targets+=(--target "$t")
  done
  cmake --build "$BUILD_DIR" "${targets[@]}" --parallel "${SHARDSCOPE_JOBS:-$(nproc)}" | grep -v '^ninja: no work to do' || true
}
