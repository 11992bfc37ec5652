#!/usr/bin/env bash
# Issue 15: attention models in half precision. HP-SDDMM and the row SDDMM take bf16/f16
# features (fp32 products and sums, f32 scores); GAT's node scores come from one GEMM and its
# attention runs in fp32. gpu_check first (the half SDDMM rows against an f64 CPU run on the
# rounded features), then GAT and TransformerConv on Cora (the GAT paper's recipe, 5 seeds)
# and on the generated Reddit-shaped graph (scale 1, 8 heads x 8, EPOCHS epochs, seeds
# SEEDS) in f32, bf16 and f16. Binaries in .dev/bin: gpu_check, train_cora, train_reddit
# (--features nccl or cuda). One H100/H200. PLAN picks the parts (default "check cora reddit").
set -uo pipefail
R=/tmp/attnhalf/run
source scripts/device-lib.sh
unset RUST_BACKTRACE RUST_LIB_BACKTRACE
for p in ${PLAN:-check cora reddit}; do
case $p in
check) step gpu_check timeout -s KILL 300 /tmp/bin/gpu_check --seed 0 --json "$R/gpu_check.json" ;;
cora)
    for m in gat transformer; do
        for prec in ${PRECISIONS:-f32 bf16 f16}; do
            step "cora_${m}_$prec" timeout -s KILL 120 /tmp/bin/train_cora --model $m --hidden 64 --heads 8 \
                --dropout 0.6 --lr 0.005 --seeds 5 --precision "$prec" --no-save --json "$R/cora_${m}_$prec.json"
        done
    done ;;
reddit)
    for seed in ${SEEDS:-0}; do
        for m in gat transformer; do
            for prec in ${PRECISIONS:-f32 bf16 f16}; do
                n="reddit_${m}_${prec}_s$seed"
                step "$n" timeout -s KILL 150 /tmp/bin/train_reddit --model $m --hidden 64 --heads 8 --scale 1 \
                    --seed "$seed" --epochs "${EPOCHS:-40}" --no-baseline --precision "$prec" --json "$R/$n.json"
            done
        done
    done ;;
esac
done
