#!/usr/bin/env bash
# Session 14, call 5: 32 P2P channels (calls 3-4: GCN papers 1058.5 -> 880.1 ms) on the
# strong-scaling cases of issue 39. First GraphSAGE 3x256 at scale 4 (3.6x goal; at 4 channels
# the sliced gather gave 58.59/58.93 ms against 208.61 on one GPU, 3.54x), P=1 in the same
# call; then the dist-scaling scale-1 records for GCN and GraphSAGE 3x256 (2.5x goal).
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export NCCL_MAX_P2P_NCHANNELS=32
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
cat .dev/GIT_HEAD
W=/tmp/s14e; rm -rf $W; mkdir -p $W
python3 -c "import sys; sys.path.insert(0,'bench'); import run; [print(run.find_binary('.dev/bin', n)) for n in ['train_dist']]"
B=$PWD/.dev/bin
timeout 120 python3 bench/run.py dist-scaling --graphs-only --only sage-3x256-s4 --machine h100x4 --out $W/rec0 > $W/graph4.log 2>&1; echo "graph4 t=$(el)"
G4=$(ls -d /tmp/gnn-bench/dist-scaling-graphs/*scale-4-* | head -1)
d() { n=$1; shift; timeout 120 $B/train_dist --data-dir $G4 --precision bf16 --epochs 20 --partition range --nccl --seed 0 --model sage --layers 3 --hidden 256 "$@" --json $W/$n.json > $W/$n.log 2>&1; echo "$n rc=$? t=$(el) $(grep -E '^ +0 +[0-9]+ +[0-9]+ ' $W/$n.log | awk '{print $4" ms, comm "$5}')"; }
CUDA_VISIBLE_DEVICES=0 d sage-s4-p1 --ranks 1
d sage-s4-p4-sliced --ranks 4 --gather-slice-rows 240000
d sage-s4-p4-default --ranks 4
d sage-s4-p4-sliced-b --ranks 4 --gather-slice-rows 240000
d sage-s4-p4-default-b --ranks 4
for c in gcn-3x256-s1 sage-3x256-s1; do
  left=$(( 470 - $(el) )); [ $left -lt 60 ] && break
  timeout $left python3 bench/run.py dist-scaling --only $c --machine h100x4 --out $W/rec-$c --pack $W/scaling-$c-ch32.tar.gz 2>&1 | tail -6; echo "$c t=$(el)"
done
cd $W && rm -rf rec0 rec-* && tar czf $OUT/s14-5.tar.gz . && ls -la $OUT; echo total $(el) s
