#!/usr/bin/env bash
# Session 17, call 2 (nvidia-h200-x4): GraphSAGE 3x128 bf16 on the full papers100M-shaped
# graph, 4 ranks, range partition (issue 39; estimated 84.4 GiB a rank before the labelled-row
# mean output, past an H100's 76.1 GiB budget). train_dist built at 267b024 (nccl,verify).
# Through the harness: the graph step (generate + write ~70 GB), then the case.
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
cat .dev/GIT_HEAD; nvidia-smi --query-gpu=name,memory.total --format=csv
W=/tmp/s17b; rm -rf $W; mkdir -p $W
timeout 260 python3 bench/run.py dist-papers --graphs-only --only sage-3x128-full --out $W/rec0 > $W/graph.log 2>&1; echo "graph rc $? t=$(el)"; tail -3 $W/graph.log
left=$(( 585 - $(el) )); timeout $left python3 bench/run.py dist-papers --only sage-3x128-full --out $W/rec1 --pack $W/papers-sage128.tar.gz 2>&1 | tail -5; echo "sage t=$(el)"
for f in $W/rec1/dist-papers/*/*.log; do grep -E "estimat|output layer" $f | head -6; grep -A5 "^rank  rows" $f; grep -E "median epoch|aggregation \(|communication|peak" $f | head -8; done
cd $W && rm -rf rec0 rec1 && tar czf $OUT/s17-2.tar.gz . && ls -la $OUT; echo total $(el) s
