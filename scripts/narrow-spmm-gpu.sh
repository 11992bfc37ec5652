#!/usr/bin/env bash
# Issue 15: GE-SpMM's narrow-row kernel (lane groups of 16-byte loads, several edges per step)
# for the narrow widths (the 41-class output layer). gpu_check (every SpMM kernel forced,
# against the CPU), bench_spmm --kernels (each kernel forced, f32 and bf16, Reddit-shaped graph
# at scale 1), then training epochs with the dispatcher (narrow) against --spmm-kernel ge (the
# row kernel, the previous default at these widths), adjacent runs on the same machine.
set -uo pipefail
R=/tmp/narrow/run
source scripts/device-lib.sh
T=(--scale 1 --no-baseline --precision bf16 --epochs 60)
for p in ${PLAN:-check bench train}; do
case $p in
check) step gpu_check timeout -s KILL 300 /tmp/bin/gpu_check --seed 0 --json "$R/gpu_check.json" ;;
bench) step bench timeout -s KILL 300 /tmp/bin/bench_spmm --kernels --k 8,16,32,41,64,128,256 \
        --reps 20 --json "$R/bench.json" ;;
train)
    for kern in auto ge; do
        step "gcn2x128_$kern" timeout -s KILL 120 /tmp/bin/train_reddit "${T[@]}" \
            --spmm-kernel $kern --json "$R/gcn2x128_$kern.json"
        step "maxk32_$kern" timeout -s KILL 120 /tmp/bin/train_reddit "${T[@]}" --layers 4 \
            --hidden 256 --maxk 32 --maxk-after-first --residual --dropout 0.2 \
            --spmm-kernel $kern --json "$R/maxk32_$kern.json"
        step "gcn4x256_$kern" timeout -s KILL 120 /tmp/bin/train_reddit "${T[@]}" --layers 4 \
            --hidden 256 --residual --dropout 0.2 --spmm-kernel $kern --json "$R/gcn4x256_$kern.json"
    done ;;
esac
done
