#!/usr/bin/env bash
# Session 17, call 3 (one H100): (1) gpu_check of the GAT forward with the lazy rescale
# (.dev/bin, 267b024+dirty) and the D-carrying bound; GAT 2x64 base (267b024, .dev/base) vs
# bin, bf16 and f32, alternating. (2) Where GraphSAGE's dense backward goes: train_dist
# --ranks 1 (the lean layers) SAGE 3x256 bf16 on the generated Reddit-shaped graph, the
# phase breakdown, then every kernel's duration under ncu for 2 epochs.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib
R=$OUT/s17c3; mkdir -p $R
for d in bin base; do for f in .dev/$d/*.xz; do xz -dkf "$f"; chmod +x "${f%.xz}"; done; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/gpu.txt; cat $R/gpu.txt
s=$(date +%s)
timeout 200 .dev/bin/gpu_check --reddit-scale 0 --json $R/gpu_check.json > $R/gpu_check.log 2>&1
echo "== gpu_check rc $? $(( $(date +%s) - s )) s; gat ok: $(grep gat_aggregate $R/gpu_check.log | grep -c ok)"
grep -E "MISS" $R/gpu_check.log | head -8; tail -1 $R/gpu_check.log
n=0
for prec in bf16 f32; do
  for side in base bin base bin; do
    n=$((n+1))
    timeout 200 .dev/$side/train_reddit --model gat --layers 2 --hidden 64 --heads 8 --precision $prec \
      --epochs 20 --seed 0 --no-baseline --json $R/gat-$side-$prec-run$n.json --save /tmp/w-$side > $R/gat-$side-$prec-run$n.log 2>&1
    echo "== $side $prec rc $?"; grep -E "median epoch|aggregation" $R/gat-$side-$prec-run$n.log | head -2
  done
done
D="--dataset reddit --scale 1 --model sage --layers 3 --hidden 256 --precision bf16 --ranks 1 --partition range --seed 0"
timeout 120 .dev/bin/train_dist $D --epochs 10 --json $R/sage.json > $R/sage.log 2>&1; echo "sage rc $?"
grep -A10 "^phase" $R/sage.log
timeout 200 ncu --clock-control none --csv --metrics gpu__time_duration.sum .dev/bin/train_dist $D --epochs 2 --json $R/sage-ncu.json > $R/sage-ncu.csv 2> $R/sage-ncu.err
echo "ncu rc $? lines $(wc -l < $R/sage-ncu.csv)"; tail -3 $R/sage-ncu.err
cd $OUT && tar czf s17c3.tar.gz s17c3 && rm -rf s17c3
