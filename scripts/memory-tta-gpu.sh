#!/usr/bin/env bash
# Issue 15 starting point (docs/perf/h100-2026-11-24-memory): gpu_check after the narrow-K
# dispatcher rule, then the same-graph comparison with PyG 2.8
# (docs/perf/h100-2026-11-24-pyg/run.sh: PyG's four models, then ours on the same files),
# whose reports now carry the allocator's peak (`peak_allocated_bytes`, comparable with PyG's
# max_memory_allocated) and the time to accuracy. Binaries in .dev/bin: gpu_check,
# train_reddit (built with --features cuda).
set -uo pipefail
R=/tmp/memtta/run
source scripts/device-lib.sh
step gpu_check_seed0 /tmp/bin/gpu_check --seed 0 --json "$R/gpu_check_seed0.json"
mkdir -p "$OUT/samegraph"
step samegraph env OUT="$OUT/samegraph" bash docs/perf/h100-2026-11-24-pyg/run.sh
