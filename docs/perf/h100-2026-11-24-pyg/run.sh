#!/usr/bin/env bash
# Ours vs PyG 2.8 on one graph file set, one device call (see README.md here).
# same_graph.py (a verbatim copy of the team's anchor script) writes a Reddit-shaped graph in
# DGL's file format and trains PyG on it; train_reddit --data-dir then trains the same models
# on the same files. Needs .dev/bin/train_reddit.xz (built with --features cuda) carried.
# Usage (device): bash docs/perf/h100-2026-11-24-pyg/run.sh
set -uo pipefail
unset RUST_BACKTRACE RUST_LIB_BACKTRACE
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
WORK=/tmp/samegraph
R=$WORK/run
DATA=$WORK/data
mkdir -p "$R" "$DATA" /tmp/bin
[ -x /tmp/bin/train_reddit ] || { xz -dc .dev/bin/train_reddit.xz > /tmp/bin/train_reddit && chmod +x /tmp/bin/train_reddit; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$R/gpu.txt" 2>&1
log() { echo "[$(date +%T)] $*" | tee -a "$R/summary.txt"; }
pack() { tar -czf "$OUT/results.tar.gz" -C "$WORK" run; cp "$R/summary.txt" "$OUT/summary.txt"; }

# PyG: 60 epochs, Adam 0.01, dropout 0.5 after each hidden ReLU, evaluation every 5 epochs.
OUT=$R python3 "$HERE/same_graph.py" --dir "$DATA" --epochs 60 \
    --models gcn_2x128,sage_2x128,gcn_4x256,sage_4x256 > "$R/pyg.log" 2>&1
log "pyg exit $?: $(grep -c epoch_ms_median "$R/pyg.log") model lines"
pack
# Ours, the same recipe (train_reddit's defaults: dropout 0.5, no input dropout, no weight
# decay, Adam 0.01, eval every 5) on the same files.
for m in "gcn_2x128 --model gcn --layers 2 --hidden 128" \
         "sage_2x128 --model sage --layers 2 --hidden 128" \
         "gcn_4x256 --model gcn --layers 4 --hidden 256" \
         "sage_4x256 --model sage --layers 4 --hidden 256" \
         "gcn_4x256_maxk32 --model gcn --layers 4 --hidden 256 --maxk 32"; do
    set -- $m; name=$1; shift
    /tmp/bin/train_reddit --data-dir "$DATA" "$@" --epochs 60 --no-baseline \
        --json "$R/ours_$name.json" > "$R/ours_$name.log" 2>&1
    log "ours $name exit $?: $(grep 'median epoch' "$R/ours_$name.log")"
    pack
done
