#!/usr/bin/env bash
# Session 14, call 6 (one H100): does a locality order pay where the gather table is far
# larger than L2? Papers100M-shaped graph at scale 0.1 (11.1 M nodes, 334 M non-zeros, random
# ids; a 2.8 GB bf16 table at width 128), GCN 3x128 bf16 on one GPU, 10 epochs, under
# --reorder none / rcm / degree / louvain. On the Reddit-shaped graph (table ~ L2) orders
# moved the epoch by <= 3 % (bench/records/reorder/h100-2026-11-27). At full papers size the
# aggregation gathered rows at ~620 GB/s. Prediction: rcm/louvain cut the aggregation 2x+.
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
cat .dev/GIT_HEAD; nvidia-smi --query-gpu=name,memory.used --format=csv,noheader
python3 -c "import sys; sys.path.insert(0,'bench'); import run; [print(run.find_binary('.dev/bin', n)) for n in ['train_dist','train_reddit']]"
B=$PWD/.dev/bin; W=/tmp/s14f; rm -rf $W; mkdir -p $W
$B/train_dist --dataset papers100m --scale 0.1 --seed 0 --stats-only --ranks 1 --partition range --save-graph /tmp/p01 > $W/p01-graph.log 2>&1; echo "graph rc=$? t=$(el)"
for r in none rcm degree louvain; do
  left=$(( 230 - $(el) )); [ $left -lt 20 ] && break
  timeout $left $B/train_reddit --data-dir /tmp/p01 --model gcn --layers 3 --hidden 128 --precision bf16 --epochs 10 --no-baseline --seed 0 --reorder $r --json $W/p01-$r.json > $W/p01-$r.log 2>&1
  echo "$r rc=$? t=$(el)"; grep -iE "reorder|renumber" $W/p01-$r.log | head -3; grep -E "aggregation \(|epoch total|median" $W/p01-$r.log | head -4
done
cd $W && tar czf $OUT/s14-6.tar.gz . && ls -la $OUT; echo total $(el) s
