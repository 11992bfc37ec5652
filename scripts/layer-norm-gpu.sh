#!/usr/bin/env bash
# LayerNorm as one fused op each way (gnn_kernels::layer_norm) instead of candle's composed
# ops. gpu_check first (the fused op on the GPU in f32/bf16/f16 against the CPU op in f64),
# then the model that needs it (BNS-GCN's / PipeGCN's Reddit example: GraphSAGE 4x256 with
# LayerNorm, dropout 0.5 before every layer, Adam 0.01) on the generated Reddit-shaped graph
# (scale 1, 40 epochs, seed 0), the previous build (.dev/prev/train_reddit_prev.xz, the
# composed LayerNorm) against this one, alternating, f32 and bf16, two rounds.
# Binaries in .dev/bin: gpu_check, train_reddit (--features nccl or cuda). One H100/H200.
set -uo pipefail
R=/tmp/layernorm/run
source scripts/device-lib.sh
[ -x /tmp/bin/train_reddit_prev ] || { xz -dc .dev/prev/train_reddit_prev.xz > /tmp/bin/train_reddit_prev && chmod +x /tmp/bin/train_reddit_prev; }
unset RUST_BACKTRACE RUST_LIB_BACKTRACE
M=(--model sage --layers 4 --hidden 256 --layer-norm --dropout 0.5 --input-dropout 0.5 --lr 0.01
   --scale 1 --seed 0 --epochs 40 --no-baseline)
for p in ${PLAN:-check time}; do
case $p in
check) step gpu_check timeout -s KILL 300 /tmp/bin/gpu_check --seed 0 --json "$R/gpu_check.json" ;;
time)
    for round in 1 2; do
        for prec in f32 bf16; do
            for b in train_reddit_prev train_reddit; do
                n="${b}_${prec}_r${round}"
                step "$n" timeout -s KILL 120 /tmp/bin/$b "${M[@]}" --precision "$prec" --save "/tmp/w-$n" \
                    --json "$R/$n.json"
            done
        done
    done ;;
esac
done
grep -h "seed 0: test\|allocator" "$R"/train_reddit*.log
