#!/usr/bin/env bash
# Where the first training epoch's seconds go (issue 15; docs/perf/h100-2026-11-24-memory):
# each model trains twice back to back on the same-graph files; the second run finds the
# driver's PTX JIT cache (~/.nv/ComputeCache) warm, so the difference in time to accuracy is
# the one-off JIT compile of the PTX modules (ours and candle's), the rest is per-process
# set-up. Binary in .dev/bin: train_reddit (--features cuda).
set -uo pipefail
R=/tmp/warmup/run
source scripts/device-lib.sh
DATA=/tmp/warmup/data
export CUDA_CACHE_MAXSIZE=4294967296
du -sh ~/.nv/ComputeCache > "$R/jit_cache_before.txt" 2>&1
step write python3 docs/perf/h100-2026-11-24-pyg/same_graph.py --dir "$DATA" --skip-pyg
for m in "sage_4x256 --model sage --layers 4 --hidden 256" "gcn_2x128 --model gcn"; do
    set -- $m; name=$1; shift
    for run in cold warm; do
        step "${name}_$run" /tmp/bin/train_reddit --data-dir "$DATA" "$@" --epochs 20 \
            --eval-every 1 --no-baseline --json "$R/${name}_$run.json"
    done
done
du -sh ~/.nv/ComputeCache > "$R/jit_cache_after.txt" 2>&1
