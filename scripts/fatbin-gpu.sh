#!/usr/bin/env bash
# Issue 15: the driver's PTX JIT on a machine's first run, before (PTX modules) and after
# (fatbins with SASS for sm_90): train_reddit twice each, alternating, with the driver's JIT
# cache disabled (CUDA_CACHE_DISABLE=1) so that every process compiles whatever PTX it loads,
# as the first process on a fresh machine does; then gpu_check on the new build. GCN 4x256
# MaxK-32 bf16 (its first epoch loads most modules), generated graph at scale 0.2.
# Binaries: .dev/bin/{train_reddit,gpu_check}, .dev/prev/train_reddit_prev.
set -uo pipefail
R=/tmp/fatbin/run
source scripts/device-lib.sh
xz -dc .dev/prev/train_reddit_prev.xz > /tmp/bin/train_reddit_prev && chmod +x /tmp/bin/train_reddit_prev
T=(--scale 0.2 --no-baseline --precision bf16 --epochs 3 --eval-every 3 --layers 4 --hidden 256
   --residual --dropout 0.2 --maxk 32 --maxk-after-first)
for i in 1 2; do
    step "before_$i" env CUDA_CACHE_DISABLE=1 timeout -s KILL 200 /tmp/bin/train_reddit_prev "${T[@]}" --json "$R/before_$i.json"
    step "after_$i" env CUDA_CACHE_DISABLE=1 timeout -s KILL 200 /tmp/bin/train_reddit "${T[@]}" --json "$R/after_$i.json"
done
step gpu_check timeout -s KILL 300 /tmp/bin/gpu_check --seed 0 --json "$R/gpu_check.json"
