#!/usr/bin/env bash
# Session 17, call 5 (one H100): (1) gpu_check of the 8-wide epilogue kernels
# (bias_relu_dropout_bits_v8, mask_bits_bwd_v8; .dev/bin at 54e05ca+dirty); (2) before/after,
# alternating: train_dist --ranks 1 GraphSAGE 3x256 bf16 (the lean layers) and train_reddit
# GCN 4x256 bf16 (LinearProduct epilogue), generated Reddit-shaped graph; base = .dev/base
# (train_reddit 3b0f974, train_dist 267b024: the same dense code); (3) the GAT rows of the
# harness at the new binary (gat-sparse: same_graph.py --half-deg 50, ours and PyG, 3 reps)
# and ncu on the gat_* kernels of one bf16 epoch there.
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
R=$OUT/s17c5; mkdir -p $R; W=/tmp/s17e; rm -rf $W; mkdir -p $W
cat .dev/GIT_HEAD .dev/base/GIT_HEAD
for d in bin base; do for f in .dev/$d/*.xz; do xz -dkf "$f"; chmod +x "${f%.xz}"; done; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/gpu.txt; cat $R/gpu.txt
timeout 200 .dev/bin/gpu_check --reddit-scale 0 --json $R/gpu_check.json > $R/gpu_check.log 2>&1
echo "== gpu_check rc $? t=$(el)"; grep -E "MISS" $R/gpu_check.log | head -8; tail -1 $R/gpu_check.log
grep -E "bias_relu_dropout|linear_bias|layer" $R/gpu_check.log | head -12
n=0
for side in base bin base bin; do
  n=$((n+1))
  timeout 100 .dev/$side/train_dist --dataset reddit --scale 1 --model sage --layers 3 --hidden 256 --precision bf16 \
    --ranks 1 --partition range --seed 0 --epochs 20 --json $R/sage-$side-run$n.json > $R/sage-$side-run$n.log 2>&1
  echo "== sage $side rc $?"; grep -E "ms/epoch$|backward dense|activation" $R/sage-$side-run$n.log | tail -3
  timeout 100 .dev/$side/train_reddit --model gcn --layers 4 --hidden 256 --precision bf16 --epochs 20 --seed 0 \
    --no-baseline --json $R/gcn-$side-run$n.json --save /tmp/w-$side > $R/gcn-$side-run$n.log 2>&1
  echo "== gcn $side rc $?"; grep -E "median epoch|activation|backward dense" $R/gcn-$side-run$n.log | head -3
done
echo "t=$(el)"
timeout 240 python3 bench/run.py gat-sparse --reps 3 --out $W/rec1 --pack $R/gat-sparse.tar.gz 2>&1 | tail -8; echo "gat-sparse t=$(el)"
M=gpu__time_duration.sum,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,lts__t_bytes.sum,dram__bytes_read.sum,launch__registers_per_thread
left=$(( 570 - $(el) )); [ $left -gt 40 ] && timeout $left ncu --clock-control none -k regex:gat_ --launch-count 8 --metrics $M \
  .dev/bin/train_reddit --data-dir /tmp/gnn-bench/same-graph-hd50 --model gat --layers 2 --hidden 64 --heads 8 \
  --precision bf16 --epochs 1 --no-input-cache --seed 0 --no-baseline --json $R/ncu.json --save /tmp/w > $R/ncu-hd50.txt 2>&1
echo "ncu rc $? t=$(el)"; grep -E "^  gat_|duration|warps_active|inst_executed" $R/ncu-hd50.txt | head -40
cd $OUT && tar czf s17c5.tar.gz s17c5 && rm -rf s17c5; echo total $(el) s
