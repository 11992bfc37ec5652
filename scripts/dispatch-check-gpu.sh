#!/usr/bin/env bash
# After the SpMM dispatcher got its rule (issue 14; docs/perf/h100-2026-11-24-hp-spmm/dispatch):
# gpu_check seed 1 (every op, the dispatcher's own choice included), bench_graphs on a few
# graphs (the "pick" column now follows the rule), GAT 5 seeds on Cora with the paper's recipe
# (fused attention op; Cora runs HP-SpMM everywhere), and GCN / GAT on the Reddit-shaped graph.
set -uo pipefail
R=/tmp/dispatch/run
source scripts/device-lib.sh
step gpu_check_seed1 /tmp/bin/gpu_check --seed 1 --reddit-scale 0 --json "$R/gpu_check_seed1.json"
step bench_graphs /tmp/bin/bench_graphs --only cora,reddit@0.01,sparse-1M,reddit@1 --k 16,64,128 --out "$R/graphs"
step cora_gat /tmp/bin/train_cora --model gat --hidden 64 --heads 8 --dropout 0.6 --lr 0.005 \
    --seeds 5 --no-save --json "$R/cora_gat.json"
step reddit_gcn /tmp/bin/train_reddit --epochs 60 --no-baseline --json "$R/reddit_gcn.json"
step reddit_gat /tmp/bin/train_reddit --model gat --hidden 64 --heads 8 --activation elu --att-dropout 0.5 \
    --epochs 20 --no-baseline --json "$R/reddit_gat.json"
