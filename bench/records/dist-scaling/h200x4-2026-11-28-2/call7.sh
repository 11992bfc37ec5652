#!/usr/bin/env bash
# Session 21, call 7 (nvidia-h200-x4): bin = e8bcd13 (d59605e plus the whole gathered
# operand on 3+ ranks where it is small, WHOLE_GATHER_BYTES). The harness's dist-scaling
# scale-1 cases (GCN 3x256, GraphSAGE 3x256, GAT 2x64; 1/2/4 GPUs, bf16, range, NCCL); then
# GCN 4 ranks, the new default (whole) against the slicing asked for, alternating.
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib NCCL_NVLS_ENABLE=0
T0=$(date +%s); el() { echo $(( $(date +%s)-T0 )); }
R=$OUT/s21c7; mkdir -p $R; cat .dev/GIT_HEAD | tee $R/heads.txt
for f in .dev/bin/train_dist.xz; do xz -dkf "$f"; chmod +x "${f%.xz}"; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/gpu.txt; cat $R/gpu.txt
timeout 250 python3 bench/run.py dist-scaling --only '*-s1' --out /tmp/s21e --pack $R/dist-s1.tar.gz > $R/harness.log 2>&1
echo "harness rc $? t=$(el)"; grep -v "^\[" $R/harness.log | tail -14
G=/tmp/gnn-bench/dist-scaling-graphs/dataset-reddit-scale-1-seed-0
for rep in 1 2; do for s in default sliced; do
  X=""; [ $s = sliced ] && X="--gather-slice-rows 18446744073709551615"
  [ $(el) -gt 300 ] && break 2
  timeout 60 .dev/bin/train_dist --data-dir $G --model gcn --layers 3 --hidden 256 --precision bf16 --epochs 20 --ranks 4 --partition range --nccl --seed 0 $X --json $R/gcn-p4-$s-r$rep.json > $R/gcn-p4-$s-r$rep.log 2>&1
  echo "== gcn p4 $s r$rep rc $? t=$(el) $(grep -E '^epoch total|^aggregation|^communication' $R/gcn-p4-$s-r$rep.log | head -3 | tr -s ' ' | tr '\n' '|')"
done; done
cd $OUT && tar czf s21c7.tar.gz s21c7 && rm -rf s21c7; echo total $(el) s
