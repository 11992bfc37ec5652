#!/usr/bin/env bash
# Session 14, call 4: is the 32-channel GraphSAGE 3x64 at full papers size (841.6 ms against
# 792.9 at 4 channels in session 13) a real loss? 4 vs 32 channels back to back on the graph
# call 3 left in /tmp/gnn-bench. Then Reddit size (scale 1) GCN/SAGE 3x256 on 4 ranks,
# 4 vs 32 channels (issue 39's 2.5x: GCN 2.19x, SAGE 2.25x). One tarball back.
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
cat .dev/GIT_HEAD; ls /tmp/gnn-bench/dist-papers-graphs/ 2>&1
W=/tmp/s14d; rm -rf $W; mkdir -p $W
python3 -c "import sys; sys.path.insert(0,'bench'); import run; [print(run.find_binary('.dev/bin', n)) for n in ['train_dist']]"
B=$PWD/.dev/bin
[ -n "$SKIP_S1" ] || timeout 100 python3 bench/run.py dist-scaling --graphs-only --only gcn-3x256-s1 --machine h100x4 --out $W/rec0 > $W/graph1.log 2>&1; echo "graph1 t=$(el)"
G1=$(ls -d /tmp/gnn-bench/dist-scaling-graphs/*scale-1-* | head -1); echo $G1
d() { n=$1; c=$2; shift 2; NCCL_MAX_P2P_NCHANNELS=$c timeout 100 $B/train_dist --data-dir $G1 --precision bf16 --epochs 20 --partition range --nccl --seed 0 --ranks 4 --layers 3 --hidden 256 "$@" --json $W/$n-ch$c.json > $W/$n-ch$c.log 2>&1; echo "$n ch$c rc=$? t=$(el) $(grep -E '^ +0 +[0-9]+ +[0-9]+ ' $W/$n-ch$c.log | awk '{print $4" ms, comm "$5}')"; }
[ -n "$SKIP_S1" ] || for c in 4 32 4 32; do d gcn-s1 $c --model gcn; d sage-s1 $c --model sage; done
GP=/tmp/gnn-bench/dist-papers-graphs/dataset-papers100m-scale-1-seed-0; echo "papers graph: $GP"
for c in 4 32; do
  left=$(( 570 - $(el) )); [ $left -lt 90 ] && break
  NCCL_MAX_P2P_NCHANNELS=$c timeout $left $B/train_dist --data-dir $GP --model sage --layers 3 --hidden 64 --precision bf16 --epochs 10 --partition range --nccl --seed 0 --ranks 4 --json $W/papers-sage64-ch$c.json > $W/papers-sage64-ch$c.log 2>&1
  echo "papers sage64 ch$c rc=$? t=$(el)"; grep -A5 "^rank  rows" $W/papers-sage64-ch$c.log; grep -E "aggregation \(|communication" $W/papers-sage64-ch$c.log
done
cd $W && rm -rf rec0 && tar czf $OUT/s14-4${SKIP_S1:+b}.tar.gz . && ls -la $OUT; echo total $(el) s
