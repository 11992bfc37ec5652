#!/usr/bin/env bash
# GraphSAGE 4x256 and GCN 4x256 on the same-graph files after the PyG-default initialisation
# of SAGEConv / GIN / MLP linears (issue 15; docs/perf/h100-2026-11-24-memory/init). The
# graph is same_graph.py's default (seed 0: the files PyG trained on in ../samegraph runs).
# Binary in .dev/bin: train_reddit (--features cuda).
set -uo pipefail
R=/tmp/deepsage/run
source scripts/device-lib.sh
DATA=/tmp/deepsage/data
step write python3 docs/perf/h100-2026-11-24-pyg/same_graph.py --dir "$DATA" --skip-pyg
for m in "sage_4x256 --model sage" "gcn_4x256 --model gcn" "gin_4x256 --model gin"; do
    set -- $m; name=$1; shift
    step "ours_$name" /tmp/bin/train_reddit --data-dir "$DATA" "$@" --layers 4 --hidden 256 \
        --epochs 60 --no-baseline --json "$R/ours_$name.json"
done
