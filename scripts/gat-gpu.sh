#!/usr/bin/env bash
# GAT and the graph transformer on the GPU (issue 14, part; docs/perf/h100-2026-11-24-attention/
# gat, .../transformer): the GAT paper's Cora recipe over 5 seeds, and 2 x (8 heads x 8) on the
# Reddit-shaped graph for a few epochs (functional runs with their breakdowns; no peer yet).
# SKIP_GAT=1 runs the transformer steps only. Expects xz-compressed release
# binaries (built with `--features cuda`) in .dev/bin: train_cora, train_reddit.
set -uo pipefail
R=/tmp/gat/run
source scripts/device-lib.sh
[ -n "${SKIP_GAT:-}" ] || step cora_gat /tmp/bin/train_cora --model gat --hidden 64 --heads 8 --dropout 0.6 --lr 0.005 \
    --seeds 5 --no-save --json "$R/cora_gat.json"
[ -n "${SKIP_GAT:-}" ] || step reddit_gat /tmp/bin/train_reddit --model gat --hidden 64 --heads 8 --epochs ${EPOCHS:-10} \
    --no-baseline --json "$R/reddit_gat.json" --save "$R/gat-reddit"
step cora_transformer /tmp/bin/train_cora --model transformer --hidden 64 --heads 8 --dropout 0.6 \
    --lr 0.005 --seeds 5 --no-save --json "$R/cora_transformer.json"
step reddit_transformer /tmp/bin/train_reddit --model transformer --hidden 64 --heads 8 \
    --epochs ${EPOCHS:-10} --no-baseline --json "$R/reddit_transformer.json" --save "$R/tr-reddit"
rm -f "$R"/gat-reddit.safetensors "$R"/tr-reddit.safetensors
pack
