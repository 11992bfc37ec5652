#!/usr/bin/env bash
# Issue 15: where the allocator's peak is reached, and what cutting it there gives. The "before"
# binary (dcd02bc) already reports the peak per epoch phase; the "after" build frees the
# training forward's activations before the evaluation, detaches each layer of an evaluation
# pass, and runs GCN's hidden layers through LinearProduct::bias_relu_dropout (no
# pre-activation tensor kept for the backward). Generated Reddit-shaped graph, 20 epochs,
# evaluation every epoch (the default recipe evaluates every 5), before/after alternating;
# then gpu_check on the new build. Binaries: .dev/bin/{train_reddit,gpu_check},
# .dev/prev/train_reddit_prev.
set -uo pipefail
R=/tmp/evalpeak/run
source scripts/device-lib.sh
[ -x /tmp/bin/train_reddit_prev ] || { xz -dc .dev/prev/train_reddit_prev.xz > /tmp/bin/train_reddit_prev && chmod +x /tmp/bin/train_reddit_prev; }
step gpu_check timeout -s KILL 200 /tmp/bin/gpu_check --seed 0 --json "$R/gpu_check.json"
for cfg in "gcn 4x256 f32" "gcn 4x256 bf16" "gcn 2x128 f32" "gcn 2x128 bf16" "sage 2x128 f32" "maxk 4x256 bf16"; do
    set -- $cfg; model=$1; shape=$2; prec=$3
    L=${shape%x*}; H=${shape#*x}
    case $model in
        maxk) extra=(--maxk 32 --maxk-after-first --residual --dropout 0.2) ;;
        *) extra=(--model "$model") ;;
    esac
    for b in train_reddit_prev train_reddit; do
        step "${b}_${model}_${shape}_${prec}" timeout -s KILL 120 /tmp/bin/$b --scale 1 \
            --no-baseline "${extra[@]}" --precision "$prec" --layers "$L" --hidden "$H" \
            --epochs 20 --eval-every 1 --json "$R/${b}_${model}_${shape}_${prec}.json"
    done
done
