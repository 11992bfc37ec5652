#!/usr/bin/env bash
# Issue 16 on one GPU (docs/perf/h100-2026-11-24-dist): the partitioned training path on the
# GPU against single-GPU training on the same generated graph, same seed, same dropout masks:
# `train_dist --ranks 2` (two in-process ranks sharing the GPU, halo rows exchanged as device
# tensors through channels) and `train_dist --nccl --ranks 1` (NCCL's init, grouped
# send/receive and all-reduce on a one-rank communicator) against `train_reddit`.
# Plan `allgather` checks the all-gather exchange the same way: in-process ranks (the
# communicator's exchange-based all-gather / reduce-scatter) and one NCCL process started as a
# multi-process run (RANK / WORLD_SIZE / --nccl-id-file; NCCL's all-gather and reduce-scatter
# on a one-rank communicator). Loss curves are compared by compare.py at the end. Binaries in
# .dev/bin: train_reddit, train_dist (both built with --features nccl).
set -uo pipefail
R=/tmp/dist/run
source scripts/device-lib.sh
unset RUST_BACKTRACE RUST_LIB_BACKTRACE
export NCCL_NVLS_ENABLE=0
PLAN=${PLAN:-warm gcn gcndet maxk maxkdet sage gin}
S=(--scale 0.2 --epochs 30 --seed 0)
one() { local name=$1; shift; step "$name" timeout -s KILL 150 /tmp/bin/train_reddit "${S[@]}" --no-baseline "$@" --json "$R/$name.json"; }
dist() { local name=$1; shift; step "$name" timeout -s KILL 150 /tmp/bin/train_dist "${S[@]}" "$@" --json "$R/$name.json"; }
for plan in $PLAN; do
case $plan in
warm) step warm_jit timeout -s KILL 150 /tmp/bin/train_reddit --scale 0.05 --epochs 2 --no-baseline --precision bf16 --maxk 32 --maxk-after-first --layers 3 --json "$R/warm.json" ;;
gcn)
    one gcn_single
    dist gcn_ranks2 --ranks 2
    dist gcn_nccl1 --nccl --ranks 1 ;;
gcndet)
    one gcndet_single --deterministic
    dist gcndet_ranks2 --ranks 2 --deterministic
    dist gcndet_ranks4 --ranks 4 --deterministic ;;
maxk)
    M=(--layers 3 --maxk 32 --maxk-after-first --precision bf16)
    one maxk_bf16_single "${M[@]}"
    one maxk_bf16_repeat "${M[@]}"
    dist maxk_bf16_ranks2 --ranks 2 "${M[@]}"
    dist maxk_bf16_nccl1 --nccl --ranks 1 "${M[@]}" ;;
maxkdet)
    M=(--layers 3 --maxk 32 --maxk-after-first --deterministic)
    one maxkdet_single "${M[@]}"
    one maxkdet_repeat "${M[@]}"
    dist maxkdet_ranks2 --ranks 2 "${M[@]}"
    dist maxkdet_ranks3 --ranks 3 "${M[@]}" ;;
sage)
    one sage_bf16_single --model sage --precision bf16
    dist sage_bf16_ranks3 --model sage --precision bf16 --ranks 3 ;;
gin)
    one gin_bf16_single --model gin --precision bf16
    dist gin_bf16_ranks2 --model gin --precision bf16 --ranks 2 ;;
allgather)
    proc() { # name, then train_dist flags: one process, rank 0 of 1, NCCL id through a file
        local name=$1; shift; rm -f "$R/$name.id"
        step "$name" env RANK=0 WORLD_SIZE=1 timeout -s KILL 150 /tmp/bin/train_dist "${S[@]}" \
            --nccl-id-file "$R/$name.id" "$@" --json "$R/$name.json"; }
    one gcn_single
    dist gcn_ag_ranks2 --ranks 2 --exchange allgather
    proc gcn_ag_proc1 --exchange allgather
    one gcndet_single --deterministic
    dist gcndet_ag_ranks4 --ranks 4 --deterministic --exchange allgather
    dist gcndet_auto_ranks3 --ranks 3 --deterministic
    one sage_bf16_single --model sage --precision bf16
    dist sage_bf16_ag_ranks3 --model sage --precision bf16 --ranks 3 --exchange allgather
    proc sage_bf16_ag_proc1 --model sage --precision bf16 --exchange allgather
    M=(--layers 3 --maxk 32 --maxk-after-first --deterministic)
    one maxkdet_single "${M[@]}"
    dist maxkdet_ag_ranks2 --ranks 2 "${M[@]}" --exchange allgather
    proc maxkdet_ag_proc1 "${M[@]}" --exchange allgather ;;
esac
done
step compare python3 scripts/dist-compare.py "$R"
