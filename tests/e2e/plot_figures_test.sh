#!/usr/bin/env bash
# `testbed plot` on real results files of one experiment of each kind (simulated with a
# per-device table and the paper's figures, real with loss curves, MoE balance, per-layer
# precision, GNN feature transfer), each made small: every figure exists as a valid PNG and SVG, and the main
# figure's SVG names every arm of its file. Usage: plot_figures_test.sh TESTBED SOURCE_DIR OUT_DIR
set -euo pipefail
testbed=$1 src=$2 out=$3
rm -rf "$out" && mkdir -p "$out"
run() {  # name experiment args...
  local name=$1 file=$2
  shift 2
  "$testbed" run "$src/experiments/$file" --fresh -q -o "$out/$name.h5" "$@" > "$out/$name.log" 2>&1 || {
    cat "$out/$name.log"; exit 1; }
}
run sim oases_pcie.toml --point h1024-l24 --point h12288-l4
run real oases_real.toml --set train.steps=3
run moe moe_balance.toml --set train.steps=2 --point s-top1,1.0 --only fastermoe --only pro-prophet
run precision dpc_sim.toml
run gnn brgraph.toml --point cora,sage --set train.steps=3
check() {  # name kinds...
  local name=$1
  shift
  "$testbed" plot "$out/$name.h5" -o "$out/$name" > "$out/$name.plot.log" 2>&1 || { cat "$out/$name.plot.log"; exit 1; }
  for kind in main "$@"; do
    local found=0
    for png in "$out/$name"/*_"$kind"*.png; do
      [ -e "$png" ] || continue
      found=1
      [ "$(head -c 8 "$png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] || { echo "$png: not a PNG"; exit 1; }
      local svg="${png%.png}.svg"
      grep -q "<svg" "$svg" || { echo "$svg: not an SVG"; exit 1; }
    done
    [ $found -eq 1 ] || { echo "$name: no '$kind' figure"; ls "$out/$name"; exit 1; }
  done
  local main
  main=$(ls "$out/$name"/*_main.svg)
  # The arms: the first column of the summary table's rows (after its rule).
  local arms
  arms=$("$testbed" show "$out/$name.h5" | awk 'rows && NF { print $1 } /^-+$/ { rows = 1 }' | sort -u)
  [ -n "$arms" ] || { echo "$name: no arms in the summary"; exit 1; }
  for arm in $arms; do
    grep -q ">$arm<" "$main" || { echo "$main does not name arm $arm"; exit 1; }
  done
  echo "$name: $(ls "$out/$name" | grep -c '\.png$') figures"
}
check sim devices
check real loss
check moe moe devices
check precision precision devices
check gnn features devices
