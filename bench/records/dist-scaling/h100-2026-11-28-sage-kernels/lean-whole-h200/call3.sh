#!/usr/bin/env bash
# Session 18, call 3 (one H200): lean layer forms on a whole graph. One binary (.dev/bin,
# 217dc10 + aligned features + ModelGraph::with_lean_layers, switched by GNN_LEAN_WHOLE for
# this experiment only): composed (unset) vs lean (set), alternating, 20 epochs, seed 0,
# profiled, generated Reddit-shaped graph.
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
R=$OUT/s18c3; mkdir -p $R; cat .dev/GIT_HEAD
for f in .dev/bin/*.xz; do xz -dkf "$f"; chmod +x "${f%.xz}"; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/gpu.txt; cat $R/gpu.txt
n=0
ab() { # name, args...
  local name=$1; shift
  for side in composed lean composed lean; do n=$((n+1))
    if [ $side = lean ]; then export GNN_LEAN_WHOLE=1; else unset GNN_LEAN_WHOLE; fi
    timeout 90 .dev/bin/train_reddit "$@" --epochs 20 --seed 0 --no-baseline --json $R/$name-$side-run$n.json --save /tmp/w > $R/$name-$side-run$n.log 2>&1
    echo "== $name $side rc $? $(grep -E 'median epoch' $R/$name-$side-run$n.log | head -1 | sed 's/.*test/test/')"
    grep -E "^aggregation|^activation|^backward dense|allocated" $R/$name-$side-run$n.log | head -4
  done; unset GNN_LEAN_WHOLE; echo "t=$(el)"; }
ab sage2x128-bf16 --model sage --layers 2 --hidden 128 --precision bf16
ab sage3x256-bf16 --model sage --layers 3 --hidden 256 --precision bf16
ab sage2x128-f32 --model sage --layers 2 --hidden 128 --precision f32
ab gcn2x128-bf16 --model gcn --layers 2 --hidden 128 --precision bf16
ab gcn2x128-bf16-nocache --model gcn --layers 2 --hidden 128 --precision bf16 --no-input-cache
ab gcn4x256-bf16 --model gcn --layers 4 --hidden 256 --precision bf16
cd $OUT && tar czf s18c3.tar.gz s18c3 && rm -rf s18c3; echo total $(el) s
