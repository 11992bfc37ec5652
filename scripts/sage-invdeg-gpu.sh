#!/usr/bin/env bash
# Issue 15: GraphSAGE-mean's half-precision backward without the forward-order inverse-degree
# values and the transpose permutation (a symmetric graph's transposed values computed
# directly): peak memory before/after, GraphSAGE 2x128 and 4x256 bf16 on the generated
# Reddit-shaped graph, 15 epochs; then gpu_check on the new build (its half-precision mean
# SpMM checks run this backward). Binaries: .dev/bin/{train_reddit,gpu_check},
# .dev/prev/train_reddit_prev (the build before).
set -uo pipefail
R=/tmp/sageinv/run
source scripts/device-lib.sh
[ -x /tmp/bin/train_reddit_prev ] || { xz -dc .dev/prev/train_reddit_prev.xz > /tmp/bin/train_reddit_prev && chmod +x /tmp/bin/train_reddit_prev; }
for shape in "2 128" "4 256"; do
    set -- $shape
    for b in train_reddit_prev train_reddit; do
        step "${b}_sage_$1x$2" timeout -s KILL 150 /tmp/bin/$b --scale 1 --no-baseline --model sage \
            --precision bf16 --layers $1 --hidden $2 --epochs 15 --eval-every 5 \
            --json "$R/${b}_sage_$1x$2.json"
    done
done
step gpu_check timeout -s KILL 300 /tmp/bin/gpu_check --seed 0 --json "$R/gpu_check.json"
