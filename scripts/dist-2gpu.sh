#!/usr/bin/env bash
# Issue 16 on two GPUs (nvidia-h200-x2; NVLink multicast stays off): strong scaling of
# `train_dist --nccl --ranks 2` against single-GPU `train_reddit` on the same generated graph
# (scale SCALE, default 1; seeds SEEDS for the GCN pairs), same seed and recipe, with the loss curves compared
# (scripts/dist-compare.py). Binaries in .dev/bin (built with --features nccl).
set -uo pipefail
R=/tmp/dist2/run
source scripts/device-lib.sh
unset RUST_BACKTRACE RUST_LIB_BACKTRACE
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi topo -m > "$R/topo.txt" 2>&1
PLAN=${PLAN:-warm gcn gcn4 sage}
SEEDS=${SEEDS:-0 1 2}
S=(--scale "${SCALE:-1}" --epochs "${EPOCHS:-60}")
T=${STEP_TIMEOUT:-200}
one() { local name=$1; shift; step "$name" timeout -s KILL "$T" /tmp/bin/train_reddit "${S[@]}" --no-baseline "$@" --json "$R/$name.json"; }
dist() { local name=$1; shift; step "$name" timeout -s KILL "$T" /tmp/bin/train_dist "${S[@]}" --nccl "$@" --json "$R/$name.json"; }
pair() { local name=$1; shift; one "${name}_single" "$@"; dist "${name}_ranks2" --ranks 2 "$@"; }
G4=(--layers 4 --hidden 256 --residual --dropout 0.2 --precision bf16)
for plan in $PLAN; do
case $plan in
warm) step warm_jit timeout -s KILL 150 /tmp/bin/train_dist --scale 0.05 --epochs 2 --nccl --ranks 2 --precision bf16 --json "$R/warm.json" ;;
gcn)
    for s in $SEEDS; do pair "gcn_bf16_s$s" --seed "$s" --precision bf16; done
    pair gcn_f32_s0 --seed 0 ;;
gcn4)
    for s in $SEEDS; do pair "gcn4_bf16_s$s" --seed "$s" "${G4[@]}"; done
    pair gcn4maxk_bf16_s0 --seed 0 "${G4[@]}" --maxk 32 --maxk-after-first ;;
sage) pair sage_bf16_s0 --seed 0 --model sage --precision bf16 ;;
gcn4only) pair gcn4_bf16_s0 --seed 0 "${G4[@]}" ;;
gcnonly) pair gcn_bf16_s0 --seed 0 --precision bf16 ;;
esac
done
step compare python3 scripts/dist-compare.py "$R"
step table python3 scripts/dist-table.py "$R"
