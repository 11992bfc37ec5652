#!/usr/bin/env bash
# Session 28, call 1 (2 H200s, nvidia-h200-x2) at bea40db: (1) gnn-train GPU tests; (2) the full
# gpu_check (c53a25b's new cases and bea40db's kernels had not run on a GPU); (3) the
# two-process fault test of train_dist (bench/fault_test.py: TCP rendezvous, rank 1 SIGKILLed
# after epoch 23, survivors' exit, resume against the uninterrupted run).
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
R=$OUT/s28c1; mkdir -p $R; cat .dev/GIT_HEAD | tee $R/heads.txt
for f in .dev/bin/*.xz .dev/test/*.xz; do xz -dkf "$f"; chmod +x "${f%.xz}"; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/gpu.txt; cat $R/gpu.txt; nvidia-smi topo -m >> $R/gpu.txt
mkdir -p /work/main/crates/train && ln -sfn $PWD/data /work/main/data
timeout 150 .dev/test/gnn_train_tests --test-threads 1 gpu > $R/gpu-tests.log 2>&1; echo "== tests rc $? t=$(el)"; grep -E "^test |result" $R/gpu-tests.log
timeout 200 .dev/bin/gpu_check --reddit-scale 0 --json $R/gpu_check.json > $R/gpu_check.log 2>&1
echo "== gpu_check rc $? t=$(el)"; grep -iE "column_sum|cast_pad" $R/gpu_check.log | awk '{print $NF}' | sort | uniq -c; grep -E "MISS|rror" $R/gpu_check.log | head -8; tail -1 $R/gpu_check.log; rm -f $R/gpu_check.json; xz -9 $R/gpu_check.log
cd $OUT && tar czf s28c1.tar.gz s28c1 && rm -rf s28c1; cd - > /dev/null
timeout $(( 570 - $(el) )) python3 bench/fault_test.py --out /tmp/rec --machine h200x2 --pack $OUT/faults.tar.gz > $OUT/fault.log 2>&1
echo "== fault rc $? t=$(el)"; tail -30 $OUT/fault.log
