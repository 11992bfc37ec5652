#!/usr/bin/env bash
# Session 19, call 5 (one H200): ncu durations of every kernel, 3 epochs each, of .dev/bin
# (c48934e's code) on the generated Reddit-shaped graph: GCN 2x128 bf16 with and without the
# input cache, GraphSAGE-mean 2x128 bf16. To find work outside the SpMM, as call 2 did for GAT.
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
R=$OUT/s19c5; mkdir -p $R; cat .dev/GIT_HEAD | tee $R/heads.txt
for f in .dev/bin/train_reddit.xz; do xz -dkf "$f"; chmod +x "${f%.xz}"; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/gpu.txt
run() { name=$1; shift
  timeout 150 ncu --clock-control none --csv --metrics gpu__time_duration.sum .dev/bin/train_reddit "$@" --epochs 3 --seed 0 --no-baseline --no-profile --json $R/$name.json --save /tmp/w > $R/$name.csv 2> $R/$name.err
  echo "== $name rc $? t=$(el) kernels $(grep -c gpu__time $R/$name.csv)"; xz -9 $R/$name.csv; }
run gcn2x128-bf16 --model gcn --layers 2 --hidden 128 --precision bf16
run gcn2x128-bf16-nocache --model gcn --layers 2 --hidden 128 --precision bf16 --no-input-cache
run sage2x128-bf16 --model sage --layers 2 --hidden 128 --precision bf16
cd $OUT && tar czf s19c5.tar.gz s19c5 && rm -rf s19c5; echo total $(el) s
