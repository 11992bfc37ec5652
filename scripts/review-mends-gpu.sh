#!/usr/bin/env bash
# Review mends of the narrow SpMM / fused epilogues (no behaviour change intended): gpu_check
# against the CPU, bench_spmm --kernels at the narrow widths, and the bf16 epochs the
# changes were measured on (GCN 2x128, MaxK-32 recipe, GCN 4x256 ReLU residual; 60 epochs),
# to compare with docs/perf/h100-2026-11-25-{narrow,residual,fusion}.
set -uo pipefail
R=/tmp/reviewmends/run
source scripts/device-lib.sh
T=(--scale 1 --no-baseline --precision bf16 --epochs 60)
step gpu_check timeout -s KILL 300 /tmp/bin/gpu_check --seed 0 --json "$R/gpu_check.json"
step bench timeout -s KILL 200 /tmp/bin/bench_spmm --kernels --k 16,41,64 --reps 20 --json "$R/bench.json"
step gcn2x128 timeout -s KILL 120 /tmp/bin/train_reddit "${T[@]}" --json "$R/gcn2x128.json"
step maxk32 timeout -s KILL 120 /tmp/bin/train_reddit "${T[@]}" --layers 4 --hidden 256 --maxk 32 \
    --maxk-after-first --residual --dropout 0.2 --json "$R/maxk32.json"
step gcn4x256 timeout -s KILL 120 /tmp/bin/train_reddit "${T[@]}" --layers 4 --hidden 256 --residual \
    --dropout 0.2 --json "$R/gcn4x256.json"
