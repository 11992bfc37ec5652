#!/usr/bin/env bash
# Session 16, call 1 (one H100): the fused GAT aggregation against the head-expanded chain.
# gpu_check of the new binary (every op, the new one included), then GAT 2x64 (8 heads of 8)
# on the generated Reddit-shaped graph with the baseline binary (e92d147, .dev/base) and the
# new one, bf16 and f32, 20 epochs, profiled (per-phase breakdown).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib
R=$OUT/s16c1; mkdir -p $R
for d in bin base; do for f in .dev/$d/*.xz; do xz -dkf "$f"; chmod +x "${f%.xz}"; done; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/gpu.txt
echo "== gpu_check" ; date
.dev/bin/gpu_check --reddit-scale 0 --json $R/gpu_check.json > $R/gpu_check.log 2>&1; echo "gpu_check rc $?"
grep -i "gat_aggregate" $R/gpu_check.log | head -70
tail -5 $R/gpu_check.log
for prec in bf16 f32; do
  for side in base bin; do
    echo "== $side $prec"; date
    timeout 300 .dev/$side/train_reddit --model gat --layers 2 --hidden 64 --heads 8 --precision $prec \
      --epochs 20 --seed 0 --no-baseline --json $R/gat-$side-$prec.json --save /tmp/w-$side > $R/gat-$side-$prec.log 2>&1
    echo "rc $?"; grep -E "epoch|phase|aggregation|test|peak" $R/gat-$side-$prec.log | tail -25
  done
done
cd $OUT && tar czf s16c1.tar.gz s16c1 && rm -rf s16c1
