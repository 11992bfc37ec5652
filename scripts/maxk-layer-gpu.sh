#!/usr/bin/env bash
# Issue 15: a MaxK-GNN GCN hidden layer as one op from its input (LinearProduct::maxk +
# dropout + MaxkProduct::aggregate) instead of matmul_nt -> maxk -> dropout -> SpGEMM with a
# fused bias/residual. gpu_check first (the new op against the composed ops on the GPU, f32 /
# bf16 / f16, and against the CPU in f32; the dropout launchers' shared dtype dispatch), then
# the MaxK-32 recipe GCN 4x256 (residual, dropout 0.2, MaxK after the first layer, cosine lr
# 0.007 over 40 epochs) at scale 1, bf16 and f32, before (the previous commit's build,
# .dev/prev/train_reddit_prev.xz) and after, alternating, two rounds. Same generated graph.
# Binaries in .dev/bin: gpu_check, train_reddit. One H100/H200.
set -uo pipefail
R=/tmp/maxklayer/run
source scripts/device-lib.sh
[ -x /tmp/bin/train_reddit_prev ] || { xz -dc .dev/prev/train_reddit_prev.xz > /tmp/bin/train_reddit_prev && chmod +x /tmp/bin/train_reddit_prev; }
unset RUST_BACKTRACE RUST_LIB_BACKTRACE
M=(--scale 1 --seed 0 --no-baseline --layers 4 --hidden 256 --residual --dropout 0.2
   --maxk 32 --maxk-after-first --lr 0.007 --lr-schedule cosine --epochs 40)
for p in ${PLAN:-check time}; do
case $p in
check) step gpu_check timeout -s KILL 240 /tmp/bin/gpu_check --seed 0 --json "$R/gpu_check.json" ;;
time)
    for round in 1 2; do
        for prec in bf16 f32; do
            for b in train_reddit_prev train_reddit; do
                n="${b}_${prec}_r${round}"
                step "$n" timeout -s KILL 120 /tmp/bin/$b "${M[@]}" --precision "$prec" --json "$R/$n.json"
            done
        done
    done ;;
esac
done
for f in "$R"/train_reddit*_r*.log; do echo "== $(basename "$f")"; grep -m4 "epoch total\|peak device memory allocated\|test acc\|to accuracy" "$f"; done
