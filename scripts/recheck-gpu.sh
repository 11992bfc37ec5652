#!/usr/bin/env bash
# Issue 15, after h100-2026-11-25-eval-peak: the paths the eval-peak runs did not exercise, on
# the GPU. (1) The partitioned trainer against single-GPU training (scripts/dist-gpu.sh plans
# gcn, gcndet, maxk, sage: in-process ranks, a one-rank NCCL communicator; loss curves compared
# by scripts/dist-compare.py), whose GCN layers now take LinearProduct and whose evaluations
# detach. (2) f16 training with loss scaling through LinearProduct: GCN 2x128 and 4x256 on the
# generated graph against bf16 and f32, 30 epochs. Binaries in .dev/bin: train_reddit,
# train_dist (--features nccl).
set -uo pipefail
PLAN="warm gcn gcndet maxk sage" bash scripts/dist-gpu.sh
R=/tmp/recheck/run
source scripts/device-lib.sh
for shape in 2x128 4x256; do
    for prec in f16 bf16 f32; do
        step "gcn_${shape}_$prec" timeout -s KILL 120 /tmp/bin/train_reddit --scale 1 --no-baseline \
            --layers "${shape%x*}" --hidden "${shape#*x}" --precision "$prec" --epochs 30 \
            --json "$R/gcn_${shape}_$prec.json"
    done
done
mkdir -p "$R/dist" && cp -r /tmp/dist/run/. "$R/dist/" && pack
