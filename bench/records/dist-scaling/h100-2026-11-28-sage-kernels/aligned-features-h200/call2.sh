#!/usr/bin/env bash
# Session 18, call 2 (one H200): features padded to 608 columns on CUDA (aligned cuBLAS rows).
# base = .dev/base (730bf55's tree), bin = .dev/bin (217dc10 + the padding change), alternating
# base/bin pairs, 20 epochs, seed 0, profiled; generated Reddit-shaped graph unless named;
# then the cuBLAS kernels of one GCN 2x128 bf16 epoch of each under ncu.
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
R=$OUT/s18c2; mkdir -p $R; cat .dev/GIT_HEAD .dev/base/GIT_HEAD
for d in bin base; do for f in .dev/$d/*.xz; do xz -dkf "$f"; chmod +x "${f%.xz}"; done; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/gpu.txt; cat $R/gpu.txt
timeout 120 python3 bench/run.py gat-sparse --graphs-only --out /tmp/rec0 > $R/graph-hd50.log 2>&1; echo "graph hd50 rc $? t=$(el)"
n=0
ab() { # name, args...
  local name=$1; shift
  for side in base bin base bin; do n=$((n+1))
    timeout 90 .dev/$side/train_reddit "$@" --epochs 20 --seed 0 --no-baseline --json $R/$name-$side-run$n.json --save /tmp/w > $R/$name-$side-run$n.log 2>&1
    echo "== $name $side rc $? $(grep -E 'median epoch' $R/$name-$side-run$n.log | head -1 | sed 's/.*test/test/')"
    grep -E "^GEMM \(forward\)|^backward dense" $R/$name-$side-run$n.log | head -2
  done; echo "t=$(el)"; }
ab gcn2x128-bf16 --model gcn --layers 2 --hidden 128 --precision bf16
ab gcn2x128-f32 --model gcn --layers 2 --hidden 128 --precision f32
ab gcn2x128-bf16-nocache --model gcn --layers 2 --hidden 128 --precision bf16 --no-input-cache
ab sage2x128-bf16 --model sage --layers 2 --hidden 128 --precision bf16
ab gat-hd50-bf16 --data-dir /tmp/gnn-bench/same-graph-hd50 --model gat --layers 2 --hidden 64 --heads 8 --precision bf16 --no-input-cache
ab gcn4x256-bf16 --model gcn --layers 4 --hidden 256 --precision bf16
for side in base bin; do
  left=$(( 580 - $(el) )); [ $left -lt 40 ] && break
  timeout $left ncu --clock-control none --csv --metrics gpu__time_duration.sum -k regex:"gemm|nvjet|cutlass|sm80|sm90" \
    .dev/$side/train_reddit --model gcn --layers 2 --hidden 128 --precision bf16 --epochs 2 --seed 0 --no-baseline \
    --json $R/ncu-$side.json --save /tmp/w > $R/ncu-gemm-$side.csv 2>&1
  echo "ncu $side rc $? t=$(el)"
done
cd $OUT && tar czf s18c2.tar.gz s18c2 && rm -rf s18c2; echo total $(el) s
