#!/usr/bin/env bash
# Session 14, call 2 on nvidia-h100-x4 (~7-8 min), only if main holds the labelled-row output
# aggregation (branch labelled-aggregation merged): it checked on the CPU only. One tarball back.
#  1. papers scale 0.01 (1.1 M nodes, 1.4 % labelled), GCN 3x128 bf16 on 4 ranks, default
#     (selected aggregation) against --whole-output-aggregation (same rows, the old path) and
#     --all-output-rows: the loss curves must agree to bf16 noise; the log's output-layer lines
#     say which path ran. While the host writes the full-size graph.
#     Prediction (session 13, before any run): full-size GCN 3x128 2.05 s -> 1.1-1.2 s.
#     Then papers scale 0.1 GCN 3x128 on 4 ranks under --spmm-kernel auto / ge / group / hp,
#     and under NCCL_MAX_P2P_NCHANNELS=16 and 32 (default 4: the ring's shifts, one peer at a
#     time, moved 85 GB per rank at ~130 GB/s at full size).
#  2. dist-papers GCN 3x128 and 3x64 at full size: the epoch against 2,046.7 / 1,023.8 ms.
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
cat .dev/GIT_HEAD
python3 -c "import sys; sys.path.insert(0,'bench'); import run; [print(run.find_binary('.dev/bin', n)) for n in ['train_dist']]"
B=$PWD/.dev/bin; W=/tmp/s14b; rm -rf $W; mkdir -p $W
( $B/train_dist --dataset papers100m --scale 0.01 --seed 0 --stats-only --ranks 1 --partition range --save-graph /tmp/p001 > $W/p001-graph.log 2>&1
  for v in sel whole all; do f=""; [ $v = whole ] && f=--whole-output-aggregation; [ $v = all ] && f=--all-output-rows
    timeout 150 taskset -c 0-7 $B/train_dist --data-dir /tmp/p001 --model gcn --layers 3 --hidden 128 --precision bf16 --epochs 30 --eval-every 10 --ranks 4 --partition range --nccl --seed 0 --deterministic $f --json $W/p001-$v.json > $W/p001-$v.log 2>&1; echo "p001-$v rc=$? t=$(el)"; done
  # Which SpMM kernel the papers-shaped slices want (the dispatcher picked hp at full size,
  # where rows were gathered at ~720 GB/s; GE ran 2x HP on Reddit): scale 0.1, 4 ranks.
  $B/train_dist --dataset papers100m --scale 0.1 --seed 0 --stats-only --ranks 1 --partition range --save-graph /tmp/p01 > $W/p01-graph.log 2>&1
  for k in auto ge group hp; do
    timeout 120 taskset -c 0-7 $B/train_dist --data-dir /tmp/p01 --model gcn --layers 3 --hidden 128 --precision bf16 --epochs 10 --ranks 4 --partition range --nccl --seed 0 --spmm-kernel $k --json $W/p01-$k.json > $W/p01-$k.log 2>&1; echo "p01-$k rc=$? t=$(el) $(grep -E '^ +0 +[0-9]+ +[0-9]+ ' $W/p01-$k.log | awk '{print $4" ms, comm "$5}') $(grep 'kernels used' $W/p01-$k.log)"; done
  # The ring's shifts are NCCL point-to-point at NCCL_MAX_P2P_NCHANNELS=4 (launch.rs, from a
  # 2-GPU Reddit measurement): at papers sizes (GB blocks) does it cap the exchange?
  for c in 16 32; do
    NCCL_MAX_P2P_NCHANNELS=$c timeout 120 taskset -c 0-7 $B/train_dist --data-dir /tmp/p01 --model gcn --layers 3 --hidden 128 --precision bf16 --epochs 10 --ranks 4 --partition range --nccl --seed 0 --json $W/p01-ch$c.json > $W/p01-ch$c.log 2>&1; echo "p01-ch$c rc=$? t=$(el) $(grep -E '^ +0 +[0-9]+ +[0-9]+ ' $W/p01-ch$c.log | awk '{print $4" ms, comm "$5}')"; done ) &
APID=$!
timeout 260 taskset -c 8-63 python3 bench/run.py dist-papers --graphs-only --only gcn-3x128-full --machine h100x4 --out $W/rec0 > $W/graph.log 2>&1; echo "graph t=$(el)"
wait $APID
python3 - <<PY
import json
for v in ["sel", "whole", "all"]:
    d = json.load(open("$W/p001-%s.json" % v)); print(v, [round(x, 4) for x in d["loss_curve"][::5]], "test", d.get("test_acc"))
PY
timeout 200 python3 bench/run.py dist-papers --only gcn-3x128-full --machine h100x4 --out $W/rec --pack $W/papers-gcn128.tar.gz 2>&1 | tail -5; echo "gcn128 t=$(el)"
timeout $(( 560 - $(el) )) python3 bench/run.py dist-papers --only gcn-3x64-full --machine h100x4 --out $W/rec2 --pack $W/papers-gcn64.tar.gz 2>&1 | tail -5; echo "gcn64 t=$(el)"
for f in $W/rec/dist-papers/*/*.log $W/rec2/dist-papers/*/*.log; do grep -A5 "^rank  rows" $f; grep -E "aggregation \(|communication|output layer" $f; done
cd $W && rm -rf rec rec0 rec2 && tar czf $OUT/s14-2.tar.gz . && ls -la $OUT; echo total $(el) s
