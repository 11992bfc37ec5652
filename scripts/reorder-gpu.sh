#!/usr/bin/env bash
# What node order buys HP-SDDMM and cuSPARSE SDDMM on the Reddit-shaped graph (issue 14;
# docs/perf/h100-2026-11-24-hp-sddmm/reorder): random ids, degree sort, RCM, and the
# generator's community order (the clustering a community reordering would aim for).
# Binary in .dev/bin: bench_sddmm.
set -uo pipefail
R=/tmp/reorder/run
source scripts/device-lib.sh
for o in none degree rcm; do
    step "sddmm_$o" /tmp/bin/bench_sddmm --k 32,128 --reps 10 --reorder "$o" --json "$R/sddmm_$o.json"
done
step sddmm_community /tmp/bin/bench_sddmm --k 32,128 --reps 10 --community-order --json "$R/sddmm_community.json"
