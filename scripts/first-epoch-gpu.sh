#!/usr/bin/env bash
# Issue 15: where the first epoch's one-off set-up goes (train_reddit's first-epoch phase
# table), MaxK-32 against ReLU, GCN 4x256 bf16 on the generated Reddit-shaped graph; then
# MaxK's learning rate against its post-peak dip (maxk_sweep, ReLU and MaxK-32, 3 seeds,
# validation every epoch). Binaries: train_reddit, maxk_sweep (.dev/bin).
set -uo pipefail
R=/tmp/firstepoch/run
source scripts/device-lib.sh
T=(--scale 1 --no-baseline --precision bf16 --layers 4 --hidden 256 --residual --dropout 0.2)
step warm timeout -s KILL 200 /tmp/bin/train_reddit --scale 0.05 --epochs 2 --no-baseline \
    --precision bf16 --maxk 32 --maxk-after-first --layers 3
for m in maxk relu; do
    extra=(); [ $m = maxk ] && extra=(--maxk 32 --maxk-after-first)
    step "first_$m" timeout -s KILL 120 /tmp/bin/train_reddit "${T[@]}" "${extra[@]}" \
        --epochs 5 --eval-every 5 --json "$R/first_$m.json"
    step "first_${m}_nocache" timeout -s KILL 120 /tmp/bin/train_reddit "${T[@]}" "${extra[@]}" \
        --epochs 5 --eval-every 5 --no-input-cache --json "$R/first_${m}_nocache.json"
done
for lr in ${LRS:-0.005 0.007}; do
    step "sweep_lr$lr" timeout -s KILL 200 /tmp/bin/maxk_sweep --dataset reddit --scale 1 --models gcn --k 32 \
        --seeds 3 --maxk-after-first --layers 4 --hidden 256 --residual --dropout 0.2 \
        --precision bf16 --epochs 40 --eval-every 1 --lr "$lr" --profile-epochs 4 \
        --out "$R/sweep_lr$lr"
done
