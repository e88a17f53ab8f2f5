#!/usr/bin/env bash
# Builds everything and runs every test: the Release build (CUDA code compiled when nvcc is
# present; GPU tests skip without a GPU), then the same suite under AddressSanitizer and
# UndefinedBehaviorSanitizer.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
jobs="${TESTBED_JOBS:-$(nproc)}"
"$root/scripts/install-deps.sh"

build="${TESTBED_BUILD_DIR:-$root/build}"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESTBED_BUILD_TESTS=ON -DTESTBED_BUILD_BENCH=ON
cmake --build "$build" -- -j"$jobs"
ctest --test-dir "$build" --output-on-failure -j"$jobs"

asan="$root/build-asan"
cmake -S "$root" -B "$asan" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DTESTBED_SANITIZE=ON \
  -DTESTBED_BUILD_TESTS=ON -DTESTBED_BUILD_BENCH=OFF -DTESTBED_WITH_CUDA=OFF
cmake --build "$asan" -- -j"$jobs"
# Leak detection is on; the MPI tests turn it off for their processes (OpenMPI's runtime keeps
# its allocations until exit), see tests/plugins/mpi/CMakeLists.txt.
ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}" \
UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}" \
  ctest --test-dir "$asan" --output-on-failure -j"$jobs"
echo "all tests passed (release and sanitizer builds)"
