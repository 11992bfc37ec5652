#!/usr/bin/env bash
# Session 21, call 6 (nvidia-h200-x4): GCN 3x256 bf16 at Reddit size, the sliced all-gather
# aggregation (default: ring of per-rank blocks, each block's SpMM + cast + add) against the
# whole one (--gather-slice-rows 0: all-gather, then one SpMM) and the sliced one with NCCL's
# point-to-point channels capped at 4 (train_dist's default is 32), 4 ranks, alternating.
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
R=$OUT/s21c6; mkdir -p $R; cat .dev/GIT_HEAD | tee $R/heads.txt
for f in .dev/bin/train_dist.xz; do xz -dkf "$f"; chmod +x "${f%.xz}"; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/gpu.txt; cat $R/gpu.txt
G=/tmp/gnn-bench/dist-scaling-graphs/dataset-reddit-scale-1-seed-0
timeout 120 .dev/bin/train_dist --dataset reddit --scale 1 --seed 0 --stats-only --ranks 1 --partition range --save-graph $G > $R/graph.log 2>&1; echo "graph rc $? t=$(el)"
for rep in 1 2 3; do for s in sliced sliced4 whole; do
  X=""; E=""; [ $s = whole ] && X="--gather-slice-rows 0"; [ $s = sliced4 ] && E="NCCL_MAX_P2P_NCHANNELS=4"
  env $E timeout 60 .dev/bin/train_dist --data-dir $G --model gcn --layers 3 --hidden 256 --precision bf16 --epochs 20 --ranks 4 --partition range --nccl --seed 0 $X --json $R/gcn-p4-$s-r$rep.json > $R/gcn-p4-$s-r$rep.log 2>&1
  echo "== gcn p4 $s r$rep rc $? t=$(el) $(grep -E '^epoch total|^aggregation|^communication' $R/gcn-p4-$s-r$rep.log | head -3 | tr -s ' ' | tr '\n' '|')"
done; done
cd $OUT && tar czf s21c6.tar.gz s21c6 && rm -rf s21c6; echo total $(el) s
