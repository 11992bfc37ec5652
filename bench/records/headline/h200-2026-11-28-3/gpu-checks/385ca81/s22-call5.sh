#!/usr/bin/env bash
# Session 22, call 5 (one H200). bin = 385ca81 (4ff7254: review fixes to the scaled GCN sum; 385ca81: the dist memory estimate at GPU widths).
# gpu_check, then gnn-train's GPU tests (one_gpu).
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
R=$OUT/s22c5; mkdir -p $R; cat .dev/GIT_HEAD | tee $R/heads.txt
for f in .dev/bin/*.xz .dev/test/*.xz; do xz -dkf "$f"; chmod +x "${f%.xz}"; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/gpu.txt; cat $R/gpu.txt
timeout 115 .dev/bin/gpu_check --reddit-scale 0 --json $R/gpu_check.json > $R/gpu_check.log 2>&1
echo "== gpu_check rc $? t=$(el)"; grep MISS $R/gpu_check.log | head -5; echo "scale_rows $(grep -c ' scale_rows' $R/gpu_check.log) rescale_rows $(grep -c 'rescale_rows' $R/gpu_check.log)"; tail -1 $R/gpu_check.log
mkdir -p /work/main/crates/train && ln -sfn $PWD/data /work/main/data
timeout 50 .dev/test/gnn_train_tests --test-threads 1 one_gpu > $R/gpu-tests.log 2>&1; echo "== tests rc $? t=$(el)"; grep -E "^test |result" $R/gpu-tests.log
rm -f $R/gpu_check.json; xz -9 $R/gpu_check.log
cd $OUT && tar czf s22c5.tar.gz s22c5 && rm -rf s22c5; echo total $(el) s
