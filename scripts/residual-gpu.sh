#!/usr/bin/env bash
# Issue 15: GCN MaxK layers with the residual fused into the SpGEMM. Before (PREV, .dev/prev:
# the bias_relu_dropout build) and after on MaxK-32 GCN 4x256 bf16, adjacent; the
# uninstrumented epoch; then time to accuracy, MaxK-32 against ReLU, bf16, 3 seeds, 200 epochs
# (the recipe of the README); a kernel census; gpu_check (the fused ops against the CPU).
set -uo pipefail
R=/tmp/residual/run
source scripts/device-lib.sh
[ -x /tmp/bin/prev ] || xz -dc .dev/prev/train_reddit_prev.xz > /tmp/bin/prev; chmod +x /tmp/bin/prev
T=(--scale 1 --no-baseline --precision bf16)
M=(--layers 4 --hidden 256 --maxk 32 --maxk-after-first --residual --dropout 0.2)
G4=(--layers 4 --hidden 256 --residual --dropout 0.2)
for p in ${PLAN:-ab tta census check}; do
case $p in
ab)
    for bin in prev train_reddit prev train_reddit; do
        n=$(ls "$R" | grep -c "^maxk32_${bin}_[0-9].json" || true)
        step "maxk32_${bin}_$n" timeout -s KILL 120 /tmp/bin/$bin "${T[@]}" --epochs 60 "${M[@]}" \
            --json "$R/maxk32_${bin}_$n.json"
    done
    step maxk32_noprof timeout -s KILL 120 /tmp/bin/train_reddit "${T[@]}" --epochs 60 "${M[@]}" \
        --no-profile --json "$R/maxk32_noprof.json"
    step gcn2x128 timeout -s KILL 120 /tmp/bin/train_reddit "${T[@]}" --epochs 60 --json "$R/gcn2x128.json"
    step gcn2x128_noprof timeout -s KILL 120 /tmp/bin/train_reddit "${T[@]}" --epochs 60 --no-profile \
        --json "$R/gcn2x128_noprof.json" ;;
tta)
    for s in 0 1 2; do
        step "tta_maxk32_s$s" timeout -s KILL 120 /tmp/bin/train_reddit "${T[@]}" --epochs 200 "${M[@]}" \
            --seed $s --json "$R/tta_maxk32_s$s.json"
        step "tta_relu_s$s" timeout -s KILL 120 /tmp/bin/train_reddit "${T[@]}" --epochs 200 "${G4[@]}" \
            --seed $s --json "$R/tta_relu_s$s.json"
    done ;;
census)
    for e in 3 6; do
        step maxk_e$e timeout -s KILL 200 ncu --clock-control none --metrics gpu__time_duration.sum \
            -o "$R/maxk_e$e" /tmp/bin/train_reddit "${T[@]}" --eval-every 100 --epochs $e "${M[@]}"
        step maxk_e${e}_csv ncu -i "$R/maxk_e$e.ncu-rep" --csv --page raw --metrics gpu__time_duration.sum
        rm -f "$R/maxk_e$e.ncu-rep"; pack
    done ;;
check) step gpu_check timeout -s KILL 300 /tmp/bin/gpu_check --seed 0 --json "$R/gpu_check.json" ;;
esac
done
