#!/usr/bin/env bash
# Issue 15, second call of h100-2026-11-25-eval-peak: the allocator pool's release threshold.
# Three builds/settings, alternating per config: "before" (dcd02bc, the driver's default
# threshold 0), "release0" (the new build with GNN_CUDA_POOL_RELEASE_THRESHOLD=0: the eval and
# LinearProduct changes alone) and "keep" (the new build's default: the pool keeps freed
# memory). Generated Reddit-shaped graph, 20 epochs, evaluation every epoch. Binaries:
# .dev/bin/train_reddit, .dev/prev/train_reddit_prev.
set -uo pipefail
R=/tmp/poolkeep/run
source scripts/device-lib.sh
[ -x /tmp/bin/train_reddit_prev ] || { xz -dc .dev/prev/train_reddit_prev.xz > /tmp/bin/train_reddit_prev && chmod +x /tmp/bin/train_reddit_prev; }
one() { # round config...
    local round=$1 model=$2 shape=$3 prec=$4
    local L=${shape%x*} H=${shape#*x} extra
    case $model in
        maxk) extra=(--maxk 32 --maxk-after-first --residual --dropout 0.2) ;;
        *) extra=(--model "$model") ;;
    esac
    local args=(--scale 1 --no-baseline "${extra[@]}" --precision "$prec" --layers "$L" --hidden "$H" --epochs 20 --eval-every 1)
    local tag=${model}_${shape}_${prec}_r${round}
    step "prev_$tag" timeout -s KILL 120 /tmp/bin/train_reddit_prev "${args[@]}" --json "$R/train_reddit_prev_$tag.json"
    step "release0_$tag" env GNN_CUDA_POOL_RELEASE_THRESHOLD=0 timeout -s KILL 120 /tmp/bin/train_reddit "${args[@]}" --json "$R/train_reddit_release0_$tag.json"
    step "keep_$tag" timeout -s KILL 120 /tmp/bin/train_reddit "${args[@]}" --json "$R/train_reddit_keep_$tag.json"
}
for cfg in "gcn 4x256 f32" "gcn 2x128 bf16" "sage 2x128 f32" "gcn 4x256 bf16" "gcn 2x128 f32" "maxk 4x256 bf16"; do
    one 1 $cfg
done
for cfg in "gcn 4x256 f32" "gcn 2x128 bf16" "sage 2x128 f32"; do
    one 2 $cfg
done
