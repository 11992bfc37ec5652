#!/usr/bin/env bash
# Issue 15, peak memory (docs/perf/h100-2026-11-24-symmetric): after a structurally symmetric
# graph became its own transpose (no second structure or value copy for the backward):
# gpu_check, then PyG 2.8 (GCN 2x128 and 4x256) and ours on the same Reddit-shaped files.
# Binaries in .dev/bin: gpu_check, train_reddit (--features cuda).
set -uo pipefail
R=/tmp/symmetric/run
source scripts/device-lib.sh
DATA=/tmp/symmetric/data
unset RUST_BACKTRACE RUST_LIB_BACKTRACE
step gpu_check_seed0 /tmp/bin/gpu_check --seed 0 --json "$R/gpu_check_seed0.json"
step pyg env OUT="$R" python3 docs/perf/h100-2026-11-24-pyg/same_graph.py --dir "$DATA" \
    --epochs 60 --models gcn_2x128,gcn_4x256
for m in "gcn 2 128 bf16" "gcn 2 128 f32" "gcn 4 256 bf16" "gcn 4 256 f32" "sage 2 128 bf16"; do
    set -- $m
    step "ours_$1_$2x$3_$4" /tmp/bin/train_reddit --data-dir "$DATA" --model "$1" --layers "$2" \
        --hidden "$3" --precision "$4" --epochs 60 --no-baseline --json "$R/ours_$1_$2x$3_$4.json"
done
