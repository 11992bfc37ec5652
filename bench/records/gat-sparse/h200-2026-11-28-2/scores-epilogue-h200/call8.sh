#!/usr/bin/env bash
# Session 19, call 8 (one H200): the gat-sparse harness (ours and PyG, 3 reps) at b54faaa's
# code (.dev/bin, built from its tree before the commit: 0df6298+dirty).
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
R=$OUT/s19c8; mkdir -p $R; cat .dev/GIT_HEAD | tee $R/heads.txt
for f in .dev/bin/train_reddit.xz; do xz -dkf "$f"; chmod +x "${f%.xz}"; done
timeout 200 python3 bench/run.py gat-sparse --reps 3 --out /tmp/s19g8 --pack $R/gat-sparse.tar.gz 2>&1 | tail -9
echo "gat-sparse t=$(el)"
cd $OUT && tar czf s19c8.tar.gz s19c8 && rm -rf s19c8; echo total $(el) s
