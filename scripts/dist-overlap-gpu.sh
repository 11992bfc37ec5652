#!/usr/bin/env bash
# Issue 16: the halo all-gather overlapped with the own block's slices (NCCL on its own stream;
# default) against the same slices run after the gather (--no-overlap) and the whole local
# graph (--gather-slice-rows 0: one SpMM after the gather), with the one-GPU run, same graph
# and seed. PLAN s1: GCN 4x256, GCN 2x128, GraphSAGE 2x128 at scale 1; PLAN s4: GCN 4x256 at
# scale 4. Binaries in .dev/bin: train_reddit, train_dist (--features nccl). nvidia-h200-x2.
set -uo pipefail
R=/tmp/distoverlap/run
source scripts/device-lib.sh
unset RUST_BACKTRACE RUST_LIB_BACKTRACE
export NCCL_NVLS_ENABLE=0
G4=(--layers 4 --hidden 256 --residual --dropout 0.2 --precision bf16)
G2=(--precision bf16)
SG=(--model sage --precision bf16)
for p in ${PLAN:-s1 s4}; do
case $p in
s1)
    S=(--scale 1 --epochs ${EPOCHS:-40} --seed 0)
    step s1_gcn4_single timeout -s KILL 120 /tmp/bin/train_reddit "${S[@]}" --no-baseline "${G4[@]}" --json "$R/s1_gcn4_single.json"
    step s1_gcn4_overlap_ranks2 timeout -s KILL 120 /tmp/bin/train_dist "${S[@]}" --nccl --ranks 2 "${G4[@]}" --json "$R/s1_gcn4_overlap_ranks2.json"
    step s1_gcn4_nooverlap_ranks2 timeout -s KILL 120 /tmp/bin/train_dist "${S[@]}" --nccl --ranks 2 --no-overlap "${G4[@]}" --json "$R/s1_gcn4_nooverlap_ranks2.json"
    step s1_gcn4_whole_ranks2 timeout -s KILL 120 /tmp/bin/train_dist "${S[@]}" --nccl --ranks 2 --gather-slice-rows 0 "${G4[@]}" --json "$R/s1_gcn4_whole_ranks2.json"
    step s1_gcn2_single timeout -s KILL 120 /tmp/bin/train_reddit "${S[@]}" --no-baseline "${G2[@]}" --json "$R/s1_gcn2_single.json"
    step s1_gcn2_overlap_ranks2 timeout -s KILL 120 /tmp/bin/train_dist "${S[@]}" --nccl --ranks 2 "${G2[@]}" --json "$R/s1_gcn2_overlap_ranks2.json"
    step s1_gcn2_whole_ranks2 timeout -s KILL 120 /tmp/bin/train_dist "${S[@]}" --nccl --ranks 2 --gather-slice-rows 0 "${G2[@]}" --json "$R/s1_gcn2_whole_ranks2.json"
    step s1_sage_single timeout -s KILL 120 /tmp/bin/train_reddit "${S[@]}" --no-baseline "${SG[@]}" --json "$R/s1_sage_single.json"
    step s1_sage_overlap_ranks2 timeout -s KILL 120 /tmp/bin/train_dist "${S[@]}" --nccl --ranks 2 "${SG[@]}" --json "$R/s1_sage_overlap_ranks2.json"
    step s1_sage_whole_ranks2 timeout -s KILL 120 /tmp/bin/train_dist "${S[@]}" --nccl --ranks 2 --gather-slice-rows 0 "${SG[@]}" --json "$R/s1_sage_whole_ranks2.json" ;;
s4)
    S=(--scale 4 --epochs ${EPOCHS4:-12} --eval-every 4 --seed 0)
    step s4_gcn4_overlap_ranks2 timeout -s KILL 200 /tmp/bin/train_dist "${S[@]}" --nccl --ranks 2 "${G4[@]}" --json "$R/s4_gcn4_overlap_ranks2.json"
    step s4_gcn4_nooverlap_ranks2 timeout -s KILL 200 /tmp/bin/train_dist "${S[@]}" --nccl --ranks 2 --no-overlap "${G4[@]}" --json "$R/s4_gcn4_nooverlap_ranks2.json"
    step s4_gcn4_single timeout -s KILL 200 /tmp/bin/train_reddit "${S[@]}" --no-baseline "${G4[@]}" --json "$R/s4_gcn4_single.json" ;;
esac
done
step compare python3 scripts/dist-compare.py "$R"
step table python3 scripts/dist-table.py "$R"
