#!/usr/bin/env bash
# Whole-command timings for sweeps and figures (reference measured in the same run):
#   1. a simulated sweep run by one process (-j 1) and shared by an mpirun job of 2 (and N)
#      processes: the speed-up of sharing (target >= 1.7x on 2 cores);
#   2. `testbed plot` on a results file: seconds per figure written.
# Usage: bench/spread_sweep.sh [EXPERIMENT [PROCESSES] [--set ...]] (default:
# experiments/moe_balance.toml, 60 runs of about 0.4 s; 2 processes). Needs build/ and
# OpenMPI's mpirun.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
exp=${1:-$here/experiments/moe_balance.toml}
n=${2:-2}
sets=("${@:3}")
tb=$here/build/bin/testbed
export TESTBED_PLUGIN_PATH=$here/build/lib/testbed/plugins
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
now() { date +%s.%N; }
t0=$(now); "$tb" run "$exp" ${sets[@]+"${sets[@]}"} -q -j 1 -o "$d/one.h5" > "$d/one.txt"; t1=$(now)
mpirun --allow-run-as-root --oversubscribe -np "$n" "$tb" run "$exp" ${sets[@]+"${sets[@]}"} -q -o "$d/shared.h5" > "$d/shared.txt"
t2=$(now)
runs=$(tail -1 "$d/one.txt" | awk '{print $1}')
"$tb" compare "$d/one.h5" "$d/shared.h5" > /dev/null || { echo "the shared sweep's figures differ"; exit 1; }
awk -v a="$t0" -v b="$t1" -v c="$t2" -v r="$runs" -v n="$n" 'BEGIN {
  printf "sweep of %d runs: one process %.2f s, %d processes %.2f s: %.2fx\n", r, b - a, n, c - b, (b - a) / (c - b) }'
t3=$(now); "$tb" plot "$d/one.h5" -o "$d/plots" > "$d/plots.txt"; t4=$(now)
figs=$(grep -c '\.png$' "$d/plots.txt")
size=$(stat -c %s "$d/one.h5")
awk -v a="$t3" -v b="$t4" -v f="$figs" -v s="$size" 'BEGIN {
  printf "plot: %d figures (PNG + SVG) of a %.1f MB results file in %.2f s (%.2f s per figure)\n", f, s / 1e6, b - a, (b - a) / f }'
