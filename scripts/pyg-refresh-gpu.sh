#!/usr/bin/env bash
# Issue 15, after the narrow SpMM and the fusions (docs/perf/h100-2026-11-25-pyg): PyG 2.8 (GCN
# 2x128, GraphSAGE 2x128, GCN 4x256; 60 epochs) and ours on the same Reddit-shaped files, one
# call, our models as PyG's (train_reddit's defaults: ReLU, dropout 0.5, no skips) in bf16 and
# f32, plus our MaxK-32 recipe. Binaries in .dev/bin: train_reddit (--features cuda).
set -uo pipefail
R=/tmp/pygrefresh/run
source scripts/device-lib.sh
DATA=/tmp/pygrefresh/data
step pyg env OUT="$R" python3 docs/perf/h100-2026-11-24-pyg/same_graph.py --dir "$DATA" \
    --epochs 60 --models gcn_2x128,sage_2x128,gcn_4x256
for m in "gcn 2 128 bf16" "gcn 2 128 f32" "sage 2 128 bf16" "sage 2 128 f32" "gcn 4 256 bf16" \
         "gcn 4 256 f32"; do
    set -- $m
    step "ours_$1_$2x$3_$4" /tmp/bin/train_reddit --data-dir "$DATA" --model "$1" --layers "$2" \
        --hidden "$3" --precision "$4" --epochs 60 --no-baseline --json "$R/ours_$1_$2x$3_$4.json"
done
step ours_maxk32_bf16 /tmp/bin/train_reddit --data-dir "$DATA" --layers 4 --hidden 256 --maxk 32 \
    --maxk-after-first --residual --dropout 0.2 --precision bf16 --epochs 60 --no-baseline \
    --json "$R/ours_maxk32_bf16.json"
