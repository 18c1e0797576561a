#!/usr/bin/env bash
# Cross-builds tokenmill for aarch64 (Linux, Debian multiarch) and runs its unit tests under
# qemu-aarch64: proof that the project configures, builds and passes its portable (scalar-kernel)
# tests off x86-64, before any NEON kernel exists. Not part of .ci/run (CI time); run it by hand after
# touching the kernel table, cmake/tm_module.cmake, or anything x86-specific.
#
# Usage: scripts/cross-aarch64.sh [build-dir]   (default build-aarch64/; environment: JOBS,
#        TESTS="kernels core ..." to run only those tests/unit folders, SKIP_INSTALL=1,
#        TEST_TIMEOUT=seconds per test binary, default 3600)
#
# 1. Installs (apt-get, with sudo when not root) g++-aarch64-linux-gnu, qemu-user and the arm64
#    multiarch -dev packages of the dependencies (dpkg --add-architecture arm64). Multi-Arch: same
#    packages must have one version on both architectures, so apt may upgrade the host's amd64 copies
#    of the same libraries to the mirror's current point release (zlib1g, libssl3, libbrotli1, krb5).
# 2. Configures with cmake/toolchain-aarch64.cmake and -DTM_BUILD_BENCH=OFF, and builds everything.
# 3. Runs each unit test binary (build-dir/tests/test_NAME, one per tests/unit/NAME) under
#    qemu-aarch64; tests that start the CLI get a wrapper that runs the aarch64 tokenmill under qemu
#    too. Exits non-zero if any binary fails.
#    The binaries run against the arm64 multiarch C library in / (libc6:arm64 comes with the -dev
#    packages): QEMU_LD_PREFIX=/. Not /usr/aarch64-linux-gnu: that tree's dynamic loader is the
#    cross toolchain's older glibc (libc6-arm64-cross 2.36-8 against libc6:arm64 2.36-9+deb12u14 on
#    bookworm), the loader then picks the multiarch libc.so.6, and the mismatched pair hangs in the
#    first pthread_create.
# Not run: the end-to-end suites (tests/e2e, tests/llamacpp: node/npm and llama.cpp's prebuilt x86-64
# binary), and test_bench_serve_real / bench_serve.html_report_chromium (real servers on sockets and
# headless Chromium: load tests whose timing assumptions do not hold under emulation).
#
# Outcome on 2026-12-01 (Debian bookworm host, AMD EPYC, 2 cores, gcc 12.2 cross, qemu 7.2): 16 test
# binaries, 496 tests passed, 1 skipped (the x86 table check), 3 excluded (below); cold build 493 s
# (243 steps, -j2), tests 605 s under qemu. More in bench/KERNELS.md ("aarch64").
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${1:-build-aarch64}"
JOBS="${JOBS:-$(nproc)}"
TEST_TIMEOUT="${TEST_TIMEOUT:-3600}"  # seconds per test binary
TRIPLET=aarch64-linux-gnu
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

# libyaml-cpp-dev is not Multi-Arch: same, so installing its arm64 copy removes the host's, which the
# native build needs (seen 2026-12-04: build/ then failed for lack of libyaml-cpp.so). The host's goes
# back when this script ends, however it ends (the next run swaps the arm64 one in again).
HOST_ARCH=$(dpkg --print-architecture)
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
HOST_YAML=""
if installed "libyaml-cpp-dev:$HOST_ARCH"; then HOST_YAML=1; fi
restore_host_yaml() {
  if [ -n "$HOST_YAML" ] && ! installed "libyaml-cpp-dev:$HOST_ARCH"; then
    echo "cross-aarch64: reinstalling the host's libyaml-cpp-dev:$HOST_ARCH" >&2
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "libyaml-cpp-dev:$HOST_ARCH" >/dev/null ||
      echo "cross-aarch64: could not reinstall libyaml-cpp-dev:$HOST_ARCH; the native build needs it" >&2
  fi
}
trap restore_host_yaml EXIT

if [ -z "${SKIP_INSTALL:-}" ]; then
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then $SUDO dpkg --add-architecture arm64; fi
  # nlohmann-json3-dev and libcli11-dev are architecture-independent (the host's serve); the rest are
  # the arm64 builds of what CMakeLists.txt and src/CMakeLists.txt look for (ICU is optional there).
  PKGS=(g++-aarch64-linux-gnu qemu-user cmake ninja-build pkg-config nlohmann-json3-dev libcli11-dev
        libfmt-dev:arm64 libpcre2-dev:arm64 libxxhash-dev:arm64 libcpp-httplib-dev:arm64 libssl-dev:arm64 libyaml-cpp-dev:arm64
        zlib1g-dev:arm64 libbrotli-dev:arm64 libicu-dev:arm64 libgtest-dev:arm64 libgmock-dev:arm64)
  missing=()
  for p in "${PKGS[@]}"; do
    installed "$p" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "cross-aarch64: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
fi

start=$(date +%s)
launcher=()
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64.cmake \
  -DTM_BUILD_BENCH=OFF "${launcher[@]}" >/dev/null
cmake --build "$BUILD" -j "$JOBS"
built=$(date +%s)
echo "cross-aarch64: built in $((built - start)) s"

export QEMU_LD_PREFIX=/  # see 3. above
export TM_SOURCE_DIR="$PWD"
# The CLI tests start $TM_BINARY through the (host) shell: a wrapper runs the aarch64 binary.
wrapper="$PWD/$BUILD/tokenmill-qemu"
printf '#!/bin/sh\nexec qemu-aarch64 -L %s "%s" "$@"\n' "$QEMU_LD_PREFIX" "$PWD/$BUILD/tokenmill" >"$wrapper"
chmod +x "$wrapper"
export TM_BINARY="$wrapper"

if [ -n "${TESTS:-}" ]; then
  names=($TESTS)
else
  names=()
  for d in tests/unit/*/; do names+=("$(basename "$d")"); done
fi
# Tests left out by name: wall-clock deadlines that emulation overruns, not portability. The StubBench
# two start a stub HTTP server whose 640 worker threads take qemu longer to create than the test's
# deadline: SlowServerTimesOut's 0.5 s request timeout hits the GET /v1/models sent while they
# start, and WaitsForALoadingServer's 1.2 s "loading" window is over before the first ready check.
# AllScenariosShareTheTimeBudget (6 s for six scenarios) fails when the earlier scenarios overrun
# their shares so far that the last one starts with under 1.22 s left: its phases shrink to no less
# than 1.1 s in all (a 0.1 floor on the scale of 11 s, src/loadgen/scenarios_stress.cpp), more than the
# 90 % of the rest that the test allows. Seen under qemu with other builds on the machine.
declare -A EXCLUDE=(
  [loadgen]="StubBench.SlowServerTimesOut:StubBench.WaitsForALoadingServer:Scenarios.AllScenariosShareTheTimeBudget"
)
failed=()
total_pass=0
total_skip=0
total_excluded=0
for n in "${names[@]}"; do
  bin="$BUILD/tests/test_$n"
  [ -x "$bin" ] || { echo "cross-aarch64: $bin missing"; failed+=("$n"); continue; }
  t0=$(date +%s)
  log="$BUILD/test_$n.log"
  filter=()
  if [ -n "${EXCLUDE[$n]:-}" ]; then
    filter=(--gtest_filter="-${EXCLUDE[$n]}")
    total_excluded=$((total_excluded + $(tr ':' '\n' <<<"${EXCLUDE[$n]}" | wc -l)))
  fi
  if timeout "$TEST_TIMEOUT" qemu-aarch64 "$bin" --gtest_brief=1 "${filter[@]}" >"$log" 2>&1; then
    status=ok
  else
    status=FAILED
    failed+=("$n")
  fi
  pass=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -1)
  skip=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$log" | tail -1)
  total_pass=$((total_pass + ${pass:-0}))
  total_skip=$((total_skip + ${skip:-0}))
  echo "cross-aarch64: test_$n $status (${pass:-0} passed, ${skip:-0} skipped) in $(($(date +%s) - t0)) s"
  if [ "$status" != ok ]; then tail -n 40 "$log"; fi
done
echo "cross-aarch64: $total_pass tests passed, $total_skip skipped, $total_excluded excluded, in ${#names[@]} binaries;" \
  "tests took $(($(date +%s) - built)) s"
if [ ${#failed[@]} -gt 0 ]; then
  echo "cross-aarch64: FAILED: ${failed[*]}"
  exit 1
fi
