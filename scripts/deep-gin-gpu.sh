#!/usr/bin/env bash
# Deep GIN on the same-graph files (issue 15's deep-models item; docs/perf/h100-2026-11-24-memory):
# GIN's sum over ~470 neighbours per layer diverges at 4 x 256 without normalisation; this
# tries LayerNorm between layers (--layer-norm), with ReLU and with MaxK-32, beside GIN 2x128.
# Binary in .dev/bin: train_reddit (--features cuda).
set -uo pipefail
R=/tmp/deepgin/run
source scripts/device-lib.sh
DATA=/tmp/deepgin/data
step write python3 docs/perf/h100-2026-11-24-pyg/same_graph.py --dir "$DATA" --skip-pyg
for m in "gin_2x128 --layers 2 --hidden 128" \
         "gin_4x256_ln --layers 4 --hidden 256 --layer-norm" \
         "gin_4x256_ln_maxk32 --layers 4 --hidden 256 --layer-norm --maxk 32"; do
    set -- $m; name=$1; shift
    step "ours_$name" /tmp/bin/train_reddit --data-dir "$DATA" --model gin "$@" --epochs 60 \
        --no-baseline --json "$R/ours_$name.json"
done
