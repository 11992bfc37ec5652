#!/usr/bin/env bash
# Issue 15, --precision f32|bf16|f16 (docs/perf/h100-2026-11-24-precision): gpu_check (now with
# the half-precision SpMM rows), Cora accuracy per precision (5 seeds), then PyG 2.8 and ours
# on the same Reddit-shaped files (same_graph.py), ours in each precision.
# Binaries in .dev/bin: gpu_check, train_cora, train_reddit (--features cuda).
# STEPS (default "check cora same"; also "hard", "infer", "seeds"; SEEDS: Cora seeds): which parts to run; MODELS and
# PRECISIONS narrow the "same" / "hard" / "infer" runs; OURS_FLAGS, TAG and SKIP_PYG: see "same".
set -uo pipefail
R=/tmp/precision/run
source scripts/device-lib.sh
DATA=/tmp/precision/data
STEPS=${STEPS:-check cora same}
MODELS=${MODELS:-gcn_2x128 sage_2x128 gcn_4x256 gin_2x128}
PRECISIONS=${PRECISIONS:-f32 bf16 f16}
unset RUST_BACKTRACE RUST_LIB_BACKTRACE
for s in $STEPS; do
    case $s in
    check)
        step gpu_check_seed0 /tmp/bin/gpu_check --seed 0 --json "$R/gpu_check_seed0.json" ;;
    cora)
        for p in $PRECISIONS; do
            for m in gcn sage gin; do
                step "cora_${m}_$p" /tmp/bin/train_cora --model $m --seeds "${SEEDS:-5}" --precision $p \
                    --no-save --json "$R/cora_${m}_$p.json"
            done
        done ;;
    same)
        # OURS_FLAGS (e.g. --no-input-cache) are added to our runs, whose names get TAG;
        # SKIP_PYG=1 only writes the files (when PyG already ran in this call).
        if [ -n "${SKIP_PYG:-}" ]; then
            [ -d "$DATA" ] || step write python3 docs/perf/h100-2026-11-24-pyg/same_graph.py \
                --dir "$DATA" --skip-pyg
        else
            step pyg env OUT="$R" python3 docs/perf/h100-2026-11-24-pyg/same_graph.py --dir "$DATA" \
                --epochs 60 --models gcn_2x128,sage_2x128
        fi
        for m in $MODELS; do
            set -- $(echo "$m" | tr '_x' '  '); kind=$1; layers=$2; hidden=$3
            for p in $PRECISIONS; do
                step "ours_${m}_$p${TAG:-}" /tmp/bin/train_reddit --data-dir "$DATA" --model "$kind" \
                    --layers "$layers" --hidden "$hidden" --epochs 60 --no-baseline \
                    --precision "$p" ${OURS_FLAGS:-} --json "$R/ours_${m}_$p${TAG:-}.json"
            done
        done ;;
    hard)
        # The harder graph of the same shape (issue 15: GCN 2x128 reaches ~99 % in 200 epochs).
        step write_hard python3 docs/perf/h100-2026-11-24-pyg/same_graph.py --dir "$DATA-hard" \
            --signal 0.01 --homophily 0.2 --skip-pyg
        for p in $PRECISIONS; do
            step "hard_gcn_2x128_$p" /tmp/bin/train_reddit --data-dir "$DATA-hard" --model gcn \
                --layers 2 --hidden 128 --epochs 200 --no-baseline --precision "$p" \
                --json "$R/hard_gcn_2x128_$p.json"
        done ;;
    seeds)
        # More seeds of a model on the same files (SEED_LIST, default "1 2"; seed 0 is "same").
        [ -d "$DATA" ] || step write python3 docs/perf/h100-2026-11-24-pyg/same_graph.py --dir "$DATA" --skip-pyg
        for m in $MODELS; do
            set -- $(echo "$m" | tr '_x' '  '); kind=$1; layers=$2; hidden=$3
            for p in $PRECISIONS; do
                for sd in ${SEED_LIST:-1 2}; do
                    step "ours_${m}_${p}_seed$sd" /tmp/bin/train_reddit --data-dir "$DATA" \
                        --model "$kind" --layers "$layers" --hidden "$hidden" --epochs 60 \
                        --no-baseline --precision "$p" --seed "$sd" --json "$R/ours_${m}_${p}_seed$sd.json"
                done
            done
        done ;;
    infer)
        # Exact inference of the last saved GCN in each precision (the weights train_reddit
        # wrote under runs/weights).
        for p in $PRECISIONS; do
            step "infer_gcn_$p" /tmp/bin/infer --weights runs/weights/gcn-reddit \
                --data-dir "$DATA" --precision "$p" --out "$R/infer_$p"
        done ;;
    esac
done
