#!/usr/bin/env bash
# Session 16, call 6 (one H100): the fused GAT kernels, second layout (edge groups of G lanes,
# 16-byte rows, 2-warp blocks). gpu_check; GAT 2x64 bf16/f32 new and baseline (e92d147);
# Nsight Compute on the gat_* kernels of one bf16 epoch.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib
R=$OUT/s16c6; mkdir -p $R
for d in bin base; do for f in .dev/$d/*.xz; do xz -dkf "$f"; chmod +x "${f%.xz}"; done; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/gpu.txt
.dev/bin/gpu_check --reddit-scale 0 --json $R/gpu_check.json > $R/gpu_check.log 2>&1; echo "gpu_check rc $?"
grep -E "gat_aggregate" $R/gpu_check.log | grep -c ok; grep -E "MISS" $R/gpu_check.log | head; tail -2 $R/gpu_check.log
for run in "bin bf16" "bin f32"; do
  set -- $run
  timeout 300 .dev/$1/train_reddit --model gat --layers 2 --hidden 64 --heads 8 --precision $2 \
    --epochs 20 --seed 0 --no-baseline --json $R/gat-$1-$2.json --save /tmp/w-$1 > $R/gat-$1-$2.log 2>&1
  echo "== $1 $2 rc $?"; grep -E "median epoch|aggregation|peak device memory allocated" $R/gat-$1-$2.log | head -4
done
M=gpu__time_duration.sum,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,lts__t_bytes.sum,dram__bytes_read.sum,launch__registers_per_thread
timeout 300 ncu --clock-control none -k regex:gat_ --launch-count 8 --metrics $M \
  .dev/bin/train_reddit --model gat --layers 2 --hidden 64 --heads 8 --precision bf16 --epochs 1 \
  --seed 0 --no-baseline --json $R/gat-ncu.json --save /tmp/w > $R/ncu.txt 2>&1
echo "ncu rc $?"
grep -E "^  gat_|duration|warps_active|inst_executed|lts__t|dram" $R/ncu.txt | head -60
cd $OUT && tar czf s16c6.tar.gz s16c6 && rm -rf s16c6
