#!/usr/bin/env bash
# Issue 15's deep-models item (docs/perf/h100-2026-11-24-deep-hard): 4x256 models on the hard
# Reddit-shaped graph (same_graph.py --signal 0.01 --homophily 0.2), 200 epochs, against the
# 2x128 GCN's accuracy there (99.07 %, h100-2026-11-24-precision/final). Plain and with
# LayerNorm between layers; bf16 where the model has a half path (ReLU), f32 for MaxK.
# RUNS=plain (default), RUNS=residual (--residual) or RUNS=sage400 (GraphSAGE --residual
# for 400 epochs, and with --layer-norm). Binary in .dev/bin: train_reddit
# (--features cuda).
set -uo pipefail
R=/tmp/deephard/run
source scripts/device-lib.sh
DATA=/tmp/deephard/data
unset RUST_BACKTRACE RUST_LIB_BACKTRACE
step write python3 docs/perf/h100-2026-11-24-pyg/same_graph.py --dir "$DATA" --signal 0.01 \
    --homophily 0.2 --skip-pyg
RUNS=${RUNS:-plain}
if [ "$RUNS" = sage400 ]; then
  LIST=("sage_4x256_res_bf16_e400 --model sage --residual --precision bf16 --epochs 400"
        "sage_4x256_res_ln_bf16 --model sage --residual --layer-norm --precision bf16")
elif [ "$RUNS" = residual ]; then
  LIST=("gcn_4x256_res_bf16 --model gcn --residual --precision bf16"
        "sage_4x256_res_bf16 --model sage --residual --precision bf16"
        "gin_4x256_res_ln_bf16 --model gin --residual --layer-norm --precision bf16"
        "gcn_4x256_res_maxk32 --model gcn --residual --maxk 32"
        "sage_4x256_res_maxk32 --model sage --residual --maxk 32"
        "gin_4x256_res_ln_maxk32 --model gin --residual --layer-norm --maxk 32")
else
  LIST=("gcn_4x256_bf16 --model gcn --precision bf16"
        "gcn_4x256_ln_bf16 --model gcn --layer-norm --precision bf16"
        "sage_4x256_bf16 --model sage --precision bf16"
        "sage_4x256_ln_bf16 --model sage --layer-norm --precision bf16"
        "gin_4x256_ln_bf16 --model gin --layer-norm --precision bf16"
        "gcn_4x256_ln_maxk32 --model gcn --layer-norm --maxk 32"
        "sage_4x256_ln_maxk32 --model sage --layer-norm --maxk 32")
fi
for m in "${LIST[@]}"; do
    set -- $m; name=$1; shift
    case " $* " in *" --epochs "*) ep=() ;; *) ep=(--epochs 200) ;; esac
    step "$name" /tmp/bin/train_reddit --data-dir "$DATA" --layers 4 --hidden 256 \
        "${ep[@]}" "$@" --no-baseline --json "$R/$name.json"
done
