#!/usr/bin/env bash
# The README's CPU figures, re-measured with the README's own commands (see README.md here).
# Usage (repo root): bash docs/perf/cpu-2026-11-24/run.sh   -> logs and JSON in this folder
set -euo pipefail
D=docs/perf/cpu-2026-11-24
cargo build --release --example train_reddit --example train_cora
{ nproc; uname -m; grep -m1 'model name' /proc/cpuinfo || true; } > "$D/machine.txt"
# Main job, defaults (synthetic-reddit@0.2, GCN 2x128 + MLP baseline).
/usr/bin/time -v -o "$D/train_reddit.time" \
    cargo run --release --example train_reddit -- --json "$D/train_reddit.json" \
    > "$D/train_reddit.log" 2>&1
for spec in "gcn --seeds 5" "sage --seeds 10" \
            "gin --seeds 10 --hidden 64 --dropout 0.7 --weight-decay 1e-3" "mlp --seeds 3"; do
    set -- $spec; m=$1; shift
    cargo run --release --example train_cora -- --model "$m" "$@" --json "$D/cora_$m.json" > "$D/cora_$m.log" 2>&1
done
# The attention models on Cora (GAT paper's recipe; TransformerConv with the same).
cargo run --release --example train_cora -- --model gat --hidden 64 --heads 8 --dropout 0.6 \
    --lr 0.005 --seeds 5 --json "$D/gat_cora.json" > "$D/gat_cora.log" 2>&1
cargo run --release --example train_cora -- --model transformer --hidden 64 --heads 8 \
    --dropout 0.6 --lr 0.005 --seeds 5 --json "$D/transformer_cora.json" > "$D/transformer_cora.log" 2>&1
