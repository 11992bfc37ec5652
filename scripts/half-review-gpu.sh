#!/usr/bin/env bash
# Issue 15, after the review of the half-precision change: the SDDMM and sampled SpMM hosts now
# dispatch through FloatView (kernel names by storage prefix). gpu_check (every kernel row,
# half included), then a GAT trained on Cora in f32 (one seed, weights saved) served by `infer`
# in f32, bf16 and f16 (exact aggregation: the sampled ones refuse attention models).
# Binaries in .dev/bin: gpu_check, train_cora, infer (--features nccl or cuda). One H100/H200.
set -uo pipefail
R=/tmp/halfreview/run
source scripts/device-lib.sh
unset RUST_BACKTRACE RUST_LIB_BACKTRACE
step gpu_check timeout -s KILL 300 /tmp/bin/gpu_check --seed 0 --json "$R/gpu_check.json"
step cora_gat timeout -s KILL 60 /tmp/bin/train_cora --model gat --hidden 64 --heads 8 --dropout 0.6 --lr 0.005 \
    --seeds 1 --save /tmp/halfreview/gat-cora --json "$R/cora_gat.json"
for p in f32 bf16 f16; do
    step "infer_gat_$p" timeout -s KILL 60 /tmp/bin/infer --weights /tmp/halfreview/gat-cora --precision $p \
        --out "$R/infer_gat_$p"
done
grep -h "test\|accuracy" "$R"/infer_gat_*.log | head -20
