#!/usr/bin/env bash
# Issue 16 after 95d237c: LinearProduct::bias_relu_dropout's backward (every partitioned GCN
# hidden layer) no longer returns gradients that record the products with its tracked inputs,
# which held each layer's `dz` ([n_local, 256]) until the weight's cast was differentiated.
# Two GPUs, GCN 4x256 bf16: per-rank peak at scale 1 before (.dev/prev/train_dist_prev.xz:
# 95d237c with the two detaches reverted) and after, alternating; scale 4 after; then the
# capacity probe under an 8 GiB limit per GPU (the last session's two-GPU limit: 3.125 trains,
# 3.25 fails), ascending until the first failure. Binaries: .dev/bin/train_dist. nvidia-h200-x2.
set -uo pipefail
R=/tmp/distdetach/run
source scripts/device-lib.sh
[ -x /tmp/bin/train_dist_prev ] || { xz -dc .dev/prev/train_dist_prev.xz > /tmp/bin/train_dist_prev && chmod +x /tmp/bin/train_dist_prev; }
unset RUST_BACKTRACE RUST_LIB_BACKTRACE
export NCCL_NVLS_ENABLE=0
G4=(--layers 4 --hidden 256 --residual --dropout 0.2 --precision bf16)
for p in ${PLAN:-warm s1 s4 lim}; do
case $p in
warm) step warm_jit timeout -s KILL 150 /tmp/bin/train_dist --scale 0.05 --epochs 2 --nccl --ranks 2 --precision bf16 --json "$R/warm.json" ;;
s1)
    S=(--scale 1 --epochs 30 --seed 0 --nccl --ranks 2); i=0
    for b in train_dist_prev train_dist train_dist_prev train_dist; do
        n="s1_gcn4_${b}_$((++i))"
        step "$n" timeout -s KILL 150 /tmp/bin/$b "${S[@]}" "${G4[@]}" --json "$R/$n.json"
    done ;;
s4)
    S=(--scale 4 --epochs 20 --seed 0 --nccl --ranks 2)
    step s4_gcn4_train_dist timeout -s KILL 280 /tmp/bin/train_dist "${S[@]}" "${G4[@]}" --json "$R/s4_gcn4_train_dist.json" ;;
lim)
    export GNN_CUDA_MEMORY_LIMIT_GIB=${LIMIT:-8}
    L=$GNN_CUDA_MEMORY_LIMIT_GIB
    for sc in ${DUAL_SCALES-3.25 3.5}; do
        S=(--scale "$sc" --epochs 2 --eval-every 2 --seed 0)
        step "lim${L}_s${sc}_ranks2" timeout -s KILL 240 /tmp/bin/train_dist "${S[@]}" --nccl --ranks 2 "${G4[@]}" --json "$R/lim${L}_s${sc}_ranks2.json" || break
    done
    unset GNN_CUDA_MEMORY_LIMIT_GIB ;;
esac
done
for f in "$R"/*.log; do echo "== $(basename "$f")"; grep -i -A3 "^rank  rows\|out of memory\|test acc" "$f"; done
