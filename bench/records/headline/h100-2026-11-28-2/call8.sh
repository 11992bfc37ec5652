#!/usr/bin/env bash
# Session 17, call 8 (one H100): the headline suite's GAT row at HEAD (lazy rescale, D in the
# rows pass): python3 bench/run.py headline --only gat-2x64 --reps 3 (same-graph files, 109.8 M
# non-zeros; PyG's GATConv runs out of memory there, as in session 16's record).
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
cat .dev/GIT_HEAD; W=/tmp/s17h; rm -rf $W; mkdir -p $W
timeout 250 python3 bench/run.py headline --only gat-2x64 --reps 3 --out $W/rec --pack $OUT/headline-gat.tar.gz 2>&1 | tail -8
