#!/usr/bin/env bash
# Session 21, call 3 (nvidia-h200-x4). bin = d59605e (train_dist ranks on aligned widths; GAT
# rows longest first), logical = the same with Widths::Logical (train_dist as before d59605e).
# (1) harness dist-scaling, the scale-1 cases (GCN 3x256, GraphSAGE 3x256, GAT 2x64; 1/2/4
# GPUs, bf16, range, NCCL); (2) A/B on the harness's graph: GCN and GraphSAGE 3x256 bf16 at 1
# and 4 ranks, logical / bin alternating.
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
R=$OUT/s21c3; mkdir -p $R; cat .dev/GIT_HEAD .dev/logical/GIT_HEAD | tee $R/heads.txt
for d in bin logical; do for f in .dev/$d/*.xz; do xz -dkf "$f"; chmod +x "${f%.xz}"; done; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/gpu.txt; cat $R/gpu.txt; nvidia-smi topo -m > $R/topo.txt
timeout 330 python3 bench/run.py dist-scaling --only '*-s1' --out /tmp/s21d --pack $R/dist-s1.tar.gz > $R/harness.log 2>&1
echo "harness rc $? t=$(el)"; grep -v "^\[" $R/harness.log | tail -14
G=/tmp/gnn-bench/dist-scaling-graphs/dataset-reddit-scale-1-seed-0
for m in gcn sage; do for p in 1 4; do for side in logical bin; do
  [ $(el) -gt 540 ] && { echo "out of time at $m p$p $side"; break 3; }
  timeout 60 .dev/$side/train_dist --data-dir $G --model $m --layers 3 --hidden 256 --precision bf16 --epochs 20 --ranks $p --partition range --nccl --seed 0 --json $R/ab-$m-p$p-$side.json > $R/ab-$m-p$p-$side.log 2>&1
  echo "== $m p$p $side rc $? t=$(el) $(grep -E '^epoch total|test .* %' $R/ab-$m-p$p-$side.log | head -2 | tr '\n' ' ')"
done; done; done
cd $OUT && tar czf s21c3.tar.gz s21c3 && rm -rf s21c3; echo total $(el) s
