#!/usr/bin/env bash
# Issue 15: the row kernel's column-blocked schedule (one SpMM walking the columns in blocks of
# 2^18, no extra adds) on one GPU. gpu_check first (blocked schedules forced on small graphs
# against the CPU reference), then train_reddit GCN 4x256 bf16 at scale 4 (932 K columns: four
# blocks) with the built-in block against GNN_SPMM_COLUMN_BLOCK=0 (row schedule, as before),
# same graph and seed, and at scale 1 (233 K columns: one block, nothing changes) as a check.
# Binaries in .dev/bin: gpu_check, train_reddit (--features nccl or cuda). One H100/H200.
set -uo pipefail
R=/tmp/colblocked/run
source scripts/device-lib.sh
unset RUST_BACKTRACE RUST_LIB_BACKTRACE
G4=(--layers 4 --hidden 256 --residual --dropout 0.2 --precision bf16)
for p in ${PLAN:-check s4 s1}; do
case $p in
check) step gpu_check timeout -s KILL 240 /tmp/bin/gpu_check --json "$R/gpu_check.json" ;;
s4)
    S=(--scale 4 --epochs ${EPOCHS4:-8} --eval-every 4 --seed 0 --no-baseline)
    step s4_gcn4_blocked timeout -s KILL 200 /tmp/bin/train_reddit "${S[@]}" "${G4[@]}" --json "$R/s4_gcn4_blocked.json"
    GNN_SPMM_COLUMN_BLOCK=0 step s4_gcn4_rows timeout -s KILL 200 /tmp/bin/train_reddit "${S[@]}" "${G4[@]}" --json "$R/s4_gcn4_rows.json" ;;
s1)
    S=(--scale 1 --epochs 20 --seed 0 --no-baseline)
    step s1_gcn4_blocked timeout -s KILL 100 /tmp/bin/train_reddit "${S[@]}" "${G4[@]}" --json "$R/s1_gcn4_blocked.json"
    GNN_SPMM_COLUMN_BLOCK=0 step s1_gcn4_rows timeout -s KILL 100 /tmp/bin/train_reddit "${S[@]}" "${G4[@]}" --json "$R/s1_gcn4_rows.json" ;;
esac
done
grep -h "epoch total\|aggregation (SpMM\|peak device memory allocated\|test acc\|final loss" "$R"/s*_gcn4_*.log > "$R/digest.txt" 2>/dev/null
for f in "$R"/s*_gcn4_*.log; do echo "== $f"; grep -m3 "aggregation (SpMM\|epoch total\|peak device memory allocated" "$f"; done
