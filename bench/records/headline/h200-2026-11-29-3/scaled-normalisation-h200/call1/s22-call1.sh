#!/usr/bin/env bash
# Session 22, call 1 (one H200). bin = 8fa6e07. (1) gnn-train GPU tests (one_gpu), the re-run
# session 21 could not do; (2) gpu_check; (3) the headline same-graph files; (4) ncu of every
# kernel of GCN 2x128 bf16 (input cache) and GraphSAGE-mean 2x128 bf16, 3 epochs each;
# (5) the same runs timed with the phase breakdown, 30 epochs.
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
R=$OUT/s22c1; mkdir -p $R; cat .dev/GIT_HEAD | tee $R/heads.txt
for f in .dev/bin/*.xz .dev/test/*.xz; do xz -dkf "$f"; chmod +x "${f%.xz}"; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/gpu.txt; cat $R/gpu.txt
mkdir -p /work/main/crates/train && ln -sfn $PWD/data /work/main/data
timeout 120 .dev/test/gnn_train_tests --test-threads 1 one_gpu > $R/gpu-tests.log 2>&1; echo "== tests rc $? t=$(el)"; tail -4 $R/gpu-tests.log
timeout 170 .dev/bin/gpu_check --reddit-scale 0 --json $R/gpu_check.json > $R/gpu_check.log 2>&1
echo "== gpu_check rc $? t=$(el)"; grep MISS $R/gpu_check.log | head -5; tail -1 $R/gpu_check.log
timeout 60 python3 bench/run.py headline --graphs-only --out /tmp/rec0 > $R/graph.log 2>&1; echo "graph rc $? t=$(el)"; ls /tmp/gnn-bench/
G=/tmp/gnn-bench/same-graph
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,sm__cycles_active.avg,sm__cycles_elapsed.avg
for m in gcn sage; do
  A="--data-dir $G --model $m --layers 2 --hidden 128 --no-baseline --precision bf16 --seed 0"
  timeout 150 ncu --clock-control none --csv --metrics $M .dev/bin/train_reddit $A --epochs 3 --no-profile --json $R/ncu-$m.json --save /tmp/w2 > $R/ncu-$m.csv 2> $R/ncu-$m.err
  echo "ncu $m rc $? t=$(el)"; xz -9 $R/ncu-$m.csv
  timeout 60 .dev/bin/train_reddit $A --epochs 30 --json $R/prof-$m.json --save /tmp/w3 > $R/prof-$m.log 2>&1
  echo "prof $m rc $? t=$(el)"; grep -iE "median epoch|aggregation|gemm|elementwise|backward|other|loss" $R/prof-$m.log | grep -v "^  \[" | head -12
  timeout 60 .dev/bin/train_reddit $A --epochs 30 --no-profile --json $R/noprof-$m.json --save /tmp/w3 > $R/noprof-$m.log 2>&1
  echo "noprof $m rc $? t=$(el)"; grep "median epoch" $R/noprof-$m.log
done
cd $OUT && tar czf s22c1.tar.gz s22c1 && rm -rf s22c1; echo total $(el) s
