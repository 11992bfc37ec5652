#!/usr/bin/env bash
# Session 21, call 2 (one H200). bin = 6a901a2 (GAT rows longest first), prev = ec690a2.
# (1) gpu_check of bin; (2) ncu: SM active cycles and time of every gat_ kernel launch, GAT 2x64
# bf16 on the gat-sparse files, 2 epochs, prev then bin; (3) harness gat-sparse (ours and PyG,
# 3 reps); (4) harness headline, gat-2x64 only (3 reps).
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
R=$OUT/s21c2; mkdir -p $R; cat .dev/GIT_HEAD .dev/prev/GIT_HEAD | tee $R/heads.txt
for d in bin prev; do for f in .dev/$d/*.xz; do xz -dkf "$f"; chmod +x "${f%.xz}"; done; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/gpu.txt; cat $R/gpu.txt
timeout 170 .dev/bin/gpu_check --reddit-scale 0 --json $R/gpu_check.json > $R/gpu_check.log 2>&1
echo "== gpu_check rc $? t=$(el); gat_aggregate ok: $(grep gat_aggregate $R/gpu_check.log | grep -c ok)"; grep MISS $R/gpu_check.log | head -5; tail -1 $R/gpu_check.log
timeout 120 python3 bench/run.py gat-sparse --graphs-only --out /tmp/rec0 > $R/graph-hd50.log 2>&1; echo "graph hd50 rc $? t=$(el)"
A="--data-dir /tmp/gnn-bench/same-graph-hd50 --model gat --layers 2 --hidden 64 --heads 8 --no-input-cache --no-baseline --precision bf16 --seed 0 --epochs 2 --no-profile"
for side in prev bin; do
  timeout 120 ncu --clock-control none --csv --kernel-name regex:gat_ --metrics gpu__time_duration.sum,sm__cycles_active.avg,sm__cycles_elapsed.avg,sm__cycles_active.max,smsp__warps_active.avg.pct_of_peak_sustained_active .dev/$side/train_reddit $A --json $R/ncu-$side.json --save /tmp/w2 > $R/ncu-$side-gat-bf16.csv 2> $R/ncu-$side.err
  echo "ncu $side rc $? t=$(el)"; xz -9 $R/ncu-$side-gat-bf16.csv
done
timeout 200 python3 bench/run.py gat-sparse --reps 3 --out /tmp/s21g --pack $R/gat-sparse.tar.gz > $R/harness-gat-sparse.log 2>&1
echo "harness gat-sparse rc $? t=$(el)"; tail -8 $R/harness-gat-sparse.log
[ $(el) -lt 330 ] && { timeout 250 python3 bench/run.py headline --only gat-2x64 --reps 3 --out /tmp/s21h --pack $R/headline.tar.gz > $R/harness-headline.log 2>&1
echo "harness headline rc $? t=$(el)"; tail -8 $R/harness-headline.log; }
cd $OUT && tar czf s21c2.tar.gz s21c2 && rm -rf s21c2; echo total $(el) s
