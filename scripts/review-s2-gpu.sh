#!/usr/bin/env bash
# Issue 15, review of the session's change (h100-2026-11-25-review-s2): the mended build
# (one drop-probability check in the dropout ops, one bias + ReLU + dropout epilogue helper in
# the models, one pool-attribute setter, the overall peak derived from the phase peaks) on
# the GPU: gpu_check, then GCN 4x256 f32 with the pool keeping freed memory (the default) and
# with GNN_CUDA_POOL_RELEASE_THRESHOLD=0, 20 epochs, evaluation every epoch; the figures to
# compare with h100-2026-11-25-eval-peak/call2 (keep: 4.91 GiB, ~82.6 ms; release0: 4.91 GiB,
# ~88-90 ms). Binaries: .dev/bin/{train_reddit,gpu_check}.
set -uo pipefail
R=/tmp/reviews2/run
source scripts/device-lib.sh
step gpu_check timeout -s KILL 200 /tmp/bin/gpu_check --seed 0 --json "$R/gpu_check.json"
A=(--scale 1 --no-baseline --model gcn --precision f32 --layers 4 --hidden 256 --epochs 20 --eval-every 1)
step keep timeout -s KILL 120 /tmp/bin/train_reddit "${A[@]}" --json "$R/keep.json"
step release0 env GNN_CUDA_POOL_RELEASE_THRESHOLD=0 timeout -s KILL 120 /tmp/bin/train_reddit "${A[@]}" --json "$R/release0.json"
step bad_env env GNN_CUDA_POOL_RELEASE_THRESHOLD=1G timeout -s KILL 60 /tmp/bin/train_reddit --scale 0.05 --epochs 1 --no-baseline
