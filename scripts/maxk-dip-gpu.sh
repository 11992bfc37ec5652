#!/usr/bin/env bash
# Issue 15: MaxK-32's accuracy dip after its first peak (GCN 4x256 bf16, lr 0.007; see
# docs/perf/h100-2026-11-25-first-epoch/): maxk_sweep (ReLU and MaxK, 3 seeds on one
# generated graph, validation every epoch) under k = 64, dropout 0 / 0.5 and weight decay.
set -uo pipefail
R=/tmp/maxkdip/run
source scripts/device-lib.sh
S=(--dataset reddit --scale 1 --models gcn --seeds 3 --maxk-after-first --layers 4 --hidden 256
   --residual --precision bf16 --epochs 40 --eval-every 1 --lr 0.007 --profile-epochs 4)
step k32_64 timeout -s KILL 200 /tmp/bin/maxk_sweep "${S[@]}" --k 32,64 --dropout 0.2 --out "$R/k32_64"
step d0 timeout -s KILL 200 /tmp/bin/maxk_sweep "${S[@]}" --k 32 --dropout 0 --out "$R/d0"
step d05 timeout -s KILL 200 /tmp/bin/maxk_sweep "${S[@]}" --k 32 --dropout 0.5 --out "$R/d05"
step wd timeout -s KILL 200 /tmp/bin/maxk_sweep "${S[@]}" --k 32 --dropout 0.2 --weight-decay 5e-4 --out "$R/wd"
