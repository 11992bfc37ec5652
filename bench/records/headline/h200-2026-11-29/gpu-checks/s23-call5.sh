#!/usr/bin/env bash
# Session 23, call 5 (one H200). bin = 9c21fc7's code (built from b077b3b's tree with that
# commit's changes, GIT_HEAD says b077b3b+dirty). The harness headline, GraphSAGE-mean 2x128
# rows (input cache + train rows), ours and PyG on the same files, 3 repetitions.
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
R=$OUT/s23c5; mkdir -p $R; cat .dev/GIT_HEAD | tee $R/heads.txt
xz -dkf .dev/bin/train_reddit.xz; chmod +x .dev/bin/train_reddit
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/gpu.txt; cat $R/gpu.txt
timeout 240 python3 bench/run.py headline --only sage-2x128 --reps 3 --out /tmp/s23h5 --pack $R/headline.tar.gz > $R/harness-headline.log 2>&1
echo "harness rc $? t=$(el)"; grep -v "^\[" $R/harness-headline.log | tail -8
cd $OUT && tar czf s23c5.tar.gz s23c5 && rm -rf s23c5; echo total $(el) s
