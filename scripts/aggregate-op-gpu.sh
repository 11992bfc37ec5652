#!/usr/bin/env bash
# Issue 15, candle's zeros-then-add: a GCN hidden layer that aggregates first as one op from
# its input (Aggregate + LinearProduct::of_aggregate + epilogue, residual fused). Before
# (.dev/prev/train_reddit_729.xz, build 729bf8c) and after (.dev/bin/train_reddit) alternated,
# on GCN 4x256 with skips in bf16 and f32, GCN 4x256 without skips, and GCN 2x128 (no such
# layer: the control); then gpu_check (the op against the composed ops and the CPU) and, with
# PLAN including census, the ReLU kernel census of ../h100-2026-11-25-census-s2 on the new build.
set -uo pipefail
R=/tmp/aggop/run
source scripts/device-lib.sh
[ -x /tmp/bin/prev ] || { xz -dc .dev/prev/train_reddit_729.xz > /tmp/bin/prev && chmod +x /tmp/bin/prev; }
T=(--scale 1 --no-baseline --epochs 60)
G4=(--layers 4 --hidden 256 --dropout 0.2)
for p in ${PLAN:-ab check}; do
case $p in
ab)
    step warm_jit timeout -s KILL 150 /tmp/bin/train_reddit --scale 0.05 --epochs 2 --no-baseline --precision bf16 --layers 4 --residual --json "$R/warm.json"
    for i in 0 1; do
        for bin in prev train_reddit; do
            step "res_bf16_${bin}_$i" timeout -s KILL 120 /tmp/bin/$bin "${T[@]}" "${G4[@]}" --residual --precision bf16 --json "$R/res_bf16_${bin}_$i.json"
            step "res_f32_${bin}_$i" timeout -s KILL 120 /tmp/bin/$bin "${T[@]}" "${G4[@]}" --residual --json "$R/res_f32_${bin}_$i.json"
            step "plain_bf16_${bin}_$i" timeout -s KILL 120 /tmp/bin/$bin "${T[@]}" "${G4[@]}" --precision bf16 --json "$R/plain_bf16_${bin}_$i.json"
            step "gcn2_bf16_${bin}_$i" timeout -s KILL 120 /tmp/bin/$bin "${T[@]}" --precision bf16 --json "$R/gcn2_bf16_${bin}_$i.json"
        done
    done ;;
check) step gpu_check timeout -s KILL 240 /tmp/bin/gpu_check --seed 0 --json "$R/gpu_check.json" ;;
census)
    S=(--scale 1 --layers 4 --hidden 256 --no-baseline --precision bf16 --residual --dropout 0.2 --eval-every 100)
    for e in 3 6; do
        step "relu_e$e" timeout -s KILL 200 ncu --clock-control none --metrics gpu__time_duration.sum \
            -o "$R/relu_e$e" /tmp/bin/train_reddit "${S[@]}" --epochs "$e"
        step "relu_e${e}_csv" ncu -i "$R/relu_e$e.ncu-rep" --csv --page raw --metrics gpu__time_duration.sum
        rm -f "$R/relu_e$e.ncu-rep"; pack
    done ;;
esac
done
