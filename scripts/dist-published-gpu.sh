#!/usr/bin/env bash
# Issue 16: the setting of BNS-GCN's and PipeGCN's published Reddit examples (their READMEs,
# scripts/reddit.sh: GraphSAGE 4 layers x 256 hidden, LayerNorm between layers (their default),
# dropout 0.5 before every layer, Adam lr 0.01, 2 partitions;
# they train inductively on the training nodes' subgraph with the first layer's aggregation
# precomputed, BNS-GCN samples 10 % of the boundary nodes and PipeGCN uses stale halos). Ours:
# the same model on the whole Reddit-shaped graph (scale 1, transductive, exact halos), f32 as
# theirs, on one GPU (train_reddit, and train_dist with one rank) and on two over NCCL; bf16
# too. Binaries: .dev/bin/train_dist, train_reddit.
# nvidia-h200-x2 (or two H100s).
set -uo pipefail
R=/tmp/distpub/run
source scripts/device-lib.sh
unset RUST_BACKTRACE RUST_LIB_BACKTRACE
export NCCL_NVLS_ENABLE=0
M=(--model sage --layers 4 --hidden 256 --layer-norm --dropout 0.5 --input-dropout 0.5 --lr 0.01 --scale 1 --seed 0 --epochs ${EPOCHS:-60})
step warm_jit timeout -s KILL 150 /tmp/bin/train_dist --scale 0.05 --epochs 2 --nccl --ranks 2 --json "$R/warm.json"
for prec in ${PRECISIONS:-f32 bf16}; do
    n="sage4x256_${prec}_one_gpu"
    step "$n" timeout -s KILL 200 /tmp/bin/train_reddit "${M[@]}" --no-baseline --precision $prec --json "$R/$n.json"
    for ranks in 1 2; do
        n="sage4x256_${prec}_ranks$ranks"
        step "$n" timeout -s KILL 200 /tmp/bin/train_dist "${M[@]}" --nccl --ranks $ranks --precision $prec \
            --json "$R/$n.json"
    done
done
for f in "$R"/sage*.log; do echo "== $(basename "$f")"; grep -i -A4 "^rank  rows\|test acc\|median epoch\|ms/epoch" "$f" | tail -12; done
