#!/usr/bin/env bash
# After the review mends (one cuSPARSE handle/CSR constructor and one relative-difference
# helper in gnn_kernels::peer, one layer-dropout helper for MaxK and attention): the three
# benchmarks still agree with their cuSPARSE peer, and deterministic MaxK-32 GCN 4x256 training
# gives the loss curve of docs/perf/h100-2026-11-24-trust (det_maxk4_det_1) bit for bit.
# Binaries in .dev/bin: bench_spmm, bench_sddmm, bench_maxk, train_reddit.
set -uo pipefail
R=/tmp/review/run
source scripts/device-lib.sh
step bench_spmm /tmp/bin/bench_spmm --k 32,128 --reps 5 --json "$R/bench_spmm.json"
step bench_sddmm /tmp/bin/bench_sddmm --k 32,128 --reps 5 --json "$R/bench_sddmm.json"
step bench_maxk /tmp/bin/bench_maxk --k 32 --reps 5 --out "$R/bench_maxk"
step maxk_train /tmp/bin/train_reddit --layers 4 --hidden 256 --maxk 32 --epochs 30 --scale 1 \
    --deterministic --no-baseline --json "$R/maxk_train.json" --save "$R/maxk"
rm -f "$R"/maxk.safetensors
pack
