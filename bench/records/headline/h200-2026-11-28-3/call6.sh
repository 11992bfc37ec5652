#!/usr/bin/env bash
# Session 20, call 6 (one H200): the headline harness's full-size GAT rows (Reddit-shaped
# same-graph files, 109.8 M non-zeros) at the final tree of call 5 (.dev/bin), ours and PyG.
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
R=$OUT/s20c6; mkdir -p $R; cat .dev/GIT_HEAD | tee $R/heads.txt
for f in .dev/bin/train_reddit.xz; do xz -dkf "$f"; chmod +x "${f%.xz}"; done
timeout 420 python3 bench/run.py headline --only gat-2x64 --reps 3 --out /tmp/s20h --pack $R/headline-gat.tar.gz > $R/harness.log 2>&1
echo "harness rc $? t=$(el)"; tail -12 $R/harness.log
cd $OUT && tar czf s20c6.tar.gz s20c6 && rm -rf s20c6; echo total $(el) s
