#!/usr/bin/env bash
# Issue 16, per-rank memory (next device session): the fused partitioned aggregation (one op,
# no local transpose, nothing gathered kept) against --split-aggregation (exchange + SpMM, the
# path measured in docs/perf/h200x2-2026-11-26-dist), on two GPUs, same graph and seed, plus
# the single-GPU reference; then (PLAN lim) the capacity of one GPU against two under a memory
# limit, or (PLAN cap) a probe at larger scales, few epochs; (PLAN check) gpu_check.
# Binaries in .dev/bin: train_reddit, train_dist (--features nccl), gpu_check for `check`.
# nvidia-h200-x2.
set -uo pipefail
R=/tmp/distmem/run
source scripts/device-lib.sh
unset RUST_BACKTRACE RUST_LIB_BACKTRACE
export NCCL_NVLS_ENABLE=0
G4=(--layers 4 --hidden 256 --residual --dropout 0.2 --precision bf16)
for p in ${PLAN:-warm s1 s4}; do
case $p in
warm) step warm_jit timeout -s KILL 150 /tmp/bin/train_dist --scale 0.05 --epochs 2 --nccl --ranks 2 --precision bf16 --json "$R/warm.json" ;;
s1)
    S=(--scale 1 --epochs 60 --seed 0)
    step s1_gcn4_single timeout -s KILL 150 /tmp/bin/train_reddit "${S[@]}" --no-baseline "${G4[@]}" --json "$R/s1_gcn4_single.json"
    step s1_gcn4_ranks2 timeout -s KILL 150 /tmp/bin/train_dist "${S[@]}" --nccl --ranks 2 "${G4[@]}" --json "$R/s1_gcn4_ranks2.json"
    step s1_gcn4_split_ranks2 timeout -s KILL 150 /tmp/bin/train_dist "${S[@]}" --nccl --ranks 2 --split-aggregation "${G4[@]}" --json "$R/s1_gcn4_split_ranks2.json"
    step s1_sage_single timeout -s KILL 150 /tmp/bin/train_reddit "${S[@]}" --no-baseline --model sage --precision bf16 --json "$R/s1_sage_single.json"
    step s1_sage_ranks2 timeout -s KILL 150 /tmp/bin/train_dist "${S[@]}" --nccl --ranks 2 --model sage --precision bf16 --json "$R/s1_sage_ranks2.json" ;;
s4)
    S=(--scale 4 --epochs 30 --seed 0)
    step s4_gcn4_ranks2 timeout -s KILL 280 /tmp/bin/train_dist "${S[@]}" --nccl --ranks 2 "${G4[@]}" --json "$R/s4_gcn4_ranks2.json"
    step s4_gcn4_split_ranks2 timeout -s KILL 280 /tmp/bin/train_dist "${S[@]}" --nccl --ranks 2 --split-aggregation "${G4[@]}" --json "$R/s4_gcn4_split_ranks2.json" ;;
lim)
    # Capacity under a memory limit (GNN_CUDA_MEMORY_LIMIT_GIB: each GPU behaves as a card of
    # LIMIT GiB): the largest scale that trains GCN 4x256 on one GPU against two. Each list
    # runs in ascending order until the first scale that fails (out of memory).
    export GNN_CUDA_MEMORY_LIMIT_GIB=${LIMIT:-8}
    L=$GNN_CUDA_MEMORY_LIMIT_GIB
    for sc in ${SINGLE_SCALES-2 2.25 2.5}; do
        S=(--scale "$sc" --epochs 2 --eval-every 2 --seed 0)
        step "lim${L}_s${sc}_single" timeout -s KILL 200 /tmp/bin/train_reddit "${S[@]}" --no-baseline "${G4[@]}" --json "$R/lim${L}_s${sc}_single.json" || break
    done
    for sc in ${DUAL_SCALES-3.5 3.75 4}; do
        S=(--scale "$sc" --epochs 2 --eval-every 2 --seed 0)
        step "lim${L}_s${sc}_ranks2" timeout -s KILL 240 /tmp/bin/train_dist "${S[@]}" --nccl --ranks 2 "${G4[@]}" --json "$R/lim${L}_s${sc}_ranks2.json" || break
    done
    unset GNN_CUDA_MEMORY_LIMIT_GIB ;;
check) step gpu_check timeout -s KILL 200 /tmp/bin/gpu_check ;;
cap)
    for sc in ${SCALES:-8}; do
        S=(--scale "$sc" --epochs 5 --eval-every 5 --seed 0)
        step "cap${sc}_ranks2" timeout -s KILL 560 /tmp/bin/train_dist "${S[@]}" --nccl --ranks 2 "${G4[@]}" --json "$R/cap${sc}_ranks2.json"
    done ;;
esac
done
step compare python3 scripts/dist-compare.py "$R"
step table python3 scripts/dist-table.py "$R"
