#!/usr/bin/env bash
# `testbed plot` on a real results file of every experiment in experiments/: each
# experiment's first run (its first arm at its first point, as `run --dry-run` lists them),
# then plotted; every figure
# must be a valid PNG with its SVG, and the main figure must name the arm. Runs in OUT_DIR, so
# that what an experiment writes beside its results (moe_real's routing trace, which
# moe_replay reads) stays there.
# Usage: plot_every_experiment.sh TESTBED SOURCE_DIR OUT_DIR
set -euo pipefail
testbed=$1 src=$2 out=$3
rm -rf "$out" && mkdir -p "$out"
cd "$out"
count=0
for file in "$src"/experiments/*.toml; do
  name=$(basename "$file" .toml)
  id=$("$testbed" run "$file" --dry-run | sed -n 2p | awk '{print $1}')
  arm=${id%%@*}
  args=(--only "$arm")
  [ "$id" != "$arm" ] && args+=(--point "${id#*@}")
  # moe_replay replays the routing moe_real's ep4-trace arm records.
  if [ "$name" = moe_replay ] && [ ! -e results/moe_real_routing.h5 ]; then
    "$testbed" run "$src/experiments/moe_real.toml" --only ep4-trace -q -o "$out/moe_real_trace.h5" > /dev/null
  fi
  if ! "$testbed" run "$file" "${args[@]}" -q --fresh -o "$out/$name.h5" > "$out/$name.log" 2>&1; then
    echo "$name: run $id failed"; cat "$out/$name.log"; exit 1
  fi
  "$testbed" plot "$out/$name.h5" -o "$out/$name" > "$out/$name.plot.log" 2>&1 || { cat "$out/$name.plot.log"; exit 1; }
  pngs=0
  for png in "$out/$name"/*.png; do
    [ "$(head -c 8 "$png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] || { echo "$png: not a PNG"; exit 1; }
    grep -q "<svg" "${png%.png}.svg" || { echo "${png%.png}.svg: not an SVG"; exit 1; }
    pngs=$((pngs + 1))
  done
  main=$(ls "$out/$name"/*_main.svg)
  grep -q ">$arm<" "$main" || { echo "$main does not name arm $arm"; exit 1; }
  echo "$name: $id, $pngs figures"
  count=$((count + 1))
done
[ $count -gt 0 ] || { echo "no experiments found"; exit 1; }
echo "$count experiments plotted"
