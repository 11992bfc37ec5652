#!/usr/bin/env bash
# Issues 15/16: two GPUs against one, like for like at Reddit-shaped scale 4 now that the
# one-GPU SpMM walks its columns in L2-sized blocks too (the row kernel's column-blocked
# schedule): GCN 4x256 bf16, train_dist --nccl --ranks 2 (column slices + overlap, default;
# and --gather-slice-rows 0: the whole local graph, which the blocked schedule now walks in
# blocks, no overlap) and train_reddit on one of the same GPUs, same graph and seed.
# Binaries in .dev/bin: train_reddit, train_dist (--features nccl). nvidia-h200-x2.
set -uo pipefail
R=/tmp/distblocked/run
source scripts/device-lib.sh
unset RUST_BACKTRACE RUST_LIB_BACKTRACE
export NCCL_NVLS_ENABLE=0
G4=(--layers 4 --hidden 256 --residual --dropout 0.2 --precision bf16)
S=(--scale 4 --epochs ${EPOCHS4:-8} --eval-every 4 --seed 0)
step s4_gcn4_single timeout -s KILL 200 /tmp/bin/train_reddit "${S[@]}" --no-baseline "${G4[@]}" --json "$R/s4_gcn4_single.json"
step s4_gcn4_ranks2 timeout -s KILL 200 /tmp/bin/train_dist "${S[@]}" --nccl --ranks 2 "${G4[@]}" --json "$R/s4_gcn4_ranks2.json"
step s4_gcn4_whole_ranks2 timeout -s KILL 200 /tmp/bin/train_dist "${S[@]}" --nccl --ranks 2 --gather-slice-rows 0 "${G4[@]}" --json "$R/s4_gcn4_whole_ranks2.json"
step compare python3 scripts/dist-compare.py "$R"
step table python3 scripts/dist-table.py "$R"
grep -h "first epoch (gcn" "$R"/s4_gcn4_single.log
