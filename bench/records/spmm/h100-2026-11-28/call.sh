#!/usr/bin/env bash
# Session 15 (one H100): the SpMM suite with the benchmarks' pool keeping freed memory, and
# one process before it with the driver's default (release threshold 0), same binary.
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
cat .dev/GIT_HEAD; nvidia-smi --query-gpu=name --format=csv,noheader
W=/tmp/s15s; rm -rf $W; mkdir -p $W/before
B=$(python3 -c "import sys; sys.path.insert(0,'bench'); import run; print(run.find_binary('.dev/bin','bench_spmm'))")
echo "binary $B"
GNN_CUDA_POOL_RELEASE_THRESHOLD=0 timeout 120 $B --scale 1 --k 16,32,64,128,256,602 --reps 20 --kernels --json $W/before/spmm-threshold0.json > $W/before/spmm-threshold0.log 2>&1; echo "before rc=$? t=$(el)"
echo "GNN_CUDA_POOL_RELEASE_THRESHOLD=0 $B --scale 1 --k 16,32,64,128,256,602 --reps 20 --kernels --json spmm-threshold0.json" > $W/before/command.txt
timeout 400 python3 bench/run.py spmm --machine h100 --out $W/rec --pack $W/spmm.tar.gz 2>&1 | tail -8; echo "suite t=$(el)"
grep -h "^ *\(f32\|bf16\) *128\|^ *\(f32\|bf16\) *256" $W/before/spmm-threshold0.log | head; echo ==; grep -h "^ *\(f32\|bf16\) *128\|^ *\(f32\|bf16\) *256" $W/rec/spmm/*/spmm-r1.log | head
cd $W && rm -rf rec && tar czf $OUT/s15-spmm.tar.gz . && ls -la $OUT; echo total $(el) s
