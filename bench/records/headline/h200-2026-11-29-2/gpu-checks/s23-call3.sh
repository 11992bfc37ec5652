#!/usr/bin/env bash
# Session 23, call 3 (one H200). bin = call 2's (the train-rows output layer for GCN and
# GraphSAGE, uncommitted: GIT_HEAD says). The harness headline, GCN 2x128 (three variants:
# input cache + train rows, train rows alone, neither) and GraphSAGE-mean 2x128 (input cache +
# train rows), ours and PyG / tgcn on the same files, 3 repetitions.
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
R=$OUT/s23c3; mkdir -p $R; cat .dev/GIT_HEAD | tee $R/heads.txt
for f in .dev/bin/*.xz; do xz -dkf "$f"; chmod +x "${f%.xz}"; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/gpu.txt; cat $R/gpu.txt
timeout 560 python3 bench/run.py headline --only gcn-2x128,sage-2x128 --reps 3 --out /tmp/s23h --pack $R/headline.tar.gz > $R/harness-headline.log 2>&1
echo "harness rc $? t=$(el)"; grep -v "^\[" $R/harness-headline.log | tail -20
cd $OUT && tar czf s23c3.tar.gz s23c3 && rm -rf s23c3; echo total $(el) s
