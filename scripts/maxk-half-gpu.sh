#!/usr/bin/env bash
# Issue 15, MaxK in half precision (docs/perf/h100-2026-11-24-maxk-half): gpu_check (the bf16 /
# f16 MaxK rows are new), then GCN 4x256 MaxK-32 (after-first, residual, dropout 0.2) in bf16
# against ReLU bf16 under the same recipe, SEEDS seeds each, on train_reddit's generated graph,
# one f32 MaxK run for the epoch-time comparison in the same call; then GCN 2x128 bf16 peak
# memory on same_graph.py's files, and an f16 resume against an uninterrupted f16 run.
# PLAN (default "check seeds memory resume"; "warm" first on a fresh machine) picks the parts.
# Binaries in .dev/bin: gpu_check, train_reddit (--features cuda).
set -uo pipefail
R=/tmp/maxkhalf/run
source scripts/device-lib.sh
unset RUST_BACKTRACE RUST_LIB_BACKTRACE
PLAN=${PLAN:-check seeds memory resume}
G4=(--layers 4 --hidden 256 --epochs 200 --no-baseline --residual --dropout 0.2)
MAXK=(--maxk 32 --maxk-after-first)
train() { local name=$1; shift; step "$name" timeout -s KILL 150 /tmp/bin/train_reddit "$@" --json "$R/$name.json"; }
for plan in $PLAN; do
case $plan in
warm) # the one-off PTX JIT of a fresh machine, outside the timed runs
    train warm_jit --scale 0.05 --epochs 2 --no-baseline --precision bf16 "${MAXK[@]}" --layers 3 ;;
check) step gpu_check_seed0 timeout -s KILL 300 /tmp/bin/gpu_check --seed 0 --json "$R/gpu_check_seed0.json" ;;
seeds)
    for s in ${SEEDS:-0 1 2}; do
        train "maxk32_af_res_d02_bf16_s$s" "${G4[@]}" "${MAXK[@]}" --precision bf16 --seed "$s"
        train "relu_res_d02_bf16_s$s" "${G4[@]}" --precision bf16 --seed "$s"
    done
    train maxk32_af_res_d02_f32_s0 "${G4[@]}" "${MAXK[@]}" --seed 0 ;;
memory)
    DATA=/tmp/maxkhalf/same
    step write python3 docs/perf/h100-2026-11-24-pyg/same_graph.py --dir "$DATA" --skip-pyg
    train same_gcn_2x128_bf16 --data-dir "$DATA" --precision bf16 --epochs 60 --no-baseline
    train same_gcn_4x256_maxk32_bf16 --data-dir "$DATA" --layers 4 --hidden 256 --precision bf16 \
        --epochs 60 --no-baseline "${MAXK[@]}" --residual --dropout 0.2 ;;
resume)
    CK=/tmp/maxkhalf/ck/gcn
    S=(--scale 0.2 --precision f16 --no-baseline)
    train f16_whole "${S[@]}" --epochs 40
    train f16_first_half "${S[@]}" --epochs 20 --checkpoint-every 20 --checkpoint "$CK"
    train f16_resumed "${S[@]}" --epochs 40 --resume "$CK" ;;
esac
done
