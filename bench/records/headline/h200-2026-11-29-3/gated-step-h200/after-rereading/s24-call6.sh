#!/usr/bin/env bash
# Session 24, call 6 (one H200). bin = 714a517 + the gate's kernel arguments as one struct and
# the step's single wait (uncommitted; GIT_HEAD says): gpu_check, gnn-train's GPU tests, and
# GCN 2x128 bf16 on the headline files (60 epochs, --no-profile) against 3.347-3.357 ms.
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
R=$OUT/s24c6; mkdir -p $R; cat .dev/GIT_HEAD | tee $R/heads.txt
for f in .dev/bin/*.xz .dev/test/*.xz; do xz -dkf "$f"; chmod +x "${f%.xz}"; done
mkdir -p /work/main/crates/train && ln -sfn $PWD/data /work/main/data
timeout 60 .dev/test/gnn_train_tests --test-threads 1 one_gpu > $R/gpu-tests.log 2>&1; echo "== tests rc $? t=$(el)"; grep -E "result" $R/gpu-tests.log
timeout 130 .dev/bin/gpu_check --reddit-scale 0 --json $R/gpu_check.json > $R/gpu_check.log 2>&1
echo "== gpu_check rc $? t=$(el)"; grep MISS $R/gpu_check.log | head -5; tail -1 $R/gpu_check.log; rm -f $R/gpu_check.json; xz -9 $R/gpu_check.log
timeout 40 python3 bench/run.py headline --graphs-only --out /tmp/rec0 > $R/graph.log 2>&1; echo "graph rc $? t=$(el)"
timeout 30 .dev/bin/train_reddit --data-dir /tmp/gnn-bench/same-graph --model gcn --layers 2 --hidden 128 --precision bf16 --epochs 60 --seed 0 --no-baseline --no-profile --json $R/gcn-bf16.json --save /tmp/w > $R/gcn-bf16.log 2>&1; echo "gcn rc $? t=$(el) $(grep 'median epoch' $R/gcn-bf16.log)"
cd $OUT && tar czf s24c6.tar.gz s24c6 && rm -rf s24c6; echo total $(el) s
