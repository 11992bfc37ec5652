#!/usr/bin/env bash
# GAT and the graph transformer on the GPU (issue 14, part; docs/perf/h100-2026-11-24-attention/
# gat, .../transformer): the GAT paper's Cora recipe over 5 seeds, and 2 x (8 heads x 8) on the
# Reddit-shaped graph for a few epochs (functional runs with their breakdowns; no peer yet).
# SKIP_GAT=1 runs the transformer steps only. Expects xz-compressed release
# binaries (built with `--features cuda`) in .dev/bin: train_cora, train_reddit.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
OUT=${OUT:-/tmp/out}
R=/tmp/gat/run
mkdir -p "$R" /tmp/bin
for f in .dev/bin/*.xz; do
    b=/tmp/bin/$(basename "$f" .xz)
    [ -x "$b" ] || { xz -dc "$f" > "$b" && chmod +x "$b"; }
done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$R/gpu.txt" 2>&1
pack() { tar -czf "$OUT/results.tar.gz" -C /tmp/gat run; }
step() {
    local name=$1; shift
    echo "[$(date +%T)] $name: $*" | tee -a "$R/summary.txt"
    "$@" > "$R/$name.log" 2>&1
    echo "[$(date +%T)] $name: exit $? | $(tail -n 2 "$R/$name.log" | tr '\n' ' ')" | tee -a "$R/summary.txt"
    pack
}
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
