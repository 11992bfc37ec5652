#!/usr/bin/env bash
# Issue 15: MaxK-32 against ReLU time to accuracy in bf16 with validation every epoch (the
# 5-epoch grid of the earlier runs rounds each run's crossing up to a multiple of 5 epochs).
# GCN 4x256, generated Reddit-shaped graph, 100 epochs, seeds 0-2. Binary: train_reddit.
set -uo pipefail
R=/tmp/ttafine/run
source scripts/device-lib.sh
T=(--scale 1 --no-baseline --precision bf16 --epochs 100 --eval-every 1 --layers 4 --hidden 256
   --residual --dropout 0.2)
step warm timeout -s KILL 200 /tmp/bin/train_reddit --scale 0.05 --epochs 2 --no-baseline \
    --precision bf16 --maxk 32 --maxk-after-first --layers 3
for s in 0 1 2; do
    step "maxk32_s$s" timeout -s KILL 120 /tmp/bin/train_reddit "${T[@]}" --maxk 32 --maxk-after-first \
        --seed $s --json "$R/maxk32_s$s.json"
    step "relu_s$s" timeout -s KILL 120 /tmp/bin/train_reddit "${T[@]}" --seed $s --json "$R/relu_s$s.json"
done
