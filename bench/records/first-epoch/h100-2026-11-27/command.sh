#!/usr/bin/env bash
# Device call 1: first-run JIT before/after, gpu_check, spmm + sddmm suites.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
(cd .dev/bin && for f in *.xz; do [ -f "${f%.xz}" ] || xz -dk "$f"; chmod +x "${f%.xz}"; done)
B=.dev/bin
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee $OUT/gpu.txt
mkdir -p $OUT/jit
for mode in cold-nocache cold-warmup warm; do
  case $mode in
    cold-nocache) export CUDA_CACHE_DISABLE=1; unset CUDA_CACHE_PATH ;;
    cold-warmup) unset CUDA_CACHE_DISABLE; export CUDA_CACHE_PATH=/tmp/jit-fresh; rm -rf /tmp/jit-fresh ;;
    warm) unset CUDA_CACHE_DISABLE; export CUDA_CACHE_PATH=/tmp/jit-fresh ;;
  esac
  for m in gat gcn; do
    s=$(date +%s.%N)
    $B/train_cora --model $m --seeds 1 --epochs 30 --json $OUT/jit/cora-$m-$mode.json > $OUT/jit/cora-$m-$mode.log 2>&1
    echo "$mode $m rc=$? wall $(echo "$(date +%s.%N) - $s" | bc) s"
  done
done
unset CUDA_CACHE_DISABLE CUDA_CACHE_PATH
tar czf $OUT/jit.tgz -C $OUT jit && rm -rf $OUT/jit
timeout 240 $B/gpu_check --json $OUT/gpu_check.json > $OUT/gpu_check.log 2>&1; echo "gpu_check rc=$?"; tail -4 $OUT/gpu_check.log
for s in spmm sddmm; do timeout 150 python3 bench/run.py $s --pack $OUT/$s.tar.gz > $OUT/$s.log 2>&1; echo "$s rc=$?"; tail -22 $OUT/$s.log; done
