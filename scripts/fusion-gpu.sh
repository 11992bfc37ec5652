#!/usr/bin/env bash
# Issue 15: the hidden layers' bias + ReLU + dropout in one pass (bias_relu_dropout), and no
# transposed copy of dy in the first layer's weight gradient. Before (PREV: the binary of the
# narrow-SpMM commit, .dev/prev) and after, adjacent runs on the same machine; then the
# uninstrumented epoch (--no-profile), a kernel census of MaxK-32 (scripts/census.py) and
# gpu_check.
set -uo pipefail
R=/tmp/fusion/run
source scripts/device-lib.sh
[ -x /tmp/bin/prev ] || xz -dc .dev/prev/train_reddit_prev.xz > /tmp/bin/prev && chmod +x /tmp/bin/prev
T=(--scale 1 --no-baseline --precision bf16 --epochs 60)
M=(--layers 4 --hidden 256 --maxk 32 --maxk-after-first --residual --dropout 0.2)
G4=(--layers 4 --hidden 256 --residual --dropout 0.2)
for p in ${PLAN:-train noprof census check}; do
case $p in
train)
    for bin in prev train_reddit; do
        step "gcn2x128_$bin" timeout -s KILL 120 /tmp/bin/$bin "${T[@]}" --json "$R/gcn2x128_$bin.json"
        step "maxk32_$bin" timeout -s KILL 120 /tmp/bin/$bin "${T[@]}" "${M[@]}" --json "$R/maxk32_$bin.json"
        step "gcn4x256_$bin" timeout -s KILL 120 /tmp/bin/$bin "${T[@]}" "${G4[@]}" --json "$R/gcn4x256_$bin.json"
        step "sage2x128_$bin" timeout -s KILL 120 /tmp/bin/$bin "${T[@]}" --model sage --json "$R/sage2x128_$bin.json"
    done ;;
noprof)
    step gcn2x128_noprof timeout -s KILL 120 /tmp/bin/train_reddit "${T[@]}" --no-profile --json "$R/gcn2x128_noprof.json"
    step maxk32_noprof timeout -s KILL 120 /tmp/bin/train_reddit "${T[@]}" "${M[@]}" --no-profile --json "$R/maxk32_noprof.json"
    step gcn4x256_noprof timeout -s KILL 120 /tmp/bin/train_reddit "${T[@]}" "${G4[@]}" --no-profile --json "$R/gcn4x256_noprof.json" ;;
census)
    for e in 3 6; do
        step maxk_e$e timeout -s KILL 200 ncu --clock-control none --metrics gpu__time_duration.sum \
            -o "$R/maxk_e$e" /tmp/bin/train_reddit --scale 1 --no-baseline --precision bf16 \
            --eval-every 100 --epochs $e "${M[@]}"
        step maxk_e${e}_csv ncu -i "$R/maxk_e$e.ncu-rep" --csv --page raw --metrics gpu__time_duration.sum
        rm -f "$R/maxk_e$e.ncu-rep"; pack
    done ;;
check) step gpu_check timeout -s KILL 300 /tmp/bin/gpu_check --seed 0 --json "$R/gpu_check.json" ;;
esac
done
