#!/usr/bin/env bash
# Session 17, call 7 (one H100): GAT's row term D = <dout, out> inside the rows pass (no
# candle cast/multiply/sum chain). gpu_check of .dev/bin (5132222+dirty); GAT 2x64 bf16 and
# f32 base (.dev/base, 2647919) vs bin, alternating, on the gat-sparse files (same_graph.py
# --half-deg 50, 23.2 M non-zeros) and bf16 on the generated Reddit-shaped graph.
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
R=$OUT/s17c7; mkdir -p $R; cat .dev/GIT_HEAD .dev/base/GIT_HEAD
for d in bin base; do for f in .dev/$d/*.xz; do xz -dkf "$f"; chmod +x "${f%.xz}"; done; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/gpu.txt; cat $R/gpu.txt
timeout 200 .dev/bin/gpu_check --reddit-scale 0 --json $R/gpu_check.json > $R/gpu_check.log 2>&1
echo "== gpu_check rc $? t=$(el); gat ok: $(grep gat_aggregate $R/gpu_check.log | grep -c ok)"; grep MISS $R/gpu_check.log | head; tail -1 $R/gpu_check.log
timeout 120 python3 bench/run.py gat-sparse --graphs-only --out /tmp/rec0 > $R/graph.log 2>&1; echo "graph rc $? t=$(el)"
n=0
for prec in bf16 f32; do for side in base bin base bin; do n=$((n+1))
  timeout 60 .dev/$side/train_reddit --data-dir /tmp/gnn-bench/same-graph-hd50 --model gat --layers 2 --hidden 64 --heads 8 \
    --precision $prec --epochs 20 --no-input-cache --seed 0 --no-baseline --json $R/hd50-$side-$prec-run$n.json --save /tmp/w > $R/hd50-$side-$prec-run$n.log 2>&1
  echo "== hd50 $side $prec rc $?"; grep -E "median epoch|backward dense" $R/hd50-$side-$prec-run$n.log | head -2
done; done
for side in base bin base bin; do n=$((n+1))
  timeout 60 .dev/$side/train_reddit --model gat --layers 2 --hidden 64 --heads 8 --precision bf16 --epochs 20 --seed 0 \
    --no-baseline --json $R/reddit-$side-bf16-run$n.json --save /tmp/w > $R/reddit-$side-bf16-run$n.log 2>&1
  echo "== reddit $side rc $?"; grep -E "median epoch|backward dense" $R/reddit-$side-bf16-run$n.log | head -2
done
cd $OUT && tar czf s17c7.tar.gz s17c7 && rm -rf s17c7; echo total $(el) s
