#!/usr/bin/env bash
# Issue 15: GE-SpMM's narrow-row kernel over the graph sweep (bench_graphs: row kernel, narrow,
# HP-SpMM, the dispatcher's pick timed as it runs, cuSPARSE) at the narrow widths, to set the
# dispatcher's rule beyond the Reddit-shaped graph. PLAN "graphs" (the first call, before the
# rule used this data: docs/perf/h100-2026-11-25-narrow-graphs/first-rule); PLAN "check graphs
# heads" after. Binaries in .dev/bin: bench_graphs, gpu_check (--features cuda).
set -uo pipefail
R=/tmp/narrowgraphs/run
source scripts/device-lib.sh
for p in ${PLAN:-graphs}; do
case $p in
check) step gpu_check timeout -s KILL 300 /tmp/bin/gpu_check --seed 0 --json "$R/gpu_check.json" ;;
graphs) step graphs timeout -s KILL 400 /tmp/bin/bench_graphs --k 1,4,8,16,32,41,64 --reps 10 \
    --only cora,reddit@0.01,reddit@0.05,reddit@0.2,reddit@0.5,flat@,skewed@,sparse- --out "$R/graphs" ;;
heads) step heads timeout -s KILL 300 /tmp/bin/bench_graphs --k 1,4,8 --reps 10 --heads 8 \
    --only reddit@0.05,reddit@0.2 --out "$R/heads" ;;
esac
done
