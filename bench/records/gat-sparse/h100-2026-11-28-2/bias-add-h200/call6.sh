#!/usr/bin/env bash
# Session 18, call 6 (one H200, the last ~300 s of the budget): gnn_kernels::bias_add (the
# bias gradient as one GEMM row instead of candle's dim-0 sum) in GAT's output layer. base =
# .dev/base (730c015's tree), bin = .dev/bin (ae2da6e + bias_add), alternating, GAT 2x64 on
# the gat-sparse files, 20 epochs, seed 0, profiled. Results are written as they come.
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
R=$OUT/s18c6; mkdir -p $R; cat .dev/GIT_HEAD .dev/base/GIT_HEAD | tee $R/heads.txt
for d in bin base; do for f in .dev/$d/*.xz; do xz -dkf "$f"; chmod +x "${f%.xz}"; done; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/gpu.txt
timeout 100 python3 bench/run.py gat-sparse --graphs-only --out /tmp/rec0 > $R/graph-hd50.log 2>&1; echo "graph rc $? t=$(el)"
n=0
for prec in bf16 bf16 f32; do for side in base bin; do n=$((n+1))
  [ $(el) -gt 200 ] && break 2
  timeout 40 .dev/$side/train_reddit --data-dir /tmp/gnn-bench/same-graph-hd50 --model gat --layers 2 --hidden 64 --heads 8 \
    --precision $prec --epochs 20 --no-input-cache --seed 0 --no-baseline --json $R/hd50-$side-$prec-run$n.json --save /tmp/w > $R/hd50-$side-$prec-run$n.log 2>&1
  echo "== hd50 $side $prec rc $? $(grep -E 'median epoch' $R/hd50-$side-$prec-run$n.log | head -1 | sed 's/.*test/test/')"
  grep -E "^backward dense" $R/hd50-$side-$prec-run$n.log | head -1
done; done
echo total $(el) s
