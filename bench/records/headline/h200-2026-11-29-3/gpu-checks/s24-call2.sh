#!/usr/bin/env bash
# Session 24, call 2 (one H200). bin = call 1's (f41d32d + the gated Adam step; GIT_HEAD says).
# The harness headline, GCN 2x128 (three variants: input cache + train rows, train rows alone,
# neither) and GCN 4x256 bf16 (input cache + train rows), ours and PyG / tgcn on the same files,
# 3 repetitions.
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
R=$OUT/s24c2; mkdir -p $R; cat .dev/GIT_HEAD | tee $R/heads.txt
for f in .dev/bin/*.xz; do xz -dkf "$f"; chmod +x "${f%.xz}"; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/gpu.txt; cat $R/gpu.txt
timeout 570 python3 bench/run.py headline --only gcn-2x128,gcn-4x256 --reps 3 --out /tmp/s24h --pack $R/headline.tar.gz > $R/harness-headline.log 2>&1
echo "harness rc $? t=$(el)"; grep -v "^\[" $R/harness-headline.log | tail -24
cd $OUT && tar czf s24c2.tar.gz s24c2 && rm -rf s24c2; echo total $(el) s
