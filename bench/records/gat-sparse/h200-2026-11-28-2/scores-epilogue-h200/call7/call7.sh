#!/usr/bin/env bash
# Session 19, call 7 (one H200): (1) gpu_check of .dev/bin (0df6298 + the GAT scores passed to
# gat_aggregate in their [2, N, H] layout, its gradient returned in it: no narrows, pads or
# concatenations; and the review's fixes); (2) GAT 2x64 base (.dev/base: 0df6298) vs bin,
# alternating, bf16 and f32 on the gat-sparse files, 20 epochs, seed 0, profiled.
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
R=$OUT/s19c7; mkdir -p $R; cat .dev/GIT_HEAD .dev/base/GIT_HEAD | tee $R/heads.txt
for d in bin base; do for f in .dev/$d/*.xz; do xz -dkf "$f"; chmod +x "${f%.xz}"; done; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/gpu.txt; cat $R/gpu.txt
timeout 200 .dev/bin/gpu_check --reddit-scale 0 --json $R/gpu_check.json > $R/gpu_check.log 2>&1
echo "== gpu_check rc $? t=$(el); gat ok: $(grep gat_ $R/gpu_check.log | grep -c ok), bias_add ok: $(grep bias_add $R/gpu_check.log | grep -c ok)"; grep MISS $R/gpu_check.log | head; tail -1 $R/gpu_check.log
timeout 120 python3 bench/run.py gat-sparse --graphs-only --out /tmp/rec0 > $R/graph-hd50.log 2>&1; echo "graph hd50 rc $? t=$(el)"
A="--data-dir /tmp/gnn-bench/same-graph-hd50 --model gat --layers 2 --hidden 64 --heads 8 --no-input-cache --seed 0 --no-baseline"
n=0
for prec in bf16 f32 bf16 f32 bf16; do for side in base bin; do n=$((n+1))
  timeout 60 .dev/$side/train_reddit $A --precision $prec --epochs 20 --json $R/hd50-$side-$prec-run$n.json --save /tmp/w > $R/hd50-$side-$prec-run$n.log 2>&1
  echo "== hd50 $side $prec rc $? $(grep -E 'median epoch' $R/hd50-$side-$prec-run$n.log | head -1 | sed 's/.*test/test/')"
  grep -E "^aggregation|^backward dense" $R/hd50-$side-$prec-run$n.log | head -2
done; done
echo "t=$(el)"
cd $OUT && tar czf s19c7.tar.gz s19c7 && rm -rf s19c7; echo total $(el) s
