#!/usr/bin/env bash
# Session 24, call 5 (one H200). gpu_check at ba766fa + the review's fixes (uncommitted;
# GIT_HEAD says): the Adam check now also asserts that the closed gates left the GPU's
# parameter and moments bit for bit as the last open step did.
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
R=$OUT/s24c5; mkdir -p $R; cat .dev/GIT_HEAD | tee $R/heads.txt
xz -dkf .dev/bin/gpu_check.xz; chmod +x .dev/bin/gpu_check
timeout 200 .dev/bin/gpu_check --reddit-scale 0 --json $R/gpu_check.json > $R/gpu_check.log 2>&1
echo "== gpu_check rc $? t=$(el)"; grep -i "adam" $R/gpu_check.log; grep MISS $R/gpu_check.log | head -5; tail -1 $R/gpu_check.log; rm -f $R/gpu_check.json; xz -9 $R/gpu_check.log
cd $OUT && tar czf s24c5.tar.gz s24c5 && rm -rf s24c5; echo total $(el) s
