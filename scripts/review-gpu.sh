#!/usr/bin/env bash
# After the review mends of 2026-11-24 (no behaviour change intended): gpu_check against the
# CPU reference (the MaxK selection checks now share one helper), then the partitioned-training
# comparison of scripts/dist-gpu.sh (aggregation with halo and the data upload were refactored).
set -uo pipefail
R=/tmp/review/run
source scripts/device-lib.sh
step gpu_check_small timeout -s KILL 200 /tmp/bin/gpu_check --seed 0 --reddit-scale 0 --json "$R/gpu_check.json"
PLAN="warm gcn gcndet maxk sage" bash scripts/dist-gpu.sh > "$R/dist.out" 2>&1
cp /tmp/dist/run/compare.log "$R/dist_compare.log"
cp /tmp/dist/run/summary.txt "$R/dist_summary.txt"
pack
