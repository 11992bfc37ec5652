#!/usr/bin/env bash
# Session 26, call 3 (one H200): the headline suite's GCN 2x128 and GraphSAGE 2x128 cases at
# 8c24880 (the binaries of call 2, built from 8c24880's tree before its commit).
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0
T0=$(date +%s)
mkdir -p $OUT
python3 bench/run.py headline --only gcn-2x128,sage-2x128 --reps 3 --out /tmp/s26h --pack $OUT/headline.tar.gz > $OUT/harness.log 2>&1
echo "harness rc $? t=$(( $(date +%s)-T0 ))"; tail -30 $OUT/harness.log
