#!/usr/bin/env bash
# Issue 15: where MaxK-32 GCN 4x256's bf16 epoch goes, kernel by kernel. Nsight Compute times
# every kernel (gpu__time_duration only, clocks left alone) of two train_reddit runs that
# differ only in epoch count (3 and 6, one evaluation at the end of each); the per-kernel
# difference / 3 is one training epoch (scripts/census.py). Also (PLAN gin): GIN ReLU and
# MaxK-32 with the hard graph's GIN recipe on the generated graph.
set -uo pipefail
R=/tmp/census/run
source scripts/device-lib.sh
S=(--scale 1 --layers 4 --hidden 256 --no-baseline --precision bf16 --residual --dropout 0.2
   --eval-every 100)
MAXK=(--maxk 32 --maxk-after-first)
census() { # name, epochs, then train_reddit flags
    local name=$1 e=$2; shift 2
    step "$name" timeout -s KILL 280 ncu --clock-control none --metrics gpu__time_duration.sum \
        -o "$R/$name" /tmp/bin/train_reddit "${S[@]}" --epochs "$e" "$@"
    step "${name}_csv" ncu -i "$R/$name.ncu-rep" --csv --page raw \
        --metrics gpu__time_duration.sum
    rm -f "$R/$name.ncu-rep"; pack
}
for p in ${PLAN:-warm maxk}; do
case $p in
warm) step warm_jit timeout -s KILL 200 /tmp/bin/train_reddit --scale 0.05 --epochs 2 --no-baseline \
        --precision bf16 --maxk 32 --maxk-after-first --layers 3 ;;
maxk)
    step maxk_plain timeout -s KILL 120 /tmp/bin/train_reddit "${S[@]}" --epochs 30 "${MAXK[@]}" \
        --json "$R/maxk_plain.json"
    census maxk_e3 3 "${MAXK[@]}"
    census maxk_e6 6 "${MAXK[@]}" ;;
relu)
    census relu_e3 3
    census relu_e6 6 ;;
gin)
    G=(--scale 1 --layers 4 --hidden 256 --no-baseline --precision bf16 --model gin --residual
       --gin-norm --lr 0.001 --epochs 200)
    step gin_relu timeout -s KILL 150 /tmp/bin/train_reddit "${G[@]}" --json "$R/gin_relu.json"
    step gin_maxk timeout -s KILL 150 /tmp/bin/train_reddit "${G[@]}" --maxk 32 --maxk-after-first \
        --dropout 0.2 --json "$R/gin_maxk.json" ;;
esac
done
