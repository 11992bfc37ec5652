#!/usr/bin/env bash
# Session 24, call 3 (one H200). bin = calls 1-2's (f41d32d + the gated Adam step; GIT_HEAD
# says). The harness headline, GraphSAGE-mean 2x128 (input cache + train rows) and GAT 2x64
# (8 heads), ours and PyG on the same files, 3 repetitions.
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
R=$OUT/s24c3; mkdir -p $R; cat .dev/GIT_HEAD | tee $R/heads.txt
for f in .dev/bin/*.xz; do xz -dkf "$f"; chmod +x "${f%.xz}"; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/gpu.txt; cat $R/gpu.txt
timeout 570 python3 bench/run.py headline --only sage-2x128,gat-2x64 --reps 3 --out /tmp/s24h3 --pack $R/headline.tar.gz > $R/harness-headline.log 2>&1
echo "harness rc $? t=$(el)"; grep -v "^\[" $R/harness-headline.log | tail -16
cd $OUT && tar czf s24c3.tar.gz s24c3 && rm -rf s24c3; echo total $(el) s
