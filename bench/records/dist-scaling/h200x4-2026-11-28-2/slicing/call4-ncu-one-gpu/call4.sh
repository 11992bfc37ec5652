#!/usr/bin/env bash
# Session 21, call 4 (one H200): why GCN 3x256's aggregation scales 17.68 -> 6.05 ms on 4 ranks
# (not 4.42). train_dist d59605e without --nccl: 1 and 4 ranks on one GPU (in-process
# communicator, so ncu can serialise the kernels); ncu: time and SM active cycles of every
# kernel, 2 epochs, the generated Reddit-shaped graph at scale 1.
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
R=$OUT/s21c4; mkdir -p $R; cat .dev/GIT_HEAD | tee $R/heads.txt
for f in .dev/bin/train_dist.xz; do xz -dkf "$f"; chmod +x "${f%.xz}"; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/gpu.txt; cat $R/gpu.txt
G=/tmp/gnn-bench/dist-scaling-graphs/dataset-reddit-scale-1-seed-0
timeout 120 .dev/bin/train_dist --dataset reddit --scale 1 --seed 0 --stats-only --ranks 1 --partition range --save-graph $G > $R/graph.log 2>&1; echo "graph rc $? t=$(el)"
for p in 1 4; do
  timeout 250 ncu --clock-control none --csv --metrics gpu__time_duration.sum,sm__cycles_active.avg,sm__cycles_elapsed.avg .dev/bin/train_dist --data-dir $G --model gcn --layers 3 --hidden 256 --precision bf16 --epochs 2 --ranks $p --partition range --seed 0 --json $R/ncu-p$p.json > $R/ncu-gcn-p$p.csv 2> $R/ncu-p$p.err
  echo "ncu p$p rc $? t=$(el)"; tail -3 $R/ncu-p$p.err; xz -9 $R/ncu-gcn-p$p.csv
done
cd $OUT && tar czf s21c4.tar.gz s21c4 && rm -rf s21c4; echo total $(el) s
