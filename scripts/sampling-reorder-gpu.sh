#!/usr/bin/env bash
# What node reordering does to ES/AES sampled inference (issue 14;
# docs/perf/h100-2026-11-24-sampling-reorder): trains GCN 2x128 and GraphSAGE 2x128 on the
# Reddit-shaped graph once (weights do not depend on node ids), then runs the inference sweep
# (ES Bucket, ES FastRand, AES at widths 16..512, f32 and INT8) on the same graph in the
# generator's random ids, renumbered by degree, RCM and Louvain, and in the generator's
# community order. Binaries in .dev/bin: train_reddit, infer (built with --features cuda).
set -uo pipefail
R=/tmp/sampreorder/run
source scripts/device-lib.sh
W=/tmp/sampreorder/weights
for m in gcn sage; do
    step "train_$m" /tmp/bin/train_reddit --model "$m" --no-baseline --save "$W/$m" \
        --json "$R/train_$m.json"
done
sweep() {
    local tag=$1; shift
    step "infer_$tag" /tmp/bin/infer --dataset reddit --weights "$W/gcn" --weights "$W/sage" \
        --sweep --widths 16,32,64,128,256,512 --reps 5 --out "$R/infer_$tag" "$@"
}
for o in ${ORDERS:-none degree rcm louvain}; do
    sweep "$o" --reorder "$o"
done
sweep community --community-order
