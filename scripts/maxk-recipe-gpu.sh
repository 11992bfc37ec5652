#!/usr/bin/env bash
# Issue 15: the MaxK recipe (time to accuracy against ReLU), TF32 for the f32 GEMMs, and the
# deep-model recipes on the hard graph (docs/perf/h100-2026-11-24-maxk-recipe).
# PLAN picks the run lists:
#   explore  GCN 4x256 on the generated Reddit graph (train_reddit's default graph, 95 % level),
#            200 epochs, one seed: ReLU and MaxK-32 under dropout / learning-rate variants.
#   explore2 more MaxK-32 variants (learning rate 0.03 / 0.05, dropout 0.1, LayerNorm,
#            residual) and ReLU at lr 0.02.
#   tf32     GCN 2x128 and 4x256, MaxK-32, f32 with and without --tf32 on same_graph.py's files.
#   seeds    SEEDS (default "0 1 2") of the runs named in RECIPES ("name args" per line).
#   hard     deep 4x256 recipes on the hard graph (same_graph.py --signal 0.01 --homophily 0.2):
#            HARD (default RECIPES), "name args" per line.
# Binary in .dev/bin: train_reddit (--features cuda).
set -uo pipefail
R=/tmp/maxkrecipe/run
source scripts/device-lib.sh
unset RUST_BACKTRACE RUST_LIB_BACKTRACE
PLAN=${PLAN:-explore}  # one or more of the plans, space-separated
G4=(--layers 4 --hidden 256 --epochs 200 --no-baseline)
run() { # name, then train_reddit flags (a later --epochs replaces G4's 200)
    local name=$1; shift
    case " $* " in
    *" --epochs "*" --epochs "*)
        local a=() skip=0 seen=0
        for x in "$@"; do
            if [ $skip = 1 ]; then skip=0; continue; fi
            if [ "$x" = --epochs ] && [ $seen = 0 ]; then seen=1; skip=1; continue; fi
            a+=("$x")
        done
        set -- "${a[@]}" ;;
    esac
    step "$name" /tmp/bin/train_reddit "$@" --json "$R/$name.json"
}
for plan in $PLAN; do
case $plan in
explore)
    run relu_d05 "${G4[@]}"
    run maxk32_d05 "${G4[@]}" --maxk 32
    run maxk32_d02 "${G4[@]}" --maxk 32 --dropout 0.2
    run maxk32_d00 "${G4[@]}" --maxk 32 --dropout 0
    run maxk32_d02_lr02 "${G4[@]}" --maxk 32 --dropout 0.2 --lr 0.02
    run maxk32_d05_lr02 "${G4[@]}" --maxk 32 --lr 0.02
    run relu_d02 "${G4[@]}" --dropout 0.2 ;;
explore2)
    run maxk32_d02_lr03 "${G4[@]}" --maxk 32 --dropout 0.2 --lr 0.03
    run maxk32_d02_lr05 "${G4[@]}" --maxk 32 --dropout 0.2 --lr 0.05
    run maxk32_d01_lr02 "${G4[@]}" --maxk 32 --dropout 0.1 --lr 0.02
    run maxk32_d02_lr02_ln "${G4[@]}" --maxk 32 --dropout 0.2 --lr 0.02 --layer-norm
    run maxk32_d02_lr02_res "${G4[@]}" --maxk 32 --dropout 0.2 --lr 0.02 --residual
    run relu_d02_lr02 "${G4[@]}" --dropout 0.2 --lr 0.02 ;;
tf32)
    DATA=/tmp/maxkrecipe/same
    step write python3 docs/perf/h100-2026-11-24-pyg/same_graph.py --dir "$DATA" --skip-pyg
    for t in "" "--tf32"; do
        s=${t:+_tf32}
        run "gcn_2x128_f32$s" --data-dir "$DATA" --epochs 60 --no-baseline $t
        run "gcn_4x256_f32$s" --data-dir "$DATA" --layers 4 --hidden 256 --epochs 60 --no-baseline $t
        run "gcn_4x256_maxk32$s" --data-dir "$DATA" --layers 4 --hidden 256 --epochs 60 \
            --no-baseline --maxk 32 $t
    done ;;
seeds)
    while read -r name args; do
        [ -n "$name" ] || continue
        for s in ${SEEDS:-0 1 2}; do run "${name}_s$s" "${G4[@]}" $args --seed "$s"; done
    done <<< "$RECIPES" ;;
hard)
    DATA=/tmp/maxkrecipe/hard
    step write python3 docs/perf/h100-2026-11-24-pyg/same_graph.py --dir "$DATA" --signal 0.01 \
        --homophily 0.2 --skip-pyg
    while read -r name args; do
        [ -n "$name" ] || continue
        run "$name" --data-dir "$DATA" "${G4[@]}" $args
    done <<< "${HARD:-$RECIPES}" ;;
esac
done
