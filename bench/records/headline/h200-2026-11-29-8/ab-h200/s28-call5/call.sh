#!/usr/bin/env bash
# Session 28, call 5 (one H200) at 6491ab7: the full gpu_check, with the new
# masked_cross_entropy_grad cases (loss gradient 3; f32, bf16, f16; 41 and 129 classes).
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
R=$OUT/s28c5; mkdir -p $R; cat .dev/GIT_HEAD | tee $R/heads.txt; cp .dev/s28-call5.sh $R/call.sh
xz -dkf .dev/bin/gpu_check.xz; chmod +x .dev/bin/gpu_check
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/gpu.txt
timeout 220 .dev/bin/gpu_check --reddit-scale 0 --json $R/gpu_check.json > $R/gpu_check.log 2>&1
echo "== gpu_check rc $? t=$(el)"; grep -E "xent grad" $R/gpu_check.log; grep -E "MISS|rror" $R/gpu_check.log | head -8; tail -1 $R/gpu_check.log; rm -f $R/gpu_check.json; xz -9 $R/gpu_check.log
cd $OUT && tar czf s28c5.tar.gz s28c5 && rm -rf s28c5; echo total $(el) s
