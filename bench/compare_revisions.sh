#!/usr/bin/env bash
# Runs a Google Benchmark program of this checkout beside the same program built from another
# git revision, alternating the two so that both see the same machine state, and prints each
# run's lines tagged with its side. The other revision is built in its own worktree and build
# directory (kept for the next call), with its own plugins.
#
#   bench/compare_revisions.sh REV BENCH [REPEATS] [-- benchmark flags...]
#   bench/compare_revisions.sh 9fcbfcb sim_iteration_bench 4 -- --benchmark_filter=gpus_1024
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
rev="${1:?usage: compare_revisions.sh REV BENCH [REPEATS] [-- flags]}"
bench="${2:?usage: compare_revisions.sh REV BENCH [REPEATS] [-- flags]}"
repeats="${3:-3}"
shift $(( $# >= 3 ? 3 : $# ))
[ "${1:-}" = "--" ] && shift
flags=("$@")

short="$(git -C "$root" rev-parse --short "$rev")"
other="${TESTBED_COMPARE_DIR:-$root/build-compare}/$short"
if [ ! -d "$other/src" ]; then
  mkdir -p "$other"
  git -C "$root" worktree add --detach "$other/src" "$rev" >/dev/null
fi
jobs="${TESTBED_JOBS:-$(nproc)}"
if [ ! -f "$other/build/build.ninja" ]; then
  cmake -S "$other/src" -B "$other/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESTBED_BUILD_TESTS=OFF \
    -DTESTBED_BUILD_BENCH=ON -DTESTBED_WITH_CUDA=OFF >/dev/null
fi
cmake --build "$other/build" --target "$bench" testbed_plugins -- -j"$jobs" >/dev/null
cmake --build "$root/build" --target "$bench" testbed_plugins -- -j"$jobs" >/dev/null

for i in $(seq 1 "$repeats"); do
  for side in this other; do
    if [ "$side" = this ]; then bin="$root/build/bin/$bench"; else bin="$other/build/bin/$bench"; fi
    "$bin" "${flags[@]}" 2>/dev/null | grep -E '^[A-Za-z].*/' | sed "s|^|$side($([ $side = this ] && git -C "$root" rev-parse --short HEAD || echo "$short")) run $i: |"
  done
done
