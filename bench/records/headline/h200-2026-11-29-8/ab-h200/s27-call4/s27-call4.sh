#!/usr/bin/env bash
# Session 27, call 4 (one H200) at fb60102 (f1528c7 plus records; the binaries built from its tree): (1) gnn-train
# GPU tests; (2) gpu_check (cast_pad's CPU body now candle's cast); (3) the headline suite's
# GCN 2x128 and GraphSAGE 2x128 cases, 2 repetitions (the device time left).
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
R=$OUT/s27c4; mkdir -p $R; cat .dev/GIT_HEAD | tee $R/heads.txt
for f in .dev/bin/*.xz .dev/test/*.xz; do xz -dkf "$f"; chmod +x "${f%.xz}"; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/gpu.txt; cat $R/gpu.txt
mkdir -p /work/main/crates/train && ln -sfn $PWD/data /work/main/data
timeout 90 .dev/test/gnn_train_tests --test-threads 1 one_gpu > $R/gpu-tests.log 2>&1; echo "== tests rc $? t=$(el)"; grep -E "^test |result" $R/gpu-tests.log
timeout 170 .dev/bin/gpu_check --reddit-scale 0 --json $R/gpu_check.json > $R/gpu_check.log 2>&1
echo "== gpu_check rc $? t=$(el)"; grep -iE "cast_pad" $R/gpu_check.log | awk '{print $NF}' | sort | uniq -c; grep -E "cast_pad 128x602" $R/gpu_check.log; grep -E "MISS|rror" $R/gpu_check.log | head -8; tail -1 $R/gpu_check.log; rm -f $R/gpu_check.json; xz -9 $R/gpu_check.log
cd $OUT && tar czf s27c4.tar.gz s27c4 && rm -rf s27c4; cd - > /dev/null
timeout $(( 540 - $(el) )) python3 bench/run.py headline --only gcn-2x128,sage-2x128 --reps 2 --out /tmp/s27h --pack $OUT/headline.tar.gz > $OUT/harness.log 2>&1
echo "harness rc $? t=$(el)"; tail -25 $OUT/harness.log
