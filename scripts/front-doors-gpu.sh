#!/usr/bin/env bash
# Issue 13's GPU check of the front doors: the examples, now thin wrappers of gnn_train::run /
# sweep and gnn_kernels::verify / peer, run on the GPU and write what they wrote before.
# Expects xz-compressed release binaries (built with `--features cuda`) in .dev/bin:
# gpu_check, bench_spmm, bench_maxk, train_reddit, infer. Raw outputs go to
# $OUT/results.tar.gz (see docs/perf/h100-2026-11-24-front-doors/README.md).
set -uo pipefail
R=/tmp/front/run
source scripts/device-lib.sh
step gpu_check /tmp/bin/gpu_check --seed 0 --json "$R/gpu_check.json"
step bench_spmm /tmp/bin/bench_spmm --k 32,128 --reps 10 --json "$R/bench_spmm.json"
step bench_maxk /tmp/bin/bench_maxk --k 32 --reps 10 --out "$R/bench_maxk"
step train_reddit /tmp/bin/train_reddit --epochs 30 --json "$R/train_reddit.json" --save "$R/gcn-reddit"
step infer /tmp/bin/infer --dataset reddit --weights "$R/gcn-reddit" --sweep --widths 32,128 \
    --strategies bucket,aes --reps 5 --out "$R/infer"
rm -f "$R"/gcn-reddit.safetensors
pack
