#!/usr/bin/env bash
# Issue 15: the last models into half precision. HP-SDDMM and the row SDDMM take bf16/f16
# features (fp32 products and sums, f32 scores); GAT's node scores come from one GEMM and its
# attention runs in fp32; max/min SpMM (GraphSAGE-pool) and its argmax backward take bf16/f16.
# gpu_check first (the half SDDMM and max/min rows against CPU runs on the rounded inputs),
# then GAT, TransformerConv (the GAT paper's Cora recipe) and GraphSAGE-pool (defaults) on
# Cora (SEEDS_CORA seeds) and on the generated Reddit-shaped graph (scale 1, EPOCHS epochs,
# seeds SEEDS; attention 8 heads x 8) in f32, bf16 and f16. Binaries in .dev/bin: gpu_check,
# train_cora, train_reddit (--features nccl or cuda). One H100/H200.
# PLAN picks the parts (default "check cora reddit"); MODELS narrows the models.
set -uo pipefail
R=/tmp/attnhalf/run
source scripts/device-lib.sh
unset RUST_BACKTRACE RUST_LIB_BACKTRACE
flags() {
    case $1 in
    gat | transformer) echo "--hidden 64 --heads 8" ;;
    *) echo "" ;;
    esac
}
cora_flags() {
    case $1 in
    gat | transformer) echo "--hidden 64 --heads 8 --dropout 0.6 --lr 0.005" ;;
    *) echo "" ;;
    esac
}
for p in ${PLAN:-check cora reddit}; do
case $p in
check) step gpu_check timeout -s KILL 300 /tmp/bin/gpu_check --seed 0 --json "$R/gpu_check.json" ;;
cora)
    for m in ${MODELS:-gat transformer sage-pool}; do
        for prec in ${PRECISIONS:-f32 bf16 f16}; do
            step "cora_${m}_$prec" timeout -s KILL 120 /tmp/bin/train_cora --model $m $(cora_flags $m) \
                --seeds "${SEEDS_CORA:-10}" --precision "$prec" --no-save --json "$R/cora_${m}_$prec.json"
        done
    done ;;
reddit)
    for seed in ${SEEDS:-0}; do
        for m in ${MODELS:-gat transformer sage-pool}; do
            for prec in ${PRECISIONS:-f32 bf16 f16}; do
                n="reddit_${m}_${prec}_s$seed"
                step "$n" timeout -s KILL 150 /tmp/bin/train_reddit --model $m $(flags $m) --scale 1 \
                    --seed "$seed" --epochs "${EPOCHS:-40}" --no-baseline --precision "$prec" \
                    --save "$R/../w-$n" --json "$R/$n.json"
            done
        done
    done ;;
esac
done
