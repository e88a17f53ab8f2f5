#!/usr/bin/env bash
# Usage: check_same_as_single.sh TESTBED RESULTS.h5 RUN...
# Fails unless every named run of a real-backend results file trained like single-process
# training: loss within 1e-4 nats/token at every step and gradient norm within 1e-3 relative
# (float rounding of partial sums added in another order is far below both).
set -euo pipefail
testbed="$1" results="$2"
shift 2
for run in "$@"; do
  shown="$("$testbed" show "$results" --run "$run")"
  for check in "max_loss_diff_vs_single 1e-4" "max_grad_norm_rel_diff_vs_single 1e-3"; do
    read -r metric limit <<<"$check"
    if ! awk -v m="$metric" -v lim="$limit" '$1 == m { found = 1; ok = ($2 >= 0 && $2 <= lim) } END { exit !(found && ok) }' \
        <<<"$shown"; then
      echo "run $run: $metric missing or above $limit"
      echo "$shown"
      exit 1
    fi
  done
done
echo "runs $* match single-process training"
