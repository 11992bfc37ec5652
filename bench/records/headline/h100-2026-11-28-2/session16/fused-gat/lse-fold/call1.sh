#!/usr/bin/env bash
# Session 17, call 1 (one GPU): gpu_check of s16-lse-fold + head_dot (.dev/bin) and of main
# 12cb8ac (.dev/base; the tightened GAT bounds of 7223e1a); GAT 2x64 (8 heads of 8) on the
# generated Reddit-shaped graph, base vs bin, bf16 and f32, 20 epochs, alternating.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib
R=$OUT/s17c1; mkdir -p $R
for d in bin base; do for f in .dev/$d/*.xz; do xz -dkf "$f"; chmod +x "${f%.xz}"; done; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/gpu.txt; cat $R/gpu.txt
for side in bin base; do
  s=$(date +%s)
  timeout 240 .dev/$side/gpu_check --reddit-scale 0 --json $R/gpu_check-$side.json > $R/gpu_check-$side.log 2>&1
  echo "== gpu_check $side rc $? $(( $(date +%s) - s )) s; gat ok: $(grep gat_aggregate $R/gpu_check-$side.log | grep -c ok)"
  grep -E "MISS|miss" $R/gpu_check-$side.log | head -8; tail -2 $R/gpu_check-$side.log
done
for prec in bf16 f32; do
  for side in base bin base bin; do
    timeout 200 .dev/$side/train_reddit --model gat --layers 2 --hidden 64 --heads 8 --precision $prec \
      --epochs 20 --seed 0 --no-baseline --json $R/gat-$side-$prec-$RANDOM.json --save /tmp/w-$side > $R/last.log 2>&1
    echo "== $side $prec rc $?"; grep -E "median epoch|aggregation|peak device memory allocated|test acc" $R/last.log | head -5
  done
done
cp $R/last.log $R/gat-last.log
cd $OUT && tar czf s17c1.tar.gz s17c1 && rm -rf s17c1
