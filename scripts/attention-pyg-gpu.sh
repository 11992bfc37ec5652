#!/usr/bin/env bash
# GAT and TransformerConv, ours vs PyG on the identical graph files, one device call (issue 14;
# docs/perf/h100-2026-11-24-attention-pyg). ../shared/anchors/same_graph.py (its verbatim
# copy docs/perf/h100-2026-11-24-pyg/same_graph.py) writes a Reddit-shaped graph in DGL's
# format with --skip-pyg; scripts/pyg_attention.py trains PyG's GATConv / TransformerConv on it and train_reddit
# --data-dir trains ours with the same recipe (2 layers, 8 heads x 8, ELU, dropout 0.5,
# attention dropout 0.5, Adam 0.01, eval every 5), EPOCHS epochs each. GRAPH_ARGS go to
# same_graph.py (--half-deg 250 is Reddit's density; --signal / --homophily its difficulty),
# TAG names the graph in the file names. Expects .dev/bin/train_reddit.xz.
set -uo pipefail
R=/tmp/attpyg/run
source scripts/device-lib.sh
TAG=${TAG:-250}
GRAPH_ARGS=${GRAPH_ARGS:---half-deg 250}
EPOCHS=${EPOCHS:-30}
DATA=/tmp/attpyg/data_$TAG
python3 -c "import torch, torch_geometric; print('torch', torch.__version__, 'pyg', torch_geometric.__version__)" >> "$R/gpu.txt" 2>&1
[ -f "$DATA/reddit_graph.npz" ] || step "write_$TAG" python3 docs/perf/h100-2026-11-24-pyg/same_graph.py \
    --dir "$DATA" $GRAPH_ARGS --skip-pyg
# SEEDS: initialisation / dropout seeds, both sides (the graph is the file's); KERNELS: our
# SpMM kernel choices (--spmm-kernel), each timed at the first seed only.
SEEDS=${SEEDS:-0}
KERNELS=${KERNELS:-auto}
first=${SEEDS%% *}
for m in ${MODELS:-gat transformer}; do
    for s in $SEEDS; do
        for kern in $KERNELS; do
            [ "$kern" = auto ] || [ "$s" = "$first" ] || continue
            sfx=$([ "$s" = 0 ] || echo "_s$s")$([ "$kern" = auto ] || echo "_$kern")
            step "ours_${m}_$TAG$sfx" /tmp/bin/train_reddit --data-dir "$DATA" --model "$m" --hidden 64 \
                --heads 8 --activation elu --att-dropout 0.5 --epochs "$EPOCHS" --no-baseline \
                --seed "$s" --spmm-kernel "$kern" --save "/tmp/attpyg/w_$m" --json "$R/ours_${m}_$TAG$sfx.json"
        done
        sfx=$([ "$s" = 0 ] || echo "_s$s")
        step "pyg_${m}_$TAG$sfx" python3 scripts/pyg_attention.py --dir "$DATA" --epochs "$EPOCHS" \
            --models "$m" --seed "$s" --out "$R/pyg_${m}_$TAG$sfx"
    done
done
