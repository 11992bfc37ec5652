#!/usr/bin/env bash
# Issue 15: does a cosine learning-rate schedule take out MaxK-32's post-peak dip? GCN 4x256
# bf16 on the generated Reddit-shaped graph: maxk_sweep (ReLU and MaxK-32, 3 seeds on one
# graph, validation every epoch) under three schedules, then one process per run (seeds 0-2,
# each its own graph) under the first.
set -uo pipefail
R=/tmp/cosine/run
source scripts/device-lib.sh
S=(--dataset reddit --scale 1 --models gcn --k 32 --seeds 3 --maxk-after-first --layers 4
   --hidden 256 --residual --dropout 0.2 --precision bf16 --eval-every 1 --profile-epochs 4
   --lr-schedule cosine)
step sweep_lr0.007_e40 timeout -s KILL 200 /tmp/bin/maxk_sweep "${S[@]}" --lr 0.007 --epochs 40 --out "$R/sweep_lr0.007_e40"
step sweep_lr0.01_e40 timeout -s KILL 200 /tmp/bin/maxk_sweep "${S[@]}" --lr 0.01 --epochs 40 --out "$R/sweep_lr0.01_e40"
step sweep_lr0.01_e20 timeout -s KILL 200 /tmp/bin/maxk_sweep "${S[@]}" --lr 0.01 --epochs 20 --out "$R/sweep_lr0.01_e20"
T=(--scale 1 --no-baseline --precision bf16 --epochs 40 --eval-every 1 --layers 4 --hidden 256
   --residual --dropout 0.2 --lr 0.007 --lr-schedule cosine)
for s in 0 1 2; do
    step "maxk32_s$s" timeout -s KILL 120 /tmp/bin/train_reddit "${T[@]}" --maxk 32 \
        --maxk-after-first --seed $s --json "$R/maxk32_s$s.json"
    step "relu_s$s" timeout -s KILL 120 /tmp/bin/train_reddit "${T[@]}" --seed $s --json "$R/relu_s$s.json"
done
