#!/usr/bin/env bash
# Review mends: before (PREV, .dev/prev: c90885b) and after, alternated, on the bf16 epochs
# the kernel changes were measured on (MaxK-32 recipe, GCN 4x256 ReLU residual, GCN 2x128).
set -uo pipefail
R=/tmp/reviewab/run
source scripts/device-lib.sh
[ -x /tmp/bin/prev ] || xz -dc .dev/prev/train_reddit_prev.xz > /tmp/bin/prev; chmod +x /tmp/bin/prev
T=(--scale 1 --no-baseline --precision bf16 --epochs 60)
M=(--layers 4 --hidden 256 --maxk 32 --maxk-after-first --residual --dropout 0.2)
G4=(--layers 4 --hidden 256 --residual --dropout 0.2)
for i in 0 1; do
    for bin in prev train_reddit; do
        step "maxk32_${bin}_$i" timeout -s KILL 120 /tmp/bin/$bin "${T[@]}" "${M[@]}" --json "$R/maxk32_${bin}_$i.json"
        step "gcn4x256_${bin}_$i" timeout -s KILL 120 /tmp/bin/$bin "${T[@]}" "${G4[@]}" --json "$R/gcn4x256_${bin}_$i.json"
        step "gcn2x128_${bin}_$i" timeout -s KILL 120 /tmp/bin/$bin "${T[@]}" --json "$R/gcn2x128_${bin}_$i.json"
    done
done
