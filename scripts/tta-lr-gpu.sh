#!/usr/bin/env bash
# Issue 15: MaxK-32 against ReLU time to accuracy in bf16 at a learning rate of 0.007 (the
# maxk_sweep in docs/perf/h100-2026-11-25-first-epoch/ found both models' fastest there),
# one process per run so that each pays its own first-epoch set-up, as a user's run does.
# GCN 4x256, generated Reddit-shaped graph, 40 epochs, validation every epoch, seeds 0-2.
set -uo pipefail
R=/tmp/ttalr/run
source scripts/device-lib.sh
LR=${LR:-0.007}
T=(--scale 1 --no-baseline --precision bf16 --epochs 40 --eval-every 1 --layers 4 --hidden 256
   --residual --dropout 0.2 --lr "$LR")
step warm timeout -s KILL 200 /tmp/bin/train_reddit --scale 0.05 --epochs 2 --no-baseline \
    --precision bf16 --maxk 32 --maxk-after-first --layers 3
for s in 0 1 2; do
    step "maxk32_s$s" timeout -s KILL 120 /tmp/bin/train_reddit "${T[@]}" --maxk 32 \
        --maxk-after-first --seed $s --json "$R/maxk32_s$s.json"
    step "relu_s$s" timeout -s KILL 120 /tmp/bin/train_reddit "${T[@]}" --seed $s --json "$R/relu_s$s.json"
done
