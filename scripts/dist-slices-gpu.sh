#!/usr/bin/env bash
# Issue 16: the partitioned aggregation with the local graph in column slices (default,
# --gather-slice-rows 262144) against the whole local graph (--gather-slice-rows 0), and the
# one-GPU run, GCN 4x256 bf16 at Reddit-shaped scale 4, on the same machine.
# Binaries in .dev/bin: train_reddit, train_dist (--features nccl). nvidia-h200-x2 (or H100 x2).
set -uo pipefail
R=/tmp/distslices/run
source scripts/device-lib.sh
unset RUST_BACKTRACE RUST_LIB_BACKTRACE
export NCCL_NVLS_ENABLE=0
G4=(--layers 4 --hidden 256 --residual --dropout 0.2 --precision bf16)
S=(--scale ${SCALE:-4} --epochs ${EPOCHS:-12} --eval-every 4 --seed 0)
step s4_gcn4_ranks2 timeout -s KILL 200 /tmp/bin/train_dist "${S[@]}" --nccl --ranks 2 "${G4[@]}" --json "$R/s4_gcn4_ranks2.json"
step s4_gcn4_whole_ranks2 timeout -s KILL 200 /tmp/bin/train_dist "${S[@]}" --nccl --ranks 2 --gather-slice-rows 0 "${G4[@]}" --json "$R/s4_gcn4_whole_ranks2.json"
step s4_gcn4_single timeout -s KILL 200 /tmp/bin/train_reddit "${S[@]}" --no-baseline "${G4[@]}" --json "$R/s4_gcn4_single.json"
step compare python3 scripts/dist-compare.py "$R"
step table python3 scripts/dist-table.py "$R"
