#!/usr/bin/env bash
# Session 14, call 3 (nvidia-h100-x4): NCCL_MAX_P2P_NCHANNELS=32 at full papers size.
# Call 2 at papers scale 0.1 (GCN 3x128, 4 ranks): 4 channels 94.65 ms (comm 18.6),
# 16 86.05 (11.5), 32 85.82 (8.1). Full size at 4 channels: GCN 3x128 1058.5 ms (exposed
# comm 288.6), GCN 3x64 498.1. Prediction: 3x128 below 1.0 s. One tarball back.
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
cat .dev/GIT_HEAD
python3 -c "import sys; sys.path.insert(0,'bench'); import run; [print(run.find_binary('.dev/bin', n)) for n in ['train_dist']]"
W=/tmp/s14c; rm -rf $W; mkdir -p $W
timeout 200 python3 bench/run.py dist-papers --graphs-only --only gcn-3x128-full --machine h100x4 --out $W/rec0 > $W/graph.log 2>&1; echo "graph t=$(el)"
export NCCL_MAX_P2P_NCHANNELS=32
for c in gcn-3x128-full gcn-3x64-full sage-3x64-full; do
  left=$(( 575 - $(el) )); [ $left -lt 60 ] && break
  timeout $left python3 bench/run.py dist-papers --only $c --machine h100x4 --out $W/rec-$c --pack $W/papers-$c-ch32.tar.gz 2>&1 | tail -3; echo "$c t=$(el)"
  for f in $W/rec-$c/dist-papers/*/*.log; do grep -A5 "^rank  rows" $f; grep -E "aggregation \(|communication|NCCL_MAX" $f; done
done
cd $W && rm -rf rec0 rec-* && tar czf $OUT/s14-3.tar.gz . && ls -la $OUT; echo total $(el) s
