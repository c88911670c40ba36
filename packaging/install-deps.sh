#!/usr/bin/env bash
# Installs every Debian 12 package Shardscope needs to build, test and run.
# Idempotent and non-interactive: packages already present are skipped, apt runs only when needed.
#   packaging/install-deps.sh            # build + test dependencies (core, CLI, GUI)
#   SHARDSCOPE_DEPS_EXTRA="..." packaging/install-deps.sh   # add packages
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git
  libsqlite3-dev sqlite3 zlib1g-dev liblz4-dev libisal-dev
  qt6-base-dev qt6-base-dev-tools libqcustomplot-dev libgl-dev
  clang libclang-rt-14-dev            # libFuzzer harness for the importer
  clang-format                        # the CTest `format` (packaging/format.sh --check)
  clang-tidy                          # the CTest `tidy` (packaging/tidy.sh --check, .clang-tidy)
  xz-utils gzip                       # tests/data: the committed real traces are xz-compressed
  time                                # /usr/bin/time: CPU time in benchmarks/capture_overhead.sh
  libtorch-dev libgloo-dev            # the embedded runtime (LibTorch 1.13 with c10d/Gloo)
  libopenblas0-pthread                # an optimised BLAS for LibTorch (the reference BLAS is ~15x slower)
  poppler-utils                       # pdftoppm: report tests render PDFs
  xauth xvfb                          # optional: real-window screenshots of the GUI
  # packaging/build-deb.sh, build-tarball.sh and their checks (check-deb.sh, check-tarball.sh)
  dpkg-dev help2man patchelf lintian desktop-file-utils appstream qt6-qpa-plugins
)
# shellcheck disable=SC2206
PACKAGES+=(${SHARDSCOPE_DEPS_EXTRA:-})

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
