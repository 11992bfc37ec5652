#!/usr/bin/env bash
# Column-blocked SpMM against the one SpMM on the Reddit-shaped graph (bench_spmm
# --column-blocks): does cutting the columns into blocks that each read a 1/B slice of x pay
# at the sizes a partitioned aggregation sees? One GPU; binary in .dev/bin: bench_spmm.
set -uo pipefail
R=/tmp/colblocks/run
source scripts/device-lib.sh
for sc in ${SCALES:-4}; do
    step "bench_s$sc" timeout -s KILL 300 /tmp/bin/bench_spmm --scale "$sc" --k ${K:-128,256} --reps 10 --column-blocks 2,4 --json "$R/bench_s$sc.json"
done
