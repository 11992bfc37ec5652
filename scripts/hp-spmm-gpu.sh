#!/usr/bin/env bash
# HP-SpMM, the fused GAT attention and the graph sweep on the GPU (issue 14;
# docs/perf/h100-2026-11-24-hp-spmm): gpu_check (every op; HP-SpMM and GE-SpMM forced, the
# fused GAT attention), then bench_graphs (21 graphs x K = 16..256, SpMM and SDDMM vs cuSPARSE,
# the HP-SpMM edges-per-group sweep). STEPS picks a subset (default: check graphs; also
# check1: seed 1 without the Reddit-scale graph, cora_gat / cora_transformer: 5 seeds on Cora; ONLY filters
# the graphs). Expects
# xz-compressed release binaries (built with `--features cuda`) in .dev/bin.
set -uo pipefail
R=/tmp/hpspmm/run
source scripts/device-lib.sh
for s in ${STEPS:-check graphs}; do
    case $s in
        check) step gpu_check_seed0 /tmp/bin/gpu_check --seed 0 --json "$R/gpu_check_seed0.json" ;;
        check1) step gpu_check_seed1 /tmp/bin/gpu_check --seed 1 --reddit-scale 0 --json "$R/gpu_check_seed1.json" ;;
        cora_gat) step cora_gat /tmp/bin/train_cora --model gat --hidden 64 --heads 8 --dropout 0.6 \
            --lr 0.005 --seeds 5 --no-save --json "$R/cora_gat.json" ;;
        cora_transformer) step cora_transformer /tmp/bin/train_cora --model transformer --hidden 64 \
            --heads 8 --dropout 0.6 --lr 0.005 --seeds 5 --no-save --json "$R/cora_transformer.json" ;;
        graphs) step bench_graphs /tmp/bin/bench_graphs --npw-sweep ${ONLY:+--only "$ONLY"} --out "$R/graphs" ;;
    esac
done
