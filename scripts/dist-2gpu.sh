#!/usr/bin/env bash
# Issue 16 on two GPUs (nvidia-h200-x2; NVLink multicast stays off): strong scaling of
# `train_dist --nccl --ranks 2` against single-GPU `train_reddit` on the same generated graph
# (scale SCALE, default 1), same seed and recipe, with the loss curves compared
# (scripts/dist-compare.py). Binaries in .dev/bin (built with --features nccl).
set -uo pipefail
R=/tmp/dist2/run
source scripts/device-lib.sh
unset RUST_BACKTRACE RUST_LIB_BACKTRACE
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi topo -m > "$R/topo.txt" 2>&1
PLAN=${PLAN:-warm gcn gcn4}
S=(--scale "${SCALE:-1}" --epochs 60 --seed 0)
one() { local name=$1; shift; step "$name" timeout -s KILL 200 /tmp/bin/train_reddit "${S[@]}" --no-baseline "$@" --json "$R/$name.json"; }
dist() { local name=$1; shift; step "$name" timeout -s KILL 200 /tmp/bin/train_dist "${S[@]}" --nccl "$@" --json "$R/$name.json"; }
for plan in $PLAN; do
case $plan in
warm) step warm_jit timeout -s KILL 150 /tmp/bin/train_dist --scale 0.05 --epochs 2 --nccl --ranks 2 --precision bf16 --json "$R/warm.json" ;;
gcn)
    one gcn_f32_single
    dist gcn_f32_ranks2 --ranks 2
    one gcn_bf16_single --precision bf16
    dist gcn_bf16_ranks2 --ranks 2 --precision bf16 ;;
gcn4)
    G=(--layers 4 --hidden 256 --residual --dropout 0.2 --precision bf16)
    one gcn4_bf16_single "${G[@]}"
    dist gcn4_bf16_ranks2 --ranks 2 "${G[@]}"
    one gcn4maxk_bf16_single "${G[@]}" --maxk 32 --maxk-after-first
    dist gcn4maxk_bf16_ranks2 --ranks 2 "${G[@]}" --maxk 32 --maxk-after-first ;;
sage)
    one sage_bf16_single --model sage --precision bf16
    dist sage_bf16_ranks2 --model sage --precision bf16 --ranks 2 ;;
esac
done
step compare python3 scripts/dist-compare.py "$R"
