#!/usr/bin/env bash
# After a refactor of the cuSPARSE SDDMM peer and of the attention layers (no kernel change):
# the peer still agrees with HP-SDDMM, and GAT / the transformer give seed 0's Cora results of
# docs/perf/h100-2026-11-24-attention (GAT 82.6 %, transformer 81.7 %). Binaries in .dev/bin:
# bench_sddmm, train_cora.
set -uo pipefail
R=/tmp/refactor/run
source scripts/device-lib.sh
step bench_sddmm /tmp/bin/bench_sddmm --k 32,128 --reps 5 --json "$R/bench_sddmm.json"
step cora_gat /tmp/bin/train_cora --model gat --hidden 64 --heads 8 --dropout 0.6 --lr 0.005 \
    --seeds 1 --no-save --json "$R/cora_gat.json"
step cora_transformer /tmp/bin/train_cora --model transformer --hidden 64 --heads 8 \
    --dropout 0.6 --lr 0.005 --seeds 1 --no-save --json "$R/cora_transformer.json"
