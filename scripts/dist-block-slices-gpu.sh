#!/usr/bin/env bash
# Issue 16: the partitioned aggregation's slices at scale 4 now that each SpMM walks a wide
# slice in L2-sized column blocks by itself: 2^18-row slices (the default, four per rank:
# three adds) against one slice per rank's block (--gather-slice-rows 1048576: two per rank,
# one add, each 466 K columns wide and walked in blocks), both with the overlap. GCN 4x256
# bf16, two GPUs, same graph and seed. Binaries in .dev/bin: train_dist (--features nccl).
set -uo pipefail
R=/tmp/distblockslices/run
source scripts/device-lib.sh
unset RUST_BACKTRACE RUST_LIB_BACKTRACE
export NCCL_NVLS_ENABLE=0
G4=(--layers 4 --hidden 256 --residual --dropout 0.2 --precision bf16)
S=(--scale 4 --epochs ${EPOCHS4:-8} --eval-every 4 --seed 0)
step s4_gcn4_s18_ranks2 timeout -s KILL 200 /tmp/bin/train_dist "${S[@]}" --nccl --ranks 2 "${G4[@]}" --json "$R/s4_gcn4_s18_ranks2.json"
step s4_gcn4_perblock_ranks2 timeout -s KILL 200 /tmp/bin/train_dist "${S[@]}" --nccl --ranks 2 --gather-slice-rows 1048576 "${G4[@]}" --json "$R/s4_gcn4_perblock_ranks2.json"
for f in "$R"/*_ranks2.json; do python3 - "$f" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for i, r in enumerate(d["ranks"]):
    ph = {b["phase"].split(" (")[0]: round(b["ms_per_epoch"], 2) for b in r["breakdown"]}
    print(sys.argv[1].split("/")[-1], "rank", i, "epoch", round(r["epoch_ms_median"], 1), ph,
          "peak GiB", round((r["peak_allocated_bytes"] or 0) / 2**30, 2), "test", d["test_acc"])
PY
done | tee "$R/digest.txt"
