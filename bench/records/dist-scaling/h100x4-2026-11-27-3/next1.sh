#!/usr/bin/env bash
# Session 14, call 1 on nvidia-h100-x4 (~6-8 min). Everything it keeps goes into ONE tarball,
# $OUT/s14-1.tar.gz: the device returns at most 8 files per call (session 13 lost packs).
#  1. dist-scaling GAT 2x64 at Reddit size on 1/2/4 GPUs with the f32 score GEMM (cb7ef52):
#     the record's GAT row (h100x4-2026-11-27) predates it.
#  2. GraphSAGE 3x256 at scale 4 on 4 GPUs: default (mean unsliced, exchange exposed 4.6 ms)
#     against --gather-slice-rows 240000 (one slice per rank block: the own block's SpMM
#     overlaps the exchange, as GCN's does): does it reach issue 39's 3.6x (59.4 -> <= 57.9 ms)?
#  3. GAT 2x64 at scale 4: P=4 (and P=2: expected to be refused by the memory estimate).
#  4. bench_spmm on GPU 0, Reddit-shaped scale 1 and scale 4 (table 60 MB vs 238 MB at K=128
#     bf16): the gather rate when the rows no longer sit in L2 (papers100M's aggregation ran at
#     ~720 GB/s of gathered rows against 7.3 TB/s at scale 1).
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
cat .dev/GIT_HEAD; nvidia-smi --query-gpu=index,memory.used --format=csv,noheader
python3 -c "import sys; sys.path.insert(0,'bench'); import run; [print(run.find_binary('.dev/bin', n)) for n in ['train_dist','train_reddit','bench_spmm']]"
B=$PWD/.dev/bin; W=/tmp/s14; rm -rf $W; mkdir -p $W
timeout 240 python3 bench/run.py dist-scaling --only gat-2x64-s1 --machine h100x4 --out $W/rec --pack $W/gat-s1.tar.gz 2>&1 | tail -8; echo "1 t=$(el)"
timeout 120 python3 bench/run.py dist-scaling --graphs-only --only sage-3x256-s4 --machine h100x4 --out $W/rec0 > $W/graph4.log 2>&1; echo "graph4 t=$(el)"
G4=$(ls -d /tmp/gnn-bench/dist-scaling-graphs/*scale-4-* | head -1)
d() { n=$1; shift; timeout 120 $B/train_dist --data-dir $G4 --precision bf16 --epochs 20 --partition range --nccl --seed 0 "$@" --json $W/$n.json > $W/$n.log 2>&1; echo "$n rc=$? t=$(el) $(grep -E '^ +0 +[0-9]+ +[0-9]+ ' $W/$n.log | awk '{print $4" ms, comm "$5}')"; }
d sage-s4-p4-default --model sage --layers 3 --hidden 256 --ranks 4
d sage-s4-p4-sliced --model sage --layers 3 --hidden 256 --ranks 4 --gather-slice-rows 240000
d sage-s4-p4-default-b --model sage --layers 3 --hidden 256 --ranks 4
d sage-s4-p4-sliced-b --model sage --layers 3 --hidden 256 --ranks 4 --gather-slice-rows 240000
d gat-s4-p4 --model gat --layers 2 --hidden 64 --heads 8 --ranks 4
CUDA_VISIBLE_DEVICES=0,1 d gat-s4-p2 --model gat --layers 2 --hidden 64 --heads 8 --ranks 2
for s in 1 4; do CUDA_VISIBLE_DEVICES=0 timeout 150 $B/bench_spmm --scale $s --k 64,128 --reps 5 --json $W/spmm-s$s.json > $W/spmm-s$s.log 2>&1; echo "spmm s$s rc=$? t=$(el)"; tail -12 $W/spmm-s$s.log; done
cd $W && rm -rf rec rec0 && tar czf $OUT/s14-1.tar.gz . && ls -la $OUT; echo total $(el) s
