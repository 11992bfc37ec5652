#!/usr/bin/env bash
# Issue 15: peak device memory (the allocator's own accounting) before and after releasing a
# symmetric graph's transpose permutation once GCN's normalisation values are found
# symmetric: GCN 2x128 and 4x256 in f32 and bf16 on the generated Reddit-shaped graph, 15
# epochs, before/after alternating; then gpu_check on the new build. Binaries:
# .dev/bin/{train_reddit,gpu_check}, .dev/prev/train_reddit_prev.
set -uo pipefail
R=/tmp/permrel/run
source scripts/device-lib.sh
[ -x /tmp/bin/train_reddit_prev ] || { xz -dc .dev/prev/train_reddit_prev.xz > /tmp/bin/train_reddit_prev && chmod +x /tmp/bin/train_reddit_prev; }
for cfg in "2x128 f32" "4x256 f32" "4x256 bf16"; do
    set -- $cfg; shape=$1; prec=$2
    L=${shape%x*}; H=${shape#*x}
    for b in train_reddit_prev train_reddit; do
        step "${b}_${shape}_${prec}" timeout -s KILL 150 /tmp/bin/$b --scale 1 --no-baseline \
            --precision "$prec" --layers "$L" --hidden "$H" --epochs 15 --eval-every 5 \
            --json "$R/${b}_${shape}_${prec}.json"
    done
done
step gpu_check timeout -s KILL 300 /tmp/bin/gpu_check --seed 0 --json "$R/gpu_check.json"
