#!/usr/bin/env bash
# Session 28, call 4 (one H200): the headline suite's GCN 2x128 and GraphSAGE 2x128 cases with
# their peers (PyG, tgcn) in the same call, at the committed HEAD's binaries (GIT_HEAD).
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
cat .dev/GIT_HEAD
timeout $(( 560 - $(el) )) python3 bench/run.py headline --only gcn-2x128,sage-2x128 --reps ${REPS:-3} --out /tmp/s28h --pack $OUT/headline.tar.gz > $OUT/harness.log 2>&1
echo "harness rc $? t=$(el)"; tail -25 $OUT/harness.log
